"""Creation as PyTorch spells it: size=/device=/dtype= arguments, the legacy constructors, the
default dtype, and devices that JAX has (a device it lacks is a RuntimeError, never a CPU tensor)."""
import numpy as np
import pytest

import symgrad

CALLS = {
    "ones size=": lambda T: T.ones(size=(2, 3)),
    "zeros device=": lambda T: T.zeros(2, device="cpu"),
    "full device=": lambda T: T.full((2,), 1.5, device=T.device("cpu")),
    "linspace device=": lambda T: T.linspace(-1, 1, 5, device="cpu"),
    "arange device=": lambda T: T.arange(0, 3, device="cpu"),
    "eye dtype=": lambda T: T.eye(2, dtype=T.float64),
    "tensor device=": lambda T: T.tensor([1, 2], device="cpu"),
    "ones_like device=": lambda T: T.ones_like(T.zeros(2), device="cpu"),
    "Tensor(list)": lambda T: T.Tensor([1, 2]),
    "Tensor(sizes)": lambda T: T.Tensor(2, 3).zero_(),
    "Tensor()": lambda T: T.Tensor(),
    "FloatTensor": lambda T: T.FloatTensor([1, 2]),
    "LongTensor": lambda T: T.LongTensor([1.7, -2.5]),
    "DoubleTensor(size)": lambda T: T.DoubleTensor(3).zero_(),
    "BoolTensor": lambda T: T.BoolTensor([1, 0]),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_creation_arguments_and_legacy_constructors(torch, name):
    ours, theirs = CALLS[name](symgrad), CALLS[name](torch)
    assert str(ours.dtype) == str(theirs.dtype) and tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_legacy_types_are_types(torch):
    for T in (symgrad, torch):
        assert isinstance(T.ones(1), T.FloatTensor) and not isinstance(T.ones(1), T.LongTensor)
        assert isinstance(T.tensor([1]), T.LongTensor)


def test_type_names_and_converts_as_pytorch(torch):
    """``t.type()`` names the legacy type; ``t.type(x)`` converts to a dtype, a legacy type or its name
    (the quickstart tutorial's ``(pred.argmax(1) == y).type(torch.float).sum().item()``)."""
    seen = {}
    for T in (symgrad, torch):
        pred, y = T.tensor([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]]), T.tensor([1, 1, 1])
        correct = (pred.argmax(1) == y).type(T.float).sum().item()
        names = [T.ones(1, dtype=d).type() for d in (T.bool, T.int32, T.int64, T.float16, T.float32, T.float64)]
        converted = [str(T.ones(1, dtype=T.int64).type(t).dtype)
                     for t in (T.float64, "torch.DoubleTensor", T.IntTensor, T.Tensor, "torch.Tensor")]
        errors = []
        for bad in ("float", 5, float, np.float32):
            with pytest.raises((ValueError, TypeError)) as error:
                T.ones(1).type(bad)
            errors.append((error.type, str(error.value)))
        same = T.ones(1)
        seen[T] = (correct, names, converted, errors, same.type(T.float32) is same)
    assert seen[symgrad] == seen[torch]


def test_default_dtype(torch):
    results = []
    for T in (symgrad, torch):
        T.set_default_dtype(T.float64)
        try:
            results.append((T.get_default_dtype(), T.tensor([1.5]).dtype, T.ones(2).dtype, T.Tensor([1]).dtype,
                            (T.tensor([1, 2]) * 0.5).dtype, T.full((1,), 0.5).dtype, T.arange(0.0, 2.0).dtype,
                            T.rand(2).dtype, T.nn.Linear(2, 1).weight.dtype, T.tensor([1, 2]).float().dtype,
                            repr(T.tensor([1.5])), (T.tensor([1.0], dtype=T.float32) * 0.1).item()))
            with pytest.raises(TypeError, match="only floating-point types"):
                T.set_default_dtype(T.int64)
        finally:
            T.set_default_dtype(T.float32)
        assert T.tensor([1.5]).dtype == T.float32
    assert [str(r) for r in results[0]] == [str(r) for r in results[1]]


@pytest.mark.parametrize("call", [lambda T: T.ones(2, device="cuda"), lambda T: T.tensor([1.0], device="cuda:1"),
                                  lambda T: T.randn(2, device="cuda"), lambda T: T.zeros(1, device="meta:0x")],
                         ids=["ones cuda", "tensor cuda:1", "randn cuda", "bad string"])
def test_a_device_jax_lacks_is_refused(call):
    if symgrad.cuda.is_available():
        pytest.skip("JAX sees a GPU here")
    with pytest.raises(RuntimeError):
        call(symgrad)


def test_device_objects_and_the_accelerator_namespaces(torch):
    assert repr(symgrad.device("cuda:1")) == repr(torch.device("cuda:1")) == "device(type='cuda', index=1)"
    assert str(symgrad.device("cuda", 0)) == str(torch.device("cuda", 0)) == "cuda:0"
    assert symgrad.device("cpu") == "cpu" and symgrad.ones(1).device == symgrad.device("cpu")
    assert symgrad.cuda.is_available() == (symgrad.cuda.device_count() > 0)
    assert symgrad.accelerator.is_available() == (symgrad.accelerator.current_accelerator() is not None)
    symgrad.set_default_device("cpu")
    assert symgrad.get_default_device() == "cpu"


def test_to_a_device_checks_it(torch):
    x = symgrad.ones(2)
    assert x.to("cpu").tolist() == [1.0, 1.0] and x.to("cpu", symgrad.float64).dtype is symgrad.float64
    assert x.is_cuda is torch.ones(2).is_cuda is False
    if not symgrad.cuda.is_available():
        for move in (lambda: x.to("cuda"), lambda: x.cuda(), lambda: x.to(device="cuda:0")):
            with pytest.raises(RuntimeError, match="not available"):
                move()



def test_tensors_of_new_shapes_compile_nothing(caplog):
    """Data, random and filled tensors of shapes not seen before reach the device without an XLA
    compile (``jnp.asarray`` compiled one per shape, 5-25 ms each), copied from their source."""
    import jax

    from symgrad import uploads

    source = np.arange(23 * 7, dtype=np.float32).reshape(23, 7)
    with caplog.at_level("WARNING"), jax.log_compiles():
        t = symgrad.tensor(source)
        r = symgrad.randn(19, 3)
        i = symgrad.tensor([[1, 2, 3]] * 17)
        u = symgrad.empty(29, 2).uniform_(-1, 1)
    assert not [m for m in caplog.messages if "Compiling" in m or "Finished XLA" in m], caplog.messages
    source[0, 0] = 99.0
    np.testing.assert_array_equal(t.numpy()[0], np.arange(7, dtype=np.float32))
    assert (r.shape, i.dtype, u.shape) == ((19, 3), symgrad.int64, (29, 2))
    assert float(u.abs().max()) <= 1.0
    hot = np.ones((2, 31), np.float32)  # a shape put often takes the compiled copy: the same values
    for _ in range(uploads.HOT_AFTER + 2):
        last = symgrad.tensor(hot)
    np.testing.assert_array_equal(last.numpy(), hot)


def test_host_arrays_written_at_once_do_not_reach_the_tensor():
    """The device copy happens after ``jax.device_put`` returns: a caller writing its array at
    once (``from_numpy(a)`` then ``a[:] = ...``, a batch buffer refilled in place, a NumPy operand)
    saw the new values in the tensor in most runs (session 20 review)."""
    seen = []
    for _ in range(30):
        a = np.zeros(10000, dtype=np.float32)
        t, s = symgrad.from_numpy(a), symgrad.ones(10000) + a
        a[:] = 77.0
        seen.append((float(t[0]), float(s[-1])))
    assert seen == [(0.0, 1.0)] * 30

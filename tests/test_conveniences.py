"""The small conveniences tutorials use, against PyTorch on the same inputs: linspace and logspace
bit for bit, ``Tensor.new_*``, ``type_as``, ``nelement``, ``element_size``, isclose/allclose/equal,
``x in tensor``, ``inference_mode(mode=False)``, the CUDA seeding calls, ``torch.backends`` and
``use_deterministic_algorithms``."""
import math
import random
import warnings

import numpy as np
import pytest

import symgrad

INF, NAN = math.inf, math.nan


class _Raised(tuple):
    """An error's class and message; ours may say more after PyTorch's words (the shapes, dtypes)."""

    def __eq__(self, other):
        return (isinstance(other, _Raised) and self[0] == other[0]
                and (self[1].startswith(other[1]) or other[1].startswith(self[1])))

    __hash__ = tuple.__hash__


def _outcome(call):
    """What a call gives: its value (tensors as dtype, shape and bytes), or its error's class and first line."""
    try:
        value = call()
    except Exception as error:  # noqa: BLE001  (the error is the outcome compared)
        return _Raised((type(error).__name__, str(error).split("\n")[0]))
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        array = np.asarray(value.detach().numpy() if value.requires_grad else value.numpy())
        return str(value.dtype), tuple(value.shape), array.tobytes(), value.requires_grad
    return value


def _same(torch, calls: dict) -> None:
    for name, call in calls.items():
        assert _outcome(lambda: call(symgrad)) == _outcome(lambda: call(torch)), name


# ----------------------------------------------------------------- linspace, logspace

def _spacing_cases(seed: int, count: int):
    rng = random.Random(seed)
    for trial in range(count):
        start = rng.uniform(-100, 100) if trial % 3 else rng.randint(-20, 20)
        end = rng.uniform(-100, 100) if trial % 2 else rng.randint(-20, 20)
        yield start, end, rng.choice([0, 1, 2, 3, 4, 5, 7, 10, 17, 33, 100, 1001])


DTYPES = ("float32", "float64", "int64", "int32", "float16")


def test_linspace_is_pytorchs_bit_for_bit(torch):
    """The first half counts up from start and the second down from end, fused: the middle of
    ``linspace(-1, 1, 7)`` is -2.98e-08, not 0."""
    assert symgrad.linspace(-1, 1, 7)[3].item() == torch.linspace(-1, 1, 7)[3].item() == -2.9802322387695312e-08
    for start, end, steps in _spacing_cases(0, 150):
        for name in DTYPES:
            ours = symgrad.linspace(start, end, steps, dtype=getattr(symgrad, name)).numpy()
            theirs = torch.linspace(start, end, steps, dtype=getattr(torch, name)).numpy()
            assert ours.dtype == theirs.dtype and ours.tobytes() == theirs.tobytes(), (start, end, steps, name)


def test_logspace_is_pytorchs_bit_for_bit(torch):
    for start, end, steps in _spacing_cases(1, 100):
        base = random.Random(steps + int(start)).choice([10.0, 2.0, math.e, 1.7, 0.5])
        for name in DTYPES:
            ours = symgrad.logspace(start / 30, end / 30, steps, base, dtype=getattr(symgrad, name)).numpy()
            theirs = torch.logspace(start / 30, end / 30, steps, base, dtype=getattr(torch, name)).numpy()
            assert ours.dtype == theirs.dtype and ours.tobytes() == theirs.tobytes(), (start, end, steps, base, name)


SPACING_EDGES = {
    "default dtype with ints": lambda T: T.linspace(1, 10, steps=4),
    "one step truncated to int": lambda T: T.linspace(-0.7, 1, 1, dtype=T.int64),
    "no steps": lambda T: T.linspace(0, 1, 0),
    "negative steps": lambda T: T.linspace(0, 1, -1),
    "float steps": lambda T: type(T.linspace(0, 1, 2.5)),
    "bool dtype": lambda T: T.linspace(0, 1, 3, dtype=T.bool),
    "0-dim tensor ends": lambda T: T.linspace(T.tensor(0.0), T.tensor(1.0), 3),
    "int tensor end": lambda T: T.linspace(T.tensor(0), 5, 3),
    "1-dim tensor end": lambda T: T.linspace(T.tensor([0.0]), T.tensor(1.0), 3),
    "requires_grad": lambda T: T.linspace(0, 1, 3, requires_grad=True),
    "requires_grad int": lambda T: T.linspace(0, 1, 3, dtype=T.int64, requires_grad=True).shape,
    "overflow float32": lambda T: T.linspace(0, 1e40, 3),
    "overflow int32": lambda T: T.linspace(0, 3e9, 3, dtype=T.int32),
    "nan start": lambda T: T.linspace(NAN, 1, 3),
    "inf end": lambda T: T.linspace(0, INF, 3),
    "bools": lambda T: T.linspace(True, False, 3),
    "long int steps": lambda T: T.linspace(-(2 ** 40), 2 ** 40 + 7, 1001, dtype=T.int64),
    "many steps": lambda T: T.linspace(-3.3, 7.1, 40001),
    "logspace base=2": lambda T: T.logspace(0, 1, 3, base=2),
    "logspace ints": lambda T: T.logspace(0.5, 3.7, 5, dtype=T.int64),
    "logspace one step int": lambda T: T.logspace(0.5, 1, 1, dtype=T.int64),
    "logspace overflow": lambda T: T.logspace(0, 40, 3),
    "logspace int overflow": lambda T: T.logspace(0, 1000, 3, dtype=T.int64),
    "logspace negative base": lambda T: T.logspace(0, 1, 3, base=-2),
    "logspace negative base odd": lambda T: T.logspace(-3, 3, 7, base=-2.0, dtype=T.float64),
    "logspace base 0": lambda T: T.logspace(-2, 2, 5, base=0.0),
    "logspace bool": lambda T: T.logspace(0, 1, 3, dtype=T.bool),
    "logspace steps": lambda T: T.logspace(0, 1, -2),
    "logspace middle": lambda T: T.logspace(-1, 1, 7),
}


def test_spacing_edges_as_pytorch(torch):
    _same(torch, SPACING_EDGES)


# ----------------------------------------------------------------- new_*, type_as, nelement, element_size

NEW = {
    "new_ones": lambda T: T.tensor([1.0, 2.0]).new_ones(2),
    "new_ones tuple": lambda T: T.tensor([1.0, 2.0], dtype=T.float64).new_ones((2, 3)),
    "new_ones Size": lambda T: T.ones(1).new_ones(T.Size([2, 2])),
    "new_ones size=": lambda T: T.tensor([1]).new_ones(size=(2,)),
    "new_ones dtype=": lambda T: T.tensor([1.0]).new_ones(2, 3, dtype=T.int64),
    "new_ones requires_grad": lambda T: T.tensor([1.0]).new_ones(2, requires_grad=True),
    "new_ones requires_grad int": lambda T: T.tensor([1]).new_ones(2, requires_grad=True).shape,
    "new_ones of a tensor with history": lambda T: (T.ones(2, requires_grad=True) * 2).new_ones(2),
    "new_ones nothing": lambda T: T.ones(1).new_ones(),
    "new_ones float": lambda T: T.ones(1).new_ones(2.0),
    "new_ones bool": lambda T: T.ones(1).new_ones(True),
    "new_ones negative": lambda T: T.ones(1).new_ones(-1),
    "new_ones twice": lambda T: T.ones(1).new_zeros(2, size=(3,)),
    "new_zeros": lambda T: T.tensor([1], dtype=T.int32).new_zeros(2, 3),
    "new_zeros empty": lambda T: T.ones(1).new_zeros(0),
    "new_full truncates": lambda T: T.tensor([1, 2]).new_full((2,), 2.7),
    "new_full list": lambda T: T.tensor([1.0]).new_full([2], 7, dtype=T.int32),
    "new_full int size": lambda T: T.tensor([1.0]).new_full(2, 2),
    "new_full nan in int": lambda T: T.tensor([1.0]).new_full((2,), NAN, dtype=T.int64),
    "new_full inf": lambda T: T.tensor([1.0]).new_full((1, 2), -INF),
    "new_empty shape": lambda T: (T.tensor([1.0]).new_empty(2, 3).shape, str(T.tensor([1]).new_empty((2,)).dtype)),
    "new_tensor truncates": lambda T: T.tensor([1, 2]).new_tensor([1.5, 2.5]),
    "new_tensor float": lambda T: T.tensor([1.0], dtype=T.float64).new_tensor([1, 2]),
    "new_tensor dtype=": lambda T: T.tensor([1.0]).new_tensor([1, 2], dtype=T.int64),
    "new_tensor number": lambda T: T.tensor([1.0]).new_tensor(3),
    "new_tensor requires_grad": lambda T: T.tensor([1.0]).new_tensor([1.0], requires_grad=True),
    "type_as int": lambda T: T.tensor([1.7, -2.5]).type_as(T.tensor([1])),
    "type_as float": lambda T: T.tensor([1, 2]).type_as(T.tensor([1.0], dtype=T.float64)),
    "type_as number": lambda T: T.ones(1).type_as(3),
    "nelement": lambda T: (T.zeros(2, 3).nelement(), T.zeros(()).nelement(), T.zeros(0, 4).nelement()),
    "element_size": lambda T: tuple(T.zeros(1, dtype=d).element_size()
                                    for d in (T.bool, T.int32, T.int64, T.float16, T.float32, T.float64)),
}


def test_new_tensors_and_sizes_as_pytorch(torch):
    _same(torch, NEW)


def test_new_tensor_of_a_tensor_warns_and_detaches(torch):
    """PyTorch's UserWarning, and a leaf without gradient whatever the source requires."""
    seen = {}
    for T in (symgrad, torch):
        source = T.tensor([1.0, 2.0], requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            copy = source.new_tensor(source * 3)
        seen[T] = ([str(w.message) for w in caught], copy.requires_grad, copy.is_leaf, copy.tolist())
    assert seen[symgrad] == seen[torch]


def test_type_as_keeps_gradient_flowing(torch):
    grads = {}
    for T in (symgrad, torch):
        x = T.tensor([0.5, -1.5], requires_grad=True)
        (x.type_as(T.zeros(1, dtype=T.float64)) ** 2).sum().backward()
        grads[T] = (x.grad.tolist(), str(x.grad.dtype))
    assert grads[symgrad] == grads[torch]


# ----------------------------------------------------------------- isclose, allclose, equal

def _close_inputs(T):
    x = T.tensor([1.0, 2.0, INF, -INF, NAN, 0.0, 1e-9, 3e38])
    y = T.tensor([1.0, 2.00001, INF, INF, NAN, 1e-9, 0.0, -3e38])
    return x, y


CLOSE = {
    "isclose": lambda T: T.isclose(*_close_inputs(T)),
    "isclose equal_nan": lambda T: T.isclose(*_close_inputs(T), equal_nan=True),
    "isclose positional": lambda T: T.isclose(*_close_inputs(T), 1e-5, 1e-8, True),
    "isclose zero tolerance": lambda T: T.isclose(*_close_inputs(T), rtol=0, atol=0),
    "isclose atol=inf": lambda T: T.isclose(T.tensor([0.0, 1.0]), T.tensor([INF, 2.0]), atol=INF),
    "isclose rtol": lambda T: T.isclose(T.tensor([1.0, 2.0]), T.tensor([1.1, 2.2]), rtol=0.1),
    "isclose large rtol": lambda T: T.isclose(T.tensor([3e38]), T.tensor([-3e38]), rtol=10),
    "isclose float64": lambda T: T.isclose(T.tensor([1.0, 1 + 1e-12], dtype=T.float64),
                                           T.tensor([1.0 + 2e-9, 1.0], dtype=T.float64), rtol=0, atol=1e-9),
    "isclose float16": lambda T: T.isclose(T.tensor([1.0], dtype=T.float16), T.tensor([1.001], dtype=T.float16)),
    "isclose method": lambda T: _close_inputs(T)[0].isclose(_close_inputs(T)[1]),
    "isclose broadcast": lambda T: T.isclose(T.ones(2, 1), T.ones(3)),
    "isclose mismatched shapes": lambda T: T.isclose(T.ones(2), T.ones(3)),
    "isclose ints": lambda T: T.isclose(T.tensor([1, 2, 3]), T.tensor([1, 3, 3])),
    "isclose ints atol": lambda T: T.isclose(T.tensor([1, 2, 3]), T.tensor([1, 3, 3]), atol=1),
    "isclose ints rtol": lambda T: T.isclose(T.tensor([1, 2, 3]), T.tensor([1, 3, 3]), rtol=0.4),
    "isclose ints in float32": lambda T: T.isclose(T.tensor([10 ** 12]), T.tensor([10 ** 12 + 1])),
    "isclose int rounding": lambda T: T.isclose(T.tensor([16777217]), T.tensor([16777216]), rtol=0, atol=0.5),
    "isclose ints equal_nan": lambda T: T.isclose(T.tensor([1, 2]), T.tensor([1, 3]), equal_nan=True),
    "isclose bools": lambda T: T.isclose(T.tensor([True, False]), T.tensor([True, True])),
    "isclose bools atol": lambda T: T.isclose(T.tensor([True, False]), T.tensor([True, True]), atol=1),
    "isclose 0-dim": lambda T: T.isclose(T.tensor(1.0), T.tensor(1.0 + 1e-6)),
    "isclose requires_grad": lambda T: T.isclose(T.tensor([1.0, 2.0], requires_grad=True), T.tensor([1.0, 3.0])),
    "isclose dtypes": lambda T: T.isclose(T.ones(2), T.ones(2, dtype=T.float64)),
    "isclose int and float": lambda T: T.isclose(T.tensor([1]), T.tensor([1.0])),
    "isclose negative rtol": lambda T: T.isclose(T.ones(1), T.ones(1), rtol=-1),
    "isclose negative atol": lambda T: T.isclose(T.ones(1), T.ones(1), atol=-0.5),
    "isclose number": lambda T: T.isclose(T.ones(1), 1.0),
    "isclose number first": lambda T: T.isclose(1.0, T.ones(1)),
    "allclose": lambda T: T.allclose(*_close_inputs(T)),
    "allclose equal_nan": lambda T: T.allclose(T.tensor([NAN, 1.0]), T.tensor([NAN, 1.0 + 1e-7]), equal_nan=True),
    "allclose nan": lambda T: T.allclose(T.tensor([NAN, 1.0]), T.tensor([NAN, 1.0])),
    "allclose broadcast": lambda T: T.allclose(T.ones(2, 1), T.ones(3)),
    "allclose 0-dim": lambda T: T.allclose(T.tensor(1.0), T.tensor(1.0)),
    "allclose empty": lambda T: T.allclose(T.zeros(0), T.zeros(0)),
    "allclose bools": lambda T: T.allclose(T.tensor(True), T.tensor(False), atol=1),
    "allclose method": lambda T: T.tensor([1.0, 2.0]).allclose(T.tensor([1.0, 2.000001])),
    "allclose dtypes": lambda T: T.allclose(T.ones(2), T.ones(2, dtype=T.float64)),
    "allclose None": lambda T: T.allclose(T.ones(2), None),
    "equal": lambda T: T.equal(T.tensor([1, 2]), T.tensor([1, 2])),
    "equal values": lambda T: T.equal(T.tensor([1, 2]), T.tensor([1, 3])),
    "equal nan itself": lambda T: (lambda x: T.equal(x, x))(T.tensor([1.0, NAN])),
    "equal promoted": lambda T: T.equal(T.tensor([1.0, 2.0]), T.tensor([1, 2])),
    "equal promoted fraction": lambda T: T.equal(T.tensor([1.5]), T.tensor([1])),
    "equal float32 float64": lambda T: T.equal(T.tensor(0.1), T.tensor(0.1, dtype=T.float64)),
    "equal bool int": lambda T: T.equal(T.tensor([True]), T.tensor([1])),
    "equal signed zeros": lambda T: T.equal(T.zeros(2), -T.zeros(2)),
    "equal shapes": lambda T: T.equal(T.ones(2, 1), T.ones(2)),
    "equal empty shapes": lambda T: T.equal(T.zeros(0), T.zeros(0, 2)),
    "equal method": lambda T: T.tensor([[1.0]]).equal(T.tensor([[1.0]])),
    "equal number": lambda T: T.equal(T.tensor([1]), 1),
}


def test_closeness_as_pytorch(torch):
    _same(torch, CLOSE)


# ----------------------------------------------------------------- x in tensor

def _matrix(T):
    return T.tensor([[1.0, 2.0], [3.0, NAN]])


CONTAINS = {
    "number": lambda T: (1.0 in _matrix(T), 5 in _matrix(T), NAN in _matrix(T), 2.0 in T.tensor([1, 2])),
    "bool in ints": lambda T: (True in T.tensor([1, 2]), 1.5 in T.tensor([1, 2])),
    "numpy scalar": lambda T: np.float32(3.0) in _matrix(T),
    "row": lambda T: (T.tensor([1.0, 2.0]) in _matrix(T), T.tensor([1.0, 5.0]) in _matrix(T)),
    "0-dim tensor": lambda T: (T.tensor(2) in T.tensor([1, 2]), 1 in T.tensor(1.0), 1 in T.zeros(0)),
    "whole": lambda T: T.tensor([[1.0, 2.0], [3.0, 4.0]]) in _matrix(T),
    "wrong shape": lambda T: T.tensor([1.0, 2.0, 3.0]) in _matrix(T),
    "string": lambda T: "a" in _matrix(T),
    "None": lambda T: None in _matrix(T),
    "list": lambda T: [1.0] in _matrix(T),
    "array": lambda T: np.array([1.0]) in _matrix(T),
}


def test_contains_as_pytorch(torch):
    _same(torch, CONTAINS)


# ----------------------------------------------------------------- grad modes, seeding, backends

def _modes(T):
    return T.is_inference_mode_enabled(), T.is_grad_enabled(), T.ones(1).is_inference()


def _inference_modes(T):
    seen = []
    with T.inference_mode(mode=False):
        seen.append(_modes(T))
    with T.inference_mode():
        with T.inference_mode(mode=False):
            seen.append(_modes(T))
        seen.append(_modes(T))

    @T.inference_mode(mode=False)
    def off():
        return _modes(T)

    @T.inference_mode
    def on():
        return _modes(T)

    with T.inference_mode(True):
        seen.append(off())
    with T.no_grad():
        seen += [off(), on()]
    return seen


def test_inference_mode_keyword_and_decorator_as_pytorch(torch):
    assert _inference_modes(symgrad) == _inference_modes(torch)


def _set_cudnn(T, name, value):
    setattr(T.backends.cudnn, name, value)
    return getattr(T.backends.cudnn, name)


def _seeded(T):
    """A tutorial's seeding block, then a draw: the CUDA calls change nothing on a CPU."""
    T.manual_seed(7)
    T.cuda.manual_seed(7)
    T.cuda.manual_seed_all(7)
    T.backends.cudnn.deterministic = True
    T.backends.cudnn.benchmark = False
    return T.rand(3)


SEEDING = {
    "seeding block": _seeded,
    "cuda seeds": lambda T: (T.cuda.manual_seed(0), T.cuda.manual_seed_all(2 ** 70), T.cuda.manual_seed(1.5)),
    "cuda seed string": lambda T: T.cuda.manual_seed("a"),
    "cuda seed None": lambda T: T.cuda.manual_seed_all(None),
    "cudnn defaults": lambda T: (T.backends.cudnn.enabled, T.backends.cudnn.benchmark, T.backends.cudnn.allow_tf32,
                                 T.backends.cudnn.is_available(), T.backends.cudnn.version()),
    "mps": lambda T: (T.backends.mps.is_available(), T.backends.mps.is_built()),
    "cudnn set": lambda T: (_set_cudnn(T, "benchmark", True), _set_cudnn(T, "benchmark", False),
                            _set_cudnn(T, "enabled", False), _set_cudnn(T, "enabled", True)),
    "cudnn set int": lambda T: _set_cudnn(T, "deterministic", 1),
    "cudnn set None": lambda T: _set_cudnn(T, "benchmark", None),
    "cudnn set enabled": lambda T: _set_cudnn(T, "enabled", "yes"),
    "cudnn set tf32": lambda T: _set_cudnn(T, "allow_tf32", 0.0),
    "cudnn reset": lambda T: _set_cudnn(T, "deterministic", False),
}


def test_seeding_and_backends_as_pytorch(torch):
    _same(torch, SEEDING)


def _deterministic(T):
    seen = [T.are_deterministic_algorithms_enabled()]
    try:
        T.use_deterministic_algorithms(True)
        seen += [T.are_deterministic_algorithms_enabled(), T.is_deterministic_algorithms_warn_only_enabled()]
        seen += [_outcome(lambda: f()) for f in (
            lambda: T.empty(3), lambda: T.empty(2, dtype=T.int64), lambda: T.empty((2,), dtype=T.int32),
            lambda: T.empty(2, dtype=T.bool), lambda: T.empty(1, 2, dtype=T.float64),
            lambda: T.zeros(2).new_empty(2), lambda: T.empty_like(T.zeros(2, dtype=T.int64)),
            lambda: T.empty(2, requires_grad=True))]
        T.use_deterministic_algorithms(True, warn_only=True)
        seen.append(T.is_deterministic_algorithms_warn_only_enabled())
        for bad in (lambda: T.use_deterministic_algorithms("a"), lambda: T.use_deterministic_algorithms(1),
                    lambda: T.use_deterministic_algorithms(False, warn_only=1)):
            seen.append(_outcome(bad))
    finally:
        T.use_deterministic_algorithms(False)
    seen.append((T.are_deterministic_algorithms_enabled(), T.is_deterministic_algorithms_warn_only_enabled()))
    return seen


def test_deterministic_algorithms_as_pytorch(torch):
    """The switch reads back, and unset memory is NaN or the largest integer while it is on."""
    assert _deterministic(symgrad) == _deterministic(torch)

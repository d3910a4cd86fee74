"""PyTorch's small integer dtypes, uint8, int8 and int16, end to end: names, promotion (uint8 with
int8 gives int16), creation with PyTorch's range checks, conversions and legacy types, arithmetic
that wraps around, reductions, printing, checkpoints both ways, seeded integers, and the index
checks (a uint8 index is a deprecated mask; int8 and int16 are no index) -- each compared with
PyTorch on the same inputs: values, dtypes, and errors' class and message."""
import re
import warnings

import numpy as np
import pytest

import symgrad

SMALL = ("uint8", "int8", "int16")
KINDS = ("bool",) + SMALL + ("int32", "int64", "float16", "float32")


def plain(value):
    """A result as comparable data: a tensor is its dtype, shape and values; dtypes print as PyTorch's."""
    if hasattr(value, "dtype") and hasattr(value, "shape") and not isinstance(value, np.ndarray):
        return (repr(value.dtype), tuple(value.shape), np.asarray(value.detach().numpy()).tolist())
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if type(value).__name__ in ("dtype", "iinfo", "finfo"):
        return repr(value)
    return value


def outcome(T, call):
    """``call(T)``'s result as plain data, or its exception's class and message (without symgrad's
    appended ``[op: shapes ...]`` or ``[op_ on shape ...]`` context)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return plain(call(T))
        except Exception as error:  # noqa: BLE001 (the exception is what is compared)
            return type(error).__name__, re.sub(r" \[[\w.]+(: | on ).*\]$", "", str(error), flags=re.S)


def same(torch, call):
    ours, theirs = outcome(symgrad, call), outcome(torch, call)
    assert ours == theirs


def small(T):
    return (T.tensor([0, 1, 200, 255], dtype=T.uint8), T.tensor([-128, -1, 5, 127], dtype=T.int8),
            T.tensor([-300, 7, 1000, -1], dtype=T.int16))


# ------------------------------------------------------------------------- names and promotion


def test_names_are_pytorchs(torch):
    same(torch, lambda T: [(repr(d), str(d), d.itemsize, d.is_signed, d.is_floating_point)
                           for d in (T.uint8, T.int8, T.int16, T.short)])
    assert symgrad.short is symgrad.int16
    same(torch, lambda T: [(T.iinfo(d).min, T.iinfo(d).max, T.iinfo(d).bits, T.iinfo(d).dtype, repr(T.iinfo(d)))
                           for d in (T.uint8, T.int8, T.int16)])
    same(torch, lambda T: T.finfo(T.uint8))
    for name in SMALL:
        same(torch, lambda T: T.from_numpy(np.array([1, 2, 3], dtype=name)))
    assert symgrad.spec("u8[b,3]").dtype == np.uint8 and symgrad.spec("i16[2]").dtype == np.int16


def test_promotion_is_pytorchs(torch):
    """Within integers the wider type wins, except uint8 with int8 (int16); a Python number or a
    0-dim tensor of the same kind never widens a dimensioned tensor."""
    same(torch, lambda T: [T.promote_types(getattr(T, a), getattr(T, b)) for a in KINDS for b in KINDS])
    same(torch, lambda T: [T.can_cast(getattr(T, a), getattr(T, b)) for a in KINDS for b in KINDS])
    for name in SMALL:
        same(torch, lambda T: [T.result_type(T.tensor([1], dtype=getattr(T, name)), other(T)) for other in (
            lambda T: 1000, lambda T: -1, lambda T: 1.5, lambda T: True, lambda T: T.tensor(5),
            lambda T: T.tensor(5, dtype=T.int8), lambda T: T.tensor(5, dtype=T.uint8), lambda T: T.tensor(1.0),
            lambda T: T.tensor([True]), lambda T: T.tensor([1], dtype=T.int8), lambda T: T.tensor([1], dtype=T.uint8))])
    same(torch, lambda T: T.result_type(T.tensor(1, dtype=T.uint8), T.tensor(1, dtype=T.int8)))
    same(torch, lambda T: [a + b for a in small(T) for b in small(T)])


# ---------------------------------------------------------------------------------- creation


@pytest.mark.parametrize("name", SMALL)
def test_creation_in_each_dtype(torch, name):
    same(torch, lambda T: [make(T, getattr(T, name)) for make in (
        lambda T, d: T.tensor([1, 2, 100], dtype=d), lambda T, d: T.tensor(7, dtype=d),
        lambda T, d: T.zeros(2, 2, dtype=d),
        lambda T, d: T.ones(4, dtype=d), lambda T, d: T.full((2, 2), 5, dtype=d), lambda T, d: T.arange(4, dtype=d),
        lambda T, d: T.arange(0, 120, 30, dtype=d), lambda T, d: T.eye(2, dtype=d), lambda T, d: T.empty(0, dtype=d),
        lambda T, d: T.linspace(0, 100, 4, dtype=d), lambda T, d: T.zeros_like(T.ones(4), dtype=d),
        lambda T, d: T.tensor([1.7, 2.2, 0.5, 99.9], dtype=d), lambda T, d: T.as_tensor([3, 4], dtype=d),
        lambda T, d: T.tensor(T.tensor([1, 2], dtype=d)), lambda T, d: T.tensor([[1, 2], [3, 4]], dtype=d).t())])


def test_creation_refuses_what_pytorch_refuses(torch):
    """tensor() and full() check the range (messages name uint8 and uint8_t); uint8 takes negatives
    down to -255, wrapped around; arange past 255 wraps (it is computed, not checked), and so does a
    whole array or tensor (it is cast, not checked)."""
    for make in (lambda T: T.tensor([300], dtype=T.uint8), lambda T: T.tensor([-256], dtype=T.uint8),
                 lambda T: T.tensor([-1, -255, 255], dtype=T.uint8), lambda T: T.tensor(-1, dtype=T.uint8),
                 lambda T: T.tensor([128], dtype=T.int8), lambda T: T.tensor([-129], dtype=T.int8),
                 lambda T: T.tensor([[1], [40000]], dtype=T.int16), lambda T: T.tensor([2**40], dtype=T.int32),
                 lambda T: T.tensor([1.5, 300.0], dtype=T.uint8), lambda T: T.full((2,), 300, dtype=T.uint8),
                 lambda T: T.full((2,), -1, dtype=T.uint8), lambda T: T.full((2,), -256, dtype=T.uint8),
                 lambda T: T.full((2,), -129, dtype=T.int8), lambda T: T.full((2,), 2**15, dtype=T.int16),
                 lambda T: T.zeros(2, dtype=T.uint8).fill_(-3), lambda T: T.zeros(2, dtype=T.uint8).fill_(256),
                 lambda T: T.arange(250, 260, dtype=T.uint8), lambda T: T.tensor([np.int64(300)], dtype=T.uint8),
                 lambda T: T.tensor(np.array([300, -1]), dtype=T.uint8),
                 lambda T: T.as_tensor(np.array([300]), dtype=T.int8),
                 lambda T: T.tensor(T.tensor([300, -1]), dtype=T.uint8),
                 lambda T: T.tensor(np.array([2**40]), dtype=T.int16)):
        same(torch, make)


def test_requires_grad_is_refused(torch):
    for T in (symgrad, torch):
        with pytest.raises(RuntimeError, match="Only Tensors of floating point and complex dtype can require"):
            T.zeros(2, dtype=T.uint8, requires_grad=True)


# ------------------------------------------------------------------------ conversions, types


def test_conversions_and_legacy_types(torch):
    same(torch, lambda T: [x.byte() for x in (T.tensor([1, 2]), T.tensor([1.5, 250.0]), T.tensor([True, False]))])
    same(torch, lambda T: [T.tensor([-3, 2]).char(), T.tensor([-300, 2]).short(), T.tensor([-3.7, 2.2]).short()])
    same(torch, lambda T: [x.type() for x in small(T)])
    same(torch, lambda T: [T.tensor([1, 2]).type(T.ByteTensor), T.tensor([1, 2]).type("torch.CharTensor"),
                           T.tensor([1, 2]).type(T.int16), T.typename(T.tensor([1], dtype=T.int8))])
    same(torch, lambda T: [T.ByteTensor([1, 2]), T.CharTensor([-1]), T.ShortTensor([[3]]), T.ByteTensor(3).shape])
    same(torch, lambda T: [isinstance(x, t) for x in small(T) for t in (T.ByteTensor, T.CharTensor, T.ShortTensor)])
    same(torch, lambda T: [f(x) for x in small(T) for f in (
        lambda x: x.to(T.float32), lambda x: x.long(), lambda x: x.half(), lambda x: x.bool(), lambda x: x.int())])
    same(torch, lambda T: [x.to(d) for x in small(T) for d in (T.uint8, T.int8, T.int16)])  # (ints wrap)
    same(torch, lambda T: [(x.element_size(), x.itemsize, x.nbytes, x.is_signed(), T.is_signed(x),
                            x.is_floating_point(), x.numpy().dtype.name, x.tolist(), x[2].item()) for x in small(T)])


# ------------------------------------------------------------------------------- arithmetic


def test_arithmetic_wraps_around_as_pytorchs(torch):
    """uint8 200 + 100 is 44; true division and float math give floats; a Python int outside the
    range is wrapped, not refused."""
    same(torch, lambda T: T.tensor([200], dtype=T.uint8) + 100)
    same(torch, lambda T: [f(*small(T)) for f in (
        lambda a, b, c: a + 100, lambda a, b, c: a + 1000, lambda a, b, c: a - 3, lambda a, b, c: -a,
        lambda a, b, c: a * 2, lambda a, b, c: b * 3, lambda a, b, c: c * 100, lambda a, b, c: b - 1,
        lambda a, b, c: a * -1, lambda a, b, c: a + True, lambda a, b, c: a + c, lambda a, b, c: a * b,
        lambda a, b, c: a / 2, lambda a, b, c: b / a.clamp(min=1), lambda a, b, c: a * 1.5, lambda a, b, c: c / 7,
        lambda a, b, c: a // 7, lambda a, b, c: b // 3, lambda a, b, c: a % 7, lambda a, b, c: b % 3,
        lambda a, b, c: T.fmod(b, 3), lambda a, b, c: T.div(b, 3, rounding_mode="trunc"),
        lambda a, b, c: T.div(a, 3, rounding_mode="floor"), lambda a, b, c: b.abs(), lambda a, b, c: b.sign(),
        lambda a, b, c: a ** 2, lambda a, b, c: b ** 3, lambda a, b, c: 2 ** T.tensor([3, 8], dtype=T.uint8),
        lambda a, b, c: a ** 0.5, lambda a, b, c: a.sqrt(), lambda a, b, c: b.exp(), lambda a, b, c: b.square(),
        lambda a, b, c: T.maximum(a, b), lambda a, b, c: T.minimum(b, c), lambda a, b, c: a.clamp(5, 60),
        lambda a, b, c: a.clamp(min=-5), lambda a, b, c: b.clamp(-5, 5), lambda a, b, c: a.floor(),
        lambda a, b, c: b.round(), lambda a, b, c: T.where(b > 0, a, c))])


def test_in_place_arithmetic_keeps_the_dtype(torch):
    same(torch, lambda T: [f(*small(T)) for f in (
        lambda a, b, c: a.clone().add_(10), lambda a, b, c: a.clone().add_(b), lambda a, b, c: c.clone().mul_(100),
        lambda a, b, c: b.clone().sub_(1), lambda a, b, c: a.clone().add_(1.5), lambda a, b, c: b.clone().neg_())])


def test_comparisons_and_bitwise_ops(torch):
    same(torch, lambda T: [f(*small(T)) for f in (
        lambda a, b, c: a < 2, lambda a, b, c: a == 256, lambda a, b, c: a > -1, lambda a, b, c: a == b,
        lambda a, b, c: b < 0.5, lambda a, b, c: c >= b, lambda a, b, c: a & 3, lambda a, b, c: a & b,
        lambda a, b, c: b | 1, lambda a, b, c: c ^ 5, lambda a, b, c: ~a, lambda a, b, c: ~b, lambda a, b, c: ~c,
        lambda a, b, c: a << 2, lambda a, b, c: b << 1, lambda a, b, c: b >> 2, lambda a, b, c: c >> 3)])


def test_reductions(torch):
    """sum, prod and cumsum of small ints give int64 (as for int32); max and min keep the dtype;
    mean refuses them; any and all of uint8 stay uint8."""
    same(torch, lambda T: [f(*small(T)) for f in (
        lambda a, b, c: a.sum(), lambda a, b, c: b.prod(), lambda a, b, c: c.prod(),
        lambda a, b, c: a.view(2, 2).sum(0),
        lambda a, b, c: b.view(2, 2).prod(1), lambda a, b, c: a.cumsum(0), lambda a, b, c: b.cumprod(0),
        lambda a, b, c: a.sum(dtype=T.float32), lambda a, b, c: T.full((300,), 255, dtype=T.uint8).sum(),
        lambda a, b, c: a.max(), lambda a, b, c: c.min(), lambda a, b, c: a.view(2, 2).max(1),
        lambda a, b, c: b.argmax(),
        lambda a, b, c: b.sort(), lambda a, b, c: c.topk(2), lambda a, b, c: a.float().mean(), lambda a, b, c: a.any(),
        lambda a, b, c: a.all(), lambda a, b, c: a.view(2, 2).any(1), lambda a, b, c: T.all(a.view(2, 2), 0, True),
        lambda a, b, c: b.any(), lambda a, b, c: T.count_nonzero(a), lambda a, b, c: a.nonzero(),
        lambda a, b, c: T.tensor([3, 1, 3], dtype=T.uint8).unique(), lambda a, b, c: T.bincount(a),
        lambda a, b, c: T.ones(2, 2, dtype=T.uint8) @ T.ones(2, 2, dtype=T.uint8) * 200,
        lambda a, b, c: T.stack([a, a]), lambda a, b, c: T.cat([a, c]), lambda a, b, c: c.flip(0))])
    for name in SMALL:
        same(torch, lambda T: T.zeros(2, dtype=getattr(T, name)).mean())


def test_printing(torch):
    def shown(T):
        a, b, c = small(T)
        return [repr(a), str(b), repr(c), repr(T.tensor(7, dtype=T.int8)), repr(T.tensor([1, 2], dtype=T.uint8)),
                repr(T.tensor([[1, -2], [3, 4]], dtype=T.int16)), repr(T.tensor([], dtype=T.uint8)),
                repr(T.arange(120, dtype=T.int8))]
    same(torch, shown)


# ------------------------------------------------------------------------------- checkpoints


def test_checkpoints_both_ways(torch, tmp_path):
    """ByteStorage, CharStorage and ShortStorage: saved by one library, loaded by the other."""
    for writer, reader in ((torch, symgrad), (symgrad, torch)):
        path = tmp_path / f"{writer.__name__}.pt"
        writer.save(dict(zip(SMALL, small(writer))), path)
        loaded = reader.load(path)
        assert {k: plain(v) for k, v in loaded.items()} == {k: plain(v) for k, v in zip(SMALL, small(torch))}


# ------------------------------------------------------------------------------------ random


@pytest.mark.parametrize("name", SMALL)
def test_seeded_integers_are_pytorchs(torch, name):
    def draws(T):
        d = getattr(T, name)
        T.manual_seed(3)
        low = 0 if name == "uint8" else -5
        return [T.zeros(6, dtype=d).random_(), T.zeros(4, dtype=d).random_(3, 9), T.randint(low, 100, (3,), dtype=d),
                T.randint(0, 256 if name == "uint8" else 128, (8,), dtype=d), T.randint_like(T.zeros(2, dtype=d), 10)]
    same(torch, draws)


@pytest.mark.parametrize("name", SMALL + ("int32",))
def test_random_bounds_are_checked(torch, name):
    for call in (lambda T: T.randint(0, 2**40, (2,), dtype=getattr(T, name)),
                 lambda T: T.randint(-2**40, 2, (2,), dtype=getattr(T, name)),
                 lambda T: T.zeros(2, dtype=getattr(T, name)).random_(-300, 5),
                 lambda T: T.zeros(2, dtype=getattr(T, name)).random_(5, 3),
                 lambda T: T.zeros(2, dtype=getattr(T, name)).cauchy_()):
        same(torch, lambda T: (T.manual_seed(0), call(T))[1])


def test_rng_state_is_a_byte_tensor(torch):
    symgrad.manual_seed(5), torch.manual_seed(5)
    symgrad.rand(3), torch.rand(3)
    assert plain(symgrad.get_rng_state()) == plain(torch.get_rng_state())
    same(torch, lambda T: T.set_rng_state(T.get_rng_state().long()))
    state = symgrad.get_rng_state()
    first = symgrad.randint(0, 256, (5,), dtype=symgrad.uint8).tolist()
    symgrad.set_rng_state(state)
    assert symgrad.randint(0, 256, (5,), dtype=symgrad.uint8).tolist() == first


# ---------------------------------------------------------------------------- index checks


@pytest.mark.parametrize("name", SMALL)
def test_small_ints_are_no_index_for_index_ops(torch, name):
    def index(T):
        return T.tensor([1, 0], dtype=getattr(T, name))
    for call in (lambda T: T.arange(5.).index_select(0, index(T)), lambda T: T.arange(5.).gather(0, index(T)),
                 lambda T: T.zeros(5).index_add(0, index(T), T.ones(2)), lambda T: T.zeros(5).scatter(0, index(T), 1.0),
                 lambda T: T.arange(5.).take(index(T)), lambda T: T.nn.functional.one_hot(index(T)),
                 lambda T: T.nn.functional.embedding(index(T), T.zeros(3, 2)),
                 lambda T: T.zeros(2).masked_fill(index(T), 1.0), lambda T: T.zeros(2).masked_select(index(T)),
                 lambda T: T.hann_window(4, dtype=getattr(T, name)),
                 lambda T: T.tril_indices(3, 3, dtype=getattr(T, name)),
                 lambda T: T.histc(index(T)), lambda T: T.repeat_interleave(T.arange(2), index(T)),
                 lambda T: T.nn.functional.scaled_dot_product_attention(
                     T.zeros(1, 2, 2), T.zeros(1, 2, 2), T.zeros(1, 2, 2),
                     attn_mask=T.zeros(2, 2, dtype=getattr(T, name)))):
        same(torch, call)


def test_a_uint8_index_is_a_deprecated_mask(torch):
    """x[u8] is x[u8 != 0] with PyTorch's deprecation warning, at the indexing line; a 0-dim uint8
    index is a Python bool's; int8 and int16 index tensors are refused (a 0-dim one is an int)."""
    same(torch, lambda T: [T.arange(5.)[T.tensor([1, 0, 2, 0, 0], dtype=T.uint8)],
                           T.arange(6.).view(2, 3)[T.tensor([[1, 0, 1], [0, 0, 1]], dtype=T.uint8)],
                           T.arange(6.).view(2, 3)[T.tensor([1, 0], dtype=T.uint8), 1:],
                           T.arange(5.)[T.tensor(1, dtype=T.uint8)], T.arange(5.)[T.tensor(0, dtype=T.uint8)],
                           T.arange(5.)[T.tensor(3, dtype=T.int8)]])
    for call in (lambda T: T.arange(5.)[T.tensor([1, 0], dtype=T.uint8)],
                 lambda T: T.arange(5.)[T.tensor([1, 0], dtype=T.int8)],
                 lambda T: T.arange(5.)[T.tensor([1, 0], dtype=T.int16)]):
        same(torch, call)

    def put(T):
        x = T.arange(5.)
        x[T.tensor([1, 0, 1, 0, 0], dtype=T.uint8)] = T.tensor([8.0, 9.0])
        return x
    same(torch, put)
    with pytest.warns(UserWarning, match="indexing with dtype torch.uint8 is now deprecated") as caught:
        symgrad.arange(5.)[symgrad.tensor([1, 0, 1, 0, 0], dtype=symgrad.uint8)]
    assert caught[0].filename == __file__


def test_where_takes_a_uint8_condition(torch):
    same(torch, lambda T: [T.where(T.tensor([1, 0, 2], dtype=T.uint8), T.arange(3.), -T.arange(3.)),
                           T.arange(3.).where(T.tensor([0, 1, 1], dtype=T.uint8), 5.0)])
    same(torch, lambda T: T.where(T.tensor([1, 0, 2], dtype=T.int8), T.arange(3.), 0.0))
    with pytest.warns(UserWarning, match="where received a uint8 condition tensor") as caught:
        symgrad.where(symgrad.tensor([1, 0], dtype=symgrad.uint8), 1.0, 0.0)
    assert caught[0].filename == __file__


def test_a_training_loop_on_uint8_images(torch):
    """Images stored as uint8, scaled to floats in the loop (the data tutorial's way): PyTorch's losses,
    step by step, through the recorded and replayed steps."""
    rng = np.random.default_rng(0)
    images, labels = rng.integers(0, 256, (5, 2, 8), dtype=np.uint8), rng.integers(0, 3, (5, 2))
    weight = (rng.standard_normal((3, 8)) * 0.1).astype(np.float32)

    def losses(T):
        model = T.nn.Linear(8, 3)
        with T.no_grad():
            model.weight.copy_(T.tensor(weight))
            model.bias.zero_()
        optimizer, seen = T.optim.SGD(model.parameters(), lr=0.1), []
        for x, y in zip(images, labels):
            x = T.from_numpy(x)
            loss = T.nn.functional.cross_entropy(model(x.float() / 255), T.from_numpy(y))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            seen.append((repr(x.dtype), loss.item()))
        return seen
    ours, theirs = losses(symgrad), losses(torch)
    assert [d for d, _ in ours] == [d for d, _ in theirs] == ["torch.uint8"] * 5
    np.testing.assert_allclose([v for _, v in ours], [v for _, v in theirs], rtol=1e-6)

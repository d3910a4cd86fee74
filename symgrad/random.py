"""PyTorch's CPU random numbers, bit for bit: its generator and how each distribution draws.

A seeded PyTorch script must print the same numbers under ``import symgrad as torch``, so this
is PyTorch's CPU generator reproduced, not a generator of our own: the mt19937 engine seeded as
PyTorch seeds it (NumPy's ``MT19937`` bit generator runs the engine once its key is set), the
bits PyTorch keeps of each 32- or 64-bit draw, the order in which its kernels consume draws,
and the arithmetic of its kernels to the last bit (their compiler fuses multiply-adds, so we
do too, exactly).  Measured against PyTorch 2.13 on an x86-64 CPU with AVX2.

The distributions return NumPy arrays; symgrad.creation makes tensors of them.  The module is
also ``torch.random``'s mirror: ``manual_seed``, ``seed``, ``initial_seed``, ``get_rng_state``,
``set_rng_state``.
"""
from __future__ import annotations

import math
import secrets
from functools import partial

import numpy as np

from symgrad import dtypes
from symgrad.nodes import leaf
from symgrad.tensor import Tensor
from symgrad.uploads import from_host

DEFAULT_SEED = 67280421310721  # the seed of PyTorch's default CPU generator
STATE_SIZE = 5056  # bytes in PyTorch's CPU generator state (get_rng_state)
_N = 624  # words of mt19937 state
_U64 = np.uint64


def _seeded_key(seed: int) -> np.ndarray:
    """The mt19937 state after seeding: Knuth's recurrence from the seed's low 32 bits."""
    key = [seed & 0xFFFFFFFF]
    for i in range(1, _N):
        previous = key[-1]
        key.append((1812433253 * (previous ^ (previous >> 30)) + i) & 0xFFFFFFFF)
    return np.array(key, dtype=np.uint32)


class Generator:
    """``torch.Generator``: PyTorch's CPU generator, with its seed, state and cached normal."""

    def __init__(self, device="cpu"):
        if str(device) != "cpu":
            raise RuntimeError(f"symgrad's random generators are CPU generators; got device {device!r}")
        self._engine = np.random.MT19937(0)
        self.manual_seed(DEFAULT_SEED)

    @property
    def device(self) -> dtypes.device:
        return dtypes.CPU

    def manual_seed(self, seed) -> "Generator":
        seed = int(seed)
        if not -2**63 <= seed < 2**64:
            raise ValueError("Overflow when unpacking long long")
        seed %= 2**64  # PyTorch reads a negative seed as its unsigned 64-bit pattern
        self._initial_seed = seed
        self._engine.state = {"bit_generator": "MT19937", "state": {"key": _seeded_key(seed), "pos": _N}}
        self._fresh = True  # PyTorch's engine reads next=0 (not 624) until its first draw
        self.next_double_normal = None  # the second Box-Muller value, kept for the next draw
        self.next_float_normal = None  # kept only to round-trip PyTorch's state
        return self

    def seed(self) -> int:
        """Seed with a non-deterministic number, as PyTorch does (53 bits), and return it."""
        seed = secrets.randbits(53)
        self.manual_seed(seed)
        return seed

    def initial_seed(self) -> int:
        return self._initial_seed

    def uint32(self, n: int) -> np.ndarray:
        """``n`` 32-bit draws (as uint64), PyTorch's ``random()``."""
        self._fresh = self._fresh and n == 0
        return self._engine.random_raw(n).astype(_U64, copy=False)

    def uint32_narrow(self, n: int) -> np.ndarray:
        """The draws of ``uint32(n)`` as uint32, half the memory: NumPy's full-range ``integers``
        takes one 32-bit engine step per value, as ``random_raw`` does (the tests against PyTorch's
        draws would show a NumPy that did otherwise)."""
        self._fresh = self._fresh and n == 0
        return np.random.Generator(self._engine).integers(0, 2**32, n, dtype=np.uint32)

    def uint64(self, n: int) -> np.ndarray:
        """``n`` 64-bit draws, PyTorch's ``random64()``: two 32-bit draws, the first one high."""
        pairs = self.uint32(2 * n).reshape(n, 2)
        return (pairs[:, 0] << _U64(32)) | pairs[:, 1]

    def get_state(self) -> Tensor:
        """PyTorch's state bytes (a uint8 tensor): the seed, the mt19937 words and position, the
        cached normal values."""
        return Tensor(leaf(from_host(self._state_bytes()), dtypes.uint8))

    def _state_bytes(self) -> np.ndarray:
        engine = self._engine.state["state"]
        pos = int(engine["pos"])
        state = np.zeros(STATE_SIZE, dtype=np.uint8)
        state[0:8].view(np.uint64)[0] = self._initial_seed
        state[8:16].view(np.int32)[:] = (_N + 1 - pos, 1)  # left, seeded
        state[16:24].view(np.uint64)[0] = 0 if self._fresh else pos  # next
        state[24:5016].view(np.uint64)[:] = engine["key"]
        if self.next_double_normal is not None:
            state[5024:5032].view(np.float64)[0] = self.next_double_normal  # normal_y
            state[5040:5044].view(np.int32)[0] = 1  # normal_is_valid
        if self.next_float_normal is not None:
            state[5048:5052].view(np.float32)[0] = self.next_float_normal
            state[5052] = 1
        return state

    def set_state(self, state) -> "Generator":
        """Take a state from ``get_state`` (symgrad's or PyTorch's: the bytes are the same)."""
        if isinstance(state, Tensor) and state.dtype is not dtypes.uint8:
            raise TypeError("RNG state must be a torch.ByteTensor")
        state = np.ascontiguousarray(np.asarray(state), dtype=np.uint8)
        if state.size != STATE_SIZE:
            raise RuntimeError(f"Expected a CPUGeneratorImplState of size {STATE_SIZE} but found the input "
                               f"RNG state size to be {state.size}")
        left, seeded = (int(v) for v in state[8:16].view(np.int32))
        next_ = int(state[16:24].view(np.uint64)[0])
        if not seeded or not 0 < left <= _N or next_ > _N:
            raise RuntimeError("Invalid mt19937 state")
        key = state[24:5016].view(np.uint64).astype(np.uint32)
        self._engine.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": _N + 1 - left}}
        self._fresh = left == 1 and next_ == 0
        self._initial_seed = int(state[0:8].view(np.uint64)[0])
        valid_double = state[5040:5044].view(np.int32)[0]
        self.next_double_normal = float(state[5024:5032].view(np.float64)[0]) if valid_double else None
        self.next_float_normal = float(state[5048:5052].view(np.float32)[0]) if state[5052] else None
        return self


default_generator = Generator()


def manual_seed(seed) -> Generator:
    """``torch.manual_seed``: seed the default generator and return it."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    return default_generator.get_state()


def set_rng_state(new_state) -> None:
    default_generator.set_state(new_state)


# ----------------------------------------------------------------- exact fused multiply-add
#
# PyTorch's kernels are compiled with fused multiply-adds (a*b + c rounded once).  NumPy has none,
# so they are computed exactly: float32 through float64 (the product is exact there, and a sum
# rounded to odd in 53 bits rounds correctly to 24), float64 with error-free transformations
# (Boldo and Melquiond's emulation of an FMA by rounding to odd).

def _two_sum(a, b):
    s = a + b
    b_virtual = s - a
    return s, (a - (s - b_virtual)) + (b - b_virtual)


def _two_product(a, b):
    p = a * b
    a_high, b_high = _split(a), _split(b)
    a_low, b_low = a - a_high, b - b_high
    return p, ((a_high * b_high - p) + a_high * b_low + a_low * b_high) + a_low * b_low


def _split(a):
    scaled = 134217729.0 * a  # 2**27 + 1: Veltkamp's split into two 26-bit halves
    return scaled - (scaled - a)


def _round_to_odd(s, error):
    """``s`` (a rounded sum whose exact error is ``error``) rounded to odd instead of nearest."""
    bits = s.view(np.int64)
    inexact_even = (error != 0) & ((bits & 1) == 0)
    toward_error = np.where((error > 0) == (s > 0), 1, -1)
    return np.where(inexact_even, bits + toward_error, bits).view(np.float64)


def fma32(a, b, c) -> np.ndarray:
    """a*b + c rounded once to float32.  The float64 sum rounds correctly to float32 unless it
    lies exactly halfway between two float32 numbers (or among float32's subnormals): only
    those few are recomputed, rounded to odd."""
    a, b, c = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (a, b, c)))
    with np.errstate(invalid="ignore", over="ignore"):
        s = a * b + c
        result = s.astype(np.float32)
        halfway = (s.view(np.int64) & 0x1FFFFFFF) == 0x10000000
        hard = np.flatnonzero(halfway | (np.abs(s) < 2.0**-125))
        if hard.size:
            a, b, c = a.ravel()[hard], b.ravel()[hard], c.ravel()[hard]
            exact = _round_to_odd(*_two_sum(a * b, c)).astype(np.float32)
            result.ravel()[hard] = np.where(np.isfinite(exact), exact, result.ravel()[hard])
    return result


def fma64(a, b, c) -> np.ndarray:
    """a*b + c rounded once: the product split exactly in two, the sum's tail rounded to odd."""
    a, b, c = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (a, b, c)))
    with np.errstate(invalid="ignore", over="ignore"):
        product, product_error = _two_product(a, b)
        high, low = _two_sum(c, product)
        tail = _round_to_odd(*_two_sum(low, product_error))
        plain = a * b + c
        return np.where(np.isfinite(plain), high + tail, plain)


def _fma(dtype):
    return fma32 if dtype is dtypes.float32 else fma64


# ----------------------------------------------------------------- uniform and integers

_F32 = np.float32


def _check_floating(dtype, kernel: str) -> None:
    if dtype not in (dtypes.float32, dtypes.float64):
        raise NotImplementedError(f'"{kernel}" not implemented for \'{dtypes.torch_name(dtype)}\' '
                                  "(symgrad draws float32 and float64)")


def _unit(generator: Generator, n: int, dtype) -> np.ndarray:
    """Uniform [0, 1): the low 24 bits of a 32-bit draw (float32) or 53 of a 64-bit one (float64)."""
    if dtype is dtypes.float32:
        return (generator.uint32(n) & _U64(2**24 - 1)).astype(np.float32) * _F32(2.0**-24)
    return (generator.uint64(n) & _U64(2**53 - 1)).astype(np.float64) * 2.0**-53


def uniform(generator: Generator, n: int, dtype, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """``uniform_(low, high)``: ``u * (high - low) + low`` in the tensor's dtype, fused."""
    _check_floating(dtype, "check_uniform_bounds")
    if (low, high) == (0, 1):  # u * 1 + 0 is u: rand() skips the multiply-add
        return _unit(generator, n, dtype)
    low, high = dtype.numpy.type(low), dtype.numpy.type(high)
    if dtype is dtypes.float32:
        lattice = _lattice(high - low, low)
        if lattice is not None:
            return _lattice_float32(generator, n, *lattice)
        if _sums_exactly(high - low, low):
            return _scaled_float32(generator, n, high - low, low)
    return _fma(dtype)(_unit(generator, n, dtype), high - low, low).astype(dtype.numpy)


def _lattice(scale, low):
    """``(step, offset)`` with ``k 2**-24 scale + low == (k + offset) step`` exactly for every
    24-bit ``k``, ``step`` a positive float32 and ``k + offset`` exact in float32; else None.
    Symmetric bounds (nn.init's) and bounds from zero lie on such a lattice."""
    step = _F32(scale) * _F32(2.0**-24)
    if not 0 < step < np.inf or float(step) * 2.0**24 != float(scale):  # step rounded (subnormal)
        return None
    ratio = float(low) / float(step)
    if not -2**24 <= ratio <= 1 or round(ratio) * float(step) != float(low):  # exact: 25 bits times 24
        return None
    return step, round(ratio)


def _lattice_float32(generator: Generator, n: int, step, offset: int) -> np.ndarray:
    """float32 ``uniform_(low, high)`` on a lattice (``_lattice``): the fused multiply-add's one
    rounding is the float32 product's, so the draws stay float32 (the model build's speed).
    ``k + offset`` is exact in int32, and the product is written over the 32-bit draws: no
    array of 8-byte draws and no fresh array (a 784x512 layer's fresh pages cost as much as
    its arithmetic)."""
    draws = generator.uint32_narrow(n)
    draws &= np.uint32(2**24 - 1)
    k = draws.view(np.int32)
    k += np.int32(offset)  # exact: |k + offset| <= 2**24
    return np.multiply(k, step, out=k.view(np.float32), dtype=np.float32)


def _sums_exactly(scale, low) -> bool:
    """Whether ``k 2**-24 scale + low`` is exact in float64 for every 24-bit ``k``: its terms'
    lowest bits and its size span at most 53 bits (so for ``nn.init``'s symmetric bounds)."""
    scale, low = float(scale), float(low)
    if not (math.isfinite(scale) and math.isfinite(low)) or scale == 0:
        return False
    lowest = min(_lowest_bit(scale) - 24, _lowest_bit(low) if low else 1024)
    return lowest > -1000 and abs(scale) + abs(low) <= 2.0 ** (53 + lowest)


def _lowest_bit(x: float) -> int:
    """``e`` with ``x = odd * 2**e``."""
    numerator, denominator = x.as_integer_ratio()
    return (numerator & -numerator).bit_length() - denominator.bit_length()


def _scaled_float32(generator: Generator, n: int, scale, low) -> np.ndarray:
    """float32 ``uniform_(low, high)`` where the fused multiply-add is exact in float64
    (``_sums_exactly``): one rounding to float32, as the fused kernel rounds, in a third of the
    time of ``fma32`` (nn.init draws a model's weights this way)."""
    draws = generator.uint32(n)
    draws &= _U64(2**24 - 1)
    values = draws.astype(np.float64)
    values *= float(scale) * 2.0**-24
    values += float(low)
    return values.astype(np.float32)


def random_from_to(generator: Generator, n: int, dtype, low: int, high: int) -> np.ndarray:
    """``random_(low, high)`` and ``randint``: ``draw % (high - low) + low``, with 64-bit draws
    from a span of 2**28 up (where a 32-bit modulo would skew the distribution by some 5%)."""
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    if dtype.is_integer and dtype is not dtypes.int64:
        limits = np.iinfo(dtype.numpy)
        for bound, name in ((low, "from"), (high - 1, "to - 1")):
            if not limits.min <= bound <= limits.max:
                raise RuntimeError(f"{name} is out of bounds for {dtypes.type_id(dtype)}")
    span = high - low
    draws = (generator.uint64(n) if span >= 2**28 else generator.uint32(n)) % _U64(span)
    return (draws.astype(np.int64) + np.int64(low)).astype(dtype.numpy)


_RANDOM_MODULUS = {dtypes.int64: 2**63, dtypes.int32: 2**31, dtypes.int16: 2**15, dtypes.int8: 2**7, dtypes.uint8: 2**8,
                   dtypes.float32: 2**24 + 1,
                   dtypes.float64: 2**53 + 1, dtypes.bool_: 2}


def integers(generator: Generator, n: int, dtype) -> np.ndarray:
    """``random_()``: integers from 0 up to the dtype's maximum (its mantissa's, for floats)."""
    wide = dtype in (dtypes.int64, dtypes.float64)
    draws = generator.uint64(n) if wide else generator.uint32(n)
    return (draws % _U64(_RANDOM_MODULUS[dtype])).astype(dtype.numpy)


def randperm(generator: Generator, n: int, dtype=dtypes.int64) -> np.ndarray:
    """PyTorch's Fisher-Yates: position i swaps with i + draw % (n - i), one 32-bit draw each."""
    if n < 2:
        return np.arange(n, dtype=dtype.numpy)
    remaining = np.arange(n, 1, -1, dtype=np.uint64)
    partners = (generator.uint32(n - 1) % remaining).astype(np.int64) + np.arange(n - 1)
    permutation = list(range(n))
    for i, j in enumerate(partners.tolist()):
        permutation[i], permutation[j] = permutation[j], permutation[i]
    return np.array(permutation, dtype=dtype.numpy)


def bernoulli(generator: Generator, n: int, dtype, p) -> np.ndarray:
    """``bernoulli_(p)``, ``u < p`` in ``dtype``: a number ``p`` (or an array of ``n`` float64
    ones) is compared with a float64 uniform, an array of float32 ones with a float32 uniform."""
    if not isinstance(p, np.ndarray):
        if not 0 <= p <= 1:
            raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
    elif not np.all((p >= 0) & (p <= 1)):
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
    uniform_dtype = dtypes.float32 if getattr(p, "dtype", None) == np.float32 else dtypes.float64
    return (_unit(generator, n, uniform_dtype) < p).astype(dtype.numpy)


def exponential(generator: Generator, n: int, dtype, lambd: float = 1.0) -> np.ndarray:
    """``exponential_(lambd)``: ``-1/lambd * log1p(-u)`` in float64 (the C library's log1p)."""
    _check_floating(dtype, "exponential_cpu")
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    log = np.fromiter(map(math.log1p, (-_unit(generator, n, dtypes.float64)).tolist()), np.float64, n)
    return ((-1.0 / lambd) * log).astype(dtype.numpy)


def cauchy(generator: Generator, n: int, dtype, median: float = 0.0, sigma: float = 1.0) -> np.ndarray:
    """``cauchy_(median, sigma)``: ``median + sigma tan(pi (u - 1/2))`` in float64 (the C library's tan)."""
    if not dtype.is_floating_point:
        raise RuntimeError(f"Cauchy distribution is a continuous probability distribution. dtype must be a floating "
                           f"point but you specified {dtypes.type_id(dtype)}")
    _check_floating(dtype, "cauchy_cpu")
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    tangents = map(math.tan, (math.pi * (_unit(generator, n, dtypes.float64) - 0.5)).tolist())
    return (median + sigma * np.fromiter(tangents, np.float64, n)).astype(dtype.numpy)


def log_normal(generator: Generator, n: int, dtype, mean: float = 1.0, std: float = 2.0) -> np.ndarray:
    """``log_normal_(mean, std)``: exp of a float64 normal drawn one value at a time (Box-Muller,
    the second value kept for the next draw), with the C library's exp."""
    _check_floating(dtype, "log_normal_cpu")
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    normals = fma64(_standard_normals(generator, n), std, mean)
    return np.fromiter(map(math.exp, normals.tolist()), np.float64, n).astype(dtype.numpy)


def geometric(generator: Generator, n: int, dtype, p: float) -> np.ndarray:
    """``geometric_(p)``: the number of trials to the first success, ``ceil(log(u) / log(1 - p))`` in
    float64, into any dtype but bool (an integer tensor takes it as it is)."""
    if dtype is dtypes.bool_:
        raise NotImplementedError("\"geometric_cpu\" not implemented for 'Bool'")
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    per_trial = math.log(1.0 - p)
    trials = [math.ceil(math.log(u) / per_trial) if u > 0 else math.inf
              for u in _unit(generator, n, dtypes.float64).tolist()]
    return np.array(trials, dtype=np.float64).astype(dtype.numpy)


def rrelu_noise(generator: Generator, values: np.ndarray, dtype, lower: float, upper: float) -> np.ndarray:
    """rrelu's slopes in training, as PyTorch's CPU kernel draws them: in order, for each value at
    or below 0 (-0.0 and -inf too, not NaN), a float64 uniform ``u (upper - lower) + lower``
    (the bounds first rounded to ``dtype``; unfused, as measured) rounded to ``dtype``; 1 elsewhere."""
    low, high = float(dtype.numpy.type(lower)), float(dtype.numpy.type(upper))
    drawn = values <= 0
    noise = np.ones(values.shape, dtype.numpy)
    noise[drawn] = (_unit(generator, int(drawn.sum()), dtypes.float64) * (high - low) + low).astype(dtype.numpy)
    return noise


# ----------------------------------------------------------------- normal

def normal(generator: Generator, n: int, dtype, mean: float = 0.0, std: float = 1.0,
           contiguous: bool = True) -> np.ndarray:
    """``normal_(mean, std)`` as PyTorch's CPU kernel: Box-Muller one value at a time (keeping the
    second value for the next call) below 16 elements or for a tensor not laid out in order,
    sixteen at a time otherwise."""
    _check_floating(dtype, "normal_kernel_cpu")
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    if n < 16 or not contiguous:
        return fma64(_standard_normals(generator, n), std, mean).astype(dtype.numpy)
    mean, std = dtype.numpy.type(mean), dtype.numpy.type(std)
    fill = _sixteen_float32 if dtype is dtypes.float32 else _sixteen_float64
    values = np.empty(n, dtype=dtype.numpy)
    whole = n - n % 16
    values[:whole] = fill(_unit(generator, n, dtype)[:whole], mean, std)
    if whole < n:  # the last 16 are drawn again and overwrite the tail
        values[n - 16:] = fill(_unit(generator, 16, dtype), mean, std)
    return values


def out_of_order(draw):
    """``draw`` as PyTorch runs it into a tensor not laid out in order: normal_'s sixteen-at-a-time
    fill needs a contiguous tensor; the other kernels draw one value at a time anyway."""
    return partial(draw, contiguous=False) if getattr(draw, "func", draw) is normal else draw


def _standard_normals(generator: Generator, n: int) -> np.ndarray:
    """One Box-Muller pair per two values, in float64 with the C library's functions; the sine
    half is kept on the generator and used first by the next draw."""
    values = []
    for _ in range(n):
        if generator.next_double_normal is not None:
            values.append(generator.next_double_normal)
            generator.next_double_normal = None
            continue
        u = _unit(generator, 2, dtypes.float64).tolist()
        radius = math.sqrt(-2.0 * math.log1p(-u[1]))
        theta = 2.0 * math.pi * u[0]
        generator.next_double_normal = radius * math.sin(theta)
        values.append(radius * math.cos(theta))
    return np.array(values, dtype=np.float64)


def _blocks(uniforms: np.ndarray):
    """Each block of 16 uniforms: its first 8 give the radii, its last 8 the angles."""
    blocks = uniforms.reshape(-1, 16)
    return blocks[:, :8], blocks[:, 8:]


def _sixteen_float64(uniforms, mean, std):
    """``r cos(t)`` then ``r sin(t)`` per block, with r = sqrt(-2 log(1 - u)) and t = 2 pi v, with
    the C library's log, cos and sin (NumPy's own differ in the last bit)."""
    u, v = _blocks(uniforms)
    log = np.fromiter(map(math.log, (1.0 - u).ravel().tolist()), np.float64, u.size).reshape(u.shape)
    radius = np.sqrt(-2.0 * log)
    theta = (2.0 * math.pi * v).ravel().tolist()
    cos = np.fromiter(map(math.cos, theta), np.float64, v.size).reshape(v.shape)
    sin = np.fromiter(map(math.sin, theta), np.float64, v.size).reshape(v.shape)
    return np.concatenate([fma64(radius * cos, std, mean), fma64(radius * sin, std, mean)], axis=1).ravel()


def _sixteen_float32(uniforms, mean, std):
    """The float32 blocks go through PyTorch's AVX2 kernel: Cephes-style polynomial log and sincos
    in float32 arithmetic (sse_mathfun's), reproduced operation by operation below."""
    u, v = _blocks(uniforms)
    radius = np.sqrt(_F32(-2.0) * _log_float32(_F32(1.0) - u))
    sin, cos = _sincos_float32(_F32(2.0 * math.pi) * v)
    return np.concatenate([fma32(radius * cos, std, mean), fma32(radius * sin, std, mean)],
                          axis=1).ravel()


_LOG_POLYNOMIAL = tuple(_F32(c) for c in (
    7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
    -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1))
_LN2_HIGH, _LN2_LOW = _F32(0.693359375), _F32(-2.12194440e-4)


def _log_float32(x: np.ndarray) -> np.ndarray:
    """log of x in (0, 1]: x = m 2**e with m in [sqrt(1/2), sqrt(2)), log(m) by a polynomial in
    m - 1, then e log 2 added in two parts.  Where the compiled kernel fuses, this fuses."""
    bits = x.view(np.int32)
    exponent = ((bits >> 23) - 126).astype(np.float32)
    m = (bits & ~0x7F800000 | 0x3F000000).view(np.float32)  # in [0.5, 1)
    small = m < _F32(0.707106781186547524)
    exponent = exponent - np.where(small, _F32(1), _F32(0))
    m = (m - _F32(1)) + np.where(small, m, _F32(0))
    z = m * m
    y = np.full_like(m, _LOG_POLYNOMIAL[0])
    for c in _LOG_POLYNOMIAL[1:]:
        y = fma32(y, m, c)
    y = fma32(y * m, z, exponent * _LN2_LOW)
    y = fma32(z, _F32(-0.5), y)
    return fma32(exponent, _LN2_HIGH, m + y)


_PI_OVER_4_PARTS = (_F32(-0.78515625), _F32(-2.4187564849853515625e-4), _F32(-3.77489497744594108e-8))
_COS_POLYNOMIAL = (_F32(2.443315711809948e-5), _F32(-1.388731625493765e-3), _F32(4.166664568298827e-2))
_SIN_POLYNOMIAL = (_F32(-1.9515295891e-4), _F32(8.3321608736e-3), _F32(-1.6666654611e-1))


def _sincos_float32(x: np.ndarray):
    """(sin x, cos x) for x >= 0: reduced to an octant by j = nearest even integer to x 4/pi, then
    the sine and cosine polynomials, swapped and signed by j."""
    j = (x * _F32(1.27323954473516)).astype(np.int32)
    j = (j + 1) & ~1
    y = j.astype(np.float32)
    for part in _PI_OVER_4_PARTS:
        x = fma32(y, part, x)
    z = x * x
    cos = fma32(fma32(np.full_like(z, _COS_POLYNOMIAL[0]), z, _COS_POLYNOMIAL[1]), z, _COS_POLYNOMIAL[2])
    cos = fma32(cos * z, z, -(z * _F32(0.5))) + _F32(1)
    sin = fma32(fma32(np.full_like(z, _SIN_POLYNOMIAL[0]), z, _SIN_POLYNOMIAL[1]), z, _SIN_POLYNOMIAL[2])
    sin = fma32(sin * z, x, x)
    sine_octant = (j & 2) == 0
    sin_part = np.where(sine_octant, sin, _F32(0))
    cos_part = np.where(sine_octant, _F32(0), cos)
    sin_value = cos_part + sin_part
    cos_value = (cos - cos_part) + (sin - sin_part)
    sin_value = np.where((j & 4) != 0, -sin_value, sin_value)
    cos_value = np.where(((j - 2) & 4) == 0, -cos_value, cos_value)
    return sin_value, cos_value


# ----------------------------------------------------------------- multinomial

def multinomial(generator: Generator, rows: np.ndarray, n: int, replacement: bool, dtype) -> np.ndarray:
    """``n`` category indices per row of ``rows`` (weights in ``dtype``), as PyTorch's CPU kernels draw
    them.  Without replacement, or for one sample, the exponential trick: the ``n`` largest of
    ``weight / q`` with ``q`` one ``exponential_`` draw per entry, row after row.  Otherwise, per
    row: the weights' running sum in ``dtype`` divided by its total (the last forced to 1), and for
    each sample a float64 uniform's slot, the first whose running sum is not below it."""
    _check_floating(dtype, "multinomial")
    if not replacement or n == 1:
        if not (np.all(rows >= 0) and np.all(rows < np.inf)):  # (NaN fails both)
            raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
        if np.any(rows.sum(axis=1, dtype=dtype.numpy) == 0):
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
        ratios = rows / exponential(generator, rows.size, dtype).reshape(rows.shape)
        return _largest(ratios, n)
    drawn = np.empty((len(rows), n), dtype=np.int64)
    for i, row in enumerate(rows):  # a bad row raises after the rows before it drew, as PyTorch's loop
        if not np.all(row >= 0):
            raise RuntimeError("invalid multinomial distribution (encountering probability entry < 0)")
        if not np.all(np.isfinite(row)):
            raise RuntimeError("invalid multinomial distribution (encountering probability entry = infinity or NaN)")
        running = np.cumsum(row, dtype=dtype.numpy)  # (in order, one rounding per addition)
        if not (running.size and running[-1] > 0):  # (no categories: nothing sums above 0)
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
        running = running / running[-1]
        running[-1] = 1
        drawn[i] = np.searchsorted(running.astype(np.float64), _unit(generator, n, dtypes.float64), side="left")
    return drawn


def _largest(ratios: np.ndarray, n: int) -> np.ndarray:
    """The indices of each row's ``n`` largest ratios, largest first (PyTorch's argmax or topk).  Equal
    ratios among them (categories of probability 0 drawn when ``n`` exceeds the positive ones) come in
    the order of PyTorch's ``std::nth_element``, which is not reproduced: refused rather than guessed."""
    order = np.argsort(-ratios, axis=1, kind="stable")
    chosen = np.take_along_axis(ratios, order[:, :n + 1], axis=1)
    if np.any(chosen[:, 1:] == chosen[:, :-1]) and n > 1:
        raise NotImplementedError(f"multinomial without replacement drawing {n} samples from a row with fewer "
                                  "than that many categories of positive probability: PyTorch orders the "
                                  "categories of probability 0 as its std::nth_element leaves them, which symgrad "
                                  "does not reproduce")
    return order[:, :n]

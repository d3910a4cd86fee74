"""IR heads for the special functions of ``torch`` and ``torch.special``: log-gamma and its
derivatives, the inverse and scaled error functions, the normal distribution's tails, modified
Bessel functions, zeta, entropy, logit, the log-sum of two exponentials, sinc and the like.

Each head's array code is one format string over its arguments (``{a}``, ``{b}``, ...) and names of
an array module (``{where}``) or of its special functions (``{gammaln}``).  That one text is what
codegen prints (``_jax_source``: ``jnp`` and ``jax.scipy.special``), what ``sympy.lambdify`` prints
(JAX, or NumPy with SciPy's special functions: there zeta, whose text loops in JAX, is SciPy's own
Cephes zeta) and what a constant folds to (JAX, in float64), so a head means one thing everywhere.
Where PyTorch's CPU kernel (its scalar loop) gives other numbers than JAX's function (the sign of
digamma's infinity at 0, trigamma's reflection, zeta at its poles and below 0, the tails of log_ndtr)
the text is PyTorch's formula.  Each derivative (``fdiff``) is the one PyTorch's backward computes,
built without SymPy's evaluation where that would fold more than floats do.
"""
from __future__ import annotations

import functools
import math
import string

import sympy as sp

from symgrad.ir import ieee
from symgrad.ir.functions import (_operand, _RealFunction, equal, greater, isfinite, less, less_equal, logical_or,
                                  masked, select, sign)

# Names the array code takes from the special-function module rather than from the array module.
SPECIAL_NAMES = frozenset({"gammaln", "digamma", "erfinv", "erfc", "i0", "i0e", "i1", "i1e", "ndtri", "zeta"})
LOOP = "jax.lax.while_loop"  # {while_loop}: JAX only (``scipy_code_text`` is a head's text for SciPy)


class Coded(_RealFunction):
    """An elementwise head whose array code is the format string ``code`` (``code_text()`` where
    the code depends on a number among its arguments)."""

    code = ""

    def code_text(self) -> str:
        return self.code

    def scipy_code_text(self) -> str:
        return self.code_text()

    def _text(self, printer, code, module_name) -> str:
        names = {name: module_name(name) for name in _module_names(code)}
        names.update(zip("abcd", (_operand(printer, a) for a in self.args)))
        return f"({code.format_map(names)})"

    def _jax_source(self, printer):  # codegen's printer
        return self._text(printer, self.code_text(), lambda n: LOOP if n == "while_loop" else
                          f"jax.scipy.special.{n}" if n in SPECIAL_NAMES else f"jnp.{n}")

    def _numpycode(self, printer):  # sympy.lambdify's
        if printer._module == "jax.numpy":
            code, special = self.code_text(), "jax.scipy.special"
        else:
            code, special = self.scipy_code_text(), "scipy.special"
        return self._text(printer, code, lambda n: printer._module_format(
            LOOP if n == "while_loop" else f"{special if n in SPECIAL_NAMES else printer._module}.{n}"))

    _jaxcode = _numpycode

    @classmethod
    def numeric(cls, *args):
        with sp.evaluate(False):
            head = cls(*(sp.Float(a) for a in args))
        return float(sp.lambdify([], head, modules="jax")())


class Flat(Coded):
    """A head whose derivative is zero wherever it is defined: tests, exponents, integers."""

    zero_gradient = True

    def fdiff(self, argindex=1):
        return sp.S.Zero


@functools.lru_cache(maxsize=None)
def _module_names(code: str) -> tuple:
    """The names a code string takes from modules: its fields that are not arguments."""
    return tuple({field for _, field, _, _ in string.Formatter().parse(code) if field and field not in "abcd"})


def _unevaluated(build):
    """``build()`` with SymPy's evaluation off: a derivative keeps each operation PyTorch's does."""
    with sp.evaluate(False):
        return build()


# ------------------------------------------------------------------------ gamma and polygamma


class lgamma(Coded):
    """log|Gamma(x)|: inf at 0 and the negative integers."""

    code = "{gammaln}({a})"
    nargs = 1

    def fdiff(self, argindex=1):
        return digamma(self.args[0])


class digamma(Coded):
    """PyTorch's digamma: -inf at +0 and inf at -0 (JAX's is NaN there), NaN at the negative integers."""

    code = "{where}({a} == 0, {copysign}({inf}, -{a}), {digamma}({a}))"
    nargs = 1

    def fdiff(self, argindex=1):
        return polygamma(1, self.args[0])


def _trigamma_code() -> str:
    """PyTorch's trigamma of x = ``{b}``: reflected below 1/2 (sign -1, less pi^2 / sin^2(pi x)),
    six steps of the recurrence on y, then the asymptotic series at y + 6 (w = 1 / (y + 6)^2).  At
    the negative integers sin(pi x) is a rounding error, not 0: a large finite number, as PyTorch's."""
    shifted = ["y" + " + 1" * i for i in range(7)]
    steps = " + ".join(f"1 / (({y}) * ({y}))" for y in shifted[:6])
    series = "(lambda z, w: (1 + 1 / (2 * z) + w * (1 / 6 - w * (1 / 30 - w / 42))) / z)"
    reflection = "{where}(r, -({pi} * {pi}) / {sin}({pi} * x) ** 2, 0.0)"
    body = f"{reflection} + {steps} + {series}({shifted[6]}, 1 / (({shifted[6]}) * ({shifted[6]})))"
    return f"(lambda x, r: {{where}}(r, -1.0, 1.0) * (lambda y: {body})({{where}}(r, 1 - x, x)))({{b}}, {{b}} < 0.5)"


TRIGAMMA = _trigamma_code()


def _zeta_code() -> str:
    """PyTorch's zeta(x, q): Cephes' computed in float64 (its CPU kernels accumulate floats in doubles).

    Cephes' tests first: NaN for x < 1; for q <= 0, inf at an integer q and NaN for a non-integer x.
    Then Cephes' sum of (q + k)^-x: for a negative q its terms up to q + k > 9 added one by one, as
    Cephes does (so that (-1/2)^-x and (1/2)^-x cancel exactly; up to 2^20 of them), and JAX's zeta
    from there on (JAX's, Cephes' Euler-Maclaurin sum at q itself, is wrong below -9 and loose below 0).  Where that is NaN at a huge x, what Cephes' sum stops at: inf from a term below
    1, 1 at q = 1, and above it 0, or NaN once its Euler-Maclaurin coefficients x (x + 1) ... (x + 22)
    overflow (0 * inf; JAX's 0 there too)."""
    overflowing = 25256835601046.0
    shifts = "{where}((q < 0) & (q > -1048576.0), {ceil}(9 - q), 0.0)"
    below = ("{while_loop}(lambda c: c[0] < {max}(m, initial=0.0), lambda c: [c[0] + 1, c[1] + {where}(c[0] < m, "
             "{power}(q + c[0], -x), 0.0)], [0.0, {zeros_like}(q * x)])[1]")
    summed = f"(lambda m: {below} + {{zeta}}(x, q + m))({shifts})"
    huge = f"{{where}}(q < 1, {{inf}}, {{where}}(q == 1, 1.0, {{where}}(x >= {overflowing}, {{nan}}, 0.0)))"
    emptied = f"{{where}}((x >= {overflowing}) & (z == 0), {{nan}}, z)"
    chosen = f"(lambda z: {{where}}({{isnan}}(z) & {{isfinite}}(q) & ~{{isnan}}(x), {huge}, {emptied}))({summed})"
    tests = ("{where}(x < 1, {nan}, {where}((q <= 0) & (q == {floor}(q)), {inf}, "
             "{where}((q <= 0) & (x != {floor}(x)), {nan}, CHOSEN)))")
    return (f"(lambda x, q: {tests.replace('CHOSEN', chosen)})"
            "({asarray}({a}, {float64}), {asarray}({b}, {float64})).astype({result_type}({a}, {b}))")


ZETA = _zeta_code()


class polygamma(Coded):
    """The n-th derivative of digamma (n a non-negative integer): digamma itself, PyTorch's trigamma,
    and above it PyTorch's (-1)^(n+1) exp(lgamma(n + 1)) zeta(n + 1, x), infinite at x = 0 and the
    negative integers."""

    nargs = 2

    def code_text(self) -> str:
        n = int(self.args[0])
        if n == 0:
            return digamma.code.replace("{a}", "{b}")
        if n == 1:
            return TRIGAMMA
        return f"{self._factor()!r} * " + ZETA.replace("{a}", repr(float(n + 1)))

    def scipy_code_text(self) -> str:
        n = int(self.args[0])
        return self.code_text() if n < 2 else f"{self._factor()!r} * {{zeta}}({float(n + 1)!r}, {{b}})"

    def _factor(self) -> float:
        n = int(self.args[0])
        return (1.0 if n % 2 else -1.0) * math.exp(math.lgamma(n + 1.0))

    def fdiff(self, argindex=1):  # n is a number, never differentiated
        n, x = self.args
        return polygamma(n + 1, x) if argindex == 2 else sp.S.Zero


class plus_zero(Coded):
    """0.0 + x as IEEE adds it: x, but 0.0 at -0.0 (XLA folds a written x + 0.0 into x).  PyTorch's
    mvlgamma adds x to the offsets 0, -1/2, ..., so lgamma and digamma meet +0.0 there."""

    code = "{where}({a} == 0, 0.0, {a})"
    nargs = 1

    def fdiff(self, argindex=1):
        return sp.S.One


# ------------------------------------------------------------------------------ error functions


class erfc(Coded):
    code = "{erfc}({a})"
    nargs = 1

    def fdiff(self, argindex=1):
        x = self.args[0]
        return _unevaluated(lambda: -2 / sp.sqrt(sp.pi) * sp.exp(-x ** 2))


class erfinv(Coded):
    """The inverse of erf on [-1, 1] (+-inf at +-1, NaN beyond)."""

    code = "{erfinv}({a})"
    nargs = 1

    def fdiff(self, argindex=1):
        return _unevaluated(lambda: sp.Rational(1, 2) * sp.sqrt(sp.pi) * sp.exp(self ** 2))


def _continued_fraction(x: str, depth: int) -> str:
    """Laplace's continued fraction of 1 / (sqrt(pi) erfcx(x)): x + (1/2) / (x + 1 / (x + ...))."""
    text = x
    for k in range(depth, 0, -1):
        text = f"{x} + {k / 2!r} / ({text})"
    return text


# exp(x^2) erfc(x) below 5, where both are finite and the product loses about x^2 ulps; above it the
# continued fraction, which 16 terms make exact to double precision from 5 on.
ERFCX = ("(lambda x: {where}(x < 5, {exp}(x * x) * {erfc}(x), "
         f"{1 / math.sqrt(math.pi)!r} / ({_continued_fraction('x', 16)})))({{a}})")


class erfcx(Coded):
    """exp(x^2) erfc(x), without the overflow: inf below about -26 (-9 in float32), 0 at inf."""

    code = ERFCX
    nargs = 1

    def fdiff(self, argindex=1):
        x = self.args[0]
        return _unevaluated(lambda: 2 * x * self - 2 / sp.sqrt(sp.pi))


class ndtri(Coded):
    """The standard normal quantile: -inf at 0, inf at 1, NaN outside [0, 1]."""

    code = "{ndtri}({a})"
    nargs = 1

    def fdiff(self, argindex=1):
        return _unevaluated(lambda: sp.sqrt(2 * sp.pi) * sp.exp(self ** 2 / 2))


class log_ndtr(Coded):
    """log of the standard normal CDF as PyTorch computes it: with t = x / sqrt(2),
    log(erfcx(-t) / 2) - t^2 below -1 (no underflow), log1p(-erfc(t) / 2) above."""

    code = ("(lambda x, t: {where}(x < -1, {log}(" + ERFCX.replace("{a}", "-t") + " / 2) - t * t, "
            "{log1p}(-{erfc}(t) / 2)))({a}, {a} * " + repr(math.sqrt(0.5)) + ")")
    nargs = 1

    def fdiff(self, argindex=1):
        x = self.args[0]
        return _unevaluated(lambda: sp.exp(-(self + x ** 2 / 2)) / sp.sqrt(2 * sp.pi))


# ---------------------------------------------------------------------- modified Bessel functions


class machine_epsilon(Flat):
    """The spacing of its argument's dtype at 1 (float32's or float64's eps): where PyTorch's
    Bessel gradients switch to their limit at 0."""

    code = "{finfo}({result_type}({a})).eps"
    nargs = 1


def _beyond_epsilon(x):
    """|x| > eps: PyTorch's Bessel gradients take their limit at 0 elsewhere (NaN included)."""
    return greater(sp.Abs(x), machine_epsilon(x))


class i0(Coded):
    code = "{i0}({a})"
    nargs = 1

    def fdiff(self, argindex=1):
        return i1(self.args[0])


class i0e(Coded):
    """exp(-|x|) i0(x)."""

    code = "{i0e}({a})"
    nargs = 1

    def fdiff(self, argindex=1):
        x = self.args[0]
        return _unevaluated(lambda: i1e(x) - sign(x) * self)


class i1(Coded):
    """The first-order modified Bessel function (0 at -0, as PyTorch's)."""

    code = "{where}({a} == 0, 0.0, {i1}({a}))"
    nargs = 1

    def fdiff(self, argindex=1):  # i1(x) / x is 0/0 at 0: PyTorch's 1/2 there
        x = self.args[0]
        return select(_beyond_epsilon(x), _unevaluated(lambda: i0(x) - self / x), sp.S.Half)


class i1e(Coded):
    """exp(-|x|) i1(x)."""

    code = "{where}({a} == 0, 0.0, {i1e}({a}))"
    nargs = 1

    def fdiff(self, argindex=1):
        x = self.args[0]
        return select(_beyond_epsilon(x), _unevaluated(lambda: i0e(x) - self * (sign(x) + 1 / x)), sp.S.Half)


# --------------------------------------------------------------------------------- the others


class zeta(Coded):
    """The Hurwitz zeta function zeta(x, q); PyTorch differentiates it in q only."""

    code = ZETA
    nargs = 2

    def scipy_code_text(self) -> str:
        return "{zeta}({a}, {b})"  # SciPy's is Cephes' itself

    def fdiff(self, argindex=1):
        x, q = self.args
        if argindex == 1:
            raise NotImplementedError("the derivative for 'zeta' is not implemented.")
        return _unevaluated(lambda: -x * zeta(ieee.add(x, sp.S.One), q))


class entr(Coded):
    """-x log(x): 0 at 0, -inf below it."""

    code = "{where}({isnan}({a}), {a}, {where}({a} > 0, -{a} * {log}({a}), {where}({a} == 0, 0.0, -{inf})))"
    nargs = 1

    def fdiff(self, argindex=1):
        return _unevaluated(lambda: -(1 + sp.log(self.args[0])))


class sinc(Coded):
    """sin(pi x) / (pi x), 1 at 0; PyTorch's gradient, 0 where pi x^2 is 0 (underflow included)."""

    code = "{where}({a} == 0, 1.0, {sin}({pi} * {a}) / ({pi} * {a}))"
    nargs = 1

    def fdiff(self, argindex=1):
        x = self.args[0]
        squared = _unevaluated(lambda: x * x * sp.pi)
        return select(equal(squared, 0), sp.S.Zero,
                      _unevaluated(lambda: (x * sp.pi * sp.cos(x * sp.pi) - sp.sin(x * sp.pi)) / squared))


class logaddexp(Coded):
    """log(exp(a) + exp(b)) as PyTorch's kernel: max(a, b) + log1p(exp(-|a - b|)), and a itself
    where a and b are the same infinity."""

    code = "{where}({isinf}({a}) & ({a} == {b}), {a}, {maximum}({a}, {b}) + {log1p}({exp}(-{abs}({a} - {b}))))"
    nargs = 2

    def fdiff(self, argindex=1):
        a, b = self.args if argindex == 1 else reversed(self.args)
        return _unevaluated(lambda: 1 / (1 + sp.exp(b - a)))


class logaddexp2(Coded):
    """log2(2^a + 2^b), as logaddexp in base 2."""

    code = ("{where}({isinf}({a}) & ({a} == {b}), {a}, {maximum}({a}, {b}) + {log1p}({exp2}(-{abs}({a} - {b})))"
            f" * {1 / math.log(2)!r})")
    nargs = 2

    def fdiff(self, argindex=1):
        a, b = self.args if argindex == 1 else reversed(self.args)
        return _unevaluated(lambda: 1 / (1 + sp.Pow(2, b - a)))


def _logit_slope(x):
    """PyTorch's logit_backward kernel (its scalar loop; the vectorized one, which large tensors take,
    has -inf at -0.0 and ignores NaN in the bounds test): inf at 0 and 1, else 1 / (x (1 - x))."""
    return select(logical_or(equal(x, 0), equal(x, 1)), sp.oo, _unevaluated(lambda: 1 / (x * (1 - x))))


class logit(Coded):
    """log(x / (1 - x)); PyTorch's gradient, NaN outside [0, 1]."""

    code = "{log}({a} / (1 - {a}))"
    nargs = 1

    def fdiff(self, argindex=1):
        x = self.args[0]
        return select(logical_or(less(x, 0), greater(x, 1)), sp.nan, _logit_slope(x))


class binary_cross_entropy(Coded):
    """PyTorch's BCE of a probability q against a target t, each log clamped at -100; its
    derivatives are PyTorch's, so a saturated sigmoid (q rounded to 1.0) gives 0, not 0 * inf."""

    code = "({b} - 1)*{maximum}({log1p}(-({a})), -100.0) - {b}*{maximum}({log}({a}), -100.0)"
    nargs = 2

    @staticmethod
    def numeric(q, t):
        log = lambda v: math.log(v) if v > 0 else -math.inf  # noqa: E731
        return (t - 1) * max(log(1 - q), -100.0) - t * max(log(q), -100.0)

    def fdiff(self, argindex=1):
        q, t = self.args
        if argindex == 1:
            return binary_cross_entropy_slope(q, t)
        return -logit(q)  # unclamped, and differentiated, as PyTorch's


class binary_cross_entropy_slope(Coded):
    """PyTorch's derivative of BCE toward the probability, (q - t) / max(q (1 - q), 1e-12), whose own
    derivatives are PyTorch's double-backward formulas.  They are not the clamped form's at q = 0 or
    1: at q = t = 1 its slope toward q is 0 (the form's: 1e12), toward t -1e12."""

    code = "({a} - {b}) / {maximum}({a} * (1 - {a}), 1e-12)"
    nargs = 2

    @staticmethod
    def numeric(q, t):
        return (q - t) / max(q * (1 - q), 1e-12)

    def fdiff(self, argindex=1):
        q, t = self.args
        if argindex == 1:
            return (q * q - 2 * q * t + t) / (plus_epsilon(q) ** 2 * plus_epsilon(1 - q) ** 2)
        return -1 / sp.Max(q * (1 - q), sp.Float(1e-12))


class plus_epsilon(Coded):
    """x + 1e-12, as PyTorch's BCE double backward adds it to q and 1 - q: SymPy would fold 1 - q +
    1e-12 into 1.000000000001 - q, and so would XLA's simplifier, which is 1 - q in float32 (inf at
    q = 1 where PyTorch's is finite): XLA gets x behind a barrier."""

    code = "({a} + 1e-12)"
    nargs = 1

    def _jax_source(self, printer):
        return f"(jax.lax.optimization_barrier({_operand(printer, self.args[0])}) + 1e-12)"

    def fdiff(self, argindex=1):
        return sp.S.One


class logit_clamped(Coded):
    """logit of x clamped to [lo, hi] (lo where x < lo, else hi where x > hi: PyTorch's order);
    PyTorch's gradient, exactly 0 outside [lo, hi] (NaN at NaN)."""

    code = "(lambda c: {log}(c / (1 - c)))({where}({a} < {b}, {b}, {where}({a} > {c}, {c}, {a})))"
    nargs = 3

    def fdiff(self, argindex=1):
        if argindex != 1:
            return sp.S.Zero
        x, lo, hi = self.args
        return select(logical_or(less(x, lo), greater(x, hi)), sp.S.Zero, _logit_slope(x))


class xlog1py(Coded):
    """x log1p(y), 0 where x is 0 and NaN where y is NaN (PyTorch's order of tests), with PyTorch's
    gradients: log1p(y) but 0 where x is 0 and y <= -1, and x / (y + 1)."""

    code = "{where}({isnan}({b}), {b}, {where}({a} == 0, 0.0, {a} * {log1p}({b})))"
    nargs = 2

    def fdiff(self, argindex=1):
        x, y = self.args
        if argindex == 2:
            return _unevaluated(lambda: x / (y + 1))
        return select(equal(x, 0) * self.masks(y), sp.S.Zero, log1p_of(y))

    @staticmethod
    def masks(y):
        return less_equal(y, -1)


class xlog1py_of_number(xlog1py):
    """xlog1py of a tensor and a Python number y (its value may be a program input): PyTorch's gradient
    masks x = 0 unless y > -1, so at a NaN y too."""

    @staticmethod
    def masks(y):
        return select(greater(y, -1), sp.S.Zero, sp.S.One)


class log1p_of(Coded):
    """log1p as floats have it at a number too (NaN at -inf, where SymPy's log(-oo) is oo): xlog1py's
    gradient when y is a Python number."""

    code = "{log1p}({a})"
    nargs = 1

    def fdiff(self, argindex=1):
        return _unevaluated(lambda: 1 / (1 + self.args[0]))


class nan_to_num(Coded):
    """x with NaN, inf and -inf replaced by the numbers given, each test on x itself (``jnp.nan_to_num``
    tests the replaced values again: a NaN made -inf becomes neginf); the gradient passes where x is
    finite and is PyTorch's ``grad * isfinite(x)`` elsewhere (a NaN cotangent stays NaN)."""

    code = "{where}({isnan}({a}), {b}, {where}({a} == {inf}, {c}, {where}({a} == -{inf}, {d}, {a})))"
    nargs = 4

    def fdiff(self, argindex=1):
        return masked(isfinite(self.args[0]), sp.S.One, sp.S.Zero) if argindex == 1 else sp.S.Zero


# ------------------------------------------------------------------------------ frexp and ldexp


class frexp_mantissa(Coded):
    """The mantissa m of x = m 2^e, |m| in [0.5, 1) (x itself at 0, inf and NaN); PyTorch's
    gradient 2^-e."""

    code = "{frexp}({a})[0]"
    nargs = 1

    def fdiff(self, argindex=1):
        return _unevaluated(lambda: 1 / float32_power_of_two(frexp_exponent(self.args[0])))


class frexp_exponent(Flat):
    """The exponent e of x = m 2^e (an int32; 0 at 0, inf and NaN)."""

    code = "{frexp}({a})[1]"
    nargs = 1


class float32_power_of_two(Flat):
    """2^e of an integer e as a float32, exactly (inf from 2^128, 0 below 2^-149): PyTorch's
    ``exponent.exp2()`` in frexp's backward, whatever the mantissa's dtype."""

    code = "{ldexp}({float32}(1), {a})"
    nargs = 1


class ldexp(Coded):
    """x 2^e for an integer e, exactly in x's dtype (inf where it overflows); PyTorch's gradient in x,
    ``pow(2, e)`` computed in e's integer dtype: 0 for a negative e, wrapped from the width on."""

    code = "{ldexp}({a}, {b})"
    nargs = 2

    def fdiff(self, argindex=1):
        return integer_power_of_two(self.args[1]) if argindex == 1 else sp.S.Zero


class integer_power_of_two(Flat):
    """2^e in e's integer dtype, as integer arithmetic has it: 1 << e (0 for e < 0 or e >= the width)."""

    code = "{left_shift}({ones_like}({a}), {a})"
    nargs = 1

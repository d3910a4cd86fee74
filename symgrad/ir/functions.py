"""The IR's vocabulary beyond SymPy's own heads.

Two kinds of head appear in a program:

* elementwise functions (SymPy's ``exp``, ``log``, ``Max`` ... plus the ones below), whose
  derivatives SymPy computes through ``fdiff``;
* structural primitives (``Matmul``, ``ReduceSum`` ...), which change shapes.  Each one holds,
  in one class, its shape rule, its dtype rule and its vector-Jacobian product.  An
  assignment in a :class:`~symgrad.ir.program.Program` is either an elementwise expression or
  exactly one structural primitive applied to symbols and constants.

The JAX lowering of every head lives in ``codegen/printer.py``; it knows nothing else.
"""
from __future__ import annotations

import math

import numpy as np
import sympy as sp
from sympy.core.evalf import prec_to_dps

from symgrad.ir import ieee


# --------------------------------------------------------------------------- elementwise


class _ArrayCode:
    """What ``sympy.lambdify(..., modules="numpy")`` and ``modules="jax"`` print for an IR head
    (their printers ask ``_numpycode``/``_jaxcode``): ``array_code``, a format string over the
    arguments ``{a}``, ``{b}``, ``{c}``, ``{d}`` and the array module's functions by name
    (``{exp}`` is ``numpy.exp`` or ``jax.numpy.exp``).  The IR's own JAX text is codegen's."""

    array_code = None

    jax_array_code = None  # where JAX's spelling differs (a functional update)

    def _array_arguments(self, printer):
        return [_operand(printer, a) for a in self.args]

    def _numpycode(self, printer):
        names = _ModuleNames(printer)
        names.update(zip("abcd", self._array_arguments(printer)))
        code = self.jax_array_code if self.jax_array_code and printer._module == "jax.numpy" else self.array_code
        return f"({code.format_map(names)})"

    _jaxcode = _numpycode


def _operand(printer, arg) -> str:
    text = printer._print(arg)
    return text if arg.is_Atom else f"({text})"


def _literal(printer, arg) -> str:
    """An attribute of a structural head as the Python literal NumPy and JAX take."""
    if isinstance(arg, sp.Tuple):
        return repr(_ints(arg))
    if arg in (sp.true, sp.false):
        return repr(bool(arg))
    if isinstance(arg, sp.Symbol):  # a dtype's name
        return repr(arg.name)
    return printer._print(arg)


class _ModuleNames(dict):
    """Format keys that are not arguments are functions of the printer's array module."""

    def __init__(self, printer):
        super().__init__()
        self.printer = printer

    def __missing__(self, name):
        return self.printer._module_format(f"{self.printer._module}.{name}")


class _RealFunction(_ArrayCode, sp.Function):
    """An elementwise function of real arrays; on numbers it evaluates (so constants fold, and
    ``evalf`` works on arguments such as ``pi``)."""

    def _eval_is_real(self):
        return True

    @classmethod
    def eval(cls, *args):
        if all(a.is_Number or a is ieee.NEGATIVE_ZERO for a in args):
            return ieee.constant(float(cls.numeric(*(ieee.as_float(a) for a in args))))
        return None

    def _latex(self, printer):  # SymPy's own would read binary_cross_entropy as binary with subscripts
        name = type(self).__name__.replace("_", r"\_")
        return rf"\operatorname{{{name}}}{{\left({', '.join(printer._print(a) for a in self.args)} \right)}}"

    def _eval_evalf(self, prec):
        args = [a.evalf(prec_to_dps(prec)) for a in self.args]
        if all(a.is_Number for a in args):
            return sp.Float(float(self.numeric(*(float(a) for a in args))), prec_to_dps(prec))
        return None


class sigmoid(_RealFunction):
    """The logistic function 1/(1+exp(-x)); kept whole so it lowers to a stable form."""

    array_code = "1/(1 + {exp}(-({a})))"
    nargs = 1

    @staticmethod
    def numeric(x):
        return 1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x))

    def fdiff(self, argindex=1):
        return self * (1 - self)


class softplus(_RealFunction):
    """log(1+exp(x)), lowered stably; its derivative is sigmoid, defined everywhere."""

    array_code = "{logaddexp}(0, {a})"
    nargs = 1

    @staticmethod
    def numeric(x):
        return max(x, 0.0) + math.log1p(math.exp(-abs(x)))

    def fdiff(self, argindex=1):
        return sigmoid(self.args[0])


class softplus_kernel(_RealFunction):
    """PyTorch's softplus below its threshold as its kernel writes it, log1p(exp(beta x)) / beta
    (inf where exp overflows), with its backward exp(beta x) / (exp(beta x) + 1): no beta in it,
    so beta = 0 has a gradient (1/2) where the form's own derivative would be 0/0."""

    array_code = "{log1p}({exp}({a} * {b})) / {b}"  # operands come parenthesised (_operand)
    nargs = 2

    @staticmethod
    def numeric(x, beta):
        try:
            return math.log1p(math.exp(x * beta)) / beta
        except (OverflowError, ZeroDivisionError):
            return math.inf if x * beta > 0 or beta == 0 else math.nan

    def fdiff(self, argindex=1):
        x, beta = self.args
        slope = softplus_slope(x, beta)
        return slope if argindex == 1 else (x * slope - self) / beta


class softplus_slope(_RealFunction):
    """PyTorch's softplus backward below the threshold, exp(beta x) / (exp(beta x) + 1) (beta = 0 times an
    infinite x is NaN, as in its kernel), whose derivative is its double backward's, computed from
    the sigmoid: beta (1 - s) s with s = sigmoid(beta x)."""

    array_code = "(lambda z: z / (z + 1))({exp}({a} * {b}))"
    nargs = 2

    @staticmethod
    def numeric(x, beta):
        try:
            z = math.exp(x * beta)
        except OverflowError:
            return math.nan
        return z / (z + 1)

    def fdiff(self, argindex=1):
        x, beta = self.args
        if argindex == 2:  # beta is a number
            return sp.S.Zero
        s = sigmoid(ieee.mul(x, beta))
        return ieee.mul(ieee.mul(ieee.add(sp.S.One, ieee.mul(sp.S.NegativeOne, s)), s), beta)


class binary_cross_entropy_with_logits(_RealFunction):
    """PyTorch's (1 - t) x + softplus(-x) (NaN at the infinities where PyTorch's is), with its
    derivatives sigmoid(x) - t and -x, exact for large |x|."""

    array_code = "(1 - {b})*{a} + {logaddexp}(0, -({a}))"
    nargs = 2

    @staticmethod
    def numeric(x, t):
        return (1 - t) * x + softplus.numeric(-x)

    def fdiff(self, argindex=1):
        x, t = self.args
        return sigmoid(x) - t if argindex == 1 else -x


class step(_RealFunction):
    """0 where x <= 0, else 1 (1 at NaN): PyTorch's relu gradient, a mask without history."""

    zero_gradient = True

    array_code = "{where}({a} > 0, 1.0, 0.0)"
    nargs = 1

    @staticmethod
    def numeric(x):
        return 1.0 if x > 0 else 0.0

    def fdiff(self, argindex=1):
        return sp.S.Zero


class relu(_RealFunction):
    """max(x, 0) with the derivative PyTorch uses: 0 at x = 0."""

    array_code = "{where}({a} < 0, 0, {a})"  # -0.0 stays, as PyTorch's (XLA's max takes 0.0)
    nargs = 1

    @staticmethod
    def numeric(x):
        return max(x, 0.0)

    def fdiff(self, argindex=1):
        return step(self.args[0])


class equal(_RealFunction):
    """1 where a == b, else 0: the mask that routes a max's gradient to its arguments (made without
    history, as PyTorch's: a cotangent reaching it stops, even an infinite one)."""

    array_code = "{equal}({a}, {b})"
    nargs = 2
    zero_gradient = True

    @staticmethod
    def numeric(a, b):
        return 1.0 if a == b else 0.0

    def fdiff(self, argindex=1):
        return sp.S.Zero


class _Comparison(_RealFunction):
    """1 where the comparison holds, else 0 (the front end casts to bool); no gradient."""

    nargs = 2
    zero_gradient = True

    def fdiff(self, argindex=1):
        return sp.S.Zero


class greater(_Comparison):
    array_code = "{greater}({a}, {b})"
    numeric = staticmethod(lambda a, b: float(a > b))


class greater_equal(_Comparison):
    array_code = "{greater_equal}({a}, {b})"
    numeric = staticmethod(lambda a, b: float(a >= b))


class less(_Comparison):
    array_code = "{less}({a}, {b})"
    numeric = staticmethod(lambda a, b: float(a < b))


class less_equal(_Comparison):
    array_code = "{less_equal}({a}, {b})"
    numeric = staticmethod(lambda a, b: float(a <= b))


class not_equal(_Comparison):
    array_code = "{not_equal}({a}, {b})"
    numeric = staticmethod(lambda a, b: float(a != b))


class select(_RealFunction):
    """``where(condition, a, b)``: the gradient goes to the branch that was taken."""

    array_code = "{where}({a}, {b}, {c})"
    nargs = 3

    @staticmethod
    def numeric(condition, a, b):
        return a if condition else b

    def fdiff(self, argindex=1):
        condition = self.args[0]
        if argindex == 2:
            return select(condition, sp.S.One, sp.S.Zero)
        if argindex == 3:
            return select(condition, sp.S.Zero, sp.S.One)
        return sp.S.Zero


class masked(select):
    """``where(condition, a, b)`` as one factor of a derivative: the cotangent multiplies it whole
    (PyTorch's ``grad * where(...)``, pow's exponent), so a NaN or infinite cotangent is NaN in the
    zero branch too.  A select's branches each take the cotangent (``where``'s backward)."""


def _flat(name: str, numeric, nargs: int = 1, doc: str = "", code: str | None = None):
    """A head whose derivative is zero wherever it is defined (PyTorch's subgradient at its jumps):
    rounding, signs, tests and logic.  ``numeric`` folds constants (NumPy's, so NaN folds too);
    ``code`` is its array_code where NumPy has no function of its name."""
    code = code or f"{{{name}}}({', '.join('{%s}' % a for a in 'ab'[:nargs])})"  # NumPy's function of that name
    return type(name, (_RealFunction,), {"nargs": nargs, "numeric": staticmethod(numeric), "__doc__": doc,
                                         "fdiff": lambda self, argindex=1: sp.S.Zero, "zero_gradient": True,
                                         "array_code": code})


floor = _flat("floor", np.floor)
ceil = _flat("ceil", np.ceil)
rint = _flat("rint", np.rint, doc="Round half to even, as torch.round.")
trunc = _flat("trunc", np.trunc)
sign = _flat("sign", np.sign)
isnan = _flat("isnan", np.isnan)
isinf = _flat("isinf", np.isinf)
isfinite = _flat("isfinite", np.isfinite)
signbit = _flat("signbit", np.signbit, doc="The sign bit: true at -0.0 and at a NaN whose bit is set.")
logical_not = _flat("logical_not", np.logical_not)
logical_and = _flat("logical_and", np.logical_and, 2)
logical_or = _flat("logical_or", np.logical_or, 2)
logical_xor = _flat("logical_xor", np.logical_xor, 2)
floor_divide = _flat("floor_divide", np.floor_divide, 2, doc="floor(a / b) as Python's // (NaN at inf).")


def _div_floor(a, b):
    with np.errstate(all="ignore"):
        quotient = np.floor_divide(np.float64(a), np.float64(b))
        return np.copysign(0.0, np.float64(a) / b) if quotient == 0 else quotient


div_floor = _flat("div_floor", _div_floor, 2, code="{where}({floor_divide}({a}, {b}) == 0, {copysign}(0.0, {a} / {b}), "
                                                    "{floor_divide}({a}, {b}))",
                  doc="PyTorch's floor division of floats: Python's //, and a zero quotient takes the sign of a / b.")
trunc_divide = _flat("trunc_divide", lambda a, b: np.trunc(a / b), 2, code="(({a} - {fmod}({a}, {b})) // {b})",
                     doc="C's integer division, toward zero (a - fmod(a, b) is a multiple of b: // is exact).")


class remainder(_RealFunction):
    """Python's ``a % b`` (the sign of b), as torch.remainder; d/db is -floor(a / b) (PyTorch's div_floor)."""

    array_code = "{remainder}({a}, {b})"
    nargs = 2
    numeric = staticmethod(np.remainder)

    def fdiff(self, argindex=1):
        a, b = self.args
        return sp.S.One if argindex == 1 else -div_floor(a, b)


class clamp(_RealFunction):
    """``clip(x, lo, hi)`` (hi wins where lo > hi; an absent bound is an infinity), with PyTorch's
    subgradients: x where lo <= x <= hi, lo where x < lo < hi, hi where x > hi or hi < lo."""

    array_code = "(lambda t: {where}(t > {c}, {c}, t))({where}({a} < {b}, {b}, {a}))"  # (x at a tie: -0.0 stays)
    nargs = 3

    @staticmethod
    def numeric(x, lo, hi):
        return np.minimum(np.maximum(x, lo), hi)

    def fdiff(self, argindex=1):
        x, lo, hi = self.args
        if argindex == 1:
            return select(greater_equal(x, lo) * less_equal(x, hi), sp.S.One, sp.S.Zero)
        if argindex == 2:  # with no upper bound, lo < hi is not asked
            below = less(x, lo) if hi == sp.oo else less(x, lo) * less(lo, hi)
            return select(below, sp.S.One, sp.S.Zero)
        return select(logical_or(greater(x, hi), less(hi, lo)), sp.S.One, sp.S.Zero)


class maximum(_RealFunction):
    """The larger of a and b, NaN if either is, with PyTorch's gradients: all to the larger, half
    to each at a tie (inf and inf too), all to both at a NaN, where every comparison is false.
    Not SymPy's Max, which merges equal arguments: maximum(x, x) sends x two halves."""

    # a at a tie (-0.0 and 0.0), as PyTorch's std::max; XLA's max takes 0.0
    array_code = "{where}(({a}) < ({b}), {b}, {where}(({b}) != ({b}), {b}, {a}))"
    nargs = 2
    numeric = staticmethod(lambda a, b: b if a < b or b != b else a)
    loses = staticmethod(lambda a, b: less(a, b))

    def fdiff(self, argindex=1):
        a, b = self.args if argindex == 1 else reversed(self.args)
        return select(self.loses(a, b), sp.S.Zero, select(equal(a, b), sp.S.Half, sp.S.One))


class minimum(maximum):
    """The smaller of a and b, with maximum's rules mirrored."""

    array_code = "{where}(({b}) < ({a}), {b}, {where}(({b}) != ({b}), {b}, {a}))"
    numeric = staticmethod(lambda a, b: b if b < a or b != b else a)
    loses = staticmethod(lambda a, b: greater(a, b))


class hardtanh(_RealFunction):
    """``clip(x, lo, hi)`` whose derivative is 0 at and beyond the bounds and 1 elsewhere (NaN
    included), as PyTorch's hardtanh and relu6; the bounds are numbers."""

    array_code = "{clip}({a}, {b}, {c})"
    nargs = 3
    numeric = staticmethod(clamp.numeric)

    def fdiff(self, argindex=1):
        if argindex != 1:
            return sp.S.Zero
        x, lo, hi = self.args
        return select(logical_or(less_equal(x, lo), greater_equal(x, hi)), sp.S.Zero, sp.S.One)


class exact_difference(_RealFunction):
    """a - b, and exactly ``a * 0`` where a == b: XLA fuses a product into the subtraction (a fused
    multiply-add, codegen.stable), which there leaves the product's rounding error, and logsumexp's
    gradient exp(x - out) at logits of 1e40 overflows on it."""

    array_code = "{where}(({a}) == ({b}), ({a}) * 0, ({a}) - ({b}))"
    nargs = 2
    numeric = staticmethod(lambda a, b: a - b)

    def fdiff(self, argindex=1):
        return sp.S.One if argindex == 1 else sp.S.NegativeOne


class rerouted(_RealFunction):
    """The value ``new`` with the derivative of ``old``: ``y.add_(1)`` under no_grad on a y with
    history takes new values and keeps y's gradient (PyTorch does not record the update)."""

    array_code = "{a}"
    nargs = 2
    numeric = staticmethod(lambda new, old: new)

    def fdiff(self, argindex=1):
        return sp.S.Zero if argindex == 1 else sp.S.One


class prelu(_RealFunction):
    """x above 0, else w * x: PyTorch's kernel, with its backward's derivatives (above 0 the positive
    side's) whose own derivatives are its double backward's (at and above 0 the positive side's).
    At +-0 the first derivatives are the negative side's (w, x) with no derivatives but the
    cotangent's, which is the positive side's (``rerouted``: ``where(x >= 0, gI, ...)``)."""

    array_code = "{where}({a} > 0, {a}, {b} * {a})"
    nargs = 2
    numeric = staticmethod(lambda x, w: x if x > 0 else w * x)

    def fdiff(self, argindex=1):
        x, w = self.args
        if argindex == 1:
            positive, negative, at_zero = sp.S.One, w, rerouted(w, sp.S.One, evaluate=False)
        else:
            positive, negative, at_zero = sp.S.Zero, x, rerouted(x, sp.S.Zero, evaluate=False)
        return select(greater(x, 0), positive, select(greater_equal(x, 0), at_zero, negative))


class hardswish(_RealFunction):
    """x * clip(x + 3, 0, 6) / 6 (NaN at -inf, as PyTorch computes it), with PyTorch's gradient:
    0 at and below -3, x/3 + 1/2 below 3, 1 from 3 on."""

    array_code = "{a}*{clip}({a} + 3, 0, 6)/6"
    nargs = 1

    @staticmethod
    def numeric(x):
        return x * min(max(x + 3, 0.0), 6.0) / 6

    def fdiff(self, argindex=1):
        (x,) = self.args
        return select(less_equal(x, -3), sp.S.Zero, select(less(x, 3), x / 3 + sp.Rational(1, 2), sp.S.One))


class square_root(_RealFunction):
    """torch.sqrt, differentiated as PyTorch's backward, ``grad / (2 * result)``: its own derivatives
    go through the result, so at -0.0 the second derivative is +inf as PyTorch's (SymPy's x**(-3/2)
    is -inf there)."""

    array_code = "{sqrt}({a})"
    nargs = 1

    @staticmethod
    def numeric(x):
        return math.sqrt(x) if x >= 0 else (x if x == 0 else math.nan)

    def fdiff(self, argindex=1):
        return ieee.unevaluated(lambda y: 1 / (2 * y), self)


class root(_RealFunction):
    """sqrt whose derivative is 0 where the root is 0: PyTorch masks ``grad / (2 * result)`` there
    in the backward of norm and std, so a zero vector's gradient is 0, not NaN."""

    array_code = "{sqrt}({a})"
    nargs = 1
    numeric = staticmethod(np.sqrt)

    def fdiff(self, argindex=1):
        return select(equal(self, 0), sp.S.Zero, 1 / (2 * self))


class atan2(_RealFunction):
    """The angle of (x, y) = (b, a), with PyTorch's gradient: (b, -a) / (a^2 + b^2), and 0 where
    that sum is 0 (PyTorch zeroes an infinite reciprocal), not SymPy's 0/0."""

    array_code = "{arctan2}({a}, {b})"
    nargs = 2
    numeric = staticmethod(math.atan2)

    def fdiff(self, argindex=1):
        a, b = self.args
        squares = a ** 2 + b ** 2
        reciprocal = select(equal(squares, 0), sp.S.Zero, 1 / squares)
        return b * reciprocal if argindex == 1 else -a * reciprocal


class fmod(_RealFunction):
    """C's fmod (the sign of a), as torch.fmod; d/db is -trunc(a / b), PyTorch's."""

    array_code = "{fmod}({a}, {b})"
    nargs = 2
    numeric = staticmethod(np.fmod)

    def fdiff(self, argindex=1):
        a, b = self.args
        # unevaluated: fmod(x, x)'s x / x is NaN at 0 and inf, not 1
        return sp.S.One if argindex == 1 else -trunc(sp.Mul(a, sp.Pow(b, -1, evaluate=False), evaluate=False))


class hypot(_RealFunction):
    """sqrt(a^2 + b^2) without overflow in between; PyTorch's gradient (a, b) / hypot (NaN at 0, 0)."""

    array_code = "{hypot}({a}, {b})"
    nargs = 2
    numeric = staticmethod(np.hypot)

    def fdiff(self, argindex=1):
        return self.args[argindex - 1] / self


class copysign(_RealFunction):
    """|a| with the sign bit of b; PyTorch's gradient: copysign(a, b) / a for a, 0 where a is 0,
    and none for b."""

    array_code = "{copysign}({a}, {b})"
    nargs = 2
    numeric = staticmethod(np.copysign)

    def fdiff(self, argindex=1):
        a = self.args[0]
        return select(equal(a, 0), sp.S.Zero, self / a) if argindex == 1 else sp.S.Zero


class xlogy(_RealFunction):
    """x log(y), 0 where x is 0 and NaN where y is NaN (PyTorch's order of tests), with PyTorch's
    gradients: log(y) but 0 where x is 0 and y <= 0 (inf at 0, inf; NaN at a NaN y), and x / y."""

    array_code = "{where}({isnan}({b}), {b}, {where}({a} == 0, 0.0, {a} * {log}({b})))"
    nargs = 2

    @staticmethod
    def numeric(x, y):
        with np.errstate(all="ignore"):
            return y if math.isnan(y) else 0.0 if x == 0 else x * np.log(np.float64(y))

    def fdiff(self, argindex=1):
        x, y = self.args
        if argindex == 2:  # unevaluated: xlogy(x, x)'s x / x is NaN at 0, not 1
            return sp.Mul(x, sp.Pow(y, -1, evaluate=False), evaluate=False)
        if y.free_symbols:
            return select(equal(x, 0) * less_equal(y, 0), sp.S.Zero, sp.log(y))
        # a float's log: SymPy's log(0) is unsigned, log(-1) complex and log(-oo) oo
        log_y = sp.S.NegativeInfinity if y.is_zero else sp.nan if y.is_extended_negative else ieee.number(sp.log(y))
        if y.is_extended_positive:  # a number y: PyTorch masks x == 0 unless y > 0 (a NaN y included)
            return log_y
        return select(equal(x, 0), sp.S.Zero, log_y)


class acosh(sp.acosh):
    """SymPy's acosh with PyTorch's derivative 1/sqrt(x^2 - 1), which is a number at x <= -1
    (where SymPy's 1/(sqrt(x - 1) sqrt(x + 1)) is NaN); the value there is NaN in both."""

    def fdiff(self, argindex=1):
        return 1 / sp.sqrt(self.args[0] ** 2 - 1)


ELEMENTWISE_FUNCTIONS = (sigmoid, softplus, softplus_kernel, softplus_slope, binary_cross_entropy_with_logits, step, relu, equal, greater, greater_equal, less,
                         less_equal, not_equal, select, masked, floor, ceil, rint, trunc, sign, isnan, isinf, isfinite, signbit,
                         logical_not, logical_and, logical_or, logical_xor, floor_divide, div_floor, trunc_divide, remainder, clamp,
                         maximum, minimum, hardtanh, hardswish, prelu, exact_difference, rerouted, square_root, root, atan2, fmod, hypot, copysign, xlogy)


# ---------------------------------------------------------------------------- structural


def _ints(tup) -> tuple[int, ...]:
    """Sizes and axes as Python ints; a symbolic size (an exported batch dimension) stays a symbol."""
    return tuple(v if isinstance(v, int) else int(v) if v.is_Integer else v for v in tup)


def _keepdim_shape(shape, axes):
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


class Structural(_ArrayCode, sp.Function):
    """A shape-changing primitive: ``args[0..arity)`` are arrays, the rest are attributes."""

    arity = 1

    def _array_arguments(self, printer):
        return [_operand(printer, a) for a in self.arrays] + [_literal(printer, a) for a in self.args[self.arity:]]

    @classmethod
    def eval(cls, *args):
        return None

    def _eval_is_real(self):
        return True

    def _eval_derivative(self, s):
        name = self.display or type(self).__name__.lower()
        raise TypeError(f"sympy.diff cannot see inside {name} (a whole-array head): use "
                        "symgrad.symbolic.gradient, or expression(..., elementwise=True) for entries")

    @property
    def arrays(self):
        return self.args[: self.arity]

    display = None  # the name SymPy prints; defaults to the class name in lower case

    def _display_args(self, printer):
        parts = [printer._print(a) for a in self.args[: self.arity]]
        for a in self.args[self.arity:]:
            parts.append(repr(tuple(int(v) for v in a)) if isinstance(a, sp.Tuple) else str(a))
        return parts

    def _sympystr(self, printer):
        return f"{self.display or type(self).__name__.lower()}({', '.join(self._display_args(printer))})"

    def _latex(self, printer):
        name = (self.display or type(self).__name__.lower()).replace("_", r"\_")
        return rf"\operatorname{{{name}}}\left({', '.join(self._display_args(printer))}\right)"

    def shape(self, shape_of):
        raise NotImplementedError

    def dtype(self, dtype_of):
        return dtype_of(self.args[0])

    def vjp(self, program, g, out):
        """Contributions ``[(array_arg, cotangent), ...]`` given the output's cotangent g."""
        raise NotImplementedError


class Matmul(Structural):
    """NumPy/PyTorch ``matmul``: 1-D operands are promoted and the added axis removed."""

    array_code = "{matmul}({a}, {b})"
    display = "matmul"

    arity = 2

    def shape(self, shape_of):
        return matmul_shape(shape_of(self.args[0]), shape_of(self.args[1]))

    def vjp(self, p, g, out):
        a, b = self.args
        sa, sb = p.shape_of(a), p.shape_of(b)
        g = p.materialize(g, p.shape_of(out), p.dtype_of(out))
        if len(sa) == 1 and len(sb) == 1:
            return [(a, g * b), (b, g * a)]
        if len(sa) == 2 and len(sb) == 1:  # matrix-vector: no transposes, one outer product
            return [(a, p.reshape(g, (sa[0], 1)) * b), (b, p.matmul(g, a))]
        if len(sa) == 1 and len(sb) == 2:  # vector-matrix (the seeds' x @ w)
            return [(a, p.matmul(b, g)), (b, p.reshape(a, (sa[0], 1)) * g)]
        # Promote 1-D operands to matrices, use the matrix rule, and drop the added axis.
        a2 = p.reshape(a, (1, *sa)) if len(sa) == 1 else a
        b2 = p.reshape(b, (*sb, 1)) if len(sb) == 1 else b
        sa2, sb2 = p.shape_of(a2), p.shape_of(b2)
        g2 = p.reshape(g, (*broadcast_shapes(sa2[:-2], sb2[:-2]), sa2[-2], sb2[-1]))
        ga = p.sum_to(p.matmul(g2, p.swap_last(b2)), sa2)
        gb = p.sum_to(p.matmul(p.swap_last(a2), g2), sb2)
        return [(a, p.reshape(ga, sa)), (b, p.reshape(gb, sb))]


def matmul_shape(sa, sb):
    """Result shape of matmul, or ValueError naming the mismatch as PyTorch does."""
    if len(sb) == 2 and len(sa) in (1, 2) and sa[-1] == sb[0]:  # the common cases, quickly
        return (*sa[:-1], sb[1])
    if not sa or not sb:
        raise ValueError("both arguments to matmul need to be at least 1D, but they are "
                         f"{len(sa)}D and {len(sb)}D")
    a2 = (1, *sa) if len(sa) == 1 else sa
    b2 = (*sb, 1) if len(sb) == 1 else sb
    if a2[-1] != b2[-2]:
        raise ValueError(f"mat1 and mat2 shapes cannot be multiplied "
                         f"({a2[-2]}x{a2[-1]} and {b2[-2]}x{b2[-1]})")
    batch = broadcast_shapes(a2[:-2], b2[:-2])
    out = (*batch, a2[-2], b2[-1])
    if len(sa) == 1:
        out = out[:-2] + out[-1:]
    if len(sb) == 1:
        out = out[:-1]
    return out


class ReduceSum(Structural):
    """sum over ``axes`` (a Tuple of ints), keeping them as size 1 when ``keepdim``."""

    array_code = "{sum}({a}, axis={b}, keepdims={c})"
    display = "sum"

    def shape(self, shape_of):
        return reduced_shape(shape_of(self.args[0]), _ints(self.args[1]), bool(self.args[2]))

    def vjp(self, p, g, out):
        x, axes, keepdim = self.args
        return [(x, p.expand_reduced(g, p.shape_of(x), _ints(axes), bool(keepdim)))]


class LogSumExp(Structural):
    """log(sum(exp(x))) over ``axes``, lowered to a max-shifted stable form."""

    array_code = "{log}({sum}({exp}({a}), axis={b}, keepdims={c}))"
    display = "logsumexp"

    def shape(self, shape_of):
        return reduced_shape(shape_of(self.args[0]), _ints(self.args[1]), bool(self.args[2]))

    def vjp(self, p, g, out):
        x, axes, keepdim = self.args
        axes, keepdim, sx = _ints(axes), bool(keepdim), p.shape_of(x)
        g = p.expand_reduced(g, sx, axes, keepdim)
        return [(x, g * sp.exp(exact_difference(x, p.expand_reduced(out, sx, axes, keepdim))))]


class LogSoftmax(Structural):
    """x - logsumexp(x) along ``axis``, lowered max-shifted (``(x - max) - log(sum(exp(x - max)))``):
    at logits of 1e30 the unshifted difference is 0 where PyTorch gives -log(2)."""

    array_code = "{a} - {log}({sum}({exp}({a}), axis={b}, keepdims=True))"
    display = "log_softmax"

    def shape(self, shape_of):
        return shape_of(self.args[0])

    def vjp(self, p, g, out):
        x, axis = self.args
        g = p.materialize(g, p.shape_of(out), p.dtype_of(out))
        return [(x, g - sp.exp(out) * p.reduce_sum(g, (int(axis),), True))]  # PyTorch's formula


class Softmax(Structural):
    """exp(x - max) / sum(exp(x - max)) along ``axis``."""

    array_code = "{exp}({a})/{sum}({exp}({a}), axis={b}, keepdims=True)"
    display = "softmax"

    def shape(self, shape_of):
        return shape_of(self.args[0])

    def vjp(self, p, g, out):
        x, axis = self.args
        g = p.materialize(g, p.shape_of(out), p.dtype_of(out))
        return [(x, out * (g - p.reduce_sum(g * out, (int(axis),), True)))]  # PyTorch's formula


class ReduceMax(Structural):
    """max over ``axes``, with PyTorch's two gradient rules.

    ``amax``/``max(dim)`` values (``whole`` false): ``g * mask / count`` over the entries equal
    to the result, so a NaN gradient or a NaN result reaches the whole slice.  ``max()`` of the
    whole tensor (``whole`` true): ``g / count`` written into the entries equal to the result,
    or NaN when the result is NaN, and exact zeros elsewhere.
    """

    array_code = "{max}({a}, axis={b}, keepdims={c})"
    display = "max"

    def shape(self, shape_of):
        return reduced_shape(shape_of(self.args[0]), _ints(self.args[1]), bool(self.args[2]))

    def vjp(self, p, g, out):
        x, axes, keepdim, whole = self.args
        axes, keepdim, sx = _ints(axes), bool(keepdim), p.shape_of(x)
        wide = p.expand_reduced(out, sx, axes, keepdim)
        g = p.expand_reduced(g, sx, axes, keepdim)
        if not whole:
            mask = p.assign(equal(x, wide), sx, p.dtype_of(x), "argmax_mask")
            # unevaluated: a zero cotangent (ceil's) over a slice whose max is NaN (no entry equal
            # to it) is 0/0, NaN as PyTorch has it; SymPy would fold 0/count to 0
            share = ieee.unevaluated(lambda a, b: a / b, g, p.reduce_sum(mask, axes, True))
            share = p.assign(share, p.shape_of(share), p.dtype_of(x), "share")
            # not share * mask: XLA rewrites a product with a cast comparison into a select, which
            # drops the NaN that 0 * share is where the share is not finite
            return [(x, select(mask, share, ieee.mul(sp.S.Zero, share)))]
        mask = p.assign(select(isnan(wide), isnan(x), equal(x, wide)), sx, p.dtype_of(x), "argmax_mask")
        return [(x, select(mask, g / p.reduce_sum(mask, axes, True), sp.S.Zero))]


class ReduceMin(ReduceMax):
    array_code = "{min}({a}, axis={b}, keepdims={c})"
    display = "min"


class ArgMax(Structural):
    """The index of the first largest entry along ``axis`` (a NaN counts as largest), as int64:
    PyTorch's tie rule for max(dim) and argmax.  Indices carry no gradient."""

    array_code = "{argmax}({a}, axis={b}, keepdims={c})"
    display = "argmax"

    def shape(self, shape_of):
        return reduced_shape(shape_of(self.args[0]), (int(self.args[1]),), bool(self.args[2]))

    def dtype(self, dtype_of):
        return "int64"

    def vjp(self, p, g, out):
        return []


class ArgMin(ArgMax):
    """The index of the first smallest entry (a NaN counts as smallest too, as in PyTorch)."""

    array_code = "{argmin}({a}, axis={b}, keepdims={c})"
    display = "argmin"


class ArgSort(ArgMax):
    """The stable sorting permutation along ``axis`` (``args[2]``: descending), NaN counting as
    the largest value, as PyTorch sorts."""

    array_code = "{argsort}(-{a} if {c} else {a}, axis={b}, stable=True)"
    display = "argsort"

    def shape(self, shape_of):
        return shape_of(self.args[0])


class TakeAlong(Structural):
    """``x``'s entries at ``indices`` along ``axis`` (arrays of equal rank): the values of
    max(dim), sort and topk.  The gradient goes to those entries and exact zeros elsewhere, as
    PyTorch's value_selecting_reduction_backward scatters into zeros."""

    array_code = "{take_along_axis}({a}, {b}, axis={c})"
    display = "take_along"
    arity = 2

    def shape(self, shape_of):
        return shape_of(self.args[1])

    def vjp(self, p, g, out):
        x, indices, axis = self.args
        g = p.materialize(g, p.shape_of(out), p.dtype_of(out))
        return [(x, p.put_along(g, indices, int(axis), p.shape_of(x)))]


class PutAlong(Structural):
    """An array of zeros of shape ``args[3]`` with ``g`` written at ``indices`` along ``axis``."""

    array_code = "(lambda z: ({put_along_axis}(z, {b}, {a}, axis={c}), z)[1])({zeros}({d}))"
    jax_array_code = "{put_along_axis}({zeros}({d}), {b}, {a}, axis={c}, inplace=False)"

    display = "put_along"
    arity = 2

    def shape(self, shape_of):
        return _ints(self.args[3])

    def vjp(self, p, g, out):
        source, indices, axis, _ = self.args
        g = p.materialize(g, p.shape_of(out), p.dtype_of(out))
        return [(source, p.take_along(g, indices, int(axis)))]


class CumSum(Structural):
    """Running sums along ``axis``, from the end when ``args[2]`` (reverse); the gradient is the
    running sum of g the other way."""

    array_code = "{flip}({cumsum}({flip}({a}, {b}), {b}), {b}) if {c} else {cumsum}({a}, {b})"
    display = "cumsum"

    def shape(self, shape_of):
        return shape_of(self.args[0])

    def vjp(self, p, g, out):
        x, axis, reverse = self.args
        g = p.materialize(g, p.shape_of(out), p.dtype_of(out))
        return [(x, p.cumulative(g, int(axis), reverse=not reverse))]


class CumProd(Structural):
    """Running products along ``axis`` (from the end when ``args[2]``), with PyTorch's gradient.

    Where no entry of the input is 0: reversed_cumsum(g * out) / x.  Otherwise, per slice, with z
    its first zero: before z, the reversed sum of ``g * out`` over the entries before z, over x;
    at z, prod(x[:z]) * sum_{j >= z} g_j prod(x[z+1:j+1]); after z, exact zeros.
    """

    array_code = "{flip}({cumprod}({flip}({a}, {b}), {b}), {b}) if {c} else {cumprod}({a}, {b})"
    display = "cumprod"

    def shape(self, shape_of):
        return shape_of(self.args[0])

    def vjp(self, p, g, out):
        x, axis, reverse = self.args
        axis, reverse, shape, dtype = int(axis), bool(reverse), p.shape_of(x), p.dtype_of(x)
        g = p.materialize(g, shape, dtype)
        if shape[axis] == 1:
            return [(x, g)]
        is_zero = p.assign(equal(x, 0), shape, "bool", "is_zero")
        zeros_so_far = p.cumulative(p.astype(is_zero, "int64"), axis, reverse)
        before = p.assign(equal(zeros_so_far, 0), shape, "bool", "before_zero")
        first = p.assign(logical_and(equal(zeros_so_far, 1), is_zero), shape, "bool", "first_zero")
        back = not reverse
        early = p.cumulative(p.assign(select(before, g * out, sp.S.Zero), shape, dtype, "weighted"), axis, back)
        head = p.cumprod(p.assign(select(before, x, sp.S.One), shape, dtype, "up_to_zero"), axis, reverse)
        tail = p.cumprod(p.assign(select(logical_or(before, first), sp.S.One, x), shape, dtype, "after_zero"), axis,
                         reverse)
        late = p.cumulative(p.assign(g * tail, shape, dtype, "weighted"), axis, back)
        slices_with_zero = p.reduce_sum(p.astype(first, "int64"), tuple(range(len(shape))), False)
        per_slice = select(before, early / x, select(first, head * late, sp.S.Zero))
        no_zero = p.cumulative(p.assign(g * out, shape, dtype, "weighted"), axis, back) / x
        return [(x, select(equal(slices_with_zero, 0), no_zero, per_slice))]


class ReduceProd(Structural):
    """The product along one axis (``args[1]``), with PyTorch's gradient: ``g * out / x`` where
    the input has no zero at all; otherwise ``g`` times the products of the entries before and
    after each one (exact with zeros); for the product of a whole tensor (``args[3]``) with two
    zeros or more, exact zeros."""

    array_code = "{prod}({a}, axis={b}, keepdims={c})"
    display = "prod"

    def shape(self, shape_of):
        return reduced_shape(shape_of(self.args[0]), (int(self.args[1]),), bool(self.args[2]))

    def vjp(self, p, g, out):
        x, axis, keepdim, whole = self.args
        axis, shape, dtype = int(axis), p.shape_of(x), p.dtype_of(x)
        if not numel(shape):
            return []
        g = p.expand_reduced(g, shape, (axis,), bool(keepdim))
        out = p.expand_reduced(out, shape, (axis,), bool(keepdim))
        zeros = p.reduce_sum(p.astype(p.assign(equal(x, 0), shape, "bool", "is_zero"), "int64"),
                             tuple(range(len(shape))), False)
        others = ieee.mul(g, p.exclusive_product(x, axis), p.exclusive_product(x, axis, reverse=True))
        if whole:
            others = select(equal(zeros, 1), others, sp.S.Zero)
        return [(x, select(equal(zeros, 0), ieee.mul(g, out / x), others))]


class Reshape(Structural):
    array_code = "{reshape}({a}, {b})"
    display = "reshape"
    def shape(self, shape_of):
        return _ints(self.args[1])

    def vjp(self, p, g, out):
        x = self.args[0]
        return [(x, p.reshape(g, p.shape_of(x)))]


class BroadcastTo(Structural):
    array_code = "{broadcast_to}({a}, {b})"
    display = "broadcast_to"
    def shape(self, shape_of):
        return _ints(self.args[1])

    def vjp(self, p, g, out):
        x = self.args[0]
        if p.is_scalar(g):  # one cotangent for the whole broadcast shape: each input entry got copies
            return [(x, g * numel(p.shape_of(out)) / numel(p.shape_of(x)))]
        return [(x, p.sum_to(g, p.shape_of(x)))]


class Permute(Structural):
    array_code = "{transpose}({a}, {b})"
    display = "transpose"
    def shape(self, shape_of):
        s = shape_of(self.args[0])
        return tuple(s[i] for i in _ints(self.args[1]))

    def vjp(self, p, g, out):
        x, perm = self.args
        inverse = tuple(sorted(range(len(perm)), key=lambda i: int(perm[i])))
        return [(x, p.permute(g, inverse))]


class AsType(Structural):
    """A dtype conversion; ``args[1]`` is the target dtype's name as a Symbol."""

    array_code = "{asarray}({a}, dtype={b})"
    display = "astype"

    def shape(self, shape_of):
        return shape_of(self.args[0])

    def dtype(self, dtype_of):
        return str(self.args[1])

    def vjp(self, p, g, out):
        x = self.args[0]
        return [(x, p.astype(g, p.dtype_of(x)))]


class OneHot(Structural):
    """one_hot(indices, classes) as floats of dtype ``args[2]``; integer input, no gradient."""

    array_code = "{asarray}({arange}({b}) == {expand_dims}({a}, -1), dtype={c})"
    display = "one_hot"

    def shape(self, shape_of):
        return (*shape_of(self.args[0]), int(self.args[1]))

    def dtype(self, dtype_of):
        return str(self.args[2])

    def vjp(self, p, g, out):
        return []


def python_index(spec) -> tuple:
    """An index spec as a Python index for NumPy, JAX or PyTorch.  Items: (0, i) an integer,
    (1, start, stop, step) a slice, (2,) a new axis; in a program taking its starts as inputs
    (symgrad.engine), (3, start, length) a slice of step 1 and (4, i) an integer whose start is an
    int input (numbers here once given)."""
    items = []
    for item in spec:
        kind = int(item[0])
        if kind in (0, 4):
            items.append(int(item[1]))
        elif kind == 1:
            items.append(slice(*(int(v) for v in item[1:])))
        elif kind == 3:
            items.append(slice(int(item[1]), int(item[1]) + int(item[2])))
        else:
            items.append(None)
    return tuple(items)


def index_text(spec) -> str:
    """An index spec as Python writes it between brackets: ``2, 0:3, None`` (also JAX's)."""
    items = []
    for item in spec:
        kind = int(item[0])
        if kind == 0:
            items.append(str(int(item[1])))
        elif kind == 1:
            start, stop, step = _ints(item[1:])  # a slice to a symbolic size prints as 0:n
            items.append(f"{start}:{stop}" + (f":{step}" if step != 1 else ""))
        elif kind == 3:
            items.append(f"{item[1]}:{item[1]} + {int(item[2])}")
        elif kind == 4:
            items.append(str(item[1]))
        else:
            items.append("None")
    if not items:  # x[...] of a 0-d tensor: Python has no empty brackets
        return "..."
    return ", ".join(items) + ("," if len(items) == 1 else "")


def is_dynamic(spec) -> bool:
    """Whether ``spec`` has a start a program takes as an input (items 3 and 4)."""
    return any(int(item[0]) > 2 for item in spec)


def index_shape(shape, spec) -> tuple:
    out, d = [], 0
    for item in spec:
        kind = int(item[0])
        if kind in (0, 4):
            d += 1
        elif kind == 1:
            start, stop, step = _ints(item[1:])
            out.append(len(range(start, stop, step)) if isinstance(stop, int) else stop - start)  # step 1
            d += 1
        elif kind == 3:
            out.append(int(item[2]))
            d += 1
        else:
            out.append(1)
    return (*out, *shape[d:])


class Index(Structural):
    """Basic indexing (integers, slices with positive steps, new axes); ``args[1]`` is the spec."""

    array_code = "{a}[{b}]"
    display = "index"

    def _display_args(self, printer):
        return [printer._print(self.args[0]), f"[{index_text(self.args[1])}]"]

    def _array_arguments(self, printer):
        return [_operand(printer, self.args[0]), index_text(self.args[1])]

    def shape(self, shape_of):
        return index_shape(shape_of(self.args[0]), self.args[1])

    def vjp(self, p, g, out):
        x, spec = self.args
        g = p.materialize(g, p.shape_of(out), p.dtype_of(out))
        return [(x, p.index_add(g, spec, p.shape_of(x)))]


class IndexAdd(Structural):
    """``zeros(shape).at[index].add(g)``: where an index's cotangent goes back to."""

    array_code = "(lambda z: ({add}.at(z, {index_exp}[{b}], {a}), z)[1])({zeros}({c}))"
    jax_array_code = "{zeros}({c}).at[{b}].add({a})"

    display = "index_add"

    def _display_args(self, printer):
        return [printer._print(self.args[0]), f"[{index_text(self.args[1])}]", repr(_ints(self.args[2]))]

    def _array_arguments(self, printer):
        return [_operand(printer, self.args[0]), index_text(self.args[1]), repr(_ints(self.args[2]))]

    def shape(self, shape_of):
        return _ints(self.args[2])

    def vjp(self, p, g, out):
        source, spec, _ = self.args
        g = p.materialize(g, p.shape_of(out), p.dtype_of(out))
        return [(source, p.index(g, spec))]


class StopGradient(Structural):
    """The identity whose gradient is zero: a detached value inside a program."""

    array_code = "{a}"
    display = "stop_gradient"

    def shape(self, shape_of):
        return shape_of(self.args[0])

    def vjp(self, p, g, out):
        return []


class ReducedWithSlope(Structural):
    """A reduction's value ``args[0]`` whose cotangent reaches ``args[1]`` (the input) as ``g``
    spread over the reduced axes times ``args[2]``, an expression of the input.  The slope is not
    derived from the value's form, yet it is differentiated again at higher orders: var's
    PyTorch backward, 2 (x - mean(x)) / (n - c), exact at first order (NaN where PyTorch's is) and
    with the mean's own derivative at second order."""

    arity = 3
    array_code = "{a}"
    display = "reduced_with_slope"

    def shape(self, shape_of):
        return shape_of(self.args[0])

    def vjp(self, p, g, out):
        _, x, slope, axes, keepdim = self.args
        spread = p.expand_reduced(g, p.shape_of(x), _ints(axes), bool(keepdim))
        return [(x, p.assign(spread * slope, p.shape_of(x), p.dtype_of(x), "slope"))]


class Concatenate(Structural):
    """The arrays ``args[:-1]`` joined along axis ``args[-1]``; each gets back its slice of g."""

    array_code = "{concatenate}({a}, axis={b})"
    display = "cat"

    @property
    def arity(self):
        return len(self.args) - 1

    def _array_arguments(self, printer):
        return [f"[{', '.join(_operand(printer, a) for a in self.arrays)}]", str(int(self.args[-1]))]

    def shape(self, shape_of):
        axis = int(self.args[-1])
        shapes = [shape_of(a) for a in self.args[:-1]]
        return (*shapes[0][:axis], sum(s[axis] for s in shapes), *shapes[0][axis + 1:])

    def vjp(self, p, g, out):
        axis, out_shape = int(self.args[-1]), p.shape_of(out)
        g = p.materialize(g, out_shape, p.dtype_of(out))
        contributions, start = [], 0
        steps = axis == 0 and len(self.args) > 5  # more than four parts: a loop's outputs stacked (an RNN's)
        for x in self.args[:-1]:
            size = p.shape_of(x)[axis]
            if steps and size == 1:  # each reads g[t], which codegen.reroll prints as a scan's step
                contributions.append((x, p.reshape(p.index(g, [(0, start)]), p.shape_of(x))))
            else:
                spec = [(1, 0, n, 1) for n in out_shape]
                spec[axis] = (1, start, start + size, 1)
                contributions.append((x, p.index(g, spec)))
            start += size
        return contributions


STRUCTURAL_PRIMITIVES = (Concatenate, Matmul, ReduceSum, LogSumExp, LogSoftmax, Softmax, ReduceMax, ReduceMin,
                         ArgMax, ArgMin, ArgSort, TakeAlong, PutAlong, CumSum, CumProd, ReduceProd,
                         Reshape, BroadcastTo, Permute, AsType, OneHot, Index, IndexAdd, StopGradient,
                         ReducedWithSlope)


# ------------------------------------------------------------------------- shape helpers


def broadcast_shapes(*shapes):
    """NumPy broadcasting, raising ValueError with PyTorch's wording on a mismatch."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(-1, -ndim - 1, -1):  # from the last dimension, as PyTorch looks for the mismatch
        size = 1
        for s in shapes:
            n = s[i] if -i <= len(s) else 1
            if n != 1:
                if size not in (1, n):
                    a, b = [s2[i] if -i <= len(s2) else 1 for s2 in shapes if (s2[i] if -i <= len(s2) else 1) != 1][:2]
                    raise ValueError(f"The size of tensor a ({a}) must match the size of tensor b ({b}) "
                                     f"at non-singleton dimension {ndim + i}")
                size = n
        out.append(size)
    return tuple(reversed(out))


def reduced_shape(shape, axes, keepdim):
    if keepdim:
        return _keepdim_shape(shape, axes)
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def numel(shape) -> int:
    return math.prod(shape)

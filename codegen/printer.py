"""One IR expression -> JAX source text.

The printer is a name table (SymPy head -> JAX function) plus the few heads that need their
own shape of call.  It prints one assignment's expression at a time, never a whole program,
so program size never meets Python's recursion limit.
"""
from __future__ import annotations

import sympy as sp
from sympy.printing.precedence import PRECEDENCE
from sympy.printing.str import StrPrinter

from symgrad.ir import functions as F

# SymPy or IR head name -> JAX function applied to the printed arguments.
ELEMENTWISE = {
    "exp": "jnp.exp", "log": "jnp.log", "sin": "jnp.sin", "cos": "jnp.cos", "tan": "jnp.tan",
    "tanh": "rounded_tanh", "sinh": "jnp.sinh", "cosh": "jnp.cosh", "atan": "jnp.arctan",
    "Abs": "jnp.abs", "log1p": "jnp.log1p", "expm1": "jnp.expm1",
    "sigmoid": "jax.nn.sigmoid", "softplus": "jax.nn.softplus",
    "erf": "jax.scipy.special.erf", "log2": "jnp.log2", "log10": "jnp.log10", "exp2": "jnp.exp2",
    "floor": "jnp.floor", "ceil": "jnp.ceil", "rint": "jnp.round", "trunc": "jnp.trunc",
    "isnan": "jnp.isnan", "isinf": "jnp.isinf", "isfinite": "jnp.isfinite", "logical_not": "jnp.logical_not",
    "logical_and": "jnp.logical_and", "logical_or": "jnp.logical_or", "logical_xor": "jnp.logical_xor",
    "remainder": "jnp.remainder", "floor_divide": "jnp.floor_divide",
    "root": "jnp.sqrt", "square_root": "jnp.sqrt", "asin": "jnp.arcsin", "acos": "jnp.arccos", "asinh": "jnp.arcsinh", "acosh": "jnp.arccosh",
    "atanh": "jnp.arctanh", "atan2": "jnp.arctan2", "fmod": "jnp.fmod", "hypot": "jnp.hypot",
    "copysign": "jnp.copysign", "signbit": "jnp.signbit",
}

DTYPES = {"float16": "jnp.float16", "float32": "jnp.float32", "float64": "jnp.float64",
          "uint8": "jnp.uint8", "int8": "jnp.int8", "int16": "jnp.int16", "int32": "jnp.int32", "int64": "jnp.int64",
          "bool": "jnp.bool_"}


def _axes(tup) -> str:
    """Axes or sizes as a tuple; a symbolic size (an exported batch dimension) prints as its expression."""
    return repr(tuple(int(a) if a.is_Integer else _Size(a) for a in map(sp.sympify, tup)))


class _Size(str):
    def __repr__(self):
        return self


class JaxPrinter(StrPrinter):
    """Prints elementwise SymPy expressions and IR primitives as ``jax.numpy`` calls."""

    printmethod = "_jax_source"  # not StrPrinter's _sympystr: the IR's display names are not JAX

    def _print_Symbol(self, expr):
        return expr.name

    def _print_Float(self, expr):
        return repr(float(expr))

    def _print_Rational(self, expr):
        return f"({expr.p}/{expr.q})" if expr.q != 1 else str(expr.p)

    def _print_Half(self, expr):
        return "0.5"

    def _print_Infinity(self, expr):
        return "jnp.inf"

    def _print_NegativeInfinity(self, expr):
        return "(-jnp.inf)"

    def _print_ComplexInfinity(self, expr):  # x/0: SymPy's zoo; x * inf gives PyTorch's inf, -inf or nan
        return "jnp.inf"

    def _print_NaN(self, expr):
        return "jnp.nan"

    def _print_Mul(self, expr):
        if expr.args[0] is sp.nan:  # StrPrinter asks whether the coefficient is negative
            return "*".join(self.parenthesize(a, PRECEDENCE["Mul"], strict=False) for a in expr.args)
        return super()._print_Mul(expr)

    def _print_Pi(self, expr):  # erf's derivative has sqrt(pi)
        return "jnp.pi"

    def _print_Exp1(self, expr):
        return "jnp.e"

    def _print_Pow(self, expr, rational=False):
        base, exponent = expr.args
        if exponent.is_Float and float(exponent) in (1.0, -1.0):  # x**1.0 is x, x**-1.0 is 1/x, exactly
            exponent = sp.Integer(int(exponent))
            if exponent == 1:
                return self._print(base)
        if exponent.is_Float and float(exponent) in (0.5, -0.5):  # PyTorch's pow takes sqrt and rsqrt for
            exponent = sp.S.Half if exponent > 0 else -sp.S.Half    # them: -0 and -inf keep IEEE's answers
        if exponent == sp.S.Half:
            return f"jnp.sqrt({self._print(base)})"
        if exponent == -sp.S.Half:
            return f"(1/jnp.sqrt({self._print(base)}))"
        if exponent == -1:  # a product kept whole (1/(x*(1 - x))) is parenthesized: 1/x*y is y/x
            return f"(1/{self.parenthesize(base, PRECEDENCE['Mul'])})"
        if exponent.is_Number and exponent.is_extended_negative:  # not NaN
            positive = sp.Pow(base, -exponent, evaluate=False)
            return f"(1/{self.parenthesize(positive, PRECEDENCE['Mul'])})"
        if exponent.is_Integer:
            return f"{self.parenthesize(base, PRECEDENCE['Pow'], strict=True)}**{exponent}"
        return f"jnp.power({self._print(base)}, {self._print(exponent)})"

    def _print_Function(self, expr):
        name = type(expr).__name__
        if name in ELEMENTWISE:
            return f"{ELEMENTWISE[name]}({', '.join(self._print(a) for a in expr.args)})"
        raise NotImplementedError(f"codegen has no JAX lowering for {name}")

    def _print_Unrewritten(self, expr):  # codegen.unrewritten
        return f"jax.lax.optimization_barrier({self._print(expr.args[0])})"

    def _print_Max(self, expr):
        return self._fold("jnp.maximum", expr.args)

    def _print_Min(self, expr):
        return self._fold("jnp.minimum", expr.args)

    def _fold(self, fn, args):
        text = self._print(args[0])
        for a in args[1:]:
            text = f"{fn}({text}, {self._print(a)})"
        return text

    def _print_Heaviside(self, expr):
        at_zero = expr.args[1] if len(expr.args) > 1 else sp.S.Half
        return f"jnp.heaviside({self._print(expr.args[0])}, {self._print(at_zero)})"

    def _print_DiracDelta(self, expr):
        return f"jnp.zeros_like({self._print(expr.args[0])})"

    def _print_step(self, expr):
        x = self._print(expr.args[0])
        return f"(~(({x}) <= 0)).astype(({x}).dtype)"

    def _print_hardtanh(self, expr):
        """x itself between the bounds (-0.0 stays -0.0), and NaN everywhere for a NaN bound, as
        PyTorch's clamp; a bound that is a program input may be NaN."""
        x, lo, hi = (self._print(a) for a in expr.args)
        clipped = f"jnp.where({x} < {lo}, {lo}, jnp.where({x} > {hi}, {hi}, {x}))"
        if all(b.is_Number and b is not sp.nan for b in expr.args[1:]):
            return clipped
        return f"jnp.where(({lo} == {lo}) & ({hi} == {hi}), {clipped}, {lo} + {hi})"

    def _print_binary_cross_entropy_with_logits(self, expr):
        x, t = (self._print(a) for a in expr.args)
        minus_x = f"-{x}" if x.isidentifier() else f"-({x})"
        return f"((1 - {t}) * {x} + jax.nn.softplus({minus_x}))"

    def _print_clamp(self, expr):
        """hi where x > hi or lo > hi, else lo where x < lo, else x (-0.0 at a bound of 0.0 too: PyTorch's
        std::max and std::min keep their first operand at a tie, XLA's max takes 0.0); NaN for a NaN
        bound.  An absent bound is left out: an inf would make an integer x a float."""
        x, lo, hi = expr.args
        text = self._print(x)
        for bound, side, absent in ((lo, "<", -sp.oo), (hi, ">", sp.oo)):
            if bound != absent:
                b = self._print(bound)
                text = f"jnp.where({text} {side} {b}, {b}, {text})"
                if not (bound.is_Number and bound is not sp.nan):  # a bound that may be NaN
                    text = f"jnp.where({b} == {b}, {text}, {b})"
        return text

    def _print_relu(self, expr):
        """-0.0 stays, as PyTorch's (XLA's max takes 0.0): ``x * 0`` there, whose derivative is 0, so
        that JAX's derivative of the source agrees with PyTorch's at 0 as ``jax.nn.relu``'s does."""
        x = self._print(expr.args[0])
        return f"jnp.where({x} == 0, {x} * 0, jax.nn.relu({x}))"

    def _print_maximum(self, expr):  # a at a tie (-0.0 and 0.0), as PyTorch's std::max; NaN if either is
        a, b = (self._print(x) for x in expr.args)
        return f"jnp.where({a} < {b}, {b}, jnp.where({b} != {b}, {b}, {a}))"

    def _print_minimum(self, expr):
        a, b = (self._print(x) for x in expr.args)
        return f"jnp.where({b} < {a}, {b}, jnp.where({b} != {b}, {b}, {a}))"

    def _print_div_floor(self, expr):  # a zero quotient takes the sign of a / b, as in PyTorch's kernel
        a, b = (self._print(x) for x in expr.args)
        return f"jnp.where(jnp.floor_divide({a}, {b}) == 0, jnp.copysign(0.0, ({a}) / ({b})), jnp.floor_divide({a}, {b}))"

    def _print_trunc_divide(self, expr):  # integers: a - fmod(a, b) is a multiple of b
        a, b = (self._print(x) for x in expr.args)
        return f"((({a}) - jnp.fmod({a}, {b})) // ({b}))"

    def _print_xlogy(self, expr):  # not jax.scipy.special.xlogy, which is 0 at x = 0 even for a NaN y
        x, y = (self._print(a) for a in expr.args)
        return f"jnp.where(jnp.isnan({y}), {y}, jnp.where(({x}) == 0, 0.0, ({x}) * jnp.log({y})))"

    def _print_exact_difference(self, expr):
        a, b = (self._print(x) for x in expr.args)
        return f"jnp.where(({a}) == ({b}), ({a}) * 0, ({a}) - ({b}))"

    def _print_rerouted(self, expr):
        return self._print(expr.args[0])

    def _print_softplus_slope(self, expr):
        x, beta = (self._print(a) for a in expr.args)
        return f"(lambda z: z / (z + 1))(jnp.exp(({x}) * ({beta})))"

    def _print_softplus_kernel(self, expr):
        x, beta = (self._print(a) for a in expr.args)
        return f"(jnp.log1p(jnp.exp(({x}) * ({beta}))) / ({beta}))"

    def _print_prelu(self, expr):
        x, w = (self._print(a) for a in expr.args)
        return f"jnp.where(({x}) > 0, {x}, ({w}) * ({x}))"

    def _print_hardswish(self, expr):
        x = self._print(expr.args[0])
        return f"({x} * jnp.clip({x} + 3, 0, 6) / 6)"

    def _print_sign(self, expr):  # PyTorch's: 0 at -0.0 and at NaN
        x = self._print(expr.args[0])
        return f"((({x}) > 0).astype(({x}).dtype) - (({x}) < 0).astype(({x}).dtype))"

    def _print_equal(self, expr):
        a, b = (self._print(x) for x in expr.args)
        return f"({a} == {b}).astype({a}.dtype)"

    def _comparison(self, expr, symbol):
        a, b = (self._print(x) for x in expr.args)
        return f"({a} {symbol} {b})"

    def _print_greater(self, expr):
        return self._comparison(expr, ">")

    def _print_greater_equal(self, expr):
        return self._comparison(expr, ">=")

    def _print_less(self, expr):
        return self._comparison(expr, "<")

    def _print_less_equal(self, expr):
        return self._comparison(expr, "<=")

    def _print_not_equal(self, expr):
        return self._comparison(expr, "!=")

    def _print_select(self, expr):
        condition, *branches = expr.args
        test = self._comparison(condition, "==") if isinstance(condition, F.equal) else self._print(condition)
        return f"jnp.where({', '.join([test, *map(self._print, branches)])})"

    _print_masked = _print_select

    # structural primitives
    def _print_Concatenate(self, expr):
        arrays = ", ".join(self._print(a) for a in expr.args[:-1])
        return f"jnp.concatenate([{arrays}], axis={int(expr.args[-1])})"

    def _print_Matmul(self, expr):
        return f"jnp.matmul({self._print(expr.args[0])}, {self._print(expr.args[1])})"

    def _reduction(self, fn, expr):
        x, axes, keepdim = expr.args[:3]
        return f"{fn}({self._print(x)}, axis={_axes(axes)}, keepdims={bool(keepdim)})"

    def _print_ReduceSum(self, expr):
        return self._reduction("jnp.sum", expr)

    def _print_ReduceMax(self, expr):
        return self._reduction("jnp.max", expr)

    def _print_ReduceMin(self, expr):
        return self._reduction("jnp.min", expr)

    def _print_ReduceProd(self, expr):
        x, axis, keepdim = expr.args[:3]
        return f"jnp.prod({self._print(x)}, axis={int(axis)}, keepdims={bool(keepdim)})"

    def _print_ArgMax(self, expr):
        x, axis, keepdim = expr.args
        return f"jnp.argmax({self._print(x)}, axis={int(axis)}, keepdims={bool(keepdim)})"

    def _print_ArgMin(self, expr):
        x, axis, keepdim = expr.args
        return f"jnp.argmin({self._print(x)}, axis={int(axis)}, keepdims={bool(keepdim)})"

    def _print_ArgSort(self, expr):
        x, axis, descending = expr.args
        return f"jnp.argsort({self._print(x)}, axis={int(axis)}, stable=True, descending={bool(descending)})"

    def _print_TakeAlong(self, expr):
        x, indices, axis = expr.args
        return f"jnp.take_along_axis({self._print(x)}, {self._print(indices)}, axis={int(axis)})"

    def _print_PutAlong(self, expr):
        g, indices, axis = (self._print(a) for a in expr.args[:3])
        return (f"jnp.put_along_axis(jnp.zeros({_axes(expr.args[3])}, dtype={g}.dtype), {indices}, {g}, "
                f"axis={axis}, inplace=False)")

    def _print_CumSum(self, expr):
        x, axis, reverse = expr.args
        return f"jax.lax.cumsum({self._print(x)}, axis={int(axis)}, reverse={bool(reverse)})"

    def _print_CumProd(self, expr):
        x, axis, reverse = expr.args
        return f"jax.lax.cumprod({self._print(x)}, axis={int(axis)}, reverse={bool(reverse)})"

    def _print_LogSumExp(self, expr):
        return self._reduction("stable_logsumexp", expr)  # codegen.stable: the shift XLA's fusion keeps

    def _print_LogSoftmax(self, expr):
        return f"stable_log_softmax({self._print(expr.args[0])}, axis={int(expr.args[1])})"

    def _print_Softmax(self, expr):
        return f"stable_softmax({self._print(expr.args[0])}, axis={int(expr.args[1])})"

    def _print_Reshape(self, expr):
        return f"jnp.reshape({self._print(expr.args[0])}, {_axes(expr.args[1])})"

    def _print_BroadcastTo(self, expr):
        return f"jnp.broadcast_to({self._print(expr.args[0])}, {_axes(expr.args[1])})"

    def _print_Permute(self, expr):
        return f"jnp.transpose({self._print(expr.args[0])}, {_axes(expr.args[1])})"

    def _print_AsType(self, expr):
        return f"{self._print(expr.args[0])}.astype({DTYPES[str(expr.args[1])]})"

    def _print_OneHot(self, expr):
        x, classes, dtype = expr.args
        return f"jax.nn.one_hot({self._print(x)}, {int(classes)}, dtype={DTYPES[str(dtype)]})"

    def _print_Index(self, expr):
        x, spec = expr.args
        if F.is_dynamic(spec):
            return self._dynamic_index(self._print(x), spec)
        return f"{self._print(x)}[{F.index_text(spec)}]"

    def _print_IndexAdd(self, expr):
        g, spec, shape = expr.args
        g = self._print(g)
        if F.is_dynamic(spec):
            starts, window, rest = _dynamic_parts(spec, F._ints(shape))
            placed = f"jnp.zeros({_axes(window)}, dtype={g}.dtype).at[{rest}].add({g})"
            return (f"jax.lax.dynamic_update_slice(jnp.zeros({_axes(shape)}, dtype={g}.dtype), {placed}, "
                    f"({', '.join(starts)}{',' if len(starts) == 1 else ''}))")
        return f"jnp.zeros({_axes(shape)}, dtype={g}.dtype).at[{F.index_text(spec)}].add({g})"

    def _dynamic_index(self, x, spec):
        """An index whose starts are inputs: a dynamic slice per such axis (kept), then the static rest."""
        axis = 0
        for item in spec:
            kind = int(item[0])
            if kind == 3:
                x = f"jax.lax.dynamic_slice_in_dim({x}, {self._print(item[1])}, {int(item[2])}, {axis})"
            elif kind == 4:
                x = f"jax.lax.dynamic_index_in_dim({x}, {self._print(item[1])}, {axis}, keepdims=True)"
            axis += kind != 2
        return f"{x}[{_dynamic_parts(spec)[2]}]"

    def _dynamic_set(self, x, v, spec):
        """x with v written at an index whose starts are inputs: the window the index lies in, cut
        with a dynamic slice, written at the static rest, and put back with a dynamic update."""
        starts, sizes, axis = [], [], 0
        for item in spec:
            kind = int(item[0])
            if kind == 2:
                continue
            starts.append(self._print(item[1]) if kind > 2 else "0")
            sizes.append("1" if kind == 4 else str(int(item[2])) if kind == 3 else f"{x}.shape[{axis}]")
            axis += 1
        starts = f"({', '.join(starts)},) + (0,) * ({x}.ndim - {axis})"
        sizes = f"({', '.join(sizes)},) + {x}.shape[{axis}:]"
        window = f"jax.lax.dynamic_slice({x}, {starts}, {sizes}).at[{_dynamic_parts(spec)[2]}].set({v})"
        return f"jax.lax.dynamic_update_slice({x}, {window}, {starts})"

    def _print_StopGradient(self, expr):
        return f"jax.lax.stop_gradient({self._print(expr.args[0])})"

    def _print_ReducedWithSlope(self, expr):  # the value: the slope serves the gradient only
        return self._print(expr.args[0])


def _dynamic_parts(spec, shape=None):
    """A dynamic index as a window: each axis's start (0 where static), the window's shape (with
    ``shape``, the indexed array's) and the static index taken inside it (a dynamic integer is the
    window's 0)."""
    starts, window, rest, axis = [], [], [], 0
    for item in spec:
        kind = int(item[0])
        if kind == 2:
            rest.append("None")
            continue
        starts.append(str(item[1]) if kind > 2 else "0")
        if shape is not None:
            window.append(int(item[2]) if kind == 3 else 1 if kind == 4 else shape[axis])
        rest.append(":" if kind == 3 else "0" if kind == 4 else F.index_text((item,)).rstrip(","))
        axis += 1
    if shape is not None:
        starts += ["0"] * (len(shape) - axis)
        window += list(shape[axis:])
    return starts, window, ", ".join(rest) + ("," if len(rest) == 1 else "")


def _check_complete():
    """Every IR head must have a lowering: fail at import, not deep inside a compile."""
    for head in (*F.ELEMENTWISE_FUNCTIONS, *F.STRUCTURAL_PRIMITIVES):
        name = head.__name__
        if name not in ELEMENTWISE and not hasattr(JaxPrinter, f"_print_{name}"):
            raise ImportError(f"codegen.printer: IR head {name} has no JAX lowering")


_check_complete()
_printer = JaxPrinter({"order": "none"})


def to_jax(expr) -> str:
    return _printer.doprint(expr)


_BOOLEAN_HEADS = frozenset({"greater", "greater_equal", "less", "less_equal", "not_equal", "isnan", "isinf",
                            "isfinite", "signbit", "logical_not", "logical_and", "logical_or", "logical_xor"})


def _typed_by_a_symbol(expr) -> bool:
    """Whether JAX takes the value's dtype from an array symbol in it, not from Python numbers
    alone (``jnp.where(x > 0, 1, 0)``, clamp's derivative, is an integer array)."""
    if isinstance(expr, sp.Symbol):
        return True
    name = type(expr).__name__
    if expr.is_Number or name in _BOOLEAN_HEADS:
        return False
    return any(_typed_by_a_symbol(a) for a in (expr.args[1:] if isinstance(expr, F.select) else expr.args))


def value_text(program, expr, shape, dtype) -> str:
    """The source of an assignment's value in ``program``: ``to_jax`` plus what the declared
    shape and dtype need (numbers standing for arrays become ``jnp.full``, smaller results are
    broadcast, mixed or boolean operands cast)."""
    if not expr.free_symbols and not isinstance(expr, F.Structural):  # a constant: 2, log(2), select(...)
        return f"jnp.full({tuple(shape)!r}, {to_jax(expr)}, dtype={DTYPES[dtype]})"  # computed as floats are
    text = to_jax(expr)
    if isinstance(expr, sp.Symbol):
        if program.dtypes[expr] != dtype:  # a gradient that is an integer input, say
            text = f"jnp.asarray({text}, dtype={DTYPES[dtype]})"
    elif not isinstance(expr, F.Structural) and (
            dtype == "bool" or any(program.dtypes[s] != dtype for s in expr.free_symbols)
            or not _typed_by_a_symbol(expr)):
        text = f"jnp.asarray({text}, dtype={DTYPES[dtype]})"
    if program.shape_of(expr) != tuple(shape):
        text = f"jnp.broadcast_to({text}, {tuple(shape)!r})"
    return text

"""Program: the IR, an SSA list of SymPy assignments with declared shapes and dtypes.

Every intermediate gets its own symbol, so a program is linear in the size of the graph it
came from however much sharing that graph has: nothing is ever inlined into a tree.
Constants are folded as they are assigned (a number needs no symbol), which is the only
rewrite done here; SymPy's own evaluation does the rest locally (``x*1``, ``0 + g``).
"""
from __future__ import annotations

from collections import Counter

import sympy as sp

from symgrad.ir.functions import (ArgMax, ArgMin, ArgSort, AsType, BroadcastTo, Concatenate, CumProd, CumSum, Index,
                                  IndexAdd, LogSoftmax, LogSumExp, Matmul, OneHot, Permute, PutAlong, ReduceMax,
                                  ReducedWithSlope, ReduceMin, ReduceProd, ReduceSum, Reshape, Softmax, StopGradient,
                                  Structural, TakeAlong, broadcast_shapes, numel, reduced_shape, select)


class Program:
    """Inputs, assignments and outputs of one compiled function."""

    def __init__(self, name: str = "program"):
        self.name = name
        self.inputs: list[sp.Symbol] = []
        self.assignments: list[tuple[sp.Symbol, sp.Expr]] = []
        self.outputs: list[tuple[sp.Expr, tuple, str]] = []
        self.output_names: list[str] = []
        self.shapes: dict[sp.Symbol, tuple] = {}
        self.dtypes: dict[sp.Symbol, str] = {}
        self._taken = Counter()

    # ----------------------------------------------------------------- building blocks

    def _symbol(self, hint: str, shape, dtype) -> sp.Symbol:
        n = self._taken[hint]
        self._taken[hint] += 1
        numbered = n or hint.rpartition("_")[2].isdigit()  # "x_1" as a hint must not meet x's second
        sym = sp.Symbol(f"{hint}_{n}" if numbered else hint, real=True)
        self.shapes[sym] = tuple(shape)
        self.dtypes[sym] = dtype
        return sym

    def input(self, shape, dtype: str, hint: str = "x") -> sp.Symbol:
        sym = self._symbol(hint, shape, dtype)
        self.inputs.append(sym)
        return sym

    def assign(self, expr, shape, dtype: str, hint: str = "t", fold: bool = True):
        """Bind ``expr`` to a fresh symbol; a plain number is returned as it is."""
        expr = sp.sympify(expr)
        if fold and (expr.is_Number or isinstance(expr, sp.Symbol)):
            return expr
        sym = self._symbol(hint, shape, dtype)
        self.assignments.append((sym, expr))
        return sym

    def output(self, expr, shape, dtype: str, name: str):
        self.outputs.append((sp.sympify(expr), tuple(shape), dtype))
        self.output_names.append(name)

    # ----------------------------------------------------------------- what things are

    def shape_of(self, expr) -> tuple:
        if isinstance(expr, sp.Symbol):
            return self.shapes[expr]
        if isinstance(expr, Structural):
            return expr.shape(self.shape_of)
        return broadcast_shapes(*(self.shapes[s] for s in expr.free_symbols))

    def dtype_of(self, expr, default="float32"):
        """The dtype of ``expr``'s values: its widest array's; ``default`` for a form of numbers alone."""
        if isinstance(expr, sp.Symbol):
            return self.dtypes[expr]
        if isinstance(expr, Structural):
            return expr.dtype(self.dtype_of)
        kinds = {self.dtypes[s] for s in expr.free_symbols}
        return max(kinds, key=_dtype_rank) if kinds else default

    # ------------------------------------------------------- structural helpers (folded)

    def _structural(self, head, *args, shape=None, dtype=None):
        arrays = [self._bind(a) for a in args[: head.arity]]
        expr = head(*arrays, *args[head.arity:])
        shape = expr.shape(self.shape_of) if shape is None else shape
        dtype = expr.dtype(self.dtype_of) if dtype is None else dtype
        return self.assign(expr, shape, dtype, head.__name__.lower())

    def _bind(self, x):
        """A structural primitive's array argument must be a symbol (or a number)."""
        if isinstance(x, sp.Symbol) or x.is_Number:
            return x
        return self.assign(x, self.shape_of(x), self.dtype_of(x), "t")

    def materialize(self, x, shape, dtype):
        """An array of ``shape`` for x, which may be a folded number or a smaller array."""
        if isinstance(x, sp.Symbol) and self.shapes[x] == tuple(shape):
            return x
        if not isinstance(x, sp.Symbol) and not x.free_symbols:
            return self.assign(x, shape, dtype, "full", fold=False)
        if self.shape_of(x) == tuple(shape):
            return self.assign(x, shape, dtype, "t")
        return self._structural(BroadcastTo, x, sp.Tuple(*shape), shape=tuple(shape), dtype=dtype)

    def is_scalar(self, x) -> bool:
        """A number or a 0-d array: it broadcasts against anything, so shapes need not be made."""
        return x.is_Number or self.shape_of(x) == ()

    def reshape(self, x, shape):
        """x in ``shape``; a number, or a 0-d x standing for a larger array (a cotangent), stays as
        it is, but a 0-d array becomes a 1-element one (the shape a structural op reads)."""
        shape = tuple(shape)
        if x.is_Number or self.shape_of(x) == shape or (self.is_scalar(x) and numel(shape) != 1):
            return x
        return self._structural(Reshape, x, sp.Tuple(*shape))

    def broadcast_to(self, x, shape):
        shape = tuple(shape)
        if self.is_scalar(x) or self.shape_of(x) == shape:
            return x
        return self._structural(BroadcastTo, x, sp.Tuple(*shape))

    def permute(self, x, perm):
        perm = tuple(perm)
        if self.is_scalar(x) or perm == tuple(range(len(perm))):
            return x
        return self._structural(Permute, x, sp.Tuple(*perm))

    def swap_last(self, x):
        n = len(self.shape_of(x))
        return self.permute(x, (*range(n - 2), n - 1, n - 2))

    def matmul(self, a, b):
        sa, sb = self.shape_of(a), self.shape_of(b)
        if len(sa) >= 2 and len(sb) >= 2 and sa[-1] == 1:
            # An outer product: elementwise, which is cheaper and keeps the sign of zeros exact.
            return self.assign(a * b, broadcast_shapes(sa[:-2], sb[:-2]) + (sa[-2], sb[-1]),
                               self.dtype_of(a), "outer")
        return self._structural(Matmul, a, b)

    def reduce_sum(self, x, axes, keepdim: bool, shape=None):
        """Sum of x over axes; ``shape`` is x's full shape when x may be a scalar standing for it."""
        axes = tuple(sorted(axes))
        if shape is not None and tuple(shape) and self.is_scalar(x):
            full = tuple(shape)
            return x * numel([full[i] for i in axes])
        if not axes:
            return x
        return self._structural(ReduceSum, x, sp.Tuple(*axes), sp.true if keepdim else sp.false)

    def logsumexp(self, x, axes, keepdim: bool):
        return self._structural(LogSumExp, x, sp.Tuple(*sorted(axes)), sp.true if keepdim else sp.false)

    def softmax(self, x, axis: int, log: bool = False):
        """(log_)softmax along ``axis``; a 0-d x is taken as one element along an axis of its own."""
        shape, dtype = self.shape_of(x), self.dtype_of(x)
        if not shape:
            return self.reshape(self.softmax(self.materialize(x, (1,), dtype), 0, log), ())
        return self._structural(LogSoftmax if log else Softmax, x, sp.Integer(axis))

    def concatenate(self, xs, axis: int, shape, dtype: str):
        """``xs`` (arrays of ``dtype``) joined along ``axis`` into ``shape``."""
        return self.assign(Concatenate(*[self._bind(x) for x in xs], sp.Integer(axis)), shape, dtype, "cat")

    def reduce_max(self, x, axes, keepdim: bool, whole: bool = False, smallest: bool = False):
        """max (min if ``smallest``) over ``axes``; ``whole``: PyTorch's gradient rule for
        ``max()`` of a whole tensor (functions.ReduceMax)."""
        head = ReduceMin if smallest else ReduceMax
        return self._structural(head, x, sp.Tuple(*sorted(axes)), sp.true if keepdim else sp.false,
                                sp.true if whole else sp.false)

    def arg_reduce(self, x, axis: int, keepdim: bool, smallest: bool = False):
        """The int64 index of the first largest (smallest) entry along ``axis``."""
        return self._structural(ArgMin if smallest else ArgMax, x, sp.Integer(axis), sp.true if keepdim else sp.false)

    def argsort(self, x, axis: int, descending: bool):
        return self._structural(ArgSort, x, sp.Integer(axis), sp.true if descending else sp.false)

    def take_along(self, x, indices, axis: int):
        return self._structural(TakeAlong, x, indices, sp.Integer(axis))

    def put_along(self, g, indices, axis: int, shape):
        return self._structural(PutAlong, g, indices, sp.Integer(axis), sp.Tuple(*shape))

    def cumulative(self, x, axis: int, reverse: bool = False):
        """Running sums of x along ``axis`` (from the end when ``reverse``)."""
        return self._structural(CumSum, x, sp.Integer(axis), sp.true if reverse else sp.false)

    def cumprod(self, x, axis: int, reverse: bool = False):
        return self._structural(CumProd, x, sp.Integer(axis), sp.true if reverse else sp.false)

    def exclusive_product(self, x, axis: int, reverse: bool = False):
        """The product of the entries before each one along ``axis`` (after it, if ``reverse``)."""
        shape, dtype = self.shape_of(x), self.dtype_of(x)
        n = shape[axis]
        kept = [(1, 0, m, 1) for m in shape]
        kept[axis] = (1, 1, n, 1) if reverse else (1, 0, n - 1, 1)
        one = self.materialize(sp.S.One, (*shape[:axis], 1, *shape[axis + 1:]), dtype)
        parts = [self.index(x, kept), one] if reverse else [one, self.index(x, kept)]
        return self.cumprod(self.concatenate(parts, axis, shape, dtype), axis, reverse)

    def reduce_prod(self, x, axis: int, keepdim: bool, whole: bool = False):
        """The product along ``axis``; ``whole``: x is a whole tensor flattened (ReduceProd)."""
        return self._structural(ReduceProd, x, sp.Integer(axis), sp.true if keepdim else sp.false,
                                sp.true if whole else sp.false)

    def astype(self, x, dtype: str):
        if x.is_Number or self.dtype_of(x) == dtype:
            return x
        if self.dtype_of(x) == "bool":  # a select, not a cast: XLA turns cast(mask) * y into a select
            return self.assign(select(x, 1, 0), self.shape_of(x), dtype, "as_number")  # that drops y's NaN
        return self._structural(AsType, x, sp.Symbol(dtype))

    def one_hot(self, indices, classes: int, dtype: str):
        return self._structural(OneHot, indices, sp.Integer(classes), sp.Symbol(dtype))

    def index(self, x, spec):
        return self._structural(Index, x, _spec(spec))

    def index_add(self, g, spec, shape):
        return self._structural(IndexAdd, g, _spec(spec), sp.Tuple(*shape))

    def stop_gradient(self, x):
        return self._structural(StopGradient, x)

    def reduced_with_slope(self, value, x, slope, axes, keepdim: bool):
        """``value`` (a reduction of x over ``axes``) whose gradient w.r.t. x is g times ``slope``."""
        return self._structural(ReducedWithSlope, value, x, slope, sp.Tuple(*sorted(axes)),
                                sp.true if keepdim else sp.false)

    def expand_reduced(self, g, full_shape, axes, keepdim: bool):
        """g, the cotangent of a reduction's output, laid out to broadcast against its input."""
        if keepdim or self.is_scalar(g):
            return g
        return self.reshape(g, reduced_shape(full_shape, axes, True))

    def sum_to(self, x, shape):
        """Sum x down to ``shape``: the one place where broadcasting is undone."""
        shape = tuple(shape)
        have = self.shape_of(x)
        if have == shape:
            return x
        lead = len(have) - len(shape)
        axes = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(shape)
                                          if n == 1 and have[i + lead] != 1)
        summed = self.reduce_sum(x, axes, keepdim=True)
        return self.reshape(summed, shape)

    def copy(self, name: str | None = None) -> "Program":
        """An independent program with the same contents (assignments are immutable SymPy)."""
        other = Program(name or self.name)
        other.inputs, other.assignments = list(self.inputs), list(self.assignments)
        other.outputs, other.output_names = list(self.outputs), list(self.output_names)
        other.shapes, other.dtypes, other._taken = dict(self.shapes), dict(self.dtypes), Counter(self._taken)
        return other

    # ------------------------------------------------------------------------ inspection

    def node_count(self) -> int:
        """Assignments plus the operation heads inside them: the emitted program's size."""
        return sum(_count_ops(expr) for _, expr in self.assignments)


def _spec(spec):
    return spec if isinstance(spec, sp.Tuple) else sp.Tuple(*(sp.Tuple(*item) for item in spec))


def _count_ops(expr) -> int:
    count, stack = 0, [expr]
    while stack:
        e = stack.pop()
        if e.args and not isinstance(e, (sp.Tuple,)):
            count += 1
            stack.extend(a for a in e.args if not a.is_Atom)
    return max(count, 1)


_RANKS = {name: rank for rank, name in enumerate(
    ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"))}


def _dtype_rank(name: str) -> int:
    return _RANKS.get(name, _RANKS["float32"])

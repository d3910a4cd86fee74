"""IR heads that move elements by position: advanced indexing and the scatters that undo it,
gather along an axis, flips, rolls, triangles and diagonals.

Each head holds its shape rule, its vector-Jacobian product (written with these same heads, so a
gradient of a gradient stays in the IR) and its JAX text (``_jax_source``, the printer's print
method), so codegen lowers them without knowing them.  Index arrays are integer inputs: they get
no cotangent, and a program that indexes with new values is the same program.  Scatters write
with ``.at[...]``: a NaN reaches only the elements PyTorch's kernels write it to.
"""
from __future__ import annotations

import sympy as sp

from symgrad.ir.functions import Structural, broadcast_shapes, index_text, is_dynamic


def _ints(tup) -> tuple[int, ...]:
    return tuple(int(v) for v in tup)


def _symbol(p, x):
    """An array argument of a structural head: a symbol (or a number), never a larger expression."""
    if isinstance(x, sp.Symbol) or x.is_Number:
        return x
    return p.materialize(x, p.shape_of(x), p.dtype_of(x))


def _cotangent(p, g, out):
    """g as an array of the output's shape and dtype (a cotangent from a wider sum may be wider)."""
    dtype = p.dtype_of(out)
    return p.materialize(p.astype(g, dtype), p.shape_of(out), dtype)


# ------------------------------------------------------------------ advanced indexing


def advanced_shape(shape, index_shapes, axes) -> tuple:
    """NumPy's (and PyTorch's) result of indexing ``axes`` of ``shape`` with integer arrays: their
    broadcast shape replaces the axes where they are adjacent, and leads the result where not."""
    axes = tuple(axes)
    taken = broadcast_shapes(*index_shapes)
    rest = [n for d, n in enumerate(shape) if d not in axes]
    if axes == tuple(range(axes[0], axes[-1] + 1)):
        return (*shape[:axes[0]], *taken, *shape[axes[-1] + 1:])
    return (*taken, *rest)


def _key_text(printer, indices, axes) -> str:
    """``:, i, :, j`` — the arrays at their axes, whole slices between them."""
    items = [":"] * (max(_ints(axes)) + 1)
    for index, axis in zip(indices, _ints(axes)):
        items[axis] = printer._print(index)
    return ", ".join(items) + ("," if len(items) == 1 else "")


class Take(Structural):
    """``x[:, i, j]``: integer arrays ``args[1:-1]`` index the axes ``args[-1]`` of x."""

    display = "take"

    @property
    def arity(self):
        return len(self.args) - 1

    @property
    def indices(self):
        return self.args[1:-1]

    def shape(self, shape_of):
        return advanced_shape(shape_of(self.args[0]), [shape_of(i) for i in self.indices], _ints(self.args[-1]))

    def vjp(self, p, g, out):
        x, axes = self.args[0], self.args[-1]
        g = _cotangent(p, g, out)
        return [(x, p.assign(TakeAdd(g, *self.indices, axes, sp.Tuple(*p.shape_of(x))), p.shape_of(x),
                             p.dtype_of(x), "take_add"))]

    def _jax_source(self, printer):
        return f"{printer._print(self.args[0])}[{_key_text(printer, self.indices, self.args[-1])}]"


class TakeAdd(Structural):
    """``zeros(shape).at[:, i, j].add(g)``: a take's cotangent sent back, repeated indices adding up."""

    display = "take_add"

    @property
    def arity(self):
        return len(self.args) - 2

    @property
    def indices(self):
        return self.args[1:-2]

    def shape(self, shape_of):
        return _ints(self.args[-1])

    def vjp(self, p, g, out):
        source, axes = self.args[0], self.args[-2]
        g = _cotangent(p, g, out)
        taken = Take(g, *self.indices, axes)
        return [(source, p.assign(taken, taken.shape(p.shape_of), p.dtype_of(source), "take"))]

    def _jax_source(self, printer):
        g = printer._print(self.args[0])
        return (f"jnp.zeros({_ints(self.args[-1])!r}, dtype={g}.dtype)"
                f".at[{_key_text(printer, self.indices, self.args[-2])}].add({g})")


class Put(Structural):
    """``x.at[:, i, j].set(v)``: v (a number, or an array of the taken shape) written over x."""

    display = "put"

    @property
    def arity(self):
        return len(self.args) - 1

    @property
    def indices(self):
        return self.args[2:-1]

    def shape(self, shape_of):
        return shape_of(self.args[0])

    def vjp(self, p, g, out):
        x, v, axes = self.args[0], self.args[1], self.args[-1]
        g = _cotangent(p, g, out)
        shape, dtype = p.shape_of(x), p.dtype_of(x)
        cleared = p.assign(Put(g, sp.S.Zero, *self.indices, axes), shape, dtype, "put")
        if v.is_Number:
            return [(x, cleared)]
        taken = Take(g, *self.indices, axes)
        return [(x, cleared), (v, p.assign(taken, taken.shape(p.shape_of), dtype, "take"))]

    def _jax_source(self, printer):
        x, v = (printer._print(a) for a in self.args[:2])
        return f"{x}.at[{_key_text(printer, self.indices, self.args[-1])}].set({v})"


class IndexSet(Structural):
    """``x.at[2, 0:3].set(v)``: basic indexing's write (``args[2]`` is an ir.functions.Index spec)."""

    display = "index_set"
    arity = 2

    def shape(self, shape_of):
        return shape_of(self.args[0])

    def vjp(self, p, g, out):
        x, v, spec = self.args
        g = _cotangent(p, g, out)
        shape, dtype = p.shape_of(x), p.dtype_of(x)
        cleared = p.assign(IndexSet(g, sp.S.Zero, spec), shape, dtype, "index_set")
        return [(x, cleared)] if v.is_Number else [(x, cleared), (v, p.index(g, spec))]

    def _display_args(self, printer):
        return [printer._print(self.args[0]), printer._print(self.args[1]), f"[{index_text(self.args[2])}]"]

    def _jax_source(self, printer):
        x, v = (printer._print(a) for a in self.args[:2])
        if is_dynamic(self.args[2]):
            return printer._dynamic_set(x, v, self.args[2])
        return f"{x}.at[{index_text(self.args[2])}].set({v})"


# -------------------------------------------------------------- along one axis


class Gather(Structural):
    """``take_along_axis(x, index, axis)``: PyTorch's gather, x already cut to the index's extent."""

    display = "gather"
    arity = 2

    def shape(self, shape_of):
        return shape_of(self.args[1])

    def dtype(self, dtype_of):
        return dtype_of(self.args[0])

    def vjp(self, p, g, out):
        x, index, axis = self.args
        g = _cotangent(p, g, out)
        shape, dtype = p.shape_of(x), p.dtype_of(x)
        zeros = p.assign(sp.S.Zero, shape, dtype, "zeros", fold=False)
        return [(x, scatter_along(p, zeros, index, g, int(axis), "add"))]

    def _jax_source(self, printer):
        x, index = (printer._print(a) for a in self.args[:2])
        return f"jnp.take_along_axis({x}, {index}, axis={int(self.args[2])})"


class ScatterAlong(Structural):
    """``base`` with ``src`` written (``how`` = set) or added (``how`` = add) where ``index`` points
    along ``axis`` (of ``rank`` axes): PyTorch's scatter and scatter_add; src is a number or an
    array of the index's shape."""

    display = "scatter"
    arity = 3

    def shape(self, shape_of):
        return shape_of(self.args[0])

    def vjp(self, p, g, out):
        base, index, src, axis, rank, how = self.args
        g = _cotangent(p, g, out)
        shape, dtype = p.shape_of(base), p.dtype_of(base)
        if str(how) == "add":
            to_base = g
        else:  # written over: what was there gets nothing
            to_base = p.assign(ScatterAlong(g, index, sp.S.Zero, axis, rank, how), shape, dtype, "scatter")
        if src.is_Number:
            return [(base, to_base)]
        have, extent = p.shape_of(g), p.shape_of(index)
        if any(n != m for d, (n, m) in enumerate(zip(have, extent)) if d != int(axis)):  # g cut to the index's extent
            g = p.index(g, [(1, 0, n if d == int(axis) else m, 1) for d, (n, m) in enumerate(zip(have, extent))])
        gathered = p.assign(Gather(g, index, axis), extent, dtype, "gather")
        return [(base, to_base), (src, gathered)]

    def _jax_source(self, printer):
        base, index, src, axis, rank, how = self.args
        text = printer._print(index)
        coordinates = ", ".join(text if d == int(axis) else f"jax.lax.broadcasted_iota({text}.dtype, {text}.shape, {d})"
                                for d in range(int(rank)))
        return f"{printer._print(base)}.at[{coordinates}].{how}({printer._print(src)})"


def scatter_along(p, base, index, src, axis: int, how: str):
    """An assignment of ScatterAlong (``how``: "set" or "add")."""
    rank = len(p.shape_of(base))
    expr = ScatterAlong(_symbol(p, base), _symbol(p, index), _symbol(p, src), sp.Integer(axis), sp.Integer(rank),
                        sp.Symbol(how))
    return p.assign(expr, p.shape_of(base), p.dtype_of(base), "scatter")


# ------------------------------------------------------------ rearrangements


class Flip(Structural):
    """x reversed along ``axes``."""

    display = "flip"

    def shape(self, shape_of):
        return shape_of(self.args[0])

    def vjp(self, p, g, out):
        x, axes = self.args
        g = _cotangent(p, g, out)
        return [(x, p.assign(Flip(g, axes), p.shape_of(x), p.dtype_of(x), "flip"))]

    def _jax_source(self, printer):
        return f"jnp.flip({printer._print(self.args[0])}, axis={_ints(self.args[1])!r})"


class Roll(Structural):
    """x shifted cyclically by ``shifts`` along ``axes``."""

    display = "roll"

    def shape(self, shape_of):
        return shape_of(self.args[0])

    def vjp(self, p, g, out):
        x, shifts, axes = self.args
        g = _cotangent(p, g, out)
        back = sp.Tuple(*(-s for s in _ints(shifts)))
        return [(x, p.assign(Roll(g, back, axes), p.shape_of(x), p.dtype_of(x), "roll"))]

    def _jax_source(self, printer):
        x, shifts, axes = self.args
        return f"jnp.roll({printer._print(x)}, {_ints(shifts)!r}, axis={_ints(axes)!r})"


class Triangle(Structural):
    """The lower (``upper`` false) or upper triangle of the last two axes from diagonal ``k``, zeros
    elsewhere (selected, so a NaN outside is gone, as in PyTorch); its own VJP."""

    display = "triangle"

    def shape(self, shape_of):
        return shape_of(self.args[0])

    def vjp(self, p, g, out):
        x, k, upper = self.args
        g = _cotangent(p, g, out)
        return [(x, p.assign(Triangle(g, k, upper), p.shape_of(x), p.dtype_of(x), "triangle"))]

    def _jax_source(self, printer):
        x, k, upper = self.args
        return f"jnp.{'triu' if upper else 'tril'}({printer._print(x)}, {int(k)})"


def diagonal_length(n: int, m: int, offset: int) -> int:
    return max(0, min(n + min(offset, 0), m - max(offset, 0)))


class Diagonal(Structural):
    """The diagonal ``offset`` of axes ``axis1``, ``axis2``, as a last axis (NumPy's and PyTorch's)."""

    display = "diagonal"

    def shape(self, shape_of):
        x, offset, a1, a2 = self.args
        shape, a1, a2 = shape_of(x), int(a1), int(a2)
        rest = tuple(n for d, n in enumerate(shape) if d not in (a1, a2))
        return (*rest, diagonal_length(shape[a1], shape[a2], int(offset)))

    def vjp(self, p, g, out):
        x, offset, a1, a2 = self.args
        g = _cotangent(p, g, out)
        shape, a1, a2 = p.shape_of(x), int(a1), int(a2)
        embed = DiagEmbed(g, offset, sp.Integer(shape[a1]), sp.Integer(shape[a2]))
        embedded = p.assign(embed, embed.shape(p.shape_of), p.dtype_of(x), "diag_embed")
        rank, others = len(shape), [d for d in range(len(shape)) if d not in (a1, a2)]
        perm = [rank - 2 if d == a1 else rank - 1 if d == a2 else others.index(d) for d in range(rank)]
        return [(x, p.permute(embedded, perm))]

    def _jax_source(self, printer):
        x, offset, a1, a2 = self.args
        return f"jnp.diagonal({printer._print(x)}, {int(offset)}, {int(a1)}, {int(a2)})"


class DiagEmbed(Structural):
    """An (n, m) matrix per leading index, zero but for diagonal ``offset``, which holds the last axis
    of g: diag() of a vector, and a diagonal's cotangent."""

    display = "diag_embed"

    def shape(self, shape_of):
        g, offset, n, m = self.args
        return (*shape_of(g)[:-1], int(n), int(m))

    def vjp(self, p, g, out):
        source, offset = self.args[:2]
        g = _cotangent(p, g, out)
        rank = len(p.shape_of(out))
        diagonal = Diagonal(g, offset, sp.Integer(rank - 2), sp.Integer(rank - 1))
        return [(source, p.assign(diagonal, p.shape_of(source), p.dtype_of(source), "diagonal"))]

    def _jax_source(self, printer):
        g, offset, n, m = self.args
        g, offset, n, m = printer._print(g), int(offset), int(n), int(m)
        length = diagonal_length(n, m, offset)
        rows, columns = max(-offset, 0), max(offset, 0)
        return (f"jnp.zeros((*{g}.shape[:-1], {n}, {m}), dtype={g}.dtype)"
                f".at[..., jnp.arange({length}) + {rows}, jnp.arange({length}) + {columns}].set({g})")


# ------------------------------------------------------------------ building them


def _assign(p, expr, hint):
    return p.assign(expr, expr.shape(p.shape_of), expr.dtype(p.dtype_of), hint)


def take(p, x, indices, axes):
    return _assign(p, Take(_symbol(p, x), *(_symbol(p, i) for i in indices), sp.Tuple(*axes)), "take")


def put(p, x, v, indices, axes):
    """x with v (a number, or an array of the taken shape) written at the indices."""
    return _assign(p, Put(_symbol(p, x), _symbol(p, v), *(_symbol(p, i) for i in indices), sp.Tuple(*axes)), "put")


def index_set(p, x, v, spec):
    """x with v (a number, or an array of the indexed shape) written at a basic index ``spec``."""
    spec = sp.Tuple(*(sp.Tuple(*item) for item in spec))
    return _assign(p, IndexSet(_symbol(p, x), _symbol(p, v), spec), "index_set")


def gather(p, x, index, axis: int):
    return _assign(p, Gather(_symbol(p, x), _symbol(p, index), sp.Integer(axis)), "gather")


def flip(p, x, axes):
    return _assign(p, Flip(_symbol(p, x), sp.Tuple(*axes)), "flip")


def roll(p, x, shifts, axes):
    return _assign(p, Roll(_symbol(p, x), sp.Tuple(*shifts), sp.Tuple(*axes)), "roll")


def triangle(p, x, k: int, upper: bool):
    return _assign(p, Triangle(_symbol(p, x), sp.Integer(k), sp.true if upper else sp.false), "triangle")


def diagonal(p, x, offset: int, axis1: int, axis2: int):
    return _assign(p, Diagonal(_symbol(p, x), sp.Integer(offset), sp.Integer(axis1), sp.Integer(axis2)), "diagonal")


def diag_embed(p, x, offset: int, n: int, m: int):
    return _assign(p, DiagEmbed(_symbol(p, x), sp.Integer(offset), sp.Integer(n), sp.Integer(m)), "diag_embed")

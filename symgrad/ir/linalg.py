"""IR heads for contractions, convolutions, windows and matrix factorizations.

Each head is one structural primitive, in one class: its shape, its vector-Jacobian product
written with IR heads (a convolution's is two convolutions, a window's is a fold, an inverse's is
two products with the inverse), and its JAX text (``_jax_source``, which codegen's printer
calls).  Arrays are laid out as PyTorch's: channels first (``N, C, *spatial``), kernels
``O, I, *window``, matrices in the last two axes.
"""
from __future__ import annotations

import itertools
import string

import numpy as np
import sympy as sp

from symgrad.ir.functions import Structural, less, select
from symgrad.ir.indexing import diag_embed, diagonal, flip, triangle

LETTERS = string.ascii_lowercase + string.ascii_uppercase


def _ints(values) -> tuple:
    return tuple(int(v) for v in values)


def _pairs(values) -> tuple:
    return tuple((int(lo), int(hi)) for lo, hi in values)


def emit(p, head, *args, hint: str):
    """``head`` applied in program ``p``: array arguments bound to symbols, the result assigned."""
    arrays = [a if isinstance(a, sp.Symbol) or a.is_Number else p.assign(a, p.shape_of(a), p.dtype_of(a), "t")
              for a in args[: head.arity_of(args)]]
    expr = head(*arrays, *args[head.arity_of(args):])
    return p.assign(expr, expr.shape(p.shape_of), expr.dtype(p.dtype_of), hint)


class _Head(Structural):
    @classmethod
    def arity_of(cls, args) -> int:
        return cls.arity

    def _display_args(self, printer):
        """Attributes shown as Python writes them: nested tuples of ints (paddings, labels)."""
        return [printer._print(a) for a in self.arrays] + [_plain(a) for a in self.args[len(self.arrays):]]


def _plain(value) -> str:
    if isinstance(value, sp.Tuple):
        return repr(_nested(value))
    return str(value)


def _nested(value):
    return tuple(_nested(v) for v in value) if isinstance(value, sp.Tuple) else int(value)


# ------------------------------------------------------------------------------ einsum


def einsum_sizes(subscripts, shapes) -> dict:
    """Each label's size; size-1 axes broadcast (ValueError on a mismatch, PyTorch's wording)."""
    sizes = {}
    for position, (labels, shape) in enumerate(zip(subscripts, shapes)):
        for label, n in zip(labels, shape):
            have = sizes.get(label, 1)
            if have != 1 and n != 1 and have != n:
                raise ValueError(f"einsum(): subscript {label_name(label)} has size {n} for operand "
                                 f"{position} which does not broadcast with previously seen size {have}")
            sizes[label] = max(have, n) if n else 0
    return sizes


def label_name(label: int) -> str:
    """PyTorch's numbering of einsum labels: A-Z are 0-25, a-z 26-51 (the ellipsis's axes come after)."""
    return LETTERS[26:][label] if label < 26 else LETTERS[label - 26] if label < 52 else "..."


class Einsum(_Head):
    """``einsum`` of ``args[:-2]``: ``args[-2]`` holds each operand's labels (integers), ``args[-1]``
    the output's.  Its VJP for an operand is the einsum of the cotangent with the other operands."""

    display = "einsum"

    @classmethod
    def arity_of(cls, args) -> int:
        return len(args) - 2

    @property
    def arity(self):
        return len(self.args) - 2

    @property
    def subscripts(self):
        return [_ints(s) for s in self.args[-2]], _ints(self.args[-1])

    def shape(self, shape_of):
        inputs, output = self.subscripts
        sizes = einsum_sizes(inputs, [shape_of(a) for a in self.arrays])
        return tuple(sizes[label] for label in output)

    def _jax_source(self, printer):
        inputs, output = self.subscripts
        letters = {label: LETTERS[i] for i, label in enumerate(sorted(set().union(*map(set, inputs))))}
        spec = ",".join("".join(letters[i] for i in s) for s in inputs) + "->" + "".join(letters[i] for i in output)
        arrays = ", ".join(printer._print(a) for a in self.arrays)
        return f"jnp.einsum({spec!r}, {arrays}, precision=jax.lax.Precision.HIGHEST)"

    def vjp(self, p, g, out):
        inputs, output = self.subscripts
        arrays = self.arrays
        g = p.materialize(g, p.shape_of(out), p.dtype_of(out))
        sizes = einsum_sizes(inputs, [p.shape_of(a) for a in arrays])
        contributions = []
        for k, (x, labels) in enumerate(zip(arrays, inputs)):
            if x.is_Number:
                continue
            others = [(a, s) for j, (a, s) in enumerate(zip(arrays, inputs)) if j != k]
            reachable = set(output).union(*(set(s) for _, s in others))
            kept = tuple(label for label in labels if label in reachable)
            operands = [g, *(a for a, _ in others)]
            spec = [output, *(s for _, s in others)]
            grad = emit(p, Einsum, *operands, sp.Tuple(*(sp.Tuple(*s) for s in spec)), sp.Tuple(*kept), hint="einsum_grad")
            # Labels summed within this operand alone, or of size 1 in every other operand, have
            # size 1 here: every entry of x along them gets the same cotangent.  Where x has size 1
            # and others more, x was broadcast: its cotangent is summed.
            have = dict(zip(kept, p.shape_of(grad)))
            grad = p.reshape(grad, tuple(have.get(label, 1) for label in labels))
            shape = p.shape_of(x)
            grad = p.sum_to(grad, tuple(1 if n == 1 else m for n, m in zip(shape, p.shape_of(grad))))
            contributions.append((x, p.broadcast_to(grad, shape)))
        return contributions


# ------------------------------------------------------------------------- convolution


def dilated(size: int, dilation: int) -> int:
    return 0 if size == 0 else 1 + dilation * (size - 1)


def conv_output_size(size, window, stride, padding, lhs_dilation=1, rhs_dilation=1) -> int:
    lo, hi = padding
    return (dilated(size, lhs_dilation) + lo + hi - dilated(window, rhs_dilation)) // stride + 1


class Conv(_Head):
    """XLA's ``conv_general_dilated`` on ``x`` (N, C, *spatial) and ``w`` (O, I, *window):
    attributes strides, padding (lo, hi) pairs, lhs and rhs dilations, feature and batch groups.
    A PyTorch convolution has lhs dilation 1 and one batch group; the others appear in its VJP
    (the transposed convolutions), which are convolutions again, so gradients of gradients work."""

    display = "conv"
    arity = 2

    def attributes(self):
        strides, padding, lhs_dilation, rhs_dilation, groups, batch_groups = self.args[2:]
        return _ints(strides), _pairs(padding), _ints(lhs_dilation), _ints(rhs_dilation), int(groups), int(batch_groups)

    def shape(self, shape_of):
        strides, padding, lhs_dilation, rhs_dilation, _, batch_groups = self.attributes()
        (n, _, *spatial), (o, _, *window) = shape_of(self.args[0]), shape_of(self.args[1])
        return (n // batch_groups, o, *(conv_output_size(*a) for a in zip(spatial, window, strides, padding,
                                                                            lhs_dilation, rhs_dilation)))

    def _jax_source(self, printer):
        strides, padding, lhs_dilation, rhs_dilation, groups, batch_groups = self.attributes()
        spatial = "DHW"[-len(strides):] if len(strides) <= 3 else None
        numbers = (f"NC{spatial}", f"OI{spatial}", f"NC{spatial}")
        x, w = (printer._print(a) for a in self.args[:2])

        def call(x, w, groups):
            return (f"jax.lax.conv_general_dilated({x}, {w}, window_strides={strides}, padding={padding}, "
                    f"lhs_dilation={lhs_dilation}, rhs_dilation={rhs_dilation}, dimension_numbers={numbers}, "
                    f"feature_group_count={groups}, batch_group_count={batch_groups}, "
                    f"precision=jax.lax.Precision.HIGHEST)")

        if groups == 1:
            return call(x, w, 1)
        # XLA's grouped convolution lets an inf or NaN of one group make NaN in the others (PyTorch's
        # stay finite): the groups' convolutions one after another (``lax.map``: compiled once), their
        # channels side by side
        xs = f"jnp.moveaxis({x}.reshape({x}.shape[0], {groups}, {x}.shape[1] // {groups}, *{x}.shape[2:]), 1, 0)"
        ws = f"{w}.reshape({groups}, {w}.shape[0] // {groups}, *{w}.shape[1:])"
        each = f"jax.lax.map(lambda xw: {call('xw[0]', 'xw[1]', 1)}, ({xs}, {ws}))"
        return f"(lambda y: jnp.moveaxis(y, 0, 1).reshape(y.shape[1], y.shape[0] * y.shape[2], *y.shape[3:]))({each})"

    def vjp(self, p, g, out):
        x, w = self.args[:2]
        g = p.materialize(g, p.shape_of(out), p.dtype_of(out))
        return [(x, self._input_grad(p, g)), (w, self._weight_grad(p, g))]

    def _input_grad(self, p, g):
        """A convolution of g with the flipped kernel, its in and out channels swapped per group."""
        x, w = self.args[:2]
        strides, padding, lhs_dilation, rhs_dilation, groups, batch_groups = self.attributes()
        groups = max(groups, batch_groups)
        (_, _, *spatial), (o, i, *window), (_, _, *out_spatial) = p.shape_of(x), p.shape_of(w), p.shape_of(g)
        kernel = p.reshape(w, (groups, o // groups, i, *window))
        kernel = p.permute(kernel, (1, 0, 2, *range(3, 3 + len(window))))
        kernel = p.reshape(kernel, (o // groups, groups * i, *window))
        kernel = p.permute(kernel, (1, 0, *range(2, 2 + len(window))))  # (I', O', *window): g's channels in
        kernel = flip(p, kernel, range(2, 2 + len(window)))
        pads = []
        for size, k, s, (lo, _), ld, rd, n in zip(spatial, window, strides, padding, lhs_dilation, rhs_dilation,
                                                   out_spatial):
            before = dilated(k, rd) - lo - 1
            pads.append((before, dilated(size, ld) + dilated(k, rd) - 1 - dilated(n, s) - before))
        grad = emit(p, Conv, g, kernel, _tuple(lhs_dilation), _tuple(pads), _tuple(strides), _tuple(rhs_dilation),
                    sp.Integer(groups), sp.Integer(1), hint="conv_input_grad")
        if batch_groups > 1:  # the batch groups come back out of the features
            n, c, *rest = p.shape_of(grad)
            grad = p.reshape(grad, (n, batch_groups, c // batch_groups, *rest))
            grad = p.permute(grad, (1, 0, *range(2, len(rest) + 3)))
            grad = p.reshape(grad, (batch_groups * n, c // batch_groups, *rest))
        return grad

    def _weight_grad(self, p, g):
        """A convolution of the input (channels as batch) with g (batch as channels)."""
        x, w = self.args[:2]
        strides, padding, lhs_dilation, rhs_dilation, groups, batch_groups = self.attributes()
        (_, _, *spatial), (_, _, *window), (_, _, *out_spatial) = p.shape_of(x), p.shape_of(w), p.shape_of(g)
        swap = lambda a: p.permute(a, (1, 0, *range(2, 2 + len(window))))  # noqa: E731
        pads = []
        for size, k, s, (lo, _), ld, rd, n in zip(spatial, window, strides, padding, lhs_dilation, rhs_dilation,
                                                   out_spatial):
            pads.append((lo, dilated(n, s) - dilated(size, ld) + dilated(k, rd) - lo - 1))
        grad = emit(p, Conv, swap(x), swap(g), _tuple(rhs_dilation), _tuple(pads), _tuple(lhs_dilation),
                    _tuple(strides), sp.Integer(batch_groups), sp.Integer(groups), hint="conv_weight_grad")
        return swap(grad)


def _tuple(values):
    return sp.Tuple(*(sp.Tuple(*v) if isinstance(v, tuple) else v for v in values))


class Pad(_Head):
    """x with ``args[1]`` (a number) added around it: (lo, hi) per axis in ``args[2]``, negative
    amounts cutting instead.  Its VJP is the opposite padding of the cotangent."""

    display = "pad"

    def shape(self, shape_of):
        return tuple(n + lo + hi for n, (lo, hi) in zip(shape_of(self.args[0]), _pairs(self.args[2])))

    def _jax_source(self, printer):
        x, value = printer._print(self.args[0]), printer._print(self.args[1])
        config = [(lo, hi, 0) for lo, hi in _pairs(self.args[2])]
        return f"jax.lax.pad({x}, jnp.asarray({value}, {x}.dtype), {config})"

    def vjp(self, p, g, out):
        g = p.materialize(g, p.shape_of(out), p.dtype_of(out))
        back = sp.Tuple(*(sp.Tuple(-lo, -hi) for lo, hi in _pairs(self.args[2])))
        return [(self.args[0], emit(p, Pad, g, sp.S.Zero, back, hint="unpadded"))]


# ------------------------------------------------------------------------------ windows


class Window:
    """A pooling window over the trailing spatial axes: sizes, strides, dilations, (lo, hi) padding."""

    def __init__(self, sizes, strides, dilations, padding):
        self.sizes, self.strides, self.dilations, self.padding = sizes, strides, dilations, padding

    @classmethod
    def of(cls, attrs):
        sizes, strides, dilations, padding = attrs
        return cls(_ints(sizes), _ints(strides), _ints(dilations), _pairs(padding))

    def out_sizes(self, spatial):
        return tuple(conv_output_size(n, k, s, pad, 1, d)
                     for n, k, s, d, pad in zip(spatial, self.sizes, self.strides, self.dilations, self.padding))

    def offsets(self):
        """Every position of the window, in row-major order (PyTorch's scan order)."""
        return list(itertools.product(*(range(k) for k in self.sizes)))

    def slices(self, offset, out_spatial):
        """The strided slice of the padded input that this window position sees, per spatial axis."""
        return [(i * d, i * d + s * (n - 1) + 1, s)
                for i, d, s, n in zip(offset, self.dilations, self.strides, out_spatial)]


def _slice_text(slices) -> str:
    return ", ".join(["..."] + [f"{a}:{b}" + (f":{s}" if s != 1 else "") for a, b, s in slices])


class Patches(_Head):
    """x (*lead, *spatial), padded with ``args[5]``, as (*lead, K, *out): the K window positions'
    strided views stacked on a new axis; ``args[6]`` is the spatial shape.  Its VJP folds the
    cotangent back (``Fold``)."""

    display = "patches"

    def window(self):
        return Window.of(self.args[1:5])

    def shape(self, shape_of):
        window, shape = self.window(), shape_of(self.args[0])
        lead = shape[: len(shape) - len(window.sizes)]
        return (*lead, len(window.offsets()), *window.out_sizes(_ints(self.args[6])))

    def _jax_source(self, printer):
        window, spatial = self.window(), _ints(self.args[6])
        x, value = printer._print(self.args[0]), printer._print(self.args[5])
        nd = len(spatial)
        padded = f"jnp.pad({x}, [(0, 0)] * ({x}.ndim - {nd}) + {list(window.padding)}, constant_values={value})"
        out = window.out_sizes(spatial)
        views = ", ".join(f"xp[{_slice_text(window.slices(o, out))}]" for o in window.offsets())
        return f"(lambda xp: jnp.stack([{views}], axis={-nd - 1}))({padded})"

    def vjp(self, p, g, out):
        x = self.args[0]
        g = p.materialize(g, p.shape_of(out), p.dtype_of(out))
        return [(x, emit(p, Fold, g, *self.args[1:5], self.args[6], hint="folded"))]


class Fold(_Head):
    """The adjoint of ``Patches``: each window position's slice added back where it was taken
    from, the padding cut away; ``args[5]`` is the spatial shape to fold into."""

    display = "fold"

    def window(self):
        return Window.of(self.args[1:5])

    def shape(self, shape_of):
        nd = len(self.window().sizes)
        shape = shape_of(self.args[0])
        return (*shape[: len(shape) - nd - 1], *_ints(self.args[5]))

    def _jax_source(self, printer):
        window, spatial = self.window(), _ints(self.args[5])
        g, nd = printer._print(self.args[0]), len(spatial)
        out = window.out_sizes(spatial)
        padded = [n + lo + hi for n, (lo, hi) in zip(spatial, window.padding)]
        terms = []
        for k, offset in enumerate(window.offsets()):
            config = [(a, size - b, s - 1) for (a, b, s), size in zip(window.slices(offset, out), padded)]
            terms.append(f"jax.lax.pad(jnp.take({g}, {k}, axis={-nd - 1}), jnp.zeros((), {g}.dtype), "
                         f"[(0, 0, 0)] * ({g}.ndim - {nd + 1}) + {config})")
        crop = _slice_text([(lo, lo + n, 1) for n, (lo, _) in zip(spatial, window.padding)])
        return f"({' + '.join(terms)})[{crop}]"

    def vjp(self, p, g, out):
        g = p.materialize(g, p.shape_of(out), p.dtype_of(out))
        return [(self.args[0], emit(p, Patches, g, *self.args[1:5], sp.S.Zero, self.args[5], hint="patches"))]


class WindowMax(_Head):
    """The max over axis ``args[1]`` (NaN if any is), whose gradient goes to one entry only:
    PyTorch's max-pool argmax, the first largest or the last NaN."""

    display = "window_max"

    def shape(self, shape_of):
        shape, axis = shape_of(self.args[0]), int(self.args[1])
        return shape[:axis] + shape[axis + 1:]

    def _jax_source(self, printer):
        return f"jnp.max({printer._print(self.args[0])}, axis={int(self.args[1])})"

    def vjp(self, p, g, out):
        x, axis = self.args[0], int(self.args[1])
        shape = p.shape_of(x)
        g = p.reshape(p.materialize(g, p.shape_of(out), p.dtype_of(out)), shape[:axis] + (1,) + shape[axis + 1:])
        chosen = emit(p, ArgmaxMask, x, self.args[1], hint="argmax")
        return [(x, select(chosen, g, sp.S.Zero))]


class ArgmaxMask(_Head):
    """1 at the entry along axis ``args[1]`` a max-pool picks (the last NaN, else the first max)."""

    display = "argmax_mask"

    def shape(self, shape_of):
        return shape_of(self.args[0])

    def _jax_source(self, printer):
        x, axis = printer._print(self.args[0]), int(self.args[1])
        k = f"{x}.shape[{axis}]"
        last_nan = f"{k} - 1 - jnp.argmax(jnp.flip(jnp.isnan({x}), {axis}), axis={axis})"
        index = f"jnp.where(jnp.isnan({x}).any(axis={axis}), {last_nan}, jnp.argmax({x}, axis={axis}))"
        return f"jax.nn.one_hot({index}, {k}, axis={axis}, dtype={x}.dtype)"

    def vjp(self, p, g, out):
        return []


# ---------------------------------------------------------------------- factorizations
#
# Matrices are the last two axes; leading axes are batches, equal in every operand.  Each VJP is
# PyTorch's (FunctionsManual.cpp) in matrix form.  A factorization with several outputs is one
# head per output (``part``): the VJP of the pair is the sum of each part's with the other's
# cotangent zero, which is what the separate heads add up to in reverse mode.


def _cotangent(p, g, out):
    return p.materialize(g, p.shape_of(out), p.dtype_of(out))


def _elementwise(p, expr, hint):
    return p.assign(expr, p.shape_of(expr), p.dtype_of(expr), hint)


def _mm(p, *xs):
    result = xs[0]
    for x in xs[1:]:
        result = p.matmul(result, x)
    return result


def _columns(p, x, start, stop):
    """``x[..., start:stop]``, the trailing axis cut."""
    if (start, stop) == (0, p.shape_of(x)[-1]):
        return x
    return p.index(x, [(1, 0, n, 1) for n in p.shape_of(x)[:-1]] + [(1, start, stop, 1)])


def _rows(p, x, start, stop):
    shape = p.shape_of(x)
    if (start, stop) == (0, shape[-2]):
        return x
    return p.index(x, [(1, 0, n, 1) for n in shape[:-2]] + [(1, start, stop, 1), (1, 0, shape[-1], 1)])


def _as_row(p, v):
    """(..., n) as (..., 1, n): to scale a matrix's columns."""
    return p.reshape(v, (*p.shape_of(v)[:-1], 1, p.shape_of(v)[-1]))


def _as_column(p, v):
    return p.reshape(v, (*p.shape_of(v), 1))


def _gaps(p, values):
    """E with ``E[i, j] = values[j] - values[i]`` and ones on the diagonal (the divisor of the
    eigenvector and singular-vector terms, whose own diagonal is zero)."""
    n, dtype = p.shape_of(values)[-1], p.dtype_of(values)
    eye = diag_embed(p, p.materialize(sp.S.One, (n,), dtype), 0, n, n)
    return _elementwise(p, _as_row(p, values) - _as_column(p, values) + eye, "gaps")


def _skew(p, x):
    return _elementwise(p, x - p.swap_last(x), "skew")


class _Factor(_Head):
    """A factorization's output ``part`` (``args[1]``) of one matrix argument."""

    @property
    def part(self) -> int:
        return int(self.args[1])

    def sibling(self, p, part):
        """Another output of the same factorization, computed again in the VJP."""
        return emit(p, type(self), self.args[0], sp.Integer(part), *self.args[2:], hint=self.display)


class Inverse(_Head):
    """``A^-1``; its VJP ``-A^-T G A^-T``."""

    display = "inv"
    arity = 1

    def shape(self, shape_of):
        return shape_of(self.args[0])

    def _jax_source(self, printer):
        return f"jnp.linalg.inv({printer._print(self.args[0])})"

    def vjp(self, p, g, out):
        g, inverse_t = _cotangent(p, g, out), p.swap_last(out)
        return [(self.args[0], _elementwise(p, -_mm(p, inverse_t, g, inverse_t), "inv_grad"))]


def _determinant_grad(p, A, scale):
    """``scale A^-T``, scale (the cotangent times the determinant, or 1/det's) one per matrix."""
    inverse = emit(p, Inverse, A, hint="inv")
    scale = p.reshape(scale, (*p.shape_of(scale), 1, 1))
    return _elementwise(p, scale * p.swap_last(inverse), "det_grad")


class Det(_Head):
    """``det A``.  Its VJP is ``g det(A) A^-T``, and at a (numerically) singular A, where the
    inverse does not exist, the cofactors through the SVD: ``det(U) det(Vh) g U diag(D) Vh`` with
    D_i the product of the other singular values (PyTorch's ``linalg_det_backward``)."""

    display = "det"
    arity = 1

    def shape(self, shape_of):
        return shape_of(self.args[0])[:-2]

    def _jax_source(self, printer):
        return f"jnp.linalg.det({printer._print(self.args[0])})"

    def vjp(self, p, g, out):
        A = self.args[0]
        shape, dtype, g = p.shape_of(A), p.dtype_of(A), _cotangent(p, g, out)
        n, last = shape[-1], len(shape) - 1
        singular = p.assign(less(sp.Abs(out), 100 * float(np.finfo(dtype).eps)), p.shape_of(out), "bool", "singular")
        mask = p.reshape(singular, (*shape[:-2], 1, 1))
        ones = p.materialize(sp.S.One, (n,), dtype)
        invertible = p.assign(select(mask, diag_embed(p, ones, 0, n, n), A), shape, dtype, "invertible")
        nonsingular = _determinant_grad(p, invertible, _elementwise(p, g * out, "g_det"))
        stand_in = diag_embed(p, p.cumulative(ones, 0), 0, n, n)  # distinct singular values: differentiable
        U, S, Vh = (emit(p, Svd, p.assign(select(mask, A, stand_in), shape, dtype, "singular_a"), sp.Integer(part),
                         sp.false, hint="svd") for part in range(3))
        alpha = _elementwise(p, g * emit(p, Det, U, hint="det") * emit(p, Det, Vh, hint="det"), "alpha")
        others = _elementwise(p, _as_column(p, alpha) * p.exclusive_product(S, last - 1)
                              * p.exclusive_product(S, last - 1, reverse=True), "cofactor")
        cofactors = p.matmul(_elementwise(p, U * _as_row(p, others), "cofactors"), Vh)
        return [(A, p.assign(select(mask, cofactors, nonsingular), shape, dtype, "det_grad"))]


class SlogDet(_Factor):
    """Part 0: the sign of ``det A`` (no gradient); part 1: ``log|det A|``, whose VJP is ``g A^-T``."""

    display = "slogdet"

    def shape(self, shape_of):
        return shape_of(self.args[0])[:-2]

    def _jax_source(self, printer):
        return f"jnp.linalg.slogdet({printer._print(self.args[0])})[{self.part}]"

    def vjp(self, p, g, out):
        if self.part == 0:
            return []
        return [(self.args[0], _determinant_grad(p, self.args[0], _cotangent(p, g, out)))]


class Solve(_Head):
    """X with ``A X = B`` (B a batch of matrices); its VJP: ``gB = A^-T G``, ``gA = -gB X^T``."""

    display = "solve"
    arity = 2

    def shape(self, shape_of):
        return shape_of(self.args[1])

    def _jax_source(self, printer):
        return f"jnp.linalg.solve({printer._print(self.args[0])}, {printer._print(self.args[1])})"

    def vjp(self, p, g, out):
        A, B = self.args
        grad_b = emit(p, Solve, p.swap_last(A), _cotangent(p, g, out), hint="solve_grad")
        return [(B, grad_b), (A, _elementwise(p, -p.matmul(grad_b, p.swap_last(out)), "solve_grad"))]


class TriangularSolve(_Head):
    """X with ``A X = B`` (``left``) or ``X A = B``, A's upper (``upper``) or lower triangle read, its
    diagonal taken as ones if ``unit``; its VJP: the solve with ``A^T``, and ``-gB X^T`` (or
    ``-X^T gB``) kept to the part of A that was read."""

    display = "solve_triangular"
    arity = 2

    def shape(self, shape_of):
        return shape_of(self.args[1])

    def _jax_source(self, printer):
        A, B, upper, left, unit = self.args
        return (f"jax.lax.linalg.triangular_solve({printer._print(A)}, {printer._print(B)}, "
                f"left_side={bool(left)}, lower={not upper}, unit_diagonal={bool(unit)})")

    def vjp(self, p, g, out):
        A, B, upper, left, unit = self.args
        grad_b = triangular_solve(p, p.swap_last(A), _cotangent(p, g, out), not upper, bool(left), bool(unit))
        x_t = p.swap_last(out)
        grad_a = p.matmul(grad_b, x_t) if left else p.matmul(x_t, grad_b)
        diagonal = (1 if upper else -1) if unit else 0
        grad_a = triangle(p, _elementwise(p, -grad_a, "solve_grad"), diagonal, bool(upper))
        return [(B, grad_b), (A, grad_a)]


def triangular_solve(p, A, B, upper: bool, left: bool, unit: bool = False):
    flag = lambda value: sp.true if value else sp.false  # noqa: E731
    return emit(p, TriangularSolve, A, B, flag(upper), flag(left), flag(unit), hint="solve_triangular")


class Cholesky(_Head):
    """L with ``A = L L^T`` from A's lower triangle (NaN where A is not positive-definite); its VJP
    (Murray 2016): ``L^-T Phi(L^T G) L^-1``, Phi the lower triangle with half the diagonal,
    symmetrized."""

    display = "cholesky"
    arity = 1

    def shape(self, shape_of):
        return shape_of(self.args[0])

    def _jax_source(self, printer):
        return f"jnp.linalg.cholesky({printer._print(self.args[0])}, symmetrize_input=False)"

    def vjp(self, p, g, out):
        L, L_t = out, p.swap_last(out)
        lower = triangle(p, p.matmul(L_t, _cotangent(p, g, out)), 0, False)
        strict = triangle(p, lower, -1, False)
        grad = _elementwise(p, sp.Rational(1, 2) * (lower + p.swap_last(strict)), "phi")
        grad = triangular_solve(p, L_t, grad, True, True)
        return [(self.args[0], triangular_solve(p, L, grad, False, False))]


class Qr(_Factor):
    """Part 0: Q, part 1: R of ``A = Q R``, ``args[2]`` the mode ('reduced', 'complete', or 'r': R
    without Q, whose gradient PyTorch refuses); its VJP is PyTorch's ``linalg_qr_backward``."""

    display = "qr"

    def shape(self, shape_of):
        *batch, m, n = shape_of(self.args[0])
        k = m if str(self.args[2]) == "complete" else min(m, n)
        return (*batch, m, k) if self.part == 0 else (*batch, k, n)

    def _jax_source(self, printer):
        mode = "complete" if str(self.args[2]) == "complete" else "reduced"
        return f"jnp.linalg.qr({printer._print(self.args[0])}, mode={mode!r})[{self.part}]"

    def vjp(self, p, g, out):
        A = self.args[0]
        m, n = p.shape_of(A)[-2:]
        if str(self.args[2]) == "r":
            raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please "
                               "use linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.")
        if str(self.args[2]) == "complete" and m > n:
            raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
        g = _cotangent(p, g, out)
        Q, R = (out, self.sibling(p, 1)) if self.part == 0 else (self.sibling(p, 0), out)
        M = (_elementwise(p, -p.matmul(p.swap_last(Q), g), "qr_m") if self.part == 0
             else p.matmul(g, p.swap_last(R)))
        if m >= n:
            upper = triangle(p, M, 0, True)
            half = diag_embed(p, diagonal(p, upper, 0, len(p.shape_of(upper)) - 2, len(p.shape_of(upper)) - 1), 0, n, n)
            grad = p.matmul(Q, _elementwise(p, upper + p.swap_last(upper) - half, "qr_sym"))
            if self.part == 0:
                grad = _elementwise(p, grad + g, "qr_grad")
            return [(A, triangular_solve(p, p.swap_last(R), grad, False, False))]
        skew = triangle(p, _skew(p, _elementwise(p, -M, "qr_x")), 0, False)
        grad = triangular_solve(p, p.swap_last(_columns(p, R, 0, m)), p.matmul(Q, skew), False, False)
        zeros = p.materialize(sp.S.Zero, (*p.shape_of(grad)[:-1], n - m), p.dtype_of(grad))
        grad = p.concatenate([grad, zeros], len(p.shape_of(grad)) - 1, p.shape_of(A), p.dtype_of(grad))
        if self.part == 1:
            grad = _elementwise(p, grad + p.matmul(Q, g), "qr_grad")
        return [(A, grad)]


class Eigh(_Factor):
    """Part 0: the eigenvalues (ascending), part 1: the eigenvectors (columns) of the symmetric
    matrix whose lower (``args[2]`` 'L') or upper ('U') triangle A holds.  VJP: ``V diag(gL) V^T``;
    ``V (skew(V^T gV) / 2E) V^T``, ``E[i, j] = L[j] - L[i]``."""

    display = "eigh"

    def shape(self, shape_of):
        shape = shape_of(self.args[0])
        return shape[:-1] if self.part == 0 else shape

    def _jax_source(self, printer):
        return (f"jnp.linalg.eigh({printer._print(self.args[0])}, UPLO={str(self.args[2])!r}, "
                f"symmetrize_input=False)[{self.part}]")

    def vjp(self, p, g, out):
        g = _cotangent(p, g, out)
        if self.part == 0:
            V = self.sibling(p, 1)
            inner = diag_embed(p, g, 0, *p.shape_of(V)[-2:])
        else:
            V, values = out, self.sibling(p, 0)
            inner = _elementwise(p, sp.Rational(1, 2) * _skew(p, p.matmul(p.swap_last(V), g)) / _gaps(p, values),
                                 "eigh_inner")
        return [(self.args[0], _mm(p, V, inner, p.swap_last(V)))]


class Svd(_Factor):
    """Part 0: U, 1: S (descending), 2: Vh of ``A = U diag(S) Vh``, ``args[2]`` true for full
    matrices (whose extra columns of U and rows of Vh get no gradient, as in PyTorch).  The VJP is
    PyTorch's ``svd_backward``, one cotangent at a time."""

    display = "svd"

    def shape(self, shape_of):
        *batch, m, n = shape_of(self.args[0])
        k = min(m, n)
        full = bool(self.args[2])
        return [(*batch, m, m if full else k), (*batch, k), (*batch, n if full else k, n)][self.part]

    def _jax_source(self, printer):
        return f"jnp.linalg.svd({printer._print(self.args[0])}, full_matrices={bool(self.args[2])})[{self.part}]"

    def vjp(self, p, g, out):
        A = self.args[0]
        m, n = p.shape_of(A)[-2:]
        k = min(m, n)
        g = _cotangent(p, g, out)
        U, S, Vh = (out if part == self.part else self.sibling(p, part) for part in range(3))
        U, Vh = _columns(p, U, 0, k), _rows(p, Vh, 0, k)
        if self.part == 1:
            if m >= n:
                return [(A, p.matmul(U, _elementwise(p, _as_column(p, g) * Vh, "svd_grad")))]
            return [(A, p.matmul(_elementwise(p, U * _as_row(p, g), "svd_grad"), Vh))]
        gaps = _gaps(p, _elementwise(p, S * S, "s2"))
        if self.part == 0:
            g = _columns(p, g, 0, k)
            inner = _elementwise(p, _skew(p, p.matmul(p.swap_last(U), g)) / gaps * _as_row(p, S), "svd_inner")
            if m > n:
                scaled = _elementwise(p, g / _as_row(p, S), "svd_scaled")
                projected = _mm(p, U, p.matmul(p.swap_last(U), scaled))
                return [(A, p.matmul(_elementwise(p, p.matmul(U, inner) + scaled - projected, "svd_grad"), Vh))]
        else:
            g = _rows(p, g, 0, k)
            inner = _elementwise(p, _as_column(p, S) * (_skew(p, p.matmul(Vh, p.swap_last(g))) / gaps), "svd_inner")
            if m < n:
                scaled = _elementwise(p, g / _as_column(p, S), "svd_scaled")
                projected = _mm(p, p.matmul(scaled, p.swap_last(Vh)), Vh)
                return [(A, p.matmul(U, _elementwise(p, p.matmul(inner, Vh) + scaled - projected, "svd_grad")))]
        return [(A, _mm(p, U, inner, Vh))]


class MatrixExp(_Head):
    """``exp(A)`` of each matrix; its VJP is the upper-right block of ``exp([[A^T, G], [0, A^T]])``
    (the Fréchet derivative read off a block matrix, as PyTorch's backward computes it), so
    gradients of gradients are matrix exponentials again.  Half precision runs in float32."""

    display = "matrix_exp"
    arity = 1

    def shape(self, shape_of):
        return shape_of(self.args[0])

    def _jax_source(self, printer):
        x = printer._print(self.args[0])
        return (f"(jax.scipy.linalg.expm({x}.astype(jnp.float32)).astype({x}.dtype) if {x}.dtype == jnp.float16 "
                f"else jax.scipy.linalg.expm({x}))")

    def vjp(self, p, g, out):
        A = self.args[0]
        shape, dtype = p.shape_of(A), p.dtype_of(A)
        *batch, n, _ = shape
        last, A_t = len(shape) - 1, p.swap_last(A)
        top = p.concatenate([A_t, _cotangent(p, g, out)], last, (*batch, n, 2 * n), dtype)
        bottom = p.concatenate([p.materialize(sp.S.Zero, shape, dtype), A_t], last, (*batch, n, 2 * n), dtype)
        block = emit(p, MatrixExp, p.concatenate([top, bottom], last - 1, (*batch, 2 * n, 2 * n), dtype),
                     hint="matrix_exp")
        return [(A, _columns(p, _rows(p, block, 0, n), n, 2 * n))]


class CholeskySolve(_Head):
    """X with ``A X = B``, A given by its Cholesky factor (``args[2]``: the upper factor U, A = U^T U;
    else the lower L, A = L L^T), two triangular solves.  Its VJP treats the whole factor as
    forming A (PyTorch's): ``gB`` is the same solve of the cotangent, ``gL = -(C + C^T) L`` (or
    ``-U (C + C^T)``) with ``C = gB X^T``."""

    display = "cholesky_solve"
    arity = 2

    def shape(self, shape_of):
        return shape_of(self.args[1])

    def _jax_source(self, printer):
        L, B, upper = printer._print(self.args[0]), printer._print(self.args[1]), bool(self.args[2])
        first = (f"jax.lax.linalg.triangular_solve({L}, {B}, left_side=True, lower={not upper}, "
                 f"transpose_a={upper})")
        return (f"jax.lax.linalg.triangular_solve({L}, {first}, left_side=True, lower={not upper}, "
                f"transpose_a={not upper})")

    def vjp(self, p, g, out):
        L, B, upper = self.args
        grad_b = emit(p, CholeskySolve, L, _cotangent(p, g, out), upper, hint="cholesky_solve_grad")
        C = p.matmul(grad_b, p.swap_last(out))
        symmetric = _elementwise(p, C + p.swap_last(C), "cholesky_solve_sym")
        grad_l = p.matmul(L, symmetric) if upper else p.matmul(symmetric, L)
        return [(B, grad_b), (L, _elementwise(p, -grad_l, "cholesky_solve_grad"))]


class Pinv(_Head):
    """The pseudo-inverse ``V diag(1/s) U^T`` keeping singular values (eigenvalues' magnitudes when
    ``args[3]``, hermitian) above ``max(atol, rtol * largest)`` (``args[1]``, ``args[2]``).  Its VJP
    (constant rank, P the result): ``-P^T G P^T + (I - A P) G^T P P^T + P^T P G^T (I - P A)``."""

    display = "pinv"
    arity = 1

    def shape(self, shape_of):
        *batch, m, n = shape_of(self.args[0])
        return (*batch, n, m)

    def _jax_source(self, printer):
        A, atol, rtol = printer._print(self.args[0]), float(self.args[1]), float(self.args[2])
        hermitian = bool(self.args[3])
        if hermitian:
            eigh = f"jnp.linalg.eigh({A}, symmetrize_input=False)"
            parts = f"(lambda w, v: (v, jnp.abs(w), v.mT * jnp.sign(w)[..., None]))(*{eigh})"
        else:
            parts = f"jnp.linalg.svd({A}, full_matrices=False)"
        cutoff = f"jnp.maximum({atol}, {rtol} * s.max(-1, initial=0, keepdims=True))"
        kept = f"(lambda u, s, vh: (vh.mT * jnp.where(s > {cutoff}, 1 / s, 0)[..., None, :]) @ u.mT)"
        return f"{kept}(*{parts})"

    def vjp(self, p, g, out):
        A = self.args[0]
        g, P_t = _cotangent(p, g, out), p.swap_last(out)
        g_t = p.swap_last(g)
        m, n = p.shape_of(A)[-2:]
        dtype = p.dtype_of(A)
        eye = lambda k: diag_embed(p, p.materialize(sp.S.One, (k,), dtype), 0, k, k)  # noqa: E731
        left = _elementwise(p, eye(m) - p.matmul(A, out), "pinv_left")
        right = _elementwise(p, eye(n) - p.matmul(out, A), "pinv_right")
        terms = (-_mm(p, P_t, g, P_t), _mm(p, left, g_t, out, P_t), _mm(p, P_t, out, g_t, right))
        return [(A, _elementwise(p, terms[0] + terms[1] + terms[2], "pinv_grad"))]


def householder_product(p, A, tau, shape, dtype):
    """``H_1 ... H_k`` times the first n columns of the identity, ``H_i = I - tau_i v_i v_i^T`` with
    v_i column i of A below the diagonal and 1 on it: applied right to left, each a rank-one update,
    so the gradient is reverse mode through these products."""
    *batch, m, n = shape
    identity = diag_embed(p, p.materialize(sp.S.One, (n,), dtype), 0, m, n)
    V = _elementwise(p, triangle(p, A, -1, False) + identity, "householder_vectors")
    Q = p.materialize(p.broadcast_to(identity, tuple(shape)), tuple(shape), dtype)
    for i in reversed(range(p.shape_of(tau)[-1])):
        v = _columns(p, V, i, i + 1)
        scale = p.reshape(_columns(p, tau, i, i + 1), (*batch, 1, 1))
        Q = _elementwise(p, Q - scale * p.matmul(v, p.matmul(p.swap_last(v), Q)), "reflected")
    return Q


class Lu(_Factor):
    """LU with partial pivoting, ``A = P L U``: part 0 the packed factors (L's unit diagonal
    implied), part 1 LAPACK's 1-based int32 pivots, part 2 P.  The VJP of the packed factors
    (square A, PyTorch's ``linalg_lu_backward``): ``P L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T``."""

    display = "lu"

    def shape(self, shape_of):
        *batch, m, n = shape_of(self.args[0])
        return [(*batch, m, n), (*batch, min(m, n)), (*batch, m, m)][self.part]

    def dtype(self, dtype_of):
        return "int32" if self.part == 1 else dtype_of(self.args[0])

    def _jax_source(self, printer):
        A = printer._print(self.args[0])
        if self.part == 0:
            return f"jax.lax.linalg.lu({A})[0]"
        if self.part == 1:
            return f"jax.lax.linalg.lu({A})[1] + 1"
        return f"jnp.swapaxes(jax.nn.one_hot(jax.lax.linalg.lu({A})[2], {A}.shape[-2], dtype={A}.dtype), -1, -2)"

    def vjp(self, p, g, out):
        if self.part != 0:
            return []
        A = self.args[0]
        m, n = p.shape_of(A)[-2:]
        if m != n:
            raise NotImplementedError("symgrad differentiates the LU factorization of square matrices only")
        g = _cotangent(p, g, out)
        L, U = unit_lower(p, out), triangle(p, out, 0, True)
        phi = _elementwise(p, triangle(p, p.matmul(p.swap_last(L), triangle(p, g, -1, False)), -1, False)
                           + triangle(p, p.matmul(triangle(p, g, 0, True), p.swap_last(U)), 0, True), "lu_phi")
        grad = triangular_solve(p, p.swap_last(L), phi, True, True, True)
        grad = triangular_solve(p, p.swap_last(U), grad, False, False)
        return [(A, p.matmul(self.sibling(p, 2), grad))]


def unit_lower(p, packed):
    """L of packed LU factors: the part below the diagonal, ones on it (m by min(m, n))."""
    m, n = p.shape_of(packed)[-2:]
    k = min(m, n)
    ones = diag_embed(p, p.materialize(sp.S.One, (k,), p.dtype_of(packed)), 0, m, k)
    return _elementwise(p, triangle(p, _columns(p, packed, 0, k), -1, False) + ones, "unit_lower")


class PivotPermutation(_Head):
    """P of ``A = P L U`` from LAPACK's 1-based pivots (row swaps applied in order), as a matrix
    of ``args[1]`` rows and the dtype ``args[2]``."""

    display = "pivot_permutation"
    arity = 1

    def shape(self, shape_of):
        m = int(self.args[1])
        return (*shape_of(self.args[0])[:-1], m, m)

    def dtype(self, dtype_of):
        return str(self.args[2])

    def _jax_source(self, printer):
        pivots, m, dtype = printer._print(self.args[0]), int(self.args[1]), str(self.args[2])
        order = f"jax.lax.linalg.lu_pivots_to_permutation({pivots} - 1, {m})"
        return f"jnp.swapaxes(jax.nn.one_hot({order}, {m}, dtype=jnp.{dtype}), -1, -2)"

    def vjp(self, p, g, out):
        return []

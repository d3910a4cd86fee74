"""IR heads for contractions, convolutions and windows: einsum, conv, flip, patches and folds.

Each head is one structural primitive, in one class: its shape, its vector-Jacobian product
written with IR heads (a convolution's is two convolutions, a window's is a fold), and its JAX
text (``_jax_source``, which codegen's printer calls).  Arrays are laid out as PyTorch's:
channels first (``N, C, *spatial``), kernels ``O, I, *window``.
"""
from __future__ import annotations

import itertools
import string

import sympy as sp

from symgrad.ir.functions import Structural, select
from symgrad.ir.indexing import flip

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
        return (f"jax.lax.conv_general_dilated({x}, {w}, window_strides={strides}, padding={padding}, "
                f"lhs_dilation={lhs_dilation}, rhs_dilation={rhs_dilation}, dimension_numbers={numbers}, "
                f"feature_group_count={groups}, batch_group_count={batch_groups}, "
                f"precision=jax.lax.Precision.HIGHEST)")

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

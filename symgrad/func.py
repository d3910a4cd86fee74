"""``torch.func``: grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian, vmap, functional_call.

Called on tensors without history, ``grad`` and ``jacrev`` run a function compiled once per
transform and argument structure with ``symgrad.value_and_grad`` (of the function, or of its
vector-Jacobian product ``<f(x), v>``, whose rows ``jax.vmap`` maps over the identity: a Jacobian
is one XLA call).  Called on tensors with history (inside another transform, or on parameters a
loss will be differentiated through), a transform records instead, with ``create_graph``
gradients that the outer level differentiates again; this is how transforms nest.  ``jvp`` is the
derivative of a vjp with respect to its cotangent (J t = d/du <J^T u, t>: forward mode from two
reverse passes), ``jacfwd`` the same Jacobian as ``jacrev``.  ``vmap`` calls the function once per
example on the front end and stacks: the recorded examples still run as one compiled program.
Arguments may be tensors or dicts, tuples and lists of them (``functional_call``'s parameters).
"""
from __future__ import annotations

import functools

import jax
import numpy as np

from symgrad import autograd, dtypes
from symgrad.compiled import value_and_grad
from symgrad.creation import zeros_like
from symgrad.grad_mode import enable_grad, no_grad
from symgrad.nodes import leaf
from symgrad.ops.shape import stack
from symgrad.tensor import Tensor

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "vmap", "functional_call",
           "stack_module_state"]


# ------------------------------------------------------------------ argument trees


def _flatten(tree):
    """The leaves of a tree of dicts, tuples and lists, and a function rebuilding it from leaves."""
    if isinstance(tree, dict):
        keys = list(tree)
        parts = [_flatten(tree[k]) for k in keys]
        make = lambda items: dict(zip(keys, items))  # noqa: E731
    elif isinstance(tree, (tuple, list)):
        parts = [_flatten(t) for t in tree]
        make = type(tree)
    else:
        return [tree], lambda leaves: leaves[0]
    sizes = [len(p[0]) for p in parts]

    def rebuild(leaves):
        items, start = [], 0
        for (_, part), size in zip(parts, sizes):
            items.append(part(leaves[start:start + size]))
            start += size
        return make(items)
    return [x for p in parts for x in p[0]], rebuild


def _shape_of_tree(tree):
    """A hashable description of a tree's structure (which compiled function serves it)."""
    if isinstance(tree, dict):
        return ("dict", tuple(tree), tuple(_shape_of_tree(v) for v in tree.values()))
    if isinstance(tree, (tuple, list)):
        return (type(tree).__name__, tuple(_shape_of_tree(v) for v in tree))
    return None


def _numbers(argnums, count: int) -> tuple:
    numbers = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for k in numbers:
        if not -count <= k < count:
            raise RuntimeError(f"Got argnum={k}, but only {count} positional inputs")
    return tuple(k % count for k in numbers)


def _has_history(leaves) -> bool:
    return any(isinstance(x, Tensor) and x.requires_grad for x in leaves)


def _differentiable(x):
    """A leaf to differentiate at: a tensor with history stays as it is (the chain goes on)."""
    if isinstance(x, Tensor) and x.requires_grad:
        return x
    if not isinstance(x, Tensor):
        raise TypeError(f"expected a Tensor to differentiate with respect to, got {type(x).__name__}")
    return x.detach().requires_grad_(True)


def _detached(tree, nested: bool):
    """Results as torch.func gives them: without history unless the inputs had some."""
    if nested:
        return tree
    leaves, rebuild = _flatten(tree)
    return rebuild([x.detach() if isinstance(x, Tensor) else x for x in leaves])


def _as_tensor(array):
    return Tensor(leaf(array, dtypes.from_numpy(array.dtype)))


def _gradients(outputs, inputs, seeds, nested: bool) -> list:
    """d outputs / d inputs weighted by ``seeds`` (zeros where an input is unused)."""
    used = [(o, s) for o, s in zip(outputs, seeds) if o.requires_grad]
    if not used:
        return [zeros_like(x) for x in inputs]
    found = autograd.grad([o for o, _ in used], inputs, [s for _, s in used], retain_graph=True,
                          create_graph=nested, allow_unused=True)
    return [zeros_like(x) if g is None else g for g, x in zip(found, inputs)]


# ------------------------------------------------------------------------- grad


def _scalar(out):
    if not isinstance(out, Tensor):
        raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got {type(out)}")
    if out.dim() != 0:
        raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got tensor "
                           f"with {out.dim()} dims. Maybe you wanted to use the vjp or jacrev APIs instead?")
    return out


def grad_and_value(func, argnums=0, has_aux: bool = False):
    """``(gradients, value)`` of a scalar function (``(gradients, (value, aux))`` with ``has_aux``)."""
    compiled: dict = {}  # argument structure -> value_and_grad of the function on flat arguments

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        numbers = _numbers(argnums, len(args))
        parts = [_flatten(a) for a in args]
        flat = [x for leaves, _ in parts for x in leaves]
        if has_aux or kwargs or _has_history(flat) or not all(isinstance(x, Tensor) for x in flat):
            return _recorded_grad_and_value(func, numbers, isinstance(argnums, int), has_aux, args, kwargs)
        key = (numbers, _shape_of_tree(args))
        if key not in compiled:
            compiled[key] = _compiled_grad(func, parts, numbers)
        with enable_grad():
            value, grads = compiled[key](*[x._value() for x in flat])
        return _per_argument(parts, numbers, [_as_tensor(g) for g in grads], argnums), _as_tensor(value)
    return wrapper


def _compiled_grad(func, parts, numbers):
    starts = np.cumsum([0] + [len(leaves) for leaves, _ in parts])
    positions = tuple(i for k in numbers for i in range(starts[k], starts[k + 1]))

    def flat_function(*flat):
        return _scalar(func(*[rebuild(list(flat[starts[k]:starts[k + 1]])) for k, (_, rebuild) in enumerate(parts)]))
    return value_and_grad(flat_function, argnums=positions)


def _per_argument(parts, numbers, grads, argnums):
    """Flat gradients back into the trees of the arguments ``numbers``."""
    result, start = [], 0
    for k in numbers:
        leaves, rebuild = parts[k]
        result.append(rebuild(grads[start:start + len(leaves)]))
        start += len(leaves)
    return result[0] if isinstance(argnums, int) else tuple(result)


def _recorded_grad_and_value(func, numbers, single, has_aux, args, kwargs):
    nested = _has_history(x for a in args for x in _flatten(a)[0])
    with enable_grad():
        parts = [_flatten(a) for a in args]
        args = list(args)
        for k in numbers:
            leaves, rebuild = parts[k]
            args[k] = rebuild([_differentiable(x) for x in leaves])
            parts[k] = _flatten(args[k])
        output = func(*args, **kwargs)
        out, aux = output if has_aux else (output, None)
        inputs = [x for k in numbers for x in parts[k][0]]
        grads = _gradients([_scalar(out)], inputs, [None], nested)
    grads = _per_argument(parts, numbers, grads, numbers[0] if single else numbers)
    value = _detached(out, nested)
    return _detached(grads, nested), ((value, _detached(aux, nested)) if has_aux else value)


def grad(func, argnums=0, has_aux: bool = False):
    """The gradient of a scalar function (``(gradients, aux)`` with ``has_aux``)."""
    both = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        gradients, value = both(*args, **kwargs)
        return (gradients, value[1]) if has_aux else gradients
    return wrapper


# ---------------------------------------------------------------------- vjp, jvp


def _traced(func, primals, kwargs=None):
    """The primals as leaves to differentiate at, and the function's output on them."""
    leaves, rebuild = _flatten(primals)
    nested = _has_history(leaves)
    with enable_grad():
        inputs = [_differentiable(x) for x in leaves]
        output = func(*rebuild(inputs), **(kwargs or {}))
    return inputs, output, nested


def vjp(func, *primals, has_aux: bool = False):
    """``(output, vjp_fn)`` (and ``aux``): ``vjp_fn(cotangents)`` is the tuple of ``v^T J`` per primal."""
    inputs, output, nested = _traced(func, primals)
    output, aux = output if has_aux else (output, None)
    outputs, _ = _flatten(output)
    _, rebuild = _flatten(primals)

    def vjp_fn(cotangents, *, retain_graph=True, create_graph=None):
        seeds, _ = _flatten(cotangents)
        for o, s in zip(outputs, seeds):
            if tuple(o.shape) != tuple(s.shape):
                raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of torch.Size({list(s.shape)}) "
                                   f"and output[0] has a shape of torch.Size({list(o.shape)}).")
        with enable_grad():
            grads = _gradients(outputs, inputs, seeds, nested if create_graph is None else create_graph)
        return tuple(_detached(rebuild(grads), nested))

    result = (_detached(output, nested), vjp_fn)
    return (*result, _detached(aux, nested)) if has_aux else result


def jvp(func, primals, tangents, *, strict: bool = False, has_aux: bool = False):
    """``(output, J t)``: the derivative of the vjp ``u -> J^T u`` along ``t``, with respect to ``u``."""
    if not isinstance(primals, tuple):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals to be a tuple. E.g. it should be valid "
                           "to call f(*primals).")
    if not isinstance(tangents, tuple):
        raise RuntimeError("jvp(f, primals, tangents): Expected tangents to be a tuple. E.g. it should be valid "
                           "to call f(*primals).")
    directions, _ = _flatten(tangents)
    for p, t in zip(_flatten(primals)[0], directions):
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(f"Trying to set a forward gradient that has a different size than that of the original "
                               f"Tensor, this is not supported. Tensor is of size {list(p.shape)} while the given "
                               f"forward gradient is of size {list(t.shape)}.")
    inputs, output, nested = _traced(func, primals)
    output, aux = output if has_aux else (output, None)
    outputs, rebuild = _flatten(output)
    with enable_grad():
        dummies = [zeros_like(o).requires_grad_(True) for o in outputs]
        transposed = _gradients(outputs, inputs, dummies, True)
        used = [(g, t) for g, t in zip(transposed, directions) if g.requires_grad]
        products = _gradients([g for g, _ in used], dummies, [t for _, t in used], nested)
    result = (_detached(output, nested), _detached(rebuild(products), nested))
    return (*result, _detached(aux, nested)) if has_aux else result


# ------------------------------------------------------------------ Jacobians


def jacrev(func, argnums=0, *, has_aux: bool = False, chunk_size=None, _preallocate_and_copy: bool = False):
    """The Jacobian by reverse mode: one vector-Jacobian product per output entry (on tensors without
    history, one compiled product mapped over the identity's rows)."""
    compiled: dict = {}

    @functools.wraps(func)
    def wrapper(*args):
        numbers = _numbers(argnums, len(args))
        parts = [_flatten(a) for a in args]
        flat = [x for leaves, _ in parts for x in leaves]
        if has_aux or _has_history(flat) or not all(isinstance(x, Tensor) for x in flat):
            return _recorded_jacobian(func, numbers, argnums, has_aux, args)
        with no_grad():
            outputs, rebuild_output = _flatten(func(*args))  # shapes only: nothing is computed
        key = (numbers, _shape_of_tree(args))
        if key not in compiled:
            compiled[key] = _compiled_vjp(func, parts, numbers, len(outputs))
        arrays = [x._value() for x in flat]
        blocks = []
        for k, o in enumerate(outputs):
            size = int(np.prod(o.shape, dtype=int))
            basis = np.eye(size, dtype=o.dtype.numpy).reshape(size, *o.shape)
            seeds = [np.zeros(other.shape, other.dtype.numpy) for other in outputs]
            with enable_grad():
                rows = jax.vmap(lambda seed: compiled[key](*arrays, *seeds[:k], seed, *seeds[k + 1:])[1])(basis)
            leaves = [x for n in numbers for x in parts[n][0]]
            jacobians = [_as_tensor(np.asarray(r).reshape(*o.shape, *x.shape)) for r, x in zip(rows, leaves)]
            blocks.append(_per_argument(parts, numbers, jacobians, argnums))
        return rebuild_output(blocks)
    return wrapper


def _compiled_vjp(func, parts, numbers, count: int):
    """value_and_grad of ``<f(x), v>`` on flat arguments followed by one cotangent per output."""
    starts = np.cumsum([0] + [len(leaves) for leaves, _ in parts])
    positions = tuple(i for k in numbers for i in range(starts[k], starts[k + 1]))

    def product(*flat):
        arguments, seeds = flat[:len(flat) - count], flat[len(flat) - count:]
        output = func(*[rebuild(list(arguments[starts[k]:starts[k + 1]])) for k, (_, rebuild) in enumerate(parts)])
        return sum((o * s).sum() for o, s in zip(_flatten(output)[0], seeds))
    return value_and_grad(product, argnums=positions)


def _recorded_jacobian(func, numbers, argnums, has_aux, args):
    """Rows of differentiable gradients, one per output entry, stacked."""
    nested = _has_history(x for a in args for x in _flatten(a)[0])
    parts = [_flatten(a) for a in args]
    args = list(args)
    with enable_grad():
        for k in numbers:
            args[k] = parts[k][1]([_differentiable(x) for x in parts[k][0]])
            parts[k] = _flatten(args[k])
        output = func(*args)
        output, aux = output if has_aux else (output, None)
        outputs, rebuild_output = _flatten(output)
        inputs = [x for k in numbers for x in parts[k][0]]
        blocks = []
        for o in outputs:
            flat = o.reshape(-1)
            rows = [_gradients([flat], inputs, [_as_tensor(np.eye(1, flat.numel(), i, dtype=o.dtype.numpy)[0])], True)
                    for i in range(flat.numel())]
            jacobians = [(stack([row[j] for row in rows]) if rows else zeros_like(x).reshape(0, *x.shape))
                         .reshape(*o.shape, *x.shape) for j, x in enumerate(inputs)]
            blocks.append(_per_argument(parts, numbers, jacobians, argnums))
    result = _detached(rebuild_output(blocks), nested)
    return (result, _detached(aux, nested)) if has_aux else result


def jacfwd(func, argnums=0, has_aux: bool = False, *, randomness: str = "error"):
    """The Jacobian; computed by reverse mode here (the same numbers as forward mode)."""
    return jacrev(func, argnums, has_aux=has_aux)


def hessian(func, argnums=0):
    """The Jacobian of the gradient (``jacfwd(jacrev(func))``, as PyTorch composes it)."""
    return jacfwd(jacrev(func, argnums), argnums)


# ------------------------------------------------------------------------- vmap


def vmap(func, in_dims=0, out_dims=0, randomness: str = "error", *, chunk_size=None):
    """``func`` mapped over a dimension of its inputs.  It runs once per example on the front end and
    the results are stacked: the examples' graphs are recorded, so they still compute as one
    compiled program, but recording costs time per example (a loop, not a batched trace)."""
    name = getattr(func, "__name__", repr(func))

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
        if len(dims) != len(args):
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with the "
                             f"structure of `inputs`. in_dims has structure {len(dims)} but inputs has structure "
                             f"{len(args)}.")
        pieces, sizes = [], []
        for a, d in zip(args, dims):
            leaves, rebuild = _flatten(a)
            if d is None:
                pieces.append(lambda i, a=a: a)
                continue
            cut = []
            for x in leaves:
                if not -x.dim() <= d < max(x.dim(), 1) or x.dim() == 0:
                    raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for some "
                                     f"input, but that input is a Tensor of dimensionality {x.dim()} so expected "
                                     f"in_dim to satisfy -{x.dim()} <= in_dim < {x.dim()}.")
                sizes.append(x.shape[d])
                cut.append(x.unbind(d))
            pieces.append(lambda i, cut=cut, rebuild=rebuild: rebuild([c[i] for c in cut]))
        if len(set(sizes)) > 1:
            raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                             f"{sizes} for the mapped dimension")
        if not sizes:
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got all in_dims=None: there is no "
                             f"input to map over")
        results = [func(*[piece(i) for piece in pieces], **kwargs) for i in range(sizes[0])]
        outputs = [_flatten(r)[0] for r in results]
        _, rebuild = _flatten(results[0])
        out = out_dims if isinstance(out_dims, tuple) else (out_dims,) * len(outputs[0])
        return rebuild([stack([o[j] for o in outputs], dim=d) for j, d in enumerate(out)])
    return wrapper


# ---------------------------------------------------------------- functional_call


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights: bool = True,
                    strict: bool = False):
    """``module(*args, **kwargs)`` with its parameters and buffers named in the dicts swapped for the
    given tensors (put back afterwards, even after an error)."""
    dicts = parameter_and_buffer_dicts if isinstance(parameter_and_buffer_dicts, (tuple, list)) \
        else (parameter_and_buffer_dicts,)
    given = {}
    for d in dicts:
        repeated = set(given) & set(d)
        if repeated:
            raise ValueError(f"{sorted(repeated)} appeared in multiple dictionaries; behavior of functional call "
                             f"is ambiguous")
        given.update(d)
    tables = {name: (table, key) for kind in ("_parameters", "_buffers")
              for name, table, key in _named_slots(module, kind)}
    if strict:
        missing = [n for n in tables if n not in given]
        unexpected = [n for n in given if n not in tables]
        if missing or unexpected:
            lines = ([f"\tUnexpected key(s): {', '.join(repr(n) for n in unexpected)}."] if unexpected else []) + \
                    ([f"\tMissing key(s): {', '.join(repr(n) for n in missing)}."] if missing else [])
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:\n" + "\n".join(lines))
    saved = []
    try:
        for name, tensor in given.items():
            if name in tables:
                table, key = tables[name]
                saved.append((table, key, table[key]))
                table[key] = tensor
        args = () if args is None else args if isinstance(args, tuple) else (args,)
        return module(*args, **(kwargs or {}))
    finally:
        for table, key, value in reversed(saved):
            table[key] = value


def stack_module_state(models) -> tuple:
    """``(params, buffers)``: each parameter and buffer of the same-class ``models`` stacked along a
    new first axis, by name, for ``vmap`` over ``functional_call`` (model ensembling).  Stacked
    parameters are new leaves that require grad (an optimizer can take them)."""
    if len(models) == 0:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if len({m.training for m in models}) > 1:
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    if any(type(m) is not type(models[0]) for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    return (_stacked([dict(m.named_parameters()) for m in models]),
            _stacked([dict(m.named_buffers()) for m in models]))


def _stacked(tables: list) -> dict:
    return {name: _stacked_leaf([table[name] for table in tables], name) for name in tables[0]}


def _stacked_leaf(tensors, name: str):
    wanting = {t.requires_grad for t in tensors}
    if len(wanting) > 1:
        raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
    result = stack(tensors)
    return result.detach().requires_grad_() if wanting == {True} else result


def _named_slots(module, table_name: str):
    """(dotted name, the dict holding it, its key) for each parameter or buffer of the module tree."""
    for prefix, sub in module.named_modules(remove_duplicate=False):
        table = sub.__dict__[table_name]
        for key, value in table.items():
            if value is not None:
                yield (f"{prefix}.{key}" if prefix else key), table, key

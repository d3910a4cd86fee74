"""Lazy modules, ``torch.compile``, ``torch.utils.checkpoint`` and ``torch.func.stack_module_state``
against PyTorch: lazy modules seeded alike get PyTorch's weights at their first call and become
the ordinary class (reprs, state_dict, errors of their placeholders); a compiled function or
module gives the same values and gradients, in PyTorch's OptimizedModule shape, with PyTorch's
argument errors; checkpointing changes no value or gradient, dropout included, and warns as
PyTorch warns; the Model ensembling tutorial's ``stack_module_state`` + ``functional_call`` +
``vmap`` gives PyTorch's numbers."""
import copy
import warnings

import numpy as np
import pytest

import symgrad

LAZY = [("LazyLinear", (3,), (2, 5)), ("LazyConv1d", (4, 3), (2, 3, 8)), ("LazyConv2d", (4, 3), (3, 6, 6)),
        ("LazyConv3d", (2, 2), (1, 2, 3, 3, 3)), ("LazyConvTranspose1d", (4, 3), (2, 3, 5)),
        ("LazyConvTranspose2d", (4, 3), (2, 3, 4, 4)), ("LazyConvTranspose3d", (2, 2), (1, 2, 2, 2, 2)),
        ("LazyBatchNorm1d", (), (4, 3)), ("LazyBatchNorm2d", (), (2, 3, 2, 2)),
        ("LazyBatchNorm3d", (), (2, 3, 2, 2, 2)), ("LazyInstanceNorm1d", (), (2, 3, 4)),
        ("LazyInstanceNorm2d", (), (2, 3, 2, 2)), ("LazyInstanceNorm3d", (), (2, 3, 2, 2, 2))]

UNCALLED = ("LazyConvTranspose3d", "LazyBatchNorm3d", "LazyInstanceNorm3d")  # (their 1d/2d kin are: compiles cost)


def _same(ours, theirs, tol=1e-6):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        if isinstance(a, np.ndarray):
            assert a.shape == b.shape and a.dtype == b.dtype
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
        else:
            assert str(a).replace("symgrad", "torch") == str(b)


def _values(T, tensors):
    """The tensors' values read as one program (one compile, not one each)."""
    joined = T.cat([t.detach().reshape(-1) for t in tensors]).numpy()
    ends = np.cumsum([t.numel() for t in tensors])
    return [part.reshape(tuple(t.shape)) for part, t in zip(np.split(joined, ends[:-1]), tensors)]


# ------------------------------------------------------------------ lazy modules


def _lazy(T):
    seen, outputs = [], []
    T.manual_seed(0)
    for name, args, shape in LAZY:
        module = getattr(T.nn, name)(*args)
        seen += [repr(module), module.has_uninitialized_params(), list(module.state_dict().items())]
        if name in UNCALLED:
            continue
        T.rand(1)  # a draw in between: the weights are drawn at the first call
        y = module(T.arange(float(np.prod(shape))).reshape(shape).sin())
        seen += [type(module).__name__, repr(module), [n for n, _ in module.named_parameters()],
                 list(module.state_dict().keys())]
        outputs += [y, *module.parameters(), *[b for b in module.buffers() if b.is_floating_point()]]
    return seen + _values(T, outputs)


def test_lazy_modules_are_initialised_as_pytorchs_at_their_first_call(torch):
    _same(_lazy(symgrad), _lazy(torch), tol=1e-5)


def _error(call):
    with pytest.raises(Exception) as caught:
        call()
    return type(caught.value).__name__, str(caught.value)


def _placeholders(T):
    nn = T.nn
    layer = nn.LazyLinear(3)
    weight = layer.weight
    seen = [repr(weight), weight.requires_grad, weight.dtype, tuple(weight.size()), weight.ndim,
            isinstance(weight, nn.Parameter), isinstance(weight, nn.parameter.UninitializedParameter),
            type(copy.deepcopy(weight)).__name__, repr(nn.parameter.UninitializedBuffer()),
            _error(lambda: weight.shape), _error(lambda: weight + 1)[1].split(" in ")[0],
            _error(lambda: weight.requires_grad_(False))[0], _error(lambda: nn.LazyConv2d(4, 3)(T.ones(2, 2))),
            _error(lambda: nn.LazyConv2d(4, 3, groups=2)(T.ones(1, 3, 5, 5)))]
    weight.requires_grad = False
    seen.append(weight.requires_grad)

    class Forgetful(nn.LazyLinear):
        def initialize_parameters(self, input):
            pass
    seen.append(_error(lambda: Forgetful(3)(T.ones(2, 2))))
    loaded = nn.Sequential(nn.LazyLinear(2))  # a state_dict gives the placeholders their shapes
    loaded.load_state_dict({"0.weight": T.arange(6.0).reshape(2, 3), "0.bias": T.ones(2)})
    seen += [type(loaded[0]).__name__, repr(loaded), loaded[0].has_uninitialized_params()]
    y = loaded(T.ones(1, 3))
    seen += [type(loaded[0]).__name__, repr(loaded), y.detach().numpy()]
    return seen


def test_placeholders_refuse_and_answer_as_pytorchs(torch):
    _same(_placeholders(symgrad), _placeholders(torch))


# ---------------------------------------------------------------------- compile


def _compiled(T):
    """What compiled objects give and show.  PyTorch's side calls its compiled objects with
    ``disable=True`` (its compiled numbers are its eager ones, and its compiling takes seconds)."""
    off = T is not symgrad
    T.manual_seed(0)
    model = T.nn.Sequential(T.nn.Linear(3, 4), T.nn.Tanh(), T.nn.Linear(4, 2))
    compiled = T.compile(model, backend="eager") if not off else model
    x = T.arange(6.0).reshape(2, 3).cos()
    result = compiled(x)
    (result ** 2).sum().backward()
    grads = [p.grad for p in model.parameters()]
    compiled = T.compile(model)
    seen = [repr(compiled), type(compiled).__name__, list(compiled.state_dict().keys()),
            [n for n, _ in compiled.named_parameters()], compiled._orig_mod is model, len(compiled), compiled.training,
            hasattr(compiled, "__getitem__")]
    compiled.eval()
    seen += [model.training, compiled.training]
    model.train()
    seen.append(compiled.training)
    compiled.note = "kept on the original"
    seen.append(model.note)

    def f(a, b):
        return (a * b).sin().sum()
    g = T.compile(f, backend="aot_eager", dynamic=True, fullgraph=True, disable=off)
    a, b = T.arange(3.0, requires_grad=True), T.ones(3)
    g(a, b).backward()

    @T.compile(backend="eager", disable=off)
    def h(a):
        return a.exp()

    @T.compile(mode="reduce-overhead")
    def k(a):
        return a.cos()
    seen += [g.__name__, getattr(g, "__wrapped__", f) is f, k.__name__, T.compile(f, mode="max-autotune").__name__,
             T.compile(f, disable=True) is f, T.compile(model, disable=True) is model, T.vmap is T.func.vmap]
    seen += [_error(lambda: T.compile(f, mode="foo")), _error(lambda: T.compile(f, mode="default", options={})),
             _error(lambda: T.compile(f, backend="nope")), _error(lambda: T.compile(f, dynamic=1)),
             _error(lambda: T.compile(3)), _error(lambda: T.compile(mode="lite")(None)),
             T.compile(f, backend="eager", mode="foo", disable=off)(a, b).item()]
    return seen + _values(T, [result, *grads, g(a, b), a.grad, h(b)])


def test_compile_keeps_values_and_gives_pytorchs_shapes(torch):
    _same(_compiled(symgrad), _compiled(torch), tol=1e-5)


# ------------------------------------------------------------------- checkpoint


def _checkpointed(T, use_reentrant):
    from torch.utils.checkpoint import checkpoint as _  # noqa: F401  (torch's is a submodule to import)
    checkpoint, checkpoint_sequential = T.utils.checkpoint.checkpoint, T.utils.checkpoint.checkpoint_sequential
    T.manual_seed(0)
    layers = [T.nn.Linear(4, 6), T.nn.Dropout(0.5), T.nn.Tanh(), T.nn.Linear(6, 3)]
    segment = T.nn.Sequential(*layers[:3])
    x = T.arange(8.0).reshape(2, 4).sin().requires_grad_()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hidden = checkpoint(segment, x, use_reentrant=use_reentrant) if use_reentrant is not None \
            else checkpoint(segment, x)
        y = layers[3](hidden)
        (y * T.arange(6.0).reshape(2, 3)).sum().backward()
        after = T.rand(2)  # the generator is where it was after the forward (PyTorch's replay restores it)
        z = checkpoint_sequential(T.nn.Sequential(*layers), 2, x, use_reentrant=bool(use_reentrant))
        plain = T.nn.Sequential(*layers)(x.detach())  # without requires_grad: reentrant runs it without history
        free = checkpoint(segment, x.detach(), use_reentrant=bool(use_reentrant))
    seen = [[(w.category.__name__, str(w.message)) for w in caught], z.requires_grad, free.requires_grad,
            plain.requires_grad]
    return seen + _values(T, [y, x.grad, *[p.grad for p in segment.parameters()], after, z, free])


@pytest.mark.parametrize("use_reentrant", [None, True, False])
def test_checkpoint_changes_no_value_nor_gradient(torch, use_reentrant):
    _same(_checkpointed(symgrad, use_reentrant), _checkpointed(torch, use_reentrant))


def _checkpoint_errors(T):
    from torch.utils.checkpoint import checkpoint as _  # noqa: F401
    utils, layer, x = T.utils.checkpoint, T.nn.Linear(2, 2), T.ones(1, 2, requires_grad=True)
    return [_error(lambda: utils.checkpoint(layer, x, use_reentrant=True, extra=1)),
            _error(lambda: utils.checkpoint(layer, x, use_reentrant=True, debug=True)),
            _error(lambda: utils.checkpoint(layer, x, use_reentrant=False, determinism_check="all")),
            _error(lambda: utils.checkpoint_sequential([layer], 1, x, use_reentrant=False, extra=1))]


def test_checkpoint_errors_are_pytorchs(torch):
    _same(_checkpoint_errors(symgrad), _checkpoint_errors(torch))


# ----------------------------------------------------------- model ensembling


def _ensemble(T):
    from torch.func import functional_call, stack_module_state, vmap  # noqa: F401  (torch.func's import)

    class MLP(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = T.nn.Linear(4, 5), T.nn.Linear(5, 2)

        def forward(self, x):
            return self.fc2(T.nn.functional.relu(self.fc1(x)))
    T.manual_seed(0)
    models = [MLP() for _ in range(3)]
    params, buffers = T.func.stack_module_state(models)
    base = copy.deepcopy(models[0])

    def fmodel(params, buffers, x):
        return T.func.functional_call(base, (params, buffers), (x,))
    minibatches = T.arange(24.0).reshape(3, 2, 4).cos()
    same_batch = T.vmap(fmodel, in_dims=(0, 0, None))(params, buffers, minibatches[0])
    own_batches = T.vmap(fmodel)(params, buffers, minibatches)
    own_batches.pow(2).sum().backward()
    seen = [list(params), buffers, [(tuple(p.shape), p.requires_grad, p.is_leaf) for p in params.values()],
            _error(lambda: T.func.stack_module_state([])),
            _error(lambda: T.func.stack_module_state([models[0], T.nn.Linear(4, 5)])),
            _error(lambda: T.func.stack_module_state([models[0], copy.deepcopy(models[1]).eval()]))]
    return seen + _values(T, [*params.values(), same_batch, own_batches, *[p.grad for p in params.values()]])


def test_the_ensembling_tutorials_flow_gives_pytorchs_numbers(torch):
    _same(_ensemble(symgrad), _ensemble(torch), tol=1e-5)

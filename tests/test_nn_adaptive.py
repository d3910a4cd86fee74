"""AdaptiveLogSoftmaxWithLoss and LinearCrossEntropyLoss (with F.linear_cross_entropy and
LinearCrossEntropyOptions) against the installed PyTorch: seeded weights bit for bit, reprs and
state_dict keys, values and gradients w.r.t. the input and every parameter in float32 and float64,
log_prob and predict on each of predict's branches, the options, and PyTorch's errors."""
import warnings

import numpy as np
import pytest

import symgrad
from parity import assert_raises_as_pytorch

RNG = np.random.default_rng(31)
TOL = {"float32": dict(rtol=2e-5, atol=2e-6), "float64": dict(rtol=1e-11, atol=1e-12)}


def _close(ours, theirs, dtype):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, **TOL[dtype])


def _seeded(T, text, seed=7):
    T.manual_seed(seed)
    return eval("T.nn." + text, {"T": T})


ASM = {  # case -> module text, input shape, targets, dtype
    "four clusters, one unused, head bias": (
        "AdaptiveLogSoftmaxWithLoss(8, 12, [2, 4, 6, 9], div_value=2.0, head_bias=True)", (7, 8),
        [0, 3, 5, 11, 1, 10, 4], "float32"),
    "four clusters, one unused, float64": ("AdaptiveLogSoftmaxWithLoss(8, 12, [2, 4, 6, 9], div_value=2.0)", (7, 8),
                                           [0, 3, 5, 11, 1, 10, 4], "float64"),
    "all in the shortlist": ("AdaptiveLogSoftmaxWithLoss(6, 7, [4])", (3, 6), [0, 3, 1], "float64"),
    "unbatched, in a cluster": ("AdaptiveLogSoftmaxWithLoss(6, 9, [2, 5], head_bias=True)", (6,), 7, "float64"),
}


def _asm_run(T, text, shape, labels, dtype):
    module = _seeded(T, text)
    module.to(getattr(T, dtype))
    x = T.tensor(RNG_ARRAYS[shape], dtype=getattr(T, dtype), requires_grad=True)
    result = module(x, T.tensor(labels))
    output, loss = result
    cos = T.tensor(np.cos(np.arange(output.numel())).reshape(tuple(output.shape)), dtype=output.dtype)
    ((output * cos).sum() + loss).backward()
    return dict(text=(repr(module), list(module.state_dict()), type(result).__name__, result._fields,
                      type(output.grad_fn).__name__, type(loss.grad_fn).__name__, str(output.dtype),
                      tuple(output.shape), tuple(loss.shape)),
                values=[output.detach().numpy(), loss.detach().numpy(), x.grad.numpy()]
                + [None if p.grad is None else p.grad.numpy() for p in module.parameters()])


RNG_ARRAYS = {shape: RNG.standard_normal(shape) for _, shape, _, _ in ASM.values()}


@pytest.mark.parametrize("case", list(ASM))
def test_adaptive_log_softmax_forward(torch, case):
    dtype = ASM[case][3]
    ours, theirs = (_asm_run(T, *ASM[case]) for T in (symgrad, torch))
    assert ours["text"] == theirs["text"]
    _close(ours["values"], theirs["values"], dtype)


@pytest.mark.parametrize("text", ["AdaptiveLogSoftmaxWithLoss(8, 10, [2, 4, 6], div_value=2.0, head_bias=True)",
                                  "AdaptiveLogSoftmaxWithLoss(40, 100, [10, 30, 60])",
                                  "AdaptiveLogSoftmaxWithLoss(5, 9, [3], dtype=T.float64)"])
def test_adaptive_log_softmax_seeded_weights_and_reset(torch, text):
    draws = []
    for T in (symgrad, torch):
        module = _seeded(T, text, seed=12)
        first = [v.numpy().copy() for v in module.state_dict().values()]
        module.reset_parameters()
        draws.append(first + [v.numpy() for v in module.state_dict().values()] + [T.rand(2).numpy()])
    assert len(draws[0]) == len(draws[1])
    for a, b in zip(*draws):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def _head_steering(T, module, rows):
    """A head whose logits are the input's first columns, so each row's argmax is chosen."""
    state = {k: v.detach().numpy() for k, v in module.state_dict().items()}
    size, width = state["head.weight"].shape
    state["head.weight"] = np.eye(size, width)
    module.load_state_dict({k: T.tensor(v, dtype=T.float64) for k, v in state.items()})
    return T.tensor(np.asarray(rows, np.float64))


PREDICT = {  # rows of 6 features (as many in each, so the log_prob program is compiled once); the head has 3
    # shortlist and 2 cluster columns, and a row's largest head logit is where its largest feature is
    "all in the shortlist": [[3, 0, 0, 0, 0, 1], [0, 0, 2, 1, 0, -1], [0, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0]],
    "all in clusters": [[0, 0, 0, 4, 0, 1], [0, 0, 0, 0, 5, 2], [1, 0, 0, 3, 3, 0], [0, 0, 0, 0, 1, -1]],
    "mixed": [[0, 0, 0, 4, 0, 1], [2, 0, 0, 0, 0, 0], [0, 0, 0, 0, 5, -2], [0, 1, 0, 0, 0, 0]],
}


@pytest.mark.parametrize("branch", list(PREDICT))
def test_adaptive_log_softmax_predict_and_log_prob(torch, branch):
    results = []
    for T in (symgrad, torch):
        module = _seeded(T, "AdaptiveLogSoftmaxWithLoss(6, 11, [3, 7], div_value=2.0, dtype=T.float64)")
        x = _head_steering(T, module, PREDICT[branch]).requires_grad_()
        log_prob = module.log_prob(x)
        (log_prob * T.tensor(np.sin(np.arange(log_prob.numel())).reshape(tuple(log_prob.shape)))).sum().backward()
        predicted = module.predict(x)
        results.append((predicted.numpy(), str(predicted.dtype), log_prob.argmax(1).numpy(),
                        [log_prob.detach().numpy(), np.exp(log_prob.detach().numpy()).sum(1), x.grad.numpy()]
                        + [p.grad.numpy() for p in module.parameters()]))
    ours, theirs = results
    np.testing.assert_array_equal(ours[0], theirs[0])
    np.testing.assert_array_equal(ours[0], ours[2])  # predict is log_prob's argmax
    assert ours[1] == theirs[1]
    _close(ours[3], theirs[3], "float64")


def test_adaptive_log_softmax_empty_batch(torch):
    results = []
    for T in (symgrad, torch):
        module = _seeded(T, "AdaptiveLogSoftmaxWithLoss(4, 6, [2])")
        output, loss = module(T.zeros(0, 4), T.zeros(0, dtype=T.int64))
        results.append((tuple(output.shape), loss.item()))
    assert results[0][0] == results[1][0] == (0,)
    assert np.isnan(results[0][1]) and np.isnan(results[1][1])


def test_adaptive_log_softmax_attributes(torch):
    def attributes(T):
        m = T.nn.AdaptiveLogSoftmaxWithLoss(10, 50, (4, 20), div_value=3.0, head_bias=True)
        return (m.in_features, m.n_classes, m.cutoffs, m.div_value, m.head_bias, m.shortlist_size, m.n_clusters,
                m.head_size, len(m.tail), [[layer.out_features for layer in seq] for seq in m.tail],
                [name for name, _ in m.named_parameters()])

    assert attributes(symgrad) == attributes(torch)


def _lce_run(T, text, dtype, x, target, weight=None, backward=True):
    T.manual_seed(4)
    scope = {"T": T, "w": None if weight is None else T.tensor(weight, dtype=getattr(T, dtype))}
    module = eval("T.nn." + text, scope)
    module.to(getattr(T, dtype))
    x = T.tensor(x, dtype=getattr(T, dtype), requires_grad=True)
    target = T.tensor(target, dtype=getattr(T, dtype) if target.dtype.kind == "f" else None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = module(x, target)
    if backward:
        (out * T.tensor(np.cos(np.arange(out.numel())).reshape(tuple(out.shape)), dtype=out.dtype)).sum().backward()
    return dict(text=(repr(module), list(module.state_dict()), str(out.dtype), tuple(out.shape),
                      [str(w.message) for w in caught]),
                values=[out.detach().numpy()] + ([x.grad.numpy()] + [p.grad.numpy() for p in module.parameters()]
                                                 if backward else []))


X = RNG.standard_normal((6, 5))
LABELS = np.array([0, 3, 2, 1, 1, 3])
WEIGHT = np.array([0.5, 2.0, 1.0, 1.5])
LCE = {  # case -> module text, input, target, dtype
    "plain none": ("LinearCrossEntropyLoss(5, 4, reduction='none')", X, LABELS, "float32"),
    "weight ignore_index bias mean": (
        "LinearCrossEntropyLoss(5, 4, bias=True, weight=w, ignore_index=3)", X, LABELS, "float64"),
    "label_smoothing weight ignore_index mean": (
        "LinearCrossEntropyLoss(5, 4, weight=w, ignore_index=1, label_smoothing=0.2)", X, LABELS, "float32"),
    "label_smoothing weight ignore_index none": (
        "LinearCrossEntropyLoss(5, 4, weight=w, ignore_index=1, label_smoothing=0.2, reduction='none')", X, LABELS,
        "float64"),
    "default ignore_index -100": ("LinearCrossEntropyLoss(5, 4)", X, np.array([0, -100, 2, -100, 1, 3]), "float32"),
    "unbatched": ("LinearCrossEntropyLoss(5, 4, bias=True)", X[0], np.array(2), "float64"),
    "probabilities": ("LinearCrossEntropyLoss(5, 4, weight=w, label_smoothing=0.1)", X, RNG.dirichlet(np.ones(4), 6),
                      "float32"),
    "out_features": ("LinearCrossEntropyLoss(5, 3, out_features=(2, 2), bias=True, weight=T.tensor([1.0, 0.5, 2.0], "
                     "dtype=T.float64))", X, RNG.integers(0, 3, (6, 2, 2)), "float64"),
    "options": ("LinearCrossEntropyLoss(5, 4, options=T.nn.LinearCrossEntropyOptions())", X, LABELS, "float32"),
    "options chunked none": ("LinearCrossEntropyLoss(5, 4, bias=True, ignore_index=1, reduction='none', "
                             "options=T.nn.LinearCrossEntropyOptions(batch_chunk_size=2, acc_policy='accurate'))",
                             X, LABELS, "float64"),
    "options sum retain aspect ratio": (
        "LinearCrossEntropyLoss(5, 4, weight=w, reduction='sum', options=T.nn.LinearCrossEntropyOptions("
        "allow_retain_graph=True, chunking_method='aspect_ratio:2', batch_chunk_size=4))", X, LABELS, "float32"),
    "options ignored for label smoothing (warns)": (
        "LinearCrossEntropyLoss(5, 4, label_smoothing=0.3, options=T.nn.LinearCrossEntropyOptions())", X, LABELS,
        "float64"),
}


@pytest.mark.parametrize("case", list(LCE))
def test_linear_cross_entropy_loss(torch, case):
    text, x, target, dtype = LCE[case]
    ours, theirs = (_lce_run(T, text, dtype, x, target, WEIGHT) for T in (symgrad, torch))
    assert ours["text"] == theirs["text"]
    assert bool(ours["text"][4]) == ("warns" in case)
    _close(ours["values"], theirs["values"], dtype)


def test_linear_cross_entropy_functional(torch):
    results = []
    for T in (symgrad, torch):
        x = T.tensor(X, requires_grad=True)
        w = T.tensor(RNG_W, requires_grad=True)
        b = T.tensor(RNG_B, requires_grad=True)
        out = T.nn.functional.linear_cross_entropy(x, w, T.tensor(LABELS), linear_bias=b, label_smoothing=0.1,
                                                   weight=T.tensor(WEIGHT))
        out.backward()
        results.append([out.detach().numpy(), x.grad.numpy(), w.grad.numpy(), b.grad.numpy()])
    _close(results[0], results[1], "float64")


RNG_W, RNG_B = RNG.standard_normal((4, 5)), RNG.standard_normal(4)


@pytest.mark.parametrize("seed", [0, 9])
def test_linear_cross_entropy_seeded_weights(torch, seed):
    draws = []
    for T in (symgrad, torch):
        T.manual_seed(seed)
        module = T.nn.LinearCrossEntropyLoss(7, 5, out_features=(3,), bias=True, weight=T.ones(5))
        draws.append([v.numpy() for v in module.state_dict().values()] + [T.rand(2).numpy()])
    for a, b in zip(*draws):
        np.testing.assert_array_equal(a, b)


def test_linear_cross_entropy_attributes_and_options_repr(torch):
    def attributes(T):
        options = T.nn.LinearCrossEntropyOptions(batch_chunk_size=4, acc_policy="compact")
        m = T.nn.LinearCrossEntropyLoss(3, 4, out_features=(2,), ignore_index=2, label_smoothing=0.5,
                                        reduction="sum", options=options)
        return (repr(options), m.num_classes, m.out_features, m.ignore_index, m.label_smoothing, m.reduction,
                m.weight, m.options == options, tuple(m.linear.weight.shape), m.linear.bias)

    assert attributes(symgrad) == attributes(torch)


def test_linear_cross_entropy_other_accumulation_is_refused():
    half = symgrad.ones(2, 3, dtype=symgrad.float16), symgrad.ones(4, 3, dtype=symgrad.float16)
    options = symgrad.nn.LinearCrossEntropyOptions()  # on PyTorch's CPU, "auto" accumulates float16 in float32
    with pytest.raises(NotImplementedError, match="float32"):
        symgrad.nn.functional.linear_cross_entropy(*half[:1], half[1], symgrad.tensor([0, 1]), options=options)
    refused = symgrad.nn.LinearCrossEntropyOptions(acc_dtype=symgrad.float64)
    with pytest.raises(NotImplementedError, match="float64"):
        symgrad.nn.LinearCrossEntropyLoss(3, 4, options=refused)(symgrad.ones(2, 3), symgrad.tensor([0, 1]))
    same = symgrad.nn.LinearCrossEntropyOptions(acc_dtype=symgrad.float32, acc_policy="compact")
    loss = symgrad.nn.LinearCrossEntropyLoss(3, 4, options=same)(symgrad.zeros(2, 3), symgrad.tensor([0, 1]))
    assert abs(loss.item() - np.log(4)) < 1e-6


def _asm(T):
    T.manual_seed(0)
    return T.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [2, 6])


def _lcf(T, x, w, t, **kw):
    return T.nn.functional.linear_cross_entropy(x, w, t, **kw)


ERRORS = {
    "cutoffs empty": lambda T: T.nn.AdaptiveLogSoftmaxWithLoss(4, 10, []),
    "cutoffs unsorted": lambda T: T.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [5, 2]),
    "cutoffs zero": lambda T: T.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [0, 2]),
    "cutoffs at n_classes": lambda T: T.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [2, 10]),
    "cutoffs repeated": lambda T: T.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [2, 2, 5]),
    "cutoffs not integers": lambda T: T.nn.AdaptiveLogSoftmaxWithLoss(4, 10, [2.5, 5]),
    "batch sizes": lambda T: _asm(T)(T.ones(3, 4), T.tensor([0, 1])),
    "1-d target, 3-d input": lambda T: _asm(T)(T.ones(2, 3, 4), T.tensor([0, 1])),
    "0-d target, 2-d input": lambda T: _asm(T)(T.ones(2, 4), T.tensor(1)),
    "2-d target": lambda T: _asm(T)(T.ones(2, 4), T.tensor([[0], [1]])),
    "target too large": lambda T: _asm(T)(T.ones(3, 4), T.tensor([0, 10, 3])),
    "target negative": lambda T: _asm(T)(T.ones(3, 4), T.tensor([-1, 9, 3])),
    "unbatched target too large": lambda T: _asm(T)(T.ones(4), T.tensor(12)),
    "input features": lambda T: _asm(T)(T.ones(2, 5), T.tensor([0, 1])),
    "float target in the shortlist": lambda T: _asm(T)(T.ones(2, 4), T.tensor([0.0, 1.0])),
    "float target in a cluster": lambda T: _asm(T)(T.ones(2, 4), T.tensor([0.0, 7.0])),
    "bool target": lambda T: _asm(T)(T.ones(2, 4), T.tensor([True, False])),
    "log_prob unbatched": lambda T: _asm(T).log_prob(T.ones(4)),
    "predict unbatched": lambda T: _asm(T).predict(T.ones(4)),
    "LinearCrossEntropyLoss weight shape": lambda T: T.nn.LinearCrossEntropyLoss(3, 4, weight=T.ones(3)),
    "LinearCrossEntropyLoss label_smoothing": lambda T: T.nn.LinearCrossEntropyLoss(3, 4, label_smoothing=1.5),
    "LinearCrossEntropyLoss negative label_smoothing": lambda T: T.nn.LinearCrossEntropyLoss(3, 4,
                                                                                             label_smoothing=-0.1),
    "LinearCrossEntropyLoss in_features": lambda T: T.nn.LinearCrossEntropyLoss(3, 4)(T.ones(2, 5), T.tensor([0, 1])),
    "LinearCrossEntropyLoss 3-d input": lambda T: T.nn.LinearCrossEntropyLoss(3, 4)(T.ones(1, 2, 3),
                                                                                    T.tensor([[0, 1]])),
    "LinearCrossEntropyLoss out_features unbatched": lambda T: T.nn.LinearCrossEntropyLoss(3, 4, out_features=(2,))(
        T.ones(3), T.tensor([0, 1])),
    "LinearCrossEntropyLoss probabilities with ignore_index": lambda T: T.nn.LinearCrossEntropyLoss(
        3, 4, ignore_index=0)(T.ones(2, 3), T.ones(2, 4) / 4),
    "LinearCrossEntropyLoss target out of range": lambda T: T.nn.LinearCrossEntropyLoss(3, 4)(T.ones(2, 3),
                                                                                              T.tensor([0, 4])),
    "LinearCrossEntropyLoss reduction": lambda T: T.nn.LinearCrossEntropyLoss(3, 4, reduction="avg")(
        T.ones(2, 3), T.tensor([0, 1])),
    "linear_cross_entropy 1-d weight": lambda T: _lcf(T, T.ones(2, 3), T.ones(3), T.tensor([0, 1])),
    "linear_cross_entropy 0-d input": lambda T: _lcf(T, T.tensor(1.0), T.ones(4, 3), T.tensor(0)),
    "linear_cross_entropy bias shape": lambda T: _lcf(T, T.ones(2, 3), T.ones(4, 3), T.tensor([0, 1]),
                                                      linear_bias=T.ones(3)),
    "options acc_policy": lambda T: T.nn.LinearCrossEntropyOptions(acc_policy="fast"),
    "options chunking_method": lambda T: T.nn.LinearCrossEntropyOptions(chunking_method="aspect_ratio:0"),
    "options chunking_method name": lambda T: T.nn.LinearCrossEntropyOptions(chunking_method="rows"),
    "options batch_chunk_size": lambda T: T.nn.LinearCrossEntropyOptions(batch_chunk_size=0),
    "options acc_dtype": lambda T: T.nn.LinearCrossEntropyOptions(acc_dtype=T.int64),
    "options conflicting chunk sizes": lambda T: _lcf(
        T, T.ones(8, 3), T.ones(4, 3), T.zeros(8, dtype=T.int64),
        options=T.nn.LinearCrossEntropyOptions(batch_chunk_size=3, chunking_method="aspect_ratio")),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_are_pytorchs(torch, name):
    assert_raises_as_pytorch(ERRORS[name], torch, symgrad)


def test_options_frozen(torch):
    for T in (symgrad, torch):
        options = T.nn.LinearCrossEntropyOptions()
        with pytest.raises(AttributeError):
            options.batch_chunk_size = 3

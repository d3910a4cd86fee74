"""Attention against PyTorch: ``F.scaled_dot_product_attention`` and ``nn.MultiheadAttention`` on the
same inputs and weights (PyTorch's copied in, and separately a seeded module's own draws), values
and gradients of every input and parameter, masks, causal, dropout, shapes, errors and reprs."""
import numpy as np
import pytest

import symgrad

DTYPES = {"float32": (np.float32, 2e-6), "float64": (np.float64, 1e-12)}


def _close(ours, theirs, tol):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        if b is None:
            assert a is None
            continue
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=tol * 10, atol=tol, equal_nan=True)


def _cotangent(T, out):
    """A fixed, uneven cotangent, so each output element's gradient is checked."""
    n = int(np.prod(out.shape))
    return T.tensor((np.arange(n, dtype=np.float64).reshape(tuple(out.shape)) % 7 / 3 - 1)).to(out.dtype)


def _backward(T, out):
    (out * _cotangent(T, out.detach())).sum().backward()


# ------------------------------------------------------------------ scaled_dot_product_attention

SDPA_CASES = {
    "plain": dict(shapes=((2, 3, 4), (2, 5, 4), (2, 5, 6))),
    "causal": dict(shapes=((2, 2, 4, 3), (2, 2, 4, 3), (2, 2, 4, 5)), is_causal=True),
    "causal_wide": dict(shapes=((5, 3), (3, 3), (3, 2)), is_causal=True),  # L > S: PyTorch's top-left tril
    "bool_mask_with_a_row_masked_whole": dict(shapes=((2, 3, 4), (2, 5, 4), (2, 5, 6)), mask="bool"),
    "float_mask_broadcast_with_grad": dict(shapes=((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 6)), mask=(2, 1, 3, 5)),
    "negative_scale": dict(shapes=((3, 4), (5, 4), (5, 2)), scale=-0.7),
    "gqa": dict(shapes=((1, 4, 3, 2), (1, 2, 5, 2), (1, 2, 5, 3)), enable_gqa=True, scale=0.5),
}


def _sdpa(T, arrays, mask, options):
    tensors = [T.tensor(a, requires_grad=True) for a in arrays]
    if mask is not None:
        tensors.append(T.tensor(mask, requires_grad=mask.dtype != bool))
    out = T.nn.functional.scaled_dot_product_attention(*tensors[:3], attn_mask=tensors[3] if mask is not None else None,
                                                       **options)
    _backward(T, out)
    return [out.detach().numpy()] + [t.grad.numpy() if t.requires_grad else None for t in tensors]


@pytest.mark.parametrize("case, dtype", [(case, ("float32", "float64")[i % 2]) for i, case in enumerate(SDPA_CASES)])
def test_sdpa_values_and_gradients(torch, case, dtype):
    np_dtype, tol = DTYPES[dtype]
    options = dict(SDPA_CASES[case])
    rng = np.random.default_rng(len(case))
    arrays = [rng.standard_normal(s).astype(np_dtype) for s in options.pop("shapes")]
    kind, mask = options.pop("mask", None), None
    if kind == "bool":
        mask = rng.random((3, 5)) > 0.4
        mask[1] = False  # PyTorch's _safe_softmax: 0 here, value and gradient (not NaN)
    elif kind is not None:
        mask = rng.standard_normal(kind).astype(np_dtype)
        mask[0, 0, 1, :2] = -np.inf
    ours, theirs = _sdpa(symgrad, arrays, mask, options), _sdpa(torch, arrays, mask, options)
    _close(ours, theirs, tol)
    assert np.isfinite(ours[0]).all() and np.isfinite(ours[1]).all()
    if kind == "bool":
        assert (ours[0][:, 1] == 0).all() and (ours[1][:, 1] == 0).all()


def test_sdpa_dropout_draws_pytorchs_seeded_mask(torch):
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((2, 2, 4, 3), (2, 2, 6, 3), (2, 2, 6, 5))]
    results = []
    for T in (symgrad, torch):
        T.manual_seed(11)
        results.append(_sdpa(T, arrays, None, dict(dropout_p=0.4)))
    _close(results[0], results[1], 2e-6)


SDPA_ERRORS = [
    (lambda T, q, k, v: T.nn.functional.scaled_dot_product_attention(q, k.double(), v),
     "Expected query, key, and value to have the same dtype, but got query.dtype: float key.dtype: double"),
    (lambda T, q, k, v: T.nn.functional.scaled_dot_product_attention(q[0, 0], k[0, 0], v[0, 0]),
     "Expected query, key, and value to all be  at least 2 dimensional, but got query.dim: 1"),
    (lambda T, q, k, v: T.nn.functional.scaled_dot_product_attention(q, k, v, T.ones(3, 5, dtype=T.bool),
                                                                     is_causal=True),
     "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True"),
    (lambda T, q, k, v: T.nn.functional.scaled_dot_product_attention(q, k, v, T.ones(3, 5, dtype=T.int64)),
     "Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: long int"),
    (lambda T, q, k, v: T.nn.functional.scaled_dot_product_attention(q, k, v, T.ones(3, 5, dtype=T.float64)),
     "Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: double"),
    (lambda T, q, k, v: T.nn.functional.scaled_dot_product_attention(T.cat([q, q[:1]]).unsqueeze(0), k.unsqueeze(0),
                                                                     v.unsqueeze(0), enable_gqa=True),
     "Number of heads in key and value must divide the number of heads in"),
]


@pytest.mark.parametrize("index", range(len(SDPA_ERRORS)))
def test_sdpa_errors_are_pytorchs(torch, index):
    call, start = SDPA_ERRORS[index]
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 4), (2, 5, 4), (2, 5, 6))]
    messages = []
    for T in (symgrad, torch):
        with pytest.raises(RuntimeError) as info:
            call(T, *(T.tensor(a) for a in arrays))
        messages.append(str(info.value))
    assert messages[0].startswith(start) and messages[1].startswith(start)


# -------------------------------------------------------------------------- MultiheadAttention

CONFIGS = {
    "packed": dict(),
    "bias_kv_zero_attn": dict(add_bias_kv=True, add_zero_attn=True),
    "kdim_vdim": dict(kdim=3, vdim=5),
    "no_bias_batch_first": dict(bias=False, batch_first=True),
}


def _module(T, config, dtype=None):
    return T.nn.MultiheadAttention(6, 2, dtype=dtype, **CONFIGS[config])


@pytest.mark.parametrize("config", CONFIGS)
def test_a_seeded_module_holds_pytorchs_weights_names_and_repr(torch, config):
    modules = []
    for T in (symgrad, torch):
        T.manual_seed(7)
        modules.append(_module(T, config))
    ours, theirs = modules
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    for (name, a), (_, b) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy(), err_msg=name)
    assert type(ours.out_proj).__name__ == "NonDynamicallyQuantizableLinear"
    assert isinstance(ours.out_proj, symgrad.nn.Linear)
    for attribute in ("embed_dim", "kdim", "vdim", "num_heads", "head_dim", "batch_first", "_qkv_same_embed_dim",
                      "dropout", "add_zero_attn"):
        assert getattr(ours, attribute) == getattr(theirs, attribute)
    assert (ours.bias_k is None) == (theirs.bias_k is None)


def _twins(torch, config, dtype):
    """PyTorch's module (drawn from its own seed, then its biases made nonzero) and symgrad's with its weights."""
    torch.manual_seed(1)
    theirs = _module(torch, config, getattr(torch, dtype))
    with torch.no_grad():
        for name, p in theirs.named_parameters():
            if "bias" in name:
                p.uniform_(-0.5, 0.5)
    ours = _module(symgrad, config, getattr(symgrad, dtype))
    ours.load_state_dict({k: symgrad.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


def _inputs(config, dtype, batched=True, seed=0):
    rng = np.random.default_rng(seed)
    kdim, vdim = CONFIGS[config].get("kdim", 6), CONFIGS[config].get("vdim", 6)
    batch_first = CONFIGS[config].get("batch_first", False)
    L, S, N = 3, 4, 2

    def shape(length, e):
        return ((N, length, e) if batch_first else (length, N, e)) if batched else (length, e)
    arrays = [rng.standard_normal(shape(length, e)).astype(DTYPES[dtype][0])
              for length, e in ((L, 6), (S, kdim), (S, vdim))]
    key_padding = rng.random((N, S) if batched else (S,)) > 0.7
    key_padding[..., 0] = False  # no row masked whole (those are NaN in the weights path: see below)
    attn_mask = np.triu(np.ones((L, S), bool), 2)
    return arrays, key_padding, attn_mask


def _run(T, module, arrays, masks, options):
    tensors = [T.tensor(a, requires_grad=True) for a in arrays]
    out, weights = module(*tensors, **{k: T.tensor(v) if isinstance(v, np.ndarray) else v for k, v in masks.items()},
                          **options)
    module.zero_grad()
    _backward(T, out if weights is None else out.sum() + (weights * _cotangent(T, weights.detach())).sum())
    return ([out.detach().numpy(), None if weights is None else weights.detach().numpy()]
            + [t.grad.numpy() for t in tensors] + [p.grad.numpy() for p in module.parameters()])


OPTIONS = {
    "weights": ({}, {}),
    "no_weights": ({}, dict(need_weights=False)),
    "masks_per_head": (dict(key_padding_mask=True, attn_mask=True), dict(average_attn_weights=False)),
    "masks_no_weights": (dict(key_padding_mask=True, attn_mask=True), dict(need_weights=False)),
    "causal_no_weights": (dict(attn_mask=True), dict(need_weights=False, is_causal=True)),
}


def _masks(wanted, key_padding, attn_mask, float_masks):
    masks = {}
    if wanted.get("key_padding_mask"):
        masks["key_padding_mask"] = key_padding
    if wanted.get("attn_mask"):
        masks["attn_mask"] = attn_mask
    if float_masks:  # the same masks as floats (-inf where True), and a finite bias besides
        masks = {k: np.where(v, -np.inf, 0.25 * (k == "attn_mask")).astype(float_masks) for k, v in masks.items()}
    return masks


# Each row compiles a program of its own (about 2 s), so the configurations and options are spread
# over a few rows rather than crossed.
ROWS = [("packed", "weights", "float32"), ("packed", "masks_no_weights", "float64"),
        ("bias_kv_zero_attn", "masks_per_head", "float32"), ("bias_kv_zero_attn", "no_weights", "float64"),
        ("kdim_vdim", "masks_per_head", "float64"), ("kdim_vdim", "causal_no_weights", "float32"),
        ("no_bias_batch_first", "masks_no_weights", "float32")]


@pytest.mark.parametrize("config, option, dtype", ROWS)
def test_multihead_attention_values_and_gradients(torch, config, option, dtype):
    ours, theirs = _twins(torch, config, dtype)
    arrays, key_padding, attn_mask = _inputs(config, dtype)
    wanted, options = OPTIONS[option]
    masks = _masks(wanted, key_padding, attn_mask, DTYPES[dtype][0] if config == "kdim_vdim" else None)
    _close(_run(symgrad, ours, arrays, masks, options), _run(torch, theirs, arrays, masks, options), DTYPES[dtype][1])


def test_unbatched_input_gives_pytorchs_shapes_and_numbers(torch):
    ours, theirs = _twins(torch, "bias_kv_zero_attn", "float32")
    arrays, key_padding, attn_mask = _inputs("bias_kv_zero_attn", "float32", batched=False)
    masks = dict(key_padding_mask=key_padding, attn_mask=np.stack([attn_mask, ~attn_mask & False]))
    options = dict(average_attn_weights=False)
    results = [_run(symgrad, ours, arrays, masks, options), _run(torch, theirs, arrays, masks, options)]
    assert results[0][0].shape == (3, 6)
    assert results[0][1].shape == (2, 3, 6)  # heads, L, S + bias_kv + zero_attn
    _close(*results, 2e-6)


def test_a_row_masked_whole_is_nan_with_weights_and_zero_without(torch):
    """PyTorch's two paths differ: the weights path takes a plain softmax (NaN), SDPA a safe one (0)."""
    ours, theirs = _twins(torch, "packed", "float32")
    arrays, _, _ = _inputs("packed", "float32")
    attn_mask = np.zeros((3, 4), bool)
    attn_mask[1] = True
    for need_weights in (True, False):
        results = [_run(T, m, arrays, dict(attn_mask=attn_mask), dict(need_weights=need_weights))
                   for T, m in ((symgrad, ours), (torch, theirs))]
        assert np.isnan(results[0][0][1]).all() == need_weights
        _close(*results, 2e-6)


@pytest.mark.parametrize("training", [True, False])
def test_dropout_draws_pytorchs_mask_in_training_and_nothing_in_eval(torch, training):
    arrays, _, _ = _inputs("packed", "float32")
    results = []
    for T in (symgrad, torch):
        T.manual_seed(4)
        module = T.nn.MultiheadAttention(6, 2, dropout=0.3).train(training)
        T.manual_seed(9)
        results.append(_run(T, module, arrays, {}, {}))
    _close(*results, 2e-6)


def test_the_functional_form_matches(torch):
    ours, theirs = _twins(torch, "kdim_vdim", "float64")
    arrays, key_padding, attn_mask = _inputs("kdim_vdim", "float64")
    results = []
    for T, m in ((symgrad, ours), (torch, theirs)):
        q, k, v = (T.tensor(a) for a in arrays)
        out, weights = T.nn.functional.multi_head_attention_forward(
            q, k, v, 6, 2, None, m.in_proj_bias, None, None, False, 0.0, m.out_proj.weight, m.out_proj.bias,
            key_padding_mask=T.tensor(key_padding), attn_mask=T.tensor(attn_mask), use_separate_proj_weight=True,
            q_proj_weight=m.q_proj_weight, k_proj_weight=m.k_proj_weight, v_proj_weight=m.v_proj_weight)
        results.append([out.detach().numpy(), weights.detach().numpy()])
    _close(*results, 1e-12)


MHA_ERRORS = [
    ("bad_embed", lambda T: T.nn.MultiheadAttention(0, 2), None, ValueError,
     "embed_dim and num_heads must be greater than 0, got embed_dim=0 and num_heads=2 instead"),
    ("indivisible", lambda T: T.nn.MultiheadAttention(6, 4), None, AssertionError,
     "embed_dim must be divisible by num_heads"),
    ("query_rank", lambda T: T.nn.MultiheadAttention(6, 2), lambda T, m: m(T.ones(6), T.ones(6), T.ones(6)),
     AssertionError, "query should be unbatched 2D or batched 3D tensor but received 1-D query tensor"),
    ("key_rank", lambda T: T.nn.MultiheadAttention(6, 2), lambda T, m: m(T.ones(3, 2, 6), T.ones(4, 6), T.ones(4, 6)),
     AssertionError, "For batched (3-D) `query`, expected `key` and `value` to be 3-D but found 2-D and 2-D"),
    ("embed", lambda T: T.nn.MultiheadAttention(6, 2),
     lambda T, m: m(T.ones(3, 2, 5), T.ones(4, 2, 5), T.ones(4, 2, 5)), AssertionError,
     "was expecting embedding dimension of 6, but got 5"),
    ("mask_2d", lambda T: T.nn.MultiheadAttention(6, 2),
     lambda T, m: m(T.ones(3, 2, 6), T.ones(4, 2, 6), T.ones(4, 2, 6), attn_mask=T.ones(3, 3, dtype=T.bool)),
     RuntimeError, "The shape of the 2D attn_mask is torch.Size([3, 3]), but should be (3, 4)."),
    ("mask_3d", lambda T: T.nn.MultiheadAttention(6, 2),
     lambda T, m: m(T.ones(3, 2, 6), T.ones(4, 2, 6), T.ones(4, 2, 6), attn_mask=T.ones(2, 3, 4, dtype=T.bool)),
     RuntimeError, "The shape of the 3D attn_mask is torch.Size([2, 3, 4]), but should be (4, 3, 4)."),
    ("padding", lambda T: T.nn.MultiheadAttention(6, 2),
     lambda T, m: m(T.ones(3, 2, 6), T.ones(4, 2, 6), T.ones(4, 2, 6), key_padding_mask=T.ones(2, 5, dtype=T.bool)),
     AssertionError, "Expected key_padded_mask.shape[1] to be 4, but got 5"),
    ("int_mask", lambda T: T.nn.MultiheadAttention(6, 2),
     lambda T, m: m(T.ones(3, 2, 6), T.ones(4, 2, 6), T.ones(4, 2, 6), attn_mask=T.ones(3, 4, dtype=T.int64)),
     AssertionError, "only bool and floating types of attn_mask are supported"),
    ("causal_without_mask", lambda T: T.nn.MultiheadAttention(6, 2),
     lambda T, m: m(T.ones(3, 2, 6), T.ones(4, 2, 6), T.ones(4, 2, 6), is_causal=True),
     RuntimeError, "Need attn_mask if specifying the is_causal hint."),
    ("kv_shapes", lambda T: T.nn.MultiheadAttention(6, 2),
     lambda T, m: m(T.ones(3, 2, 6), T.ones(4, 2, 6), T.ones(5, 2, 6)),
     AssertionError, "key shape torch.Size([4, 2, 6]) does not match value shape torch.Size([5, 2, 6])"),
    ("kdim_weight", lambda T: T.nn.MultiheadAttention(6, 2, kdim=3, vdim=3),
     lambda T, m: m(T.ones(3, 2, 6), T.ones(4, 2, 4), T.ones(4, 2, 3)),
     AssertionError, "expecting key weights shape of (6, 4), but got torch.Size([6, 3])"),
]


@pytest.mark.parametrize("index", range(len(MHA_ERRORS)), ids=[e[0] for e in MHA_ERRORS])
def test_multihead_attention_errors_are_pytorchs(torch, index):
    _, make, call, kind, start = MHA_ERRORS[index]
    messages = []
    for T in (symgrad, torch):
        with pytest.raises(kind) as info:
            module = make(T)
            call(T, module)
        messages.append(str(info.value))
    assert messages[0].startswith(start), messages[0]
    assert messages[1].startswith(start), messages[1]


def test_mismatched_mask_types_warn_as_pytorch(torch):
    for T in (symgrad, torch):
        module = T.nn.MultiheadAttention(6, 2)
        with pytest.warns(UserWarning, match="Support for mismatched key_padding_mask and attn_mask is deprecated"):
            module(T.ones(3, 2, 6), T.ones(4, 2, 6), T.ones(4, 2, 6), key_padding_mask=T.zeros(2, 4, dtype=T.bool),
                   attn_mask=T.zeros(3, 4))

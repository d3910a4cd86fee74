"""``nn.Transformer`` and its parts against PyTorch: seeded modules hold PyTorch's weights under its
names (and reprs); a training step with dropout gives PyTorch's outputs and the gradients of the
inputs and every parameter; eval mode gives PyTorch's numbers, including what its fused kernels do
(padded positions 0, NaN where a query may attend nowhere, float masks read as booleans); masks,
causal detection, warnings and errors.  A Transformer's backward costs several seconds of XLA
compiling, so one training step covers the gradients and the eval rows run forward only."""
import warnings

import numpy as np
import pytest

import symgrad

TOL = 2e-6


def _close(ours, theirs, tol=TOL):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=tol * 10, atol=tol, equal_nan=True)


def _quiet(build):
    """PyTorch's warning that a stack will not use nested tensors is checked on its own below."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build()


# ------------------------------------------------------------------ construction

BUILDS = {
    "transformer": lambda T: T.nn.Transformer(8, 2, 2, 1, 16, dropout=0.2),
    "transformer_gelu_prenorm_no_bias_batch_first": lambda T: T.nn.Transformer(
        8, 4, 1, 2, 12, activation="gelu", norm_first=True, bias=False, batch_first=True, layer_norm_eps=1e-3),
    "transformer_custom_encoder": lambda T: T.nn.Transformer(
        8, 2, num_decoder_layers=1, dim_feedforward=16, custom_encoder=T.nn.TransformerEncoder(
            T.nn.TransformerEncoderLayer(8, 2, 16), 1, enable_nested_tensor=False)),
    "encoder_layer_float64_module_activation": lambda T: T.nn.TransformerEncoderLayer(
        6, 3, 10, activation=T.nn.GELU(), dtype=T.float64),
    "decoder_stack": lambda T: T.nn.TransformerDecoder(T.nn.TransformerDecoderLayer(6, 2, 10), 3, T.nn.LayerNorm(6)),
}


@pytest.mark.parametrize("build", BUILDS)
def test_a_seeded_module_holds_pytorchs_weights_names_and_repr(torch, build):
    modules = []
    for T in (symgrad, torch):
        T.manual_seed(0)
        modules.append(_quiet(lambda: BUILDS[build](T)))
    ours, theirs = modules
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    for (name, a), (_, b) in zip(ours.named_parameters(), theirs.named_parameters(), strict=True):
        assert a.dtype == getattr(symgrad, str(b.dtype).split(".")[1]), name
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy(), err_msg=name)
    for attribute in ("d_model", "nhead", "batch_first", "num_layers", "norm_first", "activation_relu_or_gelu",
                      "enable_nested_tensor", "use_nested_tensor", "mask_check"):
        assert getattr(ours, attribute, None) == getattr(theirs, attribute, None), attribute


def test_a_stack_holds_copies_and_the_string_activations_are_the_functions(torch):
    layer = symgrad.nn.TransformerDecoderLayer(4, 2, 8, activation="gelu")
    stack = symgrad.nn.TransformerDecoder(layer, 2)
    assert stack.layers[0] is not layer and stack.layers[0].activation is symgrad.nn.functional.gelu
    with symgrad.no_grad():
        stack.layers[0].linear1.weight.zero_()
    assert (stack.layers[1].linear1.weight.detach().numpy() == layer.linear1.weight.detach().numpy()).all()
    assert (layer.linear1.weight.detach().numpy() != 0).all()
    assert symgrad.nn.TransformerEncoderLayer(4, 2).activation is symgrad.nn.functional.relu
    assert symgrad.nn.TransformerEncoderLayer(4, 2).activation_relu_or_gelu == 1


def test_the_causal_mask_is_pytorchs(torch):
    for dtype in ("float32", "float64", "bool"):
        ours = symgrad.nn.Transformer.generate_square_subsequent_mask(4, dtype=getattr(symgrad, dtype))
        theirs = torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=getattr(torch, dtype))
        assert ours.dtype == getattr(symgrad, dtype)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_enable_nested_tensor_warns_as_pytorch_does(torch):
    messages = []
    for T in (symgrad, torch):
        layers = [T.nn.TransformerEncoderLayer(4, 2), T.nn.TransformerEncoderLayer(4, 1, batch_first=True),
                  T.nn.TransformerEncoderLayer(4, 2, batch_first=True, norm_first=True)]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            stacks = [T.nn.TransformerEncoder(layer, 1) for layer in layers]
            quiet = T.nn.TransformerEncoder(T.nn.TransformerEncoderLayer(4, 2, batch_first=True), 1)
        assert quiet.use_nested_tensor and not any(s.use_nested_tensor for s in stacks)
        messages.append([str(w.message) for w in caught])
        assert all(w.filename == __file__ for w in caught)
    assert messages[0] == messages[1] and len(messages[0]) == 3


# ------------------------------------------------------------------ a training step

def _cotangent(T, out):
    n = out.numel()
    return T.tensor(np.arange(n, dtype=np.float32).reshape(tuple(out.shape)) % 7 / 3 - 1)


def test_a_training_step_with_dropout_and_masks_gives_pytorchs_values_and_gradients(torch):
    """Dropout in the attention and after each block draws PyTorch's masks in PyTorch's order; the
    target's causal mask is recognised (SDPA's causal path); the source's padding mask is bool, the
    memory's masks float."""
    rng = np.random.default_rng(0)
    src, tgt = rng.standard_normal((2, 5, 8)).astype(np.float32), rng.standard_normal((2, 4, 8)).astype(np.float32)
    src_padding = np.array([[False] * 5, [False, False, False, True, True]])
    memory_mask = rng.standard_normal((4, 5)).astype(np.float32)
    results = []
    for T in (symgrad, torch):
        T.manual_seed(0)
        model = _quiet(lambda: T.nn.Transformer(8, 2, 1, 1, 16, dropout=0.25, batch_first=True))
        inputs = [T.tensor(a, requires_grad=True) for a in (src, tgt)]
        T.manual_seed(1)
        out = model(*inputs, tgt_mask=T.nn.Transformer.generate_square_subsequent_mask(4),
                    memory_mask=T.tensor(memory_mask), src_key_padding_mask=T.tensor(src_padding),
                    memory_key_padding_mask=T.tensor(np.where(src_padding, -np.inf, 0).astype(np.float32)))
        (out * _cotangent(T, out)).sum().backward()
        results.append([out.detach().numpy()] + [t.grad.numpy() for t in inputs]
                       + [p.grad.numpy() for p in model.parameters()])
    _close(*results)


# ------------------------------------------------------------------ eval mode

F_, T_ = False, True
EVAL_ROWS = {
    # PyTorch runs these stacks on nested tensors: padded positions come out 0 (then normed), a
    # sequence padded whole too; unchecked, each sequence keeps its first (count of unpadded) tokens
    "padding": dict(padding=np.array([[F_, F_, T_, T_], [T_] * 4, [F_] * 4])),
    "unaligned_padding_unchecked": dict(padding=np.array([[F_, T_, F_, T_], [F_] * 4, [F_, F_, F_, T_]]),
                                        mask_check=False),
    # wanting a gradient, PyTorch computes as in training: the padded rows are not 0
    "padding_with_grad": dict(padding=np.array([[F_, F_, T_, T_], [F_] * 4, [F_] * 4]), grad=True),
    # the fused layer: a query that may attend nowhere is NaN; a float mask's nonzero entries mask
    "a_query_masked_whole": dict(mask=np.where(np.arange(16).reshape(4, 4) // 4 == 1, -np.inf, 0).astype(np.float32)),
    "float_masks_read_as_bool_prenorm": dict(mask=np.where(np.eye(4, k=1) > 0, 0.5, 0).astype(np.float32),
                                             padding=np.array([[0, 0, -1.0, 0], [0] * 4, [0] * 4], np.float32),
                                             norm_first=True),
}


def _eval_encoder(T, x, padding=None, mask=None, mask_check=True, norm_first=False, grad=False):
    T.manual_seed(0)
    layer = T.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, norm_first=norm_first)
    encoder = _quiet(lambda: T.nn.TransformerEncoder(layer, 1, T.nn.LayerNorm(8), mask_check=mask_check)).eval()
    with T.set_grad_enabled(grad):
        out = encoder(T.tensor(x), mask=None if mask is None else T.tensor(mask),
                      src_key_padding_mask=None if padding is None else T.tensor(padding))
    return out.detach().numpy()


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
@pytest.mark.parametrize("row", EVAL_ROWS)
def test_an_eval_encoder_gives_pytorchs_numbers(torch, row):
    x = np.random.default_rng(1).standard_normal((3, 4, 8)).astype(np.float32)
    ours, theirs = _eval_encoder(symgrad, x, **EVAL_ROWS[row]), _eval_encoder(torch, x, **EVAL_ROWS[row])
    _close([ours], [theirs])
    if row == "padding":
        assert (ours[0, 2:] == 0).all() and (ours[1] == 0).all()
    assert (np.isnan(ours).any(-1) == (row == "a_query_masked_whole") * (np.arange(4) == 1)).all()


def test_an_eval_decoder_unbatched_with_bool_masks_gives_pytorchs_numbers(torch):
    """Unbatched (T, E) input; a bool target mask that is the causal one is recognised as such."""
    rng = np.random.default_rng(2)
    tgt, memory = rng.standard_normal((3, 8)).astype(np.float32), rng.standard_normal((5, 8)).astype(np.float32)
    masks = dict(tgt_mask=np.triu(np.ones((3, 3), bool), 1), memory_mask=rng.random((3, 5)) > 0.7,
                 memory_key_padding_mask=np.array([False, False, True, False, True]))
    masks["memory_mask"][:, 0] = False
    results = []
    for T in (symgrad, torch):
        T.manual_seed(0)
        model = T.nn.TransformerDecoder(T.nn.TransformerDecoderLayer(8, 2, 16), 1, T.nn.LayerNorm(8)).eval()
        with T.no_grad():
            results.append(model(T.tensor(tgt), T.tensor(memory), **{k: T.tensor(v) for k, v in masks.items()}).numpy())
    _close(*results)


# ------------------------------------------------------------------ errors

def _errors(T):
    x3, y3 = T.zeros(5, 2, 8), T.zeros(4, 3, 8)
    model = _quiet(lambda: T.nn.Transformer(8, 2, 1, 1, 16))
    yield RuntimeError, lambda: model(x3, y3)
    yield RuntimeError, lambda: model(x3, T.zeros(4, 2, 6))
    yield RuntimeError, lambda: T.nn.TransformerEncoderLayer(8, 2, activation="tanh")
    yield RuntimeError, lambda: model.encoder.layers[0](x3, is_causal=True)
    yield AssertionError, lambda: model.encoder(x3, src_key_padding_mask=T.zeros(2, 5, dtype=T.int64))
    yield AssertionError, lambda: T.nn.TransformerDecoderLayer(8, 3)


def test_errors_are_pytorchs(torch):
    for (kind, ours), (_, theirs) in zip(_errors(symgrad), _errors(torch), strict=True):
        messages = []
        for call in (ours, theirs):
            with pytest.raises(kind) as info:
                call()
            messages.append(str(info.value))
        assert messages[0] == messages[1]

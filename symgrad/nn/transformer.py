"""``nn.Transformer`` and its parts: encoder and decoder layers, their stacks, the causal mask.

Each layer is PyTorch's composition of ``MultiheadAttention``, ``Linear``, ``Dropout`` and
``LayerNorm`` (post-norm, or pre-norm with ``norm_first``), its submodules made in PyTorch's order, so
a seeded layer draws PyTorch's weights, its random draws in training come in PyTorch's order (the
attention's dropout, then each ``Dropout`` as the data reaches it) and its ``state_dict`` loads into
PyTorch's.  A stack holds deep copies of the layer it is given, as PyTorch's does.

PyTorch runs an encoder in eval mode, when no gradient is wanted, through fused kernels; two of their
results are not rounding: a query that may attend to no key gives NaN (the unfused path's
``_safe_softmax`` gives 0 weights), and with a key padding mask the stack works on nested tensors,
so padded positions come out 0 and a ``mask_check=False`` stack keeps each sequence's first
(unpadded-count) tokens.  Both are reproduced here from ordinary ops, under PyTorch's conditions.
"""
from __future__ import annotations

import copy
import warnings

from symgrad.creation import arange, full
from symgrad.grad_mode import is_grad_enabled
from symgrad.nn import functional as F
from symgrad.nn import init
from symgrad.nn.activation import GELU, ReLU
from symgrad.nn.attention import MultiheadAttention
from symgrad.nn.containers import ModuleList
from symgrad.nn.dropout import Dropout
from symgrad.nn.layers import Linear
from symgrad.nn.module import Module
from symgrad.nn.normalization import LayerNorm
from symgrad.ops.shape import triu


def _generate_square_subsequent_mask(sz, device=None, dtype=None):
    """-inf above the diagonal, 0 on and below it: position i attends to positions up to i."""
    return triu(full((sz, sz), float("-inf"), dtype=dtype, device=device), diagonal=1)


def _get_activation_fn(activation: str):
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


def _get_clones(module, n: int) -> ModuleList:
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


def _get_seq_len(src, batch_first: bool) -> int:
    return src.shape[0] if src.dim() == 2 else src.shape[1 if batch_first else 0]


def _detect_is_causal_mask(mask, is_causal=None, size=None) -> bool:
    """The hint as given; when there is none, whether ``mask`` equals the causal mask of its size."""
    if is_causal is not None or mask is None:
        return is_causal is True
    causal = _generate_square_subsequent_mask(size if size is not None else mask.size(-2), dtype=mask.dtype)
    return tuple(mask.shape) == tuple(causal.shape) and bool((mask == causal).all())


def _float_masks(mask, mask_name, key_padding_mask, padding_name, dtype):
    """PyTorch's canonical masks: booleans made float (-inf where True), the padding mask first."""
    key_padding_mask = F._canonical_mask(key_padding_mask, padding_name, None if mask is None else mask.dtype,
                                         mask_name, dtype)
    return F._canonical_mask(mask, mask_name, None, "", dtype, check_other=False), key_padding_mask


def _wants_grad(src, layer) -> bool:
    return is_grad_enabled() and (src.requires_grad or any(p.requires_grad for p in layer.parameters()))


def _build_layer(layer, attentions, d_model, nhead, dim_feedforward, dropout, layer_norm_eps, batch_first,
                 norm_first, bias, made) -> None:
    """An encoder layer's (one attention) or decoder layer's (two) modules, registered in PyTorch's order:
    seeded initialisation draws in it and ``state_dict`` lists it."""
    for name in attentions:
        setattr(layer, name, MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                                **made))
    layer.linear1 = Linear(d_model, dim_feedforward, bias=bias, **made)
    layer.dropout = Dropout(dropout)
    layer.linear2 = Linear(dim_feedforward, d_model, bias=bias, **made)
    layer.norm_first = norm_first
    blocks = range(1, len(attentions) + 2)
    for k in blocks:
        setattr(layer, f"norm{k}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **made))
    for k in blocks:
        setattr(layer, f"dropout{k}", Dropout(dropout))


class TransformerEncoderLayer(Module):
    """Self-attention, then a two-layer feed-forward block, each added back and layer-normalised."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        _build_layer(self, ("self_attn",), d_model, nhead, dim_feedforward, dropout, layer_norm_eps, batch_first,
                     norm_first, bias, dict(device=device, dtype=dtype))
        if isinstance(activation, str):
            activation = _get_activation_fn(activation)
        self.activation_relu_or_gelu = (1 if activation is F.relu or isinstance(activation, ReLU) else
                                        2 if activation is F.gelu or isinstance(activation, GELU) else 0)
        self.activation = activation

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        src_mask, src_key_padding_mask = _float_masks(src_mask, "src_mask", src_key_padding_mask,
                                                      "src_key_padding_mask", src.dtype)
        fused = self._fused(src)
        if fused:  # the fused kernel reads a float mask as a boolean one: a nonzero entry masks its key
            src_mask, src_key_padding_mask = (None if m is None else m != 0 for m in (src_mask, src_key_padding_mask))
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal, fused)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal, fused))
        return self.norm2(x + self._ff_block(x))

    def _fused(self, src) -> bool:
        """Whether PyTorch would run this call through its fused kernel (``_transformer_encoder_layer_fwd``)."""
        attn = self.self_attn
        return (src.dim() == 3 and not self.training and attn.batch_first and attn.in_proj_bias is not None
                and attn._qkv_same_embed_dim and bool(self.activation_relu_or_gelu)
                and self.norm1.eps == self.norm2.eps and attn.num_heads % 2 == 0
                and not any(m._forward_hooks or m._forward_pre_hooks for m in self.modules())
                and not _wants_grad(src, self))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False, fused=False):
        """The fused kernel ignores ``is_causal`` and gives NaN for a query that may attend nowhere, as
        MultiheadAttention's path that makes the weights explicit does."""
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=fused,
                           is_causal=is_causal and not fused)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoderLayer(Module):
    """Self-attention over the target, attention to the encoder's memory, then feed-forward."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        _build_layer(self, ("self_attn", "multihead_attn"), d_model, nhead, dim_feedforward, dropout, layer_norm_eps,
                     batch_first, norm_first, bias, dict(device=device, dtype=dtype))
        self.activation = _get_activation_fn(activation) if isinstance(activation, str) else activation

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
        return self.norm3(x + self._ff_block(x))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, is_causal=is_causal,
                           need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                is_causal=is_causal, need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


def _why_not_nested(layer) -> str:
    """PyTorch's reason, in its order, why a stack of this layer cannot use nested tensors ('' if it can)."""
    name = "encoder_layer"
    if not isinstance(layer, TransformerEncoderLayer):
        return f"{name} was not TransformerEncoderLayer"
    attn = layer.self_attn
    reasons = ((layer.norm_first, f"{name}.norm_first was True"),
               (not attn.batch_first, f"{name}.self_attn.batch_first was not True(use batch_first for better "
                                      "inference performance)"),
               (not attn._qkv_same_embed_dim, f"{name}.self_attn._qkv_same_embed_dim was not True"),
               (attn.in_proj_bias is None, f"{name}.self_attn was passed bias=False"),
               (not layer.activation_relu_or_gelu, f"{name}.activation_relu_or_gelu was not True"),
               (layer.norm1.eps != layer.norm2.eps, f"{name}.norm1.eps was not equal to {name}.norm2.eps"),
               (attn.num_heads % 2 == 1, f"{name}.self_attn.num_heads is odd"))
    return next((why for failed, why in reasons if failed), "")


class TransformerEncoder(Module):
    """``num_layers`` copies of an encoder layer applied in turn, then ``norm`` if given."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check
        why_not = _why_not_nested(encoder_layer)
        if enable_nested_tensor and why_not:
            warnings.warn(f"enable_nested_tensor is True, but self.use_nested_tensor is False because {why_not}",
                          stacklevel=2)
            self.use_nested_tensor = False

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        mask, src_key_padding_mask = _float_masks(mask, "mask", src_key_padding_mask, "src_key_padding_mask",
                                                  src.dtype)
        first = self.layers[0]
        is_causal = _detect_is_causal_mask(mask, is_causal, _get_seq_len(src, first.self_attn.batch_first))
        padded = self._nested_padding(src, mask, src_key_padding_mask)
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=mask, is_causal=is_causal,
                           src_key_padding_mask=src_key_padding_mask if padded is None else padded)
        if padded is not None:
            output = output.masked_fill(padded.unsqueeze(-1), 0.0)
        return output if self.norm is None else self.norm(output)

    def _nested_padding(self, src, mask, key_padding_mask):
        """Where PyTorch would run the stack on nested tensors, the positions left out of them: past
        each sequence's count of unpadded keys (a ``mask_check`` stack requires those to come first);
        otherwise None."""
        if (not self.use_nested_tensor or self.layers[0].training or src.dim() != 3
                or key_padding_mask is None or mask is not None or _wants_grad(src, self.layers[0])):
            return None
        kept = key_padding_mask == 0
        lengths = kept.sum(-1, keepdim=True)
        padded = arange(kept.shape[-1]) >= lengths
        if self.mask_check and bool((kept == padded).any()):
            return None
        return padded


class TransformerDecoder(Module):
    """``num_layers`` copies of a decoder layer applied in turn to the target, then ``norm`` if given."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        seq_len = _get_seq_len(tgt, self.layers[0].self_attn.batch_first)
        tgt_is_causal = _detect_is_causal_mask(tgt_mask, tgt_is_causal, seq_len)
        output = tgt
        for layer in self.layers:
            output = layer(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                           tgt_key_padding_mask=tgt_key_padding_mask,
                           memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                           memory_is_causal=memory_is_causal)
        return output if self.norm is None else self.norm(output)


class Transformer(Module):
    """An encoder stack and a decoder stack (or the custom ones given); every weight matrix of both
    is drawn again, Xavier-uniform, in parameter order, as PyTorch's constructor does."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation="relu", custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        made = dict(device=device, dtype=dtype)
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first,
                      bias)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(TransformerEncoderLayer(*layer_args, **made), num_encoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **made))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(TransformerDecoderLayer(*layer_args, **made), num_decoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **made))
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        batch_axis = 0 if self.batch_first else 1
        if src.dim() == 3 and src.size(batch_axis) != tgt.size(batch_axis):
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.size(-1) != self.d_model or tgt.size(-1) != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The causal mask: -inf above the diagonal, 0 elsewhere."""
        return _generate_square_subsequent_mask(sz, device=device, dtype=dtype)

    def _reset_parameters(self) -> None:
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)

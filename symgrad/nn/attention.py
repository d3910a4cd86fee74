"""``nn.MultiheadAttention``: PyTorch's parameters, made and drawn in PyTorch's order (the output
projection's Linear draws first, in its constructor, then ``_reset_parameters``), so a seeded module
holds PyTorch's weights; its forward is ``F.multi_head_attention_forward``, as PyTorch's is."""
from __future__ import annotations

from symgrad.nn import functional as F
from symgrad.nn import init
from symgrad.nn.layers import Linear, _empty
from symgrad.nn.module import Module


class NonDynamicallyQuantizableLinear(Linear):
    """PyTorch's name for MultiheadAttention's output projection (a Linear; its repr names the class)."""


class MultiheadAttention(Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead")
        super().__init__()
        made = dict(dtype=dtype, device=device)
        self.embed_dim, self.num_heads, self.dropout, self.batch_first = embed_dim, num_heads, dropout, batch_first
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if self._qkv_same_embed_dim:
            self.in_proj_weight = _empty(3 * embed_dim, embed_dim, **made)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = _empty(embed_dim, embed_dim, **made)
            self.k_proj_weight = _empty(embed_dim, self.kdim, **made)
            self.v_proj_weight = _empty(embed_dim, self.vdim, **made)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = _empty(3 * embed_dim, **made)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **made)
        if add_bias_kv:
            self.bias_k, self.bias_v = _empty(1, 1, embed_dim, **made), _empty(1, 1, embed_dim, **made)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        for weight in ((self.in_proj_weight,) if self._qkv_same_embed_dim
                       else (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)):
            init.xavier_uniform_(weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        for extra in (self.bias_k, self.bias_v):
            if extra is not None:
                init.xavier_normal_(extra)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        batched = query.dim() == 3
        key_padding_mask = F._canonical_mask(key_padding_mask, "key_padding_mask",
                                             None if attn_mask is None else attn_mask.dtype, "attn_mask", query.dtype)
        attn_mask = F._canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, check_other=False)
        if self.batch_first and batched:
            query, key, value = (x.transpose(1, 0) for x in (query, key, value))
        separate = not self._qkv_same_embed_dim
        output, weights = F.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias, self.bias_k,
            self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight, self.out_proj.bias,
            training=self.training, key_padding_mask=key_padding_mask, need_weights=need_weights, attn_mask=attn_mask,
            use_separate_proj_weight=separate, q_proj_weight=self.q_proj_weight, k_proj_weight=self.k_proj_weight,
            v_proj_weight=self.v_proj_weight, average_attn_weights=average_attn_weights, is_causal=is_causal)
        return (output.transpose(1, 0) if self.batch_first and batched else output), weights

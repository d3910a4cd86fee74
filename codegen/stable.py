"""softmax, log_softmax and logsumexp, max-shifted so that XLA's fusion cannot break the shift;
tanh rounded as PyTorch's.

XLA's CPU backend contracts a product into the subtraction that follows it (a fused multiply-add),
so inside one fusion ``x * w - max(x * w)`` is, at the largest entry, the product's rounding error
instead of 0: at logits near 1e9 (float32) or 1e40 (float64) its ``exp`` overflows, and softmax is
NaN where PyTorch's is 1.  Here an entry equal to the maximum is shifted to exactly 0 (``x * 0``,
so NaN and Inf stay as IEEE has them) and the others by ``x - max`` as before: every result equals
the unfused arithmetic's, PyTorch's masking of an infinite maximum in logsumexp included.

``rounded_tanh`` is tanh as PyTorch's CPU kernel rounds it.  XLA's float32 tanh is an ulp off in
~40% of inputs and is exactly 1 from |x| >= 8 on (PyTorch's from 9.01), so a saturated unit's
gradient ``1 - tanh**2`` was 0 where PyTorch's is ~5e-7; computed in float64 and rounded once, it
is PyTorch's in all but ~0.07% of float32 inputs (where PyTorch's own is an ulp from the nearest).

The functions are source text: a program that calls one has its definition emitted above it
(codegen.emit), and an exported module carries it too (symgrad.exporting).
"""
from __future__ import annotations

_SHIFTED = '''
def max_shifted(x, axis):
    """x - max(x) along axis, exactly 0 at the maximum even where XLA fuses a product into it."""
    top = jnp.max(x, axis=axis, keepdims=True, initial=-jnp.inf)
    return jnp.where(x == top, x * 0, x - top)
'''

DEFINITIONS = {
    "max_shifted": _SHIFTED,
    "stable_softmax": '''
def stable_softmax(x, axis):
    e = jnp.exp(max_shifted(x, axis))
    return e / jnp.sum(e, axis=axis, keepdims=True)
''',
    "stable_log_softmax": '''
def stable_log_softmax(x, axis):
    shifted = max_shifted(x, axis)
    return shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=axis, keepdims=True))
''',
    "stable_logsumexp": '''
def stable_logsumexp(x, axis, keepdims):
    """PyTorch's: an infinite maximum is not subtracted."""
    top = jnp.max(x, axis=axis, keepdims=True, initial=-jnp.inf)
    top = jnp.where(jnp.isinf(top), 0, top)
    total = jnp.sum(jnp.exp(jnp.where(x == top, 0, x - top)), axis=axis, keepdims=keepdims)
    return jnp.log(total) + (top if keepdims else jnp.squeeze(top, axis))
''',
}
DEFINITIONS["rounded_tanh"] = '''
def rounded_tanh(x):
    """tanh, in float64 for a narrower float and rounded once (XLA's float32 tanh saturates early)."""
    x = jnp.asarray(x)
    return jnp.tanh(x) if x.dtype == jnp.float64 else jnp.tanh(x.astype(jnp.float64)).astype(x.dtype)
'''
NEEDS = {"stable_softmax": ("max_shifted",), "stable_log_softmax": ("max_shifted",)}


def definitions_for(text: str) -> str:
    """The definitions ``text`` calls (and those they call), in an order that reads top-down."""
    wanted = [name for name in DEFINITIONS if f"{name}(" in text]
    for name in list(wanted):
        wanted += [need for need in NEEDS.get(name, ()) if need not in wanted]
    return "".join(DEFINITIONS[name].lstrip("\n") + "\n\n" for name in DEFINITIONS if name in wanted)

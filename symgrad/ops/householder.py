"""The product of Householder reflectors stored as ``geqrf`` leaves them
(``linalg.householder_product``, ``orgqr``), which the orthogonal parametrization maps through."""
from __future__ import annotations

import jax.numpy as jnp

from symgrad import dtypes
from symgrad.ir.linalg import householder_product as _product
from symgrad.ops.registry import Example, Names, Op, register
from symgrad.tensor import apply

NAME = "torch.linalg.householder_product"


def _infer_householder(nodes):
    A, tau = nodes
    if len(A.shape) < 2:
        raise ValueError(f"{NAME}: input must have at least 2 dimensions.")
    if A.shape[-2] < A.shape[-1]:
        raise ValueError(f"{NAME}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    if A.shape[-1] < tau.shape[-1]:
        raise ValueError(f"{NAME}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    if len(A.shape) - len(tau.shape) != 1 or A.shape[:-2] != tau.shape[:-1]:
        raise ValueError(f"{NAME}: Expected batch dimensions of tau to be equal to input.shape[:-2], but got "
                         f"{list(tau.shape[:-1])}")
    if A.dtype is not tau.dtype:
        raise ValueError(f"{NAME}: tau dtype {dtypes.torch_name(tau.dtype)} does not match input dtype "
                         f"{dtypes.torch_name(A.dtype)}")
    if not A.dtype.is_floating_point:
        raise NotImplementedError(f"\"orgqr_cpu\" not implemented for '{dtypes.torch_name(A.dtype)}'")
    return A.shape, A.dtype


def _reference(A, tau):
    *batch, m, n = A.shape
    V = jnp.tril(A, -1) + jnp.eye(m, n, dtype=A.dtype)
    Q = jnp.broadcast_to(jnp.eye(m, n, dtype=A.dtype), A.shape)
    for i in reversed(range(tau.shape[-1])):
        v = V[..., :, i:i + 1]
        Q = Q - tau[..., i, None, None] * v @ (v.mT @ Q)
    return Q


HOUSEHOLDER_PRODUCT = register(Op(
    "householder_product", "LinalgHouseholderProductBackward0", _infer_householder,
    lambda p, node, A, tau: _product(p, A, tau, node.shape, node.dtype.name), reference=_reference,
    torch_fn=lambda t, a, tau: t.linalg.householder_product(a, tau),
    examples=(Example(((4, 3), (3,))), Example(((2, 3, 3), (2, 2)))), domain=("spread", "real")))


@HOUSEHOLDER_PRODUCT.publish(Names(function=("orgqr",), method=("orgqr",)))
def householder_product(A, tau):
    """The first n columns of ``H_1 ... H_k`` (``H_i = I - tau_i v_i v_i^T``, v_i stored below A's
    diagonal, as ``geqrf`` leaves them)."""
    if tau.ndim == 0:
        raise IndexError("Dimension specified as -1 but tensor has no dimensions")
    return apply(HOUSEHOLDER_PRODUCT, A, tau)



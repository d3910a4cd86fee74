"""``torch.nn.utils.parametrizations``: weight norm, spectral norm and orthogonal matrices as
parametrizations (``symgrad.nn.utils.parametrize``), with PyTorch's names, buffers and numbers.

``weight_norm`` keeps ``original0`` (g) and ``original1`` (v); ``spectral_norm`` keeps power
iteration's ``_u`` and ``_v`` as buffers of its parametrization, drawn and iterated as PyTorch's
(15 steps at registration, ``n_power_iterations`` per read in training, none in eval);
``orthogonal`` offers PyTorch's three maps: the matrix exponential (its default for square
weights), Householder products (for the others) and the Cayley map.
"""
from __future__ import annotations

from enum import Enum, auto

import numpy as np

import symgrad.nn.functional as F
from symgrad.creation import empty, eye, randn, zeros_like
from symgrad.grad_mode import no_grad
from symgrad.linalg import householder_product, matrix_exp, qr, solve
from symgrad.ops.closeness import allclose
from symgrad.nn.module import Module
from symgrad.nn.utils import parametrize
from symgrad.nn.utils.spectral_norm import transposed_conv
from symgrad.nn.utils.weight_norm import norm_except_dim, weight_normalized
from symgrad.ops.linalg import mv
from symgrad.ops.products import vdot
from symgrad.ops.shape import cat
from symgrad.tensor import Tensor

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


class _WeightNorm(Module):
    """``(g, v) -> g * v / ||v||``; its ``right_inverse`` splits a weight into ``(||w||, w)``."""

    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return weight_normalized(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int = 0) -> Module:
    """``module.<name>`` becomes ``g * v / ||v||`` (norms over every dimension but ``dim``; ``None``
    for the whole tensor), g and v held as ``parametrizations.<name>.original0`` and ``original1``."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


class _SpectralNorm(Module):
    """``W -> W / sigma(W)``, sigma estimated by power iteration on the buffers ``_u`` and ``_v``."""

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but "
                             f"got n_power_iterations={n_power_iterations}")
        self.dim = dim % ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            u = empty(h, dtype=weight.dtype).normal_(0, 1)
            v = empty(w, dtype=weight.dtype).normal_(0, 1)
            self.register_buffer("_u", F.normalize(u, dim=0, eps=eps))
            self.register_buffer("_v", F.normalize(v, dim=0, eps=eps))
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.flatten(1)

    @no_grad()
    def _power_method(self, weight_mat: Tensor, n_power_iterations: int) -> None:
        """Steps of power iteration, written into ``_u`` and ``_v`` in place (buffers, no history)."""
        for _ in range(n_power_iterations):
            self._u.copy_(F.normalize(mv(weight_mat, self._v), dim=0, eps=self.eps))
            self._v.copy_(F.normalize(mv(weight_mat.t(), self._u), dim=0, eps=self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        sigma = vdot(self._u.clone(), mv(weight_mat, self._v.clone()))  # copies: a later step must not change this
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None) -> Module:
    """``module.<name>`` becomes itself divided by its spectral norm (``dim`` the output dimension:
    1 for ``ConvTranspose*d``, else 0)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if transposed_conv(module) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


def _make_orthogonal(A: Tensor) -> Tensor:
    """The Q of A's QR with R's diagonal made positive (the orthogonal matrix nearest in that sense)."""
    Q, R = qr(A)
    return Q * R.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


def _is_orthogonal(Q: Tensor) -> bool:
    n, k = Q.size(-2), Q.size(-1)
    return allclose(Q.mT @ Q, eye(k, dtype=Q.dtype), atol=10.0 * n * np.finfo(Q.dtype.numpy).eps)


class _Orthogonal(Module):
    """``X -> base @ exp(skew(X))`` (or the Cayley map of skew(X), or the product of the Householder
    reflectors below X's diagonal): an orthogonal matrix (or one with orthonormal columns, or rows
    when wide); ``base`` is the matrix assigned last (PyTorch's dynamic trivialization)."""

    def __init__(self, weight: Tensor, orthogonal_map: _OrthMaps, *, use_trivialization: bool = True) -> None:
        super().__init__()
        self.shape, self.orthogonal_map = weight.shape, orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X: Tensor) -> Tensor:
        n, k = X.size(-2), X.size(-1)
        transposed = n < k
        if transposed:
            X, n, k = X.mT, k, n
        Q = self._householder(X) if self.orthogonal_map is _OrthMaps.householder else self._skew_map(X, n, k)
        if hasattr(self, "base"):
            Q = self.base @ Q
        return Q.mT if transposed else Q

    def _skew_map(self, X: Tensor, n: int, k: int) -> Tensor:
        """exp (or Cayley) of the skew-symmetric matrix from X's lower triangle (padded to n by n)."""
        X = X.tril()
        if n != k:
            X = cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], -1, -1)], dim=-1)
        A = X - X.mT
        if self.orthogonal_map is _OrthMaps.matrix_exp:
            Q = matrix_exp(A)
        else:
            Id = eye(n, dtype=A.dtype)
            Q = solve(Id - 0.5 * A, Id + 0.5 * A)
        return Q[..., :k] if n != k else Q

    @staticmethod
    def _householder(X: Tensor) -> Tensor:
        """The reflectors below X's diagonal, each scaled to be one (``tau = 2 / (1 + |v|^2)``); the
        columns' signs are X's diagonal, truncated to integers."""
        A = X.tril(diagonal=-1)
        tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
        return householder_product(A, tau) * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)

    @no_grad()
    def right_inverse(self, Q: Tensor) -> Tensor:
        """Keeps ``Q`` (made orthogonal) as ``base`` and returns the parameter that maps to it."""
        if Q.shape != self.shape:
            raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                             f"Got a tensor of shape {Q.shape}.")
        if not hasattr(self, "base") and self.orthogonal_map is _OrthMaps.householder:
            raise NotImplementedError("orthogonal: assigning to the 'householder' map with use_trivialization=False "
                                      "needs geqrf, which symgrad does not have")
        if not hasattr(self, "base"):
            raise NotImplementedError("It is not possible to assign to the matrix exponential "
                                      "or the Cayley parametrizations when use_trivialization=False.")
        Q_init = Q
        n, k = Q.size(-2), Q.size(-1)
        if n < k:
            Q, n, k = Q.mT, k, n
        if n != k:
            Q = _make_orthogonal(cat([Q, randn(*(Q.shape[:-2] + (n, n - k)), dtype=Q.dtype)], dim=-1))
        else:
            Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
        self.base = Q
        return zeros_like(Q_init) - eye(Q_init.size(-2), Q_init.size(-1), dtype=Q_init.dtype)


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    """``module.<name>`` (a matrix or a batch of them) stays orthogonal; ``orthogonal_map`` 'matrix_exp'
    (the default for square weights), 'householder' (for the others) or 'cayley'."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.size(-2) == weight.size(-1) else "householder"
    orth_enum = getattr(_OrthMaps, orthogonal_map, None)
    if orth_enum is None:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
                         f"Got: {orthogonal_map}")
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module

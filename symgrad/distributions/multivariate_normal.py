"""``torch.distributions.MultivariateNormal``: a Gaussian vector, given by its covariance, its
precision or the lower Cholesky factor of its covariance; all three work from that factor, whose
triangular solves give the Mahalanobis distance and whose diagonal gives the log-determinant."""
from __future__ import annotations

import math

from symgrad.creation import eye
from symgrad.dtypes import Size
from symgrad.linalg import cholesky, solve_triangular
from symgrad.ops.broadcasting import broadcast_shapes

from symgrad.distributions import constraints
from symgrad.distributions.distribution import Distribution
from symgrad.distributions.utils import lazy_property, standard_normal

__all__ = ["MultivariateNormal"]

_MATRICES = ("scale_tril", "covariance_matrix", "precision_matrix")


def batch_mv(matrices, vectors):
    return matrices.matmul(vectors.unsqueeze(-1)).squeeze(-1)


def batch_mahalanobis(L, x):
    """``|L^-1 x|^2`` for factors ``L`` (batch ``B``) and vectors ``x`` (batch ``... x B``, B
    broadcastable): x's batch regrouped so each factor solves for all its vectors at once, as
    PyTorch groups them (the same solves, the same sums)."""
    n, x_batch = x.shape[-1], tuple(x.shape[:-1])
    L_dims = L.dim() - 2
    outer = len(x_batch) - L_dims
    grouped = x_batch[:outer]
    for size_L, size_x in zip(L.shape[:-2], x_batch[outer:]):
        grouped += (size_x // size_L, size_L)
    x = x.reshape(grouped + (n,))
    paired = outer + 2 * L_dims
    order = list(range(outer)) + list(range(outer, paired, 2)) + list(range(outer + 1, paired, 2)) + [paired]
    x = x.permute(order)
    flat_L = L.reshape(-1, n, n)
    flat_x = x.reshape(-1, flat_L.shape[0], n).permute(1, 2, 0)
    M = solve_triangular(flat_L, flat_x, upper=False).pow(2).sum(-2).t()
    M = M.reshape(tuple(x.shape[:-1]))
    back = list(range(outer))
    for i in range(L_dims):
        back += [outer + i, outer + L_dims + i]
    return M.permute(back).reshape(x_batch)


def precision_to_scale_tril(P):
    """The covariance's lower factor from the precision: the precision's factor taken from its
    reversed rows and columns, flipped back and inverted (no covariance is formed)."""
    Lf = cholesky(P.flip((-2, -1)))
    L_inv = Lf.flip((-2, -1)).transpose(-2, -1)
    return solve_triangular(L_inv, eye(P.shape[-1], dtype=P.dtype), upper=False)


def half_log_det(L):
    return L.diagonal(dim1=-2, dim2=-1).log().sum(-1)


class MultivariateNormal(Distribution):
    """Mean vector ``loc`` (the event) and exactly one of ``covariance_matrix``,
    ``precision_matrix``, ``scale_tril``; leading dims of each batch."""

    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = {n: m for n, m in zip(_MATRICES, (scale_tril, covariance_matrix, precision_matrix)) if m is not None}
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        ((name, matrix),) = given.items()
        if matrix.dim() < 2:
            raise ValueError(f"{name} matrix must be at least two-dimensional, with optional leading batch dimensions"
                             if name == "scale_tril" else
                             f"{name} must be at least two-dimensional, with optional leading batch dimensions")
        batch_shape = broadcast_shapes(matrix.shape[:-2], loc.shape[:-1])
        setattr(self, name, matrix.expand(tuple(batch_shape) + (-1, -1)))
        self.loc = loc.expand(tuple(batch_shape) + (-1,))
        super().__init__(batch_shape, self.loc.shape[-1:], validate_args=validate_args)
        self._unbroadcasted_scale_tril = {"scale_tril": lambda m: m, "covariance_matrix": cholesky,
                                          "precision_matrix": precision_to_scale_tril}[name](matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._expanded(MultivariateNormal, batch_shape, _instance=_instance)
        event = tuple(self._event_shape)
        new.loc = self.loc.expand(tuple(batch_shape) + event)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in _MATRICES:
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(tuple(batch_shape) + event + event))
        return new

    def _matrix_shape(self) -> tuple:
        return tuple(self._batch_shape) + tuple(self._event_shape) * 2

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return L.matmul(L.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        """``(L L^T)^-1 = L^-T L^-1`` (PyTorch calls ``cholesky_inverse``, which symgrad lacks)."""
        L = self._unbroadcasted_scale_tril
        L_inv = solve_triangular(L, eye(L.shape[-1], dtype=L.dtype), upper=False)
        return L_inv.mT.matmul(L_inv).expand(self._matrix_shape())

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(Size(self._batch_shape + self._event_shape))

    def rsample(self, sample_shape=()):
        eps = standard_normal(self._extended_shape(sample_shape), self.loc.dtype)
        return self.loc + batch_mv(self._unbroadcasted_scale_tril, eps)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        M = batch_mahalanobis(self._unbroadcasted_scale_tril, value - self.loc)
        log_two_pi = self._event_shape[0] * math.log(2 * math.pi)
        return -0.5 * (log_two_pi + M) - half_log_det(self._unbroadcasted_scale_tril)

    def entropy(self):
        H = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + half_log_det(self._unbroadcasted_scale_tril)
        return H if len(self._batch_shape) == 0 else H.expand(self._batch_shape)

"""``torch.distributions.constraints``: the regions parameters and samples must lie in.

A distribution names a constraint per parameter (``arg_constraints``) and one for its values
(``support``); with validation on, ``check`` decides which entries are valid, and the constraint's
``repr`` is what PyTorch's error messages print.  ``event_dim`` is how many rightmost dims make one
event: a check over an event answers once per event.
"""
from __future__ import annotations

import numpy as np

from symgrad import dtypes
from symgrad.creation import full, tensor
from symgrad.ops.closeness import isclose

__all__ = ["Constraint", "boolean", "dependent", "dependent_property", "greater_than", "greater_than_eq",
           "half_open_interval", "independent", "integer_interval", "interval", "is_dependent", "less_than",
           "lower_cholesky", "lower_triangular", "multinomial", "nonnegative", "nonnegative_integer", "one_hot",
           "positive", "positive_definite", "positive_integer", "real", "real_vector", "simplex", "square", "symmetric",
           "unit_interval"]


class Constraint:
    """A region: ``check(value)`` is a bool tensor, one entry per event of ``value``."""

    is_discrete = False
    event_dim = 0

    def check(self, value):
        raise NotImplementedError

    def __repr__(self):
        return type(self).__name__[1:] + "()"


class _Dependent(Constraint):
    """A region that depends on other parameters (a Uniform's support): never checked."""

    def __init__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        self._is_discrete = is_discrete
        self._event_dim = event_dim

    @property
    def is_discrete(self) -> bool:
        if self._is_discrete is NotImplemented:
            raise NotImplementedError(".is_discrete cannot be determined statically")
        return self._is_discrete

    @property
    def event_dim(self) -> int:
        if self._event_dim is NotImplemented:
            raise NotImplementedError(".event_dim cannot be determined statically")
        return self._event_dim

    def __call__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        return _Dependent(is_discrete=self._is_discrete if is_discrete is NotImplemented else is_discrete,
                          event_dim=self._event_dim if event_dim is NotImplemented else event_dim)

    def check(self, value):
        raise ValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint) -> bool:
    return isinstance(constraint, _Dependent)


class _DependentProperty(property, _Dependent):
    """A property on instances (the support built from their parameters), a dependent constraint on
    the class."""

    def __init__(self, fn=None, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        property.__init__(self, fn)
        self._is_discrete = is_discrete
        self._event_dim = event_dim

    def __call__(self, fn):
        return _DependentProperty(fn, is_discrete=self._is_discrete, event_dim=self._event_dim)


class _IndependentConstraint(Constraint):
    """``base_constraint`` over events of ``reinterpreted_batch_ndims`` more dims: valid when every
    entry is."""

    def __init__(self, base_constraint: Constraint, reinterpreted_batch_ndims: int):
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    @property
    def is_discrete(self) -> bool:
        return self.base_constraint.is_discrete

    @property
    def event_dim(self) -> int:
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value):
        result = self.base_constraint.check(value)
        if result.dim() < self.reinterpreted_batch_ndims:
            raise ValueError(f"Expected value.dim() >= {self.event_dim} but got {value.dim()}")
        kept = tuple(result.shape[:result.dim() - self.reinterpreted_batch_ndims])
        return result.reshape(kept + (-1,)).all(-1)

    def __repr__(self):
        return f"{type(self).__name__[1:]}({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        return (value == 0) | (value == 1)


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, value):
        return ((value == 0) | (value == 1)).all(-1) & value.sum(-1).eq(1)


class _Bounded(Constraint):
    """A region given by numbers or tensors, which its repr prints as PyTorch's does."""

    names: tuple = ()

    def __init__(self, *bounds):
        for name, bound in zip(self.names, bounds):
            setattr(self, name, bound)

    def __repr__(self):
        return f"{type(self).__name__[1:]}({', '.join(f'{n}={getattr(self, n)}' for n in self.names)})"


class _IntegerInterval(_Bounded):
    is_discrete = True
    names = ("lower_bound", "upper_bound")

    def check(self, value):
        return (value % 1 == 0) & (self.lower_bound <= value) & (value <= self.upper_bound)


class _IntegerGreaterThan(_Bounded):
    is_discrete = True
    names = ("lower_bound",)

    def check(self, value):
        return (value % 1 == 0) & (value >= self.lower_bound)


class _Real(Constraint):
    def check(self, value):
        return value == value  # not NaN


class _GreaterThan(_Bounded):
    names = ("lower_bound",)

    def check(self, value):
        return value > self.lower_bound


class _GreaterThanEq(_Bounded):
    names = ("lower_bound",)

    def check(self, value):
        return value >= self.lower_bound


class _LessThan(_Bounded):
    names = ("upper_bound",)

    def check(self, value):
        return value < self.upper_bound


class _Interval(_Bounded):
    names = ("lower_bound", "upper_bound")

    def check(self, value):
        return (value >= self.lower_bound) & (value <= self.upper_bound)


class _HalfOpenInterval(_Bounded):
    names = ("lower_bound", "upper_bound")

    def check(self, value):
        return (value >= self.lower_bound) & (value < self.upper_bound)


class _Multinomial(Constraint):
    """Nonnegative counts summing to at most ``upper_bound``, along the last dim."""

    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, x):
        return (x >= 0).all(dim=-1) & (x.sum(dim=-1) <= self.upper_bound)


class _Simplex(Constraint):
    """Nonnegative entries summing to 1 within 1e-6, along the last dim."""

    event_dim = 1

    def check(self, value):
        return (value >= 0).all(-1) & ((value.sum(-1) - 1).abs() < 1e-6)


def _each_matrix_all(mask):
    return mask.reshape(tuple(mask.shape[:-2]) + (-1,)).all(-1)


class _LowerTriangular(Constraint):
    event_dim = 2

    def check(self, value):
        return _each_matrix_all(value.tril() == value)


class _LowerCholesky(Constraint):
    """Lower triangular with a positive diagonal (a ``scale_tril``)."""

    event_dim = 2

    def check(self, value):
        return _each_matrix_all(value.tril() == value) & (value.diagonal(dim1=-2, dim2=-1) > 0).all(-1)


class _Square(Constraint):
    event_dim = 2

    def check(self, value):
        return full(tuple(value.shape[:-2]), value.shape[-2] == value.shape[-1], dtype=dtypes.bool_)


class _Symmetric(_Square):
    def check(self, value):
        square = super().check(value)
        if not square.all():
            return square
        return isclose(value, value.mT, atol=1e-6).all(-2).all(-1)


class _PositiveDefinite(_Symmetric):
    """Symmetric, and a Cholesky factorization of its lower triangle succeeds (PyTorch asks
    ``cholesky_ex``; the host's LAPACK answers the same question here)."""

    def check(self, value):
        symmetric_ = super().check(value)
        if not symmetric_.all():
            return symmetric_
        matrices = np.asarray(value.detach())
        return tensor(np.array([_factorizes(m) for m in matrices.reshape((-1,) + matrices.shape[-2:])],
                               dtype=bool).reshape(matrices.shape[:-2]))


def _factorizes(matrix: np.ndarray) -> bool:
    try:
        np.linalg.cholesky(matrix)
    except np.linalg.LinAlgError:
        return False
    return True


dependent = _Dependent()
dependent_property = _DependentProperty
independent = _IndependentConstraint
boolean = _Boolean()
one_hot = _OneHot()
nonnegative_integer = _IntegerGreaterThan(0)
positive_integer = _IntegerGreaterThan(1)
integer_interval = _IntegerInterval
real = _Real()
real_vector = independent(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
unit_interval = _Interval(0.0, 1.0)
interval = _Interval
half_open_interval = _HalfOpenInterval
simplex = _Simplex()
multinomial = _Multinomial
lower_triangular = _LowerTriangular()
lower_cholesky = _LowerCholesky()
square = _Square()
symmetric = _Symmetric()
positive_definite = _PositiveDefinite()

"""``torch.distributions.constraint_registry``: from a constraint to a transform whose codomain it
is, to optimize a constrained parameter over unconstrained reals.  ``biject_to(c)`` is one to one
(so a density can follow it), ``transform_to(c)`` need not be (a softmax onto the simplex).
Both look a factory up by the constraint's type; ``register`` adds one."""
from __future__ import annotations

import numbers

from symgrad.distributions import constraints, transforms

__all__ = ["ConstraintRegistry", "biject_to", "transform_to"]


class ConstraintRegistry:
    """Constraint type -> ``factory(constraint)`` returning a transform."""

    def __init__(self):
        self._registry: dict = {}

    def register(self, constraint, factory=None):
        """Register ``factory`` for a constraint (or constraint class); a decorator without ``factory``."""
        if factory is None:
            return lambda factory: self.register(constraint, factory)
        if isinstance(constraint, constraints.Constraint):
            constraint = type(constraint)
        if not (isinstance(constraint, type) and issubclass(constraint, constraints.Constraint)):
            raise TypeError(f"Expected constraint to be either a Constraint subclass or instance, but got {constraint}")
        self._registry[constraint] = factory
        return factory

    def __call__(self, constraint):
        try:
            factory = self._registry[type(constraint)]
        except KeyError:
            raise NotImplementedError(f"Cannot transform {type(constraint).__name__} constraints") from None
        return factory(constraint)


biject_to = ConstraintRegistry()
transform_to = ConstraintRegistry()


def _both(*kinds):
    """Register the decorated factory for ``kinds`` in both registries."""
    def register(factory):
        for kind in kinds:
            biject_to.register(kind, factory)
            transform_to.register(kind, factory)
        return factory
    return register


@_both(constraints.real)
def _identity(constraint):
    return transforms.identity_transform


@biject_to.register(constraints.independent)
def _biject_to_independent(constraint):
    return transforms.IndependentTransform(biject_to(constraint.base_constraint), constraint.reinterpreted_batch_ndims)


@transform_to.register(constraints.independent)
def _transform_to_independent(constraint):
    return transforms.IndependentTransform(transform_to(constraint.base_constraint),
                                           constraint.reinterpreted_batch_ndims)


@_both(constraints.greater_than, constraints.greater_than_eq)
def _above(constraint):
    shift = transforms.AffineTransform(constraint.lower_bound, 1)
    return transforms.ComposeTransform([transforms.ExpTransform(), shift])


@_both(constraints.less_than)
def _below(constraint):
    reflect = transforms.AffineTransform(constraint.upper_bound, -1)
    return transforms.ComposeTransform([transforms.ExpTransform(), reflect])


@_both(constraints.interval, constraints.half_open_interval)
def _between(constraint):
    """A sigmoid, stretched to the interval unless it is ``[0, 1]`` given as numbers."""
    low, high = constraint.lower_bound, constraint.upper_bound
    if isinstance(low, numbers.Number) and low == 0 and isinstance(high, numbers.Number) and high == 1:
        return transforms.SigmoidTransform()
    return transforms.ComposeTransform([transforms.SigmoidTransform(), transforms.AffineTransform(low, high - low)])


@biject_to.register(constraints.simplex)
def _biject_to_simplex(constraint):
    return transforms.StickBreakingTransform()


@transform_to.register(constraints.simplex)
def _transform_to_simplex(constraint):
    return transforms.SoftmaxTransform()

"""``torch.distributions.Chi2``: the sum of ``df`` squared standard normals, a Gamma of
concentration ``df / 2`` and rate ``1/2``."""
from __future__ import annotations

from symgrad.distributions import constraints
from symgrad.distributions.gamma import Gamma

__all__ = ["Chi2"]


class Chi2(Gamma):
    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, self._expanded(Chi2, batch_shape, _instance=_instance))

    @property
    def df(self):
        return self.concentration * 2

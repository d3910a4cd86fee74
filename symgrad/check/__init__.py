"""Cross-checking gradients: symgrad's symbolic gradient against finite differences,
``jax.grad`` and ``torch.autograd``.  The only place besides the tests that may ask JAX for
a derivative: here it is the reference, never the answer."""
from symgrad.check.crosscheck import crosscheck
from symgrad.check.gradcheck import GradcheckError, gradcheck, gradgradcheck
from symgrad.check.report import CrossCheckReport

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError", "crosscheck", "CrossCheckReport"]

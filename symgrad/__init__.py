"""symgrad: PyTorch's autograd API on a SymPy expression DAG, compiled to JAX/XLA.

``import symgrad as torch`` runs ordinary autograd code.  Every operation records a node;
gradients come from symbolic reverse mode over SymPy forms; forward and backward run as
jitted JAX programs cached by the graph's structure.
"""
import jax as _jax

# PyTorch's float64 and int64 need JAX's 64-bit mode.  symgrad states every dtype in the code
# it emits, so its own float32 programs stay float32.
_jax.config.update("jax_enable_x64", True)

from symgrad import ir  # noqa: E402  (the IR first: codegen imports it)
from symgrad.dtypes import (Size, bool_ as bool, device, dtype, float16, float32, float64,  # noqa: E402
                            int32, int64)
from symgrad.grad_mode import (enable_grad, inference_mode, is_grad_enabled, no_grad,  # noqa: E402
                               set_grad_enabled)
from symgrad.tensor import Tensor  # noqa: E402
from symgrad import tensor_methods as _methods  # noqa: E402,F401  (attaches Tensor methods)
from symgrad.creation import (Generator, arange, as_tensor, eye, from_numpy, full, full_like,  # noqa: E402
                              linspace, manual_seed, ones, ones_like, rand, rand_like, randint, randn,
                              randn_like, tensor, zeros, zeros_like)
from symgrad.ops.elementwise import (abs, add, cos, div, exp, log, maximum, minimum, mul, neg, pow,  # noqa: E402
                                     relu, sigmoid, sin, sqrt, square, sub, tanh, where, gt, ge, lt, le, eq,
                                     ne)
from symgrad.ops.linalg import dot, matmul, mm  # noqa: E402
from symgrad.ops.reductions import amax, logsumexp, max, mean, sum  # noqa: E402
from symgrad.ops.shape import (clone, expand, flatten, permute, reshape, squeeze, t,  # noqa: E402
                               transpose, unsqueeze)
from symgrad import nn, autograd, optim, symbolic  # noqa: E402
from symgrad.functional import grad, value_and_grad  # noqa: E402
from symgrad import check  # noqa: E402
from symgrad.check import crosscheck, gradcheck, gradgradcheck  # noqa: E402
from symgrad.nn.functional import log_softmax, softmax  # noqa: E402

float = float32
double = float64
half = float16
long = int64
int = int32
softplus = nn.functional.softplus


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def numel(input: Tensor) -> int:
    return input.numel()


__version__ = "0.1.0"

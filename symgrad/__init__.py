"""symgrad: PyTorch's autograd API on a SymPy expression DAG, compiled to JAX/XLA.

``import symgrad as torch`` runs ordinary autograd code.  Every operation records a node;
gradients come from symbolic reverse mode over SymPy forms; forward and backward run as
jitted JAX programs cached by the graph's structure.
"""
import math as _math

import jax as _jax

# PyTorch's float64 and int64 need JAX's 64-bit mode.  symgrad states every dtype in the code
# it emits, so its own float32 programs stay float32.
_jax.config.update("jax_enable_x64", True)

from symgrad import ir  # noqa: E402  (the IR first: codegen imports it)
from symgrad.dtypes import (Size, bool_ as bool, device, dtype, float16, float32, float64,  # noqa: E402
                            get_default_dtype, int8, int16, int32, int64, set_default_dtype, uint8)
from symgrad.grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled,  # noqa: E402
                               no_grad, set_grad_enabled)
from symgrad.tensor import Tensor  # noqa: E402
from symgrad.devices import accelerator, cuda, get_default_device, set_default_device  # noqa: E402
from symgrad.legacy_types import (BoolTensor, ByteTensor, CharTensor, DoubleTensor, FloatTensor,  # noqa: E402
                                  HalfTensor, IntTensor, LongTensor, ShortTensor)
from symgrad.ops import (activations as _a, closeness as _k, convolution as _c, elementwise as _e,  # noqa: E402,F401
                         functions as _f, indexing as _i, linalg as _l, logical as _g, reductions as _r,
                         shape as _s, sorting as _o)  # (registering their ops)
from symgrad.ops import (broadcasting as _bc, counting as _ct, integration as _in, matrices as _mx,  # noqa: E402,F401
                         products as _pr, scattering as _sc, stacking as _st, statistics as _sa)
from symgrad.ops import bitwise as _bw, finite_differences as _fd, special as _sf  # noqa: E402,F401
from symgrad.ops.special import positive  # noqa: E402
from symgrad import autograd, nn, linalg, optim, symbolic, viz  # noqa: E402  (autograd first: nn uses it)
from symgrad import tensor_methods as _methods  # noqa: E402,F401  (attaches the methods that are no op's)
from symgrad import cycles as _cycles  # noqa: E402,F401  (attaches backward's two ends of a traced step)
from symgrad.namespace import publish as _publish  # noqa: E402
from symgrad.creation import (arange, as_tensor, bernoulli, empty, empty_like, eye, from_numpy, full,  # noqa: E402
                              full_like, linspace, logspace, multinomial, normal, ones, ones_like, rand, rand_like,
                              randint, randint_like, randn, randn_like, randperm, tensor, zeros, zeros_like)
from symgrad import backends, random  # noqa: E402  (torch.backends, torch.random)
from symgrad.backends import (are_deterministic_algorithms_enabled,  # noqa: E402
                              is_deterministic_algorithms_warn_only_enabled, use_deterministic_algorithms)
from symgrad.random import (Generator, default_generator, get_rng_state, initial_seed,  # noqa: E402
                            manual_seed, seed, set_rng_state)
from symgrad.compiled import grad, value_and_grad  # noqa: E402
from symgrad import func  # noqa: E402  (torch.func, built on value_and_grad)
from symgrad.func import vmap  # noqa: E402  (torch.vmap)
from symgrad.compiling import compile  # noqa: E402  (torch.compile)
from symgrad.serialization import save  # noqa: E402
from symgrad.export_artifact import load  # noqa: E402  (a checkpoint, or an exported gradient's directory)
from symgrad.exporting import spec  # noqa: E402
from symgrad import check  # noqa: E402
from symgrad import utils  # noqa: E402  (torch.utils.data)
from symgrad.check import crosscheck, gradcheck, gradgradcheck  # noqa: E402
from symgrad.engine import plain_path  # noqa: E402
from symgrad.nn.functional import cosine_similarity, pairwise_distance  # noqa: E402  (torch's too)

_publish(globals(), nn.functional)  # torch.exp, torch.nn.functional.relu, Tensor.exp ... from the op registry
from symgrad import in_place_spellings as _in_place  # noqa: E402
_in_place.publish(globals(), nn.functional)  # torch.relu_, F.relu_ ...: the published in-place ops by other names
from symgrad.creation_aliases import asarray, range, scalar_tensor  # noqa: E402  (range: torch's, end included)
from symgrad.printing_options import set_printoptions  # noqa: E402
from symgrad.runtime_settings import (get_float32_matmul_precision, get_num_interop_threads,  # noqa: E402
                                      get_num_threads, set_float32_matmul_precision, set_flush_denormal,
                                      set_num_interop_threads, set_num_threads)
from symgrad.windows import bartlett_window, blackman_window, hamming_window, hann_window, kaiser_window  # noqa: E402
from symgrad.type_info import can_cast, finfo, iinfo, promote_types, result_type, typename  # noqa: E402
from symgrad.tensor_queries import (adjoint, conj, is_complex, is_conj, is_floating_point, is_inference,  # noqa: E402
                                    is_nonzero, is_same_size, is_signed)
from symgrad.tensor_queries import is_conj as is_neg, conj as resolve_conj, conj as resolve_neg  # noqa: E402
from symgrad import special  # noqa: E402  (torch.special)
from symgrad import distributions  # noqa: E402  (torch.distributions)

float = float32
double = float64
half = float16
long = int64
int = int32
short = int16
pi, e, inf, nan, newaxis = _math.pi, _math.e, _math.inf, _math.nan, None  # PyTorch's constants


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def numel(input: Tensor) -> int:
    return input.numel()


__version__ = "0.1.0"

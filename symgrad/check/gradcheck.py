"""``gradcheck`` and ``gradgradcheck`` with ``torch.autograd.gradcheck``'s meaning: float64
central finite differences against symgrad's symbolic Jacobian."""
from __future__ import annotations

import numpy as np

from symgrad import creation, dtypes
from symgrad.check.traced import ProgramFunction, as_float64, trace, vjp_function
from symgrad.tensor import Tensor


class GradcheckError(RuntimeError):
    """Raised when a symbolic and a numerical Jacobian disagree (PyTorch's class name)."""


def _differentiable(inputs):
    """PyTorch checks the tensors that require grad; plain float arrays count as requiring it."""
    return [k for k, x in enumerate(inputs)
            if (x.requires_grad if isinstance(x, Tensor) else np.asarray(x).dtype.kind == "f")]


def _compare(function: ProgramFunction, arrays, wrt, eps, atol, rtol, what: str):
    for output in range(len(function.output_shapes)):
        analytical = function.analytical_jacobian(output, wrt, arrays)
        for k, a in zip(wrt, analytical):
            n = function.numerical_jacobian(output, k, arrays, eps)
            bad = ~np.isclose(a, n, rtol=rtol, atol=atol) | ~np.isfinite(a) | ~np.isfinite(n)
            if bad.any():
                row, col = np.argwhere(bad)[0]
                raise GradcheckError(
                    f"{what}: Jacobian mismatch for output {output} with respect to input {k},\n"
                    f"numerical:{n}\nanalytical:{a}\n"
                    f"first disagreement at entry (output {row}, input {col}): analytical {a[row, col]:.10g}, "
                    f"numerical {n[row, col]:.10g}, difference {abs(a[row, col] - n[row, col]):.3g} "
                    f"(atol={atol}, rtol={rtol}); {int(bad.sum())} of {bad.size} entries disagree")


# PyTorch's switches of what its checks check, at their defaults.  ``fast_mode`` (a random projection of the
# Jacobian) and ``nondet_tol`` (symgrad's programs are deterministic) change nothing here: the whole
# Jacobian is compared.
_CHECKS = {"nondet_tol": None, "fast_mode": None, "check_undefined_grad": True, "check_grad_dtypes": False,
           "check_batched_grad": False, "check_batched_forward_grad": False, "check_forward_ad": False,
           "check_backward_ad": True, "masked": None, "gen_non_contig_grad_outputs": False,
           "check_fwd_over_rev": False, "check_rev_over_rev": True}


def _refuse_other_checks(name: str, options: dict) -> None:
    unknown = sorted(set(options) - set(_CHECKS))
    if unknown:
        raise TypeError(f"{name}() got an unexpected keyword argument '{unknown[0]}'")
    other = [k for k, v in options.items() if _CHECKS[k] is not None and bool(v) != _CHECKS[k]]
    if other:
        raise NotImplementedError(f"{name}: {', '.join(other)} other than PyTorch's default is not supported by "
                                  "symgrad")


def gradcheck(fn, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, **checks) -> bool:
    """True when ``fn``'s symbolic gradient matches central differences at ``inputs``.

    ``inputs`` is a tensor or a tuple of tensors/arrays; values are checked in float64.
    """
    _refuse_other_checks("gradcheck", checks)
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    wrt = _differentiable(inputs)
    arrays = [as_float64(x) for x in inputs]
    try:
        _compare(trace(fn, arrays, wrt), arrays, wrt, eps, atol, rtol, "gradcheck")
    except GradcheckError:
        if raise_exception:
            raise
        return False
    return True


def gradgradcheck(fn, inputs, grad_outputs=None, *, eps: float = 1e-6, atol: float = 1e-5,
                  rtol: float = 1e-3, raise_exception: bool = True, **checks) -> bool:
    """True when the gradient of ``fn``'s symbolic gradient matches central differences.

    The first-order gradient is the program symgrad derives; it is differentiated again
    symbolically w.r.t. the inputs and the output cotangents (random unless given).
    """
    _refuse_other_checks("gradgradcheck", checks)
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    wrt = _differentiable(inputs)
    arrays = [as_float64(x) for x in inputs]
    function = trace(fn, arrays, wrt)
    if grad_outputs is None:
        grad_outputs = _drawn_cotangents(fn, inputs)
    try:
        for output in range(len(function.output_shapes)):
            cotangent = as_float64(grad_outputs[output])
            second = vjp_function(function, output, wrt)
            _compare(second, [*arrays, cotangent], [*wrt, len(arrays)], eps, atol, rtol, "gradgradcheck")
    except GradcheckError:
        if raise_exception:
            raise
        return False
    return True


def _drawn_cotangents(fn, inputs) -> list:
    """PyTorch's default cotangents: ``fn``'s outputs on the inputs (PyTorch calls it too), then one
    draw per output, uniform in [-1, 1) in its dtype, from the global generator (as
    ``torch.testing.make_tensor`` draws them): numbers drawn afterwards are PyTorch's too."""
    outputs = fn(*[x if isinstance(x, Tensor) else creation.tensor(x) for x in inputs])
    outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    return [creation.empty(o.shape, dtype=o.dtype if o.dtype.is_floating_point else dtypes.float64).uniform_(-1, 1)
            for o in outputs]

"""``F.ctc_loss``: the CTC loss as PyTorch's ``ctc_loss_impl`` composes it, around one op whose
value is the alpha recursion and whose gradient is PyTorch's CPU backward kernel (symgrad.ir.ctc).

PyTorch reads the lengths on the host and checks them there; so does this (unless they are being
traced by JAX).  The lengths go into the program as int64 arrays, so sequences of other lengths
reuse the compiled program; only the padded label length (the number of states) is structural.
"""
from __future__ import annotations

import math

import numpy as np

from symgrad import dtypes, engine
from symgrad.creation import tensor, zeros
from symgrad.ir.ctc import CtcLoss, ctc_attributes
from symgrad.ir.linalg import emit
from symgrad.ops.elementwise import where
from symgrad.ops.registry import Names, Op, register
from symgrad.tensor import Tensor, apply

_ALLOCATE = "(while checking arguments for ctc_loss_allocate_outputs)"


def _infer(nodes, blank, states, concatenated, zero_infinity):
    return (nodes[0].shape[1],), nodes[0].dtype


# No generic examples: on the registry's random (unnormalized) inputs PyTorch's gradient is not the
# derivative of its value (symgrad.ir.ctc), which test_ops checks against; tests/test_nn_ctc.py
# checks both against PyTorch.
CTC = register(Op(
    "ctc_loss", "CtcLossBackward0", _infer,
    lambda p, node, lp, labels, il, tl: emit(p, CtcLoss, lp, labels, il, tl, *ctc_attributes(*node.attrs),
                                             hint="ctc_loss")))


def _long(tensor):
    """As int64; not detached (a traced argument stays the argument: exporting keeps it an input)."""
    return tensor if tensor.dtype is dtypes.int64 else tensor.to(dtypes.int64)


def _type_name(value) -> str:
    return "Tensor" if isinstance(value, Tensor) else type(value).__name__


def _lengths(input_lengths, target_lengths, args):
    """Both tensors (integral, read as int64) or both tuples of ints, else PyTorch's TypeError."""
    if isinstance(input_lengths, Tensor) and isinstance(target_lengths, Tensor):
        for name, lengths in (("input_lengths", input_lengths), ("target_lengths", target_lengths)):
            if lengths.dtype.is_floating_point or lengths.dtype is dtypes.bool_:
                raise RuntimeError(f"{name} must be integral")
        return [_long(lengths.reshape(-1)) for lengths in (input_lengths, target_lengths)]
    sequences = (tuple, list)
    if (isinstance(input_lengths, sequences) and isinstance(target_lengths, sequences)
            and all(isinstance(v, int) and not isinstance(v, bool) for v in (*input_lengths, *target_lengths))):
        return [tensor(list(lengths), dtype=dtypes.int64) for lengths in (input_lengths, target_lengths)]
    got = ", ".join(_type_name(a) for a in args)
    raise TypeError(
        f"ctc_loss() received an invalid combination of arguments - got ({got}), but expected one of:\n"
        " * (Tensor log_probs, Tensor targets, tuple of ints input_lengths, tuple of ints target_lengths, "
        "int blank = 0, int reduction = at::Reduction::Mean, bool zero_infinity = False)\n"
        " * (Tensor log_probs, Tensor targets, Tensor input_lengths, Tensor target_lengths, int blank = 0, "
        "int reduction = at::Reduction::Mean, bool zero_infinity = False)")


def _check(log_probs, targets, il, tl, blank):
    """PyTorch's checks, in its order; the number of label states to make (None if unknown)."""
    if not log_probs.dtype.is_floating_point or log_probs.dtype is dtypes.float16:
        raise NotImplementedError(f'"ctc_loss_cpu" not implemented for \'{dtypes.torch_name(log_probs.dtype)}\'')
    if log_probs.numel() == 0:
        raise RuntimeError("log_probs tensor must not be empty")
    if log_probs.ndim != 3:
        raise RuntimeError(f"Expected 3-dimensional tensor, but got {log_probs.ndim}-dimensional tensor for argument "
                           f"#1 'log_probs' {_ALLOCATE}")
    if targets.ndim not in (1, 2):
        raise RuntimeError(f"Expected 1 to 2 dimensions, but got {targets.ndim}-dimensional tensor for argument #2 "
                           f"'targets' {_ALLOCATE}")
    time, batch, classes = log_probs.shape
    if not 0 <= blank < classes:
        raise RuntimeError("blank must be in label range")
    for name, lengths in (("input_lengths", il), ("target_lengths", tl)):
        if lengths.shape[0] != batch:
            raise RuntimeError(f"{name} must be of size batch_size")
    inputs, labels = (engine.concrete_array(lengths._node) for lengths in (il, tl))
    if inputs is None or labels is None:  # traced: the most states any label sequence may need
        return targets.shape[-1]
    inputs, labels = np.asarray(inputs), np.asarray(labels)
    for length in labels:
        if length < 0:
            raise RuntimeError(f"Expected target_lengths to have value at least 0, but got value {length} {_ALLOCATE}")
    longest = int(labels.max(initial=0))
    if targets.ndim == 1 and targets.shape[0] != int(labels.sum()):
        raise RuntimeError(f"Expected tensor to have size {int(labels.sum())} at dimension 0, but got size "
                           f"{targets.shape[0]} for argument #2 'targets' {_ALLOCATE}")
    if targets.ndim == 2:
        if targets.shape[0] != batch:
            raise RuntimeError(f"Expected tensor to have size {batch} at dimension 0, but got size {targets.shape[0]} "
                               f"for argument #2 'targets' {_ALLOCATE}")
        if targets.shape[1] < longest:
            raise RuntimeError(f"Expected tensor to have size at least {longest} at dimension 1, but got size "
                               f"{targets.shape[1]} for argument #2 'targets' {_ALLOCATE}")
        longest = targets.shape[1]
    for length in inputs:
        if length < 0:
            raise RuntimeError(f"Expected input_lengths to have value at least 0, but got value {length} {_ALLOCATE}")
        if length > time:
            raise RuntimeError(f"Expected input_lengths to have value at most {time}, but got value {length} "
                               f"{_ALLOCATE}")
    return longest


@CTC.publish(Names(functional=("ctc_loss",)))
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """PyTorch's ``ctc_loss_impl``: the per-sequence loss (CtcLossBackward0), inf losses zeroed
    with ``where`` under ``zero_infinity``, then ``mean`` (each loss over its clamped target
    length, DivBackward0, then MeanBackward0) or ``sum``; an unbatched (T, C) input's loss squeezed."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    il, tl = _lengths(input_lengths, target_lengths,
                      (log_probs, targets, input_lengths, target_lengths, blank, 0, zero_infinity))
    batched = log_probs.ndim == 3
    lp = log_probs if batched else log_probs.unsqueeze(1)
    states = _check(lp, targets, il, tl, int(blank))
    labels = _long(targets.detach() if targets.requires_grad else targets)
    loss = apply(CTC, lp, labels, il, tl, attrs=(int(blank), int(states), targets.ndim == 1, bool(zero_infinity)))
    if zero_infinity:
        loss = where(loss == math.inf, zeros((), dtype=loss.dtype), loss)
    if reduction == "mean":
        return (loss / tl.to(loss.dtype).clamp_min(1)).mean()
    if reduction == "sum":
        return loss.sum()
    return loss if batched else loss.squeeze(0)

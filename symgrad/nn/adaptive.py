"""The two losses that own a linear layer: ``AdaptiveLogSoftmaxWithLoss`` (a head softmax over the
frequent classes and one cluster per tail, as PyTorch builds it) and ``LinearCrossEntropyLoss``
(logits from a ``Linear``, then cross entropy).

Both are compositions of existing ops, with PyTorch's submodules made in PyTorch's order, so a
seeded module holds PyTorch's weights and its ``state_dict`` keys are PyTorch's. Which rows go to
which cluster depends on the target's values, as in PyTorch (whose ``nonzero`` reads them too)."""
from __future__ import annotations

import dataclasses
import math
from collections import namedtuple

import numpy as np

from symgrad import dtypes
from symgrad.creation import tensor, zeros
from symgrad.nn import functional as F
from symgrad.nn.containers import ModuleList, Sequential
from symgrad.nn.layers import Linear
from symgrad.nn.loss import _WeightedLoss
from symgrad.nn.module import Module
from symgrad.ops.shape import cat

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Grave et al.'s adaptive softmax: classes below ``cutoffs[0]`` are scored by the head, each
    later range by its own two-layer projection whose log-probabilities add to the head's score of
    that cluster."""

    def __init__(self, in_features: int, n_classes: int, cutoffs, div_value: float = 4.0, head_bias: bool = False,
                 device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted in an increasing "
                             "order, where each value is between 1 and n_classes-1")
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, device=device, dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hidden, bias=False, device=device, dtype=dtype),
                                        Linear(hidden, size, bias=False, device=device, dtype=dtype)))

    def reset_parameters(self) -> None:
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def forward(self, input_, target_):
        _check_asm_shapes(input_, target_)
        batched = target_.dim() > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = target_ if batched else target_.unsqueeze(0)
        labels = np.asarray(target.numpy()).reshape(-1)
        gather = labels.copy()
        pieces, rows = [], []
        edges = [0] + self.cutoffs
        for i, (low, high) in enumerate(zip(edges, edges[1:])):
            chosen = np.flatnonzero((labels >= low) & (labels < high))
            if not chosen.size:
                continue
            rows.append(chosen)
            if i == 0:
                pieces.append(zeros(chosen.size, dtype=input.dtype))
                continue
            logits = self.tail[i - 1](input.index_select(0, tensor(chosen)))
            relative = tensor(labels[chosen] - low).unsqueeze(1)
            pieces.append(F.log_softmax(logits, dim=1).gather(1, relative).squeeze(1))
            gather[chosen] = self.shortlist_size + i - 1
        if sum(r.size for r in rows) != labels.size:
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                               f"[{labels.min()}, {labels.max()}] were found. ")
        head_logprob = F.log_softmax(self.head(input), dim=1)
        picked = head_logprob.gather(1, tensor(gather).reshape(-1, 1)).squeeze(1)
        output = _in_row_order(pieces, rows, labels.size, input.dtype) + picked
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _get_full_log_prob(self, input, head_output):
        head_logprob = F.log_softmax(head_output, dim=1)
        columns = [head_logprob[:, :self.shortlist_size]]
        for i, cluster in enumerate(self.tail):
            cluster_logprob = F.log_softmax(cluster(input), dim=1)
            columns.append(cluster_logprob + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return cat(columns, dim=1)

    def log_prob(self, input):
        return self._get_full_log_prob(input, self.head(input))

    def predict(self, input):
        head_output = self.head(input)
        output = head_output.argmax(dim=1)
        not_in_shortlist = output >= self.shortlist_size
        if not bool(not_in_shortlist.any()):
            return output
        if bool(not_in_shortlist.all()):
            return self._get_full_log_prob(input, head_output).argmax(dim=1)
        log_prob = self._get_full_log_prob(input[not_in_shortlist], head_output[not_in_shortlist])
        output[not_in_shortlist] = log_prob.argmax(dim=1)
        return output


def _check_asm_shapes(input, target):
    if target.dim() == 1:
        if input.size(0) != target.size(0):
            raise RuntimeError("Input and target should have the same size in the batch dimension.")
        if input.dim() != 2:
            raise RuntimeError(f"1D target tensor expects 2D input tensors, but found inputs with size {input.size()}")
    elif target.dim() == 0:
        if input.dim() != 1:
            raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with size {input.size()}")
    else:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")


def _in_row_order(pieces, rows, batch, dtype):
    """The clusters' per-row values, computed cluster by cluster, put back in the batch's order
    (PyTorch's ``index_copy_`` into zeros)."""
    if not pieces:
        return zeros(batch, dtype=dtype)
    order = np.concatenate(rows)
    joined = pieces[0] if len(pieces) == 1 else cat(pieces)
    if np.array_equal(order, np.arange(batch)):
        return joined
    return joined.index_select(0, tensor(np.argsort(order, kind="stable")))


_ACC_DTYPES = {getattr(dtypes, name) for name in ("float16", "bfloat16", "float32", "float64") if hasattr(dtypes, name)}


@dataclasses.dataclass(slots=True, frozen=True)
class LinearCrossEntropyOptions:
    """PyTorch's switch to its chunked ``linear_cross_entropy``, checked as PyTorch checks it.

    symgrad always computes the reference path (the whole graph is compiled by XLA, which decides
    the memory itself): the chunking fields are accepted and change nothing but PyTorch's speed and
    memory; an accumulation dtype other than the input's (which changes the numbers) is refused."""

    allow_retain_graph: bool = False
    batch_chunk_size: int | None = None
    chunking_method: str | None = "auto"
    acc_policy: str = "auto"
    acc_dtype: object = None

    def __post_init__(self):
        if self.acc_policy not in {"auto", "accurate", "balanced", "compact"}:
            raise ValueError(f"invalid acc_policy: {self.acc_policy!r}")
        if self.chunking_method is not None and self.chunking_method != "auto":
            name, sep, factor = self.chunking_method.partition(":")
            if not sep:
                factor = "1"
            if not (name == "aspect_ratio" and factor.isdigit() and int(factor) > 0):
                raise ValueError(f"invalid chunking_method: {self.chunking_method!r}")
        if not (self.batch_chunk_size is None or (isinstance(self.batch_chunk_size, int) and self.batch_chunk_size > 0)):
            raise ValueError(f"batch_chunk_size must be positive int or None, got {self.batch_chunk_size!r}")
        if self.acc_dtype is not None and self.acc_dtype not in _ACC_DTYPES:
            raise ValueError("acc_dtype must be one of {None, torch.float16, torch.bfloat16, torch.float32, "
                             f"torch.float64}}, got {self.acc_dtype!r}. Pass acc_dtype=None to let the op pick "
                             "automatically.")


class LinearCrossEntropyLoss(_WeightedLoss):
    """``cross_entropy(linear(input, W, b), target)`` with ``W`` held flat in ``self.linear`` (as
    PyTorch holds it) and reshaped to ``(num_classes, *out_features, in_features)`` per call."""

    def __init__(self, in_features: int, num_classes: int, *, out_features=(), bias: bool = False, device=None,
                 dtype=None, reduction: str = "mean", weight=None, ignore_index=None, label_smoothing: float = 0.0,
                 options=None):
        if weight is not None and tuple(weight.shape) != (num_classes,):
            raise RuntimeError(f"expected weight shape to be {(num_classes,)}, got {tuple(weight.shape)}")
        if label_smoothing < 0 or label_smoothing > 1.0:
            raise RuntimeError(f"expected label_smoothing to be in range [0, 1], got {label_smoothing}")
        super().__init__(weight=weight, reduction=reduction)
        self.num_classes, self.out_features = num_classes, out_features
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing
        self.linear = Linear(in_features, math.prod(out_features, start=num_classes), bias=bias, device=device,
                             dtype=dtype)
        self.options = options

    def forward(self, input, target):
        linear_weight = self.linear.weight.reshape((self.num_classes, *self.out_features, self.linear.in_features))
        linear_bias = (None if self.linear.bias is None
                       else self.linear.bias.reshape((self.num_classes, *self.out_features)))
        return F.linear_cross_entropy(input, linear_weight, target, linear_bias=linear_bias, weight=self.weight,
                                      reduction=self.reduction, ignore_index=self.ignore_index,
                                      label_smoothing=self.label_smoothing, options=self.options)

    def extra_repr(self) -> str:
        return (f"in_features={self.linear.in_features}, num_classes={self.num_classes}, "
                f"out_features={self.out_features}, bias={self.linear.bias is not None}, reduction={self.reduction}, "
                f"ignore_index={self.ignore_index}, label_smoothing={self.label_smoothing}, options={self.options}")

"""Recurrent layers: ``nn.RNN``, ``nn.LSTM``, ``nn.GRU``, their one-step cells and the two bases.

Each layer is written with ordinary ops the way PyTorch's CPU kernels compute it: the input's share
of the gates (for the first layer, every step's at once: one ``linear`` over the sequence), then a
Python loop over time that adds the hidden state's share and applies the gates (LSTM's i, f, g, o;
GRU's r, z, n).  The graph is recorded unrolled, its gradient is the symbolic one of those ops, and
codegen prints the repeated steps once, as a ``lax.scan`` (codegen.reroll).  Parameters are made,
named and drawn in PyTorch's order, so a seeded layer holds PyTorch's weights and its ``state_dict``
loads into PyTorch's.
"""
from __future__ import annotations

import math
import numbers
import warnings
from functools import partial
from typing import NamedTuple

from symgrad.creation import zeros
from symgrad.nn import functional as F
from symgrad.nn import init
from symgrad.nn.layers import _empty
from symgrad.nn.module import Module
from symgrad.nn.utils.rnn import PackedSequence
from symgrad.ops.shape import cat, stack
from symgrad.tensor import Tensor

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}  # gate blocks stacked in each weight's rows
_NONLINEARITIES = {"tanh": "RNN_TANH", "relu": "RNN_RELU"}  # RNN's and RNNCell's, as modes


class _Weights(NamedTuple):
    """One direction of one layer (or a cell): ``hr`` is LSTM's projection of h (``proj_size``)."""

    ih: Tensor
    hh: Tensor
    b_ih: Tensor | None
    b_hh: Tensor | None
    hr: Tensor | None = None


# ------------------------------------------------------------------ one step
# Each takes the input's share of the gates (``linear(x, W_ih, b_ih)``, computed by the caller) and
# the state as a tuple ((h,), or (h, c) for LSTM), and returns the next state.

def _elman_step(activation, gates_x, state, w):
    (h,) = state
    return (activation(F.linear(h, w.hh, w.b_hh) + gates_x),)


def _lstm_step(gates_x, state, w):
    h, c = state
    i, f, g, o = (F.linear(h, w.hh, w.b_hh) + gates_x).chunk(4, 1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    h = o.sigmoid() * c.tanh()
    return (h if w.hr is None else F.linear(h, w.hr), c)


def _gru_step(gates_x, state, w):
    (h,) = state
    x_r, x_z, x_n = gates_x.chunk(3, 1)
    h_r, h_z, h_n = F.linear(h, w.hh, w.b_hh).chunk(3, 1)
    reset, update = (h_r + x_r).sigmoid(), (h_z + x_z).sigmoid()
    new = (x_n + h_n * reset).tanh()
    return ((h - new) * update + new,)  # (1 - z) * n + z * h, in PyTorch's order of operations


_STEPS = {"RNN_TANH": partial(_elman_step, lambda x: x.tanh()),
          "RNN_RELU": partial(_elman_step, lambda x: x.relu()), "LSTM": _lstm_step, "GRU": _gru_step}


# ------------------------------------------------------------------ one direction over time

def _over_steps(step, gates_x, state, w, reverse: bool):
    """A padded sequence: ``gates_x`` is (T, B, gates) or T steps of (B, gates); returns the T
    outputs (B, H) and the last state."""
    outputs = [None] * len(gates_x)
    for t in reversed(range(len(outputs))) if reverse else range(len(outputs)):
        state = step(gates_x[t], state, w)
        outputs[t] = state[0]
    return outputs, state


def _over_packed_steps(step, gates_x, state, w, batch_sizes: list, reverse: bool):
    """A packed sequence: step ``t`` runs the first ``batch_sizes[t]`` rows of the state.  Forward,
    a sequence that ends leaves its rows as its final state; backward, a sequence joins with its
    rows of the initial state when its last step comes."""
    starts = [sum(batch_sizes[:t]) for t in range(len(batch_sizes))]
    outputs = [None] * len(batch_sizes)
    if reverse:
        initial, running = state, batch_sizes[-1]
        state = tuple(s[:running] for s in initial)
        for t in reversed(range(len(batch_sizes))):
            size = batch_sizes[t]
            if size > running:
                state = tuple(cat([s, s0[running:size]]) for s, s0 in zip(state, initial))
                running = size
            state = step(gates_x[starts[t]:starts[t] + size], state, w)
            outputs[t] = state[0]
        return cat(outputs), state
    finished, running = [], batch_sizes[0]
    for t, size in enumerate(batch_sizes):
        if size < running:
            finished.append(tuple(s[size:running] for s in state))
            state, running = tuple(s[:size] for s in state), size
        state = step(gates_x[starts[t]:starts[t] + size], state, w)
        outputs[t] = state[0]
    finished.append(state)
    return cat(outputs), tuple(cat(parts[::-1]) for parts in zip(*finished))


# ------------------------------------------------------------------ between layers

def _input_gates(layer_input, w):
    """The input's share of the gates: one ``linear`` over a (T, B, I) sequence, as PyTorch computes
    it, or one per step over the steps of the layer below, kept apart.  Stacked, they would cost
    much more compiling: codegen finds no loop in the backward of a layer that reads a stack of the
    layer below, and a long ``no_grad`` forward gets computed piece by piece (about 170 programs
    for a 2-layer LSTM over 40 steps, 5 kept apart)."""
    if isinstance(layer_input, list):
        return [F.linear(x, w.ih, w.b_ih) for x in layer_input]
    return F.linear(layer_input, w.ih, w.b_ih)


def _joined(outputs: list, packed: bool):
    """A layer's output from its directions': per step (padded) or per row (packed), forward first."""
    if len(outputs) == 1:
        return outputs[0]
    return cat(outputs, -1) if packed else [cat(pair, -1) for pair in zip(*outputs)]


def _stacked(steps):
    return stack(steps) if isinstance(steps, list) else steps


# ------------------------------------------------------------------ the layers

def _check_sizes(dropout, num_layers, bias, batch_first, input_size, hidden_size, proj_size) -> None:
    """PyTorch's constructor checks, in its order."""
    if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
        raise ValueError("dropout should be a number in range [0, 1] representing the probability of an element "
                         "being zeroed")
    if dropout > 0 and num_layers == 1:
        warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout expects "
                      f"num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                      stacklevel=4)
    for name, value, kind in (("bias", bias, bool), ("batch_first", batch_first, bool),
                              ("input_size", input_size, int), ("hidden_size", hidden_size, int)):
        if not isinstance(value, kind):
            raise TypeError(f"{name} should be of type {kind.__name__}, got: {type(value).__name__}")
        if kind is int and value <= 0:
            raise ValueError(f"{name} must be greater than zero")
    if num_layers <= 0:
        raise ValueError("num_layers must be greater than zero")
    if proj_size < 0:
        raise ValueError("proj_size should be a positive integer or zero to disable projections")
    if proj_size >= hidden_size:
        raise ValueError("proj_size has to be smaller than hidden_size")


class RNNBase(Module):
    """What RNN, LSTM and GRU share: the parameters of every layer and direction, the checks of an
    input and its hidden state, and the run over layers, directions and steps (``mode`` picks the
    step: 'RNN_TANH', 'RNN_RELU', 'LSTM' or 'GRU')."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None):
        super().__init__()
        _check_sizes(dropout, num_layers, bias, batch_first, input_size, hidden_size, proj_size)
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        gates, state_size = _GATES[mode] * hidden_size, proj_size or hidden_size
        directions = 2 if bidirectional else 1
        self._all_weights = []  # per layer and direction, the names of its parameters (PyTorch's)
        for layer in range(num_layers):
            for direction in range(directions):
                shapes = {"weight_ih": (gates, input_size if layer == 0 else state_size * directions),
                          "weight_hh": (gates, state_size)}
                if bias:
                    shapes.update(bias_ih=(gates,), bias_hh=(gates,))
                if proj_size:
                    shapes["weight_hr"] = (proj_size, hidden_size)
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                for name, shape in shapes.items():
                    setattr(self, name + suffix, _empty(*shape, dtype=dtype, device=device))
                self._all_weights.append([name + suffix for name in shapes])
        self._flat_weights_names = [name for names in self._all_weights for name in names]
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    def flatten_parameters(self) -> None:
        """Nothing to do: PyTorch packs the weights into one buffer for cuDNN, and on the CPU does
        nothing either; code written for the GPU calls it."""

    @property
    def _flat_weights(self) -> list:
        return [getattr(self, name, None) for name in self._flat_weights_names]

    @property
    def all_weights(self) -> list:
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def _weights(self, index: int) -> _Weights:
        """The parameters of layer ``index // directions``, direction ``index % directions``."""
        values = [getattr(self, name) for name in self._all_weights[index]]
        biases = values[2:4] if self.bias else (None, None)
        return _Weights(values[0], values[1], *biases, values[-1] if self.proj_size else None)

    # ------------------------------------------------------------------ PyTorch's checks

    def check_input(self, input: Tensor, batch_sizes) -> None:
        weight_dtype = self._flat_weights[0].dtype
        if input.dtype != weight_dtype:
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype ({weight_dtype}). "
                             f"Convert input: input.to({weight_dtype}), or convert model: model.to({input.dtype})")
        expected = 2 if batch_sizes is not None else 3
        if input.dim() != expected:
            raise RuntimeError(f"input must have {expected} dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.size(-1)}")

    def _batch(self, input: Tensor, batch_sizes) -> int:
        if batch_sizes is not None:
            return int(batch_sizes[0])
        return input.size(0) if self.batch_first else input.size(1)

    def get_expected_hidden_size(self, input: Tensor, batch_sizes) -> tuple:
        directions = 2 if self.bidirectional else 1
        return self.num_layers * directions, self._batch(input, batch_sizes), self.proj_size or self.hidden_size

    def check_hidden_size(self, hx: Tensor, expected_hidden_size: tuple,
                          msg: str = "Expected hidden size {}, got {}") -> None:
        if tuple(hx.size()) != tuple(expected_hidden_size):
            raise RuntimeError(msg.format(tuple(expected_hidden_size), list(hx.size())))

    def check_forward_args(self, input: Tensor, hidden: Tensor, batch_sizes) -> None:
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    # ------------------------------------------------------------------ forward

    def _state(self, hx) -> tuple:
        """The hidden state as the steps take it: (h,), or (h, c) for LSTM."""
        return tuple(hx) if self.mode == "LSTM" else (hx,)

    def _hidden(self, state: tuple):
        return state if self.mode == "LSTM" else state[0]

    def _zero_state(self, dtype, batch: int) -> tuple:
        """The state of one layer and direction when no ``hx`` is given.  Zeros of its own, not rows
        of one stacked ``hx``: codegen then finds the steps' loop in the backward too (it does not
        when the first state is read out of a larger array)."""
        sizes = [self.proj_size or self.hidden_size] + ([self.hidden_size] if self.mode == "LSTM" else [])
        return tuple(zeros(batch, size, dtype=dtype) for size in sizes)

    @staticmethod
    def _check_hidden_dims(state: tuple, batched: bool) -> None:
        wanted = 3 if batched else 2
        if any(s.dim() != wanted for s in state):
            kind = "batched 3-D" if batched else "unbatched 2-D"
            if len(state) == 1:
                raise RuntimeError(f"For {kind} input, hx should also be {wanted}-D but got {state[0].dim()}-D tensor")
            raise RuntimeError(f"For {kind} input, hx and cx should also be {wanted}-D but got "
                               f"({state[0].dim()}-D, {state[1].dim()}-D) tensors")

    def forward(self, input, hx=None):
        """``(output, h_n)`` (LSTM: ``(output, (h_n, c_n))``) for a padded or packed input, batched
        or not, from ``hx`` or from zeros."""
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        if input.dim() not in (2, 3):
            tensor = " tensor" if self.mode.startswith("RNN") else ""
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got {input.dim()}D{tensor} "
                             "instead")
        batched, batch_dim = input.dim() == 3, 0 if self.batch_first else 1
        if not batched:
            input = input.unsqueeze(batch_dim)
        state = None
        if hx is not None:
            state = self._state(hx)
            self._check_hidden_dims(state, batched)
            if not batched:
                state = tuple(s.unsqueeze(1) for s in state)
        self._check(input, state, None)
        steps = input.transpose(0, 1) if self.batch_first else input
        if steps.shape[0] == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        output, state = self._run(steps, state, None)
        output = output.transpose(0, 1) if self.batch_first else output
        if not batched:
            output, state = output.squeeze(batch_dim), tuple(s.squeeze(1) for s in state)
        return output, self._hidden(state)

    def _forward_packed(self, packed: PackedSequence, hx):
        """The packed rows run longest first: ``hx`` (in the batch's own order) is put in theirs and
        the final state back in the batch's."""
        data, sizes, sorted_indices, unsorted_indices = packed
        batch_sizes = [int(n) for n in sizes.tolist()]
        state = None
        if hx is not None:
            state = self._state(hx)
            if sorted_indices is not None:
                state = tuple(s.index_select(1, sorted_indices) for s in state)
        self._check(data, state, batch_sizes)
        output, state = self._run(data, state, batch_sizes)
        if unsorted_indices is not None:
            state = tuple(s.index_select(1, unsorted_indices) for s in state)
        return PackedSequence(output, sizes, sorted_indices, unsorted_indices), self._hidden(state)

    def _check(self, input: Tensor, state: tuple | None, batch_sizes) -> None:
        if state is None:
            self.check_input(input, batch_sizes)
        else:
            self.check_forward_args(input, self._hidden(state), batch_sizes)

    def _run(self, sequence: Tensor, state: tuple | None, batch_sizes):
        """Every layer and direction over ``sequence`` (time-major, or packed data) from ``state``
        (None: zeros); dropout between layers while training.  Returns the last layer's outputs
        and the final states, stacked as ``hx`` is (layer by layer, forward before reverse)."""
        directions, packed = 2 if self.bidirectional else 1, batch_sizes is not None
        step, finals, layer_input = _STEPS[self.mode], [], sequence
        if state is None:
            zero = self._zero_state(sequence.dtype, batch_sizes[0] if packed else sequence.shape[1])
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                index = layer * directions + direction
                w, reverse = self._weights(index), direction == 1
                initial = zero if state is None else tuple(s[index] for s in state)
                if packed:
                    gates_x = F.linear(layer_input, w.ih, w.b_ih)
                    output, final = _over_packed_steps(step, gates_x, initial, w, batch_sizes, reverse)
                else:
                    output, final = _over_steps(step, _input_gates(layer_input, w), initial, w, reverse)
                outputs.append(output)
                finals.append(final)
            layer_input = _joined(outputs, packed)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(_stacked(layer_input), self.dropout)
        return _stacked(layer_input), tuple(stack(parts) for parts in zip(*finals))

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            text += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if self.bias is not True:
            text += f", bias={self.bias}"
        if self.batch_first is not False:
            text += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            text += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            text += f", bidirectional={self.bidirectional}"
        return text


def _refuse_extra_options(layer: str, kwargs: dict) -> None:
    """RNN and GRU take PyTorch's arguments but ``proj_size``, refused with PyTorch's words."""
    if "proj_size" in kwargs:
        raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
    if kwargs:
        raise TypeError(f"{layer}.__init__() got an unexpected keyword argument '{next(iter(kwargs))}'")


class RNN(RNNBase):
    """Elman RNN: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or relu)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None, **kwargs):
        _refuse_extra_options("RNN", kwargs)
        if nonlinearity not in _NONLINEARITIES:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(_NONLINEARITIES[nonlinearity], input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """Long short-term memory; its hidden state is ``(h, c)``, h projected to ``proj_size`` if given."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype)

    def get_expected_cell_size(self, input: Tensor, batch_sizes) -> tuple:
        directions = 2 if self.bidirectional else 1
        return self.num_layers * directions, self._batch(input, batch_sizes), self.hidden_size

    def check_forward_args(self, input: Tensor, hidden: tuple, batch_sizes) -> None:
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden[0], self.get_expected_hidden_size(input, batch_sizes),
                               "Expected hidden[0] size {}, got {}")
        self.check_hidden_size(hidden[1], self.get_expected_cell_size(input, batch_sizes),
                               "Expected hidden[1] size {}, got {}")


class GRU(RNNBase):
    """Gated recurrent unit, gates r, z, n: ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, device=None,
                 dtype=None, **kwargs):
        _refuse_extra_options("GRU", kwargs)
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)


# ------------------------------------------------------------------ the cells

class RNNCellBase(Module):
    """What the cells share: ``weight_ih``, ``weight_hh`` and the biases, drawn as the layers draw
    theirs, and one step with the checks PyTorch's cell kernels make."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        made = dict(dtype=dtype, device=device)
        self.weight_ih = _empty(num_chunks * hidden_size, input_size, **made)
        self.weight_hh = _empty(num_chunks * hidden_size, hidden_size, **made)
        if bias:
            self.bias_ih = _empty(num_chunks * hidden_size, **made)
            self.bias_hh = _empty(num_chunks * hidden_size, **made)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            text += f", bias={self.bias}"
        nonlinearity = getattr(self, "nonlinearity", "tanh")
        if nonlinearity != "tanh":
            text += f", nonlinearity={nonlinearity}"
        return text

    def _step(self, name: str, mode: str, input: Tensor, state, labels: tuple):
        """One step of ``mode`` on ``input`` (B, input_size) or (input_size,) from ``state`` (a tuple,
        or None for zeros); ``labels`` name the state's parts in the errors."""
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        for label, value in zip(labels, state or ()):
            if value.dim() not in (1, 2):
                raise ValueError(f"{name}: Expected {label} to be 1D or 2D, got {value.dim()}D instead")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
        if state is None:
            state = (zeros(input.size(0), self.hidden_size, dtype=input.dtype),) * len(labels)
        elif not batched:
            state = tuple(s.unsqueeze(0) for s in state)
        if input.size(1) != self.weight_ih.size(1):
            raise RuntimeError(f"input has inconsistent input_size: got {input.size(1)} expected "
                               f"{self.weight_ih.size(1)}")
        for number, s in enumerate(state):
            if s.size(0) != input.size(0):
                raise RuntimeError(f"Input batch size {input.size(0)} doesn't match hidden{number} batch size "
                                   f"{s.size(0)}")
            if s.size(1) != self.weight_hh.size(1):
                raise RuntimeError(f"hidden{number} has inconsistent hidden_size: got {s.size(1)}, expected "
                                   f"{self.weight_hh.size(1)}")
        w = _Weights(self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        state = _STEPS[mode](F.linear(input, w.ih, w.b_ih), state, w)
        return state if batched else tuple(s.squeeze(0) for s in state)


class RNNCell(RNNCellBase):
    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        if self.nonlinearity not in _NONLINEARITIES:
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        mode = _NONLINEARITIES[self.nonlinearity]
        return self._step("RNNCell", mode, input, None if hx is None else (hx,), ("hidden",))[0]


class LSTMCell(RNNCellBase):
    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: tuple | None = None) -> tuple:
        return self._step("LSTMCell", "LSTM", input, None if hx is None else tuple(hx), ("hx[0]", "hx[1]"))


class GRUCell(RNNCellBase):
    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        return self._step("GRUCell", "GRU", input, None if hx is None else (hx,), ("hidden",))[0]

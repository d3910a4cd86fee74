"""``torch.optim.Optimizer``: parameter groups, per-parameter state, ``zero_grad`` and
``state_dict``, with PyTorch's checks and layout (state keyed by parameter, saved by index).

Every update an optimizer makes is in-place arithmetic under ``no_grad``: nothing is computed
then, and the whole update runs inside the next step's compiled program (symgrad.engine)."""
from __future__ import annotations

import copy
import warnings
from collections import defaultdict

import numpy as np

from symgrad import dtypes
from symgrad.grad_mode import _state as _grad_state
from symgrad.grad_mode import enable_grad, no_grad
from symgrad.inplace import replayed_write, write_result, write_traced, write_values
from symgrad.nodes import constant, lazy_leaf, leaf
from symgrad.tensor import Tensor, as_node, record


class Optimizer:
    def __init__(self, params, defaults: dict):
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got {type(params).__name__}")
        self.defaults = defaults
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list = []
        self._step_counts: dict = {}  # (parameter, key) -> a state number as Python's, and its node (``_advance``)
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        for group in groups if isinstance(groups[0], dict) else [{"params": groups}]:
            self.add_param_group(group)

    def add_param_group(self, group: dict) -> None:
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        if len({id(p) for p in params}) != len(params):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, this will "
                          "cause an error; see github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append({**self.defaults, **group, "params": params})

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none:
                    p.grad = None
                elif p.grad is not None:
                    p.grad.zero_()

    def state_dict(self) -> dict:
        """``{'state': {index: {...}}, 'param_groups': [{..., 'params': [indices]}]}``, as PyTorch."""
        index, groups = {}, []
        for group in self.param_groups:
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            groups.append({**{k: v for k, v in group.items() if k != "params"},
                           "params": [index[id(p)] for p in group["params"]]})
        state = {index[id(p)]: dict(s) for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(o["params"]) for g, o in zip(groups, self.param_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        params = {i: p for g, o in zip(groups, self.param_groups) for i, p in zip(g["params"], o["params"])}
        self.state, self._step_counts = defaultdict(dict), {}
        for i, saved in state_dict["state"].items():
            p = params[i]
            self.state[p] = {k: _to_parameter(k, v, p) for k, v in saved.items()}
        for group, saved in zip(self.param_groups, groups):
            group.update({k: copy.deepcopy(v) for k, v in saved.items() if k != "params"})

    def _start_count(self, p, key: str = "step", value=0) -> None:
        """``state[p][key]`` (the step, 0), a 0-d tensor of the default dtype (PyTorch's), made as a
        constant that is computed only if read: a JAX array costs ~80 µs, and the first step
        replaces it."""
        tensor = self.state[p][key] = Tensor(lazy_leaf(constant(float(value), (), dtypes.get_default_dtype())))
        self._step_counts[(p, key)] = (value, tensor._node)

    def _next_step(self, p) -> int:
        """Counts a step in ``state[p]['step']`` (a float32 0-d tensor, as PyTorch keeps it) and
        returns it as the Python number PyTorch's update reads, without waiting for the tensor.

        The tensor takes the count as a NumPy array: an ``add_(1)`` would be a result that no
        training step uses, computed by a program of its own per parameter and step
        (symgrad.nodes.outlived), and a constant node per count filled the constants' cache."""
        return self._advance(p, "step", lambda count: int(count) + 1)

    def _advance(self, p, key: str, change):
        """``state[p][key]``, a 0-d tensor that PyTorch's update reads as a Python number (the step
        count, NAdam's momentum product), becomes ``change(its number)``, which is returned: read
        from the tensor only if it was written since (by hand, or loaded)."""
        tensor = self.state[p][key]
        known = self._step_counts.get((p, key))  # (the number, the node it was written as)
        value = change(known[0] if known is not None and known[1] is tensor._node else tensor.item())
        changes = _grad_state.changes
        write_values(tensor, per_step(value, tensor.dtype)._node)  # (the values, made once for a step's parameters)
        _grad_state.changes = changes  # the number is no operand of the step: a replayed trace need not see it
        self._step_counts[(p, key)] = (value, tensor._node)
        return value

    def step(self, closure=None):
        raise NotImplementedError(f"{type(self).__name__} does not implement step()")

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {key}: {group[key]}" for key in sorted(group) if key != "params"]
        return "\n".join(lines) + "\n)"


class PerParameter(Optimizer):
    """An optimizer whose step is ``_update(p, group, grad)`` for each parameter that has a gradient
    (negated when the group maximizes), as PyTorch's single-tensor loops."""

    @no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            maximize = group["maximize"]
            for p in group["params"]:
                grad = p._grad  # a parameter is a leaf: .grad's check for non-leaves is not needed
                if grad is not None:
                    self._update(p, group, -grad if maximize else grad)
        return loss


_WORDING = {"lr": "Invalid learning rate: {}", "eps": "Invalid epsilon value: {}",
            "weight_decay": "Invalid weight_decay value: {}", "momentum": "Invalid momentum value: {}",
            "alpha": "Invalid alpha value: {}", "lr_decay": "Invalid lr_decay value: {}",
            "initial_accumulator_value": "Invalid initial_accumulator_value value: {}"}


def at_least_zero(**values) -> None:
    """PyTorch's ValueError for a negative hyperparameter, in its words."""
    for name, value in values.items():
        if not value >= 0.0:
            raise ValueError(_WORDING[name].format(value))


def update(tensor: Tensor, op, *inputs) -> None:
    """``tensor`` takes ``op`` of ``inputs`` (tensors or numbers), without history: an in-place
    update recorded with no Tensor made in between and none of the checks that an optimizer's own
    buffers pass by construction (a few per parameter and step: W6 records 18 a step).  A thread
    replaying its step (symgrad.replaying) checks the op and the write against the step's trace."""
    cycle = _grad_state.cycle
    if cycle is not None and cycle.replaying:
        if cycle.update(op, tensor, inputs):
            return
        result = cycle.op(op, inputs, ())
        if result is not None:
            if not replayed_write(cycle, tensor, result):  # fell back: the usual path writes it
                write_result(tensor, result)
            return
    cycle = _grad_state.cycle  # (a replaying one fell back at the op)
    nodes = tuple([as_node(v) for v in inputs])
    node = record(op, nodes)
    if cycle is not None:
        cycle.recorded(op, inputs, nodes, (), node)
    if node.dtype is not tensor.dtype:  # (a state buffer of another dtype than the parameter's)
        write_result(tensor, Tensor(node))
    else:
        write_traced(tensor, node, cycle)


def zeros_like(p: Tensor) -> Tensor:
    """A state buffer of zeros, never made as an array: the first update fills it inside its
    compiled program (twelve host arrays copied in cost W6 ~1.4 ms per model)."""
    return Tensor(lazy_leaf(constant(0.0, p._node.shape, p._node.dtype)))


_per_step: dict = {}  # (number, dtype) -> its 0-d tensor, shared by the parameters of a step


def per_step(value: float, dtype) -> Tensor:
    """A number that changes every step (a bias correction) as a 0-d tensor of ``dtype``, the
    dtype PyTorch's kernel casts it to.  As a Python number it would be part of the recorded
    structure, so every step would record new kinds and walk its graph again; as a tensor it is
    one more input of the same compiled program, shared by the parameters.

    It holds a NumPy array: the compiled call takes it for ~2 µs, where making a JAX array costs
    ~20-40 µs, and waits behind the program running, on this 2-core host."""
    key = (value, dtype)
    tensor = _per_step.pop(key, None)  # put back last: the least recently used go first
    if tensor is None:
        if len(_per_step) >= 64:  # (emptied at once, a step's parameters got two tensors of one number)
            del _per_step[next(iter(_per_step))]
        array = np.asarray(value, dtype=dtype.numpy)
        array.flags.writeable = False
        tensor = Tensor(leaf(array, dtype))
    _per_step[key] = tensor
    return tensor


def _to_parameter(key: str, value, param: Tensor):
    """A saved state tensor as PyTorch loads it: the tensor itself, cast to a floating parameter's
    dtype only if it differs (``step`` stays as saved).  Not a copy: later steps update it in place,
    in the dict it was loaded from too, and loading that dict again takes it as it has become."""
    if isinstance(value, Tensor) and key != "step" and param.is_floating_point():
        return value.to(param.dtype)
    return value

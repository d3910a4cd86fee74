"""``torch.nn.Module`` and ``torch.nn.Parameter``: the bookkeeping of a model, PyTorch's way.

A module owns parameters, buffers and submodules, registered by attribute assignment in the
order they are set; everything PyTorch code walks (``parameters``, ``state_dict``, ``repr``)
follows that order.  Calling a module records the ops of its ``forward`` like any other code:
there is nothing symbolic here, the graph is the ops'.
"""
from __future__ import annotations

from collections import OrderedDict, namedtuple

from symgrad import dtypes
from symgrad.creation import zeros
from symgrad.grad_mode import no_grad
from symgrad.inplace import copy_
from symgrad.nn.backward_hooks import BackwardHook
from symgrad.tensor import Tensor, _relabel


class Parameter(Tensor):
    """A leaf tensor that a Module registers as a parameter; requires grad by default."""

    __slots__ = ()

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            data = zeros(0)
        super().__init__(_relabel(data.detach()._node, requires_grad))

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __deepcopy__(self, memo):
        copied = memo[id(self)] = Parameter(super().__deepcopy__({}), self.requires_grad)
        return copied

    def __reduce__(self):
        data, args = super().__reduce__()
        return _unpickled_parameter, (data, args)


def _unpickled_parameter(data, args):
    tensor = data(*args)
    return Parameter(tensor, tensor.requires_grad)


class RemovableHandle:
    """What ``register_forward_hook`` and its kin return: ``remove()`` takes the hook out again."""

    _next_id = 0

    def __init__(self, hooks: dict):
        self._hooks, self.id = hooks, RemovableHandle._next_id
        RemovableHandle._next_id += 1

    def remove(self) -> None:
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


_global_backward_hooks: OrderedDict = OrderedDict()  # torch.nn.modules.module's hooks on every module
_global_backward_pre_hooks: OrderedDict = OrderedDict()


def register_module_full_backward_hook(hook) -> RemovableHandle:
    """A full backward hook on every module, run before each module's own."""
    return _registered(_global_backward_hooks, hook, False)


def register_module_full_backward_pre_hook(hook) -> RemovableHandle:
    """A backward pre-hook on every module, run before each module's own."""
    return _registered(_global_backward_pre_hooks, hook, False)


class _IncompatibleKeys(namedtuple("_IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """``load_state_dict``'s result, printed as PyTorch prints it."""

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class Module:
    """Base class of every layer and model: register parts by assigning them as attributes."""

    _version = 1  # of its state_dict's layout, saved in the dict's ``_metadata`` as PyTorch saves it

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() takes no arguments")
        for name, value in (("training", True), ("_parameters", OrderedDict()), ("_buffers", OrderedDict()),
                            ("_non_persistent", set()), ("_modules", OrderedDict()),
                            ("_forward_pre_hooks", OrderedDict()), ("_forward_hooks", OrderedDict()),
                            ("_backward_pre_hooks", OrderedDict()), ("_backward_hooks", OrderedDict())):
            object.__setattr__(self, name, value)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        if not (self._forward_pre_hooks or self._forward_hooks or self._backward_hooks or self._backward_pre_hooks
                or _global_backward_hooks or _global_backward_pre_hooks):  # (a model's every call: no lists made)
            return self.forward(*args, **kwargs)
        full = [*_global_backward_hooks.values(), *self._backward_hooks.values()]
        pre = [*_global_backward_pre_hooks.values(), *self._backward_pre_hooks.values()]
        for hook in list(self._forward_pre_hooks.values()):
            changed = hook(self, args)
            if changed is not None:
                args = changed if isinstance(changed, tuple) else (changed,)
        backward_hook = BackwardHook(self, full, pre) if full or pre else None
        if backward_hook is not None:  # the arguments' gradients pass a hook (symgrad.nn.backward_hooks)
            args = backward_hook.wrap_inputs(args)
        result = self.forward(*args, **kwargs)
        for hook in list(self._forward_hooks.values()):
            changed = hook(self, args, result)
            if changed is not None:
                result = changed
        return result if backward_hook is None else backward_hook.wrap_outputs(result)

    # ------------------------------------------------------------------ registration

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign to a module before Module.__init__() call")
        parameters, buffers, modules = self._parameters, self._buffers, self._modules
        if isinstance(value, Parameter):
            _forget(name, self.__dict__, buffers, modules)
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            _forget(name, self.__dict__, parameters, buffers)
            modules[name] = value
        elif name in parameters or name in modules:
            if value is not None:
                kind = "parameter" if name in parameters else "child module"
                expected = "torch.nn.Parameter" if name in parameters else "torch.nn.Module"
                raise TypeError(f"cannot assign '{type(value).__name__}' as {kind} '{name}' ({expected} or None expected)")
            (parameters if name in parameters else modules)[name] = None
        elif name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(torch.Tensor or None expected)")
            buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        tables = self.__dict__  # (spelled out: ``self.weight`` comes here on every forward)
        parameters, buffers, modules = tables.get("_parameters"), tables.get("_buffers"), tables.get("_modules")
        if parameters is not None and name in parameters:
            return parameters[name]
        if buffers is not None and name in buffers:
            return buffers[name]
        if modules is not None and name in modules:
            return modules[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                self._non_persistent.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        _check_name(self, name, "parameter")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            "(torch.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        _check_name(self, name, "buffer")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            "(torch Tensor or None required)")
        self._buffers[name] = tensor
        (self._non_persistent.discard if persistent else self._non_persistent.add)(name)

    def add_module(self, name: str, module: "Module | None") -> None:
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        _check_name(self, name, "module")
        self._modules[name] = module

    register_module = add_module

    def register_forward_pre_hook(self, hook) -> RemovableHandle:
        handle = RemovableHandle(self._forward_pre_hooks)
        self._forward_pre_hooks[handle.id] = hook
        return handle

    def register_forward_hook(self, hook) -> RemovableHandle:
        handle = RemovableHandle(self._forward_hooks)
        self._forward_hooks[handle.id] = hook
        return handle

    def register_full_backward_hook(self, hook, prepend: bool = False) -> RemovableHandle:
        """``hook(module, grad_input, grad_output)`` runs once the gradients w.r.t. the module's
        positional tensor arguments are computed; a tuple it returns replaces ``grad_input``."""
        return _registered(self._backward_hooks, hook, prepend)

    def register_full_backward_pre_hook(self, hook, prepend: bool = False) -> RemovableHandle:
        """``hook(module, grad_output)`` runs once the gradients w.r.t. the module's results are
        computed; a tuple it returns replaces ``grad_output``."""
        return _registered(self._backward_pre_hooks, hook, prepend)

    # ------------------------------------------------------------------ walking

    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
        memo = set() if memo is None else memo
        if remove_duplicate:
            if self in memo:
                return
            memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                yield from module.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self):
        for _, module in self.named_modules():
            yield module

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and module not in seen:
                seen.add(module)
                yield name, module

    def children(self):
        for _, module in self.named_children():
            yield module

    def _named_members(self, table: str, prefix: str, recurse: bool, remove_duplicate: bool = True):
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in getattr(module, table).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield module_prefix + ("." if module_prefix else "") + name, value

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True):
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True):
        for _, buffer in self.named_buffers(recurse=recurse):
            yield buffer

    def apply(self, fn) -> "Module":
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------------ modes and state

    def train(self, mode: bool = True) -> "Module":
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for module in self.modules():
            object.__setattr__(module, "training", mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for param in self.parameters():
            if set_to_none:
                param.grad = None
            elif param.grad is not None:
                param.grad.zero_()

    def state_dict(self, destination=None, prefix: str = "", keep_vars: bool = False):
        """Parameters and persistent buffers by dotted name, detached unless ``keep_vars``; each
        module's layout version in the dict's ``_metadata``, as PyTorch's."""
        destination = OrderedDict() if destination is None else destination
        if getattr(destination, "_metadata", None) is None:
            destination._metadata = OrderedDict()
        for module_prefix, module in self.named_modules(prefix=prefix.rstrip(".")):
            destination._metadata[module_prefix] = {"version": module._version}
            module._save_to_state_dict(destination, module_prefix + "." if module_prefix else "", keep_vars)
        return destination

    def _save_to_state_dict(self, destination, prefix: str, keep_vars: bool) -> None:
        """This module's own parameters and persistent buffers into ``destination`` (PyTorch's hook
        for a module that saves its state otherwise, as a lazy module does)."""
        for name, value in self._parameters.items():
            if value is not None:
                destination[prefix + name] = value if keep_vars else value.detach()
        for name, value in self._buffers.items():
            if value is not None and name not in self._non_persistent:
                destination[prefix + name] = value if keep_vars else value.detach()

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copy values in by name.  Every check runs before anything is copied, so a refused
        dict leaves the module as it was (PyTorch's errors, all listed at once)."""
        for name, module in self.named_modules():
            module._prepare_to_load(state_dict, name + "." if name else "")
        own = self.state_dict(keep_vars=True)
        versions = getattr(state_dict, "_metadata", None) or {}
        older = {key for name, module in self.named_modules()
                 for key in module._missing_from_older_layout(name + "." if name else "",
                                                             versions.get(name, {}).get("version"))}
        missing = [k for k in own if k not in state_dict and k not in older]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        if strict:
            if missing:
                errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
            if unexpected:
                errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
        for key, target in own.items():
            if key in state_dict:
                source = state_dict[key]
                if not isinstance(source, Tensor):
                    errors.append(f'While copying the parameter named "{key}", expected torch.Tensor or Tensor-like '
                                  f"object from checkpoint but received {type(source)}")
                elif tuple(source.shape) != tuple(target.shape):
                    errors.append(f"size mismatch for {key}: copying a param with shape {source.shape} from "
                                  f"checkpoint, the shape in current model is {target.shape}.")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        with no_grad():
            for key, target in own.items():
                if key in state_dict:
                    _load_one(self, key, target, state_dict[key], assign)
        return _IncompatibleKeys(missing, unexpected)

    def _prepare_to_load(self, state_dict, prefix: str) -> None:
        """What this module does before ``state_dict`` is loaded (PyTorch's load pre-hook): nothing,
        unless it is lazy (it then takes the dict's shapes)."""

    def _missing_from_older_layout(self, prefix: str, version) -> tuple:
        """Keys a state_dict of an older layout ``version`` (None: a dict without ``_metadata``)
        lacks, which ``load_state_dict`` leaves as they are instead of calling them missing."""
        return ()

    def to(self, *args, **kwargs) -> "Module":
        """Moves and casts parameters and buffers in place, as PyTorch (``.to(dtype)``, ``.to(device)``)."""
        dtype = kwargs.get("dtype") or next((a for a in args if isinstance(a, dtypes.dtype)), None)
        device = kwargs.get("device") or next((a for a in args if not isinstance(a, dtypes.dtype)), None)
        if device is not None and str(device).split(":")[0] != "cpu":
            raise RuntimeError(f"symgrad runs on the CPU; device {device!r} is not available")
        if dtype is not None:
            self._cast(lambda t: t.is_floating_point(), dtype)
        return self

    def float(self) -> "Module":
        return self._cast(lambda t: t.is_floating_point(), dtypes.float32)

    def double(self) -> "Module":
        return self._cast(lambda t: t.is_floating_point(), dtypes.float64)

    def cpu(self) -> "Module":
        return self

    def _cast(self, which, dtype) -> "Module":
        """As PyTorch's ``_apply``: a parameter (and its ``.grad``) keeps its object and takes the cast
        values as its ``.data`` (an optimizer made before goes on updating it); a buffer is replaced."""
        for module in self.modules():
            for value in module._parameters.values():
                if value is not None and which(value) and value.dtype is not dtype:
                    value.data = value.detach().to(dtype)
                    if value.grad is not None:
                        value.grad.data = value.grad.to(dtype)
            for name, value in module._buffers.items():
                if value is not None and which(value) and value.dtype is not dtype:
                    module._buffers[name] = value.to(dtype)
        return self

    # ------------------------------------------------------------------ printing

    def extra_repr(self) -> str:
        return ""

    def __repr__(self):
        """PyTorch's layout: a one-line ``extra_repr`` of a module without children inline, else one
        line each (``extra_repr``'s lines, then the children's), indented."""
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): " + indented(repr(module)) for name, module in self._modules.items()]
        if len(extra_lines) == 1 and not child_lines:
            return f"{type(self).__name__}({extra})"
        lines = extra_lines + child_lines
        return f"{type(self).__name__}(" + ("\n  " + "\n  ".join(lines) + "\n" if lines else "") + ")"


def indented(text: str) -> str:
    """A child's printout inside its parent's: every line after the first two spaces in, a blank
    line left empty (PyTorch's)."""
    first, *rest = text.split("\n")
    return "\n".join([first] + ["  " + line if line.strip() else "" for line in rest])


def _registered(table: OrderedDict, hook, prepend: bool) -> RemovableHandle:
    handle = RemovableHandle(table)
    table[handle.id] = hook
    if prepend:
        table.move_to_end(handle.id, last=False)
    return handle


def _forget(name: str, *tables) -> None:
    for table in tables:
        table.pop(name, None)


def _check_name(module: Module, name: str, kind: str) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain "."')
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')
    if hasattr(type(module), name) or (name in module.__dict__ and kind != "module"):
        raise KeyError(f"attribute '{name}' already exists")


def _load_one(model: Module, key: str, target: Tensor, source: Tensor, assign: bool) -> None:
    if assign:
        owner = model
        *path, name = key.split(".")
        for part in path:
            owner = owner._modules[part]
        table = owner._parameters if name in owner._parameters else owner._buffers
        table[name] = Parameter(source, target.requires_grad) if isinstance(target, Parameter) else source
    else:
        copy_(target, source)

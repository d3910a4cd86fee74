"""Grad mode: a thread-local flag, switched by context managers that also decorate."""
from __future__ import annotations

import contextlib
import functools
import inspect
import threading

class _State(threading.local):
    """A thread's grad state.  ``__init__`` runs in each thread at its first use, so the thread's
    ``__dict__`` holds every attribute: what runs on every op or step reads it there (``apply``,
    ``no_grad``, symgrad.replaying), a dict read costing a fifth of a thread-local one."""

    def __init__(self):
        self.enabled = True  # each thread starts with grad mode on
        self.inference = False  # inside inference_mode: new tensors are inference tensors
        self.cycle = None  # the step this thread records or replays (symgrad.cycles), once it has run a backward
        self.changes = 0  # nodes recorded and tensors rebound in this thread: symgrad.cycles sees what it did not trace


inference_active = [0]  # inference_mode blocks open in any thread: while 0, new tensors need not ask


_state = _State()


def is_grad_enabled() -> bool:
    return _state.enabled


def is_inference_mode_enabled() -> bool:
    return _state.inference


def _set(enabled: bool) -> None:
    _state.enabled = bool(enabled)


class _GradMode(contextlib.ContextDecorator):
    """Sets grad mode on entry and restores the previous mode on exit."""

    enabled = True

    def __new__(cls, *args):
        """``@no_grad`` without parentheses: the class is given the function, as PyTorch allows."""
        if len(args) == 1 and callable(args[0]):
            return cls()(args[0])
        return object.__new__(cls)  # (not ``super()``: ``with no_grad():`` runs once a training step)

    def __enter__(self):  # the thread's dict read and written (``_State``): a training step enters one per step
        state = _state.__dict__
        self._previous, state["enabled"] = state["enabled"], self.enabled
        return self

    def __exit__(self, exc_type, exc, traceback):
        _state.__dict__["enabled"] = self._previous
        return False

    def _recreate_cm(self):  # a fresh instance per decorated call keeps nesting right
        return type(self)()

    def __call__(self, fn):
        if inspect.isgeneratorfunction(fn):
            return _generator_in_mode(fn, self._recreate_cm)
        return super().__call__(fn)


def _generator_in_mode(fn, mode):
    """``fn``, a generator function, with its body in ``mode()`` at every resumption (as PyTorch's
    decorators do), while the caller's code between two ``next`` calls keeps its own mode."""

    @functools.wraps(fn)
    def generator(*args, **kwargs):
        with mode():
            inner = fn(*args, **kwargs)
        resume, value = inner.send, None
        while True:
            try:
                with mode():
                    response = resume(value)
            except StopIteration as stop:
                return stop.value
            try:
                resume, value = inner.send, (yield response)
            except GeneratorExit:
                with mode():
                    inner.close()
                raise
            except BaseException as error:
                resume, value = inner.throw, error
    return generator


class no_grad(_GradMode):
    """Operations inside record no history: results have ``requires_grad=False``."""

    enabled = False


class enable_grad(_GradMode):
    """Turn recording back on inside a ``no_grad`` region."""

    enabled = True


class inference_mode(_GradMode):
    """``no_grad`` whose results are inference tensors (``Tensor.is_inference()``): PyTorch refuses
    to save them for a backward, or to write them in place, outside this mode.  As PyTorch's,
    ``inference_mode(False)`` turns grad mode on and inference mode off."""

    def __new__(cls, mode=True):
        """``inference_mode(mode=False)`` as well as ``@inference_mode`` on a function (PyTorch's test:
        a mode that is no bool is the function to decorate)."""
        if isinstance(mode, bool):
            return object.__new__(cls)
        return cls()(mode)

    def __init__(self, mode: bool = True):
        self.mode = bool(mode)

    def __enter__(self):
        self._previous = (_state.enabled, _state.inference)
        _state.enabled, _state.inference = not self.mode, self.mode
        inference_active[0] += 1
        return self

    def __exit__(self, *exc):
        _state.enabled, _state.inference = self._previous
        inference_active[0] -= 1
        return False

    def _recreate_cm(self):
        return inference_mode(self.mode)


class set_grad_enabled(_GradMode):
    """Sets grad mode at once (as a call) or for a block (as a context manager)."""

    def __init__(self, mode: bool):
        self._previous = is_grad_enabled()
        self.mode = bool(mode)
        _set(self.mode)

    def __enter__(self):
        return self

    def __call__(self, fn):
        _set(self._previous)  # as a decorator it acts per call, not when applied
        mode = self.mode

        @functools.wraps(fn)
        def with_mode(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)

        return with_mode

"""The op registry: one entry per PyTorch operation, plain data that tests loop over.

An entry says everything about its op in one place:

* ``infer(nodes, *attrs) -> (shape, dtype)``: PyTorch's shape and dtype rule, run when the
  op is recorded so that a bad call fails at the user's line (raise ValueError with
  PyTorch's wording; the front end adds op, shapes and dtypes and raises RuntimeError);
* ``build(program, node, *exprs) -> expr``: the op's SymPy form, written with IR
  assignments.  Its gradient is never written here: elementwise forms are differentiated by
  SymPy and structural primitives carry their own vector-Jacobian products (symgrad.ir);
* ``grad_fn``: the name of PyTorch's backward node (a string, or a function of the inputs);
* ``saves``: whether PyTorch keeps tensors for the backward (a second backward then fails);
* ``view``: whether its result is a view of its first input (in-place writes show through);
* ``reference``: the same function in ``jax.numpy``; ``torch_fn``: the same call in PyTorch;
  ``examples``: input shapes and attributes the generic tests use; ``domain``: which values
  each input may take ("real", "positive", "nonzero", "unit", "label", and for factorizations
  the well-conditioned matrices "invertible", "spd", "spread");
* ``public``: the op's public functions and the names each goes by (``Names``), added with
  ``op.publish(names)`` on the function; symgrad.namespace puts them in ``symgrad``,
  ``symgrad.nn.functional`` and on ``Tensor``.  An op with no public function is internal.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class Names:
    """Where a public function appears: ``torch.<function>``, ``torch.nn.functional.<functional>``,
    ``Tensor.<method>`` (self first), ``Tensor.<reflected>`` (self second: ``__rpow__``) and
    ``Tensor.<inplace>`` (the result written into self: ``add_``, ``__iadd__``)."""

    function: tuple = ()
    functional: tuple = ()
    method: tuple = ()
    reflected: tuple = ()
    inplace: tuple = ()
    functional_inplace: bool = False  # the functional spellings take PyTorch's inplace=False argument
    plain: bool = False  # the function given two operands alone is ``apply(op, input, other)``: a replayed
    # step checks its in-place spelling's op and write together (symgrad.replaying, ``Replayer.update``)


@dataclass(eq=False, repr=False)
class Op:
    name: str
    grad_fn: str | Callable | None
    infer: Callable
    build: Callable
    saves: bool = True
    reference: Callable | None = None
    torch_fn: Callable | None = None
    examples: tuple = ()
    domain: tuple = ()
    elementwise: bool = False  # its form takes numbers for arrays (constants fold); others need arrays
    view: bool = False  # its result shares its first input's storage (symgrad.storage), as PyTorch's views
    selects: bool = False  # its result's elements are elements of its first input (as a view's are)
    starts: Any = None  # its integer attributes a program may take as inputs (symgrad.ops.moving_starts)
    # its form depends on the values of its Python-number operands (pow's sqrt at 0.5, xlogy's mask):
    # they stay baked into its programs, never inputs that change (symgrad.engine._numbers_of)
    reads_numbers: bool = False
    # it is a create_graph gradient: a backward through it checks what its own backwards kept
    # (symgrad.storage.check_saved)
    keeps_history: bool = False
    public: list = field(default_factory=list)  # (function, Names) pairs
    # its inputs as PyTorch's ``grad_fn.next_functions`` shows them, where its order differs or PyTorch
    # records a node symgrad folds in (``nodes.Folded``); None: the node's inputs as they are
    shown_inputs: Callable | None = None

    def __repr__(self):
        return f"<op {self.name}>"

    def publish(self, names: Names):
        """Decorator: the function is a public spelling of this op, under ``names``."""
        def add(function):
            self.public.append((function, names))
            return function
        return add

    def backward_name(self, nodes, attrs) -> str:
        return self.grad_fn(nodes, *attrs) if callable(self.grad_fn) else self.grad_fn


REGISTRY: dict[str, Op] = {}


def register(op: Op) -> Op:
    if op.name in REGISTRY:
        raise ValueError(f"op {op.name!r} is registered twice")
    REGISTRY[op.name] = op
    return op


@dataclass(frozen=True)
class Example:
    """Shapes of the tensor inputs and the op's attributes, for the generic tests."""

    shapes: tuple
    attrs: tuple = ()
    scalars: dict = field(default_factory=dict)  # input position -> Python number
    up_to_sign: bool = False  # vectors defined up to sign (eigh, svd, qr): tests compare out * out

"""Bit operations on integer and bool tensors: ``bitwise_and/or/xor/not``, the shifts, ``gcd`` and
``lcm``, and the operators ``& | ^ ~ << >>`` (reflected and in place).

Operands promote as in any elementwise op (a bool tensor with an integer gives the integer; ``&`` of
two bools is logical); a float result is refused as PyTorch's CPU kernels refuse it, naming the
kernel and the dtype, and so are bool shifts, gcd and lcm.  The values are integers: no gradient.
"""
from __future__ import annotations

import jax.numpy as jnp

from symgrad import dtypes
from symgrad.ir import bitwise as B
from symgrad.ops.elementwise import elementwise, infer_elementwise
from symgrad.ops.functions import _tensors_only
from symgrad.ops.registry import Example, Names, Op, register
from symgrad.tensor import Tensor, apply, as_node

INTEGERS = (Example(((3, 4), (3, 4))), Example(((3, 4), (4,))))


def _refuse(kernel: str, *categories):
    """PyTorch's refusal where the promoted dtype is of ``categories`` (floats always)."""
    def refuse(nodes):
        dtype = infer_elementwise(nodes)[1]
        if dtype.is_floating_point or dtype.category in categories:
            raise NotImplementedError(f'"{kernel}" not implemented for \'{dtypes.torch_name(dtype)}\'')
    return refuse


def _bitwise(name, head, kernel, reference, *refused, domain=("label", "label")):
    return elementwise(name, None, head, saves=False, reference=reference, refuse=_refuse(kernel, *refused),
                       torch_fn=lambda t, *xs: getattr(t, name)(*xs), domain=domain,
                       examples=INTEGERS if len(domain) == 2 else (Example(((3, 4),)),))


BITWISE_AND = _bitwise("bitwise_and", B.bitwise_and, "bitwise_and_cpu", jnp.bitwise_and)
BITWISE_OR = _bitwise("bitwise_or", B.bitwise_or, "bitwise_or_cpu", jnp.bitwise_or)
BITWISE_XOR = _bitwise("bitwise_xor", B.bitwise_xor, "bitwise_xor_cpu", jnp.bitwise_xor)
BITWISE_NOT = _bitwise("bitwise_not", B.bitwise_not, "bitwise_not_cpu", jnp.bitwise_not, domain=("label",))
LEFT_SHIFT = _bitwise("bitwise_left_shift", B.left_shift, "lshift_cpu", jnp.left_shift, dtypes.BOOLEAN)
RIGHT_SHIFT = _bitwise("bitwise_right_shift", B.right_shift, "rshift_cpu", jnp.right_shift, dtypes.BOOLEAN)


def _euclidean(name, head, reference):
    """gcd or lcm: its loop runs on both operands in the result's dtype (promoted before |a|, as PyTorch's)."""
    refuse = _refuse(f"{name}_cpu", dtypes.BOOLEAN)

    def infer(nodes):
        refuse(nodes)
        return infer_elementwise(nodes)

    def build(p, node, a, b):
        return p.assign(head(*(p.astype(x, node.dtype.name) for x in (a, b))), node.shape, node.dtype.name, name)

    return register(Op(name, None, infer, build, saves=False, reference=reference, elementwise=True,
                       torch_fn=lambda t, a, b: getattr(t, name)(a, b), domain=("label", "label"), examples=INTEGERS))


GCD = _euclidean("gcd", B.gcd, jnp.gcd)
LCM = _euclidean("lcm", B.lcm, jnp.lcm)


def _refusing_wider(function):
    """``function`` as an in-place spelling takes it: a result wider than the tensor (``i &= 2.5``)
    is refused before any kernel, as PyTorch's."""
    def in_place(input, other):
        dtype = infer_elementwise((input._node, as_node(other)))[1]
        if dtype.category > input.dtype.category:
            raise RuntimeError(f"result type {dtypes.torch_name(dtype)} can't be cast to the desired output type "
                               f"{dtypes.torch_name(input.dtype)}")
        return function(input, other)
    return in_place


def _binary(op, operator: str):
    """``torch.<op>(input, other)``, ``input <operator> other`` and the reflected and in-place forms."""
    def function(input, other):
        return apply(op, input, other)

    function.__name__ = function.__qualname__ = op.name
    names = Names(function=(op.name,), method=(op.name, f"__{operator}__"), reflected=(f"__r{operator}__",))
    op.publish(names)(function)
    op.publish(Names(inplace=(f"{op.name}_", f"__i{operator}__")))(_refusing_wider(function))
    return function


bitwise_and = _binary(BITWISE_AND, "and")
bitwise_or = _binary(BITWISE_OR, "or")
bitwise_xor = _binary(BITWISE_XOR, "xor")
bitwise_left_shift = _binary(LEFT_SHIFT, "lshift")
bitwise_right_shift = _binary(RIGHT_SHIFT, "rshift")


@BITWISE_NOT.publish(Names(function=("bitwise_not",), method=("bitwise_not",), inplace=("bitwise_not_",)))
def bitwise_not(input):
    return apply(BITWISE_NOT, input)


@BITWISE_NOT.publish(Names(method=("__invert__",)))
def _invert(input):
    """``~tensor``: Python's operator refuses a float tensor before any kernel does."""
    if input.dtype.is_floating_point:
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
    return apply(BITWISE_NOT, input)


def _divisors(op):
    """gcd and lcm take tensors only: PyTorch's TypeError for a number, whose position counts
    from the tensor for the methods."""
    def function(input, other):
        _tensors_only(op.name, input, other)
        return apply(op, input, other)

    def method(name, then):
        def taking(input, other):
            if not isinstance(other, Tensor):
                raise TypeError(f"{name}(): argument 'other' (position 1) must be Tensor, not {type(other).__name__}")
            return then(input, other)
        taking.__name__ = taking.__qualname__ = name
        return taking

    def applied(input, other):
        return apply(op, input, other)

    function.__name__ = function.__qualname__ = op.name
    op.publish(Names(function=(op.name,)))(function)
    op.publish(Names(method=(op.name,)))(method(op.name, applied))
    op.publish(Names(inplace=(f"{op.name}_",)))(method(f"{op.name}_", _refusing_wider(applied)))
    return function


gcd = _divisors(GCD)
lcm = _divisors(LCM)

"""IR heads for integer and boolean bit operations: and, or, xor, not, the two shifts, gcd and lcm.

Their values are integers (or booleans), so they carry no gradient, and a head of numbers is left
for the program to compute in its dtype rather than folded as a float.  XLA's shifts are PyTorch's
CPU kernels' at every amount: a left shift by a negative amount or by the width or more is 0, a
right shift by such an amount fills with the sign.  gcd and lcm are PyTorch's loops (Euclid's on
absolute values, whose remainders shrink even from the most negative integer, which JAX's
``jnp.gcd`` never leaves), run as one ``jax.lax.while_loop``.
"""
from __future__ import annotations

from symgrad.ir.special import Flat


class _Bitwise(Flat):
    @classmethod
    def eval(cls, *args):
        return None  # never folded: an integer computed as a float would lose its bits


def _bitwise(name: str, nargs: int = 2, doc: str = ""):
    """A head that is the array module's function of that name."""
    code = f"{{{name}}}({', '.join('{%s}' % a for a in 'ab'[:nargs])})"
    return type(name, (_Bitwise,), {"code": code, "nargs": nargs, "__doc__": doc})


bitwise_and = _bitwise("bitwise_and")
bitwise_or = _bitwise("bitwise_or")
bitwise_xor = _bitwise("bitwise_xor")
bitwise_not = _bitwise("bitwise_not", 1)
left_shift = _bitwise("left_shift", doc="a << b, 0 where b < 0 or b >= the width.")
right_shift = _bitwise("right_shift", doc="a >> b (arithmetic), the sign where b < 0 or b >= the width.")

# PyTorch's gcd of a and b: a, b = |a|, |b|, then while a != 0: a, b = b % a (C's remainder), a.
_EUCLID = ("jax.lax.while_loop(lambda ab: jnp.any(ab[0] != 0), "
           "lambda ab: [jnp.where(ab[0] != 0, jnp.fmod(ab[1], jnp.where(ab[0] != 0, ab[0], 1)), 0), "
           "jnp.where(ab[0] != 0, ab[0], ab[1])], jnp.broadcast_arrays(jnp.abs({a}), jnp.abs({b})))[1]")


class gcd(_Bitwise):
    """The greatest common divisor, non-negative but for PyTorch's gcd(INT_MIN, 0) = INT_MIN; the
    two arguments of one dtype.  ``sympy.lambdify`` prints the array module's gcd."""

    code = "{gcd}({a}, {b})"
    nargs = 2

    def _jax_source(self, printer):
        a, b = (printer._print(x) for x in self.args)
        return f"({_EUCLID.format(a=a, b=b)})"


class lcm(_Bitwise):
    """PyTorch's |a / gcd(a, b) * b| (wrapping where it overflows), 0 where the gcd is."""

    code = "{lcm}({a}, {b})"
    nargs = 2

    def _jax_source(self, printer):
        a, b = (printer._print(x) for x in self.args)
        divisor = _EUCLID.format(a=a, b=b)
        return f"((lambda g: jnp.where(g == 0, 0, jnp.abs(({a}) // jnp.where(g == 0, 1, g) * ({b}))))({divisor}))"

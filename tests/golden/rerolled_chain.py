import jax
import jax.numpy as jnp


def forward_backward(h):
    sin = jnp.sin(h)
    mul = sin*h
    add = mul + 0.5
    # 11 steps of 3 assignments, printed once and run by jax.lax.scan
    def loop__1(loop__1_carry, loop__1_xs):
        (add,) = loop__1_carry
        sin_1 = jnp.sin(add)
        mul_1 = sin_1*add
        add_1 = mul_1 + 0.5
        return (add_1,), (sin_1, add)
    (add_11,), (sin_1__steps, add__steps) = jax.lax.scan(loop__1, (add,), None, length=11)
    sin_1 = sin_1__steps[0]
    add_9 = add__steps[9]
    sin_10 = sin_1__steps[9]
    add_10 = add__steps[10]
    sin_11 = sin_1__steps[10]
    reducesum = jnp.sum(add_11, axis=(0,), keepdims=False)
    g_add_10_0 = sin_11 + add_10*jnp.cos(add_10)
    g_sin_10_0 = g_add_10_0*add_9
    g_add_9_0 = g_add_10_0*sin_10 + g_sin_10_0*jnp.cos(add_9)
    # 8 steps of 2 assignments, printed once and run by jax.lax.scan
    def loop__2(loop__2_carry, loop__2_xs):
        (g_add_9_0,) = loop__2_carry
        (add_8, sin_9) = loop__2_xs
        g_sin_9_0 = g_add_9_0*add_8
        g_add_8_0 = g_add_9_0*sin_9 + g_sin_9_0*jnp.cos(add_8)
        return (g_add_8_0,), None
    (g_add_1_0,), _ = jax.lax.scan(loop__2, (g_add_9_0,), (jnp.flip(add__steps[1:9], 0), jnp.flip(sin_1__steps[1:9], 0)), length=8)
    g_sin_1_0 = g_add_1_0*add
    g_add = g_add_1_0*sin_1 + g_sin_1_0*jnp.cos(add)
    g_sin = g_add*h
    grad_h = g_add*sin + g_sin*jnp.cos(h)
    # returns: value, h.grad
    return (reducesum, grad_h)

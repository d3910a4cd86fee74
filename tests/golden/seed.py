import jax
import jax.numpy as jnp


def forward_backward(y, b, w, x):
    matmul = jnp.matmul(x, w)
    add = matmul + b
    bce = (1 - y) * add + jax.nn.softplus(-add)
    reducesum = jnp.sum(bce, axis=(0,), keepdims=False)
    bce_mean = reducesum/3
    g_add = (-y + jax.nn.sigmoid(add))/3
    reshape = jnp.reshape(x, (5, 1))
    grad_w = g_add*reshape
    # returns: value, b.grad, w.grad
    return (bce_mean, g_add, grad_w)

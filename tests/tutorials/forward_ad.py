# Directional derivatives with dual tensors (PyTorch's "Forward-mode Automatic Differentiation"
# tutorial): basic usage, Modules with dual attributes and through functional_call, and
# torch.func.jvp.  (``import torch.autograd.forward_ad as fwAD`` and ``import torch.nn as nn``
# spelled as attributes: the test swaps ``import torch`` only.  The custom Function with a
# ``jvp`` staticmethod is left out: symgrad derives tangents from the graph, not from ``jvp``.)
import functools

import torch

fwAD = torch.autograd.forward_ad
nn = torch.nn

primal = torch.randn(10, 10)
tangent = torch.randn(10, 10)


def fn(x, y):
    return x ** 2 + y ** 2


with fwAD.dual_level():
    dual_input = fwAD.make_dual(primal, tangent)
    assert fwAD.unpack_dual(dual_input).tangent is tangent
    dual_input_alt = fwAD.make_dual(primal, tangent.T)
    assert fwAD.unpack_dual(dual_input_alt).tangent is not tangent
    plain_tensor = torch.randn(10, 10)
    dual_output = fn(dual_input, plain_tensor)
    jvp = fwAD.unpack_dual(dual_output).tangent
    print("basic jvp", jvp[0, :4], jvp.sum().item())
assert fwAD.unpack_dual(dual_output).tangent is None

model = nn.Linear(5, 5)
input = torch.randn(16, 5)
params = {name: p for name, p in model.named_parameters()}
tangents = {name: torch.rand_like(p) for name, p in params.items()}

with fwAD.dual_level():
    for name, p in params.items():
        delattr(model, name)
        setattr(model, name, fwAD.make_dual(p, tangents[name]))
    out = model(input)
    jvp = fwAD.unpack_dual(out).tangent
print("module jvp", jvp[0], jvp.sum().item())

model = nn.Linear(5, 5)
dual_params = {}
with fwAD.dual_level():
    for name, p in params.items():
        dual_params[name] = fwAD.make_dual(p, tangents[name])
    out = torch.func.functional_call(model, dual_params, input)
    jvp2 = fwAD.unpack_dual(out).tangent
assert torch.allclose(jvp, jvp2)
print("functional_call agrees", torch.allclose(jvp, jvp2))

primal0, tangent0 = torch.randn(10, 10), torch.randn(10, 10)
primal1, tangent1 = torch.randn(10, 10), torch.randn(10, 10)
primal_out, tangent_out = torch.func.jvp(fn, (primal0, primal1), (tangent0, tangent1))
print("func.jvp", tangent_out[0, :4], tangent_out.sum().item())
y = torch.randn(10, 10)
primal_out, tangent_out = torch.func.jvp(functools.partial(fn, y=y), (primal0,), (tangent0,))
print("func.jvp of a partial", tangent_out[0, :4])

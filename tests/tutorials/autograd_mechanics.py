# The snippets of PyTorch's "Autograd mechanics" note that symgrad runs: what requires grad,
# the grad modes (no_grad, inference_mode, eval), the in-place correctness check, tensor hooks
# and retain_grad.  Left out, as symgrad lacks them: saved tensors (``grad_fn._saved_self``,
# ``_saved_result``, ``_raw_saved_self.register_hooks``), ``autograd.graph.saved_tensors_hooks``
# and hooks on a Node (``grad_fn.register_prehook``/``register_hook``).
import torch

x = torch.randn(5, 5)  # requires_grad=False by default
y = torch.randn(5, 5)  # requires_grad=False by default
z = torch.randn((5, 5), requires_grad=True)
a = x + y
print(a.requires_grad)
b = a + z
print(b.requires_grad)

model = torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.Dropout(0.5))
model.eval()
out = model(torch.ones(2, 5))
print(out.requires_grad, model.training, model[1].training)
with torch.no_grad():
    print(model(torch.ones(2, 5)).requires_grad)
with torch.inference_mode():
    inf = model(torch.ones(2, 5))
print(inf.requires_grad, inf.is_inference())
model.train()
print(model(torch.ones(2, 5)))

# In-place correctness check: sigmoid saves its output, which is then overwritten.
a = torch.randn(3, requires_grad=True)
b = a.sigmoid()
b.mul_(2)
try:
    b.sum().backward()
except RuntimeError as error:
    print("RuntimeError:", str(error).split("\n")[0])

# Backward hooks: on a tensor, and retain_grad.
a = torch.tensor([1., 2., 3.], requires_grad=True)
b = a * 2
b.retain_grad()
b.register_hook(lambda grad: print("tensor hook", grad))
c = b.sin().sum()
c.backward()
print(a.grad, b.grad)

a = torch.tensor([1., 2., 3.], requires_grad=True)
b = a * 3
b.register_hook(lambda grad: grad * 10)
b.sum().backward()
print(a.grad)

# Seed 002: the network with BCE's arguments swapped (the gradient flows through the target),
# shapes, and no_grad.  Notebook cell outputs are printed.
import torch

x = torch.ones(5)
y = torch.zeros(3)

w = torch.randn(5, 3, requires_grad=True)
b = torch.randn(3, requires_grad=True)

print((x, y, w, b))
print((x.shape, y.shape, w.shape, b.shape))

z = torch.matmul(x, w)+b
print((z.shape, z))

loss = torch.nn.functional.binary_cross_entropy_with_logits(y, z)
print(loss)

loss.backward()
print((w.grad, b.grad))

z = torch.matmul(x, w) + b
print((z, z.requires_grad))

with torch.no_grad():
    z = torch.matmul(x, w) + b

print((z, z.requires_grad))

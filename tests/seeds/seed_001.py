# Seed 001: "Automatic differentiation" (gradients of the one-layer network, no_grad, detach).
import torch

x = torch.ones(5)
y = torch.zeros(3)
w = torch.randn(5, 3, requires_grad=True)  #  nn parameters that we want to optimise.
b = torch.randn(3, requires_grad=True) #  nn parameters that we want to optimise.
z = torch.matmul(x, w) + b
loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)

print("Gradient function for z = {}".format(z.grad_fn))
print("Gradient function for loss = {}".format(loss.grad_fn))

loss.backward()
print("dLoss/dw:", w.grad)
print("dLoss/db:", b.grad)

z = torch.matmul(x, w) + b
print(z.requires_grad)

with torch.no_grad():
  z = torch.matmul(x, w) + b
print(z.requires_grad)

z = torch.matmul(x, w) + b
z_det = z.detach()
print(z_det.requires_grad)

# Seed 004: "Autograd" (mean, vector-Jacobian products, and three ways to stop tracking).
import torch

x = torch.randn(4, requires_grad=True)
print(x)

y = x+2
print(y)
print(y.grad_fn)

z = y.mean()
print(z)

z.backward() ## backward propagation
print(x.grad)

x = torch.randn(4, requires_grad=True)
y = x**2
print((y, y.shape))

v = torch.rand(4)
y.backward(v)
print(x.grad)

x = torch.randn((2, 5), requires_grad=True)
print(x)

y = x + 8
print((y, y.shape))

m = torch.rand([2,5])
y.backward(m)
print(x.grad)

a = torch.randn(2, requires_grad=True)
b = torch.randn(2, requires_grad=True)
c = torch.randn(2, requires_grad=True)
print((a, b, c))

a.requires_grad_(False)
print(a)

print(b.detach())

with torch.no_grad():
    c = c+0
print(c)

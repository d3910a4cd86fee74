# Seed 000: "Automatic Differentiation with torch.autograd" (the one-layer network, then
# Jacobian products with retain_graph and grad.zero_()).  Cells in order; outputs printed.
import torch
x = torch.ones(5) # input tensor
y = torch.zeros(3) # exected output
w = torch.randn(5,3,requires_grad=True)
b = torch.randn(3,requires_grad=True)
z = torch.matmul(x,w)+b
loss = torch.nn.functional.binary_cross_entropy_with_logits(z,y)

print('Gradient function for z =', z.grad_fn)
print('Gradient function for loss = ',loss.grad_fn)

z = torch.matmul(x,w)+b
print(z.requires_grad)
with torch.no_grad():
    z = torch.matmul(x,w)+b
print(z.requires_grad)

z = torch.matmul(x,w)+b
z_det = z.detach()
print(z_det.requires_grad)

inp = torch.eye(5, requires_grad=True)
out = (inp+1).pow(2)
out.backward(torch.ones_like(inp),retain_graph=True)
print('First call\n',inp.grad)
out.backward(torch.ones_like(inp),retain_graph=True)
print('\n Secondcall\n',inp.grad)
inp.grad.zero_()
out.backward(torch.ones_like(inp),retain_graph=True)
print('\n Call after zeroing gradients \n',inp.grad)

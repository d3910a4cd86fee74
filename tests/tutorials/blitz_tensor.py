# The tensor page of PyTorch's 60-minute blitz (beginner/blitz/tensor_tutorial, the older
# edition): constructors, new_ones and randn_like, size(), the four spellings of addition
# (operator, torch.add, out=, add_), NumPy-style indexing, view with -1, item(), and the NumPy
# conversions (not their shared memory: symgrad copies).
import numpy as np
import torch

x = torch.zeros(5, 3, dtype=torch.long)
print(x)

x = torch.tensor([5.5, 3])
print(x)

x = x.new_ones(5, 3, dtype=torch.double)      # new_* methods take in sizes
print(x)

x = torch.randn_like(x, dtype=torch.float)    # override dtype!
print(x)                                      # result has the same size

print(x.size())

y = torch.rand(5, 3)
print(x + y)

print(torch.add(x, y))

result = torch.empty(5, 3)
torch.add(x, y, out=result)
print(result)

# adds x to y
y.add_(x)
print(y)

print(x[:, 1])

x = torch.randn(4, 4)
y = x.view(16)
z = x.view(-1, 8)  # the size -1 is inferred from other dimensions
print(x.size(), y.size(), z.size())

x = torch.randn(1)
print(x)
print(x.item())

# The NumPy bridge without its shared-memory half (symgrad copies, docs/api.md).
a = torch.ones(5)
print(a)
b = a.numpy()
print(b)

a = np.ones(5)
b = torch.from_numpy(a)
print(b)

if torch.cuda.is_available():
    device = torch.device("cuda")          # a CUDA device object
    y = torch.ones_like(x, device=device)  # directly create a tensor on GPU
    x = x.to(device)                       # or just use strings ``.to("cuda")``
    z = x + y
    print(z)
    print(z.to("cpu", torch.double))       # ``.to`` can also change dtype together!

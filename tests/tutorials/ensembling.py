# PyTorch's "Model ensembling" tutorial (torch.func): ten SimpleMLPs run on their own minibatches
# and on one shared minibatch, by a loop and by vmap over stack_module_state and
# functional_call on a copy of the model (smaller data; the copy is not moved to 'meta').
# (``from torch.func import ...`` and ``import torch.nn.functional as F`` spelled as attributes.)
import copy

import torch

nn = torch.nn
F = torch.nn.functional
torch.manual_seed(0)


# Here's a simple MLP
class SimpleMLP(nn.Module):
    def __init__(self):
        super(SimpleMLP, self).__init__()
        self.fc1 = nn.Linear(784, 128)
        self.fc2 = nn.Linear(128, 128)
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x):
        x = x.flatten(1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.fc2(x)
        x = F.relu(x)
        x = self.fc3(x)
        return x


device = 'cpu'
num_models = 10

data = torch.randn(12, 64, 1, 28, 28, device=device)
targets = torch.randint(10, (768,), device=device)

models = [SimpleMLP().to(device) for _ in range(num_models)]

minibatches = data[:num_models]
predictions_diff_minibatch_loop = [model(minibatch) for model, minibatch in zip(models, minibatches)]

minibatch = data[0]
predictions2 = [model(minibatch) for model in models]

stack_module_state = torch.func.stack_module_state

params, buffers = stack_module_state(models)

functional_call = torch.func.functional_call

# Construct a "stateless" version of one of the models.  (The tutorial then moves it to the
# 'meta' device, ``base_model = base_model.to('meta')``, which symgrad refuses.)
base_model = copy.deepcopy(models[0])


def fmodel(params, buffers, x):
    return functional_call(base_model, (params, buffers), (x,))


print([p.size(0) for p in params.values()])  # show the leading 'num_models' dimension

assert minibatches.shape == (num_models, 64, 1, 28, 28)  # verify minibatch has leading dimension of size 'num_models'

vmap = torch.vmap

predictions1_vmap = vmap(fmodel)(params, buffers, minibatches)

# verify the ``vmap`` predictions match the
assert torch.allclose(predictions1_vmap, torch.stack(predictions_diff_minibatch_loop), atol=1e-3, rtol=1e-5)

predictions2_vmap = vmap(fmodel, in_dims=(0, 0, None))(params, buffers, minibatch)

assert torch.allclose(predictions2_vmap, torch.stack(predictions2), atol=1e-3, rtol=1e-5)
print(predictions1_vmap.shape, predictions1_vmap[3, :2], predictions2_vmap[7, :2])

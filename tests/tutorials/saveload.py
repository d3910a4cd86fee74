# PyTorch's "Save and Load the Model" page of Learn the Basics in a temporary folder, with a
# small nn.Sequential in place of torchvision's VGG16: the state_dict saved and loaded into a
# new model (weights_only=True), and the whole model pickled and loaded (weights_only=False).
import os
import tempfile

import torch

nn = torch.nn


def make_model():
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 5))


x = torch.randn(2, 3, 8, 8)
with tempfile.TemporaryDirectory() as folder:
    model = make_model()
    print(model(x))
    torch.save(model.state_dict(), os.path.join(folder, "model_weights.pth"))

    model = make_model()  # we do not specify ``weights``, i.e. create untrained model
    print(model(x))
    model.load_state_dict(torch.load(os.path.join(folder, "model_weights.pth"), weights_only=True))
    model.eval()
    print(model(x))

    torch.save(model, os.path.join(folder, "model.pth"))
    model = torch.load(os.path.join(folder, "model.pth"), weights_only=False)
    print(model)
    print(model[0].weight.requires_grad, len(list(model.parameters())))
    print(model(x))
    print(sorted(model.state_dict().keys()))

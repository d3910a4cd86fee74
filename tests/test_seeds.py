"""The seed tutorials, run with ``import symgrad as torch`` and with PyTorch on the same arrays.

Each seed script is run twice: once on symgrad, recording every random draw, and once on
PyTorch with its ``randn``/``rand`` replaying those draws.  The printouts must be the same
text (grad_fn names, ``requires_grad=True``, ``torch.Size``, layout) with the same numbers.
"""
import contextlib
import io
from pathlib import Path

import numpy as np
import pytest

import symgrad
from parity import assert_same_printout

pytestmark = pytest.mark.usefixtures("both_paths")  # each test on the fast and the plain path

SEEDS = sorted((Path(__file__).parent / "seeds").glob("seed_*.py"))


def _run(source: str, module_name: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, module_name, "exec"), {"__name__": "__seed__"})
    return out.getvalue()


def _recording(monkeypatch):
    draws = []
    for name in ("randn", "rand"):
        original = getattr(symgrad, name)

        def record(*size, _original=original, **kwargs):
            t = _original(*size, **kwargs)
            draws.append((np.array(t.detach()), kwargs.get("requires_grad", False)))
            return t

        monkeypatch.setattr(symgrad, name, record)
    return draws


def _replaying(monkeypatch, torch, draws):
    queue = list(draws)

    def replay(*size, **kwargs):
        values, requires_grad = queue.pop(0)
        return torch.tensor(values, requires_grad=kwargs.get("requires_grad", False))

    monkeypatch.setattr(torch, "randn", replay)
    monkeypatch.setattr(torch, "rand", replay)


@pytest.mark.parametrize("seed", SEEDS, ids=lambda p: p.stem)
def test_seed_prints_what_pytorch_prints(seed, monkeypatch, torch):
    source = seed.read_text()
    draws = _recording(monkeypatch)
    ours = _run(source.replace("import torch", "import symgrad as torch"), seed.name)
    _replaying(monkeypatch, torch, draws)
    theirs = _run(source, seed.name)
    assert_same_printout(ours, theirs)


def test_seed_002_printed_values():
    """Seed 002's own printed parameters give its printed loss and (negative zero) gradients."""
    w = symgrad.tensor([[1.4352, -0.1994, -1.6113], [-1.1986, -0.1369, 0.3532], [0.9336, 0.0817, 0.0554],
                        [-1.6064, 0.3219, -1.8778], [0.0423, 0.1048, 0.9700]], requires_grad=True)
    b = symgrad.tensor([-0.1757, 0.6317, 0.8846], requires_grad=True)
    z = symgrad.matmul(symgrad.ones(5), w) + b
    loss = symgrad.nn.functional.binary_cross_entropy_with_logits(symgrad.zeros(3), z)
    assert repr(loss) == "tensor(0.6931, grad_fn=<BinaryCrossEntropyWithLogitsBackward0>)"
    loss.backward()
    assert repr(b.grad) == "tensor([-0., -0., -0.])"
    assert np.all(np.signbit(w.grad.numpy())) and np.all(w.grad.numpy() == 0)

"""Generated source is a product: the programs of the seed network, an MLP and a rerolled chain
are checked in (tests/golden/) so a change to how source reads shows in review, and each golden
program still computes symgrad's gradients.  ``SYMGRAD_UPDATE_GOLDEN=1`` rewrites the files.

Also here: tracebacks into generated code show its lines (codegen.compile registers them)."""
import os
import traceback
from pathlib import Path

import numpy as np
import pytest

import symgrad as torch
from codegen.emit import emit
from symgrad import engine
from symgrad.tracing import BackwardPlan, forward_program, walk_of

GOLDEN = Path(__file__).resolve().parent / "golden"


def _seed():
    torch.manual_seed(0)
    x, y = torch.ones(5), torch.zeros(3)
    w = torch.randn(5, 3, requires_grad=True)
    b = torch.randn(3, requires_grad=True)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(torch.matmul(x, w) + b, y)
    return loss, {"x": x, "y": y, "w": w, "b": b}


def _mlp():
    torch.manual_seed(0)
    x, y = torch.randn(4, 3), torch.randn(4, 2)
    hidden, out = torch.nn.Linear(3, 5), torch.nn.Linear(5, 2)
    loss = torch.nn.functional.mse_loss(out(torch.tanh(hidden(x))), y)
    return loss, {"x": x, "y": y, "W_hidden": hidden.weight, "b_hidden": hidden.bias,
                  "W_out": out.weight, "b_out": out.bias}


def _chain():
    h = torch.tensor([0.5, -0.25], requires_grad=True)
    out = h
    for _ in range(12):
        out = torch.sin(out) * out + 0.5
    return out.sum(), {"h": h}


CASES = {"seed": _seed, "mlp": _mlp, "rerolled_chain": _chain}


@pytest.mark.parametrize("name", CASES)
def test_generated_source_matches_the_golden_file(name):
    loss, names = CASES[name]()
    with engine.building():
        program = BackwardPlan(loss._node, None).program({id(t._node): n for n, t in names.items()})
    source = emit(program, reroll=True)
    path = GOLDEN / f"{name}.py"
    if os.environ.get("SYMGRAD_UPDATE_GOLDEN"):
        path.write_text(source)
    assert source == path.read_text(), f"{path.name} differs: read the diff; SYMGRAD_UPDATE_GOLDEN=1 rewrites it"
    if name == "rerolled_chain":
        assert "jax.lax.scan" in source


@pytest.mark.parametrize("name", CASES)
def test_the_golden_program_computes_symgrads_gradients(name):
    loss, names = CASES[name]()
    namespace = {}
    exec(compile((GOLDEN / f"{name}.py").read_text(), name, "exec"), namespace)
    fn = namespace["forward_backward"]
    arguments = fn.__code__.co_varnames[:fn.__code__.co_argcount]
    value, *grads = fn(*(names[a].detach().numpy() for a in arguments))
    loss.backward()
    assert float(value) == pytest.approx(loss.item(), rel=1e-6)
    wanted = [t for t in names.values() if t.requires_grad]
    assert len(grads) == len(wanted)
    for grad in grads:  # the outputs come in the program's order: match each by its values
        assert any(g.grad.shape == grad.shape and np.allclose(np.asarray(grad), g.grad.numpy(), rtol=1e-5)
                   for g in wanted)


def test_a_traceback_into_generated_code_shows_its_lines():
    x, w = torch.ones(5), torch.ones(5, 3, requires_grad=True)
    walk, positions = walk_of([torch.matmul(x, w)._node], [x._node, w._node], to_leaves=True)
    compiled = engine.compile_program(forward_program(walk, positions, names={id(x._node): "x", id(w._node): "w"}))
    with pytest.raises(TypeError) as error:
        compiled.python_fn(np.ones(4), np.ones((5, 3)))
    text = "".join(traceback.format_exception(error.value))
    assert 'File "<symgrad:forward:' in text and "matmul = jnp.matmul(x, w)" in text

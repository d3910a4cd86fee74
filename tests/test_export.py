"""Export: a compiled gradient lowered, read as SymPy and JAX source, saved, loaded and run (also
without symgrad, on 8 devices, per example), every number against PyTorch's on the same arrays."""
import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import numpy as np
import pytest
import sympy as sp

import symgrad
from symgrad import cli

ROOT = Path(__file__).resolve().parents[1]
F = symgrad.nn.functional
RNG = np.random.default_rng(13)
W = RNG.standard_normal((5, 3)).astype(np.float32)
B = RNG.standard_normal(3).astype(np.float32)
TOL = dict(rtol=2e-5, atol=2e-6)


def seed_loss(w, b, x, y):
    """The seeds' one-layer network (shared/seeds/000), with a batch of inputs."""
    return F.binary_cross_entropy_with_logits(symgrad.matmul(x, w) + b, y)


def batch(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 5)).astype(np.float32), rng.random((n, 3)).astype(np.float32)


def torch_seed(torch, w, b, x, y, loss=None):
    """PyTorch's value and gradients of the seed network (or of ``loss``) on the same arrays."""
    w, b = torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)
    value = (loss or (lambda w, b, x, y: torch.nn.functional.binary_cross_entropy_with_logits(x @ w + b, y)))(
        w, b, torch.tensor(x), torch.tensor(y))
    value.backward()
    return value.item(), w.grad.numpy(), b.grad.numpy()


@pytest.fixture(scope="module")
def lowered():
    g = symgrad.value_and_grad(seed_loss, argnums=(0, 1))
    return g.lower(W, B, symgrad.spec("f32[n,5]"), symgrad.spec("f32[n,3]"))


@pytest.fixture(scope="module")
def saved(lowered, tmp_path_factory):
    return lowered.save(tmp_path_factory.mktemp("export") / "seed")


@pytest.fixture(scope="module")
def loaded(saved):
    return symgrad.load(saved)


def test_gradient_exprs_are_sympy_and_divide_by_the_dimension(lowered):
    exprs = lowered.gradient_exprs
    assert list(exprs) == ["w", "b"]
    n = next(s for s in exprs["b"].free_symbols if s.name == "n")
    assert n.is_integer and n.is_positive  # the mean divides by the batch size, a symbol
    assert sp.latex(exprs["w"]) and "sigmoid" in str(exprs["b"])


def test_source_stands_alone_with_the_users_names(lowered):
    tree = ast.parse(lowered.source)
    imported = {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= {"jax", "jax.numpy", "numpy"}
    assert "def value_and_grad(w, b, x, y):" in lowered.source and "def value(w, b, x, y):" in lowered.source
    assert "n = x.shape[0]" in lowered.source and "# returns: value, grad_w, grad_b" in lowered.source
    assert not re.search(r"\b1000[0-9]\b", lowered.source)  # no stand-in size left: the batch is not baked in
    namespace = {}
    exec(lowered.source, namespace)
    x, y = batch(4)
    value, gw, gb = namespace["value_and_grad"](W, B, x, y)
    np.testing.assert_allclose(gw, lowered.jax_function(W, B, x, y)[1][0], **TOL)


@pytest.mark.parametrize("n", [1, 7, 128])
def test_symbolic_batch_matches_torch(lowered, loaded, torch, n):
    x, y = batch(n, seed=n)
    value, grad_w, grad_b = torch_seed(torch, W, B, x, y)
    for fn in (lowered.jax_function, loaded):
        v, (gw, gb) = fn(W, B, x, y)
        np.testing.assert_allclose(v, value, **TOL)
        np.testing.assert_allclose(gw, grad_w, **TOL)
        np.testing.assert_allclose(gb, grad_b, **TOL)


def test_manifest_names_shapes_digests(saved, lowered):
    manifest = json.loads((saved / "manifest.json").read_text())
    assert [(a["name"], a["shape"], a["dtype"], a["differentiated"]) for a in manifest["arguments"]] == [
        ("w", [5, 3], "float32", True), ("b", [3], "float32", True),
        ("x", ["n", 5], "float32", False), ("y", ["n", 3], "float32", False)]
    assert manifest["symbolic_dims"] == ["n"] and manifest["platforms"] == ["cpu"]
    assert [o["name"] for o in manifest["outputs"]["value_and_grad"]] == ["value", "grad_w", "grad_b"]
    assert manifest["versions"]["jax"] == jax.__version__ and manifest["versions"]["symgrad"]
    assert sorted(manifest["files"]) == ["module.py", "value.jax_export", "value_and_grad.jax_export"]
    assert (saved / "module.py").read_text() == lowered.source
    assert sorted(p.name for p in saved.parent.iterdir()) == ["seed"]  # no temporary directory left


def test_no_grad_runs_the_forward_program_and_detach_costs_nothing(loaded, torch):
    x, y = batch(7)
    value, _, grad_b = torch_seed(torch, W, B, x, y)
    with symgrad.no_grad():
        v, grads = loaded(W, B, x, y)
    assert grads is None
    np.testing.assert_allclose(v, value, **TOL)
    v, (gw, gb) = loaded(W, B, x, y, detach=("w",))
    assert gw is None
    np.testing.assert_allclose(gb, grad_b, **TOL)

    def dots(program, detach=()):
        return len(re.findall(r"\bdot\(", loaded.function(program, detach).lower(W, B, x, y).compile().as_text()))

    # x @ w, then w's gradient x^T g: detaching w leaves only the forward's product, as no_grad does
    assert (dots("value_and_grad"), dots("value_and_grad", ("w",)), dots("value")) == (2, 1, 1)


def test_pytrees_keywords_and_aux(torch, tmp_path):
    def loss(params, x, *, y, scale):
        z = x @ params["w"] + params["layers"][0]
        value = F.binary_cross_entropy_with_logits(z, y) * scale
        return value, {"z": z}

    g = symgrad.value_and_grad(loss, has_aux=True)
    params = {"w": W, "layers": [B]}
    x, y = batch(6)
    scale = np.float32(2.0)
    (value, aux), grads = g(params, x, y=y, scale=scale)
    def doubled(w, b, x, y):
        return 2 * torch.nn.functional.binary_cross_entropy_with_logits(x @ w + b, y)

    expected = torch_seed(torch, W, B, x, y, loss=doubled)
    np.testing.assert_allclose(value, expected[0], **TOL)
    np.testing.assert_allclose(grads["w"], expected[1], **TOL)
    np.testing.assert_allclose(grads["layers"][0], expected[2], **TOL)
    np.testing.assert_allclose(aux["z"], x @ W + B, **TOL)
    c = g.lower(params, symgrad.spec("f32[n,5]"), y=symgrad.spec("f32[n,3]"), scale=scale)
    assert list(c.gradient_exprs) == ["params_layers_0", "params_w"]
    h = symgrad.load(c.save(tmp_path / "tree"))
    (v, aux2), grads2 = h(params, x, y=y, scale=scale)
    np.testing.assert_allclose(v, expected[0], **TOL)
    np.testing.assert_allclose(grads2["layers"][0], expected[2], **TOL)
    np.testing.assert_allclose(aux2["z"], aux["z"], **TOL)


def test_grad_with_aux_returns_grads_and_aux():
    g = symgrad.grad(lambda w: ((w * w).sum(), w.sum()), has_aux=True)
    grads, aux = g(W)
    np.testing.assert_allclose(grads, 2 * W, **TOL)
    np.testing.assert_allclose(aux, W.sum(), rtol=1e-5)


def test_per_example_gradients_by_vmap(torch):
    c = symgrad.value_and_grad(seed_loss, argnums=0).lower(W, B, batch(1)[0][0], batch(1)[1][0])
    x, y = batch(6)
    values, grads = jax.vmap(c.jax_function, in_axes=(None, None, 0, 0))(W, B, x, y)
    for k in range(6):
        value, grad_w, _ = torch_seed(torch, W, B, x[k], y[k])
        np.testing.assert_allclose(values[k], value, **TOL)
        np.testing.assert_allclose(grads[k], grad_w, **TOL)


def test_lowered_for_three_platforms_runs_here(torch, tmp_path):
    g = symgrad.value_and_grad(seed_loss, argnums=(0, 1))
    c = g.lower(W, B, symgrad.spec("f32[n,5]"), symgrad.spec("f32[n,3]"), platforms=("cpu", "cuda", "tpu"))
    h = symgrad.load(c.save(tmp_path / "three"))
    assert h.exported["value_and_grad"].platforms == ("cpu", "cuda", "tpu")
    assert json.loads((tmp_path / "three" / "manifest.json").read_text())["platforms"] == ["cpu", "cuda", "tpu"]
    x, y = batch(7)
    np.testing.assert_allclose(h(W, B, x, y)[1][0], torch_seed(torch, W, B, x, y)[1], **TOL)


def _run(script, env=None, cwd=None):
    result = subprocess.run([sys.executable, *script], capture_output=True, text=True, timeout=120, cwd=cwd,
                            env={**os.environ, **(env or {})})
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_artifact_runs_where_symgrad_cannot_be_imported(saved, torch, tmp_path):
    x, y = batch(7)
    np.savez(tmp_path / "inputs.npz", w=W, b=B, x=x, y=y)
    script = textwrap.dedent(f"""
        import importlib.abc, sys
        class Refuse(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("symgrad", "codegen", "sympy"):
                    raise ImportError("no " + name + " here")
        sys.meta_path.insert(0, Refuse())
        try:
            import symgrad
        except ImportError:
            pass
        else:
            raise SystemExit("symgrad was importable")
        import jax, numpy as np
        jax.config.update("jax_enable_x64", True)
        inputs = np.load("inputs.npz")
        with open({str(saved / "value_and_grad.jax_export")!r}, "rb") as f:
            exported = jax.export.deserialize(bytearray(f.read()))
        value, (gw, gb) = exported.call(*(inputs[k] for k in "wbxy"))
        np.savez("outputs.npz", value=value, gw=gw, gb=gb)
    """)
    _run(["-I", "-c", script], cwd=tmp_path)
    out = np.load(tmp_path / "outputs.npz")
    value, grad_w, grad_b = torch_seed(torch, W, B, x, y)
    np.testing.assert_allclose(out["value"], value, **TOL)
    np.testing.assert_allclose(out["gw"], grad_w, **TOL)
    np.testing.assert_allclose(out["gb"], grad_b, **TOL)


def test_data_parallel_on_eight_devices(saved):
    script = textwrap.dedent(f"""
        import jax, numpy as np
        from jax.sharding import NamedSharding, PartitionSpec as P
        import symgrad
        assert jax.device_count() == 8
        import tests.test_export as t
        c = symgrad.value_and_grad(t.seed_loss, argnums=(0, 1)).lower(
            t.W, t.B, symgrad.spec("f32[n,5]"), symgrad.spec("f32[n,3]"))
        x, y = t.batch(64)
        one = c.jax_function(t.W, t.B, x, y)
        mesh = jax.make_mesh((8,), ("batch",), axis_types=(jax.sharding.AxisType.Auto,))  # XLA partitions
        split, whole = NamedSharding(mesh, P("batch")), NamedSharding(mesh, P())
        xs, ys = jax.device_put(x, split), jax.device_put(y, split)
        w, b = jax.device_put(t.W, whole), jax.device_put(t.B, whole)
        exported = symgrad.load({str(saved)!r}).exported["value_and_grad"]
        for fn in (c.jax_function, exported.call):
            value, (gw, gb) = jax.jit(fn, out_shardings=whole)(w, b, xs, ys)
            assert len(xs.sharding.device_set) == 8 and gw.sharding.is_fully_replicated
            for got, want in ((value, one[0]), (gw, one[1][0]), (gb, one[1][1])):
                np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=2e-6)
        print("ok")
    """)
    assert "ok" in _run(["-c", script], env={"XLA_FLAGS": "--xla_force_host_platform_device_count=8",
                                             "PYTHONPATH": str(ROOT)}, cwd=ROOT)


def test_command_line_writes_the_artifact(tmp_path, capsys, torch):
    source = tmp_path / "model.py"
    source.write_text("import symgrad as torch\n\n\ndef loss_fn(w, b, x, y):\n"
                      "    return torch.nn.functional.binary_cross_entropy_with_logits(x @ w + b, y)\n")
    args = ["export", f"{source}:loss_fn", "--arg", "w=f32[5,3]", "--arg", "b=f32[3]", "--arg", "x=f32[n,5]",
            "--arg", "y=f32[n,3]", "--wrt", "w,b", "-o", str(tmp_path / "out")]
    code = cli.main(args)
    printed = capsys.readouterr().out
    assert code == 0
    assert "inputs w: float32[5,3], b: float32[3], x: float32[n,5], y: float32[n,3]" in printed
    assert "grad_w: float32[5,3]" in printed and re.search(r"gradient: \d+ nodes", printed)
    assert "value_and_grad.jax_export" in printed
    x, y = batch(3)
    v, (gw, gb) = symgrad.load(tmp_path / "out")(W, B, x, y)
    np.testing.assert_allclose(gb, torch_seed(torch, W, B, x, y)[2], **TOL)
    assert cli.main(args) == 2 and "not empty" in capsys.readouterr().err
    assert cli.main(args[:-4] + ["--wrt", "v", "-o", str(tmp_path / "other")]) == 2
    assert "--wrt v: not among the --arg names" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["export", "--help"])
    assert "symbolic dimension" in capsys.readouterr().out


# ------------------------------------------------------------------------------------ bad input


def test_data_dependent_control_flow_is_named():
    def branching(w, x):
        loss = (x @ w).sum()
        if loss > 0:
            return loss
        return -loss

    with pytest.raises(TypeError, match="branching branches on or reads the value"):
        symgrad.value_and_grad(branching).lower(W, batch(2)[0])


def test_non_scalar_value_is_refused():
    def rows(w, x):
        return x @ w

    with pytest.raises(RuntimeError, match=r"only for scalar outputs \(value_and_grad of rows, which returns shape "
                                           r"\(2, 3\)\)"):
        symgrad.value_and_grad(rows)(W, batch(2)[0])


def test_size_used_beyond_shapes_is_refused():
    def counts(w, x):
        return (x @ w).sum() + symgrad.ones(x.shape[0]).sum()

    with pytest.raises(ValueError, match="counts.*size"):
        symgrad.value_and_grad(counts).lower(W, symgrad.spec("f32[n,5]"))


def _copy(saved, tmp_path):
    target = tmp_path / "copy"
    target.mkdir()
    for p in saved.iterdir():
        (target / p.name).write_bytes(p.read_bytes())
    return target


def _set_manifest(target, change):
    manifest = json.loads((target / "manifest.json").read_text())
    change(manifest)
    (target / "manifest.json").write_text(json.dumps(manifest))


def test_truncated_file_fails_its_digest(saved, tmp_path):
    target = _copy(saved, tmp_path)
    data = (target / "value_and_grad.jax_export").read_bytes()
    (target / "value_and_grad.jax_export").write_bytes(data[: len(data) // 2])
    with pytest.raises(RuntimeError, match="value_and_grad.jax_export does not match the sha256"):
        symgrad.load(target)


def test_corrupt_program_with_a_matching_digest_is_named(saved, tmp_path):
    target = _copy(saved, tmp_path)
    garbage = b"\x00" * 64
    (target / "value.jax_export").write_bytes(garbage)
    _set_manifest(target, lambda m: m["files"]["value.jax_export"].update(sha256=hashlib.sha256(garbage).hexdigest()))
    with pytest.raises(RuntimeError, match="value.jax_export could not be deserialized"):
        symgrad.load(target)


def test_newer_format_version_is_refused(saved, tmp_path):
    target = _copy(saved, tmp_path)
    _set_manifest(target, lambda m: m.update(format_version=2))
    with pytest.raises(RuntimeError, match="format version 2, written by a newer symgrad"):
        symgrad.load(target)


def test_wrong_arguments_to_a_loaded_function_are_named(loaded):
    x, y = batch(4)
    with pytest.raises(TypeError, match="seed_loss\\(\\) takes arguments.*w, b, x, y"):
        loaded(W, B, x)
    with pytest.raises(RuntimeError, match="argument 'x' has shape \\(4, 6\\); the export takes float32\\[n,5\\]"):
        loaded(W, B, np.ones((4, 6), np.float32), y)
    with pytest.raises(RuntimeError, match="argument 'y' has shape \\(3, 3\\).*'n': 4"):
        loaded(W, B, x, y[:3])
    with pytest.raises(RuntimeError, match="argument 'w' has dtype float64"):
        loaded(W.astype(np.float64), B, x, y)
    with pytest.raises(ValueError, match="cannot detach \\['x'\\]"):
        loaded(W, B, x, y, detach=("x",))


def test_save_refuses_a_non_empty_directory(lowered, tmp_path):
    target = tmp_path / "full"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="full exists and is not empty"):
        lowered.save(target)
    assert [p.name for p in target.iterdir()] == ["notes.txt"]
    lowered.save(target, overwrite=True)
    assert sorted(p.name for p in target.iterdir()) == ["manifest.json", "module.py", "value.jax_export",
                                                       "value_and_grad.jax_export"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full"]


def test_a_save_that_fails_midway_leaves_nothing(lowered, tmp_path, monkeypatch):
    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(json, "dumps", crash)  # the manifest is written last
    with pytest.raises(OSError, match="disk full"):
        lowered.save(tmp_path / "half")
    assert list(tmp_path.iterdir()) == []


def test_constants_of_the_function_are_written_into_the_module(torch):
    target = np.array([0.0, 1.0, np.nan], np.float32)

    def masked(w, x):
        z = x @ w
        keep = symgrad.isnan(symgrad.tensor(target)).logical_not()
        return F.binary_cross_entropy_with_logits(z[:, keep.numpy()], symgrad.tensor(target[:2]).expand(2, 2)) + \
            symgrad.zeros(3).sum()

    x = batch(2)[0]
    c = symgrad.value_and_grad(masked).lower(W, x)
    assert "CONST = np.array(" in c.source
    namespace = {}
    exec(c.source, namespace)
    value, grad_w = namespace["value_and_grad"](W, x)
    tw = torch.tensor(W, requires_grad=True)
    expected = torch.nn.functional.binary_cross_entropy_with_logits((torch.tensor(x) @ tw)[:, :2],
                                                                    torch.tensor(target[:2]).expand(2, 2))
    expected.backward()
    np.testing.assert_allclose(value, expected.item(), **TOL)
    np.testing.assert_allclose(grad_w, tw.grad.numpy(), **TOL)


def test_slices_and_cross_entropy_over_a_symbolic_batch(torch):
    def loss(w, x, t):
        logits = x[1:] @ w
        return F.cross_entropy(logits, t[1:]) + x[:, 0:2].var()

    c = symgrad.value_and_grad(loss, argnums=(0, 1)).lower(W, symgrad.spec("f32[n,5]"), symgrad.spec("i64[n]"))
    for n in (2, 9):
        x = batch(n, seed=n)[0]
        t = np.arange(n) % 3
        value, (gw, gx) = c.jax_function(W, x, t)
        tw, tx = torch.tensor(W, requires_grad=True), torch.tensor(x, requires_grad=True)
        expected = torch.nn.functional.cross_entropy(tx[1:] @ tw, torch.tensor(t[1:])) + tx[:, 0:2].var()
        expected.backward()
        np.testing.assert_allclose(value, expected.item(), **TOL)
        np.testing.assert_allclose(gw, tw.grad.numpy(), **TOL)
        np.testing.assert_allclose(gx, tx.grad.numpy(), **TOL)


def test_an_exported_module_keeps_a_nan_literal_through_exp(torch):
    """XLA's float32 exp of a NaN it sees while compiling is garbage (codegen.nan_literals): the
    module carries ``nan_kept`` for its programs and for the helpers they call, and gives PyTorch's NaN."""
    def shifted(w, x):
        z = x @ w + float("nan")
        return symgrad.exp(z).sum() + symgrad.logsumexp(z, 0).sum()

    x = batch(4)[0]
    lowered = symgrad.value_and_grad(shifted).lower(W, x)
    namespace = {}
    exec(lowered.source, namespace)
    value, grad = jax.jit(namespace["value_and_grad"])(W, x)
    w = torch.tensor(W, requires_grad=True)
    z = torch.tensor(x) @ w + float("nan")
    (torch.exp(z).sum() + torch.logsumexp(z, 0).sum()).backward()
    assert np.isnan(float(value)) and np.isnan(np.asarray(grad)).all() and np.isnan(w.grad.numpy()).all()

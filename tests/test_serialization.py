"""Copying and saving tensors, against PyTorch on the same inputs (issue 17, "copy and save").

pickle and copy.copy keep values and requires_grad (a result comes back as a leaf, .grad is
dropped); deepcopy copies a leaf with its .grad and refuses a result; symgrad.save writes
PyTorch's zip format, which torch.load reads, and symgrad.load reads torch.save's files,
safely by default.
"""
import copy
import fractions
import io
import os
import pickle
import warnings
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import codegen
import symgrad


def _both(torch, fn):
    return fn(symgrad), fn(torch)


def _described(t) -> dict:
    """What a copy must keep of a tensor, the same for symgrad and PyTorch."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # .grad of a non-leaf
        grad = t.grad
    return {"values": t.detach().numpy().tolist(), "numpy dtype": str(t.detach().numpy().dtype),
            "dtype": str(t.dtype), "shape": tuple(t.shape), "requires_grad": t.requires_grad,
            "is_leaf": t.is_leaf, "has grad_fn": t.grad_fn is not None, "class": type(t).__name__,
            "grad": None if grad is None else grad.numpy().tolist()}


def _assert_same(ours, theirs, rtol=0.0, where=""):
    """The same structure, with tensors described alike and plain values equal; ``rtol`` for
    values that went through float32 arithmetic (exact otherwise)."""
    if hasattr(theirs, "grad_fn"):
        ours, theirs = _described(ours), _described(theirs)
        for key in ("values", "grad"):
            if rtol and theirs[key] is not None and ours[key] is not None:
                np.testing.assert_allclose(ours.pop(key), theirs.pop(key), rtol=rtol, atol=1e-7, err_msg=where)
        assert ours == theirs, where
    elif isinstance(theirs, dict):
        assert type(ours) is type(theirs) and list(ours) == list(theirs), where
        assert getattr(ours, "_metadata", None) == getattr(theirs, "_metadata", None), where
        for key in theirs:
            _assert_same(ours[key], theirs[key], rtol, f"{where}[{key!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs)):
            _assert_same(a, b, rtol, f"{where}[{i}]")
    else:
        assert type(ours) is type(theirs) and ours == theirs, where


def _with_grad(lib):
    x = lib.tensor([0.5, -1.5, 2.0], requires_grad=True)
    (x * x).sum().backward()
    return x


CASES = {
    "leaf requiring grad": lambda lib: lib.tensor([0.5, -1.5], requires_grad=True),
    "result with grad_fn": lambda lib: lib.tensor([0.5, -1.5], requires_grad=True).exp() * 3,
    "leaf whose .grad is set": _with_grad,
    "result without history": lambda lib: lib.tensor([1.0, 2.0]) * 2,
    "int64": lambda lib: lib.tensor([[1, -2], [3, 2 ** 40]]),
    "bool": lambda lib: lib.tensor([True, False, True]),
    "float64": lambda lib: lib.tensor([0.1, 1e-300], dtype=lib.float64),
    "0-d": lambda lib: lib.tensor(2.5, requires_grad=True),
    "empty": lambda lib: lib.zeros(2, 0, 3),
}


def _each_case(torch, operation, cases=tuple(CASES)):
    for case in cases:
        ours, theirs = _both(torch, lambda lib: operation(CASES[case](lib)))
        _assert_same(ours, theirs, where=case)


def test_pickle_keeps_values_and_requires_grad_as_pytorch(torch):
    _each_case(torch, lambda t: pickle.loads(pickle.dumps(t)))


def test_copy_copy_matches_pytorch(torch):
    _each_case(torch, copy.copy)


def test_deepcopy_matches_pytorch(torch):
    _each_case(torch, copy.deepcopy, [case for case in CASES if case != "result with grad_fn"])


def _trained(lib, steps=40):
    """A parameter after a hot loop (its values deferred on the fast path) and a computed tensor,
    with a gradient set by one more backward."""
    w = lib.tensor([0.5, -0.25, 1.0], requires_grad=True)
    for _ in range(steps):
        (lib.sigmoid(w * 3.0) ** 2).sum().backward()
        with lib.no_grad():
            w -= 0.1 * w.grad
        w.grad.zero_()
    (lib.sigmoid(w * 3.0) ** 2).sum().backward()
    return w, lib.tanh(w) * 2


def test_pickle_in_a_hot_loop_as_pytorch(torch, both_paths):
    ours, theirs = _both(torch, lambda lib: pickle.loads(pickle.dumps(_trained(lib))))
    _assert_same(ours, theirs, rtol=1e-5)


def test_a_deepcopied_parameter_trains_like_pytorch_and_the_original_stays(torch, both_paths):
    def run(lib):
        w, _ = _trained(lib)
        before = w.detach().numpy().tolist()
        twin = copy.deepcopy(w)
        assert twin is not w and twin.grad is not w.grad
        copied = _described(twin)
        optimizer = lib.optim.SGD([twin], lr=0.5)
        for _ in range(3):  # the first step adds to the copied .grad
            (lib.sigmoid(twin * 3.0) ** 2).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
        assert w.detach().numpy().tolist() == before
        return copied, twin.detach().numpy(), _described(w)

    (ours_copied, ours_after, ours_original), (theirs_copied, theirs_after, theirs_original) = _both(torch, run)
    assert ours_copied["is_leaf"] and ours_copied["requires_grad"] and ours_copied["grad"] is not None
    np.testing.assert_allclose(ours_copied["values"], theirs_copied["values"], rtol=1e-6)
    np.testing.assert_allclose(ours_copied["grad"], theirs_copied["grad"], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(ours_after, theirs_after, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(ours_original["values"], theirs_original["values"], rtol=1e-6)


def test_deepcopy_of_a_result_with_history_is_refused_as_in_pytorch(torch):
    messages = []
    for lib in (symgrad, torch):
        with pytest.raises(RuntimeError) as error:
            copy.deepcopy(lib.tensor([1.0, 2.0], requires_grad=True) * 2)
        messages.append(str(error.value))
    assert messages[0] == messages[1]


def test_deepcopy_of_a_state_dict_keeps_shared_tensors_shared(torch):
    def run(lib):
        weight = lib.tensor([[1.0, -2.0], [0.5, 4.0]], requires_grad=True)
        state = {"weight": weight, "bias": lib.tensor([0.25, 0.0]), "all": [weight], "step": 7}
        copied = copy.deepcopy(state)
        assert copied["all"][0] is copied["weight"] and copied["weight"] is not weight
        return copied

    ours, theirs = _both(torch, run)
    _assert_same(ours, theirs)


# ------------------------------------------------------------------------------ save / load


def _checkpoint(lib):
    """A state-dict-like checkpoint: every dtype symgrad has, 0-d, empty, a result, shared
    tensors, and plain values in nested containers."""
    weight = lib.tensor([[0.5, -1.0, 2.0], [3.0, 0.25, -0.125]], requires_grad=True)
    return {"weight": weight, "float64": lib.tensor([0.1, -1e-300], dtype=lib.float64),
            "int64": lib.tensor([1, -2, 2 ** 40]), "bool": lib.tensor([True, False]),
            "0-d": lib.tensor(2.5), "empty": lib.zeros(2, 0, 3), "result": weight * 2,
            "nested": [weight, (1, "name", 2.5, None, True, [lib.tensor([7])])],
            "state": OrderedDict(step=3, lr=0.1)}


def test_symgrad_save_loads_in_pytorch(torch, tmp_path):
    symgrad.save(_checkpoint(symgrad), tmp_path / "ours.pt")
    torch.save(_checkpoint(torch), tmp_path / "theirs.pt")
    ours = torch.load(tmp_path / "ours.pt", weights_only=True)
    theirs = torch.load(tmp_path / "theirs.pt", weights_only=True)
    _assert_same(ours, theirs)
    assert ours["nested"][0] is ours["weight"]
    mapped = torch.load(tmp_path / "ours.pt", weights_only=True, mmap=True)  # records aligned as PyTorch's
    assert mapped["weight"].tolist() == theirs["weight"].tolist()


def test_save_in_a_hot_loop_loads_in_pytorch(torch, both_paths, tmp_path):
    def saved(lib):
        lib.save({"trained": _trained(lib)}, tmp_path / f"{lib.__name__}.pt")
        return torch.load(tmp_path / f"{lib.__name__}.pt", weights_only=True)

    ours, theirs = _both(torch, saved)
    _assert_same(ours, theirs, rtol=1e-5)


def test_checkpoints_taken_while_a_loop_replays_load_everywhere(torch, both_paths):
    """A model's and an optimizer's state_dict saved every few steps of a replayed loop (its
    parameters and momentum buffers carried, a tensor the same as the weight saved beside them):
    each file loads with ``weights_only`` in PyTorch and in symgrad, with PyTorch's values (was:
    carried tensors were pickled by reference to symgrad, which weights_only loads refuse)."""
    from symgrad import replaying

    def checkpoints(T):
        T.manual_seed(0)
        model = T.nn.Linear(3, 2)
        optimizer = T.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x = T.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))
        files = []
        for step in range(20):
            optimizer.zero_grad()
            (model(x) ** 2).mean().backward()
            optimizer.step()
            if step % 6 == 5:
                files.append(io.BytesIO())
                T.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "weight": model.weight},
                       files[-1])
        return [file.getvalue() for file in files]

    replayed = replaying.stats.replayed
    ours, theirs = checkpoints(symgrad), checkpoints(torch)
    assert replaying.stats.replayed > replayed or not codegen.speed.fast
    for mine, reference in zip(ours, theirs, strict=True):
        expected = torch.load(io.BytesIO(reference), weights_only=True)
        _assert_same(torch.load(io.BytesIO(mine), weights_only=True), expected, rtol=1e-5)
        _assert_same(symgrad.load(io.BytesIO(mine)), expected, rtol=1e-5)


def _torch_checkpoint(torch):
    """What torch.save writes from PyTorch's own objects: views into a larger storage, strided
    and expanded layouts, parameters, a module's state_dict."""
    torch.manual_seed(0)
    base = torch.arange(24.0).reshape(4, 6)
    return {**_checkpoint(torch), "transposed": base.t(), "strided": base[1:, ::2], "column": base[:, 3],
            "expanded": torch.tensor([1.5, -2.0]).unsqueeze(1).expand(2, 3), "base": base,
            "parameter": torch.nn.Parameter(torch.ones(2, 2)),
            "linear": torch.nn.Linear(3, 2).state_dict(), "int32": torch.tensor([5, -6], dtype=torch.int32),
            "float16": torch.tensor([0.5, 65504.0], dtype=torch.float16)}


def test_pytorch_save_loads_in_symgrad(torch, tmp_path):
    torch.save(_torch_checkpoint(torch), tmp_path / "theirs.pt")
    ours = symgrad.load(tmp_path / "theirs.pt")
    _assert_same(ours, torch.load(tmp_path / "theirs.pt", weights_only=True))
    assert ours["nested"][0] is ours["weight"]


@pytest.mark.parametrize("target", ["str path", "Path", "BytesIO", "open file"])
def test_save_and_load_take_paths_and_files_as_pytorch(torch, tmp_path, target):
    def round_trip(lib):
        path = tmp_path / f"{lib.__name__}.pt"
        if target in ("str path", "Path"):
            where = str(path) if target == "str path" else path
            lib.save(_checkpoint(lib), where)
            return lib.load(where, weights_only=True)
        if target == "BytesIO":
            buffer = io.BytesIO()
            lib.save(_checkpoint(lib), buffer)
            buffer.seek(0)
            return lib.load(buffer)
        with open(path, "wb") as file:
            lib.save(_checkpoint(lib), file)
        with open(path, "rb") as file:
            return lib.load(file, map_location="cpu")

    ours, theirs = _both(torch, round_trip)
    _assert_same(ours, theirs)


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_load_refuses_a_pickle_that_would_run_code_as_pytorch(torch, tmp_path):
    marker = tmp_path / "ran"
    torch.save({"weight": torch.ones(2), "payload": _RunsCode(marker)}, tmp_path / "evil.pt")
    with pytest.raises(pickle.UnpicklingError):
        torch.load(tmp_path / "evil.pt", weights_only=True)
    with pytest.raises(pickle.UnpicklingError) as error:
        symgrad.load(tmp_path / "evil.pt")
    assert f"{os.system.__module__}.system" in str(error.value) and str(tmp_path / "evil.pt") in str(error.value)
    assert not marker.exists()


def test_weights_only_false_builds_other_objects_as_pytorch(torch, tmp_path):
    torch.save({"ratio": fractions.Fraction(1, 3), "t": torch.tensor([1.0])}, tmp_path / "other.pt")
    for lib in (symgrad, torch):
        with pytest.raises(pickle.UnpicklingError):
            lib.load(tmp_path / "other.pt", weights_only=True)
    ours = symgrad.load(tmp_path / "other.pt", weights_only=False)
    theirs = torch.load(tmp_path / "other.pt", weights_only=False)
    _assert_same(ours, theirs)


def test_a_whole_pickled_module_loads_with_its_parameters(torch, tmp_path):
    """``torch.save(model)`` then ``torch.load(..., weights_only=False)`` (the Save and Load
    tutorial): the module's parameters come back as Parameters, with their values."""
    torch.manual_seed(0)
    torch.save(torch.nn.Linear(3, 2), tmp_path / "model.pt")
    ours = symgrad.load(tmp_path / "model.pt", weights_only=False)
    theirs = torch.load(tmp_path / "model.pt", weights_only=False)
    for name in ("weight", "bias"):
        _assert_same(getattr(ours, name), getattr(theirs, name))
    assert [n for n, _ in ours.named_parameters()] == ["weight", "bias"]


def _damaged(path, how) -> bytes:
    data = open(path, "rb").read()
    if how == "truncated":
        return data[:len(data) // 2]
    start = data.index(b"_rebuild_tensor_v2")  # inside data.pkl: its CRC no longer matches
    return data[:start] + bytes(b ^ 0xFF for b in data[start:start + 16]) + data[start + 16:]


@pytest.mark.parametrize("how", ["truncated", "corrupt"])
def test_a_damaged_file_is_an_error_naming_it(torch, tmp_path, how):
    symgrad.save(_checkpoint(symgrad), tmp_path / "good.pt")
    damaged = tmp_path / f"{how}.pt"
    damaged.write_bytes(_damaged(tmp_path / "good.pt", how))
    with pytest.raises(Exception):  # a truncated file: RuntimeError; a corrupt pickle: whatever its bytes make
        torch.load(damaged, weights_only=True)
    with pytest.raises(RuntimeError, match="corrupt, truncated") as error:
        symgrad.load(damaged)
    assert str(damaged) in str(error.value)


def _saved_on(torch, path, device: str) -> None:
    """A checkpoint whose storages say they were saved on ``device`` (no GPU needed)."""
    buffer = io.BytesIO()
    torch.save({"weight": torch.tensor([1.0, -2.0]), "steps": torch.tensor([3])}, buffer)
    with zipfile.ZipFile(buffer) as source, zipfile.ZipFile(path, "w") as target:
        for name in source.namelist():
            data = source.read(name)
            if name.endswith("/data.pkl"):
                data = data.replace(b"X\x03\x00\x00\x00cpu", b"X" + len(device).to_bytes(4, "little") + device.encode())
            target.writestr(name, data)


@pytest.mark.parametrize("map_location", ["cpu", {"cuda:0": "cpu"}])
def test_map_location_puts_tensors_on_the_cpu_as_pytorch(torch, tmp_path, map_location):
    _saved_on(torch, tmp_path / "gpu.pt", "cuda:0")
    for lib in (symgrad, torch):
        with pytest.raises(RuntimeError, match="(?i)cuda"):
            lib.load(tmp_path / "gpu.pt")
    ours = symgrad.load(tmp_path / "gpu.pt", map_location=map_location)
    _assert_same(ours, torch.load(tmp_path / "gpu.pt", map_location=map_location))


def test_a_dtype_symgrad_lacks_is_an_error_naming_it(torch, tmp_path):
    torch.save({"half": torch.tensor([1.0], dtype=torch.bfloat16)}, tmp_path / "bf16.pt")
    assert torch.load(tmp_path / "bf16.pt")["half"].dtype == torch.bfloat16
    with pytest.raises(RuntimeError, match="BFloat16Storage") as error:
        symgrad.load(tmp_path / "bf16.pt")
    assert str(tmp_path / "bf16.pt") in str(error.value)

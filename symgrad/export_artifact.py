"""An exported gradient as a directory that stands alone, and ``symgrad.load`` of one.

    out/module.py                  the readable module (imports jax and numpy only)
    out/value_and_grad.jax_export  jax.export's serialized StableHLO of the value and gradient
    out/value.jax_export           ... of the forward only (what a no_grad call runs)
    out/manifest.json              names, shapes (symbolic ones by name), dtypes, outputs, the
                                   differentiated arguments, platforms, versions, each file's sha256

Either program runs with ``jax.export.deserialize(bytes).call(*args)`` and nothing of symgrad.
``save`` writes into a fresh temporary directory beside the target and renames it into place, so
a crash never leaves half an artifact.  ``load`` checks the format version and every digest
before it deserializes anything, and the function it returns checks its arguments by name.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import jax
import numpy as np

from symgrad import serialization
from symgrad.grad_mode import is_grad_enabled

FORMAT, FORMAT_VERSION = "symgrad-export", 1
MANIFEST, MODULE = "manifest.json", "module.py"
PROGRAMS = {"value_and_grad": "value_and_grad.jax_export", "value": "value.jax_export"}


def save(lowered, directory, overwrite: bool = False) -> Path:
    """``lowered`` (symgrad.exporting.Lowered) written as the artifact directory ``directory``."""
    target = Path(directory)
    if target.exists() and not overwrite and (not target.is_dir() or any(target.iterdir())):
        raise FileExistsError(f"save: {target} exists and is not empty; pass overwrite=True to replace it")
    files = {MODULE: lowered.source.encode()}
    files.update({PROGRAMS[name]: bytes(e.serialize()) for name, e in lowered.exported.items()})
    manifest = _manifest(lowered, files)
    target.parent.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        for name, data in files.items():
            (fresh / name).write_bytes(data)
        (fresh / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        if target.exists():
            old = target.parent / f".{target.name}.replaced-{uuid.uuid4().hex}"
            os.rename(target, old)
            os.rename(fresh, target)
            shutil.rmtree(old) if old.is_dir() else old.unlink()
        else:
            os.rename(fresh, target)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
    return target


def _manifest(lowered, files) -> dict:
    programs = lowered.programs
    return {
        "format": FORMAT, "format_version": FORMAT_VERSION, "function": lowered.name,
        "arguments": [{"name": a.name, "shape": list(a.shape), "dtype": a.dtype.name,
                       "differentiated": a.differentiated} for a in lowered.arguments],
        "symbolic_dims": lowered.dims,
        "gradients": lowered.gradient_names,
        "has_aux": lowered.vg.has_aux,
        "outputs": {name: [{"name": label, "shape": [n if isinstance(n, int) else str(n) for n in shape],
                            "dtype": dtype} for label, (_, shape, dtype) in zip(p.output_names, p.outputs)]
                    for name, p in programs.items()},
        "platforms": list(lowered.platforms),
        "versions": {"symgrad": _version("symgrad"), "jax": jax.__version__, "jaxlib": _version("jaxlib")},
        "files": {name: {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
                  for name, data in files.items()},
    }


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def load(f, map_location=None, *, weights_only=True):
    """An export directory as a ``Loaded`` function; any other path or file is a checkpoint, read
    as ``torch.load`` reads it (symgrad.serialization): ``symgrad.load`` is both."""
    if isinstance(f, (str, os.PathLike)) and Path(f).is_dir():
        return Loaded(Path(f))
    return serialization.load(f, map_location, weights_only=weights_only)


class Loaded:
    """A saved export as a function with the signature and results of the one exported:
    ``h(*args, **kwargs)`` -> ``(value, grads)``; under ``symgrad.no_grad()`` the forward program
    runs and grads is ``None``; ``h(..., detach=("x",))`` gives x ``None`` and XLA never computes
    its gradient (the unused result is dead code in the one jitted program)."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.manifest = _read_manifest(directory)
        self.__name__ = self.manifest["function"]
        data = {name: _verified(directory, name, self.manifest) for name in self.manifest["files"]}
        self.source = data[MODULE].decode()
        self.exported = {}
        for name, file in PROGRAMS.items():
            try:
                self.exported[name] = jax.export.deserialize(bytearray(data[file]))
            except Exception as error:  # whatever a damaged flatbuffer makes the reader raise
                raise RuntimeError(f"{directory / file} could not be deserialized ({type(error).__name__}: "
                                   f"{error}): it is corrupt or truncated") from error
        self.arguments = self.manifest["arguments"]
        self._in_tree = self.exported["value"].in_tree
        self._jitted = {}

    def __call__(self, *args, detach=(), **kwargs):
        grad_mode = is_grad_enabled()
        function = self.function("value_and_grad" if grad_mode else "value",
                                 tuple(sorted(detach)) if detach and grad_mode else ())
        try:
            return function(*args, **kwargs)
        except Exception:  # jax.export checks the arguments; say which one is wrong, by name
            self._refuse(args, kwargs)
            raise

    def function(self, program: str = "value_and_grad", detach=()):
        """The jitted function a call runs: ``program`` with the gradients of ``detach`` left out."""
        key = (program, detach)
        if key not in self._jitted:
            unknown = [n for n in detach if n not in self.manifest["gradients"]]
            if unknown:
                raise ValueError(f"{self.__name__}: cannot detach {unknown}: the differentiated arguments are "
                                 f"{self.manifest['gradients']}")
            call = self.exported[program].call
            blank = [n in detach for n in self.manifest["gradients"]]

            def run(*args, **kwargs):
                value, grads = call(*args, **kwargs)
                if not any(blank):
                    return value, grads
                leaves, tree = jax.tree_util.tree_flatten(grads)
                return value, jax.tree_util.tree_unflatten(tree, [None if b else g for b, g in zip(blank, leaves)])

            self._jitted[key] = jax.jit(run)
        return self._jitted[key]

    def _refuse(self, args, kwargs):
        """Raises the error that names the argument of the wrong count, dtype or shape, if one is."""
        leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
        if tree != self._in_tree:
            names = ", ".join(a["name"] for a in self.arguments)
            raise TypeError(f"{self.__name__}() takes arguments shaped as {self._in_tree} ({names}), "
                            f"got {tree} ({len(args)} positional, keywords {sorted(kwargs)})")
        sizes = {}
        for leaf, argument in zip(leaves, self.arguments):
            shape, dtype = tuple(np.shape(leaf)), np.asarray(leaf).dtype if not hasattr(leaf, "dtype") else leaf.dtype
            want = f"{argument['dtype']}[{','.join(map(str, argument['shape']))}]"
            if np.dtype(dtype).name != argument["dtype"]:
                raise RuntimeError(f"{self.__name__}: argument {argument['name']!r} has dtype {np.dtype(dtype).name}; "
                                   f"the export takes {want}")
            fits = [n == d if isinstance(d, int) else sizes.setdefault(d, n) == n
                    for n, d in zip(shape, argument["shape"])]
            if len(shape) != len(argument["shape"]) or not all(fits):
                raise RuntimeError(f"{self.__name__}: argument {argument['name']!r} has shape {shape}; the export "
                                   f"takes {want}" + (f" with {sizes}" if sizes else ""))


def _read_manifest(directory: Path) -> dict:
    path = directory / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise RuntimeError(f"{path} is missing or not JSON ({type(error).__name__}): {directory} is not an "
                           f"export that symgrad wrote") from error
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise RuntimeError(f"{path} is not a symgrad export manifest")
    version = manifest.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise RuntimeError(f"{path} is format version {version}, written by a newer symgrad; this one reads "
                           f"versions up to {FORMAT_VERSION}: upgrade symgrad to load it")
    return manifest


def _verified(directory: Path, name: str, manifest: dict) -> bytes:
    path = directory / name
    try:
        data = path.read_bytes()
    except OSError as error:
        raise RuntimeError(f"{path}, listed in the manifest, cannot be read ({error})") from error
    if hashlib.sha256(data).hexdigest() != manifest["files"][name]["sha256"]:
        raise RuntimeError(f"{path} does not match the sha256 digest in {directory / MANIFEST}: the artifact "
                           f"is corrupt, truncated or was changed after it was saved")
    return data

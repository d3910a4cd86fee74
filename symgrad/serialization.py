"""``symgrad.save`` / ``symgrad.load``: PyTorch's checkpoint format, written and read without PyTorch.

PyTorch's own format, so that a state_dict saved here loads with ``torch.load(weights_only=True)``
and a checkpoint from ``torch.save`` loads here.  It is a zip archive of stored records in one
folder::

    archive/data.pkl     the object, pickled (protocol 2); a tensor is the call
                         torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad,
                         hooks) on the persistent id ('storage', torch.FloatStorage, key, 'cpu', numel)
    archive/data/<key>   that storage's bytes, in the order ``byteorder`` names
    archive/byteorder    'little' or 'big'
    archive/version      the format's version, 3

Each tensor is saved as a contiguous storage of its own.  Tensors that shared a storage in
PyTorch (views) load as independent tensors: symgrad has no aliasing views.

Loading is safe by default, as ``torch.load(weights_only=True)``: the unpickler builds only
tensors, containers and plain values, and refuses any other global by name before anything
runs.  ``weights_only=False`` unpickles anything, and so may run code the file names.
"""
from __future__ import annotations

import collections
import io
import os
import pickle
import struct
import sys
import zipfile

import numpy as np

from symgrad import dtypes, engine
from symgrad.creation import tensor as new_tensor
from symgrad.nn.module import Parameter
from symgrad.tensor import Tensor

VERSION = b"3\n"
ALIGNMENT = 64  # PyTorch aligns each record's data so that a checkpoint can be memory-mapped
STORAGE_DTYPES = {"FloatStorage": dtypes.float32, "DoubleStorage": dtypes.float64, "HalfStorage": dtypes.float16,
                  "LongStorage": dtypes.int64, "IntStorage": dtypes.int32, "ShortStorage": dtypes.int16,
                  "CharStorage": dtypes.int8, "ByteStorage": dtypes.uint8, "BoolStorage": dtypes.bool_}


class _Global:
    """A name in the pickle (``torch._utils._rebuild_tensor_v2``) written without importing its
    module: symgrad writes PyTorch's names and never imports PyTorch."""

    __slots__ = ("module", "name")

    def __init__(self, module: str, name: str):
        self.module, self.name = module, name


REBUILD_TENSOR = _Global("torch._utils", "_rebuild_tensor_v2")
REBUILD_PARAMETER = _Global("torch._utils", "_rebuild_parameter")
STORAGE_TYPES = {dtype: _Global("torch", name) for name, dtype in STORAGE_DTYPES.items()}


def _contiguous_strides(shape) -> tuple:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


class _Pickler(pickle._Pickler):
    """Python's pickler (the pure-Python one, whose savers can be extended) writing each tensor
    as PyTorch does; the tensors' values are collected in ``storages`` by key."""

    def __init__(self, file):
        super().__init__(file, protocol=2)
        self.storages: dict[str, np.ndarray] = {}

    def _save_global(self, name: _Global) -> None:
        self.write(pickle.GLOBAL + f"{name.module}\n{name.name}\n".encode())
        self.memoize(name)

    def _save_tensor(self, tensor: Tensor) -> None:
        self._write_tensor(tensor, tensor.requires_grad)
        self.memoize(tensor)

    def _write_tensor(self, tensor: Tensor, requires_grad: bool) -> None:
        values = np.asarray(engine.array(tensor._node), order="C")
        key = str(len(self.storages))
        self.storages[key] = values
        self.save(REBUILD_TENSOR)
        self.write(pickle.MARK)
        self.save_pers(("storage", STORAGE_TYPES[tensor.dtype], key, "cpu", values.size))
        for argument in (0, values.shape, _contiguous_strides(values.shape), requires_grad, collections.OrderedDict()):
            self.save(argument)
        self.write(pickle.TUPLE + pickle.REDUCE)

    def _save_parameter(self, parameter: Parameter) -> None:
        """As PyTorch: ``_rebuild_parameter`` of its data (a tensor without grad), so that a
        ``weights_only`` load takes it."""
        self.save(REBUILD_PARAMETER)
        self.write(pickle.MARK)
        self._write_tensor(parameter, False)
        self.save(parameter.requires_grad)
        self.save(collections.OrderedDict())
        self.write(pickle.TUPLE + pickle.REDUCE)
        self.memoize(parameter)

    dispatch = {**pickle._Pickler.dispatch, _Global: _save_global, Tensor: _save_tensor, Parameter: _save_parameter}

    def save(self, obj, save_persistent_id=True):
        """A replayed result or a carried tensor (symgrad.replaying) is saved as the tensor it stands for."""
        usual = getattr(obj.__class__, "_usual_class", None)
        if usual is not None and usual in self.dispatch and id(obj) not in self.memo:
            self.dispatch[usual](self, obj)
        else:
            super().save(obj, save_persistent_id)


def save(obj, f) -> None:
    """Write ``obj`` (a tensor, a state_dict, containers of tensors and plain values) to a path or
    a binary file, as ``torch.save`` does."""
    pickled = io.BytesIO()
    pickler = _Pickler(pickled)
    pickler.dump(obj)
    records = {"data.pkl": pickled.getvalue(), "byteorder": sys.byteorder.encode(),
               **{f"data/{key}": values.tobytes() for key, values in pickler.storages.items()},
               "version": VERSION}
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as file:
            _write_archive(file, records)
    else:
        _write_archive(f, records)


def _write_archive(file, records: dict) -> None:
    with zipfile.ZipFile(file, "w", zipfile.ZIP_STORED) as archive:
        for name, data in records.items():
            info = zipfile.ZipInfo(f"archive/{name}")
            header_end = archive.fp.tell() + 30 + len(info.filename.encode())  # 30: a local header's fixed part
            padding = -(header_end + 4) % ALIGNMENT
            info.extra = struct.pack("<HH", 0x4246, padding) + bytes(padding)  # an extra field of padding ('FB')
            archive.writestr(info, data)


# -------------------------------------------------------------------------------- loading


class Refusal(Exception):
    """What ``load`` will not build; the message names the file and stands as it is."""


class RefusedGlobal(Refusal, pickle.UnpicklingError):
    """A global that ``weights_only`` does not allow (PyTorch raises UnpicklingError too)."""


class Unsupported(Refusal, RuntimeError):
    """A tensor symgrad cannot hold: a dtype it lacks, or a device other than the CPU."""


def _rebuild_tensor(storage, storage_offset, size, stride, requires_grad, backward_hooks, metadata=None):
    """``torch._utils._rebuild_tensor_v2``: the tensor's elements read from its storage (which
    may hold more: a view's, a strided layout's) into a new leaf; hooks and metadata (PyTorch's
    Python-side extras) are not kept."""
    values = _strided(storage, storage_offset, tuple(size), tuple(stride))
    return new_tensor(values, dtype=dtypes.from_numpy(values.dtype), requires_grad=requires_grad is True)


def _rebuild_parameter(data, requires_grad, backward_hooks):
    """``torch._utils._rebuild_parameter``: an ``nn.Parameter`` (a whole pickled module's, or one
    saved alone) loads as one, as PyTorch's does; its hooks are not kept."""
    if not isinstance(data, Tensor):
        raise TypeError(f"a parameter's data is a {type(data).__name__}, not a tensor")
    return Parameter(data, requires_grad is True)


def _strided(storage, offset, size: tuple, stride: tuple) -> np.ndarray:
    """``size`` elements of ``storage`` from ``offset`` by ``stride``, checked to lie inside it
    first (the file is not trusted)."""
    numbers = (offset, *size, *stride)
    if not isinstance(storage, np.ndarray) or len(size) != len(stride) or \
            not all(isinstance(n, int) and n >= 0 for n in numbers):
        raise ValueError(f"a tensor's layout is malformed: offset {offset!r}, size {size!r}, stride {stride!r}")
    if 0 in size:
        return np.empty(size, storage.dtype)
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if last >= storage.size:
        raise ValueError(f"a tensor reads element {last} of a storage of {storage.size}")
    return np.lib.stride_tricks.as_strided(storage[offset:], size, [s * storage.itemsize for s in stride])


ALLOWED = {"collections.OrderedDict": collections.OrderedDict,
           "torch._utils._rebuild_tensor_v2": _rebuild_tensor,
           "torch._utils._rebuild_parameter": _rebuild_parameter,
           **{f"torch.{name}": dtype for name, dtype in STORAGE_DTYPES.items()}}


class _Unpickler(pickle.Unpickler):
    """Builds the archive's tensors from its storages; with ``weights_only``, nothing but them,
    containers and plain values."""

    def __init__(self, archive: zipfile.ZipFile, source: str, map_location, weights_only: bool):
        names = set(archive.namelist())
        self.folder = _folder(names)
        super().__init__(io.BytesIO(archive.read(f"{self.folder}/data.pkl")))
        self.archive, self.source, self.map_location, self.weights_only = archive, source, map_location, weights_only
        byteorder = f"{self.folder}/byteorder"  # absent from old files, which are little-endian
        self.byteorder = archive.read(byteorder).decode() if byteorder in names else "little"
        self.storages: dict = {}

    def find_class(self, module, name):
        allowed = ALLOWED.get(f"{module}.{name}")
        if allowed is not None:
            return allowed
        if module == "torch" and name.endswith("Storage"):
            raise Unsupported(f"{self.source}: symgrad has no dtype for torch.{name} (it loads "
                              f"{', '.join(STORAGE_DTYPES)})")
        if self.weights_only:
            raise RefusedGlobal(f"{self.source}: load(weights_only=True) builds only tensors, containers and "
                                f"plain values, and the file asks for {module}.{name}; weights_only=False "
                                f"would import it and may run code from the file: use it only for a file you trust")
        return super().find_class(module, name)

    def persistent_load(self, saved_id):
        kind, dtype, key, location, numel = saved_id
        if kind != "storage" or not isinstance(dtype, dtypes.dtype):
            raise ValueError(f"unknown persistent id {saved_id!r}")
        self._check_location(location)
        if key not in self.storages:
            data = self.archive.read(f"{self.folder}/data/{key}")
            order = {"little": "<", "big": ">"}[self.byteorder]
            values = np.frombuffer(data, dtype.numpy.newbyteorder(order))
            if values.size != numel:
                raise ValueError(f"storage {key} holds {values.size} elements, not {numel}")
            self.storages[key] = values.astype(dtype.numpy)
        return self.storages[key]

    def _check_location(self, location) -> None:
        """Storages go where ``map_location`` (a device, or a dict of them) says: the CPU only."""
        target = self.map_location
        if isinstance(target, dict):
            target = target.get(location, location)
        elif target is None:
            target = location
        if not str(target).startswith("cpu"):
            raise Unsupported(f"{self.source}: a tensor saved on {location!r} would load on {str(target)!r}; "
                              f"symgrad runs on the CPU: pass map_location='cpu'")


def _folder(names: set) -> str:
    """The archive's folder (PyTorch names it after the file), the one holding ``data.pkl``."""
    folders = {name.split("/")[0] for name in names if name.endswith("/data.pkl") and name.count("/") == 1}
    if len(folders) != 1:
        raise ValueError("the archive has no data.pkl record, or more than one")
    return folders.pop()


def load(f, map_location=None, *, weights_only=True):
    """What ``save`` or ``torch.save`` wrote, from a path or a binary file.

    ``weights_only`` (the default, as in PyTorch) builds only tensors, containers and plain
    values; ``map_location`` (a device or a dict of them) must place tensors on the CPU."""
    safe = weights_only is None or bool(weights_only)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as file:
            return _load(file, os.fspath(f), map_location, safe)
    return _load(f, str(getattr(f, "name", type(f).__name__)), map_location, safe)


def _load(file, source: str, map_location, weights_only: bool):
    try:
        with zipfile.ZipFile(file) as archive:
            return _Unpickler(archive, source, map_location, weights_only).load()
    except Refusal:
        raise
    except Exception as error:  # anything a damaged file makes the zip reader or the unpickler raise
        raise RuntimeError(f"{source} could not be loaded ({type(error).__name__}: {error}): it is corrupt, "
                           f"truncated, or not in PyTorch's zip format that symgrad.save and torch.save "
                           f"write") from error

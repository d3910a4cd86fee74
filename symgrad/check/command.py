"""``symgrad check path/to/file.py:fn --arg x=f64[4,3] ...``: a cross-check for someone's CI.

The target may also name an ``nn.Module`` instance, or a Module class that is built with no
arguments after ``manual_seed(--seed)``; its parameters are checked with its inputs.
Prints the report and exits 1 when any pair of engines disagrees (2 for bad usage).
"""
from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path

import numpy as np

from symgrad.check.crosscheck import ENGINES, crosscheck
from symgrad.nn.module import Module
from symgrad.random import manual_seed

SPEC = re.compile(r"^(?P<name>\w+)=(?P<dtype>f32|f64|i64)\[(?P<shape>[\d,\s]*)\]$")
DTYPES = {"f32": np.float32, "f64": np.float64, "i64": np.int64}


def parse_arg(text: str, rng) -> tuple[str, np.ndarray]:
    """``x=f64[4,3]`` -> ("x", a standard-normal array of that shape); ``i64`` draws 0..9."""
    match = SPEC.match(text.strip())
    if not match:
        raise ValueError(f"bad --arg {text!r}: expected NAME=DTYPE[SHAPE], e.g. x=f64[4,3] (DTYPE: f32, f64, i64)")
    shape = tuple(int(s) for s in match["shape"].replace(" ", "").split(",") if s)
    dtype = DTYPES[match["dtype"]]
    values = rng.integers(0, 10, size=shape) if dtype is np.int64 else rng.standard_normal(shape)
    return match["name"], np.asarray(values, dtype=dtype)


def load_function(target: str):
    path, _, name = target.rpartition(":")
    if not path or not name:
        raise ValueError(f"bad target {target!r}: expected path/to/file.py:function")
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    if spec is None:
        raise ValueError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, name):
        raise ValueError(f"{path} has no function {name!r}")
    return getattr(module, name)


def _model(target, seed: int):
    """A Module class is built (seeded, no arguments); anything else is used as it is."""
    if isinstance(target, type) and issubclass(target, Module):
        manual_seed(seed)
        try:
            return target()
        except TypeError as error:
            raise ValueError(f"cannot build {target.__name__}() with no arguments ({error}); "
                             f"name a module instance in the file instead") from None
    return target


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", help="path/to/file.py:function, or :Model (an nn.Module class or instance), "
                                       "written for `import symgrad as torch`")
    parser.add_argument("--arg", action="append", default=[], metavar="NAME=DTYPE[SHAPE]",
                        help="one per argument, in order, e.g. --arg x=f64[4,3]")
    parser.add_argument("--against", default=",".join(ENGINES), help=f"engines (default {','.join(ENGINES)})")
    parser.add_argument("--atol", type=float, default=1e-5)
    parser.add_argument("--rtol", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    parser.add_argument("--markdown", action="store_true", help="print the report as a markdown table")


def run(args) -> int:
    rng = np.random.default_rng(args.seed)
    try:
        fn = _model(load_function(args.target), args.seed)
        inputs = dict(parse_arg(a, rng) for a in args.arg)
    except ValueError as error:
        print(f"symgrad check: {error}", file=sys.stderr)
        return 2
    report = crosscheck(fn, inputs, against=tuple(e for e in args.against.split(",") if e),
                        atol=args.atol, rtol=args.rtol, seed=args.seed)
    print(report.to_markdown() if args.markdown else report)
    return 0 if report.ok else 1

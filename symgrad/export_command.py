"""``symgrad export path/to/file.py:loss_fn --arg w=f32[5,3] --arg x=f32[b,5] -o out/``.

Lowers the function's value and symbolic gradient for the shapes given and writes the artifact
directory (symgrad.export_artifact); prints the inputs, the outputs, the gradient's size and the
files written.  Exits 2 on bad usage, naming the argument.
"""
from __future__ import annotations

import argparse
import sys

from symgrad.check.command import load_function
from symgrad.compiled import value_and_grad
from symgrad.exporting import spec

SHAPES = """shapes: NAME=DTYPE[DIMS], one --arg per argument of the function, in order.
  DTYPE is f16, f32, f64, i32, i64 or bool; each DIM is a size (5) or a name (b), and a name
  is a symbolic dimension: the artifact runs at any size there (jax.export shape polymorphism).
  Arguments that share a name share the size: --arg x=f32[b,5] --arg y=f32[b,3]."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = SHAPES
    parser.add_argument("target", help="path/to/file.py:function (written for `import symgrad as torch`)")
    parser.add_argument("--arg", action="append", default=[], metavar="NAME=DTYPE[DIMS]",
                        help="one per argument, in order, e.g. --arg x=f32[b,5]")
    parser.add_argument("--wrt", default=None, metavar="NAMES",
                        help="comma-separated arguments to differentiate (default: the first)")
    parser.add_argument("--platforms", default="cpu", help="comma-separated: cpu, cuda, tpu (default cpu)")
    parser.add_argument("-o", "--output", required=True, help="the artifact directory to write")
    parser.add_argument("--overwrite", action="store_true", help="replace the directory if it is not empty")


def run(args) -> int:
    try:
        fn = load_function(args.target)
        names, specs = [], []
        for text in args.arg:
            name, _, shape = text.partition("=")
            if not name.isidentifier() or not shape:
                raise ValueError(f"bad --arg {text!r}: expected NAME=DTYPE[DIMS], e.g. x=f32[b,5]")
            names.append(name)
            specs.append(spec(shape))
        wrt = args.wrt.split(",") if args.wrt else names[:1]
        unknown = [n for n in wrt if n not in names]
        if unknown:
            raise ValueError(f"--wrt {','.join(unknown)}: not among the --arg names {names}")
        lowered = value_and_grad(fn, tuple(names.index(n) for n in wrt)).lower(
            *specs, platforms=tuple(args.platforms.split(",")))
        directory = lowered.save(args.output, overwrite=args.overwrite)
    except (ValueError, TypeError, FileExistsError) as error:
        print(f"symgrad export: {error}", file=sys.stderr)
        return 2
    program = lowered.programs["value_and_grad"]
    print(f"{lowered.name}: inputs " + ", ".join(f"{a.name}: {a.text()}" for a in lowered.arguments))
    print("outputs " + ", ".join(f"{label}: {dtype}[{','.join(map(str, shape))}]"
                                 for label, (_, shape, dtype) in zip(program.output_names, program.outputs)))
    print(f"gradient: {program.node_count()} nodes; platforms {', '.join(lowered.platforms)}")
    print(f"wrote {directory}/: " + ", ".join(sorted(p.name for p in directory.iterdir())))
    return 0

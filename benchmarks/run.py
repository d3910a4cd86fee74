"""Run the workloads side by side in one process and print markdown tables with ratios.

    python -m benchmarks.run                # all workloads
    python -m benchmarks.run --only W1,W5   # some of them
    python -m benchmarks.run --only export  # exported artifacts against jax.jit; lower's growth in D
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform

from benchmarks import export, workloads

WORKLOADS = {"W1": workloads.w1_seed, "W2": workloads.w2_mlp, "W3": workloads.w3_logreg,
             "W4": workloads.w4_chain, "W5": workloads.w5_loop,
             "W5b": lambda: workloads.w5_loop(optimizer=True), "W6": workloads.w6_mlp, "W7": workloads.w7_batches,
             "W8": workloads.w8_deep, "W9": workloads.w9_counting,
             "export": export.export_rows}


def _cpu() -> str:
    """The processor's model: PyTorch's eager speed differs a lot between hosts (its kernels
    and MKL take other paths on AMD than on Intel), so the ratios are only comparable per host."""
    try:
        with open("/proc/cpuinfo") as info:
            return next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.machine()


def _format(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


def _table(rows):
    """One markdown table per workload: time, and ratios of each symgrad row to the references."""
    lines = []
    for workload in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == workload]
        torch_best = min((s for _, system, s in mine if system.startswith("torch eager")), default=None)
        jax_time = next((s for _, system, s in mine if system.startswith("jax.jit") and "first" not in system), None)
        jax_first = next((s for _, system, s in mine if system == "jax.jit, first call"), None)
        lines += [f"\n### {workload}\n", "| system | time | / torch eager (best) | / jax.jit |", "|---|---|---|---|"]
        for _, system, seconds in mine:
            reference_jax = jax_first if "first call" in system else jax_time
            vs_torch = f"{seconds / torch_best:.2f}x" if torch_best and "first" not in system else ""
            vs_jax = f"{seconds / reference_jax:.2f}x" if reference_jax else ""
            lines.append(f"| {system} | {_format(seconds)} | {vs_torch} | {vs_jax} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(WORKLOADS), help="comma-separated workloads (W1..W9)")
    args = parser.parse_args(argv)
    print(f"# symgrad benchmarks — {datetime.date.today()}, {_cpu()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}")
    for name in args.only.split(","):
        result = WORKLOADS[name.strip()]()
        if name.strip() == "W4":
            rows, details = result
            print(_table(rows))
            print("\n| D | first call | SymPy (trace + symbolic gradient) | emit | XLA compile + first run | "
                  "IR nodes | source lines |\n|---|---|---|---|---|---|---|")
            for depth, first, sympy_s, emit_s, xla_s, nodes, lines in details:
                print(f"| {depth} | {_format(first)} | {_format(sympy_s)} | {_format(emit_s)} | {_format(xla_s)} "
                      f"| {nodes} | {lines} |")
        else:
            print(_table(result))


if __name__ == "__main__":
    main()

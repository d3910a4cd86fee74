"""Instructions a replayed step costs in Python's thread, counted by valgrind's callgrind.

    python -m benchmarks.instructions              # W5, W5b and W8, per step
    python -m benchmarks.instructions --only W5

Timing on a shared host moves by +-5% from one process to the next, more than most changes to the
replayed path are worth; a count of instructions does not.  Each loop runs warmed up (its scans
compiled) with instrumentation off, then ``short`` and ``long`` steps with it on; the difference of
the two counts divided by the difference of the steps is one step's, without the start and the
exit.  Only the main thread is counted: XLA's threads spin for as long as they wait, so their
counts follow the host's timing.  Needs ``valgrind`` and ``callgrind_control`` (Debian's valgrind).
"""
from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time

LOOPS = {"W5": 1000, "W5b": 1000, "W8": 200}  # the longer run's steps; the shorter runs a third


def _loop(name: str):
    """A function of a number of steps that runs that many steps of the workload's loop."""
    import numpy as np

    import symgrad
    from benchmarks.workloads import _deep, _deep_loop, _sgd_loop

    if name == "W8":
        rng = np.random.default_rng(8)
        x, y = rng.standard_normal((16, 8)).astype(np.float32), rng.standard_normal((16, 1)).astype(np.float32)
        symgrad.manual_seed(0)
        weights = {k: v.numpy() for k, v in _deep(symgrad, 20).state_dict().items()}
        return lambda steps: _deep_loop(symgrad, x, y, weights, 20, steps, 0.01)
    rng = np.random.default_rng(3)
    w, b = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    x, y = symgrad.tensor(np.ones(5, np.float32)), symgrad.tensor(np.zeros(3, np.float32))
    return lambda steps: _sgd_loop(symgrad, x, y, w, b, steps, 0.1, name == "W5b")[1].detach().numpy()


def _child(name: str, steps: int, folder: str) -> None:
    """Inside valgrind: warm up, say so, wait for the instrumentation, run ``steps`` steps."""
    from codegen import cycle_scan

    loop = _loop(name)
    loop(300)
    loop(300)
    for thread in list(cycle_scan._compiling):
        thread.join()
    open(os.path.join(folder, "ready"), "w").close()
    while not os.path.exists(os.path.join(folder, "go")):
        time.sleep(0.05)
    loop(steps)
    os._exit(0)  # (the interpreter's teardown is not the step's)


def count(name: str, steps: int) -> int:
    """Instructions of the main thread over ``steps`` steps of the workload (and its exit)."""
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "callgrind.out")
        process = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--separate-threads=yes", "--instr-atstart=no",
             f"--callgrind-out-file={out}", sys.executable, "-m", "benchmarks.instructions",
             "--child", name, str(steps), folder], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not os.path.exists(os.path.join(folder, "ready")):
            if process.poll() is not None:
                raise RuntimeError(f"{name}: the loop under valgrind exited with {process.returncode}")
            time.sleep(0.2)
        subprocess.run(["callgrind_control", "-i", "on", str(process.pid)], check=True, capture_output=True)
        open(os.path.join(folder, "go"), "w").close()
        process.wait()
        main_thread = sorted(glob.glob(out + "-*"))[0]
        with open(main_thread) as counts:
            return next(int(line.split()[1]) for line in counts if line.startswith(("summary:", "totals:")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(LOOPS))
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        name, steps, folder = args.child
        _child(name, int(steps), folder)
        return
    for name in args.only.split(","):
        long = LOOPS[name]
        short = long // 3
        per_step = (count(name, long) - count(name, short)) / (long - short)
        print(f"{name}: {per_step / 1e3:.1f}k instructions a step")


if __name__ == "__main__":
    main()

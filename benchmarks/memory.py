"""Memory over long loops: resident memory at step 1,000 and at the end, for a torch-style
training loop and a no_grad evaluation loop that keeps a running total nobody reads.

    python -m benchmarks.memory                 # 10,000 training steps, 5,000 evaluation batches

``tests/test_memory.py`` runs the same loops for fewer steps.
"""
from __future__ import annotations

import argparse
import os

import numpy as np

import symgrad as torch

PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_mb() -> float:
    """This process's resident memory now (not its peak), in MB."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE / 2**20


def _data(rng, batches: int = 50):
    xs = [torch.tensor(rng.normal(size=(16, 8)).astype(np.float32)) for _ in range(batches)]
    ys = [torch.tensor(rng.integers(0, 3, size=16)) for _ in range(batches)]
    return xs, ys


def training(steps: int, at=(1000,), seed: int = 0):
    """A logistic-regression-like loop (rebuild, backward, update under no_grad, zero_grad);
    the resident memory at each step in ``at`` and at the end, and the final weights."""
    rng = np.random.default_rng(seed)
    xs, ys = _data(rng)
    w = torch.tensor(rng.normal(size=(8, 3)).astype(np.float32) * 0.1, requires_grad=True)
    seen = {}
    for step in range(1, steps + 1):
        loss = torch.nn.functional.cross_entropy(xs[step % 50] @ w, ys[step % 50])
        loss.backward()
        with torch.no_grad():
            w -= 0.05 * w.grad
        w.grad.zero_()
        if step in at:
            seen[step] = resident_mb()
    seen[steps] = resident_mb()
    return seen, w.detach().numpy()


def evaluation(batches: int, at=(1000,), seed: int = 0):
    """``total += loss`` under no_grad for ``batches`` batches, ``total`` read once at the end;
    the resident memory at each batch in ``at`` and after the read, and the total."""
    rng = np.random.default_rng(seed)
    xs, ys = _data(rng)
    w = torch.tensor(rng.normal(size=(8, 3)).astype(np.float32))
    total, seen = torch.zeros(()), {}
    with torch.no_grad():
        for batch in range(1, batches + 1):
            total += torch.nn.functional.cross_entropy(xs[batch % 50] @ w, ys[batch % 50])
            if batch in at:
                seen[batch] = resident_mb()
    value = total.item()
    seen[batches] = resident_mb()
    return seen, value


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--batches", type=int, default=5_000)
    args = parser.parse_args(argv)
    print("| loop | RSS at 1,000 | RSS at the end | growth |\n|---|---|---|---|")
    for name, (seen, _) in (("training, %d steps" % args.steps, training(args.steps)),
                            ("no_grad evaluation, %d batches" % args.batches, evaluation(args.batches))):
        first, last = seen[1000], seen[max(seen)]
        print(f"| {name} | {first:.0f} MB | {last:.0f} MB | {100 * (last - first) / first:+.1f}% |")


if __name__ == "__main__":
    main()

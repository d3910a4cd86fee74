"""The cross-check report: per input, the largest disagreement between each pair of engines."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np


@dataclass
class Comparison:
    input: str
    engines: tuple[str, str]
    max_abs: float
    max_rel: float
    ok: bool
    note: str = ""


def compare(name: str, engines, a, b, atol: float, rtol: float) -> Comparison:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return Comparison(name, engines, float("inf"), float("inf"), False, f"shapes differ: {a.shape} vs {b.shape}")
    finite = np.isfinite(a) & np.isfinite(b)
    notes = [f"{engine} has non-finite values (nan/inf)" for engine, x in zip(engines, (a, b))
             if not np.all(np.isfinite(x))]
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - b)[finite]
    scale = np.maximum(np.abs(b), np.abs(a))[finite]
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float((diff / np.where(scale > 0, scale, 1.0)).max()) if diff.size else 0.0
    ok = not notes and bool(np.all(diff <= atol + rtol * scale))
    return Comparison(name, engines, max_abs, max_rel, ok, "; ".join(notes))


@dataclass
class CrossCheckReport:
    """What ``crosscheck`` found; ``ok`` is True only when every pair agrees on every input."""

    comparisons: list[Comparison]
    engines: list[str]
    atol: float
    rtol: float
    gradients: dict = field(default_factory=dict, repr=False)  # engine -> input -> array
    skipped: dict = field(default_factory=dict)                 # engine -> why it did not run

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.comparisons)

    def __bool__(self):
        return self.ok

    def to_dict(self) -> dict:
        return {"ok": self.ok, "engines": list(self.engines), "atol": self.atol, "rtol": self.rtol,
                "comparisons": [{**asdict(c), "engines": list(c.engines)} for c in self.comparisons],
                "skipped": dict(self.skipped)}

    def _rows(self):
        header = ("input", "engines", "max abs error", "max rel error", "agree", "note")
        rows = [(c.input, " vs ".join(c.engines), f"{c.max_abs:.3g}", f"{c.max_rel:.3g}",
                 "yes" if c.ok else "NO", c.note) for c in self.comparisons]
        return header, rows

    def to_markdown(self) -> str:
        header, rows = self._rows()
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        lines.append(f"\n{'All engines agree' if self.ok else 'DISAGREEMENT'} "
                     f"(atol={self.atol}, rtol={self.rtol}).")
        lines += [f"Not run: {engine} ({why})." for engine, why in self.skipped.items()]
        return "\n".join(lines)

    _repr_markdown_ = to_markdown

    def __str__(self) -> str:
        header, rows = self._rows()
        widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
        line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
        text = [line(header), line("-" * w for w in widths), *(line(r) for r in rows)]
        text.append(f"{'all engines agree' if self.ok else 'DISAGREEMENT'} (atol={self.atol}, rtol={self.rtol})")
        text += [f"not run: {engine} ({why})" for engine, why in self.skipped.items()]
        return "\n".join(text)

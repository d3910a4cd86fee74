"""The layering is the architecture: codegen knows only the IR; the front end never asks JAX
for a derivative."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imports(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


def test_codegen_imports_only_the_ir_from_symgrad():
    for path in (ROOT / "codegen").glob("*.py"):
        for module in _imports(path):
            if module.startswith("symgrad"):
                assert module.startswith("symgrad.ir"), f"{path.name} imports {module}"


def test_no_jax_differentiation_outside_the_cross_checks():
    for path in list((ROOT / "symgrad").rglob("*.py")) + list((ROOT / "codegen").rglob("*.py")):
        if path.parent.name == "check":  # the cross-checks: there jax.grad is the reference
            continue
        text = path.read_text()
        for banned in ("jax.grad", "jax.vjp", "jax.jvp", "jax.value_and_grad", "jax.jacfwd", "jax.jacrev"):
            assert banned not in text, f"{path.relative_to(ROOT)} uses {banned}"

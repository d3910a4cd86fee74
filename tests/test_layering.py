"""The layering is the architecture: codegen knows only the IR; the front end reaches codegen and
its speed layer through one door (the engine); the modules import each other without a circle;
and the front end never asks JAX for a derivative."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAMESPACES = {"symgrad", "codegen"}  # the packages' __init__: the public namespaces, above everything

# Imports inside functions, each with its reason; anything else is a circle being hidden.
LATE_IMPORTS = {
    "symgrad.cli": "a subcommand's modules are loaded only when it runs",
    "symgrad.check.crosscheck": "jax and torch are references, imported when a cross-check asks",
    "symgrad.check.torch_bridge": "the public namespace, looked up when a function is run on torch",
    "symgrad.ops.linalg": "scipy, 0.14-0.2 s of every import, only to name a singular matrix's zero pivot",
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for package in NAMESPACES for p in (ROOT / package).rglob("*.py")}


def _imports(path: Path, *, late_only=False):
    """(module imported, whether the import is inside a function), submodules resolved."""
    tree = ast.parse(path.read_text())
    late = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
            for n in ast.walk(f) if n is not f}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module
                     for a in node.names]
        else:
            continue
        for name in names:
            if not late_only or id(node) in late:
                yield name, id(node) in late


def _graph():
    graph = {}
    for name, path in MODULES.items():
        if name in NAMESPACES:
            continue
        graph[name] = {m for m, _ in _imports(path) if m in MODULES and m not in NAMESPACES and m != name}
    return graph


def test_the_modules_import_each_other_without_a_circle():
    graph, state, stack = _graph(), {}, []

    def visit(module):
        state[module] = "open"
        stack.append(module)
        for dependency in sorted(graph[module]):
            if state.get(dependency) == "open":
                cycle = stack[stack.index(dependency):] + [dependency]
                raise AssertionError("import circle: " + " -> ".join(cycle))
            if dependency not in state:
                visit(dependency)
        stack.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module)


def test_imports_inside_functions_only_where_a_reason_is_given():
    for name, path in MODULES.items():
        late = sorted({m for m, _ in _imports(path, late_only=True)})
        if late:
            assert name in LATE_IMPORTS, f"{name} imports {late} inside a function"


def test_codegen_imports_only_the_ir_from_symgrad():
    for name, path in MODULES.items():
        if name.startswith("codegen"):
            for module, _ in _imports(path):
                if module.startswith("symgrad"):
                    assert module.startswith("symgrad.ir"), f"{name} imports {module}"


def test_the_front_end_reaches_codegen_through_the_engine():
    """Deferred placeholders, rerolled loops and replays are the engine's business (and the two
    replays': symgrad.replay, which the engine runs, and the trace replay, symgrad.cycles and
    symgrad.replaying, whose chain of cycles runs the engine's program as codegen.cycle_scan's
    loop); the tour only reads codegen's counters."""
    allowed = {"symgrad.engine", "symgrad.replay", "symgrad.cycles", "symgrad.replaying", "symgrad.tour"}
    for name, path in MODULES.items():
        if name.startswith("symgrad") and name not in allowed:
            for module, _ in _imports(path):
                assert not module.startswith("codegen"), f"{name} imports {module}"


def test_no_jax_differentiation_outside_the_cross_checks():
    for path in list((ROOT / "symgrad").rglob("*.py")) + list((ROOT / "codegen").rglob("*.py")):
        if path.parent.name == "check":  # the cross-checks: there jax.grad is the reference
            continue
        text = path.read_text()
        for banned in ("jax.grad", "jax.vjp", "jax.jvp", "jax.value_and_grad", "jax.jacfwd", "jax.jacrev"):
            assert banned not in text, f"{path.relative_to(ROOT)} uses {banned}"

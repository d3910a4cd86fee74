"""``g.lower(*args)``: a compiled gradient function as mathematics, as JAX source, as a JAX function.

The function is traced once (the one tracing step, symgrad.tracing) into two programs, the value
and gradient and the forward only, with the user's names: parameters keep theirs (a pytree's
leaves are ``params_w``, ``layers_0``), gradients are ``grad_<name>``.  Tensors the function reads
from its closure are constants of the module.

A symbolic dimension (``symgrad.spec("f32[b,5]")``) is traced at a large prime size that stands
for it; every shape and every number in the programs that the prime divides is then rewritten in
terms of the symbol (a mean's ``1/(3*10007)`` becomes ``1/(3*b)``), and the emitted program reads
``b`` from its argument's shape, so jax.export's shape polymorphism runs it at any size.  A second
trace at other primes must give the same program, or the function uses the size some other way
and is refused.
"""
from __future__ import annotations

import functools
import inspect
import keyword
import re

import jax
import numpy as np
import sympy as sp

from symgrad import engine, export_artifact
from symgrad.symbolic import _inline

SHAPE_TEXT = re.compile(r"^(?P<dtype>f16|f32|f64|u8|i8|i16|i32|i64|bool)\[(?P<dims>[\w\s,]*)\]$")
SHORT_DTYPES = {"f16": "float16", "f32": "float32", "f64": "float64", "u8": "uint8", "i8": "int8", "i16": "int16",
                "i32": "int32", "i64": "int64", "bool": "bool"}
NEAR = 8  # how far from a multiple of a stand-in a size may be and still be read as one (n - 1)
PRIMES = ((10007, 10009, 10037, 10039, 10061), (10067, 10069, 10079, 10091, 10093))  # two traces' stand-ins


STAND_INS = {p: sp.Symbol(f"n{p}") for p in PRIMES[0] + PRIMES[1]}


def spec(text: str) -> jax.ShapeDtypeStruct:
    """``"f32[b,5]"``: an argument's shape and dtype; a name is a symbolic dimension (any size)."""
    match = SHAPE_TEXT.match(text.replace(" ", ""))
    if not match:
        raise ValueError(f"spec({text!r}): expected DTYPE[DIMS], e.g. f32[b,5] "
                         f"(DTYPE one of {', '.join(SHORT_DTYPES)}; a DIM is a size or a name)")
    dims = [d for d in match["dims"].split(",") if d]
    for d in dims:
        if not (d.isdigit() or d.isidentifier()):
            raise ValueError(f"spec({text!r}): dimension {d!r} is neither a size nor a name")
    shape = tuple(int(d) if d.isdigit() else d for d in dims)
    dtype = np.dtype(SHORT_DTYPES[match["dtype"]])
    if all(isinstance(d, int) for d in shape):
        return jax.ShapeDtypeStruct(shape, dtype)
    return jax.ShapeDtypeStruct(jax.export.symbolic_shape(",".join(map(str, shape)), scope=_SCOPE), dtype)


_SCOPE = jax.export.SymbolicScope()  # specs made apart may meet in one function


class Argument:
    """One array the function takes: its name, dtype, and shape (ints, or names of symbolic dims)."""

    def __init__(self, name, shape, dtype, differentiated):
        self.name, self.shape, self.dtype, self.differentiated = name, tuple(shape), np.dtype(dtype), differentiated

    def text(self) -> str:
        return f"{self.dtype.name}[{','.join(map(str, self.shape))}]"

    def at(self, sizes) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(tuple(sizes.get(d, d) for d in self.shape), self.dtype)


def lower(vg, args, kwargs, platforms=("cpu",)) -> "Lowered":
    """``vg`` (a symgrad.compiled.ValueAndGrad) lowered for arguments like ``args``/``kwargs``."""
    name = getattr(vg.fn, "__name__", "fn")
    paths, tree = jax.tree_util.tree_flatten_with_path((tuple(args), dict(kwargs)))
    differentiated_args = {k for k in vg.argnums if k < len(args)}
    arguments = [Argument(n, _dims(name, n, leaf), leaf.dtype, path[1].idx in differentiated_args
                          if path[0].idx == 0 else False)
                 for n, (path, leaf) in zip(_leaf_names(vg.fn, paths), paths)]
    dims = list(dict.fromkeys(d for a in arguments for d in a.shape if isinstance(d, str)))
    if len(dims) > len(PRIMES[0]):
        raise ValueError(f"lower({name}): at most {len(PRIMES[0])} symbolic dimensions, got {dims}")
    for a in arguments:
        for size in a.shape:
            if isinstance(size, int) and sp.Integer(size) != _in_symbols(sp.Integer(size), STAND_INS):
                raise ValueError(f"lower({name}): argument {a.name!r} has size {size}, too near a multiple of the "
                                 f"primes that stand for symbolic dimensions while tracing ({PRIMES})")
    first = _traced_programs(vg, tree, arguments, dims, PRIMES[0])
    sources = _emitted(name, first[1:3], dims)
    if dims and sources != _emitted(name, _traced_programs(vg, tree, arguments, dims, PRIMES[1])[1:3], dims):
        raise ValueError(f"lower({name}): the program depends on the size of {', '.join(dims)} beyond shapes, "
                         f"means and slices (a tensor made with that size, or a Python branch on it): give the "
                         f"dimension a fixed size")
    return Lowered(vg, name, tree, arguments, dims, *first, sources, tuple(platforms))


def _emitted(name, programs, dims) -> list[str]:
    """Each program's JAX source; an operation that needs a symbolic size as a number is named."""
    try:
        return [engine.source(p) for p in programs]
    except TypeError as error:
        if not dims:
            raise
        raise ValueError(f"lower({name}): an operation needs the size of {', '.join(dims)} as a number "
                         f"({error}): give the dimension a fixed size") from error


def _dims(fn_name, arg_name, leaf) -> tuple:
    shape = getattr(leaf, "shape", None)
    if shape is None or not hasattr(leaf, "dtype"):
        raise TypeError(f"lower({fn_name}): argument {arg_name!r} is a {type(leaf).__name__}, not an array, "
                        f"a Tensor, a jax.ShapeDtypeStruct or a symgrad.spec")
    out = []
    for d in shape:
        if isinstance(d, (int, np.integer)):
            out.append(int(d))
        elif str(d).isidentifier():
            out.append(str(d))
        else:
            raise ValueError(f"lower({fn_name}): argument {arg_name!r} has dimension {d}; a symbolic dimension "
                             f"must be a plain name")
    return tuple(out)


def _leaf_names(fn, paths) -> list[str]:
    """Each leaf's name: its parameter's, and for a pytree's leaves the keys down to it."""
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = []
    for path, _ in paths:
        first = path[1]
        base = (params[first.idx] if first.idx < len(params) else f"arg{first.idx}") if path[0].idx == 0 \
            else str(first.key)
        parts = [base] + [str(getattr(p, "key", getattr(p, "idx", getattr(p, "name", "")))) for p in path[2:]]
        text = re.sub(r"\W", "_", "_".join(parts))
        text = text if text.isidentifier() and not keyword.iskeyword(text) else f"a_{text}"
        while text in names:
            text += "_"
        names.append(text)
    return names


def _traced_programs(vg, tree, arguments, dims, primes):
    """(Traced, value-and-gradient Program, forward Program, constants), symbolic dims rewritten."""
    sizes = dict(zip(dims, primes))
    captured = []

    def run(*flat):
        args, kwargs = jax.tree_util.tree_unflatten(tree, flat)
        with jax.ensure_compile_time_eval():  # tensors made inside fn are constants, not traced values
            captured.append(vg.trace(True, None, args, kwargs, [a.name for a in arguments]))

    try:
        jax.eval_shape(run, *[a.at(sizes) for a in arguments])
    except Exception as error:
        if sizes:
            error.add_note(f"(lower({vg.fn.__name__}) traces it with the symbolic dimensions standing at sizes "
                           f"{sizes})")
        raise
    traced = captured[0]
    with engine.building():
        program, forward = traced.program(True), traced.program(False)
    renames = _input_names(program, arguments)
    taken = {s.name for s, _ in program.assignments} | {renames.get(s, s).name for s in program.inputs}
    symbols = {p: sp.Symbol(d if d not in taken else f"{d}_size", integer=True, positive=True)
               for d, p in sizes.items()}
    consts = [np.asarray(v) for v in traced.walk.inputs[len(arguments):]]
    for c in consts:
        if any(sp.Integer(n) != _in_symbols(sp.Integer(n), symbols) for n in c.shape):
            raise ValueError(f"lower({vg.fn.__name__}): the function makes a tensor whose size depends on "
                             f"{', '.join(dims)}; give the dimension a fixed size")
    return traced, *[_symbolic(p, symbols, renames) for p in (program, forward)], consts, list(symbols.values())


def _input_names(program, arguments) -> dict:
    """The program's input symbols -> symbols with the user's names (constants are ``const``)."""
    taken = {s.name for s, _ in program.assignments}
    renames = {}
    for k, sym in enumerate(program.inputs):
        name = arguments[k].name if k < len(arguments) else "const" if k == len(arguments) \
            else f"const_{k - len(arguments)}"
        if name != sym.name:
            if name in taken:
                name = f"{name}_arg"
            renames[sym] = sp.Symbol(name, real=True)
    return renames


def _symbolic(program, symbols: dict, renames: dict):
    """``program`` with inputs renamed and every multiple of a stand-in prime written with its symbol."""
    out = program.copy()
    mapping = dict(renames)

    def rewrite(expr):
        for number in expr.atoms(sp.Rational):
            if number not in mapping:
                mapping[number] = _in_symbols(number, symbols)
        return expr.xreplace(mapping)

    def shape(s):
        return tuple(int(n) if n.is_Integer else n for n in (_in_symbols(sp.Integer(n), symbols) for n in s))

    out.inputs = [mapping.get(s, s) for s in program.inputs]
    out.assignments = [(s, rewrite(e)) for s, e in program.assignments]
    out.outputs = [(rewrite(e), shape(s), d) for e, s, d in program.outputs]
    out.shapes = {mapping.get(s, s): shape(v) for s, v in program.shapes.items()}
    out.dtypes = {mapping.get(s, s): v for s, v in program.dtypes.items()}
    for sym in symbols.values():
        out.shapes[sym], out.dtypes[sym] = (), "int64"
    return out


def _in_symbols(number, symbols):
    """A rational number with each stand-in prime that divides it replaced by its symbol, and a
    numerator or denominator a few away from a multiple of one (``x[1:]`` has ``n - 1`` rows) as
    that multiple plus the few."""
    p, q = _integer_in_symbols(int(number.p), symbols), _integer_in_symbols(int(number.q), symbols)
    return number if p.is_Integer and q.is_Integer else p / q


def _integer_in_symbols(k, symbols):
    factor = sp.S.One
    for prime, sym in symbols.items():
        while k and k % prime == 0:
            k, factor = k // prime, factor * sym
    for prime, sym in symbols.items():
        multiple = round(k / prime)
        if multiple and abs(k - multiple * prime) <= NEAR:
            return factor * (_integer_in_symbols(multiple, symbols) * sym + (k - multiple * prime))
    return factor * k


class Lowered:
    """A compiled gradient function lowered for arguments of given shapes: ``gradient_exprs``
    (SymPy), ``source`` (a module that imports jax and numpy only), ``jax_function`` (pure JAX),
    ``exported`` (jax.export, per program) and ``save(directory)``."""

    def __init__(self, vg, name, tree, arguments, dims, traced, program, forward, consts, sizes, sources, platforms):
        self.vg, self.name, self.tree, self.traced = vg, name, tree, traced
        self.arguments, self.dims, self.sizes = arguments, dims, sizes  # sizes: the dims' SymPy symbols
        self.programs = {"value_and_grad": program, "value": forward}
        self.consts, self.platforms = consts, platforms
        self.source = module_source(self, sources)
        namespace: dict = {}
        exec(compile(self.source, f"<symgrad export of {name}>", "exec"), namespace)
        self.jax_function = self._pytree_function(namespace["value_and_grad"], True)
        self.forward_function = self._pytree_function(namespace["value"], False)

    @functools.cached_property
    def gradient_exprs(self) -> dict:
        """Each differentiated leaf's gradient as one SymPy expression (the program inlined)."""
        program = self.programs["value_and_grad"]
        with engine.building():
            exprs = _inline(program, [e for e, _, _ in program.outputs[1 + len(self.traced.aux):]])
        return dict(zip([self.arguments[i].name for i in self.traced.differentiated], exprs))

    @property
    def gradient_names(self) -> list[str]:
        """The differentiated leaves' names, in the order of the gradients' leaves in the results."""
        starts, arg_trees, _ = self.traced.structure
        differentiated = set(self.traced.differentiated)
        return [self.arguments[starts[k] + i].name for k in self.vg.argnums
                for i in range(arg_trees[k].num_leaves) if starts[k] + i in differentiated]

    def _pytree_function(self, flat_fn, grad_mode):
        def function(*args, **kwargs):
            flat = jax.tree_util.tree_leaves((args, kwargs))
            return self.vg.results(self.traced, flat_fn(*flat), grad_mode)

        function.__name__ = flat_fn.__name__
        return function

    @functools.cached_property
    def exported(self) -> dict:
        """``jax.export.Exported`` of each program, at the arguments' shapes (symbolic dims kept)."""
        scope = jax.export.SymbolicScope()
        sizes = {}
        if self.dims:
            sizes = dict(zip(self.dims, jax.export.symbolic_shape(",".join(self.dims), scope=scope)))
        args, kwargs = jax.tree_util.tree_unflatten(self.tree, [a.at(sizes) for a in self.arguments])
        return {name: jax.export.export(jax.jit(fn), platforms=self.platforms)(*args, **kwargs)
                for name, fn in (("value_and_grad", self.jax_function), ("value", self.forward_function))}

    def save(self, directory, overwrite: bool = False):
        """The artifact directory (symgrad.export_artifact); returns its path."""
        return export_artifact.save(self, directory, overwrite)


def module_source(lowered, sources) -> str:
    """The readable, standalone module: the constants, then each program as a function."""
    lines = [f'"""{lowered.name}, exported by symgrad: its value and symbolic gradient as JAX, and its forward.',
             "",
             "Arguments: " + ", ".join(f"{a.name}: {a.text()}" for a in lowered.arguments) + ".",
             "value_and_grad returns the value, then " + ", ".join(
                 n for n in lowered.programs["value_and_grad"].output_names[1:]) + ".",
             '"""', "import jax", "import jax.numpy as jnp", "import numpy as np", ""]
    lines += engine.helpers_called(sources).splitlines()
    program = lowered.programs["value_and_grad"]
    const_names = [s.name for s in program.inputs[len(lowered.arguments):]]
    for name, value in zip(const_names, lowered.consts):
        lines.append(f"{name.upper()} = {_array_source(value)}")
    for program, source in zip(lowered.programs.values(), sources):
        lines += ["", _function_source(program, source, len(lowered.arguments), lowered.sizes)]
    return "\n".join(lines)


def _array_source(value) -> str:
    """A constant as source: a list of numbers, or its bytes where a number has no literal (NaN, inf)."""
    kind = "np.bool_" if value.dtype == np.bool_ else f"np.{value.dtype.name}"
    if value.dtype == np.bool_ or np.isfinite(value).all():
        return f"np.array({value.tolist()!r}, dtype={kind})"
    return f"np.frombuffer(bytes.fromhex({value.tobytes().hex()!r}), dtype={kind}).reshape({value.shape!r})"


def _function_source(program, source, arity, sizes) -> str:
    """One program's function: constants as defaults, symbolic dims read from argument shapes."""
    text = source[source.index(f"def {program.name}("):]
    _, body = text.split("\n", 1)
    params = [s.name for s in program.inputs]
    signature = ", ".join(params[:arity] + [f"{p}={p.upper()}" for p in params[arity:]])
    read = ""
    for sym in sizes:
        x, axis = next((x, axis) for x in program.inputs for axis, n in enumerate(program.shapes[x]) if n == sym)
        read += f"    {sym.name} = {x.name}.shape[{axis}]\n"
    return f"def {program.name}({signature}):\n{read}{body}"

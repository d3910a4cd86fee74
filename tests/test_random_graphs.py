"""Random graphs, cross-checked two ways.

1. ``test_random_graphs_agree_with_finite_differences_and_jax``: small graphs of smooth ops on
   ordinary values, symgrad's symbolic gradient against finite differences and ``jax.grad``.

2. ``test_random_programs_agree_with_pytorch``: a differential fuzzer (issue 17).  Hypothesis
   writes a random program, line by line, as Python source run once with ``T = torch`` and once
   with ``T = symgrad`` on the same NumPy arrays.  A program composes every registered op with a
   ``torch_fn`` (its spelling is read back from the registry's source; its inputs follow the op's
   ``examples`` and ``domain``) and the public API users write: 0-d and empty shapes,
   broadcasting, views (reshape/view/flatten, transpose/permute/t/.T, expand, indexing and
   slicing, unsqueeze/squeeze), in-place ops (add_, mul_, x += y, fill_, copy_, x[i] = y) on
   leaves under no_grad and on results under grad mode, detach(), requires_grad_() and no_grad
   sections; values include +-1e4, +-1e30, 0, -0.0, denormals, +-inf and nan, in float32 and
   float64; half the programs run on symgrad's plain path (no speed layer).  Every line must
   raise in both or in neither (the same exception class); then every
   tensor's dtype, shape, requires_grad, is_leaf, grad_fn and values, and the gradient of every
   leaf that requires grad, must agree (see ``mismatches`` for the tolerance).  A failure prints
   the shrunk program as Python to paste.  ``pytest --slow`` runs 10,000 programs.

Known discrepancies are excluded by name below, each with what it is; the fuzzer skips only
programs that match one (``hypothesis.event`` counts them: ``--hypothesis-show-statistics``).
"""
import ast
import builtins
import contextlib
import copy
import functools
import inspect
import math
import re
import warnings

import numpy as np
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

import symgrad
import symgrad as torch
import symgrad.nn.functional as F
from symgrad.ops.registry import REGISTRY
from op_cases import MATRIX_DOMAINS

# ------------------------------------------------------------------ known discrepancies
# Each class the fuzzer found and symgrad still has: its name, the one-line reason, and which programs
# are in it (a predicate on the program as written and run on PyTorch: the tags its lines carry, the
# errors PyTorch raised).  Only programs in a class are skipped; fix one, delete its line.

def _tagged(*tags):
    return lambda p: any(p.tagged(t) for t in tags)


def _raised(*words):
    """PyTorch raised, on some line, an error whose message holds one of ``words``."""
    return lambda p: any(o is not None and any(w in str(o) for w in words) for o in p.outcomes)


def _refused(*tags):
    """A line carrying one of ``tags`` raised in PyTorch."""
    return lambda p: any(o is not None and set(tags) & t for t, o in zip(p.tags, p.outcomes))


def _accepted(*tags):
    """A line carrying one of ``tags`` ran in PyTorch."""
    return lambda p: any(o is None and set(tags) & t for t, o in zip(p.tags, p.outcomes))


def _after(tag, *others):
    """A line carrying ``tag`` and one of ``others``."""
    return lambda p: any(tag in t and set(others) & t for t in p.tags)


def _self_overlap(p) -> bool:
    """PyTorch refused, as an overlap, a line that writes a tensor into an index of itself."""
    return any(o is not None and "refer to a single memory location" in str(o)
               and re.fullmatch(r"(\w+)\[.*\] = \1", line.removeprefix("with T.no_grad(): "))
               for line, o in zip(p.lines, p.outcomes))


def _written_after(tag):
    """A line written in place after a line carrying ``tag``."""
    def matches(p) -> bool:
        first = next((k for k, t in enumerate(p.tags) if tag in t), None)
        return first is not None and any("inplace" in t for t in p.tags[first + 1:])
    return matches


def _written_through_data(p) -> bool:
    """A line writes in place into a tensor that a ``.data`` line made."""
    made = {line.split(" = ")[0] for line in p.lines if line.endswith(".data") and " = " in line}
    return any("inplace" in t and line.removeprefix("with T.no_grad(): ").split(" ")[0].split(".")[0].split("[")[0]
               in made for t, line in zip(p.tags, p.lines))


ROUNDING = ("floor", "ceil", "round", "trunc", "sign")
KNOWN_DISCREPANCIES = {  # name: (reason, programs in the class)
    # storage and autograd bookkeeping
    "views that require grad without history": (
        "a view made under no_grad of x that requires grad, or made before x.requires_grad_(): PyTorch's requires "
        "grad with no grad_fn (no gradient flows through it until x is written), symgrad's does not require grad",
        lambda p: p.tagged("no_grad requires grad") or _after("requires_grad_", "aliased")(p)),
    "PyTorch returns the input itself": ("flatten(d, d) returns x itself in PyTorch; symgrad records a view "
                                         "(is_leaf, grad_fn, .grad)", _tagged("same object")),
    "contiguity": ("no strides: x.t().view(-1) is accepted, x.t().reshape(-1) is ViewBackward0 (PyTorch copies); "
                   "x[::2] = x or x[None] = x for x of shape (1, 3) is accepted (the same elements in the same "
                   "order; PyTorch's overlap check sees other strides for the size-1 dims and refuses)",
                   lambda p: p.tagged("reshape copies") or _raised("view size is not compatible")(p)
                   or _self_overlap(p)),
    "fill_ over history cuts the gradient": ("y.zero_() on y = x * inf sends no gradient back; PyTorch's zeros "
                                             "make NaN", _tagged("fill_ over history", "zero_ over history")),
    "copy_ over history": ("y.copy_(z) on a y with history: y's inputs get .grad None, PyTorch's get zeros",
                           _tagged("copy_ over history", "op:copy_over")),
    "writes through .data into saved values": (
        "x.data written in place after a graph saved x: PyTorch's .data has a version counter of its own, so its "
        "backward reads the new values; symgrad's nodes keep the values the graph saw", _written_through_data),
    "batched matmul's operand copied": (
        "matmul with an operand of 3 or more dims: PyTorch folds or expands an operand into a copy (which one "
        "depends on the ranks, broadcasting and strides), so writing it in place afterwards does not refuse the "
        "backward; symgrad keeps the operand and refuses as for any saved input", _written_after("batched matmul")),
    "fill_ into elements that share memory": (
        "fill_, zero_ or x.copy_(x) into an expanded view: symgrad writes a whole one as PyTorch does, and refuses "
        "a part of one (PyTorch writes the elements it shares) or one with history (PyTorch refuses a fill only at "
        "the backward, and copies x into itself without a kernel)", _accepted("alike into shared elements")),
    "einsum's result written in place": (
        "an einsum that contracts returns, in PyTorch, a view of its internal bmm's output, so an in-place op on it "
        "has grad_fn AsStridedBackward0; symgrad's einsum result is a tensor of its own (AddBackward0 and the like; "
        "values and gradients agree; docs/api.md)", _written_after("op:einsum")),
    "in-place cast's grad_fn": ("x32.sub_(y64) has grad_fn ToCopyBackward0; PyTorch's is SubBackward0",
                                _tagged("inplace from another dtype")),
    "full slice's grad_fn": ("x[:] has grad_fn AliasBackward0; PyTorch's is SliceBackward0",
                             _tagged("a slice that keeps its dim")),
    # missing or different API
    "mT below 2-D": ("x.mT raises IndexError for 0-d (PyTorch: x) and 1-D (PyTorch: RuntimeError)",
                     _tagged("mT@0d", "mT@1d")),
    "permute() of a 0-d tensor": ("x.permute() is accepted; PyTorch raises TypeError", _tagged("permute@0d")),
    "-1 in the shape of an empty tensor": ("zeros(2, 0).reshape(0, -1) is accepted; PyTorch raises RuntimeError",
                                           _refused("-1 in the shape of an empty tensor")),
    "clamp bounds of two kinds": ("clamp(x, 2.0, tensor) through the registry's call raises TypeError; PyTorch "
                                  "accepts it", _tagged("clamp@numbers and tensors")),
    "topk ties": ("topk among equal values: PyTorch's CPU kernel picks an order no simple rule gives",
                  lambda p: "topk" in p.text.lower()),
    "softmax of a bool tensor": ("log_softmax of an empty bool tensor raises NotImplementedError; PyTorch's is empty",
                                 _accepted("softmax@bool", "log_softmax@bool")),
    # errors PyTorch raises and symgrad does not
    "PyTorch's clamp backward with broadcast bounds": ("clamp(x, lo, hi) broadcasting x up: PyTorch's backward "
                                                       "raises, symgrad's runs",
                                                       lambda p: p.tagged("op:clamp") and _raised(
                                                           "doesn't match the broadcast shape")(p)),
    "index_fill's backward with a negative index": ("index_fill(x, d, negative index, tensor value): PyTorch's "
                                                    "backward raises IndexError, symgrad's runs (api.md)",
                                                    lambda p: "index_fill" in p.text
                                                    and _raised("index out of range in self")(p)),
    "batch_norm and group_norm with an infinite weight": (
        "PyTorch's kernels compute x * alpha + beta per channel, beta = bias - mean * alpha: an infinite weight "
        "makes the channel NaN (inf - inf); symgrad's (x - mean) / std * weight + bias is +-inf there (api.md)",
        lambda p: ("batch_norm" in p.text or "group_norm" in p.text) and "inf" in p.text),
    "layer_norm's input gradient with an infinite weight": (
        "PyTorch's backward kernel sums dy * w and dy * w * xhat first and subtracts them from N dy w: with an "
        "infinite weight some entries keep +-inf where symgrad's derivative meets inf - inf (NaN; api.md)",
        lambda p: "layer_norm" in p.text and "inf" in p.text),
    "BCE of a computed input outside [0, 1]": ("binary_cross_entropy checks its input's and target's range only "
                                               "where the values are computed already (api.md: the check would "
                                               "cost a device sync per call); after an op the loss is NaN where "
                                               "PyTorch raises",
                                               _raised("elements of input should be between 0 and 1",
                                                       "elements of target should be between 0 and 1")),
    # numbers
    "the sign bit of a NaN": ("signbit or copysign of a NaN an op computed (atanh(2), sqrt(-1), log(nan)): IEEE "
                              "leaves a NaN result's sign open; XLA's differs from PyTorch's CPU kernels, which "
                              "differ among themselves (api.md)", lambda p: "sign of a NaN" in p.flags),
    "addr of two dtypes to second order": (
        "a backward through create_graph gradients of addr whose vectors have two dtypes: symgrad refuses the "
        "vector whose first-order gradient PyTorch's mv refuses on every path to it, also through the other "
        "vector's gradient, which PyTorch's double backward differentiates (api.md)",
        lambda p: p.tagged("second order") and "addr" in p.text and "float32" in p.text and "float64" in p.text),
    "ops without a double backward in PyTorch": (
        "a backward through create_graph gradients of an op whose backward PyTorch cannot differentiate "
        "(multi_margin_loss): PyTorch raises 'derivative for ... is not implemented', symgrad differentiates "
        "(tests/test_second_order.py skips those ops)",
        lambda p: p.tagged("second order") and _raised("is not implemented")(p)),
    "second derivatives at a norm's zero": (
        "a backward through create_graph gradients of a norm or distance (dist, vector_norm, cdist...) where "
        "its argument is zero: both first derivatives are the subgradient 0; PyTorch's double backward there "
        "is NaN (0/0 in its formula), symgrad's differentiates the masked first derivative (0); at other "
        "points tests/test_second_order.py compares them",
        lambda p: p.tagged("second order") and any(name in p.text for name in ("dist", "norm", "normalize"))),
    "second derivatives at a non-finite value": (
        "a backward through create_graph gradients where an input holds inf or NaN: PyTorch's double-backward "
        "formulas pick their branches there apart from its first-order ones (smooth_l1_loss at a NaN target: "
        "first order takes the quadratic branch, second order the linear one); symgrad differentiates its "
        "first-order gradient", lambda p: p.tagged("second order") and ("inf" in p.text or "nan" in p.text)),
    "denormals flushed to zero": ("XLA on CPU flushes denormals: 1e-40 is 0 in float32, sign(1e-40) is 0",
                                  lambda p: "denormal input" in p.flags or (
                                      "denormal scalar" in p.flags and p.precision == "float32")),
    "one tensor as two operands, at 1e30": ("lerp(x, x, 1e30) and the like: PyTorch sums each operand's partial "
                                           "gradient in floats, which cancel to 0 at 1e30; symgrad differentiates "
                                           "the op as a function of x, exactly (api.md)",
                                           lambda p: "e+30" in p.text and any(
                                               re.search(r"\((v\d+), \1\b", line) for line in p.lines)),
    "XLA's division rewrites at 1e30": ("XLA's algebraic simplifier rewrites (a / b) / c to a / (b * c) and "
                                        "a / (b / c) to (a * c) / b, which overflow at +-1e30 where PyTorch's "
                                        "divisions do not: (x / x) / (x / x) is NaN at 1e30 (reliability.md)",
                                        lambda p: "e+30" in p.text and sum(
                                            line.count("/") + line.count("div") for line in p.lines) >= 2),
    "rounding at 1e30 in composite kernels": ("cross, bmm/einsum, layer/group/batch norm and adaptive pooling at "
                                              "+-1e30: terms of that size are added in another order than PyTorch's "
                                              "(a cancellation may leave an ulp of 1e30); logcumsumexp's backward "
                                              "through the cotangent's logs absorbs them there (api.md)",
                                              lambda p: "e+30" in p.text and any(
                                                  name in p.text for name in ("cross", "bmm", "einsum", "layer_norm",
                                                                              "group_norm", "batch_norm", "adaptive_avg",
                                                                              "logcumsumexp"))),
    "float64 cross's rounding": ("PyTorch's float64 cross is fma(a[j], b[k], -(a[k] b[j])), keeping the first "
                                 "product's rounding (cross(x, x) ~1e-17); symgrad's float64 cross is XLA's (0 there: "
                                 "api.md), which an infinite factor makes NaN against PyTorch's +-inf",
                                 lambda p: "cross" in p.text and "float64" in p.text and "inf" in p.text),
    "convolution 'same' with a bias of another dtype": (
        "conv2d(x64, w64, b32, padding='same') with an even kernel: PyTorch pads the input itself and its bias dtype "
        "check is skipped on that path; symgrad raises the RuntimeError PyTorch raises for any other padding",
        lambda p: "convolution_bias" in p.text and "float32" in p.text and "float64" in p.text),
    "a convolution's input gradient through a non-finite kernel": (
        "the input gradient of a convolution whose kernel holds an inf or NaN is NaN wherever XLA's transposed "
        "convolution meets its padding zeros (0 * inf), where PyTorch's sums only the products that exist "
        "(plain jax.grad does the same; docs/api.md)",
        lambda p: "convolution" in p.text and ("inf" in p.text or "nan" in p.text) and "backward" in p.text),
    "einsum of two dtypes": ("an einsum of float32 and float64 operands: PyTorch accepts it when its contraction "
                             "path sums no label of size > 1; symgrad refuses every contraction",
                             lambda p: "einsum" in p.text and "float32" in p.text and "float64" in p.text),
    "addcdiv of a bool or integer tensor": ("addcdiv/addcmul with a bool or integer operand: PyTorch's backward "
                                            "raises (a Float gradient can't be cast to Bool or Long), symgrad's runs",
                                            lambda p: p.tagged("addcdiv@bool", "addcmul@bool", "addcdiv@int",
                                                               "addcmul@int")
                                            and _raised("can't be cast to the desired output type")(p)),
    "lerp of bool tensors": ("lerp(b, b, w) of bool tensors with a weight that requires grad: PyTorch's backward "
                             "raises (bool subtraction), symgrad's runs",
                             lambda p: "lerp" in p.text and _raised("with two bool tensors is not supported")(p)),
    "kernels PyTorch lacks for bool or int": ("an op of bool or integer tensors that PyTorch's CPU kernels refuse and "
                                              "symgrad computes (most are refused now, as PyTorch: abs, neg, -, "
                                              "rounding, relu, remainder, addcdiv, addcmul)", lambda p: _refused(
                                                  *(f"{n}@{k}" for n in ELEMENTWISE for k in ("bool", "int")))(p)),
    "hardtanh with a NaN bound": ("hardtanh(x, nan, 2.0) ignores the NaN bound; PyTorch's values are NaN and its "
                                  "backward raises", lambda p: any("hardtanh" in line and "nan" in line
                                                                   for line in p.lines)),
    "gelu at infinity": ("gelu(inf) is inf; PyTorch's is NaN", _tagged("gelu@inf")),
    "elu with a non-finite alpha": ("elu(-0.0, alpha=-inf), celu(0.0, alpha=inf), celu(0.0, alpha=nan) are NaN "
                                    "(alpha times 0); PyTorch's kernels give -0.0 and 0 (the gradient at 0 is NaN)",
                                    lambda p: any(("op:elu" in t or "op:celu" in t) and ("inf" in line or "nan" in line)
                                                  for t, line in zip(p.tags, p.lines))),
    "losses of two dtypes": ("binary_cross_entropy_with_logits(f64, f32), huber_loss(f32, f64) are float64; "
                             "PyTorch's float32", lambda p: any(p.tagged(f"{n}@two dtypes") for n in REGISTRY
                                                                if "loss" in n or "cross_entropy" in n)),
    "the shrinks' two CPU loops": ("hardshrink and softshrink at NaN (a value or lambd): PyTorch's vectorized loop, "
                                   "which computes most of a tensor of 16 float32 or 8 float64 values or more, sends "
                                   "no gradient where its scalar loop (symgrad's: api.md) passes the cotangent",
                                   lambda p: ("hardshrink" in p.text or "softshrink" in p.text)
                                   and ("nan" in p.text or "inf" in p.text)),
    "hardswish's two CPU loops": ("hardswish's gradient at NaN: PyTorch's vectorized loop, which computes most of a "
                                  "tensor of 32 float32 values or more, gives NaN where its scalar loop (symgrad's: "
                                  "api.md) passes the cotangent", lambda p: "hardswish" in p.text and "nan" in p.text),
    "PyTorch's float32 constants in float64": ("float64 hardsigmoid, celu, BCE: PyTorch rounds 1/6, 1/alpha, 1e-12 "
                                               "to float32", lambda p: p.precision == "float64" and (
                                                   p.tagged("op:hardsigmoid", "op:celu", "binary_cross_entropy@0or1"))),
}


# ====================================================================== 1. finite differences

SHAPES = [(2, 3), (3,), (1, 3), (2, 1), ()]
UNARY = {
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "sin": torch.sin, "softplus": F.softplus, "neg": torch.neg,
    "exp_tanh": lambda x: torch.exp(torch.tanh(x)), "log1p_square": lambda x: torch.log(x * x + 1),
    "sqrt1p_square": lambda x: torch.sqrt(x * x + 1), "square": lambda x: x ** 2, "relu": F.relu,
    "sum_last": lambda x: x.sum(-1, keepdim=True) if x.ndim else x, "mean_all": lambda x: x.mean(),
    "log_softmax": lambda x: F.log_softmax(x, -1) if x.ndim else x,
}
BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (b * b + 1), "maximum": torch.maximum, "scalar_mix": lambda a, b: 2.5 * a - b / 3,
}

step = st.tuples(
    st.sampled_from(sorted(UNARY) + sorted(BINARY)),  # op
    st.integers(0, 100), st.integers(0, 100),          # operand picks (modulo the pool)
    st.sampled_from(["", "", "", "detach", "no_grad"]),  # how the step is recorded
)
recipe = st.tuples(
    st.lists(st.sampled_from(SHAPES), min_size=1, max_size=3),  # leaf shapes
    st.lists(step, min_size=1, max_size=6),
    st.integers(0, 2**31 - 1),                                  # values
)


def build(shapes, steps):
    """The recipe as a torch-style function of its leaves."""

    def fn(*leaves):
        pool = list(leaves)
        for op, i, j, how in steps:
            a, b = pool[i % len(pool)], pool[j % len(pool)]
            if how == "detach":
                a = a.detach()
            if how == "no_grad":
                with torch.no_grad():
                    value = UNARY[op](a) if op in UNARY else BINARY[op](a, b)
            else:
                value = UNARY[op](a) if op in UNARY else BINARY[op](a, b)
            pool.append(value)
        return pool[-1].sum() + 0.5 * pool[len(pool) // 2].mean()

    return fn


@settings(max_examples=settings().max_examples if settings().max_examples >= 2000 else 100)  # ~0.16 s each in CI
@given(recipe)
def test_random_graphs_agree_with_finite_differences_and_jax(case):
    shapes, steps, seed = case
    rng = np.random.default_rng(seed)
    leaves = [rng.standard_normal(shape) * 0.8 for shape in shapes]
    blocked = any(how for *_, how in steps)
    against = ("jax",) if blocked else ("finite_differences", "jax")  # differences see through detach
    report = torch.crosscheck(build(shapes, steps), leaves, against=against, atol=1e-6, rtol=1e-5)
    assert report.ok, f"{shapes} {steps}\n{report}"


# ====================================================================== 2. against PyTorch
# ------------------------------------------------------------------------------ values

NAN, INF = math.nan, math.inf
ORDINARY = (1.0, -0.5, 2.0, 0.25, -1.5, 3.0, 0.75, -2.0, 0.3, -0.7, 1.7, -3.1)
EXTREME = (0.0, -0.0, 1e4, -1e4, 1e30, -1e30, 1e-40, -1e-40, INF, -INF, NAN, 1e-310)  # 1e-310: float64's denormal
SCALARS = (2.0, 0.5, -1.5, 3, 0.0, -0.0, 1e30, -1e4, 1e-40, INF, -INF, NAN)
DOMAIN_VALUES = {  # what a fresh input of a registered op's domain holds (op.domain)
    "real": ORDINARY, "positive": (1.0, 0.5, 2.0, 0.25, 3.0), "nonzero": (1.0, -0.5, 2.0, -1.5, 0.25),
    "unit": (0.5, 0.1, 0.9, 0.0, 1.0, 0.25), "kinked": (-1.5, -0.5, 0.0, 0.5, 1.5), "ties": (0.0, 1.0, 2.0),
}
DOMAIN_EXTREME = {"unit": (1.5, -0.5, NAN), "label": (5, -1)}  # out of range: PyTorch raises
LABEL_CLASSES = 5
PROGRAM_SHAPES = ((2, 3), (3,), (), (1, 3), (2, 1), (3, 2), (0,), (2, 0))
MAX_STEPS = 6
DENORMAL = {"float32": (1e-40, -1e-40), "float64": (1e-310,)}  # the palette's denormals, per dtype

HEADER = """\
import numpy as np
from math import inf, nan
import symgrad as T  # or: import torch as T
F = T.nn.functional
w = lambda x: T.tensor(np.resize([-0.75, 0.5, 1.25, -1.5, 0.25], x.shape), dtype=x.dtype)
"""


def _number(value) -> str:
    """A Python literal (inf and nan are names in the program's header), parenthesised if negative."""
    text = repr(value)
    return f"({text})" if text.startswith("-") else text


def _nested(values) -> str:
    if isinstance(values, list):
        return "[" + ", ".join(_nested(v) for v in values) + "]"
    return repr(values)


# ------------------------------------------------------------ registered ops, as source


def _literal(value):
    """An AST for a plain value (numbers, strings, None, dtypes, tuples, lists, slices), or None."""
    if isinstance(value, symgrad.dtype):
        return ast.Attribute(ast.Name("T"), value.name)
    if isinstance(value, float) and not math.isfinite(value):
        return ast.Name(repr(value))
    if value is None or isinstance(value, (bool, int, float, str)):
        return ast.Constant(value)
    if isinstance(value, slice):
        parts = [value.start, value.stop, None if value.step == 1 else value.step]
        nodes = [None if p is None else _literal(p) for p in parts]
        return None if any(n is None and p is not None for n, p in zip(nodes, parts)) else ast.Slice(*nodes)
    if isinstance(value, (tuple, list)):
        items = [_literal(v) for v in value]
        if any(i is None or (isinstance(i, ast.Slice) and isinstance(value, list)) for i in items):
            return None
        return (ast.Tuple if isinstance(value, tuple) else ast.List)(items, ast.Load())
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        items = [_literal(v) for v in value.values()]
        return None if None in items else ast.Dict([ast.Constant(k) for k in value], items)
    return None


@functools.cache
def _module_tree(path):
    with open(path) as f:
        return ast.parse(f.read())


def _function_body(fn):
    """(parameter names, the ``*args`` name or None, returned expression) of a lambda or a one-line
    def, from its source."""
    code = fn.__code__
    params = list(code.co_varnames[:code.co_argcount])
    found = [node for node in ast.walk(_module_tree(inspect.getsourcefile(fn)))
             if isinstance(node, (ast.Lambda, ast.FunctionDef)) and node.lineno == code.co_firstlineno
             and [a.arg for a in node.args.args] == params]
    if len(found) != 1:
        return None
    node = found[0]
    rest = node.args.vararg.arg if node.args.vararg else None
    if isinstance(node, ast.Lambda):
        return params, rest, node.body
    if len(node.body) == 1 and isinstance(node.body[0], ast.Return):
        return params, rest, node.body[0].value
    return None


class _Fold(ast.NodeTransformer):
    """Tensor parameters become their source text and the module parameter ``T``; what is
    computed from attributes alone is evaluated and written as a literal; ``getattr(x, "sum")``
    becomes ``x.sum``; a conditional whose test is known takes its branch."""

    def __init__(self, module, tensors, env):
        self.module, self.tensors, self.env = module, tensors, env

    def visit(self, node):
        names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        if isinstance(node, ast.expr) and not isinstance(node, ast.Constant) \
                and not names & (set(self.tensors) | {self.module}):
            try:
                value = eval(compile(ast.Expression(ast.fix_missing_locations(node)), "<fold>", "eval"), self.env)
            except Exception:  # not a constant after all: fold its parts
                pass
            else:
                literal = _literal(value)
                if literal is not None:
                    return literal
        return super().visit(node)

    def visit_Name(self, node):
        if node.id in self.tensors:
            source = self.tensors[node.id]
            return ast.Name(source) if isinstance(source, str) else copy.deepcopy(source)
        return ast.Name("T") if node.id == self.module else node

    def visit_Subscript(self, node):
        node = self.generic_visit(node)
        if isinstance(node.value, ast.Tuple) and not isinstance(node.slice, ast.Slice):
            try:
                return node.value.elts[ast.literal_eval(node.slice)]
            except (ValueError, TypeError, IndexError):
                return node
        if isinstance(node.value, ast.Tuple):
            try:
                bounds = [None if b is None else ast.literal_eval(b) for b in (node.slice.lower, node.slice.upper,
                                                                               node.slice.step)]
            except ValueError:
                return node
            return ast.Tuple(node.value.elts[slice(*bounds)], ast.Load())
        return node

    def visit_IfExp(self, node):
        node = self.generic_visit(node)
        if isinstance(node.test, ast.Constant):
            return node.body if node.test.value else node.orelse
        return node

    def visit_Call(self, node):
        node = self.generic_visit(node)
        if (isinstance(node.func, ast.Name) and node.func.id == "getattr" and len(node.args) == 2
                and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            return ast.Attribute(node.args[0], node.args[1].value, ast.Load())
        node.args = [item for arg in node.args for item in
                     (arg.value.elts if isinstance(arg, ast.Starred) and isinstance(arg.value, (ast.Tuple, ast.List))
                      else [arg])]
        node.keywords = [item for k in node.keywords for item in
                         ([ast.keyword(key.value, value) for key, value in zip(k.value.keys, k.value.values)]
                          if k.arg is None and isinstance(k.value, ast.Dict) else [k])]
        return node


def registry_call(name, operands, attrs) -> str:
    """``REGISTRY[name].torch_fn(T, *operands, *attrs)`` written as the PyTorch call it makes
    (operands are source texts: tensors' names or numbers; attrs are values); the literal call if
    its source can't be read back."""
    op = REGISTRY[name]
    fn, found = op.torch_fn, _function_body(op.torch_fn)
    numbers = {i: ast.literal_eval(o.replace("inf", "1e999").replace("nan", "None"))
               for i, o in enumerate(operands) if o[:1] != "v" and o[:2] != "(v"}
    numbers = {i: (NAN if v is None else v) for i, v in numbers.items()}
    values = [numbers.get(i, o) for i, o in enumerate(operands)] + list(attrs)
    if found is not None and len(found[0]) - 1 <= len(values) and (found[1] or len(found[0]) - 1 == len(values)):
        params, rest, body = found
        bound = dict(zip(params[1:], values))
        if rest:
            bound[rest] = tuple(values[len(params) - 1:])
        tensors = {k: v for k, v in bound.items() if isinstance(v, str) and k != rest and v in operands}
        env = dict(fn.__globals__)
        env.update(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__ or ())))
        env.update((k, v) for k, v in bound.items() if k not in tensors and k != rest)
        if rest:
            if any(isinstance(v, str) and v in operands for v in bound[rest]):
                tensors[rest] = ast.Tuple([ast.Name(v) if isinstance(v, str) and v in operands else _literal(v)
                                           for v in bound[rest]], ast.Load())
            else:
                env[rest] = bound[rest]
        tree = _Fold(params[0], tensors, env).visit(copy.deepcopy(body))
        allowed = set(operands) | {"T", "inf", "nan"} | set(dir(builtins))
        if all(n.id in allowed for n in ast.walk(tree) if isinstance(n, ast.Name)):
            return ast.unparse(ast.fix_missing_locations(tree))
    texts = [*operands, *(ast.unparse(_literal(a)) for a in attrs)]
    return f"REGISTRY[{name!r}].torch_fn(T, {', '.join(texts)})"


def _fed_by_examples(op) -> bool:
    """Factorizations are left out: their inputs must be well-conditioned matrices (op_cases.MATRIX_DOMAINS)
    that a palette cannot make, and their vectors' signs are LAPACK's choice."""
    return op.torch_fn is not None and bool(op.examples) and not set(op.domain) & set(MATRIX_DOMAINS)


# The ops users can call (an internal one, such as PyTorch's C++ div.Scalar inside a loss, has no
# spelling in both libraries): those with public names, and those whose PyTorch call reads back.
_CALLABLE = {n for n, op in REGISTRY.items() if op.public or "ops.aten" not in inspect.getsource(op.torch_fn or (lambda: 0))}
ELEMENTWISE = sorted(n for n, op in REGISTRY.items() if op.elementwise and _fed_by_examples(op) and n in _CALLABLE)
STRUCTURAL = sorted(n for n, op in REGISTRY.items() if not op.elementwise and _fed_by_examples(op) and n in _CALLABLE)
OPERATORS = {  # the Python operators users write for some registered ops
    "add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "div": "{0} / {1}", "pow": "{0} ** {1}",
    "neg": "-{0}", "abs": "abs({0})", "gt": "{0} > {1}", "ge": "{0} >= {1}", "lt": "{0} < {1}",
    "le": "{0} <= {1}", "eq": "{0} == {1}", "ne": "{0} != {1}",
}


# ------------------------------------------------------------------------- the program


def _execute(text, namespace):
    """Run one line; the exception it raised, or None."""
    try:
        exec(compile(text, "<program>", "exec"), namespace)
    except Exception as error:  # the outcome is compared, never swallowed
        return error
    return None


class _Widened:
    """A module whose float32 is float64: the same program, run in float64 as the exact reference."""

    def __init__(self, module):
        self._module = module

    def __getattr__(self, name):
        return getattr(self._module, "float64" if name == "float32" else name)


def _magnitude(tensor) -> float:
    """The largest finite absolute value of a tensor (0 if none)."""
    values = tensor.detach().double().abs()
    finite = values[values.isfinite()]
    return float(finite.max()) if finite.numel() else 0.0


def _namespace(T, numpy=np):
    namespace = {"T": T, "np": numpy, "inf": INF, "nan": NAN, "REGISTRY": REGISTRY}
    exec(HEADER.split("\n", 3)[3], namespace)  # F and w: the header without its imports
    return namespace


def _no_op_slice(key, shape) -> bool:
    """Whether index ``key`` (text) has a slice that keeps its whole dim (``x[:]``, ``x[0:2]`` of 2)."""
    items = [i.strip() for i in key.split(",")]
    consuming = [i for i in items if i not in ("None", "...")]
    if "..." in items:
        at = items.index("...")
        before = [i for i in items[:at] if i != "None"]
        after = [i for i in items[at + 1:] if i != "None"]
        dims = list(zip(before, shape)) + list(zip(after, shape[len(shape) - len(after):]))
    else:
        dims = list(zip(consuming, shape))
    for item, size in dims:
        if ":" in item:
            parts = [int(p) if p else None for p in (item.split(":") + [""])[:3]]
            if slice(*parts).indices(size) == (0, size, 1):
                return True
    return False


class Program:
    """Lines of Python over ``T``, written while PyTorch runs them (so each choice can depend on
    the shapes and dtypes seen so far), each with tags for the exclusion list."""

    def __init__(self, data, torch):
        self.data, self.torch = data, torch
        self.dtype = self.draw(st.sampled_from(["float32", "float64"]))
        self.plain = self.draw(st.booleans())  # run symgrad on its plain path (no speed layer)
        self.lines, self.tags, self.outcomes = [], [], []
        self.ns = _namespace(torch)
        self.pool, self.used, self.count = [], set(), 0
        self.flags = set()  # facts about the whole program, for the exclusion list
        self.scale, self.depends = {}, {}
        self.binds = []  # per line: the name it binds, or None
        self.views = {}  # name -> the tensor whose storage it shares (a view, detach(), .data)
        self.filled = set()  # tensors that fill_ or zero_ made constant

    @property
    def precision(self) -> str:
        """The least precise float dtype in the program: the rounding its results carry (tan of a
        bool tensor is float32 in a program that names only float64)."""
        float32 = any("float32" in line for line in self.lines) or any(
            getattr(t, "dtype", None) == self.torch.float32 for t in self.ns.values())
        return "float32" if float32 else "float64"

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def tagged(self, *tags) -> bool:
        return any(set(tags) & line for line in self.tags)

    def draw(self, strategy):
        return self.data.draw(strategy)

    def source(self) -> str:
        """The program as Python to paste, each line PyTorch raised on marked so."""
        lines = [HEADER]
        if "REGISTRY[" in self.text:
            lines[0] += "from symgrad.ops.registry import REGISTRY  # an op whose torch call can't be read back\n"
        if self.plain:
            lines.append("# symgrad runs this inside `with symgrad.plain_path():`")
        for line, outcome in zip(self.lines, self.outcomes):
            lines.append(line + (f"  # PyTorch raises {type(outcome).__name__}" if outcome is not None else ""))
        return "\n".join(lines)

    # ----------------------------------------------------------------- writing lines

    def emit(self, text, binds=None, tags=()):
        if "signbit" in text or "copysign" in text:
            self.note_nan_signs(text)
        self.lines.append(text)
        self.binds.append(binds)
        self.tags.append(set(tags))
        outcome = _execute(text, self.ns)
        self.outcomes.append(outcome)
        if outcome is None and binds is not None:
            self.pool.append(binds)
        if outcome is None:
            self.track_scale(text, binds)
        return outcome

    def note_nan_signs(self, text) -> None:
        """Flags a line that reads the sign bit of a NaN an op computed (``signbit``, ``copysign``'s
        second operand); an input's NaN keeps its sign on both sides, and stays tested."""
        for name in re.findall(r"\bv\d+\b", text):
            tensor = self.ns.get(name)
            made = [line for line, bound in zip(self.lines, self.binds)
                    if bound == name or re.match(rf"(with T.no_grad\(\): )?{name}\b[.\[]", line)]  # (or wrote it)
            computed = len(made) != 1 or " = T.tensor(" not in made[0]
            if (computed and isinstance(tensor, self.torch.Tensor) and tensor.is_floating_point()
                    and bool(tensor.isnan().any())):
                self.flags.add("sign of a NaN")

    def track_scale(self, text, binds):
        """``scale[name]``: the largest finite magnitude among the values a tensor was computed from
        (itself included), and ``depends[name]``: the tensors it was computed from.  A sum is
        rounded relative to its terms, not to itself: 1e30 - 1e30 + 1 may be 1, 0 or 1e23 (a fused
        multiply-add) in float32, each legal.  Results that require grad keep their gradient
        (``retain_grad``) for ``grad_scale``."""
        names = re.findall(r"\b(?:v\d+|loss)\b", text)
        target = binds or (names[0] if names else None)
        tensor = self.ns.get(target)
        if target is None or not isinstance(tensor, self.torch.Tensor):
            return
        magnitude = _magnitude(tensor.detach())
        self.scale[target] = max([magnitude, self.scale.get(target, 0.0)] + [self.scale.get(n, 0.0) for n in names])
        self.depends.setdefault(target, {target})
        for name in names:
            self.depends[target] |= self.depends.get(name, {name})
        try:
            if tensor.requires_grad and not tensor.is_leaf:
                tensor.retain_grad()
        except RuntimeError:  # PyTorch refuses to look at a no_grad view whose base changed in place
            pass

    def grad_scale(self, leaf) -> float:
        """The largest gradient magnitude among the tensors computed from ``leaf`` (PyTorch's, kept
        by ``retain_grad``): a gradient sums terms of about that size, and is rounded relative to
        them (d(x / x)/dx is 1/x - x/x**2: 0 or 1.5e-8 at x = 1.7 in float32, both legal)."""
        scale = 0.0
        for name, sources in self.depends.items():
            try:
                grad = self.ns[name].grad if leaf in sources else None
            except (AttributeError, RuntimeError):  # not a tensor now; a no_grad view whose base changed
                continue
            if grad is not None:
                scale = max(scale, _magnitude(grad))
        return scale

    def fresh(self) -> str:
        self.count += 1
        return f"v{self.count - 1}"

    def result(self, text, tags=()):
        """A line binding a new tensor, under no_grad now and then.  Tagged with what PyTorch did:
        ``same object`` when it returned an input itself, ``no_grad requires grad`` when a result
        made under no_grad requires grad (a view of a tensor that does)."""
        name = self.fresh()
        no_grad = self.draw(st.sampled_from([False, False, False, True]))
        line = f"with T.no_grad(): {name} = {text}" if no_grad else f"{name} = {text}"
        outcome = self.emit(line, name, {"no_grad"} | set(tags) if no_grad else tags)
        if outcome is None:
            new = self.ns[name]
            if any(self.ns.get(o) is new for o in re.findall(r"\bv\d+\b", text)):
                self.tags[-1].add("same object")
            if no_grad and isinstance(new, self.torch.Tensor) and new.requires_grad:
                self.tags[-1].add("no_grad requires grad")
            sources = re.findall(r"\bv\d+\b", text)
            if len(sources) == 1 and isinstance(new, self.torch.Tensor) and (
                    new._is_view() or {"detach", "data"} & set(tags)):
                self.views[name] = self.views.get(sources[0], sources[0])
        return outcome

    def pick(self, accept=lambda t: True):
        """A tensor of the program that ``accept`` takes, or None."""
        names = [n for n in self.pool if accept(self.ns[n])]
        if not names:
            return None
        name = names[self.draw(st.integers(0, len(names) - 1))]
        self.used.add(name)
        return name

    def values(self, n, domain):
        """``n`` values of a domain: a strided walk through its palette (equal values: ties), and in
        a third of the inputs up to three extreme values put in."""
        palette = (tuple(range(LABEL_CLASSES)) if domain == "label" else (True, False) if domain == "bool"
                   else DOMAIN_VALUES.get(domain, ORDINARY))
        stride = self.draw(st.integers(0, len(palette) - 1))
        offset = self.draw(st.integers(0, len(palette) - 1))
        values = [palette[(offset + stride * i) % len(palette)] for i in range(n)]
        if domain != "bool" and n and self.draw(st.sampled_from([False, False, True])):
            wild = DOMAIN_EXTREME.get(domain, EXTREME)
            for i, value in self.draw(st.lists(st.tuples(st.integers(0, 63), st.sampled_from(wild)), max_size=3)):
                values[i % n] = value
        return values

    def leaf(self, shape, domain="real"):
        """A new input tensor from a NumPy array."""
        name = self.fresh()
        values = self.values(math.prod(shape), domain)
        if domain == "label":
            dtype = "int64"
        elif domain == "bool":
            dtype = "bool_"
        else:
            other = "float64" if self.dtype == "float32" else "float32"
            dtype = self.draw(st.sampled_from([self.dtype] * 5 + [other]))
        if values:
            array = f"np.array({_nested(np.array(values, dtype=object).reshape(shape).tolist())}, dtype=np.{dtype})"
        else:
            array = f"np.zeros({shape}, dtype=np.{dtype})"
        if dtype.startswith("float") and any(v in DENORMAL[dtype] for v in values):
            self.flags.add("denormal input")
        grad = dtype.startswith("float") and self.draw(st.booleans())
        self.emit(f"{name} = T.tensor({array}{', requires_grad=True' if grad else ''})", name, {"leaf"})
        return name

    def operand(self, accept=lambda t: True, shape=(3,), domain="real"):
        """Mostly a tensor of the program that ``accept`` takes; else a new input of ``shape``."""
        name = self.pick(accept) if self.pool and self.draw(st.sampled_from([True, True, True, False])) else None
        if name is None:
            name = self.leaf(shape, domain)
            self.used.add(name)
        return name

    def scalar(self, extra=(), only=False):
        """A Python number for an op's argument: from SCALARS and ``extra`` (only ``extra``'s first
        if ``only``)."""
        value = extra[0] if only else self.draw(st.sampled_from(tuple(SCALARS) + tuple(extra)))
        if value in DENORMAL["float32"]:
            self.flags.add("denormal scalar")
        if value != value:
            self.flags.add("nan scalar")
        if math.isfinite(value) and float(np.float32(value)) != value:
            self.flags.add("scalar inexact in float32")
        return _number(value)

    def shape_of(self, name):
        return tuple(self.ns[name].shape)

    # ------------------------------------------------------------------------- steps

    def step(self):
        """One line (or a new input and a line) of one of the kinds below."""
        kind = self.draw(st.sampled_from(["elementwise"] * 4 + ["registered"] * 2 + ["view"] * 2
                                         + ["reduce"] * 2 + ["inplace"] * 2 + ["detach"]))
        getattr(self, "step_" + kind)()

    def step_elementwise(self):
        """A registered elementwise op on pool tensors (any dtype: promotion) or Python numbers where
        its examples take one (always, where every example does); spelled as the registry's torch
        call or as a Python operator."""
        name = self.draw(st.sampled_from(ELEMENTWISE))
        op = REGISTRY[name]
        arity = len(op.examples[0].shapes)
        domains = op.domain or ("real",) * arity
        operands = []
        for position, domain in enumerate(domains):
            given = [e.scalars[position] for e in op.examples if position in e.scalars]
            always = len(given) == len(op.examples)
            if always or (given and position and self.draw(st.booleans())):
                operands.append(self.scalar(given))
            elif domain == "bool":
                condition = self.pick(lambda t: t.dtype == self.torch.bool)
                operands.append(condition or f"({self.operand(shape=self.draw(st.sampled_from(PROGRAM_SHAPES)))} > 0)")
            else:
                operands.append(self.operand(shape=self.draw(st.sampled_from(PROGRAM_SHAPES))))
        optional = [operands[p][:1] == "v" for p in range(1, arity) if any(p in e.scalars for e in op.examples)]
        mixed = len(set(optional)) > 1  # some optional numbers given as numbers, others as tensors
        if name in OPERATORS and self.draw(st.booleans()):
            text = OPERATORS[name].format(*operands)
        else:
            text = registry_call(name, operands, ())
        tags = {f"op:{name}", *self.special(name, operands)} | ({f"{name}@numbers and tensors"} if mixed else set())
        if len({o for o in operands if o[:1] == "v"}) < sum(o[:1] == "v" for o in operands):
            tags.add(f"{name}(x, x)")
        self.result(text, tags)

    def special(self, name, operands):
        """Tags ``op@nan``, ``op@inf``, ``op@zero``, ``op@0or1`` for the special values the op's
        tensor inputs hold, ``op@bool``, ``op@int`` for a bool or integer input and ``op@two dtypes``
        for float inputs of two dtypes."""
        tags = set()
        dtypes = {self.ns[o].dtype for o in operands if isinstance(self.ns.get(o), self.torch.Tensor)
                  and self.ns[o].is_floating_point()}
        if len(dtypes) > 1:
            tags.add(f"{name}@two dtypes")
        if name == "matmul" and any(getattr(self.ns.get(o), "ndim", 0) >= 3 for o in operands):
            tags.add("batched matmul")
        for operand in operands:
            t = self.ns.get(operand)
            if isinstance(t, self.torch.Tensor) and t.is_floating_point() and t.numel():
                values = t.detach()
                for tag, present in (("nan", values.isnan()), ("inf", values.isinf()), ("zero", values == 0),
                                     ("0or1", (values == 0) | (values == 1))):
                    if bool(present.any()):
                        tags.add(f"{name}@{tag}")
            if isinstance(t, self.torch.Tensor) and t.dtype == self.torch.bool:
                tags.add(f"{name}@bool")
            elif isinstance(t, self.torch.Tensor) and not t.is_floating_point():
                tags.add(f"{name}@int")
        return tags

    def step_registered(self):
        """A registered op that is not elementwise, fed as one of its examples: a pool tensor of the
        example's shape if there is one, else a new input of that shape and the op's domain."""
        name = self.draw(st.sampled_from(STRUCTURAL))
        op = REGISTRY[name]
        example = self.draw(st.sampled_from(op.examples))
        domains = op.domain or ("real",) * len(example.shapes)
        operands = []
        for position, (shape, domain) in enumerate(zip(example.shapes, domains)):
            if position in example.scalars:
                operands.append(self.scalar([example.scalars[position]], only=True))
                continue
            label = domain == "label"
            fits = lambda t, shape=shape, label=label: tuple(t.shape) == tuple(shape) and (
                t.dtype == self.torch.int64 if label else t.is_floating_point())
            operands.append(self.operand(fits, shape, domain))
        tags = {f"op:{name}", *self.special(name, operands)}
        if len(set(operands)) < len(operands):
            tags.add(f"{name}(x, x)")
        if name == "nll_loss" and bool((self.ns[operands[1]] == example.attrs[1]).all()):
            tags.add("nll_loss with every target ignored")
        self.result(registry_call(name, operands, example.attrs), tags)

    def step_view(self):
        """A view or reshape, with dims drawn for the operand's rank (now and then out of range)."""
        x = self.operand(shape=self.draw(st.sampled_from(PROGRAM_SHAPES)))
        shape = self.shape_of(x)
        d, n = len(shape), math.prod(shape)
        dims = lambda extra=0: st.integers(-max(d, 1) - extra, max(d, 1) - 1 + extra)  # noqa: E731
        kind = self.draw(st.sampled_from(["reshape", "index", "transpose", "unsqueeze", "squeeze", "expand",
                                          "permute", "view", "flatten", "t", "T", "mT"]))
        if kind in ("reshape", "view"):
            options = [(-1,), (n,), (1, -1), (-1, 1), *[(a, -1) for a in (2, 3) if n % a == 0],
                       *([()] if n == 1 else []), (n + 1,), (0, -1)]
            target = self.draw(st.sampled_from(options))
            text = f"{x}.{kind}({', '.join(map(str, target)) if target else '()'})"
        elif kind == "flatten":
            text = f"{x}.flatten({self.draw(dims())}, {self.draw(dims())})" if d else f"{x}.flatten()"
        elif kind == "transpose":
            text = f"{x}.transpose({self.draw(dims(1))}, {self.draw(dims())})"
        elif kind == "permute":
            order = self.draw(st.permutations(range(d)))
            text = f"{x}.permute({', '.join(str(i) for i in order)})"
        elif kind == "unsqueeze":
            text = f"{x}.unsqueeze({self.draw(st.integers(-d - 2, d + 1))})"
        elif kind == "squeeze":
            how = self.draw(st.sampled_from(["all", "dim", "dims"]))
            text = (f"{x}.squeeze()" if how == "all" else f"{x}.squeeze({self.draw(dims())})" if how == "dim"
                    else f"{x}.squeeze(({self.draw(dims())}, {self.draw(dims())}))")
        elif kind == "expand":
            sizes = [str(self.draw(st.sampled_from((1, 2, 3, -1) if s == 1 else (s, -1, s + 1)))) for s in shape]
            if self.draw(st.booleans()):
                sizes.insert(0, "2")
            text = f"{x}.expand({', '.join(sizes)})" if sizes else f"{x}.expand(())"
        elif kind == "index":
            text = f"{x}[{self.key(d)}]"
        elif kind == "t":
            text = f"{x}.t()"
        else:
            text = f"{x}.{kind}"
        tags = {f"view:{kind}", f"{kind}@{d}d"}
        if kind in ("reshape", "view") and n == 0 and -1 in target:
            tags.add("-1 in the shape of an empty tensor")
        if text.count("...") > 1:
            tags.add("two ellipses")
        if kind == "index" and d == 0 and text.endswith("[...]"):
            tags.add("x[...] of a 0-d tensor")
        if kind == "index" and _no_op_slice(text[len(x) + 1:-1], shape):
            tags.add("a slice that keeps its dim")
        if self.result(text, tags) is None and kind in ("reshape", "flatten") and n:
            if not self.ns[f"v{self.count - 1}"]._is_view():
                self.tags[-1].add("reshape copies")  # PyTorch copies a non-contiguous input

    def key(self, d):
        """An index for ``x[...]``: integers, slices (positive steps), None and Ellipsis."""
        items = []
        for _ in range(self.draw(st.integers(0, d + 1))):
            kind = self.draw(st.sampled_from(["slice", "int", "None", "..."]))
            if kind == "int":
                items.append(str(self.draw(st.sampled_from((0, 1, -1, 2)))))
            elif kind == "slice":
                start = self.draw(st.sampled_from(("", "1", "-1", "0")))
                stop = self.draw(st.sampled_from(("", "2", "-1", "1")))
                stride = self.draw(st.sampled_from(("", ":2")))
                items.append(f"{start}:{stop}{stride}")
            else:
                items.append(kind)
        return ", ".join(items) if items else "..."

    def step_reduce(self):
        """sum, mean, amax, max, logsumexp, softmax, log_softmax over all, one or two dims."""
        x = self.operand(shape=self.draw(st.sampled_from(PROGRAM_SHAPES)))
        d = len(self.shape_of(x))
        kind = self.draw(st.sampled_from(["sum", "mean", "amax", "logsumexp", "softmax", "log_softmax", "max"]))
        dim_kind = self.draw(st.sampled_from(["int", "all", "tuple"]))
        one = lambda: self.draw(st.integers(-max(d, 1), max(d, 1) - 1))  # noqa: E731
        dim = str(one()) if dim_kind == "int" or kind.endswith("softmax") else f"({one()}, {one()})"
        keep = ", keepdim=True" if self.draw(st.booleans()) else ""
        if kind == "max":
            text = f"{x}.max()"
        elif kind.endswith("softmax"):
            text = (f"F.{kind}({x}, dim={dim})" if self.draw(st.booleans()) else f"{x}.{kind}({dim})")
        elif kind == "logsumexp":
            text = f"T.logsumexp({x}, {dim}{keep})"
        elif dim_kind == "all":
            text = f"{x}.{kind}()" if self.draw(st.booleans()) else f"T.{kind}({x})"
        else:
            text = f"{x}.{kind}({dim}{keep})"
        tags = {f"reduce:{kind}", *self.special(kind, [x])}
        if self.ns[x].numel() == 0:
            tags.add(f"{kind}@empty")
        self.result(text, tags)

    def aliased(self, name) -> bool:
        """Whether another tensor of the program shares storage with ``name`` (a view, detach(),
        .data, in PyTorch)."""
        t = self.ns[name]
        root = t._base if t._base is not None else t
        pointer = t.untyped_storage().data_ptr() if t.numel() else None
        for other in self.pool:
            u = self.ns[other]
            if u is t:
                continue
            if (u._base if u._base is not None else u) is root:
                return True
            if self.views.get(other, other) == self.views.get(name, name):
                return True
            if pointer is not None and u.numel() and u.untyped_storage().data_ptr() == pointer:
                return True
        return False

    def step_inplace(self):
        """``x += y``, ``x.add_(y)`` ... ``x.fill_(c)``, ``x.copy_(y)``, ``x[i] = y``, under no_grad or not."""
        target = self.operand(shape=self.draw(st.sampled_from(PROGRAM_SHAPES)))
        kind = self.draw(st.sampled_from(["+=", "add_", "*=", "mul_", "-=", "sub_", "/=", "div_",
                                          "setitem", "fill_", "zero_", "copy_"]))
        if kind == "fill_" or (kind not in ("zero_", "copy_") and self.draw(st.booleans())):
            other = self.scalar()
        else:
            other = self.operand(shape=self.draw(st.sampled_from(PROGRAM_SHAPES)))
        if kind.endswith("="):
            text = f"{target} {kind} {other}"
        elif kind == "setitem":
            text = f"{target}[{self.key(len(self.shape_of(target)))}] = {other}"
        elif kind == "zero_":
            text = f"{target}.zero_()"
        else:
            text = f"{target}.{kind}({other})"
        t, source = self.ns[target], self.ns.get(other)
        tags = {"inplace", f"inplace:{kind}"} | ({"aliased"} if self.aliased(target) else set())
        if (kind in ("fill_", "zero_") or kind == "copy_" and other == target) and \
                self.torch._debug_has_internal_overlap(t) == 1:
            tags.add("alike into shared elements")
        if isinstance(source, self.torch.Tensor) and source.dtype != t.dtype:
            tags.add("inplace from another dtype")
        if kind in ("/=", "div_") and target in self.filled and t.dim() == 0:
            tags.add("in-place division of a filled 0-d tensor")
        try:
            history = t.requires_grad and not t.is_leaf
        except RuntimeError:  # PyTorch refuses to look at a no_grad view whose base changed in place
            history = False
        if self.draw(st.booleans()):
            tags |= {"no_grad"} | ({"no_grad update of history"} if history else set())
            text = f"with T.no_grad(): {text}"
        elif history and kind in ("fill_", "zero_", "copy_"):
            tags.add(f"{kind} over history")
        if self.emit(text, None, tags) is None:
            self.used.discard(target)
            if kind in ("fill_", "zero_"):
                self.filled.add(target)

    def step_detach(self):
        """``x.detach()``, ``x.data`` or ``x.requires_grad_()``."""
        x = self.operand(shape=self.draw(st.sampled_from(PROGRAM_SHAPES)))
        kind = self.draw(st.sampled_from(["detach", "requires_grad_", "data"]))
        if kind == "detach":
            self.result(f"{x}.detach()", {"detach"})
        elif kind == "data":
            self.result(f"{x}.data", {"data"})
        else:
            self.emit(f"{x}.requires_grad_()", None, {"requires_grad_"} | ({"aliased"} if self.aliased(x) else set()))
            self.used.discard(x)

    def differentiable_leaf(self, name) -> bool:
        try:
            return self.ns[name].is_leaf and self.ns[name].requires_grad
        except RuntimeError:  # PyTorch refuses to say (a no_grad view whose base changed): not a leaf
            return False

    def second_order(self, leaves) -> None:
        """The loss's gradients with ``create_graph`` (compared as any result: values, requires_grad,
        grad_fn), then a backward through those that have history, weighted: a second derivative
        into the leaves' ``.grad``, or PyTorch's error where none has (``x * 2``, ``x.sum()``)."""
        gradients = []
        for leaf in leaves:
            name = self.fresh()
            if self.emit(f"{name} = T.autograd.grad(loss, {leaf}, create_graph=True, retain_graph=True, "
                         "allow_unused=True)[0]", name, {"create_graph"}) is None and self.ns[name] is not None:
                gradients.append(name)
                self.used.add(name)
        if gradients:
            self.emit(f"second = " + " + ".join(f"({g} * w({g})).sum()" for g in gradients), None, {"second order"})
            self.emit("second.backward()", None, {"backward", "second order"})

    def finish(self):
        """Up to MAX_STEPS steps (inputs are made as steps need them), then the loss: every float
        tensor that nothing used, weighted, summed; then backward.  Each step is a span of draws
        followed by a "one more" flag, so Hypothesis shrinks a program by deleting steps."""
        for _ in range(MAX_STEPS):
            self.step()
            if not self.draw(st.booleans()):
                break
        terms = [n for n in self.pool if n not in self.used and self.ns[n].is_floating_point()]
        if terms:
            self.emit("loss = " + " + ".join(f"({n} * w({n})).sum()" for n in terms), "loss", {"loss"})
            leaves = [n for n in self.pool if self.differentiable_leaf(n)]
            if leaves and self.draw(st.booleans()):
                self.second_order(leaves[:2])
            else:
                self.emit("loss.backward()", None, {"backward"})
        for tags, name in zip(self.tags, self.binds):  # gradients that reached a line's result
            try:
                grad = getattr(self.ns.get(name), "grad", None) if name else None
            except RuntimeError:  # a no_grad view whose base changed in place
                continue
            if grad is not None and not bool(grad.isfinite().all()):
                tags.add("non-finite gradient")
        return self


# ---------------------------------------------------------------------------- comparing

RTOL = {"float32": 1e-5, "float64": 1e-10}   # about 80 and 450,000 ulps: a short chain's rounding
ATOL = {"float32": 1e-6, "float64": 1e-12}   # times the array's largest finite magnitude
NOISE = 4  # symgrad may be this many times as far from the exact value as the references are
JITTER = {"float32": 2.0 ** -22, "float64": 2.0 ** -50}  # relative change of the inputs: 2 ulps
JITTERED_RUNS = 3


def mismatches(ours, theirs, exact, jittered, precision, scale=0.0):
    """Elements where symgrad's float array is not PyTorch's.

    NaN exactly where PyTorch has NaN.  An infinity only where PyTorch has the same one, or where
    the other value is within rounding of the dtype's largest (an overflow that rounding decides).
    Finite values within

        rtol |theirs| + atol scale + NOISE noise,   or within rtol |exact| + atol scale of exact,

    rtol and atol per ``precision``, the least precise float dtype of the program (a float64
    result of float32 inputs carries float32 rounding).  ``scale`` is the largest finite magnitude
    of the array and of the values it was computed from: a sum is rounded relative to its terms,
    so 1e30 * 0.75 - 1e30 * 0.75 + 2 may be 2, 0 or 4e22 (a fused multiply-add) and each is
    legal float32.  ``exact`` is the program run by PyTorch in float64 (None for float64
    programs); ``jittered`` are runs by PyTorch in the program's dtypes on inputs changed by two
    ulps (equal inputs alike, so ties, zeros and signs stay).  ``noise``, how far PyTorch is from
    the exact value and from itself on jittered inputs, is how ill-conditioned the element is:
    where PyTorch's own rounding moves it that much, symgrad's different but legal rounding may
    too.  Being closer to the exact value than float32 allows is never a mismatch."""
    rtol, atol = RTOL[precision], ATOL[precision]
    o, t = ours.astype(np.float64), theirs.astype(np.float64)
    nan_o, nan_t = np.isnan(o), np.isnan(t)
    bad = nan_o != nan_t
    inf_o, inf_t = np.isinf(o), np.isinf(t)
    edge = float(np.finfo(theirs.dtype).max) * (1 - 4 * rtol)
    either = (inf_o | inf_t) & ~nan_o & ~nan_t
    overflowing = np.abs(np.where(inf_o, t, o)) >= edge
    bad |= either & (o != t) & ~(overflowing & (np.sign(o) == np.sign(t)))
    finite = np.isfinite(o) & np.isfinite(t)
    magnitudes = np.abs(t[np.isfinite(t)])
    scale = max(scale, float(magnitudes.max()) if magnitudes.size else 0.0)
    reference = t if exact is None else exact.astype(np.float64)
    noise = np.zeros(t.shape)
    for a, b in ((t, reference), *((j, t) for j in jittered)):
        if b is not None and a is not None:
            with np.errstate(invalid="ignore", over="ignore"):
                gap = np.abs(a.astype(np.float64) - b)
            noise = np.maximum(noise, np.where(np.isfinite(gap), gap, 0.0))
    with np.errstate(invalid="ignore", over="ignore"):
        far = np.abs(o - t) > rtol * np.abs(t) + atol * scale + NOISE * noise
        if exact is not None:
            far &= ~(np.abs(o - reference) <= rtol * np.abs(reference) + atol * scale)
    return bad | (finite & far)


def _zeros(*grads) -> bool:
    """Whether the one of ``grads`` that is a tensor holds only zeros."""
    return not any(bool((g != 0).any()) for g in grads if g is not None)


def _array(tensor):
    """A tensor's values (PyTorch's create_graph gradients may be ZeroTensors, read only when forced)."""
    forced = {"force": True} if getattr(tensor, "_is_zerotensor", lambda: False)() else {}
    return np.asarray(tensor.detach().numpy(**forced))


def _dtype_name(tensor):
    return repr(tensor.dtype).split(".")[-1]


def _grad_fn(tensor):
    return type(tensor.grad_fn).__name__ if tensor.grad_fn is not None else None


def _show(values):
    return np.array2string(np.asarray(values), precision=9, threshold=40)


def compare_tensor(label, ours, theirs, exact, jittered, precision, scale=0.0):
    """Differences between symgrad's tensor and PyTorch's, as lines of text."""
    if not isinstance(ours, symgrad.Tensor):
        return [f"{label}: symgrad has {type(ours).__name__}, PyTorch a tensor"]
    o, t = _array(ours), _array(theirs)
    if o.shape != t.shape or _dtype_name(ours) != _dtype_name(theirs) or o.dtype != t.dtype:  # and the array's own
        return [f"{label}: symgrad {_dtype_name(ours)}{list(o.shape)} (an array of {o.dtype}), "
                f"PyTorch {_dtype_name(theirs)}{list(t.shape)}"]
    if t.dtype.kind != "f":
        bad = o != t
    else:
        same = lambda r: _array(r) if isinstance(r, type(theirs)) and tuple(r.shape) == t.shape else None  # noqa: E731
        jittered = [a for a in map(same, jittered) if a is not None]
        bad = mismatches(o, t, same(exact), jittered, precision, scale)
    if not bad.any():
        return []
    where = [int(i) for i in np.argwhere(bad)[0]] if bad.ndim else []
    return [f"{label} differs at {where} ({int(bad.sum())} of {bad.size}):\n"
            f"    symgrad {_show(o)}\n    PyTorch {_show(t)}"]


def _said(error):
    return "no error" if error is None else f"{type(error).__name__}: {str(error)[:300]}"


def compare_programs(program, ours, ours_outcomes, exact, jittered):
    """Everything that differs: raising, then each tensor's attributes, values and gradient."""
    for i, (a, b) in enumerate(zip(ours_outcomes, program.outcomes)):
        if type(a) is not type(b):
            return [f"line {i + 1} `{program.lines[i]}`: symgrad {_said(a)}; PyTorch {_said(b)}"]
    problems = []
    # a backward that raised part way has filled some .grad in PyTorch (its engine had run other branches
    # first); symgrad's raises before it fills any: after such a line, gradients are not compared
    backward_raised = any(b is not None and "backward" in line for line, b in zip(program.lines, program.outcomes))
    # a create_graph gradient's grad_fn is named as PyTorch's for common ops only (api.md): it is compared
    # by whether it has one (requires_grad, is_leaf)
    gradients = {name for name, tags in zip(program.binds, program.tags) if "create_graph" in tags}
    # a backward through them may give zeros where PyTorch's double backward leaves .grad None (api.md)
    second_order = any("second order" in tags for tags in program.tags)
    for name in [*program.pool, "loss"]:
        theirs = program.ns.get(name)
        if not isinstance(theirs, program.torch.Tensor):
            continue
        mine = ours.get(name)
        if not isinstance(mine, symgrad.Tensor):
            problems.append(f"{name}: symgrad has {type(mine).__name__}")
            continue
        exact_t = exact.get(name) if exact is not None else None
        jittered_t = [j.get(name) for j in jittered]
        for attribute, get in (("requires_grad", lambda x: x.requires_grad), ("is_leaf", lambda x: x.is_leaf),
                               ("grad_fn", _grad_fn))[:2 if name in gradients else 3]:
            try:
                expected = get(theirs)
            except RuntimeError:  # PyTorch refuses to say (a no_grad view whose base changed)
                continue
            if get(mine) != expected:
                problems.append(f"{name}.{attribute}: symgrad {get(mine)}, PyTorch {expected}")
        problems += compare_tensor(name, mine, theirs, exact_t, jittered_t, program.precision,
                                   program.scale.get(name, 0.0))
        try:
            leaf = theirs.is_leaf and theirs.requires_grad
        except RuntimeError:  # PyTorch refuses to say (a no_grad view whose base changed): not a leaf
            leaf = False
        if leaf and not backward_raised:
            if (mine.grad is None) != (theirs.grad is None) and not (second_order and _zeros(mine.grad, theirs.grad)):
                problems.append(f"{name}.grad: symgrad {None if mine.grad is None else 'a tensor'}, "
                                f"PyTorch {None if theirs.grad is None else 'a tensor'}")
            elif theirs.grad is not None:
                problems += compare_tensor(f"{name}.grad", mine.grad, theirs.grad, getattr(exact_t, "grad", None),
                                           [getattr(j, "grad", None) for j in jittered_t], program.precision,
                                           program.grad_scale(name))
    return problems


def _run_symgrad(program):
    """The program's lines on symgrad, then every value computed, in one program (that only
    saves compiles: each value read on its own would compile its own)."""
    namespace = _namespace(symgrad)
    outcomes = [_execute(line, namespace) for line in program.lines]
    tensors = [v for v in namespace.values() if isinstance(v, symgrad.Tensor)]
    symgrad.engine.realize([t._node for t in tensors])
    return namespace, outcomes


class _Jittered:
    """NumPy whose ``np.array`` changes each float by a relative ``size`` (two ulps), the same
    change for equal values (ties, zeros and signs stay as they are)."""

    def __init__(self, size, salt):
        self.size, self.salt = size, salt

    def __getattr__(self, name):
        return getattr(np, name)

    def array(self, values, dtype=None):
        values = np.array(values, dtype=dtype)
        if values.dtype.kind != "f" or not values.size:
            return values
        bits = values.astype(np.float64).view(np.uint64)
        with np.errstate(over="ignore"):
            bits = (bits + np.uint64(self.salt)) * np.uint64(0x9E3779B97F4A7C15)
            unit = (bits >> np.uint64(11)).astype(np.float64) / 2.0 ** 53
        return (values * (1 + self.size * (2 * unit - 1))).astype(values.dtype)


def _run_reference(program, torch, numpy):
    """The program on PyTorch again (with another NumPy); None if it raises where the program did
    not, or the other way round."""
    namespace = _namespace(torch, numpy)
    outcomes = [_execute(line, namespace) for line in program.lines]
    if [type(o) for o in outcomes] != [type(o) for o in program.outcomes]:
        return None
    return namespace


# ------------------------------------------------------------------------------ the test




def _slow_profile() -> bool:
    """Whether conftest's "slow" profile (``pytest --slow``) is the one loaded."""
    try:
        return settings().max_examples >= settings.get_profile("slow").max_examples
    except InvalidArgument:  # imported without tests/conftest.py
        return False


_SLOW = _slow_profile()
DEFAULT_PROGRAMS = 2 * settings().max_examples  # 300 with the default profile: ~15 s in CI
SLOW_PROGRAMS = 10_000                          # pytest --slow: about 10 minutes


def differences(program, torch) -> list:
    """What symgrad does differently from PyTorch on ``program`` (already run on PyTorch)."""
    float64 = _run_reference(program, _Widened(torch), _Widened(np)) if program.precision == "float32" else None
    jittered = [j for j in (_run_reference(program, torch, _Jittered(JITTER[program.precision], salt))
                            for salt in range(JITTERED_RUNS)) if j is not None]
    with symgrad.plain_path() if program.plain else contextlib.nullcontext():
        try:
            ours, outcomes = _run_symgrad(program)
        except Exception as error:  # computing the values raised: a failure to report with the program
            return [f"symgrad raised while computing the values: {type(error).__name__}: {error}"]
        return compare_programs(program, ours, outcomes, float64, jittered)


def known_discrepancy(program):
    """The name of the first known discrepancy class ``program`` belongs to, or None."""
    return next((name for name, (_, matches) in KNOWN_DISCREPANCIES.items() if matches(program)), None)


@settings(max_examples=SLOW_PROGRAMS if _SLOW else DEFAULT_PROGRAMS)
@given(st.data())
def test_random_programs_agree_with_pytorch(torch, data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = Program(data, torch).finish()
        known = known_discrepancy(program)
        if known:
            event(f"excluded: {known}")
            return
        problems = differences(program, torch)
    assert not problems, ("symgrad and PyTorch disagree on this program:\n\n" + program.source()
                          + "\n\n" + "\n".join(problems))


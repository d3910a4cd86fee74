"""Random training loops against PyTorch, step by step: a differential fuzzer of trace replay.

``test_random_programs_agree_with_pytorch`` checks single programs; what it never runs is a loop,
so it never reaches symgrad.cycles and symgrad.replaying, where a repeated step is replayed from
its trace and its state carried by a chain of cycles.  Hypothesis writes a torch-style training
loop here, as Python source run once with ``T = torch`` and once with ``T = symgrad``: a model
(one or two layers, spelled as users spell them, ``nn.Sequential``, or a recurrent state cut at each
step), batches (one, slices of a dataset, or a shuffling ``DataLoader``), a loss, an update (by
hand, under ``no_grad``, or an ``optim`` optimizer, maybe with a scheduler), values read or kept
where tutorials read them (before or after the backward, every step or now and then), and a few
events at chosen steps that leave the trace: a new learning rate, another batch, an extra term in
the loss, a skipped ``zero_grad``, a parameter written in place, an exception caught, ``.grad``
set to None, an evaluation under ``no_grad``, gradient clipping, a hook, a second backward, a
frozen parameter, ``model.eval()`` for two steps (with dropout and batch norm in the model).
Every value read, at every step, must be PyTorch's (and an error must be one in both, of the same
class).  A failure prints the shrunk loop as Python to paste.  ``pytest --slow`` runs 1,000 loops.
"""
import contextlib
import warnings

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import symgrad
from codegen import speed
from symgrad import replaying

STEPS = 40  # enough for replay to start (two equal traces) and for a chain to run as a scan (32 cycles)
TOLERANCE = dict(rtol=2e-4, atol=2e-5)
# float64 runs agree to rounding noise, which an optimizer that normalizes its step (Adagrad, Adam) lifts
# to ~1e-7 where a gradient is 0 in exact arithmetic (a LayerNorm's bias before a BatchNorm)
FLOAT64_TOLERANCE = dict(rtol=1e-7, atol=1e-6)

ACTIVATIONS = ["T.tanh({})", "T.relu({})", "T.sigmoid({})", "F.softplus({})", "({}).clamp(-1.0, 1.0)",
               "F.leaky_relu({}, 0.1)", "F.gelu({})", "({}).tanh()", "({}).tanh_()", "F.relu({}, inplace=True)"]
AFFINE = ["{x} @ {w} + {b}", "T.matmul({x}, {w}) + {b}", "F.linear({x}, {w}.t(), {b})", "T.addmm({b}, {x}, {w})"]
LOSSES = ["F.mse_loss(out, y)", "((out - y) ** 2).mean()", "F.binary_cross_entropy_with_logits(out, yb)",
          "F.cross_entropy(out, labels)", "F.l1_loss(out, y)", "F.smooth_l1_loss(out, y)",
          "(out - y).abs().sum() / 8", "F.nll_loss(F.log_softmax(out, 1), labels)"]
OPTIMIZERS = ["T.optim.SGD(params, lr=0.05)", "T.optim.SGD(params, lr=0.05, momentum=0.9)",
              "T.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)",
              "T.optim.Adam(params, lr=0.01)", "T.optim.AdamW(params, lr=0.01)", "T.optim.RMSprop(params, lr=0.01)",
              "T.optim.Adagrad(params, lr=0.1)"]
HAND_UPDATES = ["{p} -= lr * {p}.grad", "{p}.sub_(lr * {p}.grad)", "{p}.add_({p}.grad, alpha=-lr)",
                "{p}.data -= lr * {p}.grad.data"]
HAND_ZEROS = ["{p}.grad.zero_()", "{p}.grad = None"]
READS = {  # what a loop reads, and where: (the line, before the backward?)
    "loss": ("seen('loss', loss.item())", False),
    "loss early": ("seen('loss early', loss.item())", True),
    "count": ("seen('count', (out.argmax(1) == labels).sum().item())", True),
    "count late": ("seen('count late', (out.argmax(1) == labels).sum().item())", False),
    "kept loss": ("kept.append(loss.detach())", False),
    "kept accuracy": ("kept.append((out.argmax(1) == labels).float().mean())", True),
    "gradient": ("seen('gradient', params[0].grad)", False),
    "prediction": ("seen('prediction', out)", False),
}
WHEN = ["", "if i % 5 == 0: ", "if i == {k}: "]
MODULES = ["T.nn.Tanh()", "T.nn.ReLU()", "T.nn.Sigmoid()", "T.nn.GELU()", "T.nn.Softplus()", "T.nn.LeakyReLU(0.1)",
           "T.nn.Dropout(0.2)", "T.nn.BatchNorm1d(5)", "T.nn.LayerNorm(5)"]
BATCHING = [  # (setup, the lines at the start of a step): one batch, slices of a dataset, a shuffling loader
    ([], []),
    ([], ["j = i % 4 * 8", "x, y, yb, labels = xs[j:j + 8], ys[j:j + 8], ybs[j:j + 8], ls[j:j + 8]"]),
    (["loader = T.utils.data.DataLoader(T.utils.data.TensorDataset(xs, ys, ybs, ls), batch_size=8, shuffle=True)",
      "batches = iter(())"],
     ["batch = next(batches, None)", "if batch is None: batches = iter(loader); batch = next(batches)",
      "x, y, yb, labels = batch"]),
]
EVENTS = ["rate", "batch", "swap", "extra", "accumulate", "write", "raise", "none", "evaluate", "detached", "clip",
          "hook", "retain", "twice", "freeze", "eval mode"]


def _events(draw, optimizer: bool, module: bool, k: int) -> dict:
    """The lines of the events the loop meets at step ``k`` (or every ``k``-th), by where they go
    (a block's later lines indented for the loop's body)."""
    lines = {}
    add = lambda place, line: lines.setdefault(place, []).append(line)  # noqa: E731
    for name in draw(st.lists(st.sampled_from(EVENTS), max_size=2, unique=True)):
        if name == "rate":
            add("end", f"if i == {k}:\n        " + ("for g in opt.param_groups: g['lr'] = g['lr'] * 0.5" if optimizer
                                                     else "lr = lr * 0.5"))
        elif name == "batch":
            add("start", f"if i == {k}: x = x2")
        elif name == "swap":
            add("start", f"if i % {k} == 0: x, x2 = x2, x")
        elif name == "extra":
            add("loss", f"if i == {k}: loss = loss + 0.01 * (params[0] ** 2).sum()")
        elif name == "accumulate":
            lines["skip zero"] = f"i != {k}"
        elif name == "write":
            add("end", f"if i == {k}:\n        with T.no_grad(): params[0][0, 0] = 0.25; params[-1].mul_(0.5)")
        elif name == "raise":
            add("loss", f"if i == {k}:\n        try: T.matmul(params[0], params[0])\n"
                        "        except RuntimeError: seen('raised', 1)")
        elif name == "none" and optimizer:
            add("end", f"if i == {k}: params[-1].grad = None")
        elif name == "evaluate":
            add("end", f"if i % {k} == 0:\n        with T.no_grad(): "
                       "seen('evaluated', F.mse_loss(model(x2), y).item())")
        elif name == "detached":
            add("end", f"if i == {k}: seen('detached', params[0].detach().clone())")
        elif name == "clip":
            add("after", draw(st.sampled_from(["T.nn.utils.clip_grad_norm_(params, 0.5)",
                                               "T.nn.utils.clip_grad_value_(params, 0.05)"])))
        elif name == "hook":
            add("start", f"if i == {k}: params[0].register_hook(lambda g: g * 0.5)")
        elif name == "retain":
            add("loss", f"if i == {k}: loss.backward(retain_graph=True)")
        elif name == "twice":
            add("after", "F.mse_loss(model(x2)[:, :1], y[:, :1]).backward()")
        elif name == "freeze" and optimizer:
            add("end", f"if i == {k}: params[1].requires_grad_(False); params[1].grad = None")
        elif name == "eval mode" and module:
            add("start", f"if i == {k}: model.eval()\n    if i == {k + 2}: model.train()")
    return lines


@st.composite
def loops(draw):
    """A random training loop: (its source, whether symgrad runs it on its plain path)."""
    k = draw(st.integers(2, STEPS - 3))
    optimizer = draw(st.sampled_from([None] + OPTIMIZERS))
    sequential = draw(st.booleans())
    events = _events(draw, optimizer is not None, sequential, k)
    act = draw(st.sampled_from(ACTIVATIONS))
    setup = ["T.manual_seed(7)"]
    if sequential:
        layers = ["T.nn.Linear(4, 5)"] + draw(st.lists(st.sampled_from(MODULES), min_size=1, max_size=3)) + [
            "T.nn.Linear(5, 3)"]
        setup += [f"model = T.nn.Sequential({', '.join(layers)})",
                  "with T.no_grad():",
                  "    model[0].weight.copy_(T.tensor(W1.T)); model[0].bias.copy_(T.tensor(B1))",
                  "    model[-1].weight.copy_(T.tensor(W2.T)); model[-1].bias.copy_(T.tensor(B2))",
                  "params = list(model.parameters())"]
    elif draw(st.booleans()):  # a recurrent state carried from step to step, cut at each (TBPTT)
        setup += ["params = [T.tensor(a, requires_grad=True) for a in (W1, B1, W2, B2, R)]", "h = T.zeros(8, 5)",
                  "def model(x):", "    global h",
                  f"    h = {act.format('x @ params[0] + h.detach() @ params[4] + params[1]')}",
                  "    return h @ params[2] + params[3]"]
    else:
        two = draw(st.booleans())
        setup.append("params = [T.tensor(a, requires_grad=True) for a in (W1, B1, W2, B2)]" if two else
                     "params = [T.tensor(a, requires_grad=True) for a in (W1[:, :3], B2)]")
        layer = draw(st.sampled_from(AFFINE))
        if two:
            hidden = act.format(layer.format(x="x", w="params[0]", b="params[1]"))
            body = draw(st.sampled_from(AFFINE)).format(x=hidden, w="params[2]", b="params[3]")
        else:
            body = act.format(layer.format(x="x", w="params[0]", b="params[1]"))
        setup.append(f"def model(x): return {body}")
    if optimizer:
        setup.append(f"opt = {optimizer}")
        if draw(st.booleans()):
            setup.append("sched = T.optim.lr_scheduler.StepLR(opt, 5, 0.5)")
        zero = ["opt.zero_grad(set_to_none=False)" if draw(st.booleans()) else "opt.zero_grad()"]
        update = ["opt.step()"] + (["sched.step()"] if "sched" in setup[-1] else [])
    else:
        setup.append("lr = 0.05")
        form, zeroing = draw(st.sampled_from(HAND_UPDATES)), draw(st.sampled_from(HAND_ZEROS))
        update = ["with T.no_grad():", f"    for p in params: {form.format(p='p')}"]
        zero = ["for p in params:", f"    if p.grad is not None: {zeroing.format(p='p')}"]
    if "skip zero" in events:
        zero = [f"if {events['skip zero']}:"] + ["    " + line for line in zero]
    zero_first = draw(st.booleans())
    batching = draw(st.sampled_from(BATCHING))
    reads = draw(st.lists(st.sampled_from(sorted(READS)), max_size=3, unique=True))
    before, after = [], []
    for name in reads:
        line, early = READS[name]
        when = draw(st.sampled_from(WHEN)).format(k=k)
        (before if early else after).append(when + line)
    setup += batching[0]
    body = ((zero if zero_first else []) + batching[1] + events.get("start", [])
            + ["out = model(x)", f"loss = {draw(st.sampled_from(LOSSES))}"] + events.get("loss", []) + before
            + ["loss.backward()"] + events.get("after", []) + after + update + ([] if zero_first else zero)
            + events.get("end", []))
    source = "\n".join(setup + ["kept = []", f"for i in range({STEPS}):"] + ["    " + line for line in body] + [
        "for j, value in enumerate(kept): seen(f'kept {j}', value)",
        "for j, p in enumerate(params): seen(f'parameter {j}', p)"])
    return source, draw(st.booleans())


def _arrays(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    f32 = lambda *shape: rng.standard_normal(shape).astype(np.float32)
    return dict(W1=0.5 * f32(4, 5), B1=0.1 * f32(5), W2=0.5 * f32(5, 3), B2=0.1 * f32(3), R=0.3 * f32(5, 5),
                X=f32(8, 4), X2=f32(8, 4), Y=f32(8, 3), YB=rng.uniform(size=(8, 3)).astype(np.float32),
                L=rng.integers(0, 3, 8), XS=f32(32, 4), YS=f32(32, 3), LS=rng.integers(0, 3, 32),
                YBS=rng.uniform(size=(32, 3)).astype(np.float32))


def run_loop(T, source: str, arrays: dict):
    """The loop run on the library ``T``: every value it read, in order, and the error it ended
    with (its class), if any."""
    log = []

    def seen(label, value):
        if hasattr(value, "detach"):
            value = value.detach().numpy()
        log.append((label, np.array(value, dtype=np.float64)))

    scope = dict(arrays, T=T, F=T.nn.functional, seen=seen)
    scope.update({name: T.tensor(arrays[key]) for name, key in (
        ("x", "X"), ("x2", "X2"), ("y", "Y"), ("yb", "YB"), ("labels", "L"), ("xs", "XS"), ("ys", "YS"),
        ("ybs", "YBS"), ("ls", "LS"))})
    try:
        exec(compile(source, "<random loop>", "exec"), scope)
    except Exception as error:  # the same error in both is agreement
        return log, type(error).__name__
    return log, None


def _widened(T, source: str, arrays: dict) -> list:
    """The values the library ``T`` reads running the loop in float64."""
    default = T.get_default_dtype()
    T.set_default_dtype(T.float64)
    try:
        wide = {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in arrays.items()}
        return run_loop(T, source, wide)[0]
    finally:
        T.set_default_dtype(default)


def _agrees(ours, theirs, exact) -> bool:
    """Equal within float32's rounding, or as near the float64 answer (``exact``) as PyTorch's own
    float32 run is: a loop's rounding differences grow step by step."""
    if ours.shape != theirs.shape:
        return False
    if np.allclose(ours, theirs, equal_nan=True, **TOLERANCE):
        return True
    if exact is None or exact.shape != ours.shape:
        return False
    error = lambda values: np.max(np.abs(values - exact), initial=0.0)  # noqa: E731
    return bool(error(ours) <= 10 * error(theirs) + 1e-6 * (1 + np.max(np.abs(exact), initial=0.0)))


def _first_difference(ours, theirs, exact, tolerance=None):
    """The first read (as a message) where ``ours`` and ``theirs`` disagree, or None."""
    for n, ((label, a), (_, b), (_, e)) in enumerate(zip(ours, theirs, exact)):
        if not (np.allclose(a, b, equal_nan=True, **tolerance) if tolerance else _agrees(a, b, e)):
            return (f"read {n} ({label}): symgrad {a.ravel()[:6]}, PyTorch {b.ravel()[:6]}"
                    + ("" if e is None else f", PyTorch in float64 {e.ravel()[:6]}"))
    return None


def loop_differences(source: str, plain: bool, seed: int, torch):
    """Where symgrad's run of the loop differs from PyTorch's, how many of its backwards replayed,
    and how PyTorch's run ended: the class of its error, "magnified rounding" (below), or None.

    A float32 difference that the float64 runs do not have is rounding that the loop magnified, not
    a wrong step (a gradient PyTorch's reduction order sums to exactly 0 and XLA's to 7e-9, which
    Adam's division by its root turns into a step of 0.4 lr): it is reported as such, not failed."""
    arrays = _arrays(seed)
    theirs, their_error = run_loop(torch, source, arrays)
    wide = _widened(torch, source, arrays)
    with symgrad.plain_path() if plain else contextlib.nullcontext():
        before = replaying.stats.replayed
        ours, our_error = run_loop(symgrad, source, arrays)
        replayed = replaying.stats.replayed - before
        problems = [] if our_error == their_error else [f"error: symgrad {our_error}, PyTorch {their_error}"]
        if [label for label, _ in ours] != [label for label, _ in theirs]:
            labels = f"values read: symgrad {[l for l, _ in ours]}\n  PyTorch {[l for l, _ in theirs]}"
            return problems + [labels], replayed, their_error
        if [label for label, _ in wide] != [label for label, _ in theirs]:
            wide = [(label, None) for label, _ in theirs]
        difference = _first_difference(ours, theirs, wide)
        if difference and wide and wide[0][1] is not None:
            our_wide = _widened(symgrad, source, arrays)
            if not _first_difference(our_wide, wide, wide, FLOAT64_TOLERANCE):
                return problems, replayed, "magnified rounding"
    return problems + ([difference] if difference else []), replayed, their_error


@settings(max_examples=1000 if settings().max_examples >= 2000 else 20)  # ~1.2 s a loop in CI
@given(loops(), st.integers(0, 2 ** 16))
def test_random_loops_agree_with_pytorch(torch, loop, seed):
    source, plain = loop
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        problems, replayed, error = loop_differences(source, plain, seed, torch)
    event(f"replayed: {replayed > 0}; error: {error}")
    assert not problems, ("symgrad and PyTorch disagree on this loop" + (" (plain path)" if plain else "")
                          + f", arrays of seed {seed}:\n\n{source}\n\n" + "\n".join(problems))


@pytest.mark.parametrize("read", ["", READS["count"][0], READS["loss"][0], READS["kept accuracy"][0]])
def test_the_loops_written_here_replay(torch, read):
    """The fuzzer's loops reach what it is for: the simplest one it writes replays on the fast path,
    and still does with a read where tutorials read (a read that made its step fall off the trace
    gave right values, so only this count shows it)."""
    simplest = "\n".join(["params = [T.tensor(a, requires_grad=True) for a in (W1[:, :3], B2)]",
                          "def model(x): return T.tanh(x @ params[0] + params[1])", "lr = 0.05", "kept = []",
                          f"for i in range({STEPS}):", "    out = model(x)", "    loss = F.mse_loss(out, y)"]
                         + ([f"    {read}"] if read and READS_BEFORE[read] else [])
                         + ["    loss.backward()"] + ([f"    {read}"] if read and not READS_BEFORE[read] else [])
                         + ["    with T.no_grad():", "        for p in params: p -= lr * p.grad",
                            "    for p in params:", "        if p.grad is not None: p.grad.zero_()",
                            "for j, value in enumerate(kept): seen(f'kept {j}', value)",
                            "for j, p in enumerate(params): seen(f'parameter {j}', p)"])
    problems, replayed, error = loop_differences(simplest, False, 0, torch)
    assert not problems and error is None
    assert replayed > STEPS // 2 if speed.fast else replayed == 0


READS_BEFORE = {line: early for line, early in READS.values()}

"""F.ctc_loss and nn.CTCLoss against the installed PyTorch on the same arrays: values, dtypes,
grad_fn names and gradients for every reduction, padded and concatenated targets, unbatched input,
repeated labels, impossible alignments (inf, NaN gradients, zero_infinity), empty label sequences
and inputs, a blank that is not 0, float32 and float64, tuple lengths; PyTorch's gradient on
log_probs that are not a log_softmax's (its kernel's, not the loss's derivative); the errors."""
import numpy as np
import pytest

import codegen
import symgrad
from parity import assert_raises_as_pytorch

RNG = np.random.default_rng(31)


def F(T):
    return T.nn.functional


def logits(*shape):
    return RNG.standard_normal(shape) * 2.0


T_, N_, C_ = 7, 7, 5
X = logits(T_, N_, C_)
# one batch of every kind of sequence: a repeated label (a blank between is needed), a short one, an
# empty label sequence, one filling its input, one that cannot be aligned (three 1s need five frames,
# it has four: an inf loss, NaN gradients unless zero_infinity), an empty input with no labels, more
# labels than inputs (inf too: PyTorch's CPU kernel does not refuse it)
PADDED = np.array([[1, 1, 2, 0], [3, 0, 0, 0], [0, 0, 0, 0], [4, 2, 4, 1], [1, 1, 1, 0], [2, 0, 0, 0], [1, 2, 3, 0]])
TARGET_LENGTHS = np.array([3, 1, 0, 4, 3, 0, 3])
INPUT_LENGTHS = np.array([7, 5, 3, 6, 4, 0, 2])
CONCATENATED = np.concatenate([row[:n] for row, n in zip(PADDED, TARGET_LENGTHS)])


def run(T, fn, arrays, grads):
    """Like test_nn_functional.run, but the backward first: one compiled program per case."""
    tensors = [T.tensor(a, requires_grad=bool(g)) for a, g in zip(arrays, grads)]
    out = fn(T, *tensors)
    weights = np.cos(np.arange(out.numel()) * 1.3).reshape(tuple(out.shape)) + 0.25
    out.backward(T.tensor(weights, dtype=out.dtype))  # the root: its value comes with the gradient
    return (out.detach().numpy(), repr(out.dtype), type(out.grad_fn).__name__), tensors[0].grad.numpy()


def check(torch, fn, arrays, grads=(1, 0, 0, 0), rtol=1e-10, atol=1e-12):
    (value, *kind), grad = run(symgrad, fn, arrays, grads)
    (t_value, *t_kind), t_grad = run(torch, fn, arrays, grads)
    assert kind == t_kind
    np.testing.assert_allclose(value, t_value, rtol=rtol, atol=atol)  # equal_nan: inf is inf, NaN NaN
    np.testing.assert_allclose(grad, t_grad, rtol=rtol, atol=atol)


def ctc(targets, input_lengths, target_lengths, normalize=True, **options):
    """fn(T, x, ...): ctc_loss of x's log_softmax (or of x itself) with the lengths as tensors."""
    def fn(T, x, t, il, tl):
        return F(T).ctc_loss(x.log_softmax(x.ndim - 1) if normalize else x, t, il, tl, **options)
    return fn, [targets, input_lengths, target_lengths]


CASES = {  # each reduction with and without zero_infinity (sum's without: the peaked case below)
    "mean": (X, *ctc(PADDED, INPUT_LENGTHS, TARGET_LENGTHS)),
    "none": (X, *ctc(PADDED, INPUT_LENGTHS, TARGET_LENGTHS, reduction="none")),
    "none zero_infinity": (X, *ctc(PADDED, INPUT_LENGTHS, TARGET_LENGTHS, reduction="none", zero_infinity=True)),
    "sum zero_infinity": (X, *ctc(PADDED, INPUT_LENGTHS, TARGET_LENGTHS, reduction="sum", zero_infinity=True)),
    "concatenated none": (X, *ctc(CONCATENATED, INPUT_LENGTHS, TARGET_LENGTHS, reduction="none")),
    "concatenated mean zero_infinity": (X, *ctc(CONCATENATED, INPUT_LENGTHS, TARGET_LENGTHS, zero_infinity=True)),
    # PyTorch's gradient, not the derivative (test_gradient_is_pytorchs_kernel_not_the_derivative)
    "not normalized": (X, *ctc(PADDED, INPUT_LENGTHS, TARGET_LENGTHS, normalize=False, reduction="none")),
    "blank 4, int32, wider padding": (
        X, *ctc(np.pad(np.where(PADDED == 4, 0, PADDED), ((0, 0), (0, 2)), constant_values=3).astype(np.int32),
                INPUT_LENGTHS.astype(np.int32), TARGET_LENGTHS.astype(np.int32), blank=4, reduction="none")),
    "one frame, no labels at all": (logits(1, 2, 3), *ctc(np.zeros((2, 0), np.int64), np.array([1, 0]),
                                                          np.array([0, 0]), reduction="none")),
    "float targets, 2-d lengths, peaked": (X * 40, *ctc(PADDED.astype(np.float64), INPUT_LENGTHS[None],
                                                        TARGET_LENGTHS[None], reduction="sum")),
}
FLOAT32 = ("none zero_infinity", "not normalized")  # and test_module


@pytest.mark.parametrize("name,dtype", [(name, "float64") for name in CASES] + [(name, "float32") for name in FLOAT32])
def test_against_pytorch(torch, name, dtype):
    x, fn, others = CASES[name]
    tight = dtype == "float64"
    check(torch, fn, [x.astype(dtype), *others], rtol=1e-10 if tight else 2e-5, atol=1e-12 if tight else 2e-6)


UNBATCHED = {
    # PyTorch reads a 1-D target of an unbatched input as concatenated: its length is the target length
    "1-d target, 0-d lengths": lambda T, x: F(T).ctc_loss(x.log_softmax(1), T.tensor([1, 2, 2]), T.tensor(6),
                                                          T.tensor(3), reduction="none"),
    "padded (1, S) target, tuple lengths": lambda T, x: F(T).ctc_loss(x.log_softmax(1), T.tensor([[3, 3, 1, 0]]),
                                                                      (5,), (3,), reduction="none"),
    "sum, impossible, zero_infinity": lambda T, x: F(T).ctc_loss(x.log_softmax(1), T.tensor([1, 1, 1, 1]), (6,),
                                                                 (4,), reduction="sum", zero_infinity=True),
}


@pytest.mark.parametrize("name", list(UNBATCHED))
def test_unbatched(torch, name):
    check(torch, UNBATCHED[name], [logits(6, 4)], grads=[1])


def test_tuple_and_list_lengths(torch):
    fn = lambda T, x, t: F(T).ctc_loss(x.log_softmax(2), t, tuple(INPUT_LENGTHS.tolist()),  # noqa: E731
                                       list(TARGET_LENGTHS.tolist()), reduction="mean")
    check(torch, fn, [X, PADDED], grads=[1, 0])


def test_gradient_is_pytorchs_kernel_not_the_derivative(torch):
    """On log_probs that are not normalized, the gradient is the derivative plus exp(log_probs)
    (PyTorch's kernel assumes a log_softmax before it); through log_softmax the two agree."""
    x = symgrad.tensor(X[:, :1], requires_grad=True)
    F(symgrad).ctc_loss(x, symgrad.tensor(PADDED[:1]), (7,), (3,), reduction="sum").backward()
    lp = torch.tensor(X[:, :1], requires_grad=True)
    torch.nn.functional.ctc_loss(lp, torch.tensor(PADDED[:1]), (7,), (3,), reduction="sum").backward()
    np.testing.assert_allclose(x.grad.numpy(), lp.grad.numpy(), rtol=1e-10, atol=1e-12)

    def loss(values):
        return F(symgrad).ctc_loss(symgrad.tensor(values), symgrad.tensor(PADDED[:1]), (7,), (3,),
                                   reduction="sum").item()
    derivative = np.zeros_like(X[:, :1])
    for index in np.ndindex(derivative.shape):
        up, down = X[:, :1].copy(), X[:, :1].copy()
        up[index] += 1e-6
        down[index] -= 1e-6
        derivative[index] = (loss(up) - loss(down)) / 2e-6
    np.testing.assert_allclose(x.grad.numpy() - np.exp(X[:, :1]), derivative, rtol=1e-5, atol=1e-7)


def test_longer_sequences_match_and_reuse_the_program(torch):
    """T = 60 frames, 12 labels each: one program (two scans, whatever T is), which sequences of other
    lengths reuse (the lengths are the program's inputs)."""
    x = logits(60, 3, 20)
    targets = RNG.integers(1, 20, (3, 12))
    fn = lambda T, x, t, il, tl: F(T).ctc_loss(x.log_softmax(2), t, il, tl)  # noqa: E731
    compiles = []
    for input_lengths, target_lengths in (([60, 41, 30], [12, 9, 5]), ([55, 60, 24], [7, 12, 12])):
        check(torch, fn, [x, targets, np.array(input_lengths), np.array(target_lengths)], rtol=1e-9)
        compiles.append(codegen.stats.compiles)
    assert compiles[1] == compiles[0]


def test_module(torch):
    results = []
    for T in (symgrad, torch):
        modules = [T.nn.CTCLoss(), T.nn.CTCLoss(blank=4, reduction="sum", zero_infinity=True)]
        x = T.tensor(X.astype(np.float32), requires_grad=True)
        targets = T.tensor(np.where(PADDED == 4, 0, PADDED))
        outs = [m(x.log_softmax(2), targets, T.tensor(INPUT_LENGTHS), T.tensor(TARGET_LENGTHS)) for m in modules]
        (outs[0] + 0.5 * outs[1]).backward()
        results.append(([repr(m) for m in modules], [(m.blank, m.reduction, m.zero_infinity) for m in modules],
                        [o.item() for o in outs], x.grad.numpy()))
    ours, theirs = results
    assert ours[:2] == theirs[:2] == (["CTCLoss()", "CTCLoss()"], [(0, "mean", False), (4, "sum", True)])
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-5)
    np.testing.assert_allclose(ours[3], theirs[3], rtol=1e-5, atol=1e-6)


def test_second_derivative_is_refused_as_pytorch_refuses(torch):
    for T in (torch, symgrad):
        x = T.tensor(X, requires_grad=True)
        loss = F(T).ctc_loss(x.log_softmax(2), T.tensor(PADDED), T.tensor(INPUT_LENGTHS), T.tensor(TARGET_LENGTHS))
        (grad,) = T.autograd.grad(loss, x, create_graph=True)
        with pytest.raises(RuntimeError, match="derivative for aten::_ctc_loss_backward is not implemented"):
            grad.sum().backward()


def _lp(T):
    return T.tensor(X).log_softmax(2)


def _with(lengths, position, value):
    lengths = lengths.copy()
    lengths[position] = value
    return lengths


def _args(T):
    return T.tensor(PADDED), T.tensor(INPUT_LENGTHS), T.tensor(TARGET_LENGTHS)


ERRORS = {
    "reduction": lambda T: F(T).ctc_loss(_lp(T), *_args(T), reduction="avg"),
    "float input lengths": lambda T: F(T).ctc_loss(_lp(T), T.tensor(PADDED), T.tensor(INPUT_LENGTHS * 1.0),
                                                   T.tensor(TARGET_LENGTHS)),
    "bool target lengths": lambda T: F(T).ctc_loss(_lp(T), T.tensor(PADDED), T.tensor(INPUT_LENGTHS),
                                                   T.tensor(TARGET_LENGTHS) > 0),
    "int lengths": lambda T: F(T).ctc_loss(_lp(T), T.tensor(PADDED), 7, 3),
    "a tuple and a tensor": lambda T: F(T).ctc_loss(_lp(T), T.tensor(PADDED), tuple(INPUT_LENGTHS.tolist()),
                                                    T.tensor(TARGET_LENGTHS)),
    "float lengths in a tuple": lambda T: F(T).ctc_loss(_lp(T), T.tensor(PADDED), (7.0, *INPUT_LENGTHS.tolist()[1:]),
                                                        tuple(TARGET_LENGTHS.tolist())),
    "integer log_probs": lambda T: F(T).ctc_loss(T.ones(T_, N_, C_, dtype=T.int64), *_args(T)),
    "half log_probs": lambda T: F(T).ctc_loss(_lp(T).to(T.float16), *_args(T)),
    "empty log_probs": lambda T: F(T).ctc_loss(_lp(T)[:, :0], T.tensor(PADDED)[:0], T.tensor(INPUT_LENGTHS)[:0],
                                               T.tensor(TARGET_LENGTHS)[:0]),
    "1-d log_probs": lambda T: F(T).ctc_loss(_lp(T)[:, 0, 0], *_args(T)),
    "4-d log_probs": lambda T: F(T).ctc_loss(_lp(T)[None], *_args(T)),
    "3-d targets": lambda T: F(T).ctc_loss(_lp(T), T.tensor(PADDED)[None], *_args(T)[1:]),
    "0-d targets": lambda T: F(T).ctc_loss(_lp(T), T.tensor(1), *_args(T)[1:]),
    "blank too large": lambda T: F(T).ctc_loss(_lp(T), *_args(T), blank=5),
    "negative blank": lambda T: F(T).ctc_loss(_lp(T), *_args(T), blank=-1),
    "input lengths size": lambda T: F(T).ctc_loss(_lp(T), T.tensor(PADDED), T.tensor([7, 5]),
                                                  T.tensor(TARGET_LENGTHS)),
    "target lengths size": lambda T: F(T).ctc_loss(_lp(T), T.tensor(PADDED), T.tensor(INPUT_LENGTHS),
                                                   tuple(TARGET_LENGTHS.tolist()[1:])),
    "negative target length": lambda T: F(T).ctc_loss(_lp(T), T.tensor(PADDED), T.tensor(INPUT_LENGTHS),
                                                      T.tensor(_with(TARGET_LENGTHS, 1, -1))),
    "negative target length, concatenated": lambda T: F(T).ctc_loss(_lp(T), T.tensor([1, 2]), T.tensor(INPUT_LENGTHS),
                                                                     T.tensor(_with(TARGET_LENGTHS * 0, 1, -1))),
    "negative input length": lambda T: F(T).ctc_loss(_lp(T), T.tensor(PADDED), T.tensor(_with(INPUT_LENGTHS, 1, -1)),
                                                     T.tensor(TARGET_LENGTHS)),
    "input length beyond the input": lambda T: F(T).ctc_loss(_lp(T), T.tensor(PADDED),
                                                             T.tensor(_with(INPUT_LENGTHS, 0, T_ + 1)),
                                                             T.tensor(TARGET_LENGTHS)),
    "padded targets too short": lambda T: F(T).ctc_loss(_lp(T), T.tensor(PADDED)[:, :3], *_args(T)[1:]),
    "padded targets batch": lambda T: F(T).ctc_loss(_lp(T), T.tensor(PADDED)[:3], *_args(T)[1:]),
    "concatenated targets length": lambda T: F(T).ctc_loss(_lp(T), T.tensor(CONCATENATED[:-1]), *_args(T)[1:]),
    "unbatched 1-d target longer than its length": lambda T: F(T).ctc_loss(_lp(T)[:, 0], T.tensor([1, 2, 2]),
                                                                           (7,), (2,)),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_are_pytorchs(torch, name):
    assert_raises_as_pytorch(ERRORS[name], torch, symgrad)


def test_lowered_for_export_takes_the_lengths_as_inputs(torch):
    """value_and_grad lowered once (the lengths traced, unchecked) runs with other lengths: PyTorch's numbers."""
    x, targets = logits(6, 2, 4), np.array([[1, 2], [3, 3]])
    loss = lambda x, t, il, tl: F(symgrad).ctc_loss(x.log_softmax(2), t, il, tl)  # noqa: E731
    lowered = symgrad.value_and_grad(loss).lower(x, targets, np.array([6, 5]), np.array([2, 2]))
    for input_lengths, target_lengths in (([6, 5], [2, 2]), ([4, 6], [1, 2])):
        value, grad = lowered.jax_function(x, targets, np.array(input_lengths), np.array(target_lengths))
        lp = torch.tensor(x, requires_grad=True)
        expected = torch.nn.functional.ctc_loss(lp.log_softmax(2), torch.tensor(targets), torch.tensor(input_lengths),
                                                torch.tensor(target_lengths))
        expected.backward()
        np.testing.assert_allclose(float(value), expected.item(), rtol=1e-12)
        np.testing.assert_allclose(np.asarray(grad), lp.grad.numpy(), rtol=1e-10, atol=1e-12)

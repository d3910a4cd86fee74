"""Recurrent layers against PyTorch: ``nn.RNN``, ``nn.LSTM``, ``nn.GRU`` and their cells, seeded alike
(the same parameters, bit for bit, under the same names), on the same inputs: outputs, final states
and the gradients of the input, the given state and every parameter; packed and padded sequences
(``nn.utils.rnn``); dropout's draws between layers; a few training steps; state_dict both ways;
reprs and PyTorch's errors; and the steps' backward printed as a loop, so compiling stays cheap."""
import numpy as np
import pytest

import symgrad
from codegen.emit import emit
from symgrad.tracing import BackwardPlan

TOLERANCE = {np.float32: 1e-5, np.float64: 1e-12}


def _close(ours, theirs, tol):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def _cotangent(T, value):
    """A fixed, uneven cotangent, so every element's gradient is checked."""
    n = value.numel()
    return T.tensor((np.arange(n, dtype=np.float64).reshape(tuple(value.shape)) % 7 / 3 - 1)).to(value.dtype)


def _loss(T, *values):
    return sum((v * _cotangent(T, v.detach())).sum() for v in values)


def _seeded(T, name, seed=0, **options):
    T.manual_seed(seed)
    return getattr(T.nn, name)(**options)


def _values(T, tensors) -> list:
    """The tensors' values, read as one (symgrad computes them in one program, not one each)."""
    joined = T.cat([t.detach().reshape(-1) for t in tensors]).numpy()
    ends = np.cumsum([t.numel() for t in tensors])
    return [part.reshape(tuple(t.shape)) for part, t in zip(np.split(joined, ends[:-1]), tensors)]


def _values_and_gradients(T, module, leaves, outputs):
    """Backward of a loss over ``outputs``; the outputs' values, then the gradients of ``leaves`` and
    of every parameter."""
    module.zero_grad()
    _loss(T, *outputs).backward()
    return _values(T, outputs) + [leaf.grad.numpy() for leaf in leaves] + [p.grad.numpy() for p in module.parameters()]


# ------------------------------------------------------------------ parameters

MODULES = {
    "rnn_relu_two_layers_bidirectional": ("RNN", dict(input_size=3, hidden_size=4, num_layers=2, nonlinearity="relu",
                                                      bidirectional=True)),
    "lstm_projected_without_bias": ("LSTM", dict(input_size=3, hidden_size=5, num_layers=2, proj_size=2, bias=False,
                                                 bidirectional=True)),
    "gru_float64": ("GRU", dict(input_size=3, hidden_size=4, num_layers=2, dtype="float64")),
    "rnn_cell": ("RNNCell", dict(input_size=3, hidden_size=4, nonlinearity="relu")),
    "lstm_cell_without_bias": ("LSTMCell", dict(input_size=3, hidden_size=4, bias=False)),
    "gru_cell": ("GRUCell", dict(input_size=3, hidden_size=4)),
}


def _made(T, case, seed=0):
    name, options = MODULES[case]
    options = {k: getattr(T, v) if k == "dtype" else v for k, v in options.items()}
    return _seeded(T, name, seed, **options)


@pytest.mark.parametrize("case", MODULES)
def test_a_seeded_module_holds_pytorchs_parameters_names_and_repr(torch, case):
    ours, theirs = _made(symgrad, case, seed=5), _made(torch, case, seed=5)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for (name, a), (other, b) in zip(ours.named_parameters(), theirs.named_parameters(), strict=True):
        assert name == other and str(a.dtype) == str(b.dtype)
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy(), err_msg=name)
    if hasattr(theirs, "all_weights"):
        assert ours._flat_weights_names == theirs._flat_weights_names
        assert [[tuple(w.shape) for w in ws] for ws in ours.all_weights] == \
            [[tuple(w.shape) for w in ws] for ws in theirs.all_weights]
        assert ours.flatten_parameters() is None


def test_reprs_are_pytorchs(torch):
    for text in ("LSTM(10, 20, num_layers=2, batch_first=True)", "RNN(4, 5, nonlinearity='relu', num_layers=2)",
                 "GRU(4, 5, bias=False, dropout=0.5, bidirectional=True, num_layers=3)", "LSTM(4, 5, proj_size=3)",
                 "RNNCell(3, 4, bias=False)", "RNNCell(3, 4, nonlinearity='relu')", "GRUCell(3, 4)", "LSTMCell(3, 4)"):
        assert repr(eval(text, {}, vars(symgrad.nn))) == repr(eval(text, {}, vars(torch.nn))), text


# ------------------------------------------------------------------ layers over padded sequences

LAYERS = {  # (module, its options, batched input shape or unbatched, given state)
    "lstm_two_layers_bidirectional_given_state": ("LSTM", dict(num_layers=2, bidirectional=True), (2, 2), True),
    "lstm_projected_batch_first": ("LSTM", dict(proj_size=2, batch_first=True), (2, 3), False),
    "lstm_unbatched_given_state": ("LSTM", dict(), (3,), True),
    "gru_two_layers_batch_first_given_state": ("GRU", dict(num_layers=2, batch_first=True), (2, 3), True),
    "gru_bidirectional_unbatched": ("GRU", dict(bidirectional=True), (3,), False),
    "rnn_relu_two_layers_bidirectional": ("RNN", dict(num_layers=2, nonlinearity="relu", bidirectional=True), (3, 2),
                                          False),
    "rnn_without_bias_unbatched_given_state": ("RNN", dict(bias=False), (3,), True),
    "gru_float64_given_state": ("GRU", dict(dtype="float64"), (3, 2), True),
    "lstm_six_steps": ("LSTM", dict(), (6, 2), False),  # long enough for codegen's loops (lax.scan)
}


def _layer_arrays(case, rng):
    name, options, shape, given = LAYERS[case]
    dtype = np.float64 if options.get("dtype") == "float64" else np.float32
    x = rng.standard_normal((*shape, 3)).astype(dtype)
    directions = 2 if options.get("bidirectional") else 1
    leading = (options.get("num_layers", 1) * directions,)
    batch = () if len(shape) == 1 else (shape[0] if options.get("batch_first") else shape[1],)
    state_sizes = [options.get("proj_size") or 4] + ([4] if name == "LSTM" else [])
    states = [rng.standard_normal((*leading, *batch, size)).astype(dtype) for size in state_sizes] if given else []
    return x, states


def _run_layer(T, case, x, states):
    name, options, _, _ = LAYERS[case]
    options = {k: getattr(T, v) if k == "dtype" else v for k, v in options.items()}
    module = _seeded(T, name, 3, input_size=3, hidden_size=4, **options)
    leaves = [T.tensor(a, requires_grad=True) for a in (x, *states)]
    hx = None if not states else (tuple(leaves[1:]) if name == "LSTM" else leaves[1])
    output, final = module(leaves[0], hx)
    finals = final if name == "LSTM" else (final,)
    return _values_and_gradients(T, module, leaves, (output, *finals))


@pytest.mark.parametrize("case", LAYERS)
def test_a_layer_gives_pytorchs_outputs_states_and_gradients(torch, case):
    x, states = _layer_arrays(case, np.random.default_rng(len(case)))
    ours, theirs = _run_layer(symgrad, case, x, states), _run_layer(torch, case, x, states)
    _close(ours, theirs, TOLERANCE[x.dtype.type])


def _backward_source_lines(name, steps, **options) -> int:
    symgrad.manual_seed(0)
    module = getattr(symgrad.nn, name)(3, 4, **options)
    _, final = module(symgrad.tensor(np.ones((steps, 2, 3), np.float32), requires_grad=True))
    h = final[0] if name == "LSTM" else final
    return len(emit(BackwardPlan((h * h).sum()._node, None).program()).splitlines())


@pytest.mark.parametrize("name, options", [("LSTM", {}), ("GRU", dict(num_layers=2, bidirectional=True))],
                         ids=["lstm", "gru_two_layers_bidirectional"])
def test_the_steps_backward_is_printed_as_a_loop(name, options):
    """From zeros, the steps of every layer are a loop in the backward too (codegen.reroll), so the
    program barely grows with the sequence; unrolled, twice the steps would be nearly twice the source."""
    short, long = (_backward_source_lines(name, steps, **options) for steps in (12, 24))
    assert long < 1.2 * short


def test_dropout_between_layers_draws_pytorchs_masks_while_training_only(torch):
    x = np.random.default_rng(1).standard_normal((2, 2, 3)).astype(np.float32)
    results = []
    for T in (symgrad, torch):
        module = _seeded(T, "GRU", 7, input_size=3, hidden_size=4, num_layers=2, dropout=0.4, bidirectional=True)
        leaf = T.tensor(x, requires_grad=True)
        training = _values_and_gradients(T, module, [leaf], module(leaf))
        module.eval()
        results.append(training + [o.detach().numpy() for o in module(T.tensor(x))])
    _close(results[0], results[1], 1e-5)
    assert not np.allclose(results[0][0], results[0][-2])  # the training output had units dropped


def test_dropout_with_one_layer_warns_as_pytorch(torch):
    for T in (symgrad, torch):
        with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
            T.nn.LSTM(3, 4, dropout=0.2)


# ------------------------------------------------------------------ cells

CELLS = {"RNNCell": 1, "LSTMCell": 2, "GRUCell": 1}


def _run_cell(T, name, x, states):
    module = _seeded(T, name, 4, input_size=3, hidden_size=4)
    leaves = [T.tensor(a, requires_grad=True) for a in (x, *states)]
    hx = None if not states else (tuple(leaves[1:]) if name == "LSTMCell" else leaves[1])
    result = module(leaves[0], hx)
    return _values_and_gradients(T, module, leaves, result if name == "LSTMCell" else (result,))


@pytest.mark.parametrize("name", CELLS)
@pytest.mark.parametrize("batched", [True, False], ids=["batched_given_state", "unbatched"])
def test_a_cell_gives_pytorchs_state_and_gradients(torch, name, batched):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3) if batched else (3,)).astype(np.float32)
    states = [rng.standard_normal((2, 4)).astype(np.float32) for _ in range(CELLS[name])] if batched else []
    _close(_run_cell(symgrad, name, x, states), _run_cell(torch, name, x, states), 1e-5)


# ------------------------------------------------------------------ packed and padded sequences

PACKED = {
    "lstm_bidirectional_unsorted_given_state": ("LSTM", dict(bidirectional=True), False, True),
    "gru_batch_first_sorted": ("GRU", dict(batch_first=True), True, False),
}


def _run_packed(T, case, x, lengths, states):
    name, options, sorted_, _ = PACKED[case]
    batch_first = options.get("batch_first", False)
    module = _seeded(T, name, 6, input_size=3, hidden_size=4, **options)
    leaves = [T.tensor(a, requires_grad=True) for a in (x, *states)]
    packed = T.nn.utils.rnn.pack_padded_sequence(leaves[0], lengths, batch_first=batch_first, enforce_sorted=sorted_)
    hx = None if not states else (tuple(leaves[1:]) if name == "LSTM" else leaves[1])
    output, final = module(packed, hx)
    padded, padded_lengths = T.nn.utils.rnn.pad_packed_sequence(output, batch_first=batch_first, padding_value=-2.0,
                                                                total_length=5)
    indices = [packed.batch_sizes, padded_lengths]
    if not sorted_:
        indices += [packed.sorted_indices, packed.unsorted_indices]
    return ([i.numpy() for i in indices]
            + _values_and_gradients(T, module, leaves, (padded, output.data, *(final if name == "LSTM" else (final,)))))


@pytest.mark.parametrize("case", PACKED)
def test_a_layer_runs_a_packed_batch_as_pytorch(torch, case):
    name, options, sorted_, given = PACKED[case]
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 3, 3)).astype(np.float32)  # (T, B, 3) or (B, T, 3)
    lengths = [3, 2, 1] if sorted_ else [2, 3, 1]
    layers = options.get("num_layers", 1) * (2 if options.get("bidirectional") else 1)
    states = [rng.standard_normal((layers, 3, 4)).astype(np.float32) for _ in range(2 if name == "LSTM" else 1)]
    states = states if given else []
    _close(_run_packed(symgrad, case, x, lengths, states), _run_packed(torch, case, x, lengths, states), 1e-5)


def _padded(T, arrays, **options):
    leaves = [T.tensor(a, requires_grad=True) for a in arrays]
    padded = T.nn.utils.rnn.pad_sequence(leaves, **options)
    (padded * _cotangent(T, padded)).sum().backward()
    return [padded.detach().numpy()] + [leaf.grad.numpy() for leaf in leaves]


@pytest.mark.parametrize("options", [dict(), dict(batch_first=True, padding_value=-1.5),
                                     dict(padding_side="left", batch_first=True)], ids=["plain", "batch_first", "left"])
def test_pad_sequence(torch, options):
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal((n, 2)).astype(np.float32) for n in (2, 4, 1)]
    _close(_padded(symgrad, arrays, **options), _padded(torch, arrays, **options), 0)


def test_pack_sequence_unpacks_to_its_pieces(torch):
    pieces = [np.arange(n * 2, dtype=np.float32).reshape(n, 2) + n for n in (2, 3, 1)]
    results = []
    for T in (symgrad, torch):
        packed = T.nn.utils.rnn.pack_sequence([T.tensor(p) for p in pieces], enforce_sorted=False)
        assert type(packed).__name__ == "PackedSequence" and packed.is_cuda is False
        padded, lengths = T.nn.utils.rnn.pad_packed_sequence(packed.double(), batch_first=True)
        results.append([packed.data.numpy(), packed.batch_sizes.numpy(), padded.numpy(), lengths.numpy(),
                        T.nn.utils.rnn.invert_permutation(T.tensor([2, 0, 1])).numpy()])
    _close(results[0], results[1], 0)


SEQUENCE_ERRORS = [
    (lambda T, x: T.nn.utils.rnn.pack_padded_sequence(x, [2, 3, 1]), RuntimeError,
     "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True"),
    (lambda T, x: T.nn.utils.rnn.pack_padded_sequence(x, [2, 0, 1], enforce_sorted=False), RuntimeError,
     "Length of all samples has to be greater than 0"),
    (lambda T, x: T.nn.utils.rnn.pack_padded_sequence(x, [3, 2]), RuntimeError,
     r"Expected `len\(lengths\)` to be equal to batch_size, but got 2 \(batch_size=3\)"),
    (lambda T, x: T.nn.utils.rnn.pad_packed_sequence(T.nn.utils.rnn.pack_padded_sequence(x, [3, 2, 1]),
                                                     total_length=2), ValueError,
     "Expected total_length to be at least the length of the longest sequence in input, but got total_length=2 and "
     "max sequence length being 3"),
    (lambda T, x: T.nn.utils.rnn.pad_sequence([]), RuntimeError, "received an empty list of sequences"),
    (lambda T, x: T.nn.utils.rnn.pad_sequence(5), RuntimeError, "pad_sequence: Expected iterable for input sequences"),
    (lambda T, x: T.nn.utils.rnn.pad_sequence([x[0], x[1]], padding_side="middle"), RuntimeError,
     "Expected padding_side to be one of left or right, but got middle."),
    (lambda T, x: T.nn.utils.rnn.pad_sequence([x[0], T.ones(2, 3)]), RuntimeError,
     r"size .*must match the .*size .*at non-singleton dimension 1"),
]


@pytest.mark.parametrize("index", range(len(SEQUENCE_ERRORS)))
def test_packing_and_padding_errors_are_pytorchs(torch, index):
    call, error, match = SEQUENCE_ERRORS[index]
    x = np.ones((3, 3, 2), np.float32)
    for T in (symgrad, torch):
        with pytest.raises(error, match=match):
            call(T, T.tensor(x))


# ------------------------------------------------------------------ training and state_dict

class Tagger:
    """PyTorch's LSTM part-of-speech tagger, made in either library."""

    def __init__(self, T):
        T.manual_seed(0)
        self.T = T
        self.model = T.nn.ModuleDict(dict(embed=T.nn.Embedding(6, 3), lstm=T.nn.LSTM(3, 4, batch_first=True),
                                          out=T.nn.Linear(4, 5)))

    def loss(self, words, tags):
        m = self.model
        hidden, _ = m["lstm"](m["embed"](words))
        scores = self.T.nn.functional.log_softmax(m["out"](hidden), dim=-1)
        return self.T.nn.functional.nll_loss(scores.reshape(-1, 5), tags.reshape(-1))


def test_a_training_loop_makes_pytorchs_losses(torch):
    words, tags = np.array([[0, 1, 2], [4, 5, 1]]), np.array([[0, 1, 2], [4, 0, 1]])
    losses = []
    for T in (symgrad, torch):
        tagger = Tagger(T)
        step = T.optim.SGD(tagger.model.parameters(), lr=0.5)
        kept = []
        for _ in range(4):
            step.zero_grad()
            loss = tagger.loss(T.tensor(words), T.tensor(tags))
            loss.backward()
            step.step()
            kept.append(loss.item())
        losses.append(kept)
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-5)
    assert losses[0][-1] < losses[0][0]


def test_a_state_dict_loads_both_ways(torch):
    ours = _seeded(symgrad, "LSTM", 1, input_size=3, hidden_size=4, num_layers=2, bidirectional=True)
    theirs = _seeded(torch, "LSTM", 2, input_size=3, hidden_size=4, num_layers=2, bidirectional=True)
    first = {k: v.numpy().copy() for k, v in ours.state_dict().items()}
    assert str(ours.load_state_dict({k: symgrad.tensor(v.numpy()) for k, v in theirs.state_dict().items()})) == \
        "<All keys matched successfully>"
    for (name, a), b in zip(ours.state_dict().items(), theirs.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)
    theirs.load_state_dict({k: torch.tensor(v) for k, v in first.items()})
    ours.load_state_dict({k: symgrad.tensor(v) for k, v in first.items()})
    x = np.random.default_rng(5).standard_normal((3, 2, 3)).astype(np.float32)
    _close([ours(symgrad.tensor(x))[0].detach().numpy()], [theirs(torch.tensor(x))[0].detach().numpy()], 1e-5)


# ------------------------------------------------------------------ errors

LAYER_ERRORS = [  # (construct and call, PyTorch's class, the gist of its message)
    (lambda T: T.nn.RNN(3, 4, nonlinearity="sigmoid"), ValueError, "Unknown nonlinearity 'sigmoid'"),
    (lambda T: T.nn.GRU(3, 4, proj_size=2), ValueError, "proj_size argument is only supported for LSTM"),
    (lambda T: T.nn.LSTM(3, 4, proj_size=4), ValueError, "proj_size has to be smaller than hidden_size"),
    (lambda T: T.nn.LSTM(3, 4, dropout=1.5), ValueError, r"dropout should be a number in range \[0, 1\]"),
    (lambda T: T.nn.GRU(3, 0), ValueError, "hidden_size must be greater than zero"),
    (lambda T: T.nn.RNN(3.0, 4), TypeError, "input_size should be of type int, got: float"),
    (lambda T: T.nn.LSTM(3, 4, 0), ValueError, "num_layers must be greater than zero"),
    (lambda T: T.nn.LSTM(3, 4)(T.ones(2, 2, 5)), RuntimeError,
     r"input.size\(-1\) must be equal to input_size. Expected 3, got 5"),
    (lambda T: T.nn.LSTM(3, 4)(T.ones(2, 2, 2, 3)), ValueError, "LSTM: Expected input to be 2D or 3D, got 4D instead"),
    (lambda T: T.nn.RNN(3, 4)(T.ones(2, 2, 2, 3)), ValueError, "RNN: Expected input to be 2D or 3D, got 4D tensor"),
    (lambda T: T.nn.GRU(3, 4)(T.ones(2, 2, 3, dtype=T.float64)), ValueError,
     r"RNN input dtype \(torch.float64\) does not match weight dtype \(torch.float32\)"),
    (lambda T: T.nn.GRU(3, 4, 2)(T.ones(5, 2, 3), T.ones(2, 3, 4)), RuntimeError,
     r"Expected hidden size \(2, 2, 4\), got \[2, 3, 4\]"),
    (lambda T: T.nn.LSTM(3, 4)(T.ones(5, 2, 3), (T.ones(1, 2, 4), T.ones(1, 2, 5))), RuntimeError,
     r"Expected hidden\[1\] size \(1, 2, 4\), got \[1, 2, 5\]"),
    (lambda T: T.nn.GRU(3, 4)(T.ones(5, 2, 3), T.ones(2, 4)), RuntimeError,
     "For batched 3-D input, hx should also be 3-D but got 2-D tensor"),
    (lambda T: T.nn.LSTM(3, 4)(T.ones(5, 3), (T.ones(1, 1, 4), T.ones(1, 4))), RuntimeError,
     r"For unbatched 2-D input, hx and cx should also be 2-D but got \(3-D, 2-D\) tensors"),
    (lambda T: T.nn.RNN(3, 4)(T.ones(0, 2, 3)), RuntimeError, "Expected sequence length to be larger than 0"),
    (lambda T: T.nn.GRUCell(3, 4)(T.ones(2, 2, 3)), ValueError, "GRUCell: Expected input to be 1D or 2D, got 3D"),
    (lambda T: T.nn.LSTMCell(3, 4)(T.ones(2, 3), (T.ones(2, 4), T.ones(1, 2, 4))), ValueError,
     r"LSTMCell: Expected hx\[1\] to be 1D or 2D, got 3D instead"),
    (lambda T: T.nn.RNNCell(3, 4)(T.ones(2, 5)), RuntimeError, "input has inconsistent input_size: got 5 expected 3"),
    (lambda T: T.nn.LSTMCell(3, 4)(T.ones(2, 3), (T.ones(3, 4), T.ones(2, 4))), RuntimeError,
     "Input batch size 2 doesn't match hidden0 batch size 3"),
    (lambda T: T.nn.GRUCell(3, 4)(T.ones(2, 3), T.ones(2, 5)), RuntimeError,
     "hidden0 has inconsistent hidden_size: got 5, expected 4"),
    (lambda T: T.nn.RNNCell(3, 4, nonlinearity="sigmoid")(T.ones(2, 3)), RuntimeError, "Unknown nonlinearity: sigmoid"),
    (lambda T: T.nn.GRU(3, 4)(T.ones(5, 2, 3), T.ones(1, 2, 4, dtype=T.float64)), RuntimeError, "dtype"),
]


@pytest.mark.parametrize("index", range(len(LAYER_ERRORS)))
def test_errors_are_pytorchs(torch, index):
    call, error, match = LAYER_ERRORS[index]
    for T in (symgrad, torch):
        with pytest.raises(error, match=match):
            call(T)

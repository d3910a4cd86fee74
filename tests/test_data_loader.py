"""``symgrad.utils.data`` against ``torch.utils.data``: every batch of every epoch, the random
numbers drawn after, the errors; and the nn tutorial's loop over a ``DataLoader``, which replays."""
import collections

import numpy as np
import pytest

import codegen
import symgrad
from codegen import speed
from symgrad import replaying

RNG = np.random.default_rng(4)
X, Y = RNG.standard_normal((45, 3)).astype(np.float32), RNG.integers(0, 4, 45)
Point = collections.namedtuple("Point", "x label")


def data(T):
    return symgrad.utils.data if T is symgrad else T.utils.data


class Samples:
    """A map-style dataset of tuples, dicts, numbers, NumPy arrays and namedtuples (collated field
    by field)."""

    def __init__(self, kind):
        self.kind = kind

    def __len__(self):
        return 10

    def __getitem__(self, i):
        row = X[i]
        if self.kind == "dict":
            return {"x": row, "n": int(Y[i]), "f": float(row[0])}
        if self.kind == "namedtuple":
            return Point(row, int(Y[i]))
        if self.kind == "mappings":
            return collections.OrderedDict(x=row, d=collections.defaultdict(int, n=int(Y[i])))
        return row, float(row[1]), int(Y[i]), "a"


def batches(T, make_loader, epochs=2):
    """What each batch of each epoch holds (as NumPy, with its container's type name), then the
    next numbers of the default generator."""
    T.manual_seed(3)
    loader = make_loader(T, data(T))
    try:
        seen = [len(loader), len(iter(loader))]
    except TypeError as error:  # a sampler without a length
        seen = [str(error)]
    for _ in range(epochs):
        for batch in loader:
            seen.append(_flat(batch))
    seen.append(T.rand(4).numpy().tolist())
    return seen


def _flat(value):
    if hasattr(value, "numpy"):
        grad_fn = type(value.grad_fn).__name__ if value.grad_fn is not None else None
        return (str(value.dtype).replace("torch.", "").replace("symgrad.", ""), grad_fn, value.detach().numpy().tolist())
    if isinstance(value, dict):
        return (type(value).__name__, {k: _flat(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_flat(v) for v in value])
    return value


LOADERS = {
    "in order": lambda T, D: D.DataLoader(D.TensorDataset(T.tensor(X), T.tensor(Y)), batch_size=8),
    "shuffled": lambda T, D: D.DataLoader(D.TensorDataset(T.tensor(X), T.tensor(Y)), batch_size=8, shuffle=True),
    "shuffled, last dropped": lambda T, D: D.DataLoader(D.TensorDataset(T.tensor(X)), batch_size=8, shuffle=True,
                                                        drop_last=True),
    "own generator": lambda T, D: D.DataLoader(D.TensorDataset(T.tensor(X), T.tensor(Y)), batch_size=16,
                                               shuffle=True, generator=T.Generator().manual_seed(7)),
    "no batches": lambda T, D: D.DataLoader(D.TensorDataset(T.tensor(X[:5]), T.tensor(Y[:5])), batch_size=None),
    "a sampler with replacement": lambda T, D: D.DataLoader(
        D.TensorDataset(T.tensor(X)), batch_size=4,
        sampler=D.RandomSampler(range(45), replacement=True, num_samples=40)),
    "a batch sampler": lambda T, D: D.DataLoader(
        D.TensorDataset(T.tensor(Y)), batch_sampler=D.BatchSampler(D.SequentialSampler(range(20)), 6, False)),
    "a subset sampler": lambda T, D: D.DataLoader(D.TensorDataset(T.tensor(X)), batch_size=3,
                                                  sampler=D.SubsetRandomSampler([1, 5, 9, 30, 44])),
    "random_split": lambda T, D: D.DataLoader(D.random_split(D.TensorDataset(T.tensor(X), T.tensor(Y)),
                                                             [0.6, 0.4])[1], batch_size=5, shuffle=True),
    "concatenated": lambda T, D: D.DataLoader(D.TensorDataset(T.tensor(X[:7])) + D.TensorDataset(T.tensor(X[7:12])),
                                              batch_size=5),
    "tuples of numbers and arrays": lambda T, D: D.DataLoader(Samples("tuple"), batch_size=4, shuffle=True),
    "dicts": lambda T, D: D.DataLoader(Samples("dict"), batch_size=4),
    "namedtuples": lambda T, D: D.DataLoader(Samples("namedtuple"), batch_size=3, drop_last=True),
    "ordered and default dicts": lambda T, D: D.DataLoader(Samples("mappings"), batch_size=4),
    "fewer samples than a batch, dropped": lambda T, D: D.DataLoader(Samples("tuple"), batch_size=16, drop_last=True),
    "a sampler without length": lambda T, D: D.DataLoader(D.TensorDataset(T.tensor(X)), batch_size=2,
                                                          sampler=(i for i in (4, 2, 7))),
    "a dataset that requires grad": lambda T, D: D.DataLoader(
        D.TensorDataset(T.tensor(X[:9], requires_grad=True)), batch_size=4, shuffle=True),
}


@pytest.mark.parametrize("name", LOADERS)
def test_every_batch_and_the_numbers_drawn_after_are_pytorchs(torch, name):
    ours, theirs = batches(symgrad, LOADERS[name]), batches(torch, LOADERS[name])
    assert ours == theirs


def test_a_stream(torch):
    def stream(T):
        D = data(T)

        class Stream(D.IterableDataset):
            def __iter__(self):
                return iter(T.tensor(X[i]) for i in range(11))
        T.manual_seed(3)
        return [_flat(batch) for batch in D.DataLoader(Stream(), batch_size=4)] + [T.rand(2).numpy().tolist()]

    assert stream(symgrad) == stream(torch)


@pytest.mark.parametrize("options", [dict(shuffle=True, sampler=[0, 1]), dict(batch_size=None, drop_last=True),
                                     dict(batch_sampler=[[0, 1]], batch_size=2), dict(batch_size=0),
                                     dict(batch_size=2, drop_last=1), dict(num_workers=-1), dict(timeout=-1),
                                     dict(prefetch_factor=2), dict(persistent_workers=True),
                                     dict(multiprocessing_context="spawn")])
def test_options_refused_as_pytorch_refuses_them(torch, options):
    def error(T):
        D = data(T)
        with pytest.raises(Exception) as caught:
            D.DataLoader(D.TensorDataset(T.tensor(X)), **options)
        return type(caught.value), str(caught.value)

    assert error(symgrad) == error(torch)


def test_streams_chained_and_loader_settings_fixed(torch):
    """``stream + stream`` chains them; a loader's batching settings cannot change once made."""
    def seen(T):
        D = data(T)

        class Stream(D.IterableDataset):
            def __iter__(self):
                return iter(range(3))
        loader = D.DataLoader(Stream() + Stream(), batch_size=4)
        with pytest.raises(ValueError) as caught:
            loader.batch_size = 2
        return [batch.tolist() for batch in loader], str(caught.value)

    assert seen(symgrad) == seen(torch)


def test_collating_strings_or_objects_in_arrays_is_refused(torch):
    for T in (symgrad, torch):
        for array in (np.array(["a", "b"]), np.array([object(), 1])):
            with pytest.raises(TypeError, match=f"found {array.dtype}"):
                data(T).default_collate([array, array])
    with pytest.raises(TypeError, match="missing 1 required positional"):
        symgrad.empty()


def test_tensors_of_other_lengths_are_refused(torch):
    for T in (symgrad, torch):
        with pytest.raises(AssertionError, match="Size mismatch between tensors"):
            data(T).TensorDataset(T.tensor(X), T.tensor(Y[:3]))


def test_a_batch_written_in_place_leaves_the_dataset_alone(torch):
    for T in (symgrad, torch):
        x = T.tensor(X)
        for xb, in data(T).DataLoader(data(T).TensorDataset(x), batch_size=10):
            xb.mul_(0)
        np.testing.assert_array_equal(x.numpy(), X)


def test_empty_is_shaped_as_pytorch(torch):
    for T in (symgrad, torch):
        a, b = T.empty(2, 3, dtype=T.float64, requires_grad=True), T.empty_like(T.tensor(Y))
        assert (tuple(a.shape), a.requires_grad, tuple(b.shape)) == ((2, 3), True, (45,))
        assert str(a.dtype).split(".")[1] == "float64" and str(b.dtype).split(".")[1] == "int64"


def _tutorial_loop(T, epochs=3):
    """The nn tutorial's loop over ``DataLoader(TensorDataset(x, y), batch_size, shuffle=True)``:
    every loss, and the parameters at the end."""
    D = data(T)
    T.manual_seed(0)
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((200, 6)).astype(np.float32), rng.integers(0, 3, 200)
    model = T.nn.Sequential(T.nn.Linear(6, 16), T.nn.ReLU(), T.nn.Linear(16, 3))
    opt = T.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loader = D.DataLoader(D.TensorDataset(T.tensor(x), T.tensor(y)), batch_size=16, shuffle=True)
    losses = []
    for _ in range(epochs):
        for xb, yb in loader:
            loss = T.nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss)
    return [float(loss) for loss in losses], [p.detach().numpy() for p in model.parameters()]


def test_the_nn_tutorials_loop_over_a_data_loader_replays(torch, both_paths):
    compiles, replayed = codegen.stats.compiles, replaying.stats.replayed
    ours, our_parameters = _tutorial_loop(symgrad)
    compiles, replayed = codegen.stats.compiles - compiles, replaying.stats.replayed - replayed
    theirs, their_parameters = _tutorial_loop(torch)
    np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=2e-6)
    for a, b in zip(our_parameters, their_parameters):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
    if speed.fast:  # 3 epochs of 13 batches: the short last batch of each leaves the trace
        assert replayed >= 25 and compiles <= 12, (replayed, compiles)

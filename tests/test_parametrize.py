"""``nn.utils.parametrize``, ``nn.utils.parametrizations`` (weight norm, spectral norm, the Cayley
orthogonal map), the deprecated hook-based ``weight_norm``/``spectral_norm`` and
``parameters_to_vector``/``vector_to_parameters`` against PyTorch: each scenario runs once with
symgrad and once with torch on the same seeds and inputs, and every value it records (forwards,
gradients of the originals, state_dict keys and values, power iteration's u and v, reprs, error
classes and messages) must agree."""
import copy
import importlib
import pickle
import warnings

import numpy as np
import pytest

import symgrad


def _agree(ours: dict, theirs: dict, tol: float = 1e-5) -> None:
    assert list(ours) == list(theirs)
    for key, expected in theirs.items():
        got = ours[key]
        if isinstance(expected, np.ndarray):
            assert got.shape == expected.shape and got.dtype == expected.dtype, key
            np.testing.assert_allclose(got, expected, rtol=tol, atol=tol, err_msg=key)
        else:
            assert got == expected, key


def _numbers(prefix: str, tensors, record: dict) -> None:
    for i, t in enumerate(tensors):
        record[f"{prefix}{i}"] = t.detach().numpy().copy()  # torch's numpy() shares memory a later step writes


def _error(record: dict, key: str, action) -> None:
    try:
        action()
    except Exception as error:  # noqa: BLE001 - the class is what is compared
        record[key] = (type(error).__name__, str(error))
    else:
        record[key] = None


def _x(T):
    return T.arange(8.0).reshape(2, 4).sub(3.5).div(4)


# ------------------------------------------------------------------ the tutorial's parametrizations

def _tutorial(T):
    P = importlib.import_module(T.__name__ + ".nn.utils.parametrize")
    nn = T.nn

    class Symmetric(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

        def right_inverse(self, A):
            return A.triu()

    class Skew(nn.Module):
        def forward(self, X):
            A = X.triu(1)
            return A - A.transpose(-1, -2)

    class CayleyMap(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.register_buffer("Id", T.eye(n))

        def forward(self, X):
            return T.linalg.solve(self.Id - X, self.Id + X)

    record, x = {}, _x(T)[:, :3]
    T.manual_seed(0)
    layer = nn.Linear(3, 3)
    first = layer.weight
    P.register_parametrization(layer, "weight", Symmetric())
    record["repr"], record["class"] = repr(layer), type(layer).__name__
    record["keys"] = list(layer.state_dict())
    record["parameter names"] = [name for name, _ in layer.named_parameters()]
    record["is parametrized"] = (P.is_parametrized(layer), P.is_parametrized(layer, "weight"),
                                 P.is_parametrized(layer, "bias"), P.type_before_parametrizations(layer).__name__)
    record["same original"] = layer.parametrizations.weight.original is first
    out = layer(x)
    (out * out).sum().backward()
    _numbers("symmetric ", [out, layer.weight, first.grad, layer.bias.grad], record)
    A = T.arange(9.0).reshape(3, 3)
    layer.weight = A + A.T  # right_inverse: the original becomes the upper triangle
    _numbers("assigned ", [layer.parametrizations.weight.original, layer.weight], record)
    with P.cached():
        record["cached"] = layer.weight is layer.weight
    record["uncached"] = layer.weight is layer.weight
    P.remove_parametrizations(layer, "weight", leave_parametrized=False)
    record["removed"] = (repr(layer), type(layer).__name__, layer.weight is first, list(layer.state_dict()))
    _numbers("left original ", [layer.weight], record)

    T.manual_seed(1)
    layer = nn.Linear(3, 3)
    P.register_parametrization(layer, "weight", Skew())
    P.register_parametrization(layer, "weight", CayleyMap(3))
    record["chain repr"], record["chain keys"] = repr(layer), list(layer.state_dict())
    out = layer(x)
    (out * out).sum().backward()
    Q = layer.weight
    _numbers("orthogonal ", [out, Q @ Q.T, layer.parametrizations.weight.original.grad], record)
    original = layer.parametrizations.weight.original
    P.remove_parametrizations(layer, "weight")  # leave_parametrized: the same tensor, the orthogonal values
    record["kept object"] = layer.weight is original and isinstance(layer.weight, nn.Parameter)
    _numbers("left parametrized ", [layer.weight], record)
    return record


def test_the_tutorials_parametrizations_symmetric_skew_cayley_cached_and_removal(torch):
    _agree(_tutorial(symgrad), _tutorial(torch))


# ------------------------------------------------------------------ errors

def _errors(T):
    P = importlib.import_module(T.__name__ + ".nn.utils.parametrize")
    nn = T.nn

    class Double(nn.Module):  # no right_inverse
        def forward(self, X):
            return 2 * X

    class Widen(nn.Module):
        def forward(self, X):
            return T.cat([X, X], dim=0)

    class ToDouble(nn.Module):
        def forward(self, X):
            return X.double()

    class Pair(nn.Module):
        def forward(self, a, b):
            return a * b

        def right_inverse(self, X):
            return X, T.ones_like(X)

    record = {}
    layer = nn.Linear(3, 2)
    _error(record, "missing name", lambda: P.register_parametrization(layer, "foo", Double()))
    _error(record, "not parametrized", lambda: P.remove_parametrizations(layer, "weight"))
    _error(record, "shape", lambda: P.register_parametrization(layer, "weight", Widen()))
    _error(record, "dtype", lambda: P.register_parametrization(layer, "weight", ToDouble()))
    record["untouched"] = (type(layer).__name__, list(layer.state_dict()))
    P.register_parametrization(layer, "weight", Double())
    _error(record, "appended shape", lambda: P.register_parametrization(layer, "weight", Widen()))

    def assign():
        layer.weight = T.zeros(2, 3)
    _error(record, "no right_inverse", assign)
    _error(record, "pickle", lambda: pickle.dumps(layer))
    _error(record, "parameter over a parametrization", lambda: setattr(layer, "weight", nn.Parameter(T.zeros(2, 3))))
    replica = copy.deepcopy(layer)
    record["deepcopy"] = (type(replica).__name__, list(replica.state_dict()),
                          replica.parametrizations.weight.original is not layer.parametrizations.weight.original)
    P.register_parametrization(layer, "bias", Pair())
    record["pair keys"] = list(layer.state_dict())
    _error(record, "pair left unparametrized",
           lambda: P.remove_parametrizations(layer, "bias", leave_parametrized=False))
    P.remove_parametrizations(layer, "bias")
    record["pair removed"] = (list(layer.state_dict()), isinstance(layer.bias, nn.Parameter), type(layer).__name__)
    P.register_parametrization(layer, "weight", Widen(), unsafe=True)
    record["unsafe shape"] = tuple(layer.weight.shape)
    return record


def test_errors_are_pytorchs_and_leave_the_module_as_it_was(torch):
    _agree(_errors(symgrad), _errors(torch))


# ------------------------------------------------------------------ weight norm and spectral norm

def _weight_norm(T, dim):
    record, x = {}, _x(T)
    T.manual_seed(1)
    layer = T.nn.utils.parametrizations.weight_norm(T.nn.Linear(4, 3), dim=dim)
    record["repr"], record["keys"] = repr(layer), list(layer.state_dict())
    out = layer(x)
    (out * out).sum().backward()
    chain = layer.parametrizations.weight
    _numbers("", [*layer.state_dict().values(), out, chain.original0.grad, chain.original1.grad], record)
    T.nn.utils.parametrize.remove_parametrizations(layer, "weight")
    _numbers("removed ", [layer.weight], record)
    return record


@pytest.mark.parametrize("dim", [0, None])
def test_weight_norm_keeps_g_and_v_as_pytorch(torch, dim):
    _agree(_weight_norm(symgrad, dim), _weight_norm(torch, dim))


def _spectral_norm(T, n_power_iterations):
    record, x = {}, _x(T)
    T.manual_seed(2)
    layer = T.nn.utils.parametrizations.spectral_norm(T.nn.Linear(4, 3), n_power_iterations=n_power_iterations)
    record["repr"], record["keys"] = repr(layer), list(layer.state_dict())
    _numbers("registered ", layer.state_dict().values(), record)
    for step in range(2):  # training: each read takes power steps
        out = layer(x)
        (out * out).sum().backward()
        _numbers(f"step {step} ", [*layer.state_dict().values(), out], record)
    _numbers("gradient ", [layer.parametrizations.weight.original.grad], record)
    layer.eval()
    _numbers("eval ", [layer(x), *layer.state_dict().values()], record)  # u and v as they were
    conv = T.nn.utils.parametrizations.spectral_norm(T.nn.ConvTranspose1d(2, 3, 2))  # output channels: dim 1
    norm = conv.parametrizations.weight[0]
    record["transposed"] = (norm.dim, tuple(norm._u.shape), tuple(norm._v.shape))
    _error(record, "zero steps", lambda: T.nn.utils.parametrizations.spectral_norm(T.nn.Linear(2, 2),
                                                                                   n_power_iterations=0))
    _error(record, "dim", lambda: T.nn.utils.parametrizations.spectral_norm(T.nn.Linear(2, 2), dim=2))
    _error(record, "no such tensor", lambda: T.nn.utils.parametrizations.spectral_norm(T.nn.Linear(2, 2), "w"))
    return record


def test_spectral_norm_power_iteration_in_training_and_eval(torch):
    _agree(_spectral_norm(symgrad, 2), _spectral_norm(torch, 2))


def _cayley(T):
    record, x = {}, _x(T)[:, :3]
    for shape in [(3, 5)]:  # wide: transposed, completed by random columns, made orthogonal by QR
        T.manual_seed(0)
        layer = T.nn.utils.parametrizations.orthogonal(T.nn.Linear(*shape), orthogonal_map="cayley")
        out = layer(x)
        (out * out).sum().backward()
        chain = layer.parametrizations.weight
        record[f"{shape} keys"] = list(layer.state_dict())
        _numbers(f"{shape} ", [out, layer.weight, chain[0].base, chain.original, chain.original.grad], record)
    _error(record, "map", lambda: T.nn.utils.parametrizations.orthogonal(T.nn.Linear(2, 2), orthogonal_map="qr"))
    _error(record, "vector", lambda: T.nn.utils.parametrizations.orthogonal(T.nn.Linear(2, 2), "bias"))
    return record


def test_orthogonal_by_the_cayley_map(torch):
    _agree(_cayley(symgrad), _cayley(torch))


# ------------------------------------------------------------------ the deprecated hook-based versions

def _deprecated(T):
    record, x, utils = {}, _x(T), T.nn.utils
    T.manual_seed(3)
    layer = utils.spectral_norm(T.nn.Linear(4, 3))
    for step in range(2):
        out = layer(x)
        (out * out).sum().backward()
        _numbers(f"spectral {step} ", [out, *layer.state_dict().values()], record)
    record["spectral keys"] = list(layer.state_dict())
    _numbers("spectral gradient ", [layer.weight_orig.grad], record)
    _error(record, "spectral twice", lambda: utils.spectral_norm(layer))
    layer.eval()
    _numbers("spectral eval ", [layer(x), *layer.state_dict().values()], record)
    utils.remove_spectral_norm(layer)
    record["spectral removed"] = list(layer.state_dict())
    _numbers("spectral removed ", [layer.weight], record)
    _error(record, "spectral not found", lambda: utils.remove_spectral_norm(layer))

    T.manual_seed(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        layer = utils.weight_norm(T.nn.Linear(4, 3), dim=1)
    record["warning"] = [(w.category.__name__, str(w.message)) for w in caught]
    out = layer(x)
    (out * out).sum().backward()
    record["weight norm keys"] = list(layer.state_dict())
    _numbers("weight norm ", [out, *layer.state_dict().values(), layer.weight_g.grad, layer.weight_v.grad], record)
    _error(record, "weight norm twice", lambda: utils.weight_norm(layer, dim=1))
    utils.remove_weight_norm(layer)
    record["weight norm removed"] = list(layer.state_dict())
    _numbers("weight norm removed ", [layer.weight], record)
    _error(record, "weight norm not found", lambda: utils.remove_weight_norm(layer))
    return record


def test_deprecated_hook_based_weight_norm_and_spectral_norm(torch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the second weight_norm's warning
        _agree(_deprecated(symgrad), _deprecated(torch))


# ------------------------------------------------------------------ parameters as one vector

def _vectors(T):
    record, utils = {}, T.nn.utils
    T.manual_seed(4)
    layer = T.nn.Linear(4, 3)
    vector = utils.parameters_to_vector(layer.parameters())
    (vector * T.arange(15.0)).sum().backward()
    _numbers("", [vector, layer.weight.grad, layer.bias.grad], record)
    weight = layer.weight
    utils.vector_to_parameters(T.arange(15.0), layer.parameters())
    record["same objects"] = layer.weight is weight
    _numbers("set ", [layer.weight, layer.bias], record)
    _error(record, "not a tensor", lambda: utils.vector_to_parameters([1.0], layer.parameters()))
    _error(record, "short", lambda: utils.vector_to_parameters(T.zeros(13), layer.parameters()))
    record["short"] = (record["short"][0], record["short"][1].split(" [")[0])  # symgrad's message adds the op's shapes
    return record


def test_parameters_to_vector_and_back(torch):
    _agree(_vectors(symgrad), _vectors(torch))

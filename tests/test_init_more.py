"""nn.init's orthogonal_, trunc_normal_, eye_, dirac_ and sparse_ give PyTorch's seeded numbers;
the deprecated spellings without the underscore warn as PyTorch's do; errors match."""
import warnings

import numpy as np
import pytest

import symgrad


def _filled(lib, init, shape, *args):
    lib.manual_seed(0)
    tensor = lib.empty(*shape)
    assert init(lib)(tensor, *args) is tensor
    return tensor.numpy()


@pytest.mark.parametrize("init,shape,args,exact", [
    (lambda t: t.nn.init.trunc_normal_, (5, 7), (), True),
    (lambda t: t.nn.init.trunc_normal_, (5, 7), (0.5, 2.0, -1.0, 3.0), True),
    (lambda t: t.nn.init.trunc_normal_, (40,), (0.0, 1.0, 1.5, 3.0), True),  # narrow: uniform proposals
    (lambda t: t.nn.init.eye_, (3, 5), (), True),
    (lambda t: t.nn.init.dirac_, (4, 2, 3, 3), (2,), True),
    (lambda t: t.nn.init.dirac_, (3, 4, 5), (), True),
    (lambda t: t.nn.init.sparse_, (6, 4), (0.4,), True),
    (lambda t: t.nn.init.orthogonal_, (3, 5), (), False),  # QR's rounding differs from LAPACK's by an ulp
    (lambda t: t.nn.init.orthogonal_, (6, 2, 2), (2.0,), False),
])
def test_seeded_values_match_pytorch(init, shape, args, exact, torch):
    ours, theirs = _filled(symgrad, init, shape, *args), _filled(torch, init, shape, *args)
    tol = 0 if exact else 1e-6
    np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol)
    # the generator is where PyTorch's is afterwards
    np.testing.assert_array_equal(symgrad.rand(3).numpy(), torch.rand(3).numpy())


def test_deprecated_spellings_warn_and_errors_match(torch):
    for name in ("uniform", "normal", "constant", "eye", "dirac", "xavier_uniform", "xavier_normal",
                 "kaiming_uniform", "kaiming_normal", "orthogonal", "sparse"):
        shape = (4, 2, 3) if name == "dirac" else (4, 6)
        args = (0.5,) if name in ("constant", "sparse") else ()
        seen = []
        for lib in (symgrad, torch):
            lib.manual_seed(0)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                tensor = getattr(lib.nn.init, name)(lib.empty(*shape), *args)
            seen.append(([(w.category, str(w.message)) for w in caught], tensor.numpy()))
        assert seen[0][0] == seen[1][0]
        np.testing.assert_allclose(seen[0][1], seen[1][1], rtol=1e-6, atol=1e-6)
    calls = [lambda t: t.nn.init.orthogonal_(t.empty(3)), lambda t: t.nn.init.eye_(t.empty(2, 2, 2)),
             lambda t: t.nn.init.dirac_(t.empty(2, 2)), lambda t: t.nn.init.dirac_(t.empty(3, 2, 2), 2),
             lambda t: t.nn.init.sparse_(t.empty(3), 0.1)]
    for call in calls:
        with pytest.raises(Exception) as theirs:
            call(torch)
        with pytest.raises(type(theirs.value), match=str(theirs.value)):
            call(symgrad)
    with pytest.warns(UserWarning, match="mean is more than 2 std"):
        symgrad.nn.init.trunc_normal_(symgrad.empty(3), mean=10.0)

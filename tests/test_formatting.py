"""Printing follows PyTorch to the character, for the cases its formatter distinguishes."""
import numpy as np
import pytest

import symgrad
from parity import assert_same_printout

CASES = {
    "fixed": [0.1234567, 123.4],
    "whole": [[4.0, 2.0], [2.0, 4.0]],
    "scientific_small": [1e-5, 1.0],
    "scientific_large": [1e9, 1.0],
    "negative_zero": [-0.0, -0.0],
    "nan_inf": [float("nan"), 1.5, float("inf")],
    "scalar": 3.0,
    "empty": [],
    "wrapping": list(np.linspace(-2, 2, 30)),
    "summarized": list(np.linspace(-1, 1, 1001)),
    "matrix_summarized": np.linspace(0, 1, 2000).reshape(40, 50).tolist(),
    "three_d": np.arange(24.0).reshape(2, 3, 4).tolist(),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_printing_matches(name, dtype, torch):
    ours = repr(symgrad.tensor(CASES[name], dtype=getattr(symgrad, dtype)))
    theirs = repr(torch.tensor(CASES[name], dtype=getattr(torch, dtype)))
    assert ours == theirs or assert_same_printout(ours, theirs) is None


@pytest.mark.parametrize("values", [[1, 2, 300], [True, False], [[-5, 6], [7, 8]]])
def test_integer_and_bool_printing_matches(values, torch):
    assert repr(symgrad.tensor(values)) == repr(torch.tensor(values))


def test_suffixes_wrap_like_pytorch(torch):
    values = np.array([0.53, -0.4332, 1.0837])
    ours = repr(symgrad.tensor(values, requires_grad=True).double() * 1)
    theirs = repr(torch.tensor(values, requires_grad=True).double() * 1)
    assert ours == theirs

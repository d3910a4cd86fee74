"""Shared fixtures: the optional PyTorch reference and float64-friendly tolerances."""
import pytest


@pytest.fixture(scope="session")
def torch():
    """The real PyTorch, the reference for parity tests (installed by the README's test command)."""
    return pytest.importorskip("torch")

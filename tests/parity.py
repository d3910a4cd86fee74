"""Helpers for comparing what symgrad prints with what PyTorch prints."""
from __future__ import annotations

import re

import pytest

NUMBER = re.compile(r"-?(?:\d+\.\d*|\d+)(?:e[+-]\d+)?|nan|-?inf")
ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


def split_numbers(text: str):
    """(the text with every number replaced by '#', the numbers)."""
    text = ADDRESS.sub("0xADDR", text)
    numbers = [float(m) for m in NUMBER.findall(text)]
    return NUMBER.sub("#", text), numbers


def assert_same_printout(ours: str, theirs: str, tolerance: float = 2e-4):
    """Same text and layout; numbers equal to the printed precision (float32 rounding aside)."""
    skeleton_ours, numbers_ours = split_numbers(ours)
    skeleton_theirs, numbers_theirs = split_numbers(theirs)
    assert skeleton_ours == skeleton_theirs, f"layout differs:\n--- symgrad\n{ours}\n--- torch\n{theirs}"
    assert len(numbers_ours) == len(numbers_theirs)
    for a, b in zip(numbers_ours, numbers_theirs):
        same = (a != a and b != b) or abs(a - b) <= tolerance * max(1.0, abs(b))
        assert same, f"{a} != {b}\n--- symgrad\n{ours}\n--- torch\n{theirs}"


def raised(fn, module):
    """The name of the exception class ``fn(module)`` raises, or None."""
    try:
        fn(module)
    except Exception as error:  # noqa: BLE001  (the class is what is compared)
        return type(error).__name__
    return None


def assert_raises_as_pytorch(make, torch, symgrad):
    """``make(torch)`` raises; ``make(symgrad)`` raises the same class, its message opening with
    the first 60 characters of PyTorch's."""
    with pytest.raises(Exception) as theirs:
        make(torch)
    with pytest.raises(type(theirs.value)) as ours:
        make(symgrad)
    words = str(theirs.value).split("\n")[0][:60]
    assert str(ours.value).startswith(words), (str(ours.value), str(theirs.value))

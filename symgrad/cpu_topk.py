"""Which entries PyTorch's CPU ``topk`` keeps among equal values, on the host.  symgrad's own ``topk``
sorts with XLA and keeps the first of equal values (api.md lists it); a choice that must be
PyTorch's entry for entry (``nn.utils.prune``'s masks) asks here."""
from __future__ import annotations

import math

import numpy as np


def kernel_topk(values: np.ndarray, k: int, largest: bool) -> np.ndarray:
    """The positions ``torch.topk(values, k, largest)`` returns on the CPU (as a set): its kernel runs
    libstdc++'s ``partial_sort`` when ``64 k <= n``, else ``nth_element``, on (value, position) pairs
    compared by value only (NaN largest), so which of equal values it keeps is those algorithms'
    doing.  Both are replayed here step by step."""
    n = len(values)
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    keys = [float(v) for v in values]
    if largest:
        def before(a, b):
            x, y = keys[a], keys[b]
            return (math.isnan(x) and not math.isnan(y)) or x > y
    else:
        def before(a, b):
            x, y = keys[a], keys[b]
            return (not math.isnan(x) and math.isnan(y)) or x < y
    order = list(range(n))
    if k * 64 <= n:
        _heap_select(order, 0, k, n, before)
    else:
        _introselect(order, k - 1, n, before)
    return np.array(order[:k], dtype=np.int64)


def _introselect(a: list, nth: int, last: int, before) -> None:
    """libstdc++'s ``std::nth_element``: median-of-three partitions until at most three remain, a
    heap select after too many rounds, then an insertion sort."""
    first, depth = 0, 2 * (last.bit_length() - 1)
    while last - first > 3:
        if depth == 0:
            _heap_select(a, first, nth + 1, last, before)
            a[first], a[nth] = a[nth], a[first]
            return
        depth -= 1
        cut = _partition_around_median(a, first, last, before)
        if cut <= nth:
            first = cut
        else:
            last = cut
    _insertion_sort(a, first, last, before)


def _partition_around_median(a: list, first: int, last: int, before) -> int:
    middle = first + (last - first) // 2
    x, y, z = first + 1, middle, last - 1  # the median of these moves to ``first``, the pivot
    if before(a[x], a[y]):
        pick = y if before(a[y], a[z]) else z if before(a[x], a[z]) else x
    else:
        pick = x if before(a[x], a[z]) else z if before(a[y], a[z]) else y
    a[first], a[pick] = a[pick], a[first]
    low, high = first + 1, last
    while True:
        while before(a[low], a[first]):
            low += 1
        high -= 1
        while before(a[first], a[high]):
            high -= 1
        if low >= high:
            return low
        a[low], a[high] = a[high], a[low]
        low += 1


def _insertion_sort(a: list, first: int, last: int, before) -> None:
    for i in range(first + 1, last):
        value = a[i]
        if before(value, a[first]):
            a[first + 1:i + 1] = a[first:i]
            a[first] = value
            continue
        j = i
        while before(value, a[j - 1]):
            a[j] = a[j - 1]
            j -= 1
        a[j] = value


def _heap_select(a: list, first: int, middle: int, last: int, before) -> None:
    """libstdc++'s ``__heap_select``: a heap of the first ``middle - first`` entries, each later
    entry that comes before its top swapped in."""
    size = middle - first
    for parent in range((size - 2) // 2, -1, -1):
        _adjust_heap(a, first, parent, size, a[first + parent], before)
    for i in range(middle, last):
        if before(a[i], a[first]):
            value, a[i] = a[i], a[first]
            _adjust_heap(a, first, 0, size, value, before)


def _adjust_heap(a: list, first: int, hole: int, size: int, value, before) -> None:
    top, child = hole, hole
    while child < (size - 1) // 2:
        child = 2 * (child + 1)
        if before(a[first + child], a[first + child - 1]):
            child -= 1
        a[first + hole] = a[first + child]
        hole = child
    if size % 2 == 0 and child == (size - 2) // 2:
        child = 2 * (child + 1)
        a[first + hole] = a[first + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and before(a[first + parent], value):
        a[first + hole] = a[first + parent]
        hole, parent = parent, (parent - 1) // 2
    a[first + hole] = value


# ------------------------------------------------------------------ amounts and checks

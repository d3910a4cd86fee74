"""Bit operations on integer and bool tensors, against PyTorch on the same inputs: ``& | ^ ~ << >>``
(reflected and in place) and their ``bitwise_*`` names, gcd and lcm, with PyTorch's type promotion,
its shifts by negative and oversized amounts, its gcd of the most negative integer, and its errors
(class and message) for float operands, bool shifts and in-place results wider than the tensor."""
import numpy as np
import pytest

import symgrad

I32_MIN, I32_MAX, I64_MIN = -2 ** 31, 2 ** 31 - 1, -2 ** 63
A = [5, -3, 0, 7, -1, 12, I32_MIN, I32_MAX]
B = [3, 6, -4, 0, -1, 18, 2, -5]
BOOLS = [True, False, True, False, True, True, False, False]

OPERANDS = {
    "int32": lambda t: t.tensor(A, dtype=t.int32), "int64": lambda t: t.tensor(B, dtype=t.int64),
    "bool": lambda t: t.tensor(BOOLS), "float32": lambda t: t.tensor([1.0, 2.0] * 4),
    "column": lambda t: t.tensor([[3], [-2]], dtype=t.int32),
    "5": lambda t: 5, "True": lambda t: True, "2.5": lambda t: 2.5,
}
OPERATIONS = {
    "&": lambda t, a, b: a & b, "|": lambda t, a, b: a | b, "^": lambda t, a, b: a ^ b,
    "<<": lambda t, a, b: a << b, ">>": lambda t, a, b: a >> b,
    "bitwise_and": lambda t, a, b: t.bitwise_and(a, b), "bitwise_or": lambda t, a, b: t.bitwise_or(a, b),
    "bitwise_xor": lambda t, a, b: t.bitwise_xor(a, b),
    "bitwise_left_shift": lambda t, a, b: t.bitwise_left_shift(a, b),
    "bitwise_right_shift": lambda t, a, b: t.bitwise_right_shift(a, b),
    "gcd": lambda t, a, b: t.gcd(a, b), "lcm": lambda t, a, b: t.lcm(a, b),
}
PAIRS = [("int32", "int32"), ("int32", "int64"), ("int64", "bool"), ("bool", "bool"), ("bool", "int32"),
         ("int32", "5"), ("5", "int32"), ("bool", "True"), ("True", "bool"), ("bool", "5"), ("int32", "True"),
         ("int32", "float32"), ("float32", "float32"), ("int32", "2.5"), ("2.5", "int64"), ("column", "int64")]


def _outcome(lib, f):
    """What ``f(lib)`` gives: (dtype, values), or the exception's class and message."""
    try:
        result = f(lib)
    except Exception as error:  # noqa: BLE001 (the comparison is the point)
        return type(error), str(error)
    return str(result.dtype), np.array(result.tolist())


def _same_outcome(torch, f):
    ours, theirs = _outcome(symgrad, f), _outcome(torch, f)
    if isinstance(theirs[0], type):  # an error: PyTorch's class, its message (symgrad may add where)
        assert ours[0] is theirs[0] and ours[1].startswith(theirs[1]), (ours, theirs)
    else:
        assert ours[0] == theirs[0], (ours, theirs)
        np.testing.assert_array_equal(ours[1], theirs[1])


@pytest.mark.parametrize("pair", PAIRS, ids="-".join)
@pytest.mark.parametrize("operation", OPERATIONS)
def test_binary_bit_operations_promote_and_refuse_as_pytorch(torch, operation, pair):
    left, right = (OPERANDS[name] for name in pair)
    _same_outcome(torch, lambda t: OPERATIONS[operation](t, left(t), right(t)))


@pytest.mark.parametrize("operand", ["int32", "int64", "bool", "float32"])
def test_bitwise_not_and_invert(torch, operand):
    _same_outcome(torch, lambda t: ~OPERANDS[operand](t))
    _same_outcome(torch, lambda t: t.bitwise_not(OPERANDS[operand](t)))
    _same_outcome(torch, lambda t: OPERANDS[operand](t).bitwise_not())


@pytest.mark.parametrize("dtype,width", [("int32", 32), ("int64", 64)])
def test_shifts_by_negative_and_oversized_amounts(torch, dtype, width):
    """PyTorch's CPU kernels: a left shift out of range is 0, a right shift out of range fills
    with the sign (a shift into the sign bit wraps)."""
    values = [5, -3, 1, -1, 7, -8, 1, -1, 3, -7]
    amounts = [-1, -width, 0, 1, width - 1, width - 1, width, width, width + 1, 1000]
    for shift in ("<<", ">>"):
        _same_outcome(torch, lambda t: OPERATIONS[shift](t, t.tensor(values, dtype=getattr(t, dtype)),
                                                          t.tensor(amounts, dtype=getattr(t, dtype))))
        _same_outcome(torch, lambda t: OPERATIONS[shift](t, t.tensor(values, dtype=getattr(t, dtype)), width + 3))
    _same_outcome(torch, lambda t: 1 << t.tensor(amounts, dtype=getattr(t, dtype)))
    _same_outcome(torch, lambda t: -16 >> t.tensor(amounts, dtype=getattr(t, dtype)))


def test_gcd_and_lcm_at_zero_signs_and_the_most_negative_integer(torch):
    """Euclid's loop on absolute values: gcd(INT_MIN, 0) is INT_MIN (its absolute value wraps),
    lcm wraps where |a / gcd * b| overflows; int32 meets int64 in int64 before |a| is taken."""
    a = [12, -18, 0, 0, 7, I64_MIN, I64_MIN, 2 ** 62, -4, 1, 2 ** 40 + 1]
    b = [8, 12, 5, 0, -21, 0, 6, 3, -6, I64_MIN, 2 ** 20]
    for name in ("gcd", "lcm"):
        _same_outcome(torch, lambda t: OPERATIONS[name](t, t.tensor(a), t.tensor(b)))
        _same_outcome(torch, lambda t: OPERATIONS[name](t, t.tensor([I32_MIN, I32_MIN, 9, 0], dtype=t.int32),
                                                        t.tensor([0, 4, 6, 0], dtype=t.int32)))
        _same_outcome(torch, lambda t: OPERATIONS[name](t, t.tensor([I32_MIN, 6], dtype=t.int32), t.tensor([0, 4])))
        _same_outcome(torch, lambda t: OPERATIONS[name](t, t.tensor(12), t.tensor([[8], [18]], dtype=t.int32)))
        _same_outcome(torch, lambda t: OPERATIONS[name](t, 3, t.tensor([4])))
        _same_outcome(torch, lambda t: getattr(t.tensor([4]), name)(3))


IN_PLACE = {"&=": lambda a, b: a.__iand__(b), "|=": lambda a, b: a.__ior__(b), "^=": lambda a, b: a.__ixor__(b),
            "<<=": lambda a, b: a.__ilshift__(b), ">>=": lambda a, b: a.__irshift__(b),
            "bitwise_and_": lambda a, b: a.bitwise_and_(b), "bitwise_or_": lambda a, b: a.bitwise_or_(b),
            "bitwise_xor_": lambda a, b: a.bitwise_xor_(b),
            "bitwise_left_shift_": lambda a, b: a.bitwise_left_shift_(b),
            "bitwise_right_shift_": lambda a, b: a.bitwise_right_shift_(b), "gcd_": lambda a, b: a.gcd_(b),
            "lcm_": lambda a, b: a.lcm_(b)}


@pytest.mark.parametrize("operation", IN_PLACE)
def test_in_place_forms_write_into_the_tensor_or_refuse_a_wider_result(torch, operation):
    """The result takes the tensor's dtype (an int64 result into int32 too); a float or integer
    result into an integer or bool tensor is refused before any kernel, as PyTorch's."""
    f = IN_PLACE[operation]
    for target, other in (("int32", "int64"), ("int32", "bool"), ("bool", "bool"), ("int32", "2.5"),
                          ("bool", "int32"), ("float32", "int32"), ("int32", "float32"), ("bool", "5")):
        def run(t):
            tensor = OPERANDS[target](t)
            result = f(tensor, OPERANDS[other](t))
            assert result is tensor
            return tensor
        _same_outcome(torch, run)
        _same_outcome(torch, lambda t: OPERANDS[target](t))  # after an error, the operands are as they were


def test_bitwise_not_in_place_and_on_views(torch):
    def run(t):
        x = t.tensor([[1, -2, 3], [0, 5, -6]], dtype=t.int32)
        x[0].bitwise_not_()
        x[:, 1] &= t.tensor([3, 6], dtype=t.int32)
        x[1] <<= 2
        return x
    _same_outcome(torch, run)


def test_a_tensor_that_requires_grad_is_float_and_refused(torch):
    _same_outcome(torch, lambda t: t.tensor([1.0, 2.0], requires_grad=True) & t.tensor([1, 2]))
    _same_outcome(torch, lambda t: t.tensor([1.0, 2.0], requires_grad=True).bitwise_not())
    x = symgrad.tensor([6, 4]) & symgrad.tensor([3, 5])
    assert not x.requires_grad and x.grad_fn is None


def test_logical_results_stay_boolean_and_masks_still_compose(torch):
    """``&`` of two masks is a mask, as before bitwise ops existed; a mask selects as one."""
    def run(t):
        x = t.tensor([-2.0, -0.5, 0.5, 3.0, float("nan")])
        keep = ((x > -1) & (x < 1)) | (x != x)
        return t.where(keep ^ (x > 2), x, t.zeros(5))
    _same_outcome(torch, run)
    out = np.asarray((symgrad.tensor([1, 2, 3]) > 1) & (symgrad.tensor([1, 2, 3]) < 3))
    assert out.dtype == np.bool_ and out.tolist() == [False, True, False]

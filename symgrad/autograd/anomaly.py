"""``detect_anomaly`` and ``set_detect_anomaly``: while on, a backward that produces NaN in a gradient
it stores raises, at the ``backward`` call, instead of leaving the NaN in ``.grad``.

PyTorch checks the output of each backward function and names it; symgrad's backward is one
compiled program, so it checks the gradients the program returns (the same NaN, found at the end).
"""
from __future__ import annotations

import functools
import warnings

from symgrad import engine


def is_anomaly_enabled() -> bool:
    return engine.anomaly_mode[0]


def is_anomaly_check_nan_enabled() -> bool:
    return engine.anomaly_mode[0] and engine.anomaly_mode[1]


class set_detect_anomaly:
    """Turns anomaly detection on or off now; as a context manager, puts the previous mode back."""

    def __init__(self, mode: bool, check_nan: bool = True):
        self.previous = tuple(engine.anomaly_mode)
        engine.anomaly_mode[:] = [bool(mode), bool(check_nan)]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        engine.anomaly_mode[:] = list(self.previous)
        return False


class detect_anomaly:
    """Context manager and decorator: anomaly detection on inside."""

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
                      "enabled for debugging.", UserWarning, stacklevel=2)

    def __enter__(self):
        self.previous = tuple(engine.anomaly_mode)
        engine.anomaly_mode[:] = [True, self.check_nan]
        return self

    def __exit__(self, *exc):
        engine.anomaly_mode[:] = list(self.previous)
        return False

    def __call__(self, function):
        @functools.wraps(function)
        def wrapped(*args, **kwargs):
            with self.__class__(self.check_nan):
                return function(*args, **kwargs)
        return wrapped

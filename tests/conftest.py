"""Shared fixtures and settings: the optional PyTorch reference, Hypothesis profiles."""
import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("default", max_examples=150, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("slow", max_examples=2000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", help="property tests run thousands of examples")


def pytest_configure(config):
    settings.load_profile("slow" if config.getoption("--slow") else os.environ.get("HYPOTHESIS_PROFILE", "default"))
    _keep_compiled_programs()


def _keep_compiled_programs():
    """XLA's compiles are most of the suite's time, and many programs recur: in other test files, on
    the other worker, in the next run.  JAX's persistent cache keeps each executable under its HLO,
    compile options and JAX and XLA versions, so a hit is the very program XLA would compile (the
    library itself never sets it).  No size limit: with one, JAX scans the whole directory at every
    write (a run of the suite took twice as long)."""
    import tempfile

    import jax

    default = os.path.join(tempfile.gettempdir(), "symgrad-xla-for-tests")
    jax.config.update("jax_compilation_cache_dir", os.environ.get("SYMGRAD_TEST_XLA_CACHE", default))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)


@pytest.fixture(params=["fast path", "plain path"])
def both_paths(request):
    """Run a parity test with the speed layer and without it (codegen.speed): a wrong number on
    one path only is the speed layer's."""
    import symgrad
    if request.param == "plain path":
        with symgrad.plain_path():
            yield request.param
    else:
        yield request.param


@pytest.fixture(scope="session")
def torch():
    """The real PyTorch, the reference for parity tests (installed by the README's test command)."""
    return pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _fresh_loop_state():
    """Each test is a program of its own: the loops an earlier test ran on this thread (their
    traces, rests and declined plans, symgrad.cycles) are not its, as in a fresh process."""
    from symgrad.grad_mode import _state
    _state.cycle = None

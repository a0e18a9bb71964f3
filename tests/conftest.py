import os

import jax
import pytest


# Strict numerics in tests (as equinox and diffrax do): no silent rank broadcasting and
# no implicit dtype promotion (a bool or an int mixed into float arithmetic must be
# converted on purpose). The runtime shape checks of the core's jaxtyping annotations
# are switched on in pyproject.toml (`--jaxtyping-packages`).
jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_numpy_dtype_promotion", "strict")

# One persistent compilation cache for the suite: many tests compile the same programs
# (the same model on the same shapes, from a new closure each time), and the
# fresh-machine check's inner run (`.ci/fresh_machine.sh`, same user) finds the outer
# run's programs there. A hit loads the executable XLA compiled, so results are the
# same bits. `COSTMODEL_TEST_JAX_CACHE` moves it; set to "" it is off. An entry JAX
# cannot read or write (a killed run's partial file, a full disk) is compiled afresh:
# its warning is not an error (pyproject.toml). A folder that cannot be made: no cache.
_CACHE = os.environ.get("COSTMODEL_TEST_JAX_CACHE", os.path.expanduser("~/.cache/costmodel/jax-tests"))
try:
    if _CACHE:
        os.makedirs(_CACHE, exist_ok=True)
except OSError:
    _CACHE = ""
if _CACHE:
    jax.config.update("jax_compilation_cache_dir", _CACHE)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)


@pytest.fixture
def x64():
    """Runs a test in float64 (reference and finite-difference tests)."""
    with jax.enable_x64(True):
        yield


def pytest_collection_modifyitems(config, items):
    """Inside the fresh-machine check (`.ci/fresh_machine.sh`, which `.ci/run` runs after
    the whole suite has passed on the same commit, with `COSTMODEL_FRESH_MACHINE_INNER`
    set) the tests marked `slow` are skipped: that check proves the README's commands
    install and run the suite on a clean clone, and the slow tests (those of about 5 s or
    more with a warm compilation cache: whole published tables evaluated, long fits,
    properties over many random cases; BENCHMARKS.md, Test-suite time; and any that reads
    what one of them left) were just run on the same code. Everywhere else, all run."""
    if not os.environ.get("COSTMODEL_FRESH_MACHINE_INNER"):
        return
    skip = pytest.mark.skip(reason="slow: run by the suite of .ci/run on the same commit before this check")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)

import jax
import pytest


# Strict numerics in tests (as equinox and diffrax do): no silent rank broadcasting and
# no implicit dtype promotion (a bool or an int mixed into float arithmetic must be
# converted on purpose). The runtime shape checks of the core's jaxtyping annotations
# are switched on in pyproject.toml (`--jaxtyping-packages`).
jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_numpy_dtype_promotion", "strict")


@pytest.fixture
def x64():
    """Runs a test in float64 (reference and finite-difference tests)."""
    with jax.enable_x64(True):
        yield

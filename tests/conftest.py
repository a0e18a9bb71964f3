import jax
import pytest


# Strict numerics in tests (as equinox and diffrax do): no silent rank broadcasting.
jax.config.update("jax_numpy_rank_promotion", "raise")


@pytest.fixture
def x64():
    """Runs a test in float64 (reference and finite-difference tests)."""
    with jax.enable_x64(True):
        yield

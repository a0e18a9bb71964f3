"""`pip install costmodel` gives the model: the core and the library run without the
tools' packages (rich, matplotlib, pyarrow, pandas, flax), which are extras."""

import subprocess
import sys
import textwrap

import pytest


EXTRAS = ("rich", "matplotlib", "pyarrow", "pandas", "flax")


def run_without_extras(code: str) -> subprocess.CompletedProcess:
    # A None entry in sys.modules makes `import name` raise ImportError, as if the
    # package were not installed.
    prelude = "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in EXTRAS)
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True)


@pytest.mark.slow
def test_the_model_needs_no_extras():
    proc = run_without_extras(
        """
        import jax
        import costmodel as cm
        e = cm.evaluate("llama-3-8b", "h100-sxm", batch=1, context=4096)
        grad = jax.grad(lambda c: cm.decode_cost(e.workload, c, e.placement).seconds_per_step)(e.chip)
        d = cm.AreaDesign.from_split(cm.tech_preset("N5"), cm.economics_preset("N5"), 814e-6, (0.6, 0.4), 5.0, 0.25)
        print(float(e.cost.seconds_per_step) > 0, float(grad.tiers.bandwidth[2]) < 0, float(d.chip().area) > 0)
        """
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["True", "True", "True"]


def test_the_blocking_works():
    """The check above could fail: with the extras blocked, importing one fails."""
    proc = run_without_extras("import matplotlib")
    assert proc.returncode != 0 and "ModuleNotFoundError" in proc.stderr

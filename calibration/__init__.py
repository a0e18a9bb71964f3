"""Measuring traces on the local JAX devices, importing them, and fitting the model.

* `trace`: the trace schema, loaders and writer;
* `measure`: the JAX/flax microbenchmarks and decode steps (`run_bench`);
* `importers`: llama-bench and vLLM benchmark outputs as traces;
* `fit`: the fit of the model's physical parameters to a trace (`calibrate`).

The layers above (the CLI, the main job) import from here.
"""

from . import fit as fit, importers as importers, measure as measure, trace as trace
from .fit import (
    Fit as Fit,
    FitStatus as FitStatus,
    calibrate as calibrate,
    chip_toml as chip_toml,
    residual_plots as residual_plots,
)
from .importers import import_llama_bench as import_llama_bench, import_vllm as import_vllm
from .measure import (
    Config as Config,
    Plan as Plan,
    plan as plan,
    run_bench as run_bench,
    xla_cpu_thread_flags as xla_cpu_thread_flags,
)
from .trace import (
    COLUMNS as COLUMNS,
    KINDS as KINDS,
    MICRO_KINDS as MICRO_KINDS,
    load_trace as load_trace,
    load_traces as load_traces,
    save_trace as save_trace,
)

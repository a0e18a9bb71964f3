"""Sweeps over thousands to millions of (chip x workload) configs.

A sweep spec (TOML, see `spec`) names *axes*: lists of values or numeric ranges over
the model, batch, context, number formats, placement policy, chip preset, any `Chip`
field, or a two-die design at a technology node (`area.logic_mm2`, `area.sram`,
`area.stacks`, `area.pim_share`, ...: a logic die and HBM stacks, some of whose DRAM
dies are PIM dies, through `chip_from_design`, the model co-design optimises; each
area config's row also holds its design's compute and SRAM mm², PIM dies and price
per chip). Configs are
enumerated as a grid (every combination, last axis fastest) or drawn by Latin
hypercube sampling from a seed. Either way config `i` is a pure function of the spec
and `i`, so any range of configs can be generated on its own: chunks need no shared
state, which is what makes resuming and splitting across hosts exact.

The modules, one concept each:

- `spec`: the spec's schema, parameters, axes and defaults; parsing and validation.
- `sampling`: the uint32 keyed Feistel permutation and the Latin hypercube on it.
- `program`: `Sweep`, the compiled, sharded `jit(shard_map(vmap(...)))` chunk program
  that generates its configs from their indices and evaluates them.
- `store`: sweep folders: Parquet chunks written atomically and recorded (rows, config
  range, SHA-256) in the manifest, one writer per chunk (a lock), resume that keeps
  only chunks that verify, multi-host shares, the verified-chunk reader every
  consumer uses (`iter_sweep`, `verify_sweep`), the progress bar.
- `pareto`: Pareto fronts of finished sweeps, chunk by chunk.

The front's plot is `costmodel.report.sweep_plots.plot_pareto` (a report, above this
layer). Every name is re-exported here: `import costmodel.sweep as sw; sw.run_sweep(...)`.
"""

import importlib
import warnings
from typing import Any

from .pareto import pareto_front as pareto_front, pareto_mask as pareto_mask
from .program import (
    _CACHE as _CACHE,
    AREA_RESULTS as AREA_RESULTS,
    COMPILER_OPTIONS as COMPILER_OPTIONS,
    INFEASIBLE as INFEASIBLE,
    RESULTS as RESULTS,
    Sweep as Sweep,
    cached_sweep as cached_sweep,
)
from .sampling import (
    MAX_CONFIGS as MAX_CONFIGS,
    _key as _key,
    _radices as _radices,
    latin_hypercube as latin_hypercube,
    permute as permute,
)
from .spec import (
    CHIP_FIELDS as CHIP_FIELDS,
    CHOICES as CHOICES,
    DEFAULT_CHUNK as DEFAULT_CHUNK,
    PARAMETERS as PARAMETERS,
    RENAMED as RENAMED,
    Axis as Axis,
    SweepSpec as SweepSpec,
    _known as _known,
    data_sweeps as data_sweeps,
    flatten_table as flatten_table,
    load_spec as load_spec,
    parse_spec as parse_spec,
)
from .store import (
    CHECKSUMS as CHECKSUMS,
    FORMAT as FORMAT,
    LOCK as LOCK,
    MANIFEST as MANIFEST,
    SweepStats as SweepStats,
    chunk_path as chunk_path,
    iter_sweep as iter_sweep,
    missing_chunks as missing_chunks,
    process_chunks as process_chunks,
    read_manifest as read_manifest,
    read_sweep as read_sweep,
    run_sweep as run_sweep,
    verify_sweep as verify_sweep,
)


_MOVED = {"plot_pareto": "costmodel.report.sweep_plots"}
"""Names that left this package for a layer above it: still found here, with a warning."""


def __getattr__(name: str) -> Any:
    # Looked up by name on first use only, so the sweep never imports the report layer.
    if name in _MOVED:
        warnings.warn(f"costmodel.sweep.{name} moved to {_MOVED[name]}.{name}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

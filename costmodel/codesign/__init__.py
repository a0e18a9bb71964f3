"""Gradient co-design of a chip's area split and its KV/weight placement.

One problem (`problem`: a die budget, a technology, a system and a weighted mix), two
solvers:

- `optimize` (`gradient`): Adam on (area logits, placement logits) together, then the
  hard design's exact cost;
- `grid_baseline` (`grid`): every area split on a simplex grid (2% steps by default)
  with the best of the hard placement policies at each point, all in one `vmap`.

Both return a `Result` whose `status` is a `DesignStatus`, and count their cost-model
evaluations, so the optimiser's saving is measured.
"""

from .gradient import optimize as optimize
from .grid import grid_baseline as grid_baseline, is_grid_step as is_grid_step, simplex_grid as simplex_grid
from .problem import (
    DRAM_HEADROOM as DRAM_HEADROOM,
    MAX_SYSTEM_CHIPS as MAX_SYSTEM_CHIPS,
    OBJECTIVES as OBJECTIVES,
    Problem as Problem,
    build_problem as build_problem,
    design_chip as design_chip,
    design_system_chips as design_system_chips,
    evaluate_design as evaluate_design,
    make_problem as make_problem,
    mix_workloads as mix_workloads,
)
from .result import DesignStatus as DesignStatus, Result as Result, describe as describe

"""Gradient co-design of a chip (logic die and DRAM stacks) and its KV/weight placement.

One problem (`problem`: a logic-die area and stacks, or one dollar budget; a
technology, a system and a weighted mix), two solvers:

- `optimize` (`gradient`): Adam on (design vector, placement logits) together, then
  the hard design's exact cost at whole stacks and whole PIM dies;
- `grid_baseline` (`grid`): every design on a grid over the same variables (the
  compute/SRAM split in 2% steps by default, the PIM share in whole dies per stack,
  whole stacks) with the best of the hard placement policies at each point, all in
  one `vmap`.

Both return a `Result` whose `status` is a `DesignStatus`, and count their cost-model
evaluations, so the optimiser's saving is measured.
"""

from .gradient import optimize as optimize
from .grid import (
    design_grid as design_grid,
    grid_baseline as grid_baseline,
    is_grid_step as is_grid_step,
    split_grid as split_grid,
)
from .problem import (
    BUDGETS as BUDGETS,
    DEFAULT_STACKS as DEFAULT_STACKS,
    DRAM_HEADROOM as DRAM_HEADROOM,
    MAX_SYSTEM_CHIPS as MAX_SYSTEM_CHIPS,
    OBJECTIVES as OBJECTIVES,
    SERVING_BATCHES as SERVING_BATCHES,
    Problem as Problem,
    build_problem as build_problem,
    design_chip as design_chip,
    design_of as design_of,
    design_system_chips as design_system_chips,
    evaluate_design as evaluate_design,
    make_problem as make_problem,
    mix_workloads as mix_workloads,
    point_metric as point_metric,
    serving_metric as serving_metric,
)
from .result import DesignStatus as DesignStatus, Result as Result, describe as describe

"""Why a chip decodes at the speed, energy and price it does: sensitivities and answers.

Everything in the model is differentiable, so the sensitivity of each objective
(seconds per token, joules per token, USD per token) to each hardware parameter is
one `jax.jacrev` away. They are reported as *elasticities*, `d log y / d log x`: the
per-cent change in `y` for a one per-cent change in `x` (so -1 w.r.t. DRAM bandwidth
means "time is inversely proportional to DRAM bandwidth", 0 means "this parameter
does not matter here"). Doubling `x` changes `y` by about `2**e - 1`.

Parameters: peak FLOP/s (all precisions together), each tier's bandwidth (for PIM the
internal, bank-level bandwidth), PIM FLOP/s, the chip-to-chip link bandwidth, each
tier's capacity and, for a chip designed on the two-die model (`AreaDesign`, through
`costmodel._core.area.chip_from_design`), its design: the logic die's compute and SRAM
areas (each grows alone, so the die grows with it), the share of the DRAM dies that
are PIM dies, and the HBM stack count (each stack with its PHY on the logic die).
Such a chip is priced as the design is (good logic die, stacks with the PIM premium,
package), as co-design prices it.

Modules: `design` (`AreaDesign`), `cascade` (`cascade_placement`), `sensitivity`
(`explain`, the elasticities) and `questions` (`answers`: the buyer's questions in
sentences). The roofline plot is `costmodel.report.roofline.roofline_plot`.
"""

from .cascade import cascade_placement as cascade_placement
from .design import DEFAULT_LINKS as DEFAULT_LINKS, DESIGN_PARAMETERS as DESIGN_PARAMETERS, AreaDesign as AreaDesign
from .questions import answers as answers
from .sensitivity import (
    AREA_PARAMETERS as AREA_PARAMETERS,
    CAPACITY_PARAMETERS as CAPACITY_PARAMETERS,
    CHIP_PARAMETERS as CHIP_PARAMETERS,
    OBJECTIVES as OBJECTIVES,
    Explanation as Explanation,
    explain as explain,
)

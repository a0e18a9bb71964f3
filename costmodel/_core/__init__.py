"""The pure numerical core: pytrees in, pytrees out, no I/O.

Data flows through the modules in this order (each imports only those before it):

- `types`: shape-named type aliases.
- `numerics`: gradient-safe division, the overlap p-norm, seconds at a rate.
- `workload`: `Model` and `Scenario` (a `Workload`), the precision classes.
- `traffic`: a workload lowered to bytes, reads and FLOPs per block class.
- `chip`: the memory `Tiers` and the `Chip` (one pytree for every chip).
- `channels`: each channel's time and energy formula (SRAM and DRAM streaming, PIM
  in place, the compute die, their overlap, latency, all-reduces, pipeline hops).
- `placement`: soft, hard and policy placements of block classes over tiers, and the
  spill of what does not fit.
- `cost`: `decode_cost`, the channels assembled into one decode step's `Cost`.
- `power`: the sustained cost under a power cap (DVFS).
- `economics`: die cost from area and yield, stack prices, and the cost per token.
- `area`: a design (a logic die's area split, DRAM stacks with PIM dies) and
  technology constants to a `Chip`, with its price.

The public names are re-exported by `costmodel/__init__.py`.
"""

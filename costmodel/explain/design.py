"""A chip designed on the two-die model (`AreaDesign`), so that design elasticities exist."""

from __future__ import annotations

import inspect
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from .._core.area import Design, Technology, chip_from_design, design_from_split, fixed_area, tier_efficiency
from .._core.chip import Chip
from .._core.economics import Economics


DEFAULT_LINKS = (450e9, 8e-6, 3e-6)
"""(link bandwidth B/s, all-reduce latency s, pipeline hop latency s) of an area design:
NVLink4's line rate per direction (450 GB/s), the H100's small-message all-reduce latency
(8 us, `link_latency_small_us`) and its hop (3 us; data/chips.toml): an idealised link,
not the H100 preset's measured lines."""

DESIGN_PARAMETERS = ("compute", "sram", "pim_share", "stacks")
"""The entries of `AreaDesign.values`: compute and SRAM area of the logic die (m²),
the share ρ of the DRAM dies that are PIM dies, and the HBM stack count."""

_MEMORY_EFFICIENCY = inspect.signature(chip_from_design).parameters["memory_efficiency"].default


class AreaDesign(eqx.Module):
    """A chip designed on the two-die model (`chip_from_design`), so that design
    elasticities exist.

    The logic die is its I/O and one PHY per stack plus the compute and SRAM areas, so
    each entry of `values` can grow alone: more compute or SRAM area, or another
    stack (with its PHY), grows the die; a larger PIM share turns standard DRAM dies
    into PIM dies (PIM logic is on the DRAM dies, never on the logic die).

    Attributes:
        tech: technology constants.
        econ: prices of the design (good logic die, stacks with the PIM premium,
            package), for `design` and `price` when no other prices are given.
        values: `[4]` entries of `DESIGN_PARAMETERS`: compute area and SRAM area, m²;
            PIM share ρ in [0, 1]; HBM stacks.
        options: other keyword arguments of `chip_from_design` (power cap, compute
            efficiency, ...); `memory_efficiency` is that of SRAM and DRAM, the PIM
            units reaching their derated rate (`tier_efficiency`).
        links: (link bandwidth B/s, all-reduce latency s, pipeline hop latency s)
            between chips; `chip_from_design` has none. Default `DEFAULT_LINKS`.
    """

    tech: Technology
    econ: Economics
    values: Any
    options: dict = eqx.field(default_factory=dict)
    links: tuple = DEFAULT_LINKS

    def design(self, values=None, econ: Economics | None = None) -> Design:
        """The `Design` of these values, or of `[4]` other `values` (`DESIGN_PARAMETERS`)."""
        compute, sram, pim_share, stacks = jnp.asarray(self.values if values is None else values, dtype=float)
        total = compute + sram
        # Double where: a design with neither compute nor SRAM (never built by
        # `from_split`) must not put a NaN into the share's gradient.
        ok = total > 0
        share = jnp.where(ok, sram / jnp.where(ok, total, 1.0), 0.0)
        logic_area = fixed_area(self.tech, stacks) + total
        return design_from_split(logic_area, share, stacks, pim_share, self.tech, self.econ if econ is None else econ)

    def chip(self, values=None) -> Chip:
        """The chip of this design, or of the same design with `[4]` other `values`."""
        options = dict(self.options)
        memory = options.pop("memory_efficiency", _MEMORY_EFFICIENCY)
        chip = chip_from_design(self.design(values), self.tech, memory_efficiency=tier_efficiency(memory), **options)
        bw, lat, hop = self.links
        return chip.replace(link_bandwidth=bw, link_latency=lat, hop_latency=hop)

    def price(self, values=None, econ: Economics | None = None) -> tuple[Any, Any]:
        """(price of one chip, price of its logic die), USD: the design's one price."""
        d = self.design(values, econ)
        return d.chip_usd, d.die_usd

    @staticmethod
    def from_split(
        tech: Technology,
        econ: Economics,
        logic_area: float,
        split,
        stacks: float = 5.0,
        pim_share: float = 0.0,
        links=DEFAULT_LINKS,
        **options,
    ) -> AreaDesign:
        """From a logic die area (m²), the `(compute, sram)` shares of its free area
        (after I/O and one PHY per stack; scaled to sum to 1), a stack count and the
        PIM share of the DRAM dies.

        Raises:
            ValueError: a split that is not two numbers >= 0, not both 0 (three is
                the single-budget model's compute/SRAM/PIM split, which is gone).
        """
        split = np.asarray(split, dtype=float)
        if split.shape != (2,) or not np.all(split >= 0) or not np.all(np.isfinite(split)) or split.sum() <= 0:
            raise ValueError(
                f"split {split.tolist()}: expected two shares (compute, sram) of the logic die's free area, "
                ">= 0 and not both 0; PIM is a share of the DRAM dies (pim_share), not of the logic die"
            )
        free = float(logic_area) - float(fixed_area(tech, stacks))
        parts = max(free, 0.0) * split / split.sum()
        # Numbers as arrays, not Python floats: jit would treat floats as static and
        # recompile for every power cap or stack count.
        arr = lambda v: jnp.asarray(v, dtype=float)
        options = {k: arr(v) for k, v in options.items()}
        values = arr([parts[0], parts[1], pim_share, stacks])
        return AreaDesign(tech, econ, values, options, tuple(map(arr, links)))

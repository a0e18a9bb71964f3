"""A chip designed from an area split (`AreaDesign`), so that area elasticities exist."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from .._core.area import Technology, area_logits, chip_from_area, fixed_area
from .._core.chip import Chip
from .._core.types import RealScalarLike


DEFAULT_LINKS = (450e9, 8e-6, 3e-6)
"""(link bandwidth B/s, all-reduce latency s, pipeline hop latency s) of an area design:
h100-sxm's NVLink (450 GB/s per direction, 8 us, 3 us; data/chips.toml)."""


class AreaDesign(eqx.Module):
    """A chip designed from an area split, so that area elasticities exist.

    Attributes:
        tech: technology constants.
        parts: `[3]` area of compute, SRAM and PIM, m² (`AREA_PARTS`).
        n_stacks: HBM stacks.
        options: other keyword arguments of `chip_from_area` (power cap, efficiencies).
        links: (link bandwidth B/s, all-reduce latency s, pipeline hop latency s)
            between chips; `chip_from_area` has none. Default `DEFAULT_LINKS`.
    """

    tech: Technology
    parts: Any
    n_stacks: RealScalarLike = 5.0
    options: dict = eqx.field(default_factory=dict)
    links: tuple = DEFAULT_LINKS

    def chip(self, parts=None) -> Chip:
        """The chip of this design, or of the same design with `[3]` other `parts` (m²)."""
        parts = jnp.asarray(self.parts if parts is None else parts, dtype=float)
        budget = fixed_area(self.tech, self.n_stacks) + jnp.sum(parts)
        # A part of zero area gets exactly none (logit -inf, with a zero gradient).
        chip = chip_from_area(budget, area_logits(parts), self.tech, n_stacks=self.n_stacks, **self.options)
        bw, lat, hop = self.links
        return chip.replace(link_bandwidth=bw, link_latency=lat, hop_latency=hop)

    @staticmethod
    def from_split(
        tech: Technology, budget: float, split, n_stacks: float = 5.0, links=DEFAULT_LINKS, **options
    ) -> AreaDesign:
        """From a total die area (m²) and fractions of the free area (summing to 1)."""
        free = float(budget) - float(fixed_area(tech, n_stacks))
        split = np.asarray(split, dtype=float)
        # Numbers as arrays, not Python floats: jit would treat floats as static and
        # recompile for every power cap or stack count.
        arr = lambda v: jnp.asarray(v, dtype=float)
        options = {k: arr(v) for k, v in options.items()}
        return AreaDesign(tech, arr(free * split / split.sum()), arr(n_stacks), options, tuple(map(arr, links)))

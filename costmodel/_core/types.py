"""Type aliases shared by the core (shapes are named in the annotations)."""

from collections.abc import Sequence
from typing import TypeAlias

import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float, Int


RealScalarLike: TypeAlias = float | int | np.floating | np.integer | ArrayLike
IntScalarLike: TypeAlias = int | np.integer | ArrayLike
PerTierLike: TypeAlias = Sequence[RealScalarLike] | ArrayLike
"""One value per tier: a sequence of three numbers, or an array whose last axis is 3."""
Scalar: TypeAlias = Float[Array, ""]
IntScalar: TypeAlias = Int[Array, ""]
BoolScalar: TypeAlias = Bool[Array, ""]
PerTier: TypeAlias = Float[Array, " tiers"]
PerRow: TypeAlias = Float[Array, " rows"]
"""One value per placement row (`costmodel._core.traffic.ROWS`)."""
PerClass: TypeAlias = Float[Array, " classes"]
"""One value per block class (`costmodel._core.traffic.CLASSES`)."""
PerPrecision: TypeAlias = Float[Array, " precisions"]
PlacementMatrix: TypeAlias = Float[Array, "rows tiers"]

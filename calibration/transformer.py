"""Deprecated: the flax decoder moved to `calibration.measure.transformer`; import it from there."""

import warnings

from .measure.transformer import (
    Block as Block,
    Config as Config,
    Decoder as Decoder,
    decode_loop as decode_loop,
    init as init,
)


warnings.warn(
    "calibration.transformer is deprecated: import from calibration.measure.transformer",
    DeprecationWarning,
    stacklevel=2,
)

"""Deprecated: the calibration pipeline moved to `calibration.fit` (`calibrate`, `chip_toml`,
`residual_plots`); import it from there (or `calibration`)."""

import sys
import types
import warnings

from .fit import (
    calibrate as calibrate,
    chip_toml as chip_toml,
    residual_plots as residual_plots,
    select_dtypes as select_dtypes,
    split as split,
)


class _CallableModule(types.ModuleType):
    """Importing this module makes the package attribute `calibration.calibrate` this
    module instead of the function `calibration.calibrate` (the import system sets it
    after the module runs); calling the module calls the function, so code that
    imported `calibrate` from `calibration` keeps working either way."""

    def __call__(self, *args, **kwargs):
        return calibrate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

warnings.warn(
    "calibration.calibrate is deprecated: import from calibration.fit (or calibration)",
    DeprecationWarning,
    stacklevel=2,
)

"""Fitting the cost model's physical parameters to a measured trace.

* `knobs`: the calibrated parameters (`Knobs`, stored as logs and logits), their
  starting point read off a trace, and the `costmodel.Chip` they describe (`to_chip`);
* `data`: trace rows as the arrays the predictions take (`make_dataset`);
* `model`: the predictions, through the core's channel functions and `decode_cost`
  (`predict_micro`, `predict_decode`, `predict`);
* `optimise`: filter specs, the loss, Adam then L-BFGS, the Gauss-Newton uncertainty,
  the roofline baseline, and how a fit ended (`FitStatus`);
* `metrics`: MAPE and rank correlation;
* `result`: `calibrate`, the user-level fit of a trace with its held-out errors;
* `chipfile`: the fitted chip as a chip file; `plots`: residual plots.
"""

from .chipfile import chip_toml as chip_toml
from .data import Dataset as Dataset, MicroPoints as MicroPoints, make_dataset as make_dataset
from .knobs import (
    DRAM_CAPACITY as DRAM_CAPACITY,
    KERNELS_PER_LAYER as KERNELS_PER_LAYER,
    KNOB_NAMES as KNOB_NAMES,
    PARAMETERS as PARAMETERS,
    Knobs as Knobs,
    hit_fraction as hit_fraction,
    initial_knobs as initial_knobs,
    inner_hit_fraction as inner_hit_fraction,
    knob_values as knob_values,
    make_knobs as make_knobs,
    small_kernel_efficiency as small_kernel_efficiency,
    sram_bandwidth as sram_bandwidth,
    sram_latency as sram_latency,
    to_chip as to_chip,
)
from .metrics import mape as mape, spearman as spearman
from .model import (
    decode_placement as decode_placement,
    predict as predict,
    predict_decode as predict_decode,
    predict_micro as predict_micro,
)
from .optimise import (
    START_OFFSETS as START_OFFSETS,
    STATUS as STATUS,
    Fit as Fit,
    FitStatus as FitStatus,
    fit_knobs as fit_knobs,
    full_spec as full_spec,
    roofline_knobs as roofline_knobs,
    roofline_spec as roofline_spec,
    status_name as status_name,
    uncertainty as uncertainty,
)
from .plots import residual_plots as residual_plots
from .result import (
    calibrate as calibrate,
    parameter_table as parameter_table,
    select_dtypes as select_dtypes,
    split as split,
)

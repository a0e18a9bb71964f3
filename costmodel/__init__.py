"""costmodel: what it costs a chip to decode one token of an LLM, differentiably."""

from ._core.area import (
    Design as Design,
    Technology as Technology,
    area_logits as area_logits,
    chip_from_design as chip_from_design,
    design_from_split as design_from_split,
    design_logits as design_logits,
    design_point as design_point,
    fixed_area as fixed_area,
)
from ._core.channels import (
    access_seconds as access_seconds,
    allreduce_seconds as allreduce_seconds,
    chip_in_flight as chip_in_flight,
    class_cached_rereads as class_cached_rereads,
    class_flop_rates as class_flop_rates,
    class_in_flight as class_in_flight,
    class_stream_efficiency as class_stream_efficiency,
    compute_seconds as compute_seconds,
    dequant_seconds as dequant_seconds,
    effective_feed as effective_feed,
    flop_rate as flop_rate,
    hockney as hockney,
    host_seconds as host_seconds,
    kernel_efficiency as kernel_efficiency,
    kv_dequant_seconds as kv_dequant_seconds,
    kv_stored_reads as kv_stored_reads,
    overlapped_seconds as overlapped_seconds,
    pim_seconds as pim_seconds,
    pipelined_seconds as pipelined_seconds,
    ring_seconds as ring_seconds,
    softmax_bytes as softmax_bytes,
    softmax_seconds as softmax_seconds,
    stream_bandwidth as stream_bandwidth,
    stream_seconds as stream_seconds,
    tier_joules as tier_joules,
    unpack_passes as unpack_passes,
    weight_copy_bytes as weight_copy_bytes,
)
from ._core.chip import TIERS as TIERS, Chip as Chip, Tiers as Tiers, make_chip as make_chip
from ._core.cost import (
    BOUNDS as BOUNDS,
    Cost as Cost,
    decode_cost as decode_cost,
    first_token_seconds as first_token_seconds,
)
from ._core.economics import (
    Economics as Economics,
    TokenCost as TokenCost,
    die_cost as die_cost,
    die_yield as die_yield,
    dies_per_wafer as dies_per_wafer,
    token_cost as token_cost,
)
from ._core.numerics import p_norm as p_norm, safe_div as safe_div
from ._core.placement import (
    POLICIES as POLICIES,
    class_placement as class_placement,
    harden_placement as harden_placement,
    policy_placement as policy_placement,
    soft_placement as soft_placement,
    spill as spill,
)
from ._core.power import (
    MIN_CLOCK as MIN_CLOCK,
    Sustained as Sustained,
    sustained_cost as sustained_cost,
    throttle as throttle,
)
from ._core.traffic import (
    BUCKETS as BUCKETS,
    CLASS_IS_KV as CLASS_IS_KV,
    CLASSES as CLASSES,
    IS_KV as IS_KV,
    ROW_CLASS as ROW_CLASS,
    ROWS as ROWS,
    Traffic as Traffic,
    class_rows as class_rows,
    class_sum as class_sum,
    copies_weights as copies_weights,
    expert_coverage as expert_coverage,
    history_tokens as history_tokens,
    lower_traffic as lower_traffic,
    step_groups as step_groups,
    step_rows as step_rows,
)
from ._core.workload import (
    AGE_EDGES as AGE_EDGES,
    N_BUCKETS as N_BUCKETS,
    PRECISIONS as PRECISIONS,
    AccessProfile as AccessProfile,
    ContextMix as ContextMix,
    Model as Model,
    Prefill as Prefill,
    Scenario as Scenario,
    Workload as Workload,
)
from .evaluation import (
    Evaluation as Evaluation,
    evaluate as evaluate,
    evaluate_policy as evaluate_policy,
    system_size as system_size,
)
from .explain import AreaDesign as AreaDesign, cascade_placement as cascade_placement
from .io import (
    ChipInfo as ChipInfo,
    InputError as InputError,
    chip_info as chip_info,
    chip_preset as chip_preset,
    context_distribution as context_distribution,
    economics_preset as economics_preset,
    load_model as load_model,
    make_scenario as make_scenario,
    model_preset as model_preset,
    tech_preset as tech_preset,
)


__version__ = "0.1.0"

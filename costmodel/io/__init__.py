"""The edge of the core: every file the tool reads, validated and converted to SI.

Model presets and Hugging Face `config.json` files (`models`), chip presets and chip
files (`chips`), technology constants (`tech`), cost constants (`economics`), number
formats (`formats`), scenarios and workload mixes (`scenarios`), serving-framework
profiles (`frameworks`), named context distributions (`contexts`) and the published
measurement table (`measurements`). A bad
value raises `InputError` naming the file, the field, the value and what was
expected (`schema.check_table`); the core never sees a raw dict.
"""

from . import chips as chips, models as models
from .chips import (
    CHIP_SCHEMA as CHIP_SCHEMA,
    FLOP_ENERGY_SCALE as FLOP_ENERGY_SCALE,
    ChipField as ChipField,
    ChipInfo as ChipInfo,
    calibrated_chips as calibrated_chips,
    chip_file_text as chip_file_text,
    chip_from_table as chip_from_table,
    chip_info as chip_info,
    chip_leaf_kinds as chip_leaf_kinds,
    chip_preset as chip_preset,
    chip_presets as chip_presets,
    chip_table as chip_table,
)
from .contexts import (
    ContextDistribution as ContextDistribution,
    context_distribution as context_distribution,
    load_context_distributions as load_context_distributions,
)
from .economics import (
    JOULES_PER_KWH as JOULES_PER_KWH,
    OVERRIDES as OVERRIDES,
    SECONDS_PER_YEAR as SECONDS_PER_YEAR,
    chip_node as chip_node,
    economics_preset as economics_preset,
    economics_table as economics_table,
    node_for_process as node_for_process,
)
from .errors import (
    InputError as InputError,
)
from .files import (
    atomic_open as atomic_open,
    atomic_write as atomic_write,
    data_dir as data_dir,
    load_json as load_json,
    load_toml as load_toml,
    only_section as only_section,
)
from .formats import (
    Format as Format,
    formats as formats,
    get_format as get_format,
)
from .frameworks import (
    IN_FLIGHT as IN_FLIGHT,
    MULTIPLIERS as MULTIPLIERS,
    UNBOUNDED_IN_FLIGHT_KB as UNBOUNDED_IN_FLIGHT_KB,
    Framework as Framework,
    framework_names as framework_names,
    frameworks_path as frameworks_path,
    load_frameworks as load_frameworks,
    resolve_framework as resolve_framework,
)
from .measurements import (
    GROUPS as GROUPS,
    METRICS as METRICS,
    STATUSES as STATUSES,
    Row as Row,
    load_rows as load_rows,
    measurements_path as measurements_path,
)
from .models import (
    load_model as load_model,
    model_from_hf_config as model_from_hf_config,
    model_preset as model_preset,
    model_presets as model_presets,
)
from .profiles import (
    PROFILE_FIELDS as PROFILE_FIELDS,
    ProfileInfo as ProfileInfo,
    check_profile as check_profile,
    load_profiles as load_profiles,
    profile_from_table as profile_from_table,
    profile_info as profile_info,
    profile_presets as profile_presets,
    profiles_path as profiles_path,
)
from .scenarios import (
    MAX_TOKENS as MAX_TOKENS,
    MixPoint as MixPoint,
    load_mix as load_mix,
    make_scenario as make_scenario,
)
from .schema import (
    KINDS as KINDS,
    MAX_NUMBER as MAX_NUMBER,
    check_table as check_table,
)
from .tech import (
    tech_nodes as tech_nodes,
    tech_preset as tech_preset,
    tech_table as tech_table,
)

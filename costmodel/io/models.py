"""Model presets (`data/models.toml`), model TOML files and Hugging Face `config.json`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._core.workload import Model
from .errors import InputError
from .files import data_dir, load_json, load_toml
from .schema import MAX_NUMBER, check_table


MODEL_FIELDS = {
    "n_layers": "count",
    "d_model": "count",
    "n_heads": "count",
    "d_ff": "count",
    "vocab": "count",
}
MODEL_OPTIONAL = {
    "n_kv_heads": "count",
    "head_dim": "count",
    "ffn_matrices": "count",
    "tied_embeddings": "wholenonneg",
    "n_experts": "wholenonneg",
    "top_k": "wholenonneg",
    "n_shared_experts": "wholenonneg",
    "n_sliding_layers": "wholenonneg",
    "window": "wholenonneg",
}


HEAD_FIELDS = ("d_model", "n_heads", "n_kv_heads", "head_dim")
"""The fields `check_heads` relates."""


def check_heads(t: dict[str, Any], where: str, keys: dict[str, str] | None = None) -> None:
    """The one check of a model's attention shape, for model TOML, presets and Hugging
    Face `config.json` alike (after each count is checked to be a whole number >= 1).

    Without `head_dim` a head is `d_model / n_heads` wide, so `n_heads` must divide
    `d_model` (a config with `hidden_size` 4097 and 32 heads has no whole head width).
    Grouped-query attention gives each KV head a whole group of query heads, so
    `n_kv_heads` must divide `n_heads` (5 KV heads cannot serve 32 query heads).

    Args:
        t: the model's fields (`Model` names), numbers checked.
        where: the file (and table) for the message.
        keys: the name of each of `HEAD_FIELDS` in the file (a `config.json`'s
            `hidden_size`, ...); by default the `Model` names.

    Raises:
        InputError: naming the file, the field, its value and what was expected.
    """
    k = {f: f for f in HEAD_FIELDS} | (keys or {})
    d, heads = t["d_model"], t["n_heads"]
    kv = t.get("n_kv_heads", heads)
    if "head_dim" not in t and d % heads:
        raise InputError(
            f"{where}: field {k['d_model']!r} = {d:g}: expected a multiple of {k['n_heads']!r} ({heads:g}) when "
            f"{k['head_dim']!r} is not given (a head is {k['d_model']} / {k['n_heads']} wide)"
        )
    if heads % kv:
        raise InputError(
            f"{where}: field {k['n_kv_heads']!r} = {kv:g}: expected a divisor of {k['n_heads']!r} ({heads:g}): "
            "each KV head serves a whole group of query heads"
        )


def _model_from_table(t: dict[str, Any], where: str, name: str, keys: dict[str, str] | None = None) -> Model:
    t = check_table(t, where, MODEL_FIELDS, MODEL_OPTIONAL, strings=("source", "name"))
    t.pop("source", None)
    t.pop("name", None)
    if t.get("n_sliding_layers", 0) > t["n_layers"]:
        raise InputError(
            f"{where}: field 'n_sliding_layers' = {t['n_sliding_layers']:g}: expected <= n_layers ({t['n_layers']:g})"
        )
    check_heads(t, where, keys)
    if t.get("n_experts", 0) > 0 and not 1 <= t.get("top_k", 0) <= t["n_experts"]:
        raise InputError(
            f"{where}: field 'top_k' = {t.get('top_k', 0):g}: expected 1..n_experts ({t['n_experts']:g}) for a MoE model"
        )
    if t.get("n_sliding_layers", 0) > 0 and t.get("window", 0) < 1:
        raise InputError(
            f"{where}: field 'window' = {t.get('window', 0):g}: expected >= 1 when there are sliding layers"
        )
    del name
    return Model(**t)


def model_presets() -> dict[str, dict[str, Any]]:
    return load_toml(data_dir() / "models.toml")["models"]


def model_preset(name: str) -> Model:
    """A model preset by id (see `costmodel presets`)."""
    presets = model_presets()
    if name not in presets:
        raise InputError(
            f"model {name!r}: unknown preset; expected one of {sorted(presets)} or a path to a config.json"
        )
    return _model_from_table(presets[name], f"{data_dir() / 'models.toml'}: models.{name}", name)


def model_from_hf_config(path: Path | str) -> Model:
    """A model from a Hugging Face `config.json` (Llama, Mistral/Mixtral, Qwen2, Gemma-2 keys)."""
    path = Path(path)
    cfg = load_json(path)
    if not isinstance(cfg, dict):
        raise InputError(f"{path}: expected a JSON object, got {type(cfg).__name__}")
    if "text_config" in cfg and isinstance(cfg["text_config"], dict):
        cfg = {**cfg, **cfg["text_config"]}

    keys: dict[str, str] = {}  # Model field -> the config's key it came from, for messages

    def number(key, v, lowest=1):
        # Checked before any arithmetic on it: a list or string must not reach `//`.
        if (
            isinstance(v, bool)
            or not isinstance(v, (int, float))
            or not lowest <= v <= MAX_NUMBER
            or not float(v).is_integer()
        ):
            raise InputError(f"{path}: field {key!r} = {v!r}: expected a whole number >= {lowest}")
        return v

    def need(field, key, *alts):
        for k in (key, *alts):
            if k in cfg and cfg[k] is not None:
                keys[field] = k
                return number(k, cfg[k])
        raise InputError(f"{path}: missing field {key!r} (a whole number >= 1)")

    def get(key, default, lowest=1, field=None):
        if field is not None:
            keys[field] = key
        v = cfg.get(key)
        return default if v is None else number(key, v, lowest)

    n_layers = need("n_layers", "num_hidden_layers", "n_layer", "num_layers")
    d_model = need("d_model", "hidden_size", "n_embd", "d_model")
    n_heads = need("n_heads", "num_attention_heads", "n_head")
    tied = cfg.get("tie_word_embeddings", False)
    if not isinstance(tied, bool) and tied not in (0, 1):
        raise InputError(f"{path}: field 'tie_word_embeddings' = {tied!r}: expected true or false")
    table: dict[str, Any] = {
        "n_layers": n_layers,
        "d_model": d_model,
        "n_heads": n_heads,
        "n_kv_heads": get("num_key_value_heads", n_heads, field="n_kv_heads"),
        "d_ff": need("d_ff", "intermediate_size", "n_inner", "ffn_dim"),
        "vocab": need("vocab", "vocab_size"),
        "tied_embeddings": int(bool(tied)),
    }
    if cfg.get("head_dim") is not None:
        table["head_dim"] = get("head_dim", None, field="head_dim")
    experts = cfg.get("num_local_experts") or cfg.get("num_experts") or 0
    if experts:
        table["n_experts"] = experts
        table["top_k"] = need("top_k", "num_experts_per_tok")
        if cfg.get("moe_intermediate_size"):
            table["d_ff"] = number("moe_intermediate_size", cfg["moe_intermediate_size"])
        shared = get("shared_expert_intermediate_size", 0, lowest=0)
        if shared and table["d_ff"]:
            table["n_shared_experts"] = shared / table["d_ff"]
    window = cfg.get("sliding_window")
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list):
        sliding = sum(1 for x in layer_types if "sliding" in str(x))
    elif cfg.get("model_type") in ("gemma2", "gemma3_text"):
        sliding = n_layers // 2 if cfg.get("model_type") == "gemma2" else n_layers * 5 // 6
    elif cfg.get("model_type") in ("qwen2", "qwen2_moe"):
        sliding = (n_layers - get("max_window_layers", n_layers, lowest=0)) if cfg.get("use_sliding_window") else 0
    else:
        sliding = n_layers if window else 0
    if window and sliding:
        table["n_sliding_layers"] = sliding
        table["window"] = window
    return _model_from_table(table, str(path), path.parent.name or path.stem, keys)


def load_model(spec: str) -> Model:
    """A model from a preset id, a Hugging Face `config.json`, or a TOML file of `Model` fields."""
    p = Path(spec)
    if spec in model_presets():
        return model_preset(spec)
    if p.suffix == ".json" or (p.is_dir() and (p / "config.json").exists()):
        return model_from_hf_config(p / "config.json" if p.is_dir() else p)
    if p.suffix == ".toml":
        return _model_from_table(load_toml(p), str(p), p.stem)
    return model_preset(spec)  # raises the unknown-preset error

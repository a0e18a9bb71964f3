"""Seeded random configurations for property tests, and helpers the tests share."""

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np

import costmodel as cm


def load_script(path: Path) -> ModuleType:
    """The Python file at `path` (a benchmark, a CI script, a golden file's maker) loaded
    as a module, without running its `__main__` block."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def random_model(rng: np.random.Generator) -> cm.Model:
    n_heads = int(rng.choice([8, 16, 32, 64]))
    group = int(rng.choice([1, 2, 4, 8]))
    n_layers = int(rng.integers(2, 96))
    moe = rng.random() < 0.3
    n_experts = int(rng.choice([8, 16, 64])) if moe else 0
    sliding = int(rng.integers(0, n_layers + 1)) if rng.random() < 0.3 else 0
    return cm.Model(
        n_layers=n_layers,
        d_model=n_heads * 128,
        n_heads=n_heads,
        n_kv_heads=max(1, n_heads // group),
        head_dim=128,
        d_ff=int(rng.integers(2, 6)) * n_heads * 128,
        vocab=int(rng.choice([32000, 128256])),
        n_experts=n_experts,
        top_k=2 if moe else 0,
        n_sliding_layers=sliding,
        window=4096,
    )


def random_scenario(rng: np.random.Generator) -> cm.Scenario:
    context = float(rng.integers(1, 131072))
    return cm.Scenario(
        batch=float(rng.integers(1, 512)),
        context=context,
        prefix=float(rng.integers(0, context)) if rng.random() < 0.3 else 0.0,
        weight_bytes=float(rng.choice([0.5625, 1.0, 2.0])),
        kv_bytes=float(rng.choice([1.0, 2.0])),
        weight_precision=int(rng.integers(1, 4)),
        kv_precision=1,
    )


def random_chip(rng: np.random.Generator, ordered: bool = True) -> cm.Chip:
    """A random chip; with `ordered`, SRAM and PIM are better per byte than DRAM."""
    dram_bw = 10 ** rng.uniform(11, 13)
    sram_bw = dram_bw * 10 ** rng.uniform(0.1, 1.5) if ordered else 10 ** rng.uniform(11, 14)
    pim_internal = dram_bw * 10 ** rng.uniform(0.3, 1.3)
    e_dram = 10 ** rng.uniform(-11, -10)
    return cm.make_chip(
        capacity=(10 ** rng.uniform(6, 10), 10 ** rng.uniform(8, 11) * (rng.random() < 0.7), 10 ** rng.uniform(10, 12)),
        bandwidth=(sram_bw, dram_bw, dram_bw),
        latency=(1e-8, 3e-7, 4e-7) if ordered else tuple(10 ** rng.uniform(-9, -6, 3)),
        energy_per_byte=(e_dram / 10, e_dram, e_dram),
        efficiency=(rng.uniform(0.5, 1.0),) * 3 if ordered else tuple(rng.uniform(0.5, 1.0, 3)),
        pim_bandwidth=pim_internal,
        pim_flops=pim_internal * 10 ** rng.uniform(0.5, 2),
        pim_energy_per_byte=e_dram / 6,
        peak_flops=10 ** rng.uniform(13, 15.5),
        compute_efficiency=rng.uniform(0.3, 0.9),
        energy_per_flop=10 ** rng.uniform(-13, -12),
        static_power=rng.uniform(0, 200),
        kernel_overhead=rng.uniform(0, 1e-5),
        link_bandwidth=10 ** rng.uniform(10, 12),
        link_latency=rng.uniform(0, 1e-5),
        hop_latency=rng.uniform(0, 1e-5),
        overlap=rng.uniform(1, 64),
        tensor_parallel=int(rng.choice([1, 2, 4, 8])),
        pipeline_parallel=int(rng.choice([1, 1, 2])),
        # CPU-like kernels on some chips: FLOPs on DRAM operands slower (never on-chip
        # ones slower than DRAM ones), attention below the matmul rate, skinny matmuls
        # below their full rate.
        compute_feed=(1.0, 1.0, rng.uniform(0.2, 1.0)),
        attention_efficiency=rng.uniform(0.3, 1.0),
        half_rate_rows=rng.uniform(0.0, 4.0) * (rng.random() < 0.5),
        # Small kernels streaming slower on some chips (a step at 1 MB to 1 GB).
        small_kernel_bytes=10 ** rng.uniform(6, 9) * (rng.random() < 0.5),
        small_kernel_efficiency=rng.uniform(0.3, 1.0),
        small_kernel_knee=rng.uniform(1.0, 20.0),
        # Decode attention's own half-rate rows on some chips (drawn last: the draws
        # above are those of the chips before the field).
        attention_half_rate_rows=rng.uniform(0.0, 4.0) * (rng.random() < 0.5),
        # A layer's kernels in sequence on some chips (drawn after the fields above).
        serial_kernels=rng.uniform(0.0, 1.0) * (rng.random() < 0.5),
        # Decode attention that splits a GQA group over blocks on some chips (drawn after the
        # fields above).
        attention_heads_per_block=float(rng.choice([1.0, 2.0, 4.0])) * (rng.random() < 0.5),
        # A small-message all-reduce protocol on some chips (drawn last).
        link_latency_small=rng.uniform(0, 1e-5),
        link_bandwidth_small=10 ** rng.uniform(9.5, 11) * (rng.random() < 0.5),
    )


def random_logits(rng: np.random.Generator) -> np.ndarray:
    return rng.normal(size=(len(cm.ROWS), len(cm.TIERS))) * 2


def bounded_chip(*, peak_flops=312e12, bytes_in_flight=4e3, **changes) -> cm.Chip:
    """A GPU-like chip whose DRAM stream is bounded by Little's law: 100 units keeping
    `bytes_in_flight` each against 400 ns (tests of the bound and of what lengthens it)."""
    chip = cm.make_chip(
        capacity=(40e6, 0.0, 80e9),
        bandwidth=(5e12, 0.0, 2e12),
        latency=(2e-7, 0.0, 4e-7),
        efficiency=(1.0, 1.0, 0.9),
        peak_flops=peak_flops,
        kernel_overhead=4e-6,
        parallel_units=100.0,
        bytes_in_flight=bytes_in_flight,
    )
    return chip.replace(**changes) if changes else chip


def assert_omitted_at_zero_and_round_trips(tmp_path, field: str, values=(0.0, 1.0)) -> None:
    """A chip file written from the H100 preset with `field` set to each of `values`
    leaves the field out at 0 and reads it back as written."""
    import tomllib

    from costmodel.io import chip_info
    from costmodel.io.chips import chip_file_text, chip_from_table, chip_table

    h100 = chip_info("h100-sxm").chip
    for value in values:
        table = chip_table(h100.replace(**{field: value}), name="t", source="test", placement="dram", max_chips=8)
        assert (field in table) == (value != 0.0)
        path = tmp_path / "t.toml"
        path.write_text(chip_file_text(table, []))
        back = chip_from_table(tomllib.loads(path.read_text()), str(path), "t").chip
        assert float(getattr(back, field)) == value


def assert_profile_edit_is_refused(tmp_path, old: str, new: str, match: str) -> None:
    """data/frameworks.toml with its first `old` replaced by `new` fails to load with an
    `InputError` matching `match`."""
    import pytest

    from costmodel.io import InputError
    from costmodel.io.frameworks import frameworks_path, load_frameworks

    bad = tmp_path / "frameworks.toml"
    bad.write_text(frameworks_path().read_text().replace(old, new, 1))
    with pytest.raises(InputError, match=match):
        load_frameworks(bad)

"""The compiled sweep program: configs generated and evaluated on the devices.

Each chunk of configs is one call of one compiled program whose only input is the
chunk's first config index: it is sharded over the local devices along a 1-D mesh
(`jax.shard_map`), and each device generates its slice's configs from their indices
(grid: uint32 div/mod; Latin hypercube: `sampling.latin_hypercube`, float32 values)
and evaluates them with `jax.vmap` of the config function. It is compiled once (the
last chunk is padded to the same shape, repeating the last config).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from .._core.area import Technology, chip_from_design, design_from_split, tier_efficiency
from .._core.channels import class_flop_rates
from .._core.chip import PIM, Chip
from .._core.cost import BOUNDS, decode_cost
from .._core.economics import Economics
from .._core.numerics import RATE_FLOOR
from .._core.placement import POLICIES
from .._core.traffic import class_sum, lower_traffic
from .._core.workload import AccessProfile, Model, Scenario, Workload
from ..evaluation import ALL_TIERS, FAST_TIERS, MAX_TENSOR_PARALLEL, size_system, system_placement, tier_mask
from ..io import InputError, chip_info, economics_preset, formats, load_model, tech_preset
from ..io.formats import plain_fields
from ..io.profiles import profile_info
from ._arrow import pyarrow
from .sampling import latin_hypercube
from .spec import CHIP_FIELDS, CHOICES, SweepSpec


RESULTS = (
    "seconds_per_step",
    "tokens_per_second",
    "tokens_per_second_per_sequence",
    "joules_per_token",
    "power_watts_per_chip",
    "overflow_bytes_per_chip",
)
"""Float result columns (SI units: s, tokens/s, J, W, B), besides `bound`, `feasible`,
`infeasible` (why not, `INFEASIBLE`), `chips`, `tensor_parallel` and `pipeline_parallel`."""

AREA_RESULTS = (
    "area.compute",
    "area.compute_mm2",
    "area.sram_mm2",
    "area.io_and_phys_mm2",
    "area.pim_dies",
    "area.chip_usd",
)
"""Float columns of an area config's design, after its config columns (`area.logic_mm2`,
`area.sram`, `area.stacks`, `area.pim_share`, ...): the compute share of the logic
die's free area (1 − `area.sram`); the compute, SRAM and fixed (I/O and HBM PHYs)
areas of the logic die, mm²; PIM dies per chip; the price of one chip (good logic die,
stacks with the PIM premium, package; `data/tech.toml` at `area.node`), USD."""

INFEASIBLE = (
    "",
    "prefix > context",
    "logic die too small",
    "no compute area",
    "layout",
    "over capacity",
    "zero rate",
    "time not finite",
)
"""Values of the `infeasible` column: why a row is not feasible ("" when it is), the
first that applies: a shared prefix longer than the context; an area design whose
logic die cannot hold its I/O and PHYs, or with no compute area (`area.sram` = 1);
a system layout `costmodel evaluate` refuses (a tensor-parallel width that does not
divide the query and KV heads, or a fixed `chips` above `max_chips` or not laid out
exactly: `costmodel.evaluation.check_layout`); weights and KV cache that fit on no system of at most `max_chips` chips, or overflow
DRAM (`overflow_bytes_per_chip`); work asked of a rate of 0 (a swept bandwidth or
FLOP/s reaching 0 where the placement reads bytes or runs FLOPs: the core floors the
rate at `RATE_FLOOR`, so its time is finite but means nothing); a time that is not
finite and positive. An infeasible row keeps the finite figures the model computes
(never NaN, so gradients and plots stay defined), but they describe no real system:
`pareto` leaves such rows out unless `--all`."""

COMPILER_OPTIONS: dict[str, Any] = {"xla_cpu_experimental_ynn_fusion_type": ""}
"""XLA options of the sweep's programs: no YNNPACK fusions on the CPU. By default XLA
hands the config function's small reductions and elementwise ops (over 7 block
classes and 3 tiers, batched) to YNNPACK, which made the chunk program about 1.5x
slower on this 2-core CPU (`sweep_ynn` in `benchmarks/sweep_bench.py`). A CPU option:
other backends ignore it."""


def _stack(trees: Sequence[Any]) -> Any:
    return jtu.tree_map(lambda *x: jnp.stack(x), *trees)


def _take(tree: Any, i) -> Any:
    return jtu.tree_map(lambda x: x[i], tree)


def _set_field(chip: Chip, path: tuple[str, ...], index: int | None, value) -> Chip:
    def get(c) -> Any:
        for part in path:
            c = getattr(c, part)
        return c

    old = get(chip)
    new = jnp.full_like(old, value) if index is None else old.at[index].set(value)
    return eqx.tree_at(get, chip, new)


class Sweep:
    """A sweep ready to run: the spec, its tables and one compiled chunk program.

    Args:
        spec: the validated spec.
        chunk: configs per compiled call (default: the spec's).
        devices: devices to shard each chunk over (default `jax.local_devices()`).
        compiler_options: XLA options of its programs (default `COMPILER_OPTIONS` on CPU
            devices, none on others).

    Examples:
        >>> import costmodel.sweep as sw
        >>> spec = sw.parse_spec({"axes": {"batch": [1, 8]}})
        >>> s = sw.Sweep(spec, chunk=2)
        >>> t = s.table(0, 2)
        >>> t.column("batch").to_pylist(), t.num_rows
        ([1.0, 8.0], 2)
    """

    def __init__(
        self,
        spec: SweepSpec,
        chunk: int | None = None,
        devices: Sequence[Any] | None = None,
        compiler_options: dict[str, Any] | None = None,
    ):
        self.spec = spec
        self.chunk = int(chunk or spec.chunk)
        if self.chunk < 1:
            raise InputError(f"chunk = {self.chunk!r}: expected a whole number >= 1")
        self.n_configs = spec.n_configs
        self.n_chunks = -(-self.n_configs // self.chunk)
        self.devices = list(devices) if devices is not None else jax.local_devices()
        n_dev = len(self.devices)
        self.padded = -(-self.chunk // n_dev) * n_dev
        if self.padded >= 2**31:
            raise InputError(f"chunk = {self.chunk!r}: expected fewer than 2**31 configs per chunk")
        self.traces = 0
        self._axes = {a.name: a for a in spec.axes}
        self._grid = [a.grid() for a in spec.axes] if spec.sampling == "grid" else None
        self._build_tables()
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        mesh = Mesh(np.array(self.devices), ("configs",))
        self.sharding = NamedSharding(mesh, PartitionSpec("configs"))
        # Each device generates and evaluates its own contiguous slice of the chunk: the
        # only input is the chunk's first config index, and nothing crosses devices.
        chunk_fn = jax.shard_map(
            self._chunk_slice, mesh=mesh, in_specs=PartitionSpec(), out_specs=PartitionSpec("configs"), check_vma=False
        )
        if compiler_options is None:  # the defaults are XLA:CPU options: none elsewhere
            on_cpu = all(d.platform == "cpu" for d in self.devices)
            compiler_options = COMPILER_OPTIONS if on_cpu else {}
        options = dict(compiler_options)
        self._program = jax.jit(chunk_fn, compiler_options=options)
        self._generator = jax.jit(self._generate, compiler_options=options)
        self.single = jax.jit(self._row, compiler_options=options)
        """The same config function, jitted without vmap: one config's values per call
        (a dict of scalars, as `configs` gives them), e.g. for a per-config loop."""

    # -- tables of named things --

    def _choices(self, name: str) -> tuple[str, ...]:
        axis = self._axes.get(name)
        if axis is not None:
            assert axis.values is not None
            return tuple(axis.values)
        value = self.spec.base.get(name)
        return () if value is None else (value,)

    def _build_tables(self) -> None:
        spec = self.spec
        self.choices: dict[str, tuple[str, ...]] = {n: self._choices(n) for n in CHOICES}
        models = [load_model(m) for m in self.choices["model"]]
        self._models = models[0] if len(models) == 1 else _stack(models)
        profiles = [profile_info(p).profile for p in self.choices["profile"]]
        self._profiles = profiles[0] if len(profiles) == 1 else _stack(profiles)
        fmt_names = sorted(set(self.choices["weights"]) | set(self.choices["kv"]))
        table = formats()
        self._fmt_index = {n: i for i, n in enumerate(fmt_names)}
        self._fmt_bytes = np.array([table[n].bytes_per_element for n in fmt_names], np.float32)
        self._fmt_precision = np.array([table[n].precision for n in fmt_names], np.int32)
        plain = [plain_fields(table[n]) for n in fmt_names]
        self._fmt_plain_bytes = np.array([p["plain_weight_bytes"] for p in plain], np.float32)
        self._fmt_plain_precision = np.array([p["plain_weight_precision"] for p in plain], np.int32)
        if spec.area_mode:
            techs: list[Technology] = [tech_preset(n) for n in self.choices["area.node"]]
            self._techs = techs[0] if len(techs) == 1 else _stack(techs)
            econs: list[Economics] = [economics_preset(n) for n in self.choices["area.node"]]
            self._econs = econs[0] if len(econs) == 1 else _stack(econs)
            own = ["greedy"]
            self._own_policy = np.zeros(1, np.int32)
        else:
            infos = [chip_info(c) for c in self.choices["chip"]]
            self._chips = infos[0].chip if len(infos) == 1 else _stack([i.chip for i in infos])
            self._max_chips = np.array([i.max_chips for i in infos], np.float32)
            own = [i.placement for i in infos]
        if self.choices["placement"]:
            self.policies = self.choices["placement"]
            self._policy_of_chip = None
        else:
            # Each chip placed as its own system does (`ChipInfo.placement`).
            self.policies = tuple(p for p in POLICIES if p in own)
            self._policy_of_chip = np.array([self.policies.index(p) for p in own], np.int32)
        # The class layout (one placement row per class, `lower_traffic(buckets=False)`)
        # gives the rows of the heat buckets exactly when every config is placed in DRAM,
        # whatever the profile, and is about 6x faster. (Under a dense profile it also
        # agrees with any policy, but only to block rounding: the buckets round each
        # bucket's blocks, up to 3e-4 of the step in float32, and a sweep's rows are
        # what `costmodel evaluate` reports.)
        self.buckets = self.policies != ("dram",)
        """Whether the config function places heat buckets (`ROWS`) or whole classes."""
        self._fast = np.stack([tier_mask(FAST_TIERS[p]) for p in self.policies])
        self._all = np.stack([tier_mask(ALL_TIERS[p]) for p in self.policies])

    # -- configs, generated inside the program --

    def _generate(self, index: jax.Array) -> dict[str, jax.Array]:
        """The swept values of configs `index` (uint32, any shape): float32 numbers, or
        int32 indices into the axis's values for names. Traced: the compiled chunk
        program calls it, so the values it evaluates are the values it reports."""
        index = jnp.asarray(index, jnp.uint32)
        out: dict[str, jax.Array] = {}
        if self._grid is not None:
            rest = index
            for axis, grid in reversed(list(zip(self.spec.axes, self._grid))):  # last axis fastest
                k = jnp.uint32(len(grid))
                digit = (rest % k).astype(jnp.int32)
                rest = rest // k
                out[axis.name] = digit if axis.is_choice else jnp.asarray(np.asarray(grid, np.float32))[digit]
            return {a.name: out[a.name] for a in self.spec.axes}
        n = self.n_configs
        points = latin_hypercube(index.reshape(-1), n, len(self.spec.axes), self.spec.seed)
        for dim, axis in enumerate(self.spec.axes):
            u = points[dim].reshape(index.shape)
            if axis.values is not None:
                k = len(axis.values)
                pick = jnp.minimum((u * k).astype(jnp.int32), k - 1)
                out[axis.name] = pick if axis.is_choice else jnp.asarray(np.asarray(axis.values, np.float32))[pick]
                continue
            assert axis.low is not None and axis.high is not None
            lo, hi = np.float32(axis.low), np.float32(axis.high)
            if axis.scale == "log":
                a, b = np.log(np.float64(axis.low)), np.log(np.float64(axis.high))
                v = jnp.exp(jnp.float32(a) + u * jnp.float32(b - a))
            else:
                v = lo + u * (hi - lo)
            out[axis.name] = jnp.clip(v, lo, hi)  # float32 rounding stays inside the range
        return out

    def configs(self, start: int, stop: int) -> dict[str, np.ndarray]:
        """The swept values of configs `[start, stop)`, as the chunk program generates them:
        float32 numbers, or int32 indices into the axis's values for names."""
        if not 0 <= start <= stop <= self.n_configs:
            raise ValueError(f"configs [{start}, {stop}): expected a range in [0, {self.n_configs}]")
        values = self._generator(np.arange(start, stop, dtype=np.uint32))
        return {k: np.asarray(v) for k, v in values.items()}

    def _chunk_slice(self, start: jax.Array) -> tuple[dict[str, jax.Array], dict[str, jax.Array]]:
        """One device's slice of the chunk that starts at config `start` (inside shard_map).

        Rows past the sweep's end (the padding of the last chunk) repeat its last config.
        """
        per = self.padded // len(self.devices)
        offset = jax.lax.axis_index("configs").astype(jnp.uint32) * jnp.uint32(per)
        local = offset + jnp.arange(per, dtype=jnp.uint32)
        index = start + jnp.minimum(local, jnp.uint32(self.n_configs - 1) - start)
        values = self._generate(index)
        return values, jax.vmap(self._row, axis_size=per)(values)

    # -- the config function (traced once) --

    def _row(self, p: dict[str, jax.Array]) -> dict[str, jax.Array]:
        self.traces += 1  # runs at trace time only: counts compilations
        spec = self.spec

        def num(name):
            return p[name] if name in p else jnp.asarray(spec.base[name], jnp.float32)

        def idx(name):
            return p[name] if name in p else jnp.asarray(0, jnp.int32)

        def pick(table, name):
            return table if len(self.choices[name]) == 1 else _take(table, idx(name))

        model: Model = pick(self._models, "model")
        fb, fp = jnp.asarray(self._fmt_bytes), jnp.asarray(self._fmt_precision)
        wi = jnp.asarray(np.array([self._fmt_index[f] for f in self.choices["weights"]], np.int32))[idx("weights")]
        ki = jnp.asarray(np.array([self._fmt_index[f] for f in self.choices["kv"]], np.int32))[idx("kv")]
        scenario = Scenario(
            batch=num("batch"),
            context=num("context"),
            prefix=num("prefix"),
            weight_bytes=fb[wi],
            kv_bytes=fb[ki],
            weight_precision=fp[wi],
            kv_precision=fp[ki],
            plain_weight_bytes=jnp.asarray(self._fmt_plain_bytes)[wi],
            plain_weight_precision=jnp.asarray(self._fmt_plain_precision)[wi],
        )
        profile: AccessProfile = pick(self._profiles, "profile")
        for name in [n for n in spec.names if n.startswith("profile.")]:
            field = name.removeprefix("profile.")
            profile = eqx.tree_at(lambda pr, field=field: getattr(pr, field), profile, num(name))
        workload = Workload(model, scenario, profile)
        valid = scenario.prefix <= scenario.context
        reasons = {"prefix > context": ~valid}
        out: dict[str, jax.Array] = {}

        if spec.area_mode:
            tech = pick(self._techs, "area.node")
            econ = pick(self._econs, "area.node")
            sram = num("area.sram")
            # The design co-design's vector describes (`design_logits`): an end of a
            # share is exact (no SRAM at 0, no PIM die at 0).
            design = design_from_split(
                num("area.logic_mm2") * 1e-6, sram, num("area.stacks"), num("area.pim_share"), tech, econ
            )
            chip = chip_from_design(
                design,
                tech,
                compute_efficiency=num("area.compute_efficiency"),
                memory_efficiency=tier_efficiency(num("area.memory_efficiency")),
                kernel_overhead=num("area.kernel_overhead_us") * 1e-6,
                overlap=num("area.overlap"),
                power_cap=num("area.power_cap_w"),
            )
            # A logic die that cannot hold its I/O and PHYs keeps a sliver of free
            # area (finite, very slow) and is reported as infeasible; so is one with
            # no compute area (`area.sram` = 1), whose host FLOPs have nowhere to run.
            reasons["logic die too small"] = ~design.logic_fits
            reasons["no compute area"] = sram >= 1.0 - 1e-6
            valid = valid & design.logic_fits & (sram < 1.0 - 1e-6)
            max_chips = num("area.max_chips")
            out.update(
                {
                    "area.compute": 1.0 - sram,
                    "area.compute_mm2": design.compute_area * 1e6,
                    "area.sram_mm2": design.sram_area * 1e6,
                    "area.io_and_phys_mm2": design.fixed_area * 1e6,
                    "area.pim_dies": design.pim_dies,
                    "area.chip_usd": design.chip_usd,
                }
            )
            chip_index = jnp.asarray(0, jnp.int32)
        else:
            chip = pick(self._chips, "chip")
            chip_index = idx("chip")
            max_chips = jnp.asarray(self._max_chips)[chip_index]

        if self._policy_of_chip is None:
            policy = idx("placement")
        else:
            policy = jnp.asarray(self._policy_of_chip)[chip_index]
        traffic = lower_traffic(workload, self.buckets)
        layout = ("chip.tensor_parallel", "chip.pipeline_parallel")
        for name in [n for n in spec.names if n in CHIP_FIELDS and not n.startswith(layout)]:
            path, index, _ = CHIP_FIELDS[name]
            chip = _set_field(chip, path, index, num(name))
        tp, pp, fits, count_ok = self._system_size(workload, traffic, chip, policy, max_chips, num)
        valid = valid & fits
        chip = chip.replace(tensor_parallel=tp, pipeline_parallel=pp)
        for name in [n for n in spec.names if n.startswith(layout)]:
            path, index, _ = CHIP_FIELDS[name]
            chip = _set_field(chip, path, index, num(name))

        # Placed on the whole system as one chip, as `costmodel.evaluate` places it.
        placements = [system_placement(pol, traffic, chip) for pol in self.policies]
        placement = placements[0] if len(placements) == 1 else jnp.stack(placements)[policy]
        cost = decode_cost(workload, chip, placement)
        finite = jnp.isfinite(cost.seconds_per_step) & (cost.seconds_per_step > 0)
        explicit = any(n.startswith(layout) for n in spec.names)  # checked for heads only, as evaluate does
        reasons["layout"] = ~(_splits_heads(workload.model, chip.tensor_parallel) & (count_ok | explicit))
        reasons["over capacity"] = ~(fits & cost.feasible)
        reasons["zero rate"] = _starved(workload, traffic, chip, placement, cost)
        reasons["time not finite"] = ~finite
        why = jnp.asarray(0, jnp.int32)
        for code in reversed(range(1, len(INFEASIBLE))):  # the first that applies wins
            if INFEASIBLE[code] in reasons:
                why = jnp.where(reasons[INFEASIBLE[code]], jnp.int32(code), why)
        out.update(
            seconds_per_step=cost.seconds_per_step,
            tokens_per_second=cost.tokens_per_second,
            tokens_per_second_per_sequence=cost.tokens_per_second_per_sequence,
            joules_per_token=cost.joules_per_token,
            power_watts_per_chip=cost.power,
            overflow_bytes_per_chip=cost.overflow_bytes,
            bound=cost.bound,
            feasible=why == 0,
            infeasible=why,
            tensor_parallel=chip.tensor_parallel,
            pipeline_parallel=chip.pipeline_parallel,
            placement=policy,
        )
        return out

    def _system_size(self, workload, traffic, chip, policy, max_chips, num):
        """(tensor_parallel, pipeline_parallel, fits, count_ok), per config inside the
        vmapped program, by the rules `costmodel.evaluation.system_size` sizes with:
        `size_system`, and without a fixed `chips` the fewest chips that fit raised to
        the next count whose tensor-parallel width divides the query and KV heads.
        `count_ok`: a fixed `chips` is at most `max_chips` and laid out exactly."""
        fixed = "chips" in self._axes or self.spec.base.get("chips") != "auto"
        args = (
            jnp.sum(traffic.stored_bytes),
            workload.model.n_layers,
            chip.tiers.capacity,
            max_chips,
            jnp.asarray(self._fast)[policy],
            jnp.asarray(self._all)[policy],
            jnp.asarray(np.array([p == "sram" for p in self.policies]))[policy],
        )
        if fixed:
            chips = num("chips")
            tp, pp, fits = size_system(*args, chips)
            return tp, pp, fits, (tp * pp == chips) & (chips <= max_chips)
        tp, pp, fits = size_system(*args, None)
        # Counts above MAX_TENSOR_PARALLEL get its width (or a dataflow machine's, no
        # wider), so the next count that splits the heads, if any, is among 1..8.
        counts = jnp.arange(1, MAX_TENSOR_PARALLEL + 1, dtype=tp.dtype)
        wide, deep, _ = jax.vmap(lambda n: size_system(*args, n))(counts)
        good = _splits_heads(workload.model, wide) & (counts > tp * pp) & (counts <= max_chips)
        first = jnp.argmax(good)
        raise_ = ~_splits_heads(workload.model, tp) & jnp.any(good)
        return jnp.where(raise_, wide[first], tp), jnp.where(raise_, deep[first], pp), fits, jnp.asarray(True)

    # -- running --

    def dispatch(self, start: int, stop: int) -> tuple[dict[str, jax.Array], dict[str, jax.Array]]:
        """Starts evaluating configs `[start, stop)` (at most one chunk); returns at once.

        One compiled call: the configs are generated on the devices from `start`.

        Returns:
            The swept values (as `configs` gives them) and the results, both padded to
            the compiled chunk and asynchronous (device arrays).
        """
        if not 0 <= start < stop <= self.n_configs or stop - start > self.chunk:
            raise ValueError(f"configs [{start}, {stop}): expected a range of at most {self.chunk} in the sweep")
        return self._program(np.uint32(start))

    def to_table(self, start: int, stop: int, values: dict[str, jax.Array], results: dict[str, jax.Array]):
        """A `pyarrow.Table` of configs `[start, stop)`: the config, then the results.

        Numbers are float32, the values the program evaluated (unswept ones too).

        Raises:
            InputError: if pyarrow (the `costmodel[sweep]` extra) is not installed.
        """
        pa = pyarrow()

        n = stop - start
        res = {k: np.asarray(v)[:n] for k, v in results.items()}
        host = {k: np.asarray(v)[:n] for k, v in values.items()}
        cols: dict[str, Any] = {"config": pa.array(np.arange(start, stop, dtype=np.int64))}

        def names(values, indices):
            return pa.DictionaryArray.from_arrays(pa.array(indices.astype(np.int32)), pa.array(list(values)))

        for name in self.spec.names:
            if name == "placement":
                continue
            if name in CHOICES:
                vals = self.choices[name]
                cols[name] = names(vals, host[name] if name in host else np.zeros(n, np.int32))
            elif name in host:
                cols[name] = pa.array(host[name])
            elif self.spec.base[name] == "auto":
                continue
            else:
                cols[name] = pa.array(np.full(n, self.spec.base[name], np.float32))
        cols["placement"] = names(self.policies, res.pop("placement"))
        for name in AREA_RESULTS:
            if name in res:
                cols[name] = pa.array(res.pop(name).astype(np.float32))
        tp, pp = res.pop("tensor_parallel"), res.pop("pipeline_parallel")
        cols["chips_used"] = pa.array((tp * pp).astype(np.int32))
        cols["tensor_parallel"] = pa.array(tp.astype(np.int32))
        cols["pipeline_parallel"] = pa.array(pp.astype(np.int32))
        for name in RESULTS:
            cols[name] = pa.array(res[name].astype(np.float32))
        cols["bound"] = names(BOUNDS, res["bound"])
        cols["feasible"] = pa.array(res["feasible"].astype(bool))
        cols["infeasible"] = names(INFEASIBLE, res["infeasible"])
        return pa.table(cols)

    def table(self, start: int, stop: int):
        """Evaluates configs `[start, stop)` (at most one chunk) into a table."""
        host, results = self.dispatch(start, stop)
        return self.to_table(start, stop, host, results)

    def chunk_range(self, k: int) -> tuple[int, int]:
        return k * self.chunk, min((k + 1) * self.chunk, self.n_configs)


def _splits_heads(model: Model, tensor_parallel) -> jax.Array:
    """Whether a tensor-parallel width divides the query and KV heads
    (`costmodel.evaluation.layout_problem`, traced)."""
    heads, kv = jnp.round(model.n_heads), jnp.round(model.n_kv_heads)
    return (jnp.mod(heads, tensor_parallel) == 0) & (jnp.mod(kv, tensor_parallel) == 0)


def _starved(workload: Workload, traffic, chip: Chip, placement, cost) -> jax.Array:
    """Whether a config asks work of a rate of 0: a tier serving bytes at no bandwidth,
    PIM units holding bytes with no internal bandwidth or FLOP/s, or host FLOPs at a
    precision the chip computes at 0 FLOP/s (each would take its work / `RATE_FLOOR`)."""
    tiers = chip.tiers
    served = cost.tier_bytes > 0
    is_pim = jnp.arange(served.shape[0]) == PIM
    stream = jnp.any(served & ~is_pim & (tiers.bandwidth * tiers.efficiency <= RATE_FLOOR))
    pim_rate = jnp.minimum(chip.pim_bandwidth * tiers.efficiency[PIM], chip.pim_flops)
    pim = served[PIM] & (pim_rate <= RATE_FLOOR)
    # What the placement leaves off the PIM units runs on the host (at least that:
    # a PIM overflow spills to DRAM, whose FLOPs run on the host too).
    host = class_sum(traffic.flops * (1.0 - placement[:, PIM]))
    compute = jnp.any((host > 0) & (class_flop_rates(workload, traffic, chip) <= RATE_FLOOR))
    return stream | pim | compute


_CACHE: dict[tuple, Sweep] = {}


def cached_sweep(spec: SweepSpec, chunk: int | None = None, devices: Sequence[Any] | None = None) -> Sweep:
    """A `Sweep`, reusing the compiled program of an identical earlier one in this process."""
    devices = list(devices) if devices is not None else jax.local_devices()
    key = (spec.digest(), int(chunk or spec.chunk), tuple(d.id for d in devices), jax.process_index())
    if key not in _CACHE:
        if len(_CACHE) >= 8:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = Sweep(spec, chunk, devices)
    return _CACHE[key]

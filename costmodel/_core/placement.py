"""Where each row lives: a `[rows x tiers]` matrix with rows on the simplex.

A row is a weight class or a heat bucket of a KV history class (`ROWS`). A weight
matmul reads every weight, and within a bucket every block is read with the same
probability, so the blocks of a row are interchangeable and the fraction of a row's
bytes in each tier is the exact continuous relaxation; the buckets are where blocks
differ (the sinks and the recent history are hotter than the rest under a sparse
profile).
A *soft* placement comes from logits through a tempered softmax; a *hard* placement
is whole blocks per tier that respect every capacity.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .channels import class_stream_efficiency
from .chip import DRAM, PIM, SRAM, TIERS, Chip
from .traffic import Traffic, class_rows, class_sum, row_is_kv
from .types import PerRow, PlacementMatrix, RealScalarLike


POLICIES = ("dram", "sram", "pim_kv", "pim", "greedy")
"""Hard placement policies: everything in DRAM (a GPU); everything in SRAM, spilling
to DRAM (an SRAM machine); KV in PIM and weights in DRAM (a PIM GPU, attention in
memory); everything in PIM, spilling to DRAM (GEMV in memory too, as PIM-GPT and
CENT do); and greedy, filling SRAM then PIM (KV only) then DRAM in order of bytes
read per byte stored (heat per byte: a knapsack by access density, so a sparse
profile's hot buckets go on chip first)."""


CAPACITY_MARGIN = 1e-4
"""Fraction of SRAM and PIM capacity a hard placement leaves free."""


def soft_placement(
    logits: Float[Array, "*batch rows tiers"], temperature: RealScalarLike = 1.0
) -> Float[Array, "*batch rows tiers"]:
    """Rows of `softmax(logits / temperature)`: each class's fraction per tier.

    Args:
        logits: `[..., rows, tiers]` unnormalised log-fractions (any batch axes).
        temperature: > 0; small values approach a one-hot (hard) placement.

    Returns:
        A `[..., rows, tiers]` matrix whose rows are on the simplex.
    """
    return jax.nn.softmax(logits / temperature, axis=-1)


def _blocks_per_chip(traffic: Traffic, chip: Chip) -> PerRow:
    """Per-chip bytes of one block: every block is split over all chips."""
    return traffic.block_bytes / chip.n_chips


def _evict(blocks, tier, dest, traffic, chip, value, whole_blocks=True):
    """Keeps the most valuable whole blocks of `tier` that fit; moves the rest out.

    `blocks` is `[rows, tiers]` block counts; evicted blocks of row r go to tier
    `dest[r]`. Rows are kept in order of value, with a cumulative sum over the
    sorted rows, so it is jit-able and shape-stable. The budget is computed as
    capacity minus the bytes of more valuable rows, which stays accurate in float32
    even when the evicted bytes are many orders of magnitude larger than the tier.
    With `whole_blocks=False` the last row that fits in part keeps a fraction of a block
    too (the fractional knapsack: continuous, and differentiable, in the capacity).
    """
    per_block = _blocks_per_chip(traffic, chip)
    budget = chip.tiers.capacity[tier] * (1 - CAPACITY_MARGIN)
    order = jnp.argsort(-value)
    held = blocks[:, tier][order]
    pb = per_block[order]
    held_bytes = held * pb
    before = jnp.cumsum(held_bytes) - held_bytes
    allowed = jnp.clip(budget - before, 0.0, held_bytes)
    safe_pb = jnp.where(pb > 0, pb, 1.0)
    # A row that fits whole keeps every block: floor(held * pb / pb) can come out
    # one block short in float32.
    whole = allowed >= held_bytes
    partial = jnp.minimum(jnp.floor(allowed / safe_pb) if whole_blocks else allowed / safe_pb, held)
    keep = jnp.where(pb > 0, jnp.where(whole, held, partial), held)
    evicted = jnp.zeros_like(keep).at[order].set(held - keep)
    blocks = blocks - evicted[:, None] * jax.nn.one_hot(tier, len(TIERS), dtype=blocks.dtype)[None, :]
    return blocks + evicted[:, None] * jax.nn.one_hot(dest, len(TIERS), dtype=blocks.dtype)


def _value(traffic: Traffic, chip: Chip) -> PerRow:
    """Streaming time per step per byte stored, in bytes at full rate: what a fast tier
    is worth to a class (bytes moved per byte stored, over the class's small-kernel
    efficiency)."""
    stored = traffic.stored_bytes
    ok = stored > 0
    moved = (traffic.read_bytes + traffic.writes) / class_rows(class_stream_efficiency(traffic, chip), stored.shape[-1])
    return jnp.where(ok, moved / jnp.where(ok, stored, 1.0), 0.0)


def _to_fractions(blocks, traffic: Traffic) -> PlacementMatrix:
    total = jnp.sum(blocks, axis=-1, keepdims=True)
    ok = total > 0
    frac = blocks / jnp.where(ok, total, 1.0)
    empty = jax.nn.one_hot(DRAM, len(TIERS), dtype=blocks.dtype)
    return jnp.where(ok, frac, empty)


def _repair(blocks, traffic: Traffic, chip: Chip, kv_to_pim: bool = False, whole: bool = True) -> PlacementMatrix:
    """Evicts SRAM overflow to DRAM (KV to PIM instead with `kv_to_pim`, when the
    chip has PIM), then PIM overflow to DRAM."""
    value = _value(traffic, chip)
    is_kv = jnp.asarray(row_is_kv(blocks.shape[0]))
    has_pim = chip.tiers.capacity[PIM] > 0
    sram_dest = jnp.where(is_kv & has_pim & kv_to_pim, PIM, DRAM)
    blocks = _evict(blocks, SRAM, sram_dest, traffic, chip, value, whole)
    blocks = _evict(blocks, PIM, jnp.full(is_kv.shape, DRAM), traffic, chip, value, whole)
    return _to_fractions(blocks, traffic)


def harden_placement(placement: PlacementMatrix, traffic: Traffic, chip: Chip) -> PlacementMatrix:
    """Rounds a soft placement to whole blocks that respect the SRAM and PIM capacity.

    Each class keeps the whole blocks its fractions give it in SRAM and PIM (rounded
    to nearest); the rest go to DRAM. A tier still over capacity then gives up whole
    blocks to DRAM, the rows with the fewest bytes read per byte stored first (as
    `spill` moves a soft placement's overflow to DRAM). DRAM, the
    last tier, is not repaired: a design whose DRAM overflows is infeasible, and
    `decode_cost` reports it.

    Args:
        placement: `[rows, tiers]` fractions (rows on the simplex).
        traffic: the traffic the placement is for (block counts and sizes).
        chip: the chip whose capacities must be respected.

    Returns:
        A placement whose fractions are whole blocks over each class's block count.
    """
    count = jnp.ceil(traffic.count)[:, None]
    fast = jnp.round(placement[:, :DRAM] * count)
    fast = jnp.minimum(fast, count)
    fast = jnp.where(jnp.sum(fast, axis=-1, keepdims=True) > count, jnp.floor(placement[:, :DRAM] * count), fast)
    blocks = jnp.concatenate([fast, count - jnp.sum(fast, axis=-1, keepdims=True)], axis=-1)
    return _repair(blocks, traffic, chip)


def policy_placement(policy: str, traffic: Traffic, chip: Chip, whole_blocks: bool = True) -> PlacementMatrix:
    """A hard placement following one of `POLICIES`.

    Args:
        policy: one of `POLICIES`.
        traffic: the workload's traffic.
        chip: the chip (its capacities bound SRAM and PIM).
        whole_blocks: keep whole blocks in SRAM and PIM (a hard placement); False
            fills each tier to its capacity exactly, the last row in part (the
            fractional knapsack, whose cost is continuous in the capacities: what
            the marginal value of capacity is differentiated through).

    Returns:
        A hard `[rows, tiers]` placement.
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown placement policy {policy!r}; expected one of {POLICIES}")
    count = jnp.ceil(traffic.count)
    is_kv = jnp.asarray(row_is_kv(count.shape[-1]))
    if policy == "dram":
        # Nothing in SRAM or PIM, so nothing to repair (and no sort to pay for).
        return jnp.broadcast_to(jax.nn.one_hot(DRAM, len(TIERS), dtype=count.dtype), (count.shape[-1], len(TIERS)))
    if policy == "pim_kv":
        start = jnp.where(is_kv, PIM, DRAM)
    elif policy == "pim":
        start = jnp.full(count.shape, PIM)
    else:
        start = jnp.full(count.shape, SRAM)
    blocks = count[:, None] * jax.nn.one_hot(start, len(TIERS), dtype=count.dtype)
    if policy == "sram":
        # An SRAM machine has no PIM: spill straight to DRAM.
        chip = chip.replace(tiers=_without_pim(chip))
    return _repair(blocks, traffic, chip, kv_to_pim=policy == "greedy", whole=whole_blocks)


def _without_pim(chip: Chip):
    return eqx.tree_at(lambda t: t.capacity, chip.tiers, chip.tiers.capacity.at[PIM].set(0.0))


def _kept(demand, capacity):
    """Fraction of a tier's demand that fits (1 when it all does)."""
    # Floored at one byte: a demand of 1e-30 B (a saturated softmax) over a capacity
    # of 0 must not give 0/0 in the gradient.
    return jnp.where(demand > capacity, capacity / jnp.maximum(demand, 1.0), 1.0)


def spill(placement: PlacementMatrix, traffic: Traffic, chip: Chip) -> PlacementMatrix:
    """What each tier really holds: SRAM and PIM keep what fits, the rest goes to DRAM.

    Capacity is feasible by construction for SRAM and PIM: the fraction of a tier's demand that fits is kept, uniformly
    across rows, and the overflow goes to DRAM (as `harden_placement`'s repair
    does), so gradients stay alive when a capacity binds. A hard placement that
    respects capacities is unchanged.
    """
    demand = placement.T @ traffic.stored_bytes / chip.n_chips  # [tiers], per chip
    dram = jnp.arange(len(TIERS)) == DRAM  # masks, not scatters: the sweep's hot path
    kept = jnp.where(dram, 1.0, _kept(demand, chip.tiers.capacity))
    held = placement * kept[None, :]
    return held + jnp.where(dram[None, :], jnp.sum(placement - held, axis=-1, keepdims=True), 0.0)


def class_placement(placement: PlacementMatrix, traffic: Traffic) -> Float[Array, "classes tiers"]:
    """The fraction of each class's stored bytes in each tier (`CLASSES` x `TIERS`): a
    placement's rows summed over the heat buckets of each KV class, weighted by their
    bytes. An empty class is reported in DRAM."""
    stored = class_sum(placement * traffic.stored_bytes[:, None], axis=0)
    total = jnp.sum(stored, axis=-1, keepdims=True)
    ok = total > 0
    empty = jax.nn.one_hot(DRAM, len(TIERS), dtype=stored.dtype)
    return jnp.where(ok, stored / jnp.where(ok, total, 1.0), empty)

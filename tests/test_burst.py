"""Bursts: N requests sent at once, each served once (`costmodel.serving.burst`), the
serving rows that were measured that way (`arrival = "burst"`), and closed-loop clients
of fixed-length requests, which run in waves of such bursts (`ServingRow.waves`)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import costmodel.validate_serving as vs
from costmodel.io import InputError
from costmodel.serving import burst, output_length_pmf


# A decode step of 10 ms + 0.1 ms per sequence; a prefill of 20 ms + 5 ms per prompt.
BATCHES = np.arange(1.0, 513.0)
DECODE = (BATCHES, 0.010 + 1e-4 * BATCHES)
PREFILL = (BATCHES, 0.020 + 0.005 * BATCHES)
d = lambda b: 0.010 + 1e-4 * b
p = lambda a: 0.020 + 0.005 * a


def test_output_length_pmfs_keep_the_mean():
    for mean in (1.0, 7.0, 57.0, 60.5, 204.2):
        for kind in ("fixed", "varied"):
            pmf = output_length_pmf(mean, kind)
            assert pmf.sum() == pytest.approx(1.0, abs=1e-12) and (pmf >= 0).all()
            assert np.sum(np.arange(1, len(pmf) + 1) * pmf) == pytest.approx(mean, rel=1e-6)
    assert (output_length_pmf(60.5, "fixed") > 0).sum() == 2
    with pytest.raises(InputError, match="output_lengths = 'uniform'"):
        output_length_pmf(10.0, "uniform")
    with pytest.raises(InputError, match="output_tokens = 0.5"):
        output_length_pmf(0.5, "fixed")


@pytest.mark.parametrize("mean,cap", [(1.5, 4), (10.0, 150), (56.5, 150), (75.5, 150), (119.3, 150), (1015.9, 1024)])
def test_capped_lengths_are_the_maximum_entropy_distribution_on_one_to_the_cap(mean, cap):
    """On 1 ... cap with a given mean the maximum-entropy distribution is exponential in
    k (Jaynes): one constant log-ratio between neighbours, of the sign of mean - (1 + cap) / 2,
    and the mean kept."""
    pmf = output_length_pmf(mean, "varied", cap)
    k = np.arange(1, len(pmf) + 1)
    assert len(pmf) == cap and pmf.sum() == pytest.approx(1.0, abs=1e-12) and (pmf >= 0).all()
    assert np.dot(k, pmf) == pytest.approx(mean, rel=1e-9)
    steps = np.diff(np.log(pmf))
    assert np.allclose(steps, steps[0], rtol=1e-6, atol=1e-9)
    middle = (1 + cap) / 2
    assert steps[0] == pytest.approx(0.0, abs=1e-9) if mean == middle else np.sign(steps[0]) == np.sign(mean - middle)


def test_capped_lengths_at_the_edges_and_far_from_the_cap():
    assert output_length_pmf(150.0, "varied", 150).argmax() == 149 and output_length_pmf(150.0, "varied", 150)[-1] == 1
    assert output_length_pmf(1.0, "varied", 150)[0] == 1
    np.testing.assert_allclose(output_length_pmf(256.5, "varied", 512), np.full(512, 1 / 512), rtol=1e-9)
    # A cap far above the mean changes nothing: the geometric distribution, cut at the cap.
    free, capped = output_length_pmf(20.0, "varied"), output_length_pmf(20.0, "varied", 2000)
    assert np.abs(np.pad(free, (0, 2000 - len(free))) - capped).sum() < 1e-6
    with pytest.raises(InputError, match="output_cap = 100"):
        output_length_pmf(120.0, "varied", 100)
    with pytest.raises(InputError, match="output_cap = 150.5: expected a whole number"):
        output_length_pmf(120.0, "varied", 150.5)


def test_a_cap_ends_the_drain_and_the_short_requests_that_weigh_in_the_tpot():
    """Lengths under a cap near the mean: the burst ends by the cap (not the geometric
    tail's m x H_n), and fewer requests of a few tokens carry a whole prefill wait in
    their time per token."""
    n, m, cap = 64, 119.3, 150
    free = burst(n, output_length_pmf(m, "varied"), 128, DECODE, PREFILL)
    capped = burst(n, output_length_pmf(m, "varied", cap), 128, DECODE, PREFILL)
    assert capped.seconds <= p(n) + (cap - 1) * d(n) + 1e-9 < free.seconds
    assert capped.tpot < free.tpot
    # With a decode step of one length, every request admitted at once decodes a step of
    # that length after each token, and its second token waits out the rest of the
    # burst's prompt pass: TPOT = step + wait x E[1 / (k - 1)] over requests of k >= 2.
    flat = (BATCHES, np.full_like(BATCHES, 0.010))
    wait = p(n) * (1 - (n + 1) / (2 * n))
    for pmf in (output_length_pmf(m, "varied", cap), output_length_pmf(m, "varied")):
        k = np.arange(2, len(pmf) + 1)
        expected = 0.010 + wait * np.sum(pmf[1:] / (k - 1)) / pmf[1:].sum()
        assert burst(n, pmf, 128, flat, PREFILL).tpot == pytest.approx(expected, rel=1e-9)


def test_one_request_of_fixed_length_is_a_prefill_then_its_decode_steps():
    m = 57
    r = burst(1, output_length_pmf(m, "fixed"), 64, DECODE, PREFILL)
    assert r.seconds == pytest.approx(p(1) + (m - 1) * d(1), rel=1e-9)
    assert r.ttft == pytest.approx(p(1), rel=1e-9)  # the first token ends the prefill
    assert r.tpot == pytest.approx(d(1), rel=1e-9)
    assert r.output_tokens_per_second == pytest.approx(m / r.seconds, rel=1e-9)


def test_a_batch_that_fits_decodes_together_after_its_prompts():
    n, m = 32, 100
    r = burst(n, output_length_pmf(m, "fixed"), 64, DECODE, PREFILL)
    assert r.seconds == pytest.approx(p(n) + (m - 1) * d(n), rel=1e-9)
    # The j-th prompt's first token comes j / n of the way through the prefill ...
    assert r.ttft == pytest.approx(p(n) * (n + 1) / (2 * n), rel=1e-9)
    # ... and it waits out the rest of it before its second token.
    assert r.tpot == pytest.approx(d(n) + p(n) * (1 - (n + 1) / (2 * n)) / (m - 1), rel=1e-9)
    assert r.batch == n
    # Every token but each request's second comes one decode step after the one before.
    assert r.itl_median == pytest.approx(d(n), rel=1e-9)


def test_more_requests_than_slots_go_in_waves():
    cap, m = 16, 50
    r = burst(3 * cap, output_length_pmf(m, "fixed"), cap, DECODE, PREFILL)
    assert r.seconds == pytest.approx(3 * (p(cap) + (m - 1) * d(cap)), rel=1e-9)
    assert r.batch == cap
    # The second wave waits for the first: its first tokens a wave later.
    wave = p(cap) + (m - 1) * d(cap)
    assert r.ttft == pytest.approx(wave + p(cap) * (cap + 1) / (2 * cap), rel=1e-9)


def test_varied_lengths_drain_until_the_longest_request_ends():
    m = 200.0
    one = burst(1, output_length_pmf(m, "varied"), 64, DECODE, PREFILL)
    # One request: a prefill and (length - 1) decode steps, in expectation, each a step
    # of one sequence whatever its length.
    assert one.seconds == pytest.approx(p(1) + (m - 1) * d(1), rel=1e-6)
    assert one.tpot == pytest.approx(d(1), rel=1e-9)
    n = 320
    many = burst(n, output_length_pmf(m, "varied"), 512, DECODE, PREFILL)
    fixed = burst(n, output_length_pmf(m, "fixed"), 512, DECODE, PREFILL)
    # The longest of n geometric lengths is about m x H_n (6.35 m for n = 320): the
    # drain's steps at small batches take longer than a fixed-length batch.
    harmonic = sum(1 / k for k in range(1, n + 1))
    assert many.seconds > fixed.seconds
    assert many.seconds > p(n) + 0.9 * m * harmonic * d(1)
    assert many.output_tokens_per_second < fixed.output_tokens_per_second


@pytest.mark.parametrize("kind", ["fixed", "varied"])
def test_faster_steps_or_more_slots_never_slow_a_burst(kind):
    pmf = output_length_pmf(80.0, kind)
    base = burst(100, pmf, 32, DECODE, PREFILL)
    faster = burst(100, pmf, 32, (BATCHES, 0.8 * DECODE[1]), PREFILL)
    roomier = burst(100, pmf, 64, DECODE, PREFILL)
    quicker_prompts = burst(100, pmf, 32, DECODE, (BATCHES, 0.5 * PREFILL[1]))
    for r in (faster, roomier, quicker_prompts):
        assert r.seconds <= base.seconds * (1 + 1e-12)


def _simulate(n, pmf, cap, rng):
    """One burst served request by request under `burst`'s rules (a Monte-Carlo check):
    (seconds, mean TPOT over requests of two tokens or more, mean TTFT, every
    inter-token time)."""
    lengths = rng.choice(np.arange(1, len(pmf) + 1), size=n, p=pmf)
    emitted, first, last = np.zeros(n, int), np.zeros(n), np.zeros(n)
    previous, gaps = np.zeros(n), []
    waiting, running, now = list(range(n)), [], 0.0
    while waiting or running:
        new, waiting = waiting[: cap - len(running)], waiting[cap - len(running) :]
        pre = p(len(new)) if new else 0.0
        for j, r in enumerate(new, 1):
            first[r], emitted[r] = now + j / len(new) * pre, 1
            previous[r] = first[r]
        now += pre + (d(len(running)) if running else 0.0)
        still = []
        for r in running:
            emitted[r] += 1
            gaps.append(now - previous[r])
            previous[r] = now
            if emitted[r] < lengths[r]:
                still.append(r)
            else:
                last[r] = now
        still += [r for r in new if lengths[r] > 1]
        running = still
    two = lengths >= 2
    tpot = float(np.mean((last[two] - first[two]) / (lengths[two] - 1)))
    return now, tpot, float(first.mean()), gaps


@pytest.mark.parametrize(
    "n,mean,kind,cap", [(16, 100.0, "varied", 64), (40, 30.0, "fixed", 16), (8, 60.0, "varied", 64)]
)
def test_the_fluid_model_matches_a_simulation_of_the_same_engine(n, mean, kind, cap):
    pmf = output_length_pmf(mean, kind)
    rng = np.random.default_rng(0)
    runs = [_simulate(n, pmf, cap, rng) for _ in range(300 if kind == "varied" else 1)]
    seconds, tpot, ttft = np.mean([x[:3] for x in runs], axis=0)
    r = burst(n, pmf, cap, DECODE, PREFILL)
    assert r.seconds == pytest.approx(seconds, rel=0.04)
    assert r.tpot == pytest.approx(tpot, rel=0.02)
    assert r.ttft == pytest.approx(ttft, rel=1e-9)
    assert r.itl_median == pytest.approx(np.median(np.concatenate([x[3] for x in runs])), rel=0.01)


@pytest.mark.parametrize("n,mean,cap", [(200, 20.0, 64), (300, 40.0, 100), (1000, 100.0, 256)])
def test_the_median_inter_token_time_where_prompts_stall_some_steps(n, mean, cap):
    """More requests than slots, lengths varied: a step that admits requests prefills
    their prompts before its decode, and every sequence decoding in it waits. The mean
    TPOT averages those stalls in; the median inter-token time is a quantile of a
    mixture of plain and stalled steps (admissions Poisson around the fluid number), as
    the pooled gaps of a simulation of the same engine give it."""
    pmf = output_length_pmf(mean, "varied")
    r = burst(n, pmf, cap, DECODE, PREFILL)
    rng = np.random.default_rng(1)
    gaps = np.concatenate([_simulate(n, pmf, cap, rng)[3] for _ in range(20)])
    assert r.itl_median < r.tpot
    assert r.itl_median == pytest.approx(np.median(gaps), rel=0.01)


def test_bad_burst_inputs():
    with pytest.raises(InputError, match="requests = 0"):
        burst(0, output_length_pmf(10, "fixed"), 4, DECODE, PREFILL)
    with pytest.raises(InputError, match="capacity = 0.5"):
        burst(4, output_length_pmf(10, "fixed"), 0.5, DECODE, PREFILL)
    with pytest.raises(InputError, match="output_tokens = inf"):
        output_length_pmf(math.inf, "varied")


ROW = """
[[rows]]
id = "b"
status = "test"
chip = "h100-sxm"
chips = 1
tensor_parallel = 1
pipeline_parallel = 1
framework = "native"
model = "llama-3-8b"
weights = "bf16"
kv = "bf16"
prompt_tokens = 512
output_tokens = 128
concurrency = {n}
arrival = "burst"
output_lengths = "fixed"
output_tokens_per_second = 500.0
tag = "M"
source = "a test"
"""


def test_a_burst_row_is_its_prefill_and_its_decode_steps(tmp_path):
    path = tmp_path / "serving.toml"
    path.write_text(ROW.format(n=1))
    (row,) = vs.load_serving_rows(path)
    (r,) = vs.evaluate_serving_rows([row])
    b, step, _ = vs._curve(row, decode_only=True)
    from costmodel.serving import prompt_seconds

    pre = float(prompt_seconds(row.model, vs._row_chip(row), prompt_tokens=512.0, batches=np.array([1.0]))[0])
    assert r.output_tokens_per_second == pytest.approx(128 / (pre + 127 * float(step[0])), rel=1e-6)
    assert r.ttft_ms == pytest.approx(pre * 1e3, rel=1e-6) and not r.overloaded
    assert r.tpot_ms == pytest.approx(float(step[0]) * 1e3, rel=1e-6)  # one sequence's steps
    # Its median inter-token time is the same step (one request: no stalls).
    path.write_text(ROW.format(n=1).replace('arrival = "burst"', 'arrival = "burst"\ntpot_statistic = "median_itl"'))
    (median,) = vs.evaluate_serving_rows(vs.load_serving_rows(path))
    assert median.tpot_ms == pytest.approx(r.tpot_ms, rel=1e-6)
    # A prompt of 512 tokens takes longer than one decode step of one sequence.
    assert pre > float(step[0])


@pytest.mark.parametrize(
    "edit,needles",
    [
        (('arrival = "burst"', 'arrival = "storm"'), ("field 'arrival' = 'storm'", "expected one of")),
        (('output_lengths = "fixed"\n', ""), ("field 'arrival' = 'burst'", "output_lengths")),
        (('output_lengths = "fixed"', 'output_lengths = "long"'), ("field 'output_lengths' = 'long'",)),
        (('arrival = "burst"', 'arrival = "burst"\ntpot_statistic = "p50"'), ("field 'tpot_statistic' = 'p50'",)),
        (("concurrency = 8\n", "request_rate = 2.0\n"), ("field 'arrival' = 'burst'", "concurrency")),
        (("concurrency = 8\n", "concurrency = 0.5\n"), ("field 'concurrency' = 0.5", "for a burst")),
        (("concurrency = 8\n", "concurrency = 1e9\n"), ("field 'concurrency' = 1e+09", "for a burst")),
        (("output_tokens = 128", "output_tokens = 0.5"), ("field 'output_tokens' = 0.5", "for a burst")),
        (
            ('concurrency = 8\narrival = "burst"\n', "request_rate = 2.0\n"),
            ("field 'output_lengths' = 'fixed'", "'concurrency'"),
        ),
        (
            (
                'concurrency = 8\narrival = "burst"\noutput_lengths = "fixed"\n',
                'request_rate = 2.0\ntpot_statistic = "per_stream"\n',
            ),
            ("field 'tpot_statistic' = 'per_stream'", "'concurrency'"),
        ),
        (
            ('concurrency = 8\narrival = "burst"\n', "concurrency = 0.5\n"),
            ("field 'concurrency' = 0.5", "for waves of fixed-length requests"),
        ),
        (
            ('concurrency = 8\narrival = "burst"\n', "concurrency = 1e9\n"),
            ("field 'concurrency' = 1e+09", "for waves of fixed-length requests"),
        ),
        (
            ('arrival = "burst"\noutput_lengths = "fixed"', 'output_lengths = "varied"'),
            ("field 'output_lengths' = 'varied'", "expected 'fixed' on a closed-loop row"),
        ),
        (
            ('output_lengths = "fixed"', 'output_lengths = "fixed"\noutput_cap = 150'),
            ("field 'output_cap' = 150", "output_lengths = 'varied'"),
        ),
        (
            ('output_lengths = "fixed"', 'output_lengths = "varied"\noutput_cap = 100'),
            ("field 'output_cap' = 100", "at least output_tokens = 128"),
        ),
        (
            ('concurrency = 8\narrival = "burst"\noutput_lengths = "fixed"\n', "concurrency = 8\noutput_cap = 150\n"),
            ("field 'output_cap' = 150", "output_lengths = 'varied'"),
        ),
        (
            ('output_lengths = "fixed"', 'output_lengths = "varied"\noutput_cap = 150.5'),
            ("field 'output_cap' = 150.5", "whole number"),
        ),
        (
            ('output_lengths = "fixed"', 'output_lengths = "varied"\noutput_cap = 1e9'),
            ("field 'output_cap' = 1e+09", "expected 1 to 131072"),
        ),
    ],
)
def test_bad_burst_rows_are_one_line(tmp_path, edit, needles):
    path = tmp_path / "serving.toml"
    path.write_text(ROW.format(n=8).replace(*edit))
    with pytest.raises(InputError) as e:
        vs.load_serving_rows(path)
    text = str(e.value)
    assert "\n" not in text and str(path) in text
    for n in needles:
        assert n in text, text


def test_a_rows_cap_reaches_the_burst_it_is_served_with(tmp_path):
    path = tmp_path / "serving.toml"
    path.write_text(ROW.format(n=8).replace('output_lengths = "fixed"', 'output_lengths = "varied"\noutput_cap = 150'))
    (row,) = vs.load_serving_rows(path)
    assert row.output_cap == 150
    np.testing.assert_array_equal(vs._burst_parts(row).pmf, output_length_pmf(128, "varied", 150))


def test_fits_refuse_burst_rows(tmp_path):
    path = tmp_path / "serving.toml"
    path.write_text(ROW.format(n=8))
    rows = vs.load_serving_rows(path)
    for fit in (vs.fit_host, vs.fit_in_flight):
        with pytest.raises(InputError, match="closed-loop"):
            fit(rows)


@pytest.mark.slow
def test_a_burst_row_takes_the_engines_host_time_or_none(tmp_path):
    path = tmp_path / "serving.toml"
    path.write_text(ROW.format(n=16).replace('framework = "native"', 'framework = "vllm-0.6"'))
    (row,) = vs.load_serving_rows(path)
    with_host = vs.evaluate_serving_row(row)
    without = vs.evaluate_serving_row(row, host_us=(0.0, 0.0))
    # The engine's host loop adds to every step: slower with it, by at least its time per step.
    assert with_host.output_tokens_per_second < without.output_tokens_per_second
    assert with_host.tpot_ms - without.tpot_ms > 2.5  # vllm-0.6: 2.5 ms per step + 167 µs per sequence


def test_a_bursts_prompts_run_at_the_chips_own_compute_rate(tmp_path):
    """A profile's compute efficiency is fitted on decode steps; a batch of prompts runs
    at the chip's own rate, as `costmodel validate` prices a static batch's prefill
    (`trt-llm-0.7` changes nothing else of the chip)."""
    from costmodel.io import chip_info
    from costmodel.serving import prompt_seconds

    path = tmp_path / "serving.toml"
    path.write_text(ROW.format(n=1).replace('framework = "native"', 'framework = "trt-llm-0.7"'))
    (row,) = vs.load_serving_rows(path)
    (r,) = vs.evaluate_serving_rows([row])
    b, step, _ = vs._curve(row, decode_only=True)
    own = float(prompt_seconds(row.model, chip_info(row.chip), prompt_tokens=512.0, batches=np.array([1.0]))[0])
    profiled = float(prompt_seconds(row.model, vs._row_chip(row), prompt_tokens=512.0, batches=np.array([1.0]))[0])
    assert profiled > own  # the profile's decode-fitted efficiency would slow the prompt
    assert r.ttft_ms == pytest.approx(own * 1e3, rel=1e-6)
    assert r.output_tokens_per_second == pytest.approx(128 / (own + 127 * float(step[0])), rel=1e-6)


def test_fixed_length_clients_run_in_waves(tmp_path):
    """Closed-loop clients whose requests all emit the same length (`output_lengths =
    "fixed"` without `arrival`) start, finish and resend together: each wave is the
    burst of their `concurrency` requests, the j-th of whose prompts has its first token
    j / n of the way through the wave's prefill. With lengths that vary they are a
    steady state, whose first token waits for no one's prompt but its own chunks."""
    path = tmp_path / "serving.toml"
    path.write_text(ROW.format(n=16).replace('arrival = "burst"\n', ""))
    (wave,) = vs.load_serving_rows(path)
    assert wave.arrival == "closed" and wave.waves
    parts = vs._burst_parts(wave)
    assert parts.slots >= 16
    r = burst(16, parts.pmf, parts.slots, parts.decode, parts.prefill)
    w = vs.evaluate_serving_row(wave)
    assert w.ttft_ms == pytest.approx(r.ttft * 1e3, rel=1e-12) and not w.overloaded
    assert w.output_tokens_per_second == pytest.approx(r.output_tokens_per_second, rel=1e-12)
    (pass16,) = parts.prefill[1][parts.prefill[0] == 16]
    assert r.ttft == pytest.approx(pass16 * 17 / 32, rel=1e-9)  # the mean of j / 16 of 16 prompts
    steady = vs.evaluate_serving_row(dataclasses.replace(wave, output_lengths=""))
    assert not dataclasses.replace(wave, output_lengths="").waves
    assert w.ttft_ms > 4 * steady.ttft_ms


@pytest.mark.slow
def test_clients_beyond_the_memory_wait_for_a_wave(tmp_path):
    """More clients than the memory holds at the requests' last token: the engine runs
    full waves of the slots, and by Little's law each request waits concurrency / slots
    - 1 waves in the queue before its own (a burst sent once instead serves its
    remainder in a last, smaller wave)."""
    path = tmp_path / "serving.toml"
    text = ROW.format(n=96).replace('arrival = "burst"\n', "").replace('model = "llama-3-8b"', 'model = "llama-3-70b"')
    path.write_text(text.replace('weights = "bf16"', 'weights = "fp8"'))
    (row,) = vs.load_serving_rows(path)
    parts = vs._burst_parts(row)
    slots = parts.slots
    assert 1 <= slots < 96
    full = burst(slots, parts.pmf, slots, parts.decode, parts.prefill)
    w = vs.evaluate_serving_row(row)
    assert w.overloaded and w.batch == slots
    assert w.output_tokens_per_second == pytest.approx(full.output_tokens_per_second, rel=1e-12)
    assert w.ttft_ms == pytest.approx((full.ttft + (96 / slots - 1) * full.seconds) * 1e3, rel=1e-12)
    once = vs.evaluate_serving_row(dataclasses.replace(row, arrival="burst"))
    assert once.output_tokens_per_second <= w.output_tokens_per_second * (1 + 1e-12)


@pytest.mark.parametrize("waves", [True, False])
def test_a_per_stream_tpot_is_the_throughput_restated(tmp_path, waves):
    """`tpot_statistic = "per_stream"`: the TPOT is concurrency / throughput, in the
    table and the model alike, so it is shown and scored once, as the throughput."""
    path = tmp_path / "serving.toml"
    text = ROW.format(n=16).replace('arrival = "burst"\n', 'tpot_statistic = "per_stream"\ntpot_ms = 30.0\n')
    path.write_text(text if waves else text.replace('output_lengths = "fixed"\n', ""))
    (row,) = vs.load_serving_rows(path)
    assert row.waves == waves
    r = vs.evaluate_serving_row(row)
    assert r.tpot_ms == pytest.approx(1e3 * 16 / r.output_tokens_per_second, rel=1e-12)
    # The client's interval holds its prefills too: longer than the decode steps' mean.
    mean = vs.evaluate_serving_row(dataclasses.replace(row, tpot_statistic="mean"))
    assert r.tpot_ms > mean.tpot_ms
    s = vs.summary([r])
    assert s["tpot_ms"]["n"] == 0 and s["output_tokens_per_second"]["n"] == 1 and s["scored"]["n"] == 1
    assert vs.summary([mean])["scored"]["n"] == 2


@pytest.mark.slow
def test_a_host_fit_on_waves_adds_the_host_time_exactly_and_recovers_it(tmp_path):
    """`fit_host` prices a wave row's host time on curves computed once without it
    (`with_host_burst`): the same figures as the row evaluated with that host time; and
    rows made from a known host time give it back."""
    path = tmp_path / "serving.toml"
    path.write_text(ROW.format(n=24).replace('arrival = "burst"\n', "").replace('"native"', '"vllm-0.6"'))
    (row,) = vs.load_serving_rows(path)
    bare = vs._burst_parts(row, (0.0, 0.0))
    for host in ((0.0, 0.0), (2535.7, 167.37), (5000.0, 0.0)):
        fast = vs._burst_served(row, vs.with_host_burst(row, bare, host))
        full = vs.evaluate_serving_row(row, host_us=host)
        for key in ("tpot_ms", "ttft_ms", "output_tokens_per_second"):
            assert getattr(fast, key) == pytest.approx(getattr(full, key), rel=1e-6), (host, key)
    known = (3000.0, 120.0)
    rows = []
    for n in (2.0, 24.0):
        r = vs.evaluate_serving_row(dataclasses.replace(row, concurrency=n), host_us=known)
        rows.append(dataclasses.replace(r.row, tpot_ms=r.tpot_ms, output_tokens_per_second=r.output_tokens_per_second))
    fitted = vs.fit_host(rows)
    assert fitted == pytest.approx(known, rel=0.01)
    with pytest.raises(InputError, match="pipeline_parallel = 2"):
        vs.with_host_burst(dataclasses.replace(row, pipeline_parallel=2), bare, known)

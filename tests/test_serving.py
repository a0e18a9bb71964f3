"""The serving answer (`costmodel serve`): throughput under a TPOT target, and the curve."""

import json

import numpy as np
import pytest

import costmodel as cm
from costmodel.cli import main
from costmodel.serving import batch_grid, serve, splits


ECON = cm.economics_preset("N5")
GRID = batch_grid(20, 4096)


@pytest.fixture(scope="module")
def llama70():
    return serve("llama-3-70b", "h100-sxm", ECON, chips=8, batches=GRID)


def _best(s, tpot):
    ok = [p for p in s.points if p.feasible and p.tpot <= tpot]
    return max((p.tokens_per_second_per_chip for p in ok), default=0.0)


def test_relaxing_the_target_never_lowers_throughput(llama70):
    targets = np.geomspace(0.005, 0.5, 12)
    best = [_best(llama70, t) for t in targets]
    assert all(b2 >= b1 for b1, b2 in zip(best, best[1:]))
    assert best[0] == 0.0 < best[-1]  # 5 ms is below any 70B step on 8 H100s


def test_the_answer_is_the_best_point_within_the_target():
    s = serve("llama-3-70b", "h100-sxm", ECON, chips=8, tpot=0.05, batches=GRID)
    assert s.best is not None and s.best.feasible and s.best.tpot <= 0.05
    assert s.best.tokens_per_second_per_chip == pytest.approx(_best(s, 0.05))


def test_the_curve_is_monotone_up_to_capacity(llama70):
    for tp, pp in llama70.splits:
        curve = llama70.curve(tp, pp)
        assert len(curve) >= 5, (tp, pp)
        per_chip = [p.tokens_per_second_per_chip for p in curve]
        per_user = [p.tokens_per_second_per_user for p in curve]
        assert all(b >= a * (1 - 1e-6) for a, b in zip(per_chip, per_chip[1:])), (tp, pp)
        assert all(b <= a * (1 + 1e-6) for a, b in zip(per_user, per_user[1:])), (tp, pp)
        # The curve ends where memory does: the next grid batch does not fit.
        infeasible = [
            p for p in llama70.points if (p.tensor_parallel, p.pipeline_parallel) == (tp, pp) and not p.feasible
        ]
        assert infeasible and min(p.batch for p in infeasible) > curve[-1].batch


def test_a_pipeline_keeps_one_group_per_stage_in_flight(llama70):
    for p in llama70.points:
        assert p.micro_batches == min(p.pipeline_parallel, p.batch)
    # Per user, a pipeline is no faster than tensor parallelism on the same chips.
    b1 = {(p.tensor_parallel, p.pipeline_parallel): p for p in llama70.points if p.batch == 1}
    assert b1[(8, 1)].tokens_per_second_per_user > b1[(1, 8)].tokens_per_second_per_user


def test_splits_divide_the_heads():
    m = cm.model_preset("llama-3-70b")
    assert splits(m, 8) == [(1, 8), (2, 4), (4, 2), (8, 1)]
    assert (3, 4) not in splits(m, 12)  # 64 heads do not split three ways


def run(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_cli_json_and_plot(tmp_path, capsys):
    png = tmp_path / "curve.png"
    code, out, _ = run(
        [
            "serve",
            "--model",
            "llama-3-8b",
            "--chip",
            "h100-sxm",
            "--chips",
            "2",
            "--tpot-ms",
            "20",
            "--json",
            "--plot",
            str(png),
        ],
        capsys,
    )
    assert code == 0 and png.stat().st_size > 10_000
    d = json.loads(out)
    assert d["best"]["tpot"] <= 0.02 and d["chips"] == 2 and len(d["points"]) > 10


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--tpot-ms", "0.1"], "no batch meets it"),
        (["--tpot-ms", "-3"], "-3"),
        (["--chips", "100"], "max_chips"),
        (["--plot", "out.xyz"], "out.xyz"),
        (["--context-mix", "1024:0.5,8192:0.6"], "2 shares summing to 1.1"),
        (["--context-mix", "1024:0.5,8192"], "bin '8192'"),
        (["--context-mix", "1024.5:1"], "bin '1024.5:1'"),
        (["--context-mix", "0:1"], "every sequence at context 0"),
        (["--context", "100", "--context-mix", "1024:1"], "give one"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, needle, capsys):
    code, _, err = run(["serve", "--model", "llama-3-8b", "--chip", "h100-sxm", *args], capsys)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_context_mix_of_one_bin_is_one_context(capsys):
    answers = []
    for extra in (["--context", "8192"], ["--context-mix", "8192:1"]):
        code, out, err = run(
            ["serve", "--model", "gemma-2-9b", "--chips", "1", "--tpot-ms", "30", "--json", *extra], capsys
        )
        assert code == 0, err
        answers.append(json.loads(out)["best"])
    assert answers[0]["batch"] == answers[1]["batch"]
    assert answers[1]["tpot"] == pytest.approx(answers[0]["tpot"], rel=1e-6)


def test_context_mix_with_long_tail_serves_fewer_on_sliding_windows(capsys):
    """Same mean (8,192 tokens): gemma-2's sliding-window layers read at most 4,096
    tokens of each sequence, so a mix with short and long sequences reads less window KV
    than one context at the mean: never a slower step at the same batch."""
    results = {}
    for name, extra in (("one", ["--context", "8192"]), ("mix", ["--context-mix", "1024:0.5,15360:0.5"])):
        code, out, err = run(["serve", "--model", "gemma-2-9b", "--chips", "1", "--json", *extra], capsys)
        assert code == 0, err
        results[name] = {p["batch"]: p["tpot"] for p in json.loads(out)["points"] if p["feasible"]}
    common = sorted(set(results["one"]) & set(results["mix"]))
    assert len(common) > 5
    assert all(results["mix"][b] <= results["one"][b] * (1 + 1e-6) for b in common)

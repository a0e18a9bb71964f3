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
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, needle, capsys):
    code, _, err = run(["serve", "--model", "llama-3-8b", "--chip", "h100-sxm", *args], capsys)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1

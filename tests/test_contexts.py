"""Named context distributions (`data/contexts.toml`): histograms of the context a
decoding sequence has, computed from published per-request traces."""

import json
import math
import tomllib

import numpy as np
import pytest

import costmodel as cm
from costmodel.cli import main
from costmodel.io import InputError, load_context_distributions
from costmodel.io.contexts import contexts_path


NAMES = ("sharegpt", "azure-conversation", "azure-code", "long-document", "mooncake-conversation", "mooncake-synthetic")


def test_shipped_distributions_sum_to_one_and_keep_their_mean():
    raw = tomllib.loads(contexts_path().read_text())["distributions"]
    dists = load_context_distributions()
    assert set(NAMES) <= set(dists)
    for name, d in dists.items():
        assert math.fsum(d.shares) == pytest.approx(1.0, abs=1e-6)
        # The bins are each bin's mean context: the histogram keeps the trace's per-step mean.
        assert d.mean_context == pytest.approx(raw[name]["step_context_mean"], rel=2e-3), name
        assert "github" in d.source and "compute_contexts.py" in d.derivation
        mix = d.mix()
        assert float(np.sum(np.asarray(mix.share) * np.asarray(mix.ratio))) == pytest.approx(1.0, rel=1e-6)


def test_long_context_traffic_is_long():
    """Kimi's production chat holds longer histories than Azure's conversation service."""
    kimi, azure = cm.context_distribution("mooncake-conversation"), cm.context_distribution("azure-conversation")
    assert kimi.mean_context > 5 * azure.mean_context
    assert max(kimi.lengths) > 65536 and max(azure.lengths) < 8192


def test_a_named_mix_in_the_step_matches_its_mean_on_a_dense_model():
    """Full attention reads KV bytes linear in the context: on llama-3-8b a mix costs
    what one context at its mean costs, to the kernels' size effects (< 2 %)."""
    d = cm.context_distribution("sharegpt")
    model, chip = cm.model_preset("llama-3-8b"), cm.chip_preset("h100-sxm")

    def seconds(mix):
        w = cm.Workload(model, cm.Scenario(batch=32, context=d.mean_context), mix=mix)
        return float(cm.decode_cost(w, chip, cm.policy_placement("dram", cm.lower_traffic(w), chip)).seconds_per_step)

    assert seconds(d.mix()) == pytest.approx(seconds(None), rel=0.02)


@pytest.mark.parametrize(
    "edit,needles",
    [
        (("shares = [", "shares = [0.5, "), ("'shares'", "expected")),
        (("bins = [", "bins = [-1, "), ("'bins'", "expected a non-empty list of numbers > 0")),
        (("source = ", "sauce = "), ("sauce",)),
        (("prompt_tokens_mean = ", "prompt_tokens_mean = -"), ("prompt_tokens_mean",)),
    ],
)
def test_bad_files_are_one_line_naming_the_field(tmp_path, edit, needles):
    text = contexts_path().read_text().replace(*edit, 1)
    path = tmp_path / "contexts.toml"
    path.write_text(text)
    with pytest.raises(InputError) as e:
        load_context_distributions(path)
    assert str(path) in str(e.value) and "distributions.sharegpt" in str(e.value)
    assert all(n in str(e.value) for n in needles), str(e.value)


def test_cli_takes_a_name_and_refuses_an_unknown_one(capsys):
    args = ["serve", "--model", "llama-3-8b", "--chip", "h100-sxm", "--chips", "1", "--json"]
    assert main([*args, "--context-mix", "azure-code"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["context"] == pytest.approx(cm.context_distribution("azure-code").mean_context)
    assert out["context_mix"] == "azure-code"
    assert main([*args, "--context-mix", "sharegpt-v3"]) == 2
    err = capsys.readouterr().err
    assert "'sharegpt-v3'" in err and "mooncake-conversation" in err and "Traceback" not in err
    assert "contexts.toml" in err and "TOKENS:SHARE" in err


def test_a_named_mix_differs_from_its_mean_where_attention_is_not_linear():
    """gemma-2's sliding-window layers read at most 4,096 tokens: a long-tailed mix reads
    less KV than one context at its mean, so the mix is not its mean there."""
    d = cm.context_distribution("mooncake-conversation")
    model, chip = cm.model_preset("gemma-2-9b"), cm.chip_preset("h100-sxm")

    def seconds(mix):
        w = cm.Workload(model, cm.Scenario(batch=4, context=d.mean_context), mix=mix)
        return float(cm.decode_cost(w, chip, cm.policy_placement("dram", cm.lower_traffic(w), chip)).seconds_per_step)

    assert seconds(d.mix()) < 0.99 * seconds(None)


def test_edges_must_increase_one_per_bin(tmp_path):
    text = contexts_path().read_text().replace("bin_lower_edges = [0, 256,", "bin_lower_edges = [256, 0,", 1)
    path = tmp_path / "contexts.toml"
    path.write_text(text)
    with pytest.raises(InputError, match="bin_lower_edges"):
        load_context_distributions(path)

"""Writes `dense_golden.json`: decode costs of the model before KV heat buckets existed.

Run on a checkout of commit 2bf9817 (the last without buckets), in float64:

    git worktree add /tmp/old 2bf9817
    PYTHONPATH=/tmp/old python tests/data/make_dense_golden.py tests/data/dense_golden.json

`tests/test_history.py` evaluates the same points with the dense access profile and
compares.
"""

import json
import sys

import jax

import costmodel as cm
from costmodel.io import chip_presets


MODELS = ("llama-3-8b", "gemma-2-9b", "mixtral-8x7b")
SCENARIOS = (dict(batch=1, context=4096), dict(batch=16, context=32768, prefix=1000))
POLICIES = (None, "sram", "greedy", "pim_kv")
FIELDS = ("seconds_per_step", "joules_per_token", "tier_bytes", "stored_bytes")


def main(path):
    out = {}
    for chip in sorted(chip_presets()):
        for model in MODELS:
            for k, scenario in enumerate(SCENARIOS):
                for policy in POLICIES:
                    key = f"{chip}|{model}|{k}|{policy}"
                    try:
                        cost = cm.evaluate(model, chip, placement=policy, **scenario).cost
                    except cm.InputError as e:
                        out[key] = str(e)
                        continue
                    out[key] = {f: getattr(cost, f).tolist() for f in FIELDS}
    json.dump(out, open(path, "w"), indent=0)


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    main(sys.argv[1])

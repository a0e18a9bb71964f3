#!/usr/bin/env python3
"""Per-decode-step context-length histograms from public per-request (prompt, output) traces.

For a request with prompt P and output O, the decode steps are taken to see contexts
P+1 .. P+O (each once), so every request contributes O equally weighted context values.
Bin shares are exact counts of those integer contexts per bin (no sampling); the bin's
representative point is the exact mean context of the steps that fall in it, so
sum(share * bin) equals the overall per-step mean context.

Usage: python3 compute_contexts.py DATA_DIR   (files extracted as described in REPORT.md)
Prints a JSON summary; writes nothing.
"""

import csv
import json
import sys

import numpy as np


INF = 1 << 40


def load_csv(path, pcol, ocol):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    P = np.array([int(float(r[pcol])) for r in rows], dtype=np.int64)
    O = np.array([int(float(r[ocol])) for r in rows], dtype=np.int64)
    return P, O


def load_jsonl(path):
    P, O = [], []
    with open(path) as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                P.append(d["input_length"])
                O.append(d["output_length"])
    return np.array(P, dtype=np.int64), np.array(O, dtype=np.int64)


def step_histogram(P, O, edges):
    """edges: increasing list, last may be INF. Returns counts, sums per bin."""
    a = P + 1  # first decode context
    b = P + O  # last decode context (inclusive); O == 0 gives an empty range
    counts, sums = [], []
    for lo, hi in zip(edges[:-1], edges[1:]):
        s = np.maximum(a, lo)
        e = np.minimum(b, hi - 1)
        n = np.clip(e - s + 1, 0, None).astype(np.float64)
        tot = np.where(n > 0, (s + e).astype(np.float64) * n / 2.0, 0.0)
        counts.append(n.sum())
        sums.append(tot.sum())
    return np.array(counts), np.array(sums)


def step_quantiles(P, O, qs):
    ctx = np.repeat(P + 1, O) + (np.arange(O.sum()) - np.repeat(np.cumsum(O) - O, O))
    return np.percentile(ctx, qs).tolist(), float(ctx.mean())


# Bin edges (tokens); the last bin is open-ended. Octave (power-of-2) edges, with the
# octave holding most of the mass split in half-octave-ish steps where that octave
# would otherwise hold > 60 % of all steps (azure-conversation, arxiv-summarization).
OCT = [0, 256, 512, 1024, 2048, 4096, INF]
AZCONV = [0, 256, 512, 1024, 1536, 2048, 4096, INF]
ARXIV = [0, 512, 1024, 1536, 2048, 2560, 3072, 3584, INF]
LONG = [0, 2048, 4096, 8192, 16384, 32768, 65536, INF]
LONG2 = [0, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, INF]

DATASETS = {
    "azure-conversation": (lambda d: load_csv(f"{d}/azure2023_conv.csv", "ContextTokens", "GeneratedTokens"), AZCONV),
    "azure-code": (lambda d: load_csv(f"{d}/azure2023_code.csv", "ContextTokens", "GeneratedTokens"), OCT),
    "sharegpt": (
        lambda d: load_csv(
            f"{d}/sharegpt_8k_filtered_stats_llama2_tokenizer.csv", "num_prefill_tokens", "num_decode_tokens"
        ),
        OCT,
    ),
    "arxiv-summarization": (
        lambda d: load_csv(
            f"{d}/arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv", "num_prefill_tokens", "num_decode_tokens"
        ),
        ARXIV,
    ),
    "mooncake-conversation": (lambda d: load_jsonl(f"{d}/mooncake_conversation.jsonl"), LONG),
    "mooncake-synthetic": (lambda d: load_jsonl(f"{d}/mooncake_synthetic.jsonl"), LONG2),
}


def main(d):
    out = {}
    for name, (loader, edges) in DATASETS.items():
        P, O = loader(d)
        counts, sums = step_histogram(P, O, edges)
        assert counts.sum() == O.sum(), (name, counts.sum(), O.sum())
        keep = counts > 0
        # drop empty bins by merging edges (only trailing/leading empties occur here)
        kept_edges = [edges[i] for i in range(len(counts)) if keep[i]] + [edges[max(np.nonzero(keep)[0]) + 1]]
        c, s = counts[keep], sums[keep]
        shares = c / c.sum()
        reps = s / c
        q, mean_ctx = step_quantiles(P, O, [10, 50, 90, 99])
        out[name] = {
            "n_requests": int(len(P)),
            "n_decode_steps": int(O.sum()),
            "prompt_mean": float(P.mean()),
            "prompt_p50_p90_p99": np.percentile(P, [50, 90, 99]).tolist(),
            "output_mean": float(O.mean()),
            "output_p50_p90_p99": np.percentile(O, [50, 90, 99]).tolist(),
            "zero_output_requests": int((O == 0).sum()),
            "step_context_mean": mean_ctx,
            "step_context_p10_p50_p90_p99": q,
            "bin_edges": [e if e < INF else "inf" for e in kept_edges],
            "bin_mean_context": reps.tolist(),
            "shares": shares.tolist(),
            "request_weighted_prompt_share_per_bin": (
                np.histogram(P, bins=[e if e < INF else 2**62 for e in kept_edges])[0] / len(P)
            ).tolist(),
        }
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "data")

#!/usr/bin/env python3
"""Turn computed.json (output of compute_contexts.py) into data/contexts.toml.

sh benchmarks/contexts/fetch_data.sh          # the six trace files, into benchmarks/contexts/data/
python benchmarks/contexts/compute_contexts.py benchmarks/contexts/data > benchmarks/contexts/computed.json
python benchmarks/contexts/gen_toml.py        # writes data/contexts.toml
"""

import json
import tomllib
from pathlib import Path


HERE = Path(__file__).resolve().parent

C = json.load(open(HERE / "computed.json"))

COMMON_DERIV = (
    "Computed with benchmarks/contexts/compute_contexts.py (commands in benchmarks/contexts/gen_toml.py) "
    "from the per-request (prompt P, output O) rows of the source file, every row used, nothing sampled. "
    "Each request contributes its O decode steps with contexts P+1..P+O, each counted once, so requests are "
    "weighted by O (the per-decode-step / KV-length distribution asked for). shares = exact fraction of all "
    "decode steps whose context falls in [lower edge, next edge) (last bin open-ended); bins = exact mean context "
    "of the steps in that bin, rounded to an integer, so sum(shares*bins) reproduces the per-step mean context "
    "(step_context_mean) to rounding. Shares rounded to 6 decimals, the largest bin absorbing the rounding "
    "residual (< 1e-5). prompt/output means are plain per-request means of the file."
)

META = {
    "sharegpt": dict(
        src="sharegpt",
        description=(
            "ShareGPT chat (OpenChat ShareGPT4 conversations, multi-turn, prompt includes the chat history), "
            "Llama-2 tokenizer, requests with total length <= ~8k tokens; the ShareGPT trace used by "
            "Sarathi-Serve (OSDI'24) / Vidur / Niyama. NOT the short first-turn ShareGPT sampling of vLLM's "
            "benchmark_serving (see REPORT.md)."
        ),
        source=(
            "github microsoft/sarathi-serve @ 72339db5b120614033b317880ad3a05a5e4c9415 (branch niyama_asplos2026), "
            "data/processed_traces/sharegpt_8k_filtered_stats_llama2_tokenizer.csv (30,731 rows; columns "
            "num_prefill_tokens,num_decode_tokens,...; sha256 of extracted file "
            "c.f. REPORT.md). Named 'openchat/openchat_sharegpt4_dataset_filtered' in the repo's "
            "branch osdi-sarathi-serve @ ceaa0660, osdi-experiments/figure-1/high_tail_latency.ipynb; default trace "
            "of microsoft/vidur @ 7d47513 vidur/config/config.py:113. Computed from file: prompt median 1730, "
            "P90 5696; output median 415, P90 834."
        ),
    ),
    "azure-conversation": dict(
        src="azure-conversation",
        description=(
            "Azure LLM inference trace 2023, conversation service (one hour, 2023-11-16, production; Splitwise, "
            "Patel et al., ISCA 2024). Token counts from the production service (tokenizer not stated)."
        ),
        source=(
            "github Azure/AzurePublicDataset @ b469a113cedca53ddc3bdea71a143dc4b7d8700c, "
            "data/AzureLLMInferenceTrace_conv.csv (last changed in 790921015d50; 19,366 rows; columns TIMESTAMP,"
            "ContextTokens,GeneratedTokens), described in AzureLLMInferenceDataset2023.md. "
            "https://github.com/Azure/AzurePublicDataset/blob/master/data/AzureLLMInferenceTrace_conv.csv . "
            "Computed from file: prompt median 1020, P90 2734; output median 129, P90 424."
        ),
    ),
    "azure-code": dict(
        src="azure-code",
        description=(
            "Azure LLM inference trace 2023, coding service (code completion; one hour, 2023-11-16; Splitwise, "
            "ISCA 2024). Long prompts, very short outputs (median 13 tokens)."
        ),
        source=(
            "github Azure/AzurePublicDataset @ b469a113cedca53ddc3bdea71a143dc4b7d8700c, "
            "data/AzureLLMInferenceTrace_code.csv (last changed in 790921015d50; 8,819 rows; columns TIMESTAMP,"
            "ContextTokens,GeneratedTokens). "
            "https://github.com/Azure/AzurePublicDataset/blob/master/data/AzureLLMInferenceTrace_code.csv . "
            "Computed from file: prompt median 1469, P90 5188; output median 13, P90 55."
        ),
    ),
    "long-document": dict(
        src="arxiv-summarization",
        description=(
            "Long-document summarisation: arXiv-summarization dataset as used by Sarathi-Serve / Vidur "
            "('Arxiv-Summarization-4K'), Llama-2 tokenizer, filtered to ~4k total tokens. Output = reference "
            "summary length, not a served model's generation."
        ),
        source=(
            "github microsoft/vidur @ 7d47513363ec447a741ac5e47241580b47724fbf, "
            "data/processed_traces/arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv (28,257 rows). "
            "Published in the same repo, vidur/config_optimizer/analyzer/dashboard/intro_page.py, Workloads table: "
            "'Arxiv-Summarization-4K | 28k queries | prefill (mean, median, P90) 2588, 2730, 3702 | decode 291, 167, "
            "372 | PD ratio median 15.7'; the file reproduces these exactly."
        ),
    ),
    "mooncake-conversation": dict(
        src="mooncake-conversation",
        description=(
            "Kimi (Moonshot AI) production chat, long-context: Mooncake FAST'25 conversation trace, one hour "
            "of online requests (tokenizer not stated; prompts up to ~126k tokens)."
        ),
        source=(
            "github kvcache-ai/Mooncake @ 3b5a594133958449a1feaf1c9e0fc1b553e34a28, "
            "FAST25-release/traces/conversation_trace.jsonl (12,031 lines, fields input_length, output_length). "
            "FAST25-release/README.md table: 'Conversation | 12,031 requests | Avg input length 12,035 | Avg output "
            "length 343'; the file reproduces these."
        ),
    ),
    "mooncake-synthetic": dict(
        src="mooncake-synthetic",
        description=(
            "Long-context mix built by the Mooncake authors from public datasets (Mooncake FAST'25 synthetic "
            "trace): many long prompts (median 11.6k) with short outputs plus short-prompt requests with longer "
            "outputs, so the per-step context is bimodal. Not production traffic."
        ),
        source=(
            "github kvcache-ai/Mooncake @ 3b5a594133958449a1feaf1c9e0fc1b553e34a28, "
            "FAST25-release/traces/synthetic_trace.jsonl (3,993 lines). README table: 'Synthetic | 3,993 | "
            "15,325 | 149 | Poisson'; the file reproduces these."
        ),
    ),
}


def tstr(s):
    return json.dumps(s, ensure_ascii=False)


def main():
    import hashlib

    files = {
        "sharegpt": "sharegpt_8k_filtered_stats_llama2_tokenizer.csv",
        "azure-conversation": "azure2023_conv.csv",
        "azure-code": "azure2023_code.csv",
        "arxiv-summarization": "arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv",
        "mooncake-conversation": "mooncake_conversation.jsonl",
        "mooncake-synthetic": "mooncake_synthetic.jsonl",
    }
    lines = [
        "# Per-decode-step context-length distributions (KV length seen by a decoding sequence),",
        "# computed from public per-request traces. Method, caveats and commands: benchmarks/contexts/README.md.",
        "# `costmodel serve --context-mix NAME`; `costmodel.context_distribution(NAME)`.",
        "# bins = mean context of the decode steps falling in each bin (tokens);",
        "# bin_lower_edges = lower edge of each bin, last bin open-ended; shares sum to 1.",
        "",
    ]
    for name, m in META.items():
        c = C[m["src"]]
        sha = hashlib.sha256(open(HERE / "data" / files[m["src"]], "rb").read()).hexdigest()
        shares = [round(x, 6) for x in c["shares"]]
        i = max(range(len(shares)), key=lambda k: shares[k])
        shares[i] = round(shares[i] + (1.0 - sum(shares)), 6)
        assert abs(sum(shares) - 1) < 1e-6
        bins = [int(round(x)) for x in c["bin_mean_context"]]
        edges = c["bin_edges"][:-1]
        src = m["source"].replace("sha256 of extracted file c.f. REPORT.md", f"sha256 {sha}")
        if "sha256" not in src:
            src += f" sha256 of the file: {sha}."
        q = c["step_context_p10_p50_p90_p99"]
        deriv = COMMON_DERIV + (
            f" Result: {c['n_requests']} requests, {c['n_decode_steps']} decode steps, per-step context mean "
            f"{c['step_context_mean']:.1f}, p10/p50/p90/p99 = {q[0]:.0f}/{q[1]:.0f}/{q[2]:.0f}/{q[3]:.0f} tokens."
        )
        lines += [
            f"[distributions.{name}]",
            f"description = {tstr(m['description'])}",
            f"bins = {bins}",
            f"shares = {shares}",
            f"bin_lower_edges = {edges}",
            f"prompt_tokens_mean = {c['prompt_mean']:.1f}",
            f"output_tokens_mean = {c['output_mean']:.1f}",
            f"step_context_mean = {c['step_context_mean']:.1f}",
            f"n_requests = {c['n_requests']}",
            f"source = {tstr(src)}",
            f"derivation = {tstr(deriv)}",
            "",
        ]
    text = "\n".join(lines)
    (HERE.parent.parent / "data" / "contexts.toml").write_text(text)
    d = tomllib.loads(text)
    for k, v in d["distributions"].items():
        s = sum(v["shares"])
        assert abs(s - 1) < 1e-6 and len(v["bins"]) == len(v["shares"]) == len(v["bin_lower_edges"])
        print(k, len(v["bins"]), s, sum(a * b for a, b in zip(v["bins"], v["shares"])), v["step_context_mean"])


main()

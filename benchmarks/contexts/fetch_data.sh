#!/bin/sh
# Extract the exact source files used (from git snapshots; equivalent raw URLs given).
# Usage: sh benchmarks/contexts/fetch_data.sh   (writes benchmarks/contexts/data/, git-ignored)
set -e
cd "$(dirname "$0")"
mkdir -p data && cd data
get() { # repo commit path out
  curl -sSfL "https://raw.githubusercontent.com/$1/$2/$3" -o "$4"
}
get Azure/AzurePublicDataset b469a113cedca53ddc3bdea71a143dc4b7d8700c data/AzureLLMInferenceTrace_conv.csv azure2023_conv.csv
get Azure/AzurePublicDataset b469a113cedca53ddc3bdea71a143dc4b7d8700c data/AzureLLMInferenceTrace_code.csv azure2023_code.csv
get microsoft/sarathi-serve 72339db5b120614033b317880ad3a05a5e4c9415 data/processed_traces/sharegpt_8k_filtered_stats_llama2_tokenizer.csv sharegpt_8k_filtered_stats_llama2_tokenizer.csv
get microsoft/vidur 7d47513363ec447a741ac5e47241580b47724fbf data/processed_traces/arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv
get kvcache-ai/Mooncake 3b5a594133958449a1feaf1c9e0fc1b553e34a28 FAST25-release/traces/conversation_trace.jsonl mooncake_conversation.jsonl
get kvcache-ai/Mooncake 3b5a594133958449a1feaf1c9e0fc1b553e34a28 FAST25-release/traces/synthetic_trace.jsonl mooncake_synthetic.jsonl
sha256sum *

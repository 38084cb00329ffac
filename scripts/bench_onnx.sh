#!/usr/bin/env bash
# Load+plan time of a GPT-2-small-sized ONNX export (124M parameters, 12
# layers), without weights (external data, file deleted) and with its ~500 MB
# of weights embedded in the graph proto. Prints the median of RUNS runs.
# Usage: scripts/bench_onnx.sh [BUILD_DIR] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${2:-5}
dir="$build/bench_onnx"
mkdir -p "$dir"
if [[ ! -f "$dir/gpt2_small_noweights.onnx" || ! -f "$dir/gpt2_small.onnx" ]]; then
  echo "exporting GPT-2 small to $dir (once)..." >&2
  /usr/bin/python3 scripts/make_onnx_samples.py --gpt2-small "$dir/gpt2_small.onnx" 2>/dev/null
fi
args=(--dim batch=8 --dim seq=1024 --precision bf16-mixed --budget 40GiB -o "$dir/plan.json")
for model in gpt2_small_noweights gpt2_small; do
  file="$dir/$model.onnx"
  times=()
  for ((i = 0; i < runs; i++)); do
    start=$(date +%s%N)
    "$build/ckptplan" plan "$file" "${args[@]}" >/dev/null
    end=$(date +%s%N)
    times+=("$(((end - start) / 1000000))")
  done
  median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  size=$(stat -c %s "$file")
  printf '%-22s %10d bytes  load+plan median %d.%03d s over %d runs\n' "$model" "$size" \
    $((median / 1000)) $((median % 1000)) "$runs"
done
"$build/ckptplan" plan "$dir/gpt2_small_noweights.onnx" "${args[@]}" | head -8

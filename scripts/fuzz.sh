#!/usr/bin/env bash
# Builds the libFuzzer harnesses in tests/fuzz with clang (ASan + UBSan) and
# runs each for a fixed time (or number of runs), one at a time, at low priority.
#   scripts/fuzz.sh [SECONDS_PER_FUZZER] [FUZZER ...]
# Defaults: 600 s each, every tests/fuzz/*_fuzzer.cc. FUZZ_RUNS=N stops each
# fuzzer after N executions instead (within the time limit); FUZZ_NICE sets
# the priority (default 15). Corpora grow in
# build-fuzz/corpus/NAME (seeded from sample_graphs/, tests/bad_inputs/ and
# tests/fuzz/seeds/); logs go to build-fuzz/logs/NAME.log; a crash, leak or
# hang (a unit over 60 s: generous, as fuzzing runs at low priority on shared
# machines) stops the run and leaves its input in build-fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"
shift || true
fuzzers=("$@")
if ((${#fuzzers[@]} == 0)); then
  for source in tests/fuzz/*_fuzzer.cc; do fuzzers+=("$(basename "$source" .cc)"); done
fi

CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCKPTPLAN_FUZZ=ON >/dev/null
cmake --build build-fuzz -j2 --target "${fuzzers[@]}"

# Seeds per fuzzer: directories and single files copied into its corpus.
seeds_for() {
  case "$1" in
    json_graph_fuzzer) echo sample_graphs/*.json tests/bad_inputs/graphs tests/fuzz/seeds/graph ;;
    plan_reader_fuzzer) echo tests/fuzz/seeds/plan tests/bad_inputs/plans ;;
    size_fuzzer) echo tests/fuzz/seeds/size ;;
    onnx_fuzzer) echo tests/fuzz/seeds/onnx tests/bad_inputs/onnx ;;
    baseline_fuzzer) echo tests/fuzz/seeds/baseline tests/bad_inputs/baselines ;;
    check_config_fuzzer) echo tests/fuzz/seeds/check_config tests/bad_inputs/configs ;;
  esac
}

# Dictionary per fuzzer: JSON tokens for the JSON readers.
dict_for() {
  case "$1" in
    json_graph_fuzzer | plan_reader_fuzzer | baseline_fuzzer | check_config_fuzzer) echo "-dict=tests/fuzz/json.dict" ;;
    onnx_fuzzer) echo "-dict=tests/fuzz/onnx.dict" ;;
  esac
}

# Longest input: ONNX seeds (weights stripped) run to 33 KB; plan, baseline
# seeds to 8 KB, plan and config seeds to 3 KB (shorter inputs run faster).
max_len_for() {
  case "$1" in
    onnx_fuzzer) echo 65536 ;;
    json_graph_fuzzer) echo 16384 ;;
    baseline_fuzzer) echo 8192 ;;
    *) echo 4096 ;;
  esac
}

mkdir -p build-fuzz/logs build-fuzz/artifacts
status=0
for fuzzer in "${fuzzers[@]}"; do
  corpus="build-fuzz/corpus/$fuzzer"
  mkdir -p "$corpus"
  for seed in $(seeds_for "$fuzzer"); do
    [[ -e "$seed" ]] || continue
    if [[ -d "$seed" ]]; then
      find "$seed" -maxdepth 1 -type f ! -name '*.md' -exec cp -n {} "$corpus/" \;
    else
      cp -n "$seed" "$corpus/"
    fi
  done
  log="build-fuzz/logs/$fuzzer.log"
  echo "fuzz: $fuzzer for ${seconds}s (log $log)"
  # -rss_limit_mb: 2 GiB, so a memory blow-up is a reported failure, not an OOM.
  # shellcheck disable=SC2046
  runs=()
  [[ -n "${FUZZ_RUNS:-}" ]] && runs=(-runs="$FUZZ_RUNS")
  if nice -n "${FUZZ_NICE:-15}" "build-fuzz/$fuzzer" "$corpus" $(dict_for "$fuzzer") "${runs[@]}" \
      -max_total_time="$seconds" -timeout=60 -rss_limit_mb=2048 -max_len="$(max_len_for "$fuzzer")" \
      -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$fuzzer-" \
      >"$log" 2>&1; then
    # -a: the log can hold bytes of mutated inputs that libonnx echoed.
    grep -a -E '^stat::number_of_executed_units|^stat::average_exec_per_sec|^stat::peak_rss_mb' "$log" |
      sed "s/^/fuzz: $fuzzer: /"
  else
    echo "fuzz: $fuzzer FAILED; see $log" >&2
    tail -n 40 "$log" >&2
    status=1
  fi
done
exit "$status"

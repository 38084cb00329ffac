#!/usr/bin/env bash
# Quality benchmark (issue 4): total step cost of each strategy relative to
# ckptplan's default plan, and to the exhaustive optimum on small graphs, at
# budgets from 40% to 90% of each graph's save-all peak; then the lowest peak
# each search reaches. Exits 1 when a "done when" check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2 --target ckptplan_bench_quality >/dev/null
exec build/ckptplan_bench_quality sample_graphs

#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite. `.ci/run` calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --tests
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure

# The same suite under AddressSanitizer + UndefinedBehaviorSanitizer (any
# report fails the test). Only the test binary and ckptplan are built here,
# to keep CI lean; tests that drive slow external tools (python, chromium)
# may skip themselves when CKPTPLAN_SANITIZER_RUN is set.
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Release -DCKPTPLAN_SANITIZE=ON
cmake --build build-asan -j"$(nproc)" --target ckptplan_tests
# Its own TMPDIR, so its scratch files never meet another run's.
mkdir -p build-asan/tmp
TMPDIR="$PWD/build-asan/tmp" CKPTPLAN_SANITIZER_RUN=1 \
  ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure

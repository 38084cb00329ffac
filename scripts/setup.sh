#!/usr/bin/env bash
# Installs what ckptplan needs on Debian 12, as root. Idempotent: apt runs only
# when a package is missing. `--tests` adds what the test suite needs.
set -euo pipefail
packages=(build-essential cmake pkg-config libonnx-dev libprotobuf-dev protobuf-compiler
  libcli11-dev nlohmann-json3-dev libspdlog-dev doctest-dev libssl-dev libboost-graph-dev)
if [[ "${1:-}" == "--tests" ]]; then
  packages+=(python3 python3-jsonschema python3-onnx python3-torch python3-torchvision chromium clang libxml2-utils
    libclang-rt-14-dev)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

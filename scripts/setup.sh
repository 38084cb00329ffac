#!/usr/bin/env bash
# Installs what ckptplan needs on Debian 12, as root. Idempotent: apt runs only
# when a package is missing. `--tests` adds what the test suite needs.
# The PyTorch side (python/ckptplan_torch) is made importable by Debian's
# /usr/bin/python3 with a .pth file naming this checkout's python/ folder.
set -euo pipefail
packages=(build-essential cmake pkg-config libonnx-dev libprotobuf-dev protobuf-compiler
  libcli11-dev nlohmann-json3-dev libspdlog-dev doctest-dev libssl-dev libboost-graph-dev)
if [[ "${1:-}" == "--tests" ]]; then
  packages+=(python3 python3-jsonschema python3-onnx python3-torch python3-torchvision python3-networkx chromium
    clang libxml2-utils libclang-rt-14-dev)
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
# `import ckptplan_torch` without path edits: /usr/local/lib/python3.X/dist-packages is on
# Debian's sys.path; the file is rewritten only when its line changes.
if [[ -x /usr/bin/python3 ]]; then
  python_dir="$(cd "$(dirname "$0")/../python" && pwd)"
  site="$(/usr/bin/python3 -c 'import sys; print("/usr/local/lib/python%d.%d/dist-packages" % sys.version_info[:2])')"
  pth="$site/ckptplan_torch.pth"
  if [[ "$(cat "$pth" 2>/dev/null)" != "$python_dir" ]]; then
    mkdir -p "$site"
    echo "$python_dir" > "$pth.tmp" && mv "$pth.tmp" "$pth"
    echo "setup: $pth -> $python_dir" >&2
  fi
fi

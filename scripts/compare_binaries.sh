#!/usr/bin/env bash
# Usage: scripts/compare_binaries.sh OLD_BINARY NEW_BINARY
# Runs plan (stdout, --json, plan file) at 50/70/90% of the save-all peak and sweep with both
# binaries on sample_graphs/ (JSON and ONNX) and on generated graphs, and compares byte for
# byte. Plan files are compared without the fields the new binary may add for the Python side
# (top-level "dtype_bytes", decisions' "block"); everything else must be identical.
# Prints one DIFF line per difference and "compared N graphs; fail=0|1"; exits 1 on a difference.
set -u
old=$(realpath "$1"); new=$(realpath "$2"); w=$(mktemp -d); fail=0
cd "$(dirname "$0")/.."
"$old" generate transformer --layers 4 -o $w/t4.json >/dev/null 2>&1
"$old" generate transformer --layers 12 -o $w/gpt2.json >/dev/null 2>&1
"$old" generate transformer --layers 2 --microbatches 4 -o $w/t2x4.json >/dev/null 2>&1
"$old" generate random --layers 16 --width 10 --max-inputs 3 --min-bytes 1000 --max-bytes 100000 --seed 7 -o $w/r300.json >/dev/null
graphs=(sample_graphs/diamond.json sample_graphs/mlp.json sample_graphs/transformer_block.json
        $w/t4.json $w/gpt2.json $w/t2x4.json
        "sample_graphs/mlp.onnx --dim batch=32"
        "sample_graphs/gpt2_tiny.onnx --dim batch=2 --dim seq=64 --precision bf16-mixed"
        "sample_graphs/cnn.onnx --input-shape images:4x3x32x32 --optimizer sgd-momentum")
graphs+=($w/r300.json)
strip() {  # plan file without the fields for the Python side
  /usr/bin/python3 -c 'import json,sys
try:
    d = json.load(open(sys.argv[1]))
except ValueError:
    print(open(sys.argv[1]).read()); sys.exit()
d.pop("dtype_bytes", None)
for x in d.get("decisions", []): x.pop("block", None)
print(json.dumps(d, indent=2))' "$1"
}
compared=0
for g in "${graphs[@]}"; do
  sa=$("$old" simulate $g --json 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["peak_bytes"])' 2>/dev/null) || { echo "SKIP $g"; continue; }
  compared=$((compared + 1))
  for f in 0.5 0.7 0.9; do
    b=$(/usr/bin/python3 -c "print(int($sa*$f))")
    for bin in old new; do
      B=${!bin}; rm -f $w/$bin.plan.json
      "$B" plan $g --budget $b -o $w/$bin.plan.json > $w/$bin.out 2>&1; echo "rc=$?" >> $w/$bin.out
      [ -f $w/$bin.plan.json ] || echo none > $w/$bin.plan.json
      strip $w/$bin.plan.json > $w/$bin.plan.stripped
      "$B" plan $g --budget $b --json > $w/$bin.json 2>/dev/null
    done
    for k in out json plan.stripped; do cmp -s $w/old.$k $w/new.$k || { echo "DIFF $g $f $k"; fail=1; }; done
  done
  for bin in old new; do B=${!bin}; "$B" sweep $g --from $((sa/3)) --to $sa --steps 4 > $w/$bin.sweep 2>&1; done
  cmp -s $w/old.sweep $w/new.sweep || { echo "DIFF sweep $g"; fail=1; }
done
echo "compared $compared graphs; fail=$fail"; rm -rf $w; exit $fail

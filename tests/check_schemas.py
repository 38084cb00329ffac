#!/usr/bin/python3
"""Validates the sample graphs and fresh plan/timeline outputs against schemas/.

Usage: check_schemas.py CKPTPLAN_BINARY   (run from the source directory)
"""
import glob
import json
import subprocess
import sys
import tempfile

try:
    import jsonschema
except ImportError:
    print("SKIP: python3-jsonschema is not installed (scripts/setup.sh --tests installs it)")
    sys.exit(77)  # ctest reports it as skipped (SKIP_RETURN_CODE), never as a pass


def schema_store():
    """Every schema by its $id, so one may $ref another without a network."""
    store = {}
    for path in glob.glob("schemas/*.schema.json"):
        with open(path) as f:
            schema = json.load(f)
        store[schema["$id"]] = schema
    return store


def validate(schema_name, document, what, quiet=False):
    with open(f"schemas/{schema_name}") as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    resolver = jsonschema.RefResolver.from_schema(schema, store=schema_store())
    errors = list(jsonschema.Draft202012Validator(schema, resolver=resolver).iter_errors(document))
    for error in [] if quiet else errors:
        print(f"FAIL {what}: {error.json_path}: {error.message}")
    return len(errors)


def main():
    binary = sys.argv[1]
    failures = checked = 0
    for path in sorted(glob.glob("sample_graphs/*.json")):
        with open(path) as f:
            doc = json.load(f)
        # sample_graphs/ holds graphs only (samples_test.cc checks that too).
        failures += validate("graph.schema.json", doc, path)
        checked += 1
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([binary, "plan", "sample_graphs/transformer_block.json", "--budget", "320MiB",
                        "-o", f"{tmp}/plan.json", "--timeline", f"{tmp}/timeline.json"],
                       check=True, stdout=subprocess.DEVNULL)
        # A plan from an ONNX model records its load settings ("load").
        subprocess.run([binary, "plan", "sample_graphs/gpt2_tiny.onnx", "--dim", "batch=2", "--dim", "seq=64",
                        "--budget", "4MiB", "-o", f"{tmp}/onnx_plan.json"], check=True, stdout=subprocess.DEVNULL)
        with open(f"{tmp}/onnx_plan.json") as f:
            onnx_plan = json.load(f)
        if "load" not in onnx_plan:
            print("FAIL onnx_plan.json: no \"load\" object")
            failures += 1
        failures += validate("plan.schema.json", onnx_plan, "onnx_plan.json")
        checked += 1
        # Approximate recompute: a graph with "approx" options and a plan using them.
        with open("tests/graphs/approx_mlp.json") as f:
            failures += validate("graph.schema.json", json.load(f), "tests/graphs/approx_mlp.json")
        checked += 1
        subprocess.run([binary, "plan", "tests/graphs/approx_mlp.json", "--budget", "10.5MiB",
                        "--max-error", "1%", "-o", f"{tmp}/approx_plan.json"],
                       check=True, stdout=subprocess.DEVNULL)
        with open(f"{tmp}/approx_plan.json") as f:
            approx_plan = json.load(f)
        if not approx_plan.get("approximations"):
            print("FAIL approx_plan.json: no \"approximations\"")
            failures += 1
        failures += validate("plan.schema.json", approx_plan, "approx_plan.json")
        checked += 1
        # With a parallel layout the timeline holds each pipeline stage's under "ranks".
        subprocess.run([binary, "generate", "transformer", "--layers", "2", "--hidden", "64",
                        "--heads", "4", "--seq", "32", "--batch", "2", "--vocab", "256",
                        "-o", f"{tmp}/two_layers.json"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([binary, "simulate", f"{tmp}/two_layers.json", "--pp", "2",
                        "--microbatches", "2", "--timeline", f"{tmp}/pp_timeline.json"],
                       check=True, stdout=subprocess.DEVNULL)
        with open(f"{tmp}/pp_timeline.json") as f:
            pp_timeline = json.load(f)
        if len(pp_timeline.get("ranks", [])) != 2:
            print("FAIL pp_timeline.json: not one timeline per stage under \"ranks\"")
            failures += 1
        failures += validate("timeline.schema.json", pp_timeline, "pp_timeline.json")
        checked += 1
        for schema, name in (("plan.schema.json", "plan.json"), ("timeline.schema.json", "timeline.json")):
            with open(f"{tmp}/{name}") as f:
                failures += validate(schema, json.load(f), name)
            checked += 1
        # A fresh baseline from `check --update-baseline`, and a check config.
        subprocess.run([binary, "check", "sample_graphs/mlp.json", "sample_graphs/diamond.json",
                        "--budget", "1GiB", "--baseline", f"{tmp}/baseline.json", "--update-baseline"],
                       check=True, stdout=subprocess.DEVNULL)
        with open(f"{tmp}/baseline.json") as f:
            failures += validate("baseline.schema.json", json.load(f), "baseline.json")
        config = {"format": "ckptplan.check", "version": 1, "baseline": "memory-baseline.json",
                  "defaults": {"budget": "40GiB", "tolerance": "2%"},
                  "graphs": [{"graph": "sample_graphs/mlp.json", "key": "mlp", "budget": 1073741824,
                              "reserve": "1GiB", "tolerance": "256MiB", "no_plan": True},
                             {"graph": "sample_graphs/gpt2_tiny.onnx", "key": "gpt2",
                              "load": {"dims": {"batch": 2, "seq": 64}, "precision": "bf16-mixed"}}]}
        failures += validate("check-config.schema.json", config, "check config")
        checked += 2
    # A document that breaks the schema must be caught (the check can fail).
    broken = {"format": "ckptplan.graph", "version": 1, "tensors": [{"id": "x", "kind": "weights"}], "nodes": []}
    if validate("graph.schema.json", broken, "broken graph", quiet=True) == 0:
        print("FAIL: the graph schema accepted an unknown tensor kind")
        failures += 1
    broken_baseline = {"format": "ckptplan.baseline", "version": 1, "graphs": {"m": {"mode": "eager"}}}
    if validate("baseline.schema.json", broken_baseline, "broken baseline", quiet=True) == 0:
        print("FAIL: the baseline schema accepted an entry without figures")
        failures += 1
    # The config's "load" is the plan schema's, through a $ref between files.
    broken_config = {"format": "ckptplan.check", "version": 1,
                     "graphs": [{"graph": "m.onnx", "load": {"precision": "fp8"}}]}
    if validate("check-config.schema.json", broken_config, "broken config", quiet=True) == 0:
        print("FAIL: the check config schema accepted an unknown precision in \"load\"")
        failures += 1
    print(f"{checked - min(failures, checked)} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

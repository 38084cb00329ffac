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
    sys.exit(0)


def validate(schema_name, document, what, quiet=False):
    with open(f"schemas/{schema_name}") as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(document))
    for error in [] if quiet else errors:
        print(f"FAIL {what}: {error.json_path}: {error.message}")
    return len(errors)


def main():
    binary = sys.argv[1]
    failures = checked = 0
    for path in sorted(glob.glob("sample_graphs/*.json")):
        with open(path) as f:
            doc = json.load(f)
        if doc.get("format") != "ckptplan.graph":
            continue
        failures += validate("graph.schema.json", doc, path)
        checked += 1
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([binary, "plan", "sample_graphs/transformer_block.json", "--budget", "320MiB",
                        "-o", f"{tmp}/plan.json", "--timeline", f"{tmp}/timeline.json"],
                       check=True, stdout=subprocess.DEVNULL)
        for schema, name in (("plan.schema.json", "plan.json"), ("timeline.schema.json", "timeline.json")):
            with open(f"{tmp}/{name}") as f:
                failures += validate(schema, json.load(f), name)
            checked += 1
    # A document that breaks the schema must be caught (the check can fail).
    broken = {"format": "ckptplan.graph", "version": 1, "tensors": [{"id": "x", "kind": "weights"}], "nodes": []}
    if validate("graph.schema.json", broken, "broken graph", quiet=True) == 0:
        print("FAIL: the graph schema accepted an unknown tensor kind")
        failures += 1
    print(f"{checked - min(failures, checked)} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

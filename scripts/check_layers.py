#!/usr/bin/env python3
"""Fails when an include goes up a layer (or sideways between ingest and sim).

The layers of lib/ckptplan/, lowest first (docs/design.md). A file in layer L
may include "ckptplan/<M>/..." only for M = L or a layer below L. Tests follow
the same rule: tests/<L>/*.cc may include layer L and below, also through the
helper headers in tests/ (a helper needs every layer it includes, directly or
through another helper). apps/ sits above every layer and is not checked.

Usage: check_layers.py [--root DIR] [--stamp FILE]
  --root   the source tree (default: this script's repository)
  --stamp  written (empty) when the check passes, for the build's dependency
Exit 0 when every include goes down, 1 with one line per violation
("FILE:LINE: ..."), 2 on a tree it cannot read.
"""
import argparse
import os
import re
import sys

# Each layer and the layers directly below it; "below" is the closure.
LAYERS = {
    "base": [],
    "ir": ["base"],
    "ingest": ["ir"],
    "sim": ["ir"],
    "plan": ["ingest", "sim"],
    "emit": ["plan"],
    "ci": ["emit"],
    "cli": ["ci"],
}

LAYER_INCLUDE = re.compile(r'^\s*#\s*include\s+"ckptplan/([^/"]+)/[^"]*"')
LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^/"]+\.h)"')


def allowed(layer):
    """The layers `layer` may include: itself and everything below it."""
    seen, stack = {layer}, [layer]
    while stack:
        for lower in LAYERS[stack.pop()]:
            if lower not in seen:
                seen.add(lower)
                stack.append(lower)
    return seen


def includes(path):
    """(line number, layer or None, local helper or None) for each include."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            m = LAYER_INCLUDE.match(line)
            if m:
                yield number, m.group(1), None
                continue
            m = LOCAL_INCLUDE.match(line)
            if m:
                yield number, None, m.group(1)


def helper_needs(tests_dir):
    """For each helper header in tests/: the set of layers it needs."""
    direct = {}
    for name in sorted(os.listdir(tests_dir)):
        if name.endswith(".h"):
            direct[name] = list(includes(os.path.join(tests_dir, name)))
    needs = {}

    def resolve(name, active):
        if name in needs:
            return needs[name]
        layers = set()
        for _, layer, helper in direct.get(name, []):
            if layer:
                layers.add(layer)
            elif helper in direct and helper not in active:
                layers |= resolve(helper, active | {helper})
        needs[name] = layers
        return layers

    for name in direct:
        resolve(name, {name})
    return needs


def check_file(path, layer, shown, needs, problems):
    may = allowed(layer)
    count = 0
    for number, target, helper in includes(path):
        if target is not None:
            count += 1
            if target not in LAYERS:
                problems.append(f"{shown}:{number}: includes from 'ckptplan/{target}/', "
                                f"which is no layer (layers: {', '.join(LAYERS)})")
            elif target not in may:
                how = "sideways" if layer not in allowed(target) else "up"
                problems.append(f"{shown}:{number}: layer '{layer}' includes layer "
                                f"'{target}', which is {how} from it (an include may go only "
                                f"to: {', '.join(sorted(may))})")
        elif helper in needs:
            count += 1
            above = sorted(needs[helper] - may)
            if above:
                problems.append(f"{shown}:{number}: layer '{layer}' includes tests/{helper}, "
                                f"which needs layer(s) {', '.join(repr(a) for a in above)} "
                                f"(an include may go only to: {', '.join(sorted(may))})")
    return count


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    parser.add_argument("--stamp")
    args = parser.parse_args()
    if args.stamp and os.path.exists(args.stamp):
        os.remove(args.stamp)  # a failed check must not leave the last pass's stamp
    lib = os.path.join(args.root, "lib", "ckptplan")
    tests = os.path.join(args.root, "tests")
    if not os.path.isdir(lib):
        print(f"check_layers: {lib}: no such folder", file=sys.stderr)
        return 2
    problems, files, count = [], 0, 0
    for folder in sorted(os.listdir(lib)):
        if not os.path.isdir(os.path.join(lib, folder)):
            continue
        if folder not in LAYERS:
            problems.append(f"lib/ckptplan/{folder}: a folder that is no layer "
                            f"(add it to LAYERS in scripts/check_layers.py)")
            continue
        for name in sorted(os.listdir(os.path.join(lib, folder))):
            if name.endswith((".h", ".cc")):
                files += 1
                count += check_file(os.path.join(lib, folder, name), folder,
                                    f"lib/ckptplan/{folder}/{name}", {}, problems)
    needs = helper_needs(tests) if os.path.isdir(tests) else {}
    for layer in LAYERS:
        folder = os.path.join(tests, layer)
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            if name.endswith((".h", ".cc")):
                files += 1
                count += check_file(os.path.join(folder, name), layer,
                                    f"tests/{layer}/{name}", needs, problems)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"check_layers: {len(problems)} include(s) break the layering "
              f"(docs/design.md)", file=sys.stderr)
        return 1
    print(f"check_layers: {files} files, {count} includes, every one goes down")
    if args.stamp:
        with open(args.stamp, "w"):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

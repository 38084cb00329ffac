#!/usr/bin/env python3
"""Runs scripts/check_layers.py on small fake trees in a temp dir: a clean
tree passes and writes the stamp; an upward, a sideways, an unknown-layer and
a through-a-test-helper include each fail with FILE:LINE and both layers.

Usage: check_layers_test.py PATH/TO/check_layers.py
"""
import os
import subprocess
import sys
import tempfile

SCRIPT = sys.argv[1]
failures = []


def tree(root, files):
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)


def run(files):
    with tempfile.TemporaryDirectory() as root:
        tree(root, files)
        stamp = os.path.join(root, "stamp")
        p = subprocess.run([sys.executable, SCRIPT, "--root", root, "--stamp", stamp],
                           capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr, os.path.exists(stamp)


def expect(name, files, code, parts, stamp):
    got, out, wrote = run(files)
    ok = got == code and wrote == stamp and all(part in out for part in parts)
    if not ok:
        failures.append(f"{name}: exit {got} (want {code}), stamp {wrote} (want {stamp}), "
                        f"output:\n{out}")
    print(f"{'ok  ' if ok else 'FAIL'} {name}")


CLEAN = {
    "lib/ckptplan/base/size.h": "#include <string>\n",
    "lib/ckptplan/ir/graph.h": '#include "ckptplan/base/size.h"\n',
    "lib/ckptplan/sim/simulator.cc": '#include "ckptplan/sim/simulator.h"\n'
                                     '#include "ckptplan/ir/graph.h"\n',
    "lib/ckptplan/sim/simulator.h": '#include "ckptplan/ir/graph.h"\n',
    "lib/ckptplan/plan/planner.cc": '#include "ckptplan/sim/simulator.h"\n'
                                    '#include "ckptplan/ingest/loader.h"\n',
    "tests/ir_graphs.h": '#include "ckptplan/ir/graph.h"\n',
    "tests/json_graphs.h": '#include "ckptplan/ingest/loader.h"\n#include "ir_graphs.h"\n',
    "tests/sim/simulator_test.cc": '#include "ckptplan/sim/simulator.h"\n#include "ir_graphs.h"\n',
}

expect("a tree whose includes go down passes", CLEAN, 0, ["every one goes down"], True)
expect("an upward include fails naming file, line and both layers",
       {**CLEAN, "lib/ckptplan/sim/regions.cc":
        '#include "ckptplan/sim/simulator.h"\n\n#include "ckptplan/plan/planner.h"\n'},
       1, ["lib/ckptplan/sim/regions.cc:3: layer 'sim' includes layer 'plan', which is up"],
       False)
expect("ingest and sim are siblings: a sideways include fails",
       {**CLEAN, "lib/ckptplan/ingest/loader.h": '#include "ckptplan/sim/simulator.h"\n'},
       1, ["lib/ckptplan/ingest/loader.h:1: layer 'ingest' includes layer 'sim', "
           "which is sideways"], False)
expect("an include from a folder that is no layer fails",
       {**CLEAN, "lib/ckptplan/ir/graph.cc": '#include "ckptplan/util/x.h"\n'},
       1, ["lib/ckptplan/ir/graph.cc:1: includes from 'ckptplan/util/'"], False)
expect("a test reaching up through a helper header fails",
       {**CLEAN, "tests/sim/regions_test.cc": '#include "json_graphs.h"\n'},
       1, ["tests/sim/regions_test.cc:1: layer 'sim' includes tests/json_graphs.h, "
           "which needs layer(s) 'ingest'"], False)
expect("a test including its layer's code directly above fails",
       {**CLEAN, "tests/ir/graph_test.cc": '#include "ckptplan/sim/simulator.h"\n'},
       1, ["tests/ir/graph_test.cc:1: layer 'ir' includes layer 'sim', which is up"], False)

if failures:
    print("\n".join(failures), file=sys.stderr)
    sys.exit(1)

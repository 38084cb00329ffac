"""python3 -m ckptplan_torch export|apply

  export --model SPEC -o graph.json [--optimizer adam] [--seed 0] [--approximations]
      Writes the graph of one training step of the model; with
      --approximations, each linear node a plan can re-run gets the measured
      errors, costs and memory of its low-rank re-runs (the "approx" node
      field: workspace_bytes and factor_bytes are the re-run's temporaries
      and the basis it keeps, which the plan's peak counts).
  apply --model SPEC --plan plan.json [--measure] [--tolerance PERCENT]
      Runs training steps with the plan applied (its recomputes and its
      offloads: host copies in numpy buffers on CPU, pinned buffers and a
      side stream on CUDA, unvalidated). With --measure: prints the
      predicted and measured peak and the bit-for-bit check against the
      unplanned eager step, and fails when the measured peak exceeds the
      prediction by more than the tolerance (default 1%). A plan with
      approximations: the loss and buffers are checked bit for bit, the
      gradients' measured relative error is printed beside the plan's
      estimate, and the step time beside the same plan recomputed exactly.

SPEC is FILE.py:FUNCTION or package.module:FUNCTION (for example
ckptplan_torch.zoo:resnet18); FUNCTION() returns (model, example_inputs) and
model(*example_inputs) returns the scalar loss.

Exit codes: 0 success; 2 usage; 3 bad input (unreadable model or plan, a
plan that does not belong to this model, or one that cannot be applied as it
stands: it recomputes a random op); 4 the measured peak exceeds the
prediction by more than the tolerance; 5 the loss, a gradient, a parameter
or a buffer differs from the eager step's (with approximations: the loss or
a buffer differs, or the gradient error exceeds the plan's max_error).
"""

import argparse
import importlib
import json
import sys
import warnings

EXIT_OK, EXIT_USAGE, EXIT_INPUT, EXIT_OVER, EXIT_DIFFERENT = 0, 2, 3, 4, 5


def load_factory(spec):
    path, _, func = spec.rpartition(":")
    if not path or not func:
        raise ValueError("--model must be FILE.py:FUNCTION or MODULE:FUNCTION, got %r" % spec)
    if path.endswith(".py") or "/" in path:
        from . import export
        return export.load_factory(spec)
    return getattr(importlib.import_module(path), func)


def _make(spec, seed):
    import torch
    torch.manual_seed(seed)
    model, inputs = load_factory(spec)()
    return model, tuple(inputs)


def cmd_export(args):
    from . import export
    model, inputs = _make(args.model, args.seed)
    graph = export.export_graph(model, inputs, optimizer=args.optimizer,
                                approximations=args.approximations)
    export.write_json(graph, args.output)
    approximable = sum(1 for n in graph["nodes"] if n.get("approx"))
    print("ckptplan_torch export: %d nodes, %d tensors%s -> %s" %
          (len(graph["nodes"]), len(graph["tensors"]),
           ", %d linear nodes with approximate options" % approximable
           if args.approximations else "", args.output))
    return EXIT_OK


def _mib(n):
    return "%.2f MiB" % (n / 2.0 ** 20)


def _offloads(count, host_bytes=None):
    if not count:
        return ""
    held = "" if host_bytes is None else ", host peak %d B (%s)" % (host_bytes, _mib(host_bytes))
    return ", offloads %d to host%s" % (count, held)


def cmd_apply(args):
    from . import apply, measure
    model, inputs = _make(args.model, args.seed)
    apply.load_plan(args.plan)  # a bad file fails before the model is traced
    plan = args.plan
    if not args.measure:
        import torch
        opt = measure.export.make_optimizer(args.optimizer, model.parameters(), 1e-3)
        step = apply.apply_plan(model, plan)
        loss = step(*inputs)
        loss.backward()
        opt.step()
        dropped, rerun = step.recompute_summary()
        print("ckptplan_torch apply: loss %.6f; plan recomputes %d tensors (%d nodes re-run)%s" %
              (loss.item(), dropped, rerun, _offloads(step.offloaded_count())))
        print("(peak not measured: add --measure)")
        return EXIT_OK
    r = measure.measure_plan(model, inputs, plan, optimizer=args.optimizer,
                             timed_steps=args.steps)
    if args.json:
        json.dump(r, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print("device %s; plan recomputes %d tensors (%d nodes re-run)%s" %
              (r["device"], r["dropped_tensors"], r["nodes_rerun"],
               _offloads(r["offloaded_tensors"], r["host_peak_bytes"])))
        print("step peak: predicted %d B (%s), measured %d B (%s), %+.4f%%; eager %d B (%s)" %
              (r["predicted_bytes"], _mib(r["predicted_bytes"]), r["measured_bytes"],
               _mib(r["measured_bytes"]), r["error_percent"], r["eager_bytes"],
               _mib(r["eager_bytes"])))
        if args.steps:
            print("step time: eager %.1f ms, planned %.1f ms (x%.3f; medians of %d); "
                  "predicted recompute overhead %.1f%%" %
                  (1e3 * r["eager_step_s"], 1e3 * r["planned_step_s"], r["step_time_ratio"],
                   args.steps, r["predicted_overhead_percent"]))
        if "gradient_error" in r:
            _print_approximate(r, args.steps)
        elif r["differences"]:
            print("NOT bit-equal to the eager step: %s" % "; ".join(r["differences"][:10]))
        else:
            print("loss, gradients, parameters and buffers bit-equal to the eager step")
    if r["measured_bytes"] > r["predicted_bytes"] * (1.0 + args.tolerance / 100.0):
        print("FAIL: measured peak is %.4f%% over the prediction (tolerance %g%%)" %
              (r["error_percent"], args.tolerance), file=sys.stderr)
        return EXIT_OVER
    if r["differences"]:
        print("FAIL: the planned step is not bit-equal to the eager step", file=sys.stderr)
        return EXIT_DIFFERENT
    if r.get("max_error") is not None and r["gradient_error"] > r["max_error"]:
        print("FAIL: measured gradient error %.4g exceeds the plan's max_error %.4g" %
              (r["gradient_error"], r["max_error"]), file=sys.stderr)
        return EXIT_DIFFERENT
    return EXIT_OK


def _print_approximate(r, steps):
    def fmt(x):
        return "-" if x is None else "%.4g" % x
    print("approximate recompute: %d linear nodes; gradient error: measured %s, "
          "estimated %s, max_error %s" % (r["approximations"], fmt(r["gradient_error"]),
                                          fmt(r["estimated_error"]), fmt(r["max_error"])))
    print("factor bases kept between steps: %d B (resident in the measured peak; the "
          "prediction counts them as the graph's factor_bytes)" % r["factor_bytes"])
    if steps:
        print("against exact recompute of the same plan: step %.1f ms vs %.1f ms (x%.3f), "
              "recompute %.1f ms vs %.1f ms (x%.3f; medians of %d)" %
              (1e3 * r["planned_step_s"], 1e3 * r["exact_step_s"],
               r["planned_step_s"] / r["exact_step_s"] if r["exact_step_s"] else 0.0,
               1e3 * r["recompute_s"], 1e3 * r["exact_recompute_s"],
               r["recompute_s"] / r["exact_recompute_s"] if r["exact_recompute_s"] else 0.0,
               steps))
    if r["differences"]:
        print("NOT bit-equal to the eager step: %s" % "; ".join(r["differences"][:10]))
    else:
        print("loss and buffers bit-equal to the eager step")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m ckptplan_torch",
                                     description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help="write the graph of one training step")
    ap = sub.add_parser("apply", help="run (and with --measure, check) a plan")
    for p in (ex, ap):
        p.add_argument("--model", required=True, help="FILE.py:FUNCTION or MODULE:FUNCTION")
        p.add_argument("--optimizer", default="adam", choices=["adam", "adamw", "sgd"])
        p.add_argument("--seed", type=int, default=0)
    ex.add_argument("-o", "--output", required=True)
    ex.add_argument("--approximations", action="store_true",
                    help="measure low-rank re-run options of the linear nodes")
    ap.add_argument("--plan", required=True)
    ap.add_argument("--measure", action="store_true",
                    help="measure the step's peak and compare with the eager step")
    ap.add_argument("--tolerance", type=float, default=1.0,
                    help="percent the measured peak may exceed the prediction (default 1)")
    ap.add_argument("--steps", type=int, default=3, help="timed steps for the step times")
    ap.add_argument("--json", action="store_true", help="--measure's figures as JSON")
    args = parser.parse_args(argv)
    from .apply import PlanError
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*TypedStorage.*")
            return cmd_export(args) if args.command == "export" else cmd_apply(args)
    except (PlanError, ValueError, OSError, json.JSONDecodeError) as e:
        print("ckptplan_torch %s: %s" % (args.command, e), file=sys.stderr)
        return EXIT_INPUT


if __name__ == "__main__":
    sys.exit(main())

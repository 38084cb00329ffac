// ckptplan: flags in, one library call, exit code out.
#include <cstdlib>
#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/cfg/env.h>
#include <spdlog/spdlog.h>

#include "ckptplan/ci/check.h"
#include "ckptplan/cli/commands.h"
#include "ckptplan/cli/distributed.h"
#include "ckptplan/cli/flags.h"
#include "ckptplan/base/console.h"
#include "ckptplan/base/errors.h"
#include "ckptplan/base/size.h"
#include "ckptplan/plan/sweep.h"

namespace {

using namespace ckptplan;

// Sizes are parsed after CLI11 so that errors carry our wording and exit code.
struct SizeFlags {
  std::string budget, reserve, tolerance;
};

void AddCommon(CLI::App* command, CommonOptions* options, SizeFlags* sizes) {
  command->add_option("graph", options->graph_path, "Graph file: JSON graph format v1 or .onnx")
      ->required();
  AddLoadFlags(command, &options->load);
  command->add_option("--reserve", sizes->reserve,
                      "Bytes held back all step (e.g. 1GiB): CUDA context, fragmentation");
  command->add_flag("--json", options->json, "Print the summary as JSON on stdout");
  command->add_option("--timeline", options->timeline_path,
                      "Write the memory timeline (one row per step) to this JSON file");
  command->add_option("--report", options->report_path,
                      "Write a self-contained HTML memory report to this file");
  command->add_option("--trace", options->trace_path,
                      "Write a Chrome Trace Event / Perfetto JSON trace to this file");
  command->add_option("--timeline-csv", options->timeline_csv_path,
                      "Write the memory timeline (one row per step) to this CSV file");
  command->add_option("--top", options->top, "Tensors to list at the peak")->capture_default_str();
}

// The parallel layout (docs/distributed.md); --bucket-cap is a size, parsed
// after CLI11 like the others.
void AddParallel(CLI::App* command, ParallelLayout* l, std::string* bucket_cap) {
  const char* group = "Parallel layout (docs/distributed.md)";
  l->field_name = LayoutFlagName;  // messages name the flags
  command->add_option("--dp", l->dp, "Data-parallel ranks")->group(group);
  command->add_option("--zero", l->zero, "ZeRO stage: 0 DDP, 1 optimizer state, 2 +gradients, "
                      "3 +parameters (FSDP full shard)")->group(group);
  command->add_option("--zero-partition", l->zero_partition,
                      "flat (DeepSpeed/FSDP) or params (ZeroRedundancyOptimizer, --zero 1)")
      ->group(group);
  command->add_option("--grad-buckets", l->grad_buckets,
                      "DDP buckets: copy (default) or view (gradient_as_bucket_view)")->group(group);
  command->add_option("--bucket-cap", *bucket_cap, "DDP bucket cap, e.g. 25MiB")->group(group);
  command->add_option("--tp", l->tp, "Tensor-parallel degree")->group(group);
  command->add_flag("--sp", l->sp, "Sequence parallelism with --tp")->group(group);
  command->add_option("--tp-embedding", l->tp_embedding, "vocab or replicated")->group(group);
  command->add_option("--pp", l->pp, "Pipeline stages")->group(group);
  command->add_option("--microbatches", l->microbatches, "Pipeline microbatches")->group(group);
  command->add_option("--schedule", l->schedule, "gpipe, 1f1b or interleaved")->group(group);
  command->add_option("--virtual-stages", l->virtual_stages, "Model chunks per stage (interleaved)")
      ->group(group);
  command->add_flag("--pp-free-outputs", l->pp_free_outputs,
                    "A stage frees its output's data once sent")->group(group);
}

void AddSearch(CLI::App* command, SearchFlags* flags) {
  command->add_option_function<std::string>(
      "--strategy",
      [flags](const std::string& name) {
        if (!ParseStrategy(name, &flags->strategy)) {
          std::string names;
          for (Strategy s : AllStrategies()) {
            names += (names.empty() ? "" : ", ") + std::string(ToString(s));
          }
          throw CLI::ValidationError("--strategy", "unknown strategy '" + name +
                                                       "' (expected one of " + names + ")");
        }
      },
      "ckptplan (default: best of several searches and the baselines), greedy, "
      "save-all, scope-checkpoint, sqrt-segments, knapsack");
  command->add_option("--start", flags->start, "Greedy start set: mincut or save-all")
      ->capture_default_str();
  command->add_option("--policy", flags->policy_path,
                      "Recompute policy file: op names the min-cut may recompute, one a line "
                      "('+default' adds the built-in list)");
  command->add_option("--recomputable-ops", flags->recomputable_ops,
                      "Comma-separated op names added to the recompute policy (e.g. matmul); random ops are never recomputed");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ckptplan: plans activation checkpointing to fit a peak-memory budget"};
  app.set_version_flag("--version", "ckptplan " CKPTPLAN_VERSION);
  app.require_subcommand(1);
  app.fallthrough();  // -v works before or after the subcommand
  int verbosity = 0;
  app.add_flag("-v,--verbose", verbosity, "More log output on stderr (-v info, -vv debug, -vvv trace)");

  PlanOptions plan;
  SizeFlags plan_sizes;
  CLI::App* plan_cmd = app.add_subcommand("plan", "Choose tensors to recompute so the peak fits");
  AddCommon(plan_cmd, &plan, &plan_sizes);
  plan_cmd->add_option("--budget", plan_sizes.budget, "Peak memory budget, e.g. 40GiB")
      ->required();
  plan_cmd->add_option("-o,--output", plan.output_path, "Write the plan file here");
  AddSearch(plan_cmd, &plan);
  std::string plan_bucket_cap, simulate_bucket_cap;
  AddParallel(plan_cmd, &plan.layout, &plan_bucket_cap);
  plan_cmd->add_flag("--pp-plan-all-microbatches", plan.pp_plan_all_microbatches,
                     "1F1B: search each stage's plan on every microbatch, not on the warm-up "
                     "+ 3 that hold the same situations")
      ->group("Parallel layout (docs/distributed.md)");
  // Hidden (empty group): debugging and benchmarks.
  plan_cmd->add_option("--planner", plan.planner, "incremental or reference")->group("");
  plan_cmd->add_flag("--timings", plan.timings, "Print timings to stderr")->group("");
  std::string host_link, host_budget;
  double compute_rate = 0;
  plan_cmd->add_option("--host-link", host_link,
                       "Offload: device-host copy rate per direction, e.g. 25GB/s (default: "
                       "the --device preset's, when --device is given)");
  plan_cmd->add_option("--host-budget", host_budget, "Offload: host bytes offloads may hold");
  std::string max_error;
  plan_cmd->add_option("--max-error", max_error,
                       "Approximate recompute: bound on the estimated relative gradient error, "
                       "e.g. 1% or 0.01 (default 0: exact plans)");
  plan_cmd->add_option("--compute-rate", compute_rate,
                       "Offload: FLOP/s timing nodes without time_us (default: the device's)")
      ->check(CLI::PositiveNumber);

  SweepOptions sweep;
  SizeFlags sweep_sizes;
  std::string sweep_from, sweep_to, sweep_budgets;
  int sweep_steps = 0;
  CLI::App* sweep_cmd =
      app.add_subcommand("sweep", "Plan a range of budgets: the memory / recompute trade-off");
  AddCommon(sweep_cmd, &sweep, &sweep_sizes);
  AddSearch(sweep_cmd, &sweep);
  sweep_cmd->add_option("--from", sweep_from, "Smallest budget, e.g. 20GiB");
  sweep_cmd->add_option("--to", sweep_to, "Largest budget, e.g. 80GiB");
  sweep_cmd->add_option("--steps", sweep_steps, "Budgets from --from to --to, evenly spaced");
  sweep_cmd->add_option("--budgets", sweep_budgets, "Comma-separated budgets, e.g. 20GiB,40GiB");
  bool search_parallel = false;
  int search_gpus = 0;
  std::string search_budget;
  sweep_cmd->add_flag("--search-parallel", search_parallel,
                      "List the parallel layouts of --gpus ranks that fit --budget per rank");
  sweep_cmd->add_option("--gpus", search_gpus, "Ranks for --search-parallel");
  sweep_cmd->add_option("--budget", search_budget, "Budget per rank for --search-parallel");

  SimulateOptions simulate;
  SizeFlags simulate_sizes;
  CLI::App* simulate_cmd =
      app.add_subcommand("simulate", "Show where memory goes in one training step");
  AddCommon(simulate_cmd, &simulate, &simulate_sizes);
  simulate_cmd->add_option("--plan", simulate.plan_path, "Apply this plan file");
  AddParallel(simulate_cmd, &simulate.layout, &simulate_bucket_cap);

  GenerateOptions generate;
  CLI::App* generate_cmd =
      app.add_subcommand("generate", "Write a synthetic training graph as graph JSON");
  generate_cmd->require_subcommand(1);
  CLI::App* transformer_cmd =
      generate_cmd->add_subcommand("transformer", "GPT-2-style decoder stack, M microbatches");
  TransformerOptions& t = generate.transformer;
  transformer_cmd->add_option("--layers", t.layers, "Decoder layers")->capture_default_str();
  transformer_cmd->add_option("--microbatches", t.microbatches, "Forward/backward passes")
      ->capture_default_str();
  transformer_cmd->add_option("--batch", t.batch, "Sequences per microbatch")->capture_default_str();
  transformer_cmd->add_option("--seq", t.seq, "Tokens per sequence")->capture_default_str();
  transformer_cmd->add_option("--hidden", t.hidden, "Model width")->capture_default_str();
  transformer_cmd->add_option("--heads", t.heads, "Attention heads")->capture_default_str();
  transformer_cmd->add_option("--vocab", t.vocab, "Vocabulary size")->capture_default_str();
  transformer_cmd->add_option("-o,--output", generate.output_path, "Graph file to write")
      ->required();
  CLI::App* random_cmd =
      generate_cmd->add_subcommand("random", "Random layered DAG with an autograd-style backward");
  RandomGraphOptions& r = generate.random;
  random_cmd->add_option("--seed", r.seed, "Random seed")->capture_default_str();
  random_cmd->add_option("--layers", r.layers, "Forward layers")->capture_default_str();
  random_cmd->add_option("--width", r.width, "Nodes per layer")->capture_default_str();
  random_cmd->add_option("--max-inputs", r.max_inputs, "Activation inputs per node")
      ->capture_default_str();
  random_cmd->add_option("--min-bytes", r.min_bytes, "Smallest activation")->capture_default_str();
  random_cmd->add_option("--max-bytes", r.max_bytes, "Largest activation")->capture_default_str();
  random_cmd->add_option("-o,--output", generate.output_path, "Graph file to write")->required();
  ExportOptions export_options;
  CLI::App* export_cmd = app.add_subcommand(
      "export", "Write a plan in the terms of another framework (rounding where it must)");
  export_cmd->add_option("plan", export_options.plan_path, "Plan file from `ckptplan plan`")
      ->required();
  export_cmd->add_option_function<std::string>(
      "--to",
      [&export_options](const std::string& name) {
        if (!ParseExportTarget(name, &export_options.target)) {
          throw CLI::ValidationError("--to", "unknown target '" + name +
                                                 "' (expected pytorch-sac, jax, megatron, "
                                                 "torchtitan or deepspeed)");
        }
      },
      "pytorch-sac, jax, megatron, torchtitan or deepspeed")
      ->required();
  export_cmd->add_option("--graph", export_options.graph_path,
                         "Graph the plan was made on (default: the file the plan names)");
  export_cmd->add_option("-o,--output", export_options.output_path,
                         "Write here (default: stdout, with the report on stderr)");
  AddLoadFlags(export_cmd, &export_options.load);  // override the plan's recorded settings

  CheckOptions check;
  LoadFlags check_load;
  SizeFlags check_sizes;
  bool check_no_plan = false;
  CLI::App* check_cmd = app.add_subcommand(
      "check", "CI gate: fail when a graph's peak is over budget or grew over its baseline");
  check_cmd->add_option("graphs", check.graph_paths, "Graph files to check");
  check_cmd->add_option("--budget", check_sizes.budget, "Peak memory budget, e.g. 40GiB");
  check_cmd->add_option("--reserve", check_sizes.reserve, "Bytes held back all step, e.g. 1GiB");
  check_cmd->add_option("--tolerance", check_sizes.tolerance,
                        "Growth over the baseline allowed: 2% or 256MiB (default 0)");
  check_cmd->add_option("--baseline", check.baseline_path, "Baseline file to compare with");
  check_cmd->add_flag("--update-baseline", check.update_baseline,
                      "Record the current figures in the baseline file");
  check_cmd->add_flag("--no-plan", check_no_plan,
                      "Check the save-all simulation instead of the plan");
  check_cmd->add_option("--config", check.config_path,
                        "JSON file listing graphs with their own settings");
  check_cmd->add_option_function<std::string>(
      "--annotate",
      [&check](const std::string& name) {
        if (name == "github") {
          check.annotate = Annotations::kGithub;
        } else if (name == "none") {
          check.annotate = Annotations::kNone;
        } else {
          throw CLI::ValidationError("--annotate", "unknown format '" + name +
                                                       "' (expected github or none)");
        }
      },
      "github: workflow commands on stderr, job summary to $GITHUB_STEP_SUMMARY (the default "
      "when GITHUB_ACTIONS=true); none: neither");
  check_cmd->add_option("--junit", check.junit_path, "Write a JUnit XML report here");
  check_cmd->add_option("--top", check.top, "Grown tensors to list per graph")
      ->capture_default_str();
  AddLoadFlags(check_cmd, &check_load);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  spdlog::set_default_logger(MakeStderrLogger());
  spdlog::set_level(verbosity >= 3   ? spdlog::level::trace
                    : verbosity == 2 ? spdlog::level::debug
                    : verbosity == 1 ? spdlog::level::info
                                     : spdlog::level::warn);
  spdlog::cfg::load_env_levels();

  try {
    if (check_cmd->parsed()) {
      CheckSettings& settings = check.settings;
      if (!check_sizes.budget.empty()) {
        settings.budget_bytes = ParseSize(check_sizes.budget, "--budget");
      }
      if (!check_sizes.reserve.empty()) {
        settings.reserve_bytes = ParseSize(check_sizes.reserve, "--reserve");
      }
      if (!check_sizes.tolerance.empty()) {
        settings.tolerance = ParseTolerance(check_sizes.tolerance, "--tolerance");
      }
      if (check_no_plan) settings.no_plan = true;
      // Load flags given are one level of the config's precedence, like --budget.
      if (check_load.AnySetting()) settings.load = ResolveLoad(check_load, std::nullopt, nullptr);
      check.limits = check_load.limits;
      check.field_name = CheckFlagName;  // messages name the flags
      const char* actions = std::getenv("GITHUB_ACTIONS");
      check.github_actions = actions != nullptr && std::string(actions) == "true";
      if (const char* summary = std::getenv("GITHUB_STEP_SUMMARY")) {
        check.step_summary_path = summary;
      }
      return RunCheck(check, std::cout, std::cerr);
    }
    if (!plan_bucket_cap.empty()) {
      plan.layout.bucket_cap_bytes = ParseSize(plan_bucket_cap, "--bucket-cap");
    }
    if (!simulate_bucket_cap.empty()) {
      simulate.layout.bucket_cap_bytes = ParseSize(simulate_bucket_cap, "--bucket-cap");
    }
    if (plan_cmd->parsed()) {
      plan.budget_bytes = ParseSize(plan_sizes.budget, "--budget");
      if (!plan_sizes.reserve.empty()) plan.reserve_bytes = ParseSize(plan_sizes.reserve, "--reserve");
      if (!host_link.empty()) {
        // A rate is a size per second: "25GB/s".
        std::string bytes = host_link;
        if (bytes.size() > 2 && bytes.compare(bytes.size() - 2, 2, "/s") == 0) bytes.resize(bytes.size() - 2);
        plan.host_link_bytes_per_s = static_cast<double>(ParseSize(bytes, "--host-link"));
        if (*plan.host_link_bytes_per_s <= 0) {
          throw InputError("--host-link: the rate must be above 0", kExitUsage);
        }
      }
      if (!host_budget.empty()) plan.host_budget_bytes = ParseSize(host_budget, "--host-budget");
      if (compute_rate > 0) plan.compute_flops_per_s = compute_rate;
      if (!max_error.empty()) plan.max_error = ParseMaxErrorFlag(max_error);
      return RunPlan(plan, std::cout);
    }
    if (generate_cmd->parsed()) {
      generate.kind = transformer_cmd->parsed() ? "transformer" : "random";
      return RunGenerate(generate, std::cout);
    }
    if (sweep_cmd->parsed()) {
      if (!sweep_sizes.reserve.empty()) sweep.reserve_bytes = ParseSize(sweep_sizes.reserve, "--reserve");
      if (search_parallel) {
        if (search_budget.empty()) {
          throw InputError("sweep --search-parallel: --budget is required", kExitUsage);
        }
        return RunSweepParallel(sweep, search_gpus, ParseSize(search_budget, "--budget"),
                                std::cout);
      }
      if (!sweep_budgets.empty()) {
        if (!sweep_from.empty() || !sweep_to.empty() || sweep_steps != 0) {
          throw InputError("sweep: give either --budgets or --from/--to/--steps", kExitUsage);
        }
        sweep.budgets = ParseBudgetList(sweep_budgets, "--budgets");
      } else if (!sweep_from.empty() || !sweep_to.empty() || sweep_steps != 0) {
        if (sweep_from.empty() || sweep_to.empty() || sweep_steps == 0) {
          throw InputError("sweep: --from, --to and --steps go together", kExitUsage);
        }
        sweep.budgets = LinearBudgets(ParseSize(sweep_from, "--from"), ParseSize(sweep_to, "--to"),
                                      sweep_steps);
      }
      return RunSweep(sweep, std::cout);
    }
    if (export_cmd->parsed()) return RunExport(export_options, std::cout, std::cerr);
    if (!simulate_sizes.reserve.empty()) {
      simulate.reserve_bytes = ParseSize(simulate_sizes.reserve, "--reserve");
    }
    return RunSimulate(simulate, std::cout);
  } catch (const UnresolvedShapesError& e) {
    std::cerr << "ckptplan: error: " << Printable(e.what()) << '\n';
    if (std::string hint = LoadErrorHint(e); !hint.empty()) {
      std::cerr << "ckptplan: " << Printable(hint) << '\n';
    }
    return e.exit_code();
  } catch (const InputError& e) {
    std::cerr << "ckptplan: error: " << Printable(e.what()) << '\n';
    return e.exit_code();
  } catch (const InfeasibleError& e) {
    std::cerr << "ckptplan: infeasible: " << Printable(e.what()) << '\n';
    return kExitInfeasible;
  } catch (const IoError& e) {
    std::cerr << "ckptplan: error: " << Printable(e.what()) << '\n';
    return kExitIo;
  } catch (const std::exception& e) {
    std::cerr << "ckptplan: internal error: " << Printable(e.what()) << '\n';
    return kExitInternal;
  }
}

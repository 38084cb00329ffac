#include "ckptplan/ci/check.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "ckptplan/ci/check_report.h"
#include "ckptplan/ci/ci_report.h"
#include "ckptplan/base/errors.h"
#include "ckptplan/base/file_io.h"
#include "ckptplan/base/text_escape.h"
#include "ckptplan/base/limits.h"
#include "ckptplan/base/output_file.h"
#include "ckptplan/base/problems.h"
#include "ckptplan/plan/plan_outcome.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {
namespace {

std::string ModeName(bool no_plan) { return no_plan ? "save-all" : "plan"; }

CheckTarget MakeTarget(const CheckOptions& options, const std::string& path,
                       const std::string& key, const CheckSettings& own,
                       const CheckSettings& command_line, const CheckSettings& defaults,
                       std::vector<std::string>* problems) {
  auto pick = [](const auto& a, const auto& b, const auto& c) { return a ? a : b ? b : c; };
  CheckTarget target;
  target.graph_path = path;
  target.key = key;
  auto budget = pick(own.budget_bytes, command_line.budget_bytes, defaults.budget_bytes);
  if (!budget) {
    problems->push_back("graph '" + path + "' has no budget: pass " + options.Name("budget") +
                        ", or set \"budget\" in the config");
  }
  target.budget_bytes = budget.value_or(0);
  target.reserve_bytes =
      pick(own.reserve_bytes, command_line.reserve_bytes, defaults.reserve_bytes).value_or(0);
  target.tolerance =
      pick(own.tolerance, command_line.tolerance, defaults.tolerance).value_or(Tolerance{});
  target.no_plan = pick(own.no_plan, command_line.no_plan, defaults.no_plan).value_or(false);
  target.load = pick(own.load, command_line.load, defaults.load).value_or(LoadOptions{});
  return target;
}

std::string NormalKey(const std::string& path) {
  std::string key = std::filesystem::path(path).lexically_normal().string();
  return key.empty() ? path : key;
}

}  // namespace

std::vector<CheckTarget> ResolveTargets(const CheckOptions& options, std::string* baseline_path) {
  CheckConfig config;
  if (!options.config_path.empty()) config = ReadCheckConfig(options.config_path);
  *baseline_path = options.baseline_path.empty() ? config.baseline_path : options.baseline_path;
  std::vector<std::string> problems;
  std::vector<CheckTarget> targets;
  for (const std::string& path : options.graph_paths) {
    targets.push_back(
        MakeTarget(options, path, NormalKey(path), {}, options.settings, config.defaults,
                   &problems));
  }
  for (const ConfigGraph& graph : config.graphs) {
    std::string key = graph.key.empty() ? NormalKey(graph.graph) : graph.key;
    targets.push_back(
        MakeTarget(options, graph.path, key, graph.settings, options.settings, config.defaults,
                   &problems));
  }
  if (targets.empty()) {
    problems.push_back("no graphs: name graph files, or " + options.Name("config_path") +
                       " a file listing them");
  }
  for (size_t i = 0; i < targets.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (targets[i].key != targets[j].key) continue;
      problems.push_back("graphs '" + targets[j].graph_path + "' and '" + targets[i].graph_path +
                         "' share the baseline key '" + targets[i].key +
                         "'; give one a \"key\" in the config");
    }
  }
  if (!problems.empty()) {
    std::string text;
    for (const std::string& problem : problems) {
      text += (text.empty() ? "check: " : "\ncheck: ") + problem;
    }
    throw InputError(text, kExitUsage);
  }
  return targets;
}

std::vector<CategoryDelta> CategoryDeltas(const PeakRecord& before, const PeakRecord& now) {
  std::vector<CategoryDelta> deltas;
  for (size_t c = 0; c < kNumCategories; ++c) {
    if (before.breakdown[c] == now.breakdown[c]) continue;
    deltas.push_back({static_cast<Category>(c), before.breakdown[c], now.breakdown[c]});
  }
  std::stable_sort(deltas.begin(), deltas.end(),
                   [](const CategoryDelta& a, const CategoryDelta& b) {
                     return a.now - a.before > b.now - b.before;
                   });
  return deltas;
}

std::vector<TensorDelta> GrownTensors(const PeakRecord& before, const PeakRecord& now,
                                      size_t limit) {
  std::vector<TensorDelta> grown;
  for (const PeakTensor& tensor : now.top_tensors) {
    TensorDelta delta{&tensor, 0, false};
    for (const PeakTensor& old : before.top_tensors) {
      if (old.tensor != tensor.tensor) continue;
      delta.before = old.bytes;
      delta.in_baseline = true;
      break;
    }
    if (tensor.bytes > delta.before) grown.push_back(delta);
  }
  std::sort(grown.begin(), grown.end(), [](const TensorDelta& a, const TensorDelta& b) {
    int64_t growth_a = a.now->bytes - a.before, growth_b = b.now->bytes - b.before;
    if (growth_a != growth_b) return growth_a > growth_b;
    return a.now->tensor < b.now->tensor;
  });
  if (grown.size() > limit) grown.resize(limit);
  return grown;
}

namespace {

Baseline LoadBaselineFile(const CheckOptions& options, const std::string& path) {
  const bool update = options.update_baseline;
  if (!std::filesystem::exists(path)) {
    if (update) return {};
    throw IoError(path + ": baseline file not found; create it with `ckptplan check ... " +
                  options.Name("baseline_path") + " " + path + " " +
                  options.Name("update_baseline") + "` and commit it");
  }
  try {
    return ReadBaseline(path);
  } catch (const InputError& e) {
    // ReadBaseline says the file is corrupt; how to rewrite it is ours to say.
    if (!update) {
      throw InputError(std::string(e.what()) + ", or regenerate it with " +
                           options.Name("update_baseline"),
                       e.exit_code());
    }
    spdlog::warn("replacing a corrupt baseline: {}", e.what());
    return {};
  }
}

// Every graph must have an entry recorded in the same mode; all problems at once.
void ValidateBaselineKeys(const CheckOptions& options, const Baseline& baseline,
                          const std::string& path, const std::vector<CheckTarget>& targets) {
  const std::string update = options.Name("update_baseline");
  Problems problems(path);
  for (const CheckTarget& target : targets) {
    auto entry = baseline.find(target.key);
    if (entry == baseline.end()) {
      problems.Add("no entry for graph key '" + target.key + "' (" + target.graph_path +
                   "); add it with " + update);
    } else if (entry->second.mode != ModeName(target.no_plan)) {
      problems.Add("entry '" + target.key + "' was recorded in " + entry->second.mode +
                   " mode but this check runs in " + ModeName(target.no_plan) +
                   " mode; check in the same mode (" + options.Name("no_plan") +
                   " is save-all), or re-record it with " + update);
    }
  }
  problems.ThrowIfAny(kExitBadInput);
}

GraphCheck CheckGraph(const CheckTarget& target, const PeakRecord* before, bool update,
                      const Limits& limits) {
  CheckReserve(target.reserve_bytes, "graph '" + target.graph_path + "': reserve");
  LoadOptions load = target.load;
  load.limits = limits;
  LoadedGraph loaded = LoadGraph(target.graph_path, load);
  const Graph& graph = loaded.graph;
  GraphCheck check;
  check.target = target;
  if (target.no_plan) {
    SimOptions sim_options;
    sim_options.reserve_bytes = target.reserve_bytes;
    sim_options.record_categories = true;
    SimResult save_all = Simulate(graph, SaveAll(graph), sim_options);
    check.now = MakePeakRecord(graph, save_all, kBaselineTopTensors);
    check.now.save_all_peak_bytes = save_all.peak_bytes;
    check.over_budget = save_all.peak_bytes > target.budget_bytes;
  } else {
    PlannerOptions planner;  // the default planner, as `plan` runs it
    planner.budget_bytes = target.budget_bytes;
    planner.reserve_bytes = target.reserve_bytes;
    PlanOutcome outcome = ComputePlan(graph, planner);
    check.now = MakePeakRecord(graph, outcome.planned, kBaselineTopTensors);
    check.now.save_all_peak_bytes = outcome.save_all.peak_bytes;
    check.over_budget = !outcome.found.fits;
    check.infeasible = outcome.infeasible;
  }
  check.now.graph = target.graph_path;
  check.now.graph_sha256 = loaded.sha256;
  check.now.mode = ModeName(target.no_plan);
  check.now.budget_bytes = target.budget_bytes;
  check.now.reserve_bytes = target.reserve_bytes;
  if (before != nullptr) {
    check.baseline = *before;
    check.delta = check.now.peak_bytes - before->peak_bytes;
    check.allowed = target.tolerance.Allowed(before->peak_bytes);
    check.regressed = !update && check.delta > check.allowed;
  }
  return check;
}

}  // namespace

int RunCheck(const CheckOptions& options, std::ostream& out, std::ostream& err) {
  std::string baseline_path;
  std::vector<CheckTarget> targets = ResolveTargets(options, &baseline_path);
  if (options.update_baseline && baseline_path.empty()) {
    throw InputError(options.Name("update_baseline") + " needs " +
                         options.Name("baseline_path") + " FILE (or \"baseline\" in the config)",
                     kExitUsage);
  }
  Baseline baseline;
  if (!baseline_path.empty()) {
    baseline = LoadBaselineFile(options, baseline_path);
    if (!options.update_baseline) ValidateBaselineKeys(options, baseline, baseline_path, targets);
  }

  std::vector<GraphCheck> checks;
  for (const CheckTarget& target : targets) {
    auto entry = baseline.find(target.key);
    const PeakRecord* before = entry == baseline.end() ? nullptr : &entry->second;
    // An entry recorded in the other mode is not comparable; update replaces it.
    if (before != nullptr && before->mode != ModeName(target.no_plan)) before = nullptr;
    checks.push_back(CheckGraph(target, before, options.update_baseline, options.limits));
    spdlog::info("check {}: peak {} budget {}{}", ShowName(target.key), checks.back().now.peak_bytes,
                 target.budget_bytes, checks.back().failed() ? " FAIL" : " pass");
  }

  // Render everything before writing anything, so a failure leaves no files.
  std::string overall = CheckOverallLine(checks, options.update_baseline, baseline_path);
  std::vector<std::string> verdicts, blocks;
  std::string report = overall + "\n";
  for (const GraphCheck& check : checks) {
    verdicts.push_back(CheckVerdictLine(check, options.update_baseline));
    blocks.push_back(verdicts.back() + "\n" + CheckDetailText(check, options.top));
    report += "\n" + blocks.back();
  }
  // On GitHub Actions the annotations and the job summary are on by default.
  const bool github = options.annotate ? *options.annotate == Annotations::kGithub
                                       : options.github_actions;
  std::string summary_path = github ? options.step_summary_path : "";
  std::string summary_text;
  if (!summary_path.empty()) {
    if (std::filesystem::exists(summary_path)) summary_text = ReadFile(summary_path);
    summary_text += CheckMarkdown(checks, overall, verdicts);
  }
  std::string junit_text;
  if (!options.junit_path.empty()) {
    std::vector<JunitCase> cases;
    for (size_t i = 0; i < checks.size(); ++i) {
      cases.push_back(CheckJunitCase(checks[i], verdicts[i], blocks[i]));
    }
    junit_text = JunitXml("ckptplan check", cases);
  }
  std::string baseline_text;
  if (options.update_baseline) {
    for (const GraphCheck& check : checks) baseline[check.target.key] = check.now;
    baseline_text = BaselineText(baseline);
  }

  out << EscapeControls(report);
  out.flush();
  if (github) err << CheckAnnotations(checks, blocks, options.Name("update_baseline"));
  std::vector<OutputFile> files;  // written all or none
  if (!junit_text.empty()) files.push_back({options.junit_path, std::move(junit_text)});
  if (!summary_path.empty()) files.push_back({summary_path, std::move(summary_text)});
  if (!baseline_text.empty()) files.push_back({baseline_path, std::move(baseline_text)});
  WriteFilesAtomic(files);
  bool any_failed = std::any_of(checks.begin(), checks.end(),
                                [](const GraphCheck& check) { return check.failed(); });
  return any_failed ? kExitCheckFailed : kExitOk;
}

}  // namespace ckptplan

#include "ckptplan/check.h"

#include <algorithm>
#include <cinttypes>
#include <cstdlib>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include <spdlog/spdlog.h>

#include "ckptplan/ci_report.h"
#include "ckptplan/commands.h"
#include "ckptplan/errors.h"
#include "ckptplan/json_loader.h"
#include "ckptplan/output_file.h"
#include "ckptplan/problems.h"
#include "ckptplan/simulator.h"
#include "ckptplan/size.h"

namespace ckptplan {
namespace {

std::string ModeName(bool no_plan) { return no_plan ? "save-all" : "plan"; }

CheckTarget MakeTarget(const std::string& path, const std::string& key,
                       const CheckSettings& own, const CheckSettings& command_line,
                       const CheckSettings& defaults, std::vector<std::string>* problems) {
  auto pick = [](const auto& a, const auto& b, const auto& c) { return a ? a : b ? b : c; };
  CheckTarget target;
  target.graph_path = path;
  target.key = key;
  auto budget = pick(own.budget_bytes, command_line.budget_bytes, defaults.budget_bytes);
  if (!budget) {
    problems->push_back("graph '" + path +
                        "' has no budget: pass --budget, or set \"budget\" in the config");
  }
  target.budget_bytes = budget.value_or(0);
  target.reserve_bytes =
      pick(own.reserve_bytes, command_line.reserve_bytes, defaults.reserve_bytes).value_or(0);
  target.tolerance =
      pick(own.tolerance, command_line.tolerance, defaults.tolerance).value_or(Tolerance{});
  target.no_plan = pick(own.no_plan, command_line.no_plan, defaults.no_plan).value_or(false);
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
        MakeTarget(path, NormalKey(path), {}, options.settings, config.defaults, &problems));
  }
  for (const ConfigGraph& graph : config.graphs) {
    std::string key = graph.key.empty() ? NormalKey(graph.graph) : graph.key;
    targets.push_back(
        MakeTarget(graph.path, key, graph.settings, options.settings, config.defaults, &problems));
  }
  if (targets.empty()) problems.push_back("no graphs: name graph files, or --config a file listing them");
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
    for (const std::string& problem : problems) text += (text.empty() ? "check: " : "\ncheck: ") + problem;
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
  std::stable_sort(deltas.begin(), deltas.end(), [](const CategoryDelta& a, const CategoryDelta& b) {
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

// ---- Checking ------------------------------------------------------------

Baseline LoadBaselineFile(const std::string& path, bool update) {
  if (!std::filesystem::exists(path)) {
    if (update) return {};
    throw IoError(path + ": baseline file not found; create it with `ckptplan check ... "
                         "--baseline " + path + " --update-baseline` and commit it");
  }
  try {
    return ReadBaseline(path);
  } catch (const InputError& e) {
    if (!update) throw;
    spdlog::warn("replacing a corrupt baseline: {}", e.what());
    return {};
  }
}

// Every graph must have an entry recorded in the same mode; all problems at once.
void ValidateBaselineKeys(const Baseline& baseline, const std::string& path,
                          const std::vector<CheckTarget>& targets) {
  Problems problems(path);
  for (const CheckTarget& target : targets) {
    auto entry = baseline.find(target.key);
    if (entry == baseline.end()) {
      problems.Add("no entry for graph key '" + target.key + "' (" + target.graph_path +
                   "); add it with --update-baseline");
    } else if (entry->second.mode != ModeName(target.no_plan)) {
      problems.Add("entry '" + target.key + "' was recorded in " + entry->second.mode +
                   " mode but this check runs in " + ModeName(target.no_plan) +
                   " mode; check in the same mode (--no-plan is save-all), or re-record it "
                   "with --update-baseline");
    }
  }
  problems.ThrowIfAny(kExitBadInput);
}

GraphCheck CheckGraph(const CheckTarget& target, const PeakRecord* before, bool update,
                      const LoadOptions& load) {
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
    PlanOutcome outcome =
        ComputePlan(graph, SaveAll(graph), target.budget_bytes, target.reserve_bytes);
    check.now = MakePeakRecord(graph, outcome.planned, kBaselineTopTensors);
    check.now.save_all_peak_bytes = outcome.save_all.peak_bytes;
    check.over_budget = !outcome.greedy.fits;
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

// ---- Text ------------------------------------------------------------------

std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* format, ...) {
  char buffer[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  return buffer;
}

std::string SignedBytes(int64_t delta) {
  return delta > 0 ? "+" + FormatBytes(delta) : delta == 0 ? "+0 B" : FormatBytes(delta);
}

std::string Percent(int64_t delta, int64_t base) {
  if (base <= 0) return "n/a";
  return Format("%+.2f%%", 100.0 * static_cast<double>(delta) / static_cast<double>(base));
}

// "+8.0 MiB (+8388608 B, +9.52%)"
std::string DeltaText(int64_t delta, int64_t base) {
  return SignedBytes(delta) + Format(" (%+" PRId64 " B, ", delta) + Percent(delta, base) + ")";
}

std::string OpText(const std::string& op, const std::string& scope) {
  return "op " + op + (scope.empty() ? "" : " in module '" + scope + "'");
}

std::string PeakWhere(const PeakRecord& record) {
  return OpText(record.peak_op, record.peak_scope) + " (node '" + record.peak_node + "', " +
         record.peak_phase + (record.peak_recompute ? ", recompute" : "") + ", step " +
         std::to_string(record.peak_step) + ")";
}

std::string TensorOrigin(const PeakTensor& tensor) {
  return tensor.op.empty() ? "graph input" : "from " + OpText(tensor.op, tensor.scope);
}

// "grew most: saved_activations +8.0 MiB; tensor 'a1' +4.0 MiB from op relu in module 'act'"
std::string GrowthText(const GraphCheck& check) {
  std::vector<CategoryDelta> categories = CategoryDeltas(*check.baseline, check.now);
  std::string text;
  if (!categories.empty() && categories[0].now > categories[0].before) {
    text = "grew most: " + std::string(ToString(categories[0].category)) + " " +
           SignedBytes(categories[0].now - categories[0].before);
  }
  std::vector<TensorDelta> tensors = GrownTensors(*check.baseline, check.now, 1);
  if (!tensors.empty()) {
    const TensorDelta& top = tensors[0];
    text += (text.empty() ? "grew most: " : "; ") + std::string("tensor '") + top.now->tensor +
            "' " + SignedBytes(top.now->bytes - top.before) +
            (top.in_baseline ? "" : " (new at the peak)") + " " + TensorOrigin(*top.now);
  }
  return text;
}

std::string VerdictLine(const GraphCheck& check, bool update) {
  const PeakRecord& now = check.now;
  std::vector<std::string> reasons;
  if (check.over_budget) {
    reasons.push_back(!check.infeasible.empty()
                          ? "over budget: " + check.infeasible
                          : "over budget: peak " + FormatBytes(now.peak_bytes) + " > budget " +
                                FormatBytes(now.budget_bytes) + " by " +
                                FormatBytes(now.peak_bytes - now.budget_bytes));
  }
  if (check.regressed) {
    std::string growth = GrowthText(check);
    reasons.push_back("peak " + FormatBytes(now.peak_bytes) + " regressed by " +
                      SignedBytes(check.delta) + " (" + Percent(check.delta, check.baseline->peak_bytes) +
                      ") over baseline " + FormatBytes(check.baseline->peak_bytes) +
                      ", more than the tolerance " + check.target.tolerance.ToString() + " (" +
                      FormatBytes(check.allowed) + ")" + (growth.empty() ? "" : "; " + growth));
  }
  if (!reasons.empty()) {
    std::string line = "FAIL " + check.target.key + ": ";
    for (size_t i = 0; i < reasons.size(); ++i) line += (i ? "; " : "") + reasons[i];
    return line;
  }
  std::string line = "PASS " + check.target.key + ": peak " + FormatBytes(now.peak_bytes) +
                     " within budget " + FormatBytes(now.budget_bytes) + " (" +
                     FormatBytes(now.budget_bytes - now.peak_bytes) + " headroom)";
  if (check.baseline) {
    line += ", " + SignedBytes(check.delta) + " (" + Percent(check.delta, check.baseline->peak_bytes) +
            ") vs baseline " + FormatBytes(check.baseline->peak_bytes);
    if (!update) line += " within tolerance " + check.target.tolerance.ToString();
  }
  if (update) line += "; baseline updated";
  return line;
}

// "84.0 MiB (88080384 B)  ", padded so the columns after it line up.
std::string Figure(int64_t bytes) {
  return Format("%-25s ", (FormatBytes(bytes) + Format(" (%" PRId64 " B)", bytes)).c_str());
}

void Row(std::ostringstream& out, const std::string& label, const std::string& text) {
  out << Format("  %-19s %s\n", label.c_str(), text.c_str());
}

void CategoryLines(const GraphCheck& check, std::ostringstream& out) {
  if (!check.baseline) {
    out << "  Memory at the peak, by category:\n";
    for (size_t c = 0; c < kNumCategories; ++c) {
      if (check.now.breakdown[c] == 0) continue;
      out << Format("    %-19s %s\n", std::string(ToString(static_cast<Category>(c))).c_str(),
                    FormatBytes(check.now.breakdown[c]).c_str());
    }
    return;
  }
  std::vector<CategoryDelta> deltas = CategoryDeltas(*check.baseline, check.now);
  out << "  Change per category at the peak (baseline -> now):";
  out << (deltas.empty() ? " none\n" : "\n");
  for (const CategoryDelta& delta : deltas) {
    out << Format("    %-19s %-10s -> %-10s %s\n",
                  std::string(ToString(delta.category)).c_str(), FormatBytes(delta.before).c_str(),
                  FormatBytes(delta.now).c_str(),
                  DeltaText(delta.now - delta.before, delta.before).c_str());
  }
}

void TensorLines(const GraphCheck& check, size_t top, std::ostringstream& out) {
  if (!check.baseline) {
    out << "  Largest tensors at the peak:\n";
    for (size_t i = 0; i < check.now.top_tensors.size() && i < top; ++i) {
      const PeakTensor& tensor = check.now.top_tensors[i];
      out << Format("    %-10s %s [%s] %s\n", FormatBytes(tensor.bytes).c_str(),
                    tensor.tensor.c_str(), std::string(ToString(tensor.category)).c_str(),
                    TensorOrigin(tensor).c_str());
    }
    return;
  }
  std::vector<TensorDelta> grown = GrownTensors(*check.baseline, check.now, top);
  out << "  Tensors at the peak that grew most:" << (grown.empty() ? " none\n" : "\n");
  for (const TensorDelta& delta : grown) {
    const PeakTensor& tensor = *delta.now;
    std::string before = delta.in_baseline ? FormatBytes(delta.before) : "(not at peak)";
    out << Format("    %-24s %-13s -> %-10s %-10s [%s] %s\n", tensor.tensor.c_str(), before.c_str(),
                  FormatBytes(tensor.bytes).c_str(),
                  SignedBytes(tensor.bytes - delta.before).c_str(),
                  std::string(ToString(tensor.category)).c_str(), TensorOrigin(tensor).c_str());
  }
}

// The figures after the verdict line: peak vs budget vs baseline, where the
// peak is, category changes and the tensors that grew.
std::string DetailText(const GraphCheck& check, size_t top) {
  const PeakRecord& now = check.now;
  std::ostringstream out;
  Row(out, "graph", now.graph + " (" + now.mode + " mode" +
                        (now.reserve_bytes > 0 ? ", reserve " + FormatBytes(now.reserve_bytes) : "") +
                        ")");
  Row(out, "peak", Figure(now.peak_bytes) + "at " + PeakWhere(now));
  int64_t headroom = now.budget_bytes - now.peak_bytes;
  Row(out, "budget", Figure(now.budget_bytes) +
                         (headroom >= 0 ? "headroom " + FormatBytes(headroom)
                                        : "over by " + FormatBytes(-headroom)) +
                         (now.budget_bytes > 0
                              ? Format(" (%.2f%% of the budget)",
                                       100.0 * static_cast<double>(std::abs(headroom)) /
                                           static_cast<double>(now.budget_bytes))
                              : ""));
  if (check.baseline) {
    const PeakRecord& before = *check.baseline;
    Row(out, "baseline", Figure(before.peak_bytes) + "delta " +
                             DeltaText(check.delta, before.peak_bytes) + ", allowed +" +
                             FormatBytes(check.allowed) + " (tolerance " +
                             check.target.tolerance.ToString() + ")");
    Row(out, "baseline peak at", PeakWhere(before));
    if (now.mode == "plan" && before.budget_bytes != now.budget_bytes) {
      Row(out, "note", "the baseline was planned for budget " + FormatBytes(before.budget_bytes));
    }
  }
  if (now.mode == "plan") {
    Row(out, "save-all peak", FormatBytes(now.save_all_peak_bytes) + " (before checkpointing)");
    std::string cost = Format("%.6g %s", now.recompute_cost, now.cost_unit.c_str());
    if (check.baseline) cost += Format(" (baseline %.6g)", check.baseline->recompute_cost);
    Row(out, "recompute cost", cost);
  }
  CategoryLines(check, out);
  TensorLines(check, top, out);
  return out.str();
}

std::string OverallLine(const std::vector<GraphCheck>& checks, bool update,
                        const std::string& baseline_path) {
  std::string failed;
  size_t failures = 0;
  for (const GraphCheck& check : checks) {
    if (!check.failed()) continue;
    ++failures;
    failed += (failed.empty() ? "" : ", ") + check.target.key + " (" +
              (check.over_budget && check.regressed ? "over budget, regressed"
               : check.over_budget                  ? "over budget"
                                                    : "regressed") +
              ")";
  }
  std::string count = std::to_string(checks.size()) + (checks.size() == 1 ? " graph" : " graphs");
  if (failures > 0) {
    return "ckptplan check: FAIL: " + std::to_string(failures) + " of " + count + " failed: " +
           failed;
  }
  std::string line = "ckptplan check: PASS: " + count + " within budget";
  if (!baseline_path.empty()) line += update ? "; baseline " + baseline_path + " updated"
                                             : " and baseline tolerance";
  return line;
}

// ---- CI formats --------------------------------------------------------------

std::string Annotations(const std::vector<GraphCheck>& checks, const std::vector<std::string>& blocks) {
  std::string out;
  for (size_t i = 0; i < checks.size(); ++i) {
    const GraphCheck& check = checks[i];
    Properties properties{{"file", check.target.graph_path},
                          {"title", "ckptplan check: " + check.target.key}};
    if (check.failed()) {
      out += GithubCommand("error", properties, blocks[i]);
    } else if (check.baseline && check.delta > 0) {
      out += GithubCommand("warning", properties,
                           "peak grew " + DeltaText(check.delta, check.baseline->peak_bytes) +
                               ", within the tolerance " + check.target.tolerance.ToString() +
                               "\n" + blocks[i]);
    } else if (check.baseline && -check.delta > check.allowed) {
      out += GithubCommand("notice", properties,
                           "peak shrank " + DeltaText(check.delta, check.baseline->peak_bytes) +
                               "; run ckptplan check with --update-baseline to lock it in");
    }
  }
  return out;
}

std::string MarkdownSummary(const std::vector<GraphCheck>& checks, const std::string& overall,
                            const std::vector<std::string>& verdicts) {
  std::string out = "### " + MarkdownCell(overall) + "\n\n";
  out += "| Result | Graph | Peak | Budget | Baseline | Change | Peak at |\n";
  out += "|---|---|---|---|---|---|---|\n";
  for (const GraphCheck& check : checks) {
    const PeakRecord& now = check.now;
    std::string baseline = check.baseline ? FormatBytes(check.baseline->peak_bytes) : "-";
    std::string change = check.baseline ? SignedBytes(check.delta) + " (" +
                                               Percent(check.delta, check.baseline->peak_bytes) + ")"
                                         : "-";
    out += "| " + std::string(check.failed() ? "FAIL" : "PASS") + " | " +
           MarkdownCell(check.target.key) + " | " + FormatBytes(now.peak_bytes) + " | " +
           FormatBytes(now.budget_bytes) + " | " + baseline + " | " + change + " | " +
           MarkdownCell(OpText(now.peak_op, now.peak_scope)) + " |\n";
  }
  for (size_t i = 0; i < checks.size(); ++i) {
    const GraphCheck& check = checks[i];
    if (!check.failed()) continue;
    out += "\n" + MarkdownCell(verdicts[i]) + "\n";
    if (!check.baseline) continue;
    out += "\n| Category at the peak | Baseline | Now | Change |\n|---|---|---|---|\n";
    for (const CategoryDelta& delta : CategoryDeltas(*check.baseline, check.now)) {
      out += "| " + std::string(ToString(delta.category)) + " | " + FormatBytes(delta.before) +
             " | " + FormatBytes(delta.now) + " | " + DeltaText(delta.now - delta.before, delta.before) +
             " |\n";
    }
  }
  return out + "\n";
}

JunitCase MakeJunitCase(const GraphCheck& check, const std::string& verdict,
                        const std::string& block) {
  const PeakRecord& now = check.now;
  JunitCase test;
  test.name = check.target.key;
  test.classname = "ckptplan.check";
  test.file = check.target.graph_path;
  Properties& p = test.properties;
  p = {{"graph", now.graph},
       {"mode", now.mode},
       {"peak_bytes", std::to_string(now.peak_bytes)},
       {"budget_bytes", std::to_string(now.budget_bytes)},
       {"reserve_bytes", std::to_string(now.reserve_bytes)},
       {"save_all_peak_bytes", std::to_string(now.save_all_peak_bytes)},
       {"peak_node", now.peak_node},
       {"peak_op", now.peak_op},
       {"peak_scope", now.peak_scope}};
  if (check.baseline) {
    p.push_back({"baseline_peak_bytes", std::to_string(check.baseline->peak_bytes)});
    p.push_back({"delta_bytes", std::to_string(check.delta)});
    p.push_back({"delta_percent", Percent(check.delta, check.baseline->peak_bytes)});
    p.push_back({"tolerance", check.target.tolerance.ToString()});
    p.push_back({"allowed_bytes", std::to_string(check.allowed)});
  }
  for (size_t c = 0; c < kNumCategories; ++c) {
    p.push_back({"peak_" + std::string(ToString(static_cast<Category>(c))) + "_bytes",
                 std::to_string(now.breakdown[c])});
  }
  test.failed = check.failed();
  if (test.failed) {
    test.failure_message = verdict;
    test.failure_type = check.over_budget && check.regressed ? "over_budget_and_regression"
                        : check.over_budget                  ? "over_budget"
                                                             : "regression";
    test.failure_text = block;
  } else {
    test.system_out = block;
  }
  return test;
}

}  // namespace

int RunCheck(const CheckOptions& options, std::ostream& out, std::ostream& err) {
  if (!options.annotate.empty() && options.annotate != "github") {
    throw InputError("--annotate: unknown format '" + options.annotate + "' (expected github)",
                     kExitUsage);
  }
  std::string baseline_path;
  std::vector<CheckTarget> targets = ResolveTargets(options, &baseline_path);
  if (options.update_baseline && baseline_path.empty()) {
    throw InputError("--update-baseline needs --baseline FILE (or \"baseline\" in the config)",
                     kExitUsage);
  }
  Baseline baseline;
  if (!baseline_path.empty()) {
    baseline = LoadBaselineFile(baseline_path, options.update_baseline);
    if (!options.update_baseline) ValidateBaselineKeys(baseline, baseline_path, targets);
  }

  std::vector<GraphCheck> checks;
  for (const CheckTarget& target : targets) {
    auto entry = baseline.find(target.key);
    const PeakRecord* before = entry == baseline.end() ? nullptr : &entry->second;
    // An entry recorded in the other mode is not comparable; update replaces it.
    if (before != nullptr && before->mode != ModeName(target.no_plan)) before = nullptr;
    checks.push_back(CheckGraph(target, before, options.update_baseline, options.load));
    spdlog::info("check {}: peak {} budget {}{}", target.key, checks.back().now.peak_bytes,
                 target.budget_bytes, checks.back().failed() ? " FAIL" : " pass");
  }

  // Render everything before writing anything, so a failure leaves no files.
  std::string overall = OverallLine(checks, options.update_baseline, baseline_path);
  std::vector<std::string> verdicts, blocks;
  std::string report = overall + "\n";
  for (const GraphCheck& check : checks) {
    verdicts.push_back(VerdictLine(check, options.update_baseline));
    blocks.push_back(verdicts.back() + "\n" + DetailText(check, options.top));
    report += "\n" + blocks.back();
  }
  const bool github = options.annotate == "github";
  std::string summary_path = github ? options.step_summary_path : "";
  std::string summary_text;
  if (!summary_path.empty()) {
    if (std::filesystem::exists(summary_path)) summary_text = ReadFile(summary_path);
    summary_text += MarkdownSummary(checks, overall, verdicts);
  }
  std::string junit_text;
  if (!options.junit_path.empty()) {
    std::vector<JunitCase> cases;
    for (size_t i = 0; i < checks.size(); ++i) {
      cases.push_back(MakeJunitCase(checks[i], verdicts[i], blocks[i]));
    }
    junit_text = JunitXml("ckptplan check", cases);
  }
  std::string baseline_text;
  if (options.update_baseline) {
    for (const GraphCheck& check : checks) baseline[check.target.key] = check.now;
    baseline_text = BaselineText(baseline);
  }

  out << report;
  out.flush();
  if (github) err << Annotations(checks, blocks);
  if (!junit_text.empty()) WriteFileAtomic(options.junit_path, junit_text);
  if (!summary_path.empty()) WriteFileAtomic(summary_path, summary_text);
  if (!baseline_text.empty()) WriteFileAtomic(baseline_path, baseline_text);
  bool any_failed = std::any_of(checks.begin(), checks.end(),
                                [](const GraphCheck& check) { return check.failed(); });
  return any_failed ? kExitCheckFailed : kExitOk;
}

}  // namespace ckptplan

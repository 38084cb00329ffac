#include "ckptplan/ci/check_report.h"

#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "ckptplan/base/size.h"
#include "ckptplan/ir/cost.h"
#include "ckptplan/base/text_escape.h"

namespace ckptplan {
namespace {

std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));
// printf into a string of any length (names in the graph can be long).
std::string Format(const char* format, ...) {
  va_list args, copy;
  va_start(args, format);
  va_copy(copy, args);
  int size = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string text(size > 0 ? static_cast<size_t>(size) : 0, '\0');
  if (size > 0) std::vsnprintf(text.data(), text.size() + 1, format, args);
  va_end(args);
  return text;
}

std::string SignedBytes(int64_t delta) {
  return delta > 0 ? "+" + FormatBytes(delta) : delta == 0 ? "+0 B" : FormatBytes(delta);
}

std::string Percent(int64_t delta, int64_t base) {
  if (base <= 0) return "n/a";
  return Format("%+.2f%%", ckptplan::Percent(static_cast<double>(delta), static_cast<double>(base)));
}

// "+8.0 MiB (+8388608 B, +9.52%)"
std::string DeltaText(int64_t delta, int64_t base) {
  return SignedBytes(delta) + Format(" (%+" PRId64 " B, ", delta) + Percent(delta, base) + ")";
}

std::string OpText(const std::string& op, const std::string& scope) {
  return "op " + ShowName(op) + (scope.empty() ? "" : " in module '" + ShowName(scope) + "'");
}

std::string PeakWhere(const PeakRecord& record) {
  return OpText(record.peak_op, record.peak_scope) + " (node '" + ShowName(record.peak_node) + "', " +
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
    text += (text.empty() ? "grew most: " : "; ") + std::string("tensor '") + ShowName(top.now->tensor) +
            "' " + SignedBytes(top.now->bytes - top.before) +
            (top.in_baseline ? "" : " (new at the peak)") + " " + TensorOrigin(*top.now);
  }
  return text;
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
    out << Format("    %-19s %-10s -> %-10s %s\n", std::string(ToString(delta.category)).c_str(),
                  FormatBytes(delta.before).c_str(), FormatBytes(delta.now).c_str(),
                  DeltaText(delta.now - delta.before, delta.before).c_str());
  }
}

void TensorLines(const GraphCheck& check, size_t top, std::ostringstream& out) {
  if (!check.baseline) {
    out << "  Largest tensors at the peak:\n";
    for (size_t i = 0; i < check.now.top_tensors.size() && i < top; ++i) {
      const PeakTensor& tensor = check.now.top_tensors[i];
      out << Format("    %-10s %s [%s] %s\n", FormatBytes(tensor.bytes).c_str(),
                    ShowName(tensor.tensor).c_str(), std::string(ToString(tensor.category)).c_str(),
                    TensorOrigin(tensor).c_str());
    }
    return;
  }
  std::vector<TensorDelta> grown = GrownTensors(*check.baseline, check.now, top);
  out << "  Tensors at the peak that grew most:" << (grown.empty() ? " none\n" : "\n");
  for (const TensorDelta& delta : grown) {
    const PeakTensor& tensor = *delta.now;
    std::string before = delta.in_baseline ? FormatBytes(delta.before) : "(not at peak)";
    out << Format("    %-24s %-13s -> %-10s %-10s [%s] %s\n", ShowName(tensor.tensor).c_str(),
                  before.c_str(),
                  FormatBytes(tensor.bytes).c_str(),
                  SignedBytes(tensor.bytes - delta.before).c_str(),
                  std::string(ToString(tensor.category)).c_str(), TensorOrigin(tensor).c_str());
  }
}

}  // namespace

std::string CheckVerdictLine(const GraphCheck& check, bool update) {
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
                      SignedBytes(check.delta) + " (" +
                      Percent(check.delta, check.baseline->peak_bytes) + ") over baseline " +
                      FormatBytes(check.baseline->peak_bytes) + ", more than the tolerance " +
                      check.target.tolerance.ToString() + " (" + FormatBytes(check.allowed) + ")" +
                      (growth.empty() ? "" : "; " + growth));
  }
  if (!reasons.empty()) {
    std::string line = "FAIL " + ShowName(check.target.key) + ": ";
    for (size_t i = 0; i < reasons.size(); ++i) line += (i ? "; " : "") + reasons[i];
    return line;
  }
  std::string line = "PASS " + ShowName(check.target.key) + ": peak " + FormatBytes(now.peak_bytes) +
                     " within budget " + FormatBytes(now.budget_bytes) + " (" +
                     FormatBytes(now.budget_bytes - now.peak_bytes) + " headroom)";
  if (check.baseline) {
    line += ", " + SignedBytes(check.delta) + " (" +
            Percent(check.delta, check.baseline->peak_bytes) + ") vs baseline " +
            FormatBytes(check.baseline->peak_bytes);
    if (!update) line += " within tolerance " + check.target.tolerance.ToString();
  }
  if (update) line += "; baseline updated";
  return line;
}

// The figures after the verdict line: peak vs budget vs baseline, where the
// peak is, category changes and the tensors that grew.
std::string CheckDetailText(const GraphCheck& check, size_t top) {
  const PeakRecord& now = check.now;
  std::ostringstream out;
  Row(out, "graph",
      ShowName(now.graph) + " (" + now.mode + " mode" +
          (now.reserve_bytes > 0 ? ", reserve " + FormatBytes(now.reserve_bytes) : "") + ")");
  Row(out, "peak", Figure(now.peak_bytes) + "at " + PeakWhere(now));
  int64_t headroom = now.budget_bytes - now.peak_bytes;
  Row(out, "budget",
      Figure(now.budget_bytes) +
          (headroom >= 0 ? "headroom " + FormatBytes(headroom)
                         : "over by " + FormatBytes(-headroom)) +
          (now.budget_bytes > 0
               ? Format(" (%.2f%% of the budget)",
                        ckptplan::Percent(static_cast<double>(std::abs(headroom)),
                                          static_cast<double>(now.budget_bytes)))
               : ""));
  if (check.baseline) {
    const PeakRecord& before = *check.baseline;
    Row(out, "baseline",
        Figure(before.peak_bytes) + "delta " + DeltaText(check.delta, before.peak_bytes) +
            ", allowed +" + FormatBytes(check.allowed) + " (tolerance " +
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

std::string CheckOverallLine(const std::vector<GraphCheck>& checks, bool update,
                             const std::string& baseline_path) {
  std::string failed;
  size_t failures = 0;
  for (const GraphCheck& check : checks) {
    if (!check.failed()) continue;
    ++failures;
    failed += (failed.empty() ? "" : ", ") + ShowName(check.target.key) + " (" +
              (check.over_budget && check.regressed ? "over budget, regressed"
               : check.over_budget                  ? "over budget"
                                                    : "regressed") +
              ")";
  }
  std::string count = std::to_string(checks.size()) + (checks.size() == 1 ? " graph" : " graphs");
  if (failures > 0) {
    return "ckptplan check: FAIL: " + std::to_string(failures) + " of " + count +
           " failed: " + failed;
  }
  std::string line = "ckptplan check: PASS: " + count + " within budget";
  if (!baseline_path.empty()) {
    line += update ? "; baseline " + ShowName(baseline_path) + " updated" : " and baseline tolerance";
  }
  return line;
}

std::string CheckAnnotations(const std::vector<GraphCheck>& checks,
                             const std::vector<std::string>& blocks, const std::string& update) {
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
                               "; run ckptplan check with " + update + " to lock it in");
    }
  }
  return out;
}

std::string CheckMarkdown(const std::vector<GraphCheck>& checks, const std::string& overall,
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
             " | " + FormatBytes(delta.now) + " | " +
             DeltaText(delta.now - delta.before, delta.before) + " |\n";
    }
  }
  return out + "\n";
}

JunitCase CheckJunitCase(const GraphCheck& check, const std::string& verdict,
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

}  // namespace ckptplan

// What `ckptplan check` says: the text report, GitHub workflow commands, the
// Markdown job summary and the JUnit cases, all rendered from GraphChecks.
#ifndef CKPTPLAN_CHECK_REPORT_H_
#define CKPTPLAN_CHECK_REPORT_H_

#include <string>
#include <vector>

#include "ckptplan/ci/check.h"
#include "ckptplan/ci/ci_report.h"

namespace ckptplan {

/// "ckptplan check: FAIL: 1 of 3 graphs failed: mlp (regressed)" or PASS.
std::string CheckOverallLine(const std::vector<GraphCheck>& checks, bool update,
                             const std::string& baseline_path);
/// One line: "FAIL key: ..." with the reasons, naming the category and the
/// tensor (and its op and module) that grew most; or "PASS key: ...".
std::string CheckVerdictLine(const GraphCheck& check, bool update);
/// The lines after the verdict: peak vs budget vs baseline with deltas in
/// bytes and %, where the peak is, the change per category and the `top`
/// tensors that grew most (without a baseline: the breakdown and largest tensors).
std::string CheckDetailText(const GraphCheck& check, size_t top);

/// ::error for failed graphs, ::warning for growth within the tolerance,
/// ::notice for a shrink beyond it. `blocks[i]` is graph i's verdict + details;
/// `update` names the option that records a new baseline.
std::string CheckAnnotations(const std::vector<GraphCheck>& checks,
                             const std::vector<std::string>& blocks, const std::string& update);
/// A Markdown table of every graph, then the category changes of failed ones.
std::string CheckMarkdown(const std::vector<GraphCheck>& checks, const std::string& overall,
                          const std::vector<std::string>& verdicts);
/// The JUnit case of one graph: peak figures as properties.
JunitCase CheckJunitCase(const GraphCheck& check, const std::string& verdict,
                         const std::string& block);

}  // namespace ckptplan

#endif  // CKPTPLAN_CHECK_REPORT_H_

// `ckptplan check`: the CI gate. For each graph it computes the plan (or,
// with no_plan, the save-all simulation) and fails when the peak is over the
// budget or has grown over the committed baseline by more than the tolerance.
#ifndef CKPTPLAN_CHECK_H_
#define CKPTPLAN_CHECK_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "ckptplan/ci/baseline.h"
#include "ckptplan/ci/check_config.h"
#include "ckptplan/ingest/loader.h"

namespace ckptplan {

/// Where `check` writes CI annotations besides its report.
enum class Annotations : uint8_t {
  kNone,    ///< the report only
  kGithub,  ///< GitHub workflow commands on stderr, the job summary file
};

struct CheckOptions {
  std::vector<std::string> graph_paths;  ///< from the command line, checked first
  std::string config_path;               ///< empty: no config file
  /// Command-line settings: they apply to the command line's graphs and to
  /// config graphs that do not set their own, and beat the config defaults.
  CheckSettings settings;
  std::string baseline_path;  ///< empty: the config's, else no baseline
  bool update_baseline = false;
  std::optional<Annotations> annotate;  ///< unset: kGithub when github_actions, else kNone
  bool github_actions = false;  ///< $GITHUB_ACTIONS is "true": the job runs on GitHub
  std::string step_summary_path;  ///< $GITHUB_STEP_SUMMARY; written when annotating for github
  std::string junit_path;         ///< empty: none
  size_t top = 5;                 ///< tensors listed as grown
  Limits limits;                  ///< for every graph (settings.load carries no limits)
  /// How messages name an option, given as its field here ("budget",
  /// "config_path", "baseline_path", "update_baseline", "no_plan"); the CLI
  /// names its flags. Unset: the field's name.
  std::function<std::string(const std::string& field)> field_name;
  /// `field` as messages name it (field_name).
  std::string Name(const std::string& field) const {
    return field_name ? field_name(field) : field;
  }
};

/// One graph to check with its settings resolved.
struct CheckTarget {
  std::string graph_path;  ///< to load, and to name in messages
  std::string key;         ///< baseline key: the config's, else the path as given
  int64_t budget_bytes = 0;
  int64_t reserve_bytes = 0;
  Tolerance tolerance;  ///< default 0 bytes: any growth fails
  bool no_plan = false;
  LoadOptions load;  ///< default: LoadOptions{} (the limits come from CheckOptions)
};

/// Graphs and settings from the command line and the config file; the
/// baseline path goes to `baseline_path`. Precedence per setting: the config
/// entry, the command line, the config defaults, the built-in default.
/// Throws InputError (kExitUsage) when no graph is given, a budget is
/// missing or two graphs share a key.
std::vector<CheckTarget> ResolveTargets(const CheckOptions& options, std::string* baseline_path);

/// The outcome for one graph.
struct GraphCheck {
  CheckTarget target;
  PeakRecord now;
  std::optional<PeakRecord> baseline;  ///< the entry compared with, if any
  std::string infeasible;              ///< plan mode: why no plan fits
  bool over_budget = false;
  bool regressed = false;  ///< grew by more than allowed (never with update_baseline)
  int64_t delta = 0;       ///< now.peak_bytes - baseline peak; 0 without baseline
  int64_t allowed = 0;     ///< bytes the tolerance allows over the baseline
  bool failed() const { return over_budget || regressed; }
};

/// Change of one category at the peak, baseline -> now.
struct CategoryDelta {
  Category category;
  int64_t before = 0, now = 0;
};
/// Categories that changed, largest growth first (ties: category order).
std::vector<CategoryDelta> CategoryDeltas(const PeakRecord& before, const PeakRecord& now);

/// A tensor live at the peak now, against the baseline's record of it.
struct TensorDelta {
  const PeakTensor* now;
  int64_t before = 0;        ///< bytes in the baseline's list; 0 when absent
  bool in_baseline = false;  ///< false: not among the baseline's largest at its peak
};
/// Tensors of now.top_tensors that grew (or are new at the peak), most growth
/// first (ties: name), at most `limit`.
std::vector<TensorDelta> GrownTensors(const PeakRecord& before, const PeakRecord& now,
                                      size_t limit);

/// Runs the check: report on `out` (verdict first), GitHub workflow commands
/// on `err` when annotating, then the summary, JUnit and baseline files.
/// Returns kExitOk when every graph passes, kExitCheckFailed otherwise. Bad
/// input throws InputError (exit 2 or 4), unreadable files IoError; a
/// missing baseline file or key is an error unless update_baseline.
int RunCheck(const CheckOptions& options, std::ostream& out, std::ostream& err);

}  // namespace ckptplan

#endif  // CKPTPLAN_CHECK_H_

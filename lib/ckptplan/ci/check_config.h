// Settings of `ckptplan check`: the tolerance, and the small JSON config file
// (schemas/check-config.schema.json) that lists several graphs with their own
// budget, reserve, tolerance and baseline key.
#ifndef CKPTPLAN_CHECK_CONFIG_H_
#define CKPTPLAN_CHECK_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ckptplan/ingest/loader.h"

namespace ckptplan {

/// How far a peak may grow over its baseline before `check` fails: a
/// percentage of the baseline peak, or a number of bytes.
struct Tolerance {
  bool is_percent = false;
  double percent = 0;  ///< when is_percent, >= 0
  int64_t bytes = 0;   ///< otherwise, >= 0
  /// Bytes a peak may exceed `baseline_peak` by: floor(percent / 100 x
  /// baseline_peak), or `bytes`.
  int64_t Allowed(int64_t baseline_peak) const;
  /// "2%", "256.0 MiB", "0 B".
  std::string ToString() const;
};
/// Parses "2%", "0.5%", "256MiB", "0". Throws InputError (kExitUsage) naming
/// `what` on anything else or a negative value.
Tolerance ParseTolerance(std::string_view text, std::string_view what);

/// Settings a graph may set; unset ones fall back to the next level.
struct CheckSettings {
  std::optional<int64_t> budget_bytes;
  std::optional<int64_t> reserve_bytes;
  std::optional<Tolerance> tolerance;
  std::optional<bool> no_plan;
  /// How to load the graph, as a plan file's "load" (limits not included).
  std::optional<LoadOptions> load;
};

struct ConfigGraph {
  std::string graph;  ///< path as written in the config
  std::string path;   ///< resolved against the config file's folder
  std::string key;    ///< empty: use `graph`
  CheckSettings settings;
};

struct CheckConfig {
  std::string baseline_path;  ///< resolved like graph paths; empty: none
  CheckSettings defaults;
  std::vector<ConfigGraph> graphs;
};

/// Parses a config file's text; relative paths in it are taken from
/// `folder` (the config file's folder; empty: the working directory).
/// Collects every problem and throws one InputError (exit 4) naming `source`.
CheckConfig ParseCheckConfig(std::string_view text, const std::string& source,
                             const std::string& folder);
/// Reads the config file at `path`; IoError when it cannot be read.
CheckConfig ReadCheckConfig(const std::string& path);

}  // namespace ckptplan

#endif  // CKPTPLAN_CHECK_CONFIG_H_

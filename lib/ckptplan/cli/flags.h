// The CLI edge: flags every graph-reading subcommand shares, registered once
// and parsed into typed values (enums, maps, std::optional for "not given").
// Nothing below this layer names a flag; messages that need one are finished
// here (LoadErrorHint).
#ifndef CKPTPLAN_FLAGS_H_
#define CKPTPLAN_FLAGS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ckptplan/ingest/loader.h"

namespace CLI {
class App;
}

namespace ckptplan {

/// The load flags as given: each setting is unset (std::nullopt, or an
/// empty map) unless its flag was on the command line, so a plan file's
/// recorded settings can fill the rest (ResolveLoad).
struct LoadFlags {
  std::map<std::string, int64_t> dims;                       ///< --dim NAME=N
  std::map<std::string, std::vector<int64_t>> input_shapes;  ///< --input-shape NAME:AxB
  std::optional<std::vector<std::string>> frozen;            ///< --frozen GLOB (repeatable)
  std::optional<Precision> precision;                        ///< --precision
  std::optional<Optimizer> optimizer;                        ///< --optimizer
  const DeviceSpec* device = nullptr;                        ///< --device; nullptr: not given
  std::optional<OptimizerImpl> optimizer_impl;               ///< --optimizer-impl
  std::optional<LossKind> loss;                              ///< --loss
  std::optional<int> dropout_mask_bytes;                     ///< --dropout-mask-bytes
  Limits limits;  ///< --max-nodes, --max-tensors, --max-depth (never recorded)
  /// Whether any flag but the limits was given.
  bool AnySetting() const {
    return !dims.empty() || !input_shapes.empty() || frozen || precision || optimizer || device ||
           optimizer_impl || loss || dropout_mask_bytes;
  }
};

/// Adds --dim, --input-shape, --frozen, --precision, --optimizer, --device,
/// --optimizer-impl, --loss, --dropout-mask-bytes and the limit flags to `command`, filling `flags`. Bad values are CLI11
/// validation errors (exit kExitUsage).
void AddLoadFlags(CLI::App* command, LoadFlags* flags);

/// The settings to load with: `recorded` (a plan file's, if any) with every
/// flag given overriding it; defaults for what neither sets. Each override
/// that changes a recorded value is one line in `conflicts` ("--dim seq=128
/// overrides seq=64 recorded in PLAN").
LoadOptions ResolveLoad(const LoadFlags& flags, const std::optional<LoadOptions>& recorded,
                        std::vector<std::string>* conflicts);

/// The flags that would fix a load error, for a line after its message:
/// "bind them with --dim batch=N --dim seq=N"; empty when no flag helps.
std::string LoadErrorHint(const UnresolvedShapesError& error);

/// Parses "NAME=N" (--dim) and "NAME:AxBxC" (--input-shape). Throw
/// InputError (kExitUsage) naming the flag.
std::pair<std::string, int64_t> ParseDimFlag(const std::string& arg);
/// Parses --max-error: a fraction ("0.01") or a percentage ("1%"), finite
/// and >= 0. Throws InputError (kExitUsage) naming the flag.
double ParseMaxErrorFlag(const std::string& arg);
std::pair<std::string, std::vector<int64_t>> ParseInputShapeFlag(const std::string& arg);

/// The `check` flag that sets a CheckOptions field ("update_baseline" ->
/// "--update-baseline", "baseline_path" -> "--baseline", "config_path" ->
/// "--config"): the CLI's CheckOptions::field_name.
std::string CheckFlagName(const std::string& field);

}  // namespace ckptplan

#endif  // CKPTPLAN_FLAGS_H_

// One entry point for every input format; each returns the same Graph.
#ifndef CKPTPLAN_LOADER_H_
#define CKPTPLAN_LOADER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ckptplan/ir/graph.h"
#include "ckptplan/base/limits.h"

namespace ckptplan {

/// How the optimizer step runs, which decides its temporaries (ONNX input).
enum class OptimizerImpl : uint8_t {
  kForLoop,  ///< one parameter at a time (PyTorch's default on CPU)
  kForeach,  ///< multi-tensor over the whole group (PyTorch's default on CUDA)
  kFused,    ///< one fused kernel, no temporaries
};

/// A loss appended to an ONNX graph that ends at its logits.
enum class LossKind : uint8_t {
  kCrossEntropy,  ///< softmax cross-entropy over the last dim, int64 targets
  kMean,          ///< the mean of the output
  kNone,          ///< train on the output as it is, without a warning
};

/// Parse the flag values; throw InputError (kExitUsage) naming the flag.
OptimizerImpl ParseOptimizerImpl(std::string_view name);
LossKind ParseLossKind(std::string_view name);

/// Format-specific settings; a loader ignores what it does not use.
struct LoadOptions {
  Limits limits;  ///< caps on counts, nesting and bytes (every format)
  // ONNX models (onnx_loader.h); the JSON format carries these in the file.
  std::vector<std::string> dims;          ///< --dim NAME=VALUE
  std::vector<std::string> input_shapes;  ///< --input-shape NAME:AxBxC
  std::vector<std::string> frozen;        ///< --frozen glob on initializer names
  std::string precision = "fp32";         ///< fp32, bf16-mixed, fp16-mixed
  std::string optimizer = "adamw";        ///< adamw, adam, sgd, sgd-momentum, none
  std::string device = "h100";            ///< roofline preset (device.h)
  /// --optimizer-impl; unset: what current PyTorch picks on `device`
  /// (for-loop on cpu, foreach on the GPU presets).
  std::optional<OptimizerImpl> optimizer_impl;
  /// --loss; unset: none appended, and a warning when the graph ends at logits.
  std::optional<LossKind> loss;
  /// --dropout-mask-bytes: 1 (a bool mask, native_dropout) or 4 (a float
  /// mask, CPU eager F.dropout).
  int dropout_mask_bytes = 1;
};

/// A loaded graph and the digest of the bytes it came from.
struct LoadedGraph {
  Graph graph;
  std::string sha256;
};

/// Loads `path` by its extension: ".onnx" for ONNX, anything else as the
/// JSON graph format. Throws InputError or IoError naming the file.
LoadedGraph LoadGraph(const std::string& path, const LoadOptions& options);

}  // namespace ckptplan

#endif  // CKPTPLAN_LOADER_H_

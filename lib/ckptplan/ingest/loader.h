// One entry point for every input format; each returns the same Graph.
#ifndef CKPTPLAN_LOADER_H_
#define CKPTPLAN_LOADER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ckptplan/base/errors.h"
#include "ckptplan/base/limits.h"
#include "ckptplan/ir/device.h"
#include "ckptplan/ir/graph.h"

namespace ckptplan {

/// Training precision an ONNX forward model is trained in.
enum class Precision : uint8_t { kFp32, kBf16Mixed, kFp16Mixed };
/// Optimizer whose state an ONNX forward model's training step holds.
enum class Optimizer : uint8_t { kAdamW, kAdam, kSgd, kSgdMomentum, kNone };

/// "fp32", "bf16-mixed", "fp16-mixed".
std::string_view ToString(Precision precision);
/// "adamw", "adam", "sgd", "sgd-momentum", "none".
std::string_view ToString(Optimizer optimizer);
/// False when `name` is not one of the names above.
bool ParsePrecision(std::string_view name, Precision* precision);
bool ParseOptimizer(std::string_view name, Optimizer* optimizer);
/// Every value, in declaration order (for help text and the plan file).
std::vector<Precision> AllPrecisions();
std::vector<Optimizer> AllOptimizers();

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

/// "for-loop", "foreach", "fused" / "cross-entropy", "mean", "none".
std::string_view ToString(OptimizerImpl impl);
std::string_view ToString(LossKind loss);
/// False when `name` is not one of the names above.
bool ParseOptimizerImpl(std::string_view name, OptimizerImpl* impl);
bool ParseLossKind(std::string_view name, LossKind* loss);
std::vector<OptimizerImpl> AllOptimizerImpls();
std::vector<LossKind> AllLossKinds();

/// Format-specific settings; a loader ignores what it does not use. Values
/// arrive parsed (the CLI edge turns text into these types).
struct LoadOptions {
  Limits limits;  ///< caps on counts, nesting and bytes (every format)
  // ONNX models (onnx_loader.h); the JSON format carries these in the file.
  std::map<std::string, int64_t> dims;  ///< symbolic dim name -> size (> 0)
  std::map<std::string, std::vector<int64_t>> input_shapes;  ///< graph input -> shape
  std::vector<std::string> frozen;  ///< glob patterns on initializer names
  Precision precision = Precision::kFp32;
  Optimizer optimizer = Optimizer::kAdamW;
  const DeviceSpec* device = &FindDevice("h100");  ///< roofline preset, never null
  /// --optimizer-impl; unset: what current PyTorch picks on `device`
  /// (for-loop on cpu, foreach on the GPU presets).
  std::optional<OptimizerImpl> optimizer_impl;
  /// --loss; unset: none appended, and a warning when the graph ends at logits.
  std::optional<LossKind> loss;
  /// Appended to that warning: how the caller sets `loss` (the CLI names its
  /// flag); empty: nothing appended.
  std::string loss_hint;
  /// --dropout-mask-bytes: 1 (a bool mask, native_dropout) or 4 (a float
  /// mask, CPU eager F.dropout).
  int dropout_mask_bytes = 1;
};

/// An ONNX model whose shapes cannot all be resolved because graph inputs
/// are unbound. The message lists every unresolved tensor; the fields say
/// what would bind them, so the caller can name its own way to set them.
class UnresolvedShapesError : public InputError {
 public:
  UnresolvedShapesError(const std::string& message, std::vector<std::string> unbound_dims,
                        std::vector<std::string> unshaped_inputs)
      : InputError(message),
        unbound_dims(std::move(unbound_dims)),
        unshaped_inputs(std::move(unshaped_inputs)) {}
  std::vector<std::string> unbound_dims;     ///< symbolic dim names, sorted, unique
  std::vector<std::string> unshaped_inputs;  ///< graph inputs with no shape or nameless dims
};

/// A loaded graph and the digest of the bytes it came from.
struct LoadedGraph {
  Graph graph;
  std::string sha256;
};

/// True when LoadGraph reads `path` as ONNX (by its ".onnx" extension), the
/// only format that uses LoadOptions beyond the limits.
bool IsOnnxPath(const std::string& path);

/// Loads `path` by its extension: ".onnx" for ONNX, anything else as the
/// JSON graph format. Throws InputError or IoError naming the file.
LoadedGraph LoadGraph(const std::string& path, const LoadOptions& options);

}  // namespace ckptplan

#endif  // CKPTPLAN_LOADER_H_

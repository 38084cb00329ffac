#include "ckptplan/ingest/loader.h"

#include "ckptplan/base/errors.h"
#include "ckptplan/ingest/json_loader.h"
#include "ckptplan/ingest/onnx_loader.h"

namespace ckptplan {
namespace {

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

constexpr std::string_view kPrecisionNames[] = {"fp32", "bf16-mixed", "fp16-mixed"};
constexpr std::string_view kOptimizerNames[] = {"adamw", "adam", "sgd", "sgd-momentum", "none"};
constexpr std::string_view kOptimizerImplNames[] = {"for-loop", "foreach", "fused"};
constexpr std::string_view kLossNames[] = {"cross-entropy", "mean", "none"};

template <typename Enum, size_t N>
bool ParseName(std::string_view name, const std::string_view (&names)[N], Enum* value) {
  for (size_t i = 0; i < N; ++i) {
    if (name == names[i]) {
      *value = static_cast<Enum>(i);
      return true;
    }
  }
  return false;
}

template <typename Enum, size_t N>
std::vector<Enum> AllOf(const std::string_view (&)[N]) {
  std::vector<Enum> all;
  for (size_t i = 0; i < N; ++i) all.push_back(static_cast<Enum>(i));
  return all;
}

}  // namespace

std::string_view ToString(Precision precision) {
  return kPrecisionNames[static_cast<size_t>(precision)];
}
std::string_view ToString(Optimizer optimizer) {
  return kOptimizerNames[static_cast<size_t>(optimizer)];
}
bool ParsePrecision(std::string_view name, Precision* precision) {
  return ParseName(name, kPrecisionNames, precision);
}
bool ParseOptimizer(std::string_view name, Optimizer* optimizer) {
  return ParseName(name, kOptimizerNames, optimizer);
}
std::vector<Precision> AllPrecisions() { return AllOf<Precision>(kPrecisionNames); }
std::vector<Optimizer> AllOptimizers() { return AllOf<Optimizer>(kOptimizerNames); }

std::string_view ToString(OptimizerImpl impl) {
  return kOptimizerImplNames[static_cast<size_t>(impl)];
}
std::string_view ToString(LossKind loss) { return kLossNames[static_cast<size_t>(loss)]; }
bool ParseOptimizerImpl(std::string_view name, OptimizerImpl* impl) {
  return ParseName(name, kOptimizerImplNames, impl);
}
bool ParseLossKind(std::string_view name, LossKind* loss) {
  return ParseName(name, kLossNames, loss);
}
std::vector<OptimizerImpl> AllOptimizerImpls() {
  return AllOf<OptimizerImpl>(kOptimizerImplNames);
}
std::vector<LossKind> AllLossKinds() { return AllOf<LossKind>(kLossNames); }

bool IsOnnxPath(const std::string& path) { return EndsWith(path, ".onnx"); }

LoadedGraph LoadGraph(const std::string& path, const LoadOptions& options) {
  if (IsOnnxPath(path)) return LoadOnnxGraph(path, options);
  LoadedGraph loaded;
  loaded.graph = LoadJsonGraph(path, options.limits, &loaded.sha256);
  return loaded;
}

}  // namespace ckptplan

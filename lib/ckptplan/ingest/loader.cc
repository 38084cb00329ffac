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

}  // namespace

OptimizerImpl ParseOptimizerImpl(std::string_view name) {
  if (name == "for-loop") return OptimizerImpl::kForLoop;
  if (name == "foreach") return OptimizerImpl::kForeach;
  if (name == "fused") return OptimizerImpl::kFused;
  throw InputError("--optimizer-impl: unknown implementation '" + std::string(name) +
                       "' (expected for-loop, foreach or fused)",
                   kExitUsage);
}

LossKind ParseLossKind(std::string_view name) {
  if (name == "cross-entropy") return LossKind::kCrossEntropy;
  if (name == "mean") return LossKind::kMean;
  if (name == "none") return LossKind::kNone;
  throw InputError("--loss: unknown loss '" + std::string(name) +
                       "' (expected cross-entropy, mean or none)",
                   kExitUsage);
}

LoadedGraph LoadGraph(const std::string& path, const LoadOptions& options) {
  if (EndsWith(path, ".onnx")) return LoadOnnxGraph(path, options);
  LoadedGraph loaded;
  loaded.graph = LoadJsonGraph(path, options.limits, &loaded.sha256);
  return loaded;
}

}  // namespace ckptplan

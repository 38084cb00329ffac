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

LoadedGraph LoadGraph(const std::string& path, const LoadOptions& options) {
  if (EndsWith(path, ".onnx")) return LoadOnnxGraph(path, options);
  LoadedGraph loaded;
  loaded.graph = LoadJsonGraph(path, options.limits, &loaded.sha256);
  return loaded;
}

}  // namespace ckptplan

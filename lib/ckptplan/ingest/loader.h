// One entry point for every input format; each returns the same Graph.
#ifndef CKPTPLAN_LOADER_H_
#define CKPTPLAN_LOADER_H_

#include <string>
#include <vector>

#include "ckptplan/ir/graph.h"
#include "ckptplan/base/limits.h"

namespace ckptplan {

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

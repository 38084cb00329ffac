// One entry point for every input format; each returns the same Graph.
#ifndef CKPTPLAN_LOADER_H_
#define CKPTPLAN_LOADER_H_

#include <string>

#include "ckptplan/graph.h"
#include "ckptplan/limits.h"

namespace ckptplan {

/// Format-specific settings; a loader ignores what it does not use.
struct LoadOptions {
  Limits limits;  ///< caps on counts, nesting and bytes (every format)
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

// Reads an ONNX forward model and derives the training step from it.
//
// Forward nodes come from the ONNX graph in its (topological) order; constant
// and shape computations whose values are known at load time are folded into
// buffers. Trainable parameters are the floating-point initializers that
// receive a gradient (minus --frozen patterns); other initializers are
// buffers. The backward is synthesised in reverse order from the per-op rule
// table (op_rules.h): each backward node reads its outputs' gradients and the
// tensors the rule saves, and makes its inputs' gradients (accumulated
// in place when a tensor has several consumers). View ops alias their input.
// Models that already hold a backward (ONNX Runtime training graphs, whose
// gradients end in "_grad") keep it. Weights are never read: external data
// files are not opened, sizes come from each initializer's dims + data_type.
#ifndef CKPTPLAN_ONNX_LOADER_H_
#define CKPTPLAN_ONNX_LOADER_H_

#include <string>
#include <string_view>

#include "ckptplan/ir/graph.h"
#include "ckptplan/ingest/loader.h"

namespace ckptplan {

/// Parses the bytes of an .onnx file; `source` names it in messages. Throws
/// InputError (kExitBadInput) for files that are not ONNX models, truncated
/// files and unresolved shapes, and InputError (kExitUsage) for bad flags.
Graph ParseOnnxGraph(std::string_view bytes, const std::string& source,
                     const LoadOptions& options);

/// Maps the file at `path` (no copy of its bytes), digests and parses it.
/// Throws IoError when it cannot be read.
LoadedGraph LoadOnnxGraph(const std::string& path, const LoadOptions& options);

}  // namespace ckptplan

#endif  // CKPTPLAN_ONNX_LOADER_H_

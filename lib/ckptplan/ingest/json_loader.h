// Reads the JSON training graph format v1 (schemas/graph.schema.json).
#ifndef CKPTPLAN_JSON_LOADER_H_
#define CKPTPLAN_JSON_LOADER_H_

#include <string>
#include <string_view>

#include "ckptplan/ir/graph.h"
#include "ckptplan/base/limits.h"

namespace ckptplan {

/// Parses `text` as a graph; `source` names it in messages. Collects every
/// schema or consistency problem and throws one InputError listing them.
/// Input over `limits` (nesting depth, counts, total bytes) is an InputError.
Graph ParseJsonGraph(std::string_view text, const std::string& source,
                     const Limits& limits = Limits());

/// Reads and parses the file at `path`. Throws IoError when it cannot be read.
/// A regular file is read in pieces, never held whole in memory. Sets
/// *sha256_hex, when given, to the file's SHA-256.
Graph LoadJsonGraph(const std::string& path, const Limits& limits = Limits(),
                    std::string* sha256_hex = nullptr);

}  // namespace ckptplan

#endif  // CKPTPLAN_JSON_LOADER_H_

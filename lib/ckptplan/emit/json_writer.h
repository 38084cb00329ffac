// Writes a Graph as JSON graph format v1, the inverse of json_loader.
#ifndef CKPTPLAN_JSON_WRITER_H_
#define CKPTPLAN_JSON_WRITER_H_

#include <string>

#include "ckptplan/ir/graph.h"

namespace ckptplan {

/// One tensor or node per line; LoadJsonGraph(GraphToJson(g)) equals g.
std::string GraphToJson(const Graph& graph);

}  // namespace ckptplan

#endif  // CKPTPLAN_JSON_WRITER_H_

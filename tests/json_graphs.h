// The JSON texts of small test graphs, read through the real loader.
#ifndef CKPTPLAN_TESTS_JSON_GRAPHS_H_
#define CKPTPLAN_TESTS_JSON_GRAPHS_H_

#include <string>

#include "ckptplan/ingest/json_loader.h"
#include "ir_graphs.h"

namespace ckptplan::testing {

inline Graph FromJson(const std::string& text) { return ParseJsonGraph(text, "test.json"); }

// ir_graphs.h's ChainGraph() as JSON (json_loader_test checks they agree).
inline const char* kChainGraph = R"({"format":"ckptplan.graph","version":1,
"training":{"optimizer":"adam"},
"tensors":[{"id":"x","bytes":100,"kind":"input"},{"id":"w","bytes":8,"kind":"parameter"},
 {"id":"a","bytes":1000},{"id":"b","bytes":2000},{"id":"loss","bytes":4},
 {"id":"db","bytes":2000},{"id":"da","bytes":1000},{"id":"dw","bytes":8,"kind":"gradient"}],
"nodes":[{"id":"f","op":"matmul","phase":"forward","inputs":["x","w"],"outputs":["a"],"flops":100},
 {"id":"g","op":"matmul","phase":"forward","inputs":["a"],"outputs":["b"],"flops":200},
 {"id":"h","op":"loss","phase":"forward","inputs":["b"],"outputs":["loss"],"flops":10},
 {"id":"h_bwd","op":"loss_bwd","phase":"backward","inputs":["b"],"outputs":["db"],"flops":10},
 {"id":"g_bwd","op":"mm_bwd","phase":"backward","inputs":["db","a"],"outputs":["da"],"flops":400},
 {"id":"f_bwd","op":"mm_bwd","phase":"backward","inputs":["da","x"],"outputs":["dw"],"flops":200},
 {"id":"opt","op":"adam","phase":"optimizer","inputs":["w","dw"],"outputs":[]}]})";

}  // namespace ckptplan::testing

#endif  // CKPTPLAN_TESTS_JSON_GRAPHS_H_

// Test helper: a tiny graph from a few lines of text, through the real JSON
// loader.
//   "T a 100"            activation tensor 'a' of 100 bytes
//   "T x 10 input"       tensor of another kind
//   "F f1 relu x -> a 5" forward node: op, inputs, '->', outputs, flops
//   "B g relu_bwd da a -> dx 5"  backward node; "O ..." optimizer node
// Lines are separated by ';' or newlines; inputs/outputs by spaces.
#ifndef CKPTPLAN_TESTS_TINY_GRAPH_H_
#define CKPTPLAN_TESTS_TINY_GRAPH_H_

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "ckptplan/ir/graph.h"
#include "ckptplan/ingest/json_loader.h"
#include "test_graphs.h"

namespace ckptplan::testing {

inline Graph TinyGraph(const std::string& text) {
  nlohmann::ordered_json root;
  root["format"] = "ckptplan.graph";
  root["version"] = 1;
  root["tensors"] = nlohmann::ordered_json::array();
  root["nodes"] = nlohmann::ordered_json::array();
  std::string normalized = text;
  for (char& c : normalized) {
    if (c == ';') c = '\n';
  }
  std::istringstream lines(normalized);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string kind;
    if (!(words >> kind)) continue;
    if (kind == "T") {
      std::string id, tensor_kind = "activation";
      int64_t bytes = 0;
      words >> id >> bytes >> tensor_kind;
      root["tensors"].push_back({{"id", id}, {"bytes", bytes}, {"kind", tensor_kind}});
      continue;
    }
    std::string id, op, word;
    words >> id >> op;
    nlohmann::ordered_json node{{"id", id}, {"op", op}};
    node["phase"] = kind == "F" ? "forward" : kind == "B" ? "backward" : "optimizer";
    node["inputs"] = nlohmann::ordered_json::array();
    node["outputs"] = nlohmann::ordered_json::array();
    bool outputs = false;
    std::string last;
    while (words >> word) {
      if (word == "->") {
        outputs = true;
      } else if (!outputs) {
        node["inputs"].push_back(word);
      } else {
        node["outputs"].push_back(word);
      }
    }
    // The last output word is the cost.
    auto& outs = node["outputs"];
    if (!outs.empty()) {
      node["flops"] = std::stod(outs.back().get<std::string>());
      outs.erase(outs.size() - 1);
    }
    root["nodes"].push_back(std::move(node));
  }
  return ParseJsonGraph(root.dump(), "tiny.json");
}

// x (10, input) -f1-> a (100) -f2-> b (100) -f3-> c (100) -> loss (4);
// backward reads c (f3_bwd), b (f2_bwd), a (f1_bwd). f1 costs 5, f2 costs 1.
// Save-all peak 510 at f3_bwd.
inline constexpr const char* kTinyChain =
    "T x 10 input; T a 100; T b 100; T c 100; T l 4; T dc 100; T db 100; T da 100;"
    "F f1 relu x -> a 5; F f2 relu a -> b 1; F f3 relu b -> c 1; F s sum c -> l 1;"
    "B s_bwd sum_bwd l -> dc 1; B f3_bwd relu_bwd dc c -> db 1;"
    "B f2_bwd relu_bwd db b -> da 1; B f1_bwd relu_bwd da a -> 1";

/// An approximate-recompute option of a node: `rank`, its re-run cost
/// `flops`, gradient error `error`; `workspace` -1 keeps the node's own
/// workspace, `factors` the bytes of the factors it keeps (ApproxOption).
inline ApproxOption ApproxOptionOf(int64_t rank, double flops, double error,
                                   int64_t workspace = -1, int64_t factors = 0) {
  ApproxOption option;
  option.rank = rank;
  option.flops = flops;
  option.error = error;
  option.workspace_bytes = workspace;
  option.factor_bytes = factors;
  return option;
}

}  // namespace ckptplan::testing

#endif  // CKPTPLAN_TESTS_TINY_GRAPH_H_

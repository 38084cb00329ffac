// The JSON graph reader against Limits (base/limits.h): counts, total bytes,
// node cost, shape rank, overflow.
#include <doctest/doctest.h>

#include <string>

#include "ckptplan/base/errors.h"
#include "ckptplan/base/limits.h"
#include "ckptplan/ingest/json_loader.h"
#include "json_graphs.h"

namespace ckptplan {
namespace {

// The message `text` is rejected with under `limits`; fails if accepted.
std::string Rejection(const std::string& text, const Limits& limits) {
  try {
    ParseJsonGraph(text, "big.json", limits);
  } catch (const InputError& e) {
    CHECK(e.exit_code() == kExitBadInput);
    return e.what();
  }
  FAIL("graph was accepted");
  return "";
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE("node and tensor counts over the limit are rejected, at the limit accepted") {
  Limits limits;
  limits.max_nodes = 7;  // kChainGraph has 7 nodes and 8 tensors
  limits.max_tensors = 8;
  CHECK_NOTHROW(ParseJsonGraph(testing::kChainGraph, "big.json", limits));
  limits.max_nodes = 6;
  // The library names no flag; a caller's hint ends the message.
  CHECK(Rejection(testing::kChainGraph, limits) ==
        "big.json: 7 nodes is over the limit of 6");
  limits.max_nodes_hint = "raise it with --max-nodes";
  CHECK(Contains(Rejection(testing::kChainGraph, limits),
                 "big.json: 7 nodes is over the limit of 6 (raise it with --max-nodes)"));
  limits.max_nodes = 7;
  limits.max_tensors = 7;
  limits.max_tensors_hint = "raise it with --max-tensors";
  CHECK(Contains(Rejection(testing::kChainGraph, limits),
                 "big.json: 8 tensors is over the limit of 7 (raise it with --max-tensors)"));
}

TEST_CASE("total bytes over the limit are rejected, at the limit accepted") {
  // kChainGraph: tensors 100 + 8 + 1000 + 2000 + 4 + 2000 + 1000 + 8 = 6120,
  // plus Adam state for 2 parameters x 8 B = 16: 6136 bytes in all.
  Limits limits;
  limits.max_total_bytes = 6136;
  CHECK_NOTHROW(ParseJsonGraph(testing::kChainGraph, "big.json", limits));
  limits.max_total_bytes = 6135;
  CHECK(Contains(Rejection(testing::kChainGraph, limits), "add up to more than the limit of"));
}

TEST_CASE("node cost and shape rank limits name the node and tensor") {
  Limits limits;
  limits.max_node_cost = 400;  // g_bwd costs 400 FLOPs, the most
  CHECK_NOTHROW(ParseJsonGraph(testing::kChainGraph, "big.json", limits));
  limits.max_node_cost = 399;
  CHECK(Contains(Rejection(testing::kChainGraph, limits),
                 "node 'g_bwd': cost 400 is over the limit of 399"));
  const std::string shaped = R"({"format":"ckptplan.graph","version":1,
    "tensors":[{"id":"x","shape":[2,3,4],"dtype":"float32","kind":"input"}],"nodes":[]})";
  limits = Limits();
  limits.max_rank = 3;
  CHECK(ParseJsonGraph(shaped, "big.json", limits).tensors[0].bytes == 96);  // 2*3*4 x 4 B
  limits.max_rank = 2;
  CHECK(Contains(Rejection(shaped, limits), "tensor 'x': shape has 3 dims, over the limit of 2"));
}

TEST_CASE("training sizes that overflow 64 bits are rejected, not wrapped") {
  // INT64_MAX parameters x 4 B (float32) and x 8 B (Adam) overflow int64.
  const std::string text = R"({"format":"ckptplan.graph","version":1,
    "training":{"optimizer":"adam","parameter_count":9223372036854775807},
    "tensors":[],"nodes":[]})";
  CHECK(Contains(Rejection(text, Limits()), "add up to more than the limit of 1.0 EiB"));
}

}  // namespace
}  // namespace ckptplan

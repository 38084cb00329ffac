#include "ckptplan/base/limits.h"

#include <doctest/doctest.h>

#include <string>

#include "ckptplan/base/errors.h"
#include "ckptplan/ingest/json_loader.h"
#include "ckptplan/sim/simulator.h"
#include "test_graphs.h"

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

TEST_CASE("CheckJsonDepth counts nesting outside strings only") {
  CHECK_NOTHROW(CheckJsonDepth("[[[]]]", 3, "a.json"));
  CHECK_THROWS_WITH_AS(CheckJsonDepth("[[[[]]]]", 3, "a.json"),
                       "a.json: JSON nests deeper than 3 levels at byte 3 (raise the limit "
                       "with --max-depth)",
                       InputError);
  // Brackets in strings, including after an escaped quote, are text.
  CHECK_NOTHROW(CheckJsonDepth(R"([{"k": "[[[[\"[[[["}])", 2, "a.json"));
  // An escaped backslash ends the escape: the quote after it closes the string.
  CHECK_THROWS_AS(CheckJsonDepth(R"(["\\", [[]]])", 2, "a.json"), InputError);
  // Unbalanced closers never go below zero.
  CHECK_NOTHROW(CheckJsonDepth("]]]][[", 2, "a.json"));
}

TEST_CASE("node and tensor counts over the limit are rejected, at the limit accepted") {
  Limits limits;
  limits.max_nodes = 7;  // kChainGraph has 7 nodes and 8 tensors
  limits.max_tensors = 8;
  CHECK_NOTHROW(ParseJsonGraph(testing::kChainGraph, "big.json", limits));
  limits.max_nodes = 6;
  CHECK(Contains(Rejection(testing::kChainGraph, limits),
                 "big.json: 7 nodes is over the limit of 6 (raise it with --max-nodes)"));
  limits.max_nodes = 7;
  limits.max_tensors = 7;
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

TEST_CASE("the largest accepted graph and reserve simulate without overflow") {
  // x 2^59 (input) + a 2^58 + loss 2^57 + da 2^57 = 2^60 bytes: the limit.
  const std::string text = R"({"format":"ckptplan.graph","version":1,
    "tensors":[{"id":"x","bytes":576460752303423488,"kind":"input"},
      {"id":"a","bytes":288230376151711744},{"id":"loss","bytes":144115188075855872},
      {"id":"da","bytes":144115188075855872}],
    "nodes":[{"id":"f","op":"f","phase":"forward","inputs":["x"],"outputs":["a"]},
      {"id":"l","op":"l","phase":"forward","inputs":["a"],"outputs":["loss"]},
      {"id":"lb","op":"lb","phase":"backward","inputs":["loss","a"],"outputs":["da"]}]})";
  Graph graph = ParseJsonGraph(text, "big.json");
  SimOptions options;
  options.reserve_bytes = kMaxReserveBytes;  // 2^62
  CHECK_NOTHROW(CheckReserve(options.reserve_bytes, "--reserve"));
  SimResult sim = Simulate(graph, SaveAll(graph), options);
  // At lb everything is live: 2^60 graph bytes + 2^62 reserve.
  CHECK(sim.peak_bytes == (int64_t{1} << 60) + (int64_t{1} << 62));
  // Recomputing a: the original is freed after l and a copy is made before
  // lb, so lb again holds x + a + loss + da + reserve = 2^60 + 2^62.
  SaveSet keep = SaveAll(graph);
  keep[testing::Id(graph, "a")] = 0;
  CHECK(Simulate(graph, keep, options).peak_bytes == (int64_t{1} << 60) + (int64_t{1} << 62));
}

TEST_CASE("CheckReserve rejects reserves over 2^62 as a usage error") {
  try {
    CheckReserve(kMaxReserveBytes + 1, "--reserve");
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(e.exit_code() == kExitUsage);
    CHECK(Contains(e.what(), "--reserve: reserve 4.0 EiB is over the limit of 4.0 EiB"));
  }
}

}  // namespace
}  // namespace ckptplan

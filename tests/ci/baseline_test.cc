#include "ckptplan/ci/baseline.h"

#include <doctest/doctest.h>

#include "ckptplan/base/errors.h"
#include "ckptplan/ingest/json_loader.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {
namespace {

// x (input, 1000 B) and w (parameter, 100 B) are resident. fc makes h
// (1000 B), act makes y (10 B); act_bwd reads both, so both are saved, and
// makes dh (50 B); fc_bwd makes the gradient dw (100 B).
const char* kGraph = R"({"format": "ckptplan.graph", "version": 1,
 "tensors": [{"id": "x", "bytes": 1000, "kind": "input"},
             {"id": "w", "bytes": 100, "kind": "parameter"},
             {"id": "h", "bytes": 1000}, {"id": "y", "bytes": 10}, {"id": "dh", "bytes": 50},
             {"id": "dw", "bytes": 100, "kind": "gradient"}],
 "nodes": [
  {"id": "fc", "op": "matmul", "scope": "blk/fc", "phase": "forward", "inputs": ["x", "w"], "outputs": ["h"], "flops": 100},
  {"id": "act", "op": "gelu", "scope": "blk/act", "phase": "forward", "inputs": ["h"], "outputs": ["y"], "flops": 10},
  {"id": "act_bwd", "op": "gelu_bwd", "scope": "blk/act", "phase": "backward", "inputs": ["h", "y"], "outputs": ["dh"], "flops": 20},
  {"id": "fc_bwd", "op": "matmul_bwd", "scope": "blk/fc", "phase": "backward", "inputs": ["dh", "x"], "outputs": ["dw"], "flops": 200}]})";

PeakRecord Record() {
  Graph graph = ParseJsonGraph(kGraph, "g.json");
  SimOptions options;
  options.record_categories = true;
  PeakRecord record = MakePeakRecord(graph, Simulate(graph, SaveAll(graph), options), 2);
  record.graph = "g.json";
  record.graph_sha256 = "abc";
  record.mode = "save-all";
  record.budget_bytes = 4096;
  return record;
}

TEST_CASE("peak record: where the peak is, its breakdown and largest tensors") {
  PeakRecord record = Record();
  // Peak at act_bwd (step 2): x 1000 + w 100 + h 1000 + y 10 + dh 50 = 2160.
  CHECK(record.peak_bytes == 2160);
  CHECK(record.peak_step == 2);
  CHECK(record.peak_node == "act_bwd");
  CHECK(record.peak_op == "gelu_bwd");
  CHECK(record.peak_scope == "blk/act");
  CHECK(record.peak_phase == "backward");
  auto at = [&](Category c) { return record.breakdown[static_cast<size_t>(c)]; };
  CHECK(at(Category::kParameters) == 100);
  CHECK(at(Category::kInputs) == 1000);
  CHECK(at(Category::kSavedActivations) == 1010);  // h 1000 + y 10
  CHECK(at(Category::kTemporaries) == 50);         // dh
  CHECK(at(Category::kGradients) == 0);            // dw comes one step later
  // Top 2 storages live at the peak (resident state is not listed): h 1000
  // from fc, then dh 50 from act_bwd; y (10) is cut by the limit.
  REQUIRE(record.top_tensors.size() == 2);
  CHECK(record.top_tensors[0].tensor == "h");
  CHECK(record.top_tensors[0].bytes == 1000);
  CHECK(record.top_tensors[0].node == "fc");
  CHECK(record.top_tensors[0].op == "matmul");
  CHECK(record.top_tensors[0].scope == "blk/fc");
  CHECK(record.top_tensors[0].category == Category::kSavedActivations);
  CHECK(record.top_tensors[1].tensor == "dh");
  CHECK(record.top_tensors[1].category == Category::kTemporaries);
}

TEST_CASE("baseline text round-trips byte for byte") {
  Baseline baseline;
  baseline["b"] = Record();
  baseline["a"] = Record();
  baseline["a"].graph = "other.json";
  std::string text = BaselineText(baseline);
  Baseline read = ParseBaseline(text, "memory-baseline.json");
  REQUIRE(read.size() == 2);
  CHECK(read.begin()->first == "a");  // keys sorted
  CHECK(read["b"].peak_bytes == 2160);
  CHECK(read["b"].top_tensors[0].scope == "blk/fc");
  CHECK(BaselineText(read) == text);
}

TEST_CASE("corrupt baseline: every problem listed, with the fix") {
  std::string message;
  try {
    ParseBaseline(R"({"format": "ckptplan.baseline", "version": 2,
      "graphs": {"m": {"graph": "m.json", "peak_bytes": "big", "peak_breakdown": {"vram": 1}}}})",
                  "mb.json");
  } catch (const InputError& e) {
    message = e.what();
    CHECK(e.exit_code() == kExitBadInput);
  }
  CHECK(message.find("mb.json: \"version\" must be 1, got 2") != std::string::npos);
  CHECK(message.find("mb.json: graph 'm': \"peak_bytes\" must be an integer number of bytes, got "
                     "\"big\"") != std::string::npos);
  CHECK(message.find("graph 'm': peak_breakdown: unknown category 'vram'") != std::string::npos);
  CHECK(message.find("graph 'm': missing \"mode\"") != std::string::npos);
  // The library names no flag: `check` adds how to regenerate the file.
  CHECK(message.find("corrupt baseline: fix the problems above") != std::string::npos);
  CHECK(message.find("--update-baseline") == std::string::npos);

  CHECK_THROWS_WITH_AS(ParseBaseline("{\"format\": \"ckptplan.base", "mb.json"),
                       doctest::Contains("mb.json: corrupt baseline: malformed JSON at byte"),
                       InputError);
}

TEST_CASE("missing baseline file is an I/O error naming it") {
  CHECK_THROWS_WITH_AS(ReadBaseline("/nonexistent/mb.json"),
                       doctest::Contains("/nonexistent/mb.json"), IoError);
}

}  // namespace
}  // namespace ckptplan

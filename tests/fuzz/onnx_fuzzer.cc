// Fuzzes the ONNX loader (protobuf parse, weight skipping, shape inference,
// backward synthesis), then simulates and summarizes every graph it accepts.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ckptplan/base/errors.h"
#include "ckptplan/ingest/loader.h"
#include "ckptplan/ingest/onnx_loader.h"
#include "ckptplan/emit/report.h"
#include "ckptplan/sim/simulator.h"

using namespace ckptplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  LoadOptions options;
  Graph graph;
  try {
    graph = ParseOnnxGraph(bytes, "fuzz.onnx", options);
  } catch (const InputError&) {
    return 0;
  }
  SimOptions sim_options;
  sim_options.record_categories = true;
  const SimResult sim = Simulate(graph, SaveAll(graph), sim_options);
  const LowerBound bound = ComputeLowerBound(graph, 0);
  if (sim.peak_bytes < 0 || bound.bytes < 0) __builtin_trap();
  // ONNX names may hold any bytes: the summaries escape them (text) or
  // replace what is not UTF-8 (JSON), never throw.
  const SaveSet keep = SaveAll(graph);
  Summary summary{"simulate", "fuzz.onnx", -1, 0, &sim, &sim, &keep, bound, 5, false};
  for (char c : SummaryText(graph, summary)) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && c != '\n') || byte == 0x7f) __builtin_trap();
  }
  SummaryJson(graph, summary).dump(2, ' ', true, nlohmann::json::error_handler_t::replace);
  return 0;
}

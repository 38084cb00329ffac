// Fuzzes the ONNX loader (protobuf parse, weight skipping, shape inference,
// backward synthesis), then simulates every graph it accepts.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ckptplan/base/errors.h"
#include "ckptplan/ingest/loader.h"
#include "ckptplan/ingest/onnx_loader.h"
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
  return 0;
}

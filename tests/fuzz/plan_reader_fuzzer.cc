// Fuzzes the plan file reader (`simulate --plan`, `export`): its header, then
// the decisions against a fixed graph, then simulates whatever plan it accepts.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ckptplan/base/errors.h"
#include "ckptplan/ingest/json_loader.h"
#include "ckptplan/emit/plan_io.h"
#include "ckptplan/sim/simulator.h"

using namespace ckptplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Graph* graph =
      new Graph(LoadJsonGraph(CKPTPLAN_SOURCE_DIR "/sample_graphs/transformer_block.json"));
  std::string_view text(reinterpret_cast<const char*>(data), size);
  // The header ("graph"."file", "load") is read before any graph is loaded.
  try {
    PlanHeader header = ParsePlanHeader(text, "fuzz-plan.json");
    if (header.load && header.load->device == nullptr) __builtin_trap();
  } catch (const InputError&) {
  }
  LoadedPlan plan;
  try {
    plan = ParsePlan(*graph, text, "fuzz-plan.json");
  } catch (const InputError&) {
    return 0;
  }
  if (plan.keep.size() != graph->tensors.size()) __builtin_trap();
  SimOptions options;
  options.reserve_bytes = plan.reserve_bytes;
  options.record_categories = true;
  const SimResult sim = Simulate(*graph, plan.keep, options);
  if (sim.peak_bytes < plan.reserve_bytes) __builtin_trap();
  return 0;
}

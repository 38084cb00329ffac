#include "ckptplan/emit/trace.h"

#include "ckptplan/base/text_escape.h"
#include "ckptplan/emit/copy_lanes.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace ckptplan {
namespace {

using nlohmann::ordered_json;

// Trace lanes (thread ids), in display order.
enum Lane : int {
  kForwardLane = 1,
  kBackwardLane = 2,
  kRecomputeLane = 3,
  kOptimizerLane = 4,
  kToHostLane = 5,
  kToDeviceLane = 6
};
constexpr int kPid = 1;

void RequireCategories(const SimResult& sim, const char* what) {
  if (sim.by_category.size() != sim.steps.size()) {
    throw std::logic_error(std::string(what) + " needs a simulation with record_categories");
  }
}

int LaneOf(const Node& node, bool recompute) {
  if (recompute) return kRecomputeLane;
  switch (node.phase) {
    case Phase::kForward:
      return kForwardLane;
    case Phase::kBackward:
      return kBackwardLane;
    case Phase::kOptimizer:
      return kOptimizerLane;
  }
  return kBackwardLane;
}

ordered_json Metadata(const char* name, int tid, ordered_json args) {
  ordered_json event;
  event["name"] = name;
  event["ph"] = "M";
  event["ts"] = 0;
  event["pid"] = kPid;
  event["tid"] = tid;
  event["args"] = std::move(args);
  return event;
}

// `value` as JSON text; invalid UTF-8 in names (possible from ONNX) becomes
// U+FFFD instead of failing the run.
std::string Dump(const ordered_json& value) {
  return value.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

std::string Quoted(const std::string& text) { return Dump(ordered_json(text)); }

// Names are escaped as for a terminal (text_escape.h): a spreadsheet or a log
// shows the file.
std::string CsvField(const std::string& name) {
  const std::string text = ShowName(name);
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// The copies' slices, one per line, on the copy lanes.
void AppendCopies(const Graph& graph, const std::vector<CopySlice>& slices,
                  std::vector<std::string>* lines) {
  for (const CopySlice& slice : slices) {
    ordered_json event;
    event["name"] = graph.tensors[slice.tensor].name;
    event["cat"] = slice.to_host ? "copy_to_host" : "copy_to_device";
    event["ph"] = "X";
    event["ts"] = slice.begin_step;
    event["dur"] = slice.end_step - slice.begin_step;
    event["pid"] = kPid;
    event["tid"] = slice.to_host ? kToHostLane : kToDeviceLane;
    event["args"] = {{"bytes", slice.bytes},
                     {"host_bytes", slice.host_bytes},
                     {"start_us", slice.start_us},
                     {"end_us", slice.end_us}};
    lines->push_back(Dump(event));
  }
}

}  // namespace

std::string TraceJson(const Graph& graph, const SimResult& sim, const std::string& label,
                      const OffloadedGraph* offloaded) {
  RequireCategories(sim, "trace");
  const std::vector<CopySlice> copies =
      offloaded ? CopySlices(sim, *offloaded) : std::vector<CopySlice>();
  std::vector<ordered_json> events;
  events.push_back(
      Metadata("process_name", 0, {{"name", "ckptplan " + label + ": " + graph.source}}));
  const std::pair<int, const char*> kLanes[] = {{kForwardLane, "forward"},
                                                {kBackwardLane, "backward"},
                                                {kRecomputeLane, "recompute"},
                                                {kOptimizerLane, "optimizer"}};
  for (auto [tid, name] : kLanes) {
    events.push_back(Metadata("thread_name", tid, {{"name", name}}));
    events.push_back(Metadata("thread_sort_index", tid, {{"sort_index", tid}}));
  }
  if (!copies.empty()) {
    for (auto [tid, name] : {std::pair<int, const char*>{kToHostLane, "copy to host"},
                             {kToDeviceLane, "copy to device"}}) {
      events.push_back(Metadata("thread_name", tid, {{"name", name}}));
      events.push_back(Metadata("thread_sort_index", tid, {{"sort_index", tid}}));
    }
  }
  // Per-step events are written by hand: building a json object per event is
  // most of the run time at 10^5 steps.
  std::vector<std::string> category_keys;
  for (size_t c = 0; c < kNumCategories; ++c) {
    category_keys.push_back(Quoted(std::string(ToString(static_cast<Category>(c)))) + ":");
  }
  const std::string cost_unit = Quoted(std::string(ToString(graph.cost_unit)));
  std::vector<std::string> lines;
  for (const ordered_json& event : events) lines.push_back(Dump(event));
  for (uint32_t s = 0; s < sim.steps.size(); ++s) {
    const Node& node = graph.nodes[sim.steps[s].node];
    bool recompute = sim.steps[s].recompute;
    std::string ts = std::to_string(s);
    std::string slice =
        "{\"name\":" + Quoted(node.name) + ",\"cat\":\"" +
        (recompute ? std::string("recompute") : std::string(ToString(node.phase))) +
        "\",\"ph\":\"X\",\"ts\":" + ts + ",\"dur\":1,\"pid\":" + std::to_string(kPid) +
        ",\"tid\":" + std::to_string(LaneOf(node, recompute)) + ",\"args\":{\"step\":" + ts +
        ",\"op\":" + Quoted(node.op) + ",\"scope\":" + Quoted(node.scope) +
        ",\"cost\":" + ordered_json(graph.NodeCost(sim.steps[s].node)).dump() +
        ",\"cost_unit\":" + cost_unit + ",\"total_bytes\":" + std::to_string(sim.total[s]) + "}}";
    lines.push_back(std::move(slice));
    std::string counter = "{\"name\":\"memory\",\"ph\":\"C\",\"ts\":" + ts +
                          ",\"pid\":" + std::to_string(kPid) + ",\"tid\":0,\"args\":{";
    for (size_t c = 0; c < kNumCategories; ++c) {
      counter += category_keys[c] + std::to_string(sim.by_category[s][c]) + ",";
    }
    counter += "\"total\":" + std::to_string(sim.total[s]) + "}}";
    lines.push_back(std::move(counter));
  }
  AppendCopies(graph, copies, &lines);
  std::string out = "{\"traceEvents\":[\n";
  for (size_t i = 0; i < lines.size(); ++i) {
    out += lines[i];
    out += i + 1 < lines.size() ? ",\n" : "\n";
  }
  return out + "],\"displayTimeUnit\":\"ms\"}\n";
}

std::string TimelineCsv(const Graph& graph, const SimResult& sim) {
  RequireCategories(sim, "timeline csv");
  std::string out = "step,node,op,phase,recompute";
  for (size_t c = 0; c < kNumCategories; ++c) {
    out += ",";
    out += ToString(static_cast<Category>(c));
  }
  out += ",total\n";
  for (uint32_t s = 0; s < sim.steps.size(); ++s) {
    const Node& node = graph.nodes[sim.steps[s].node];
    out += std::to_string(s) + "," + CsvField(node.name) + "," + CsvField(node.op) + "," +
           std::string(ToString(node.phase)) + "," + (sim.steps[s].recompute ? "1" : "0");
    for (size_t c = 0; c < kNumCategories; ++c) out += "," + std::to_string(sim.by_category[s][c]);
    out += "," + std::to_string(sim.total[s]) + "\n";
  }
  return out;
}

}  // namespace ckptplan

#include "ckptplan/ci/baseline.h"

#include <nlohmann/json.hpp>

#include "ckptplan/base/errors.h"
#include "ckptplan/base/file_io.h"
#include "ckptplan/base/limits.h"
#include "ckptplan/base/problems.h"
#include "ckptplan/emit/report.h"

namespace ckptplan {

using nlohmann::json;
using nlohmann::ordered_json;

bool ParseCategory(std::string_view name, Category* category) {
  for (size_t c = 0; c < kNumCategories; ++c) {
    if (ToString(static_cast<Category>(c)) == name) {
      *category = static_cast<Category>(c);
      return true;
    }
  }
  return false;
}

PeakRecord MakePeakRecord(const Graph& graph, const SimResult& sim, size_t top) {
  PeakRecord record;
  record.peak_bytes = sim.peak_bytes;
  record.cost_unit = ToString(graph.cost_unit);
  record.recompute_cost = sim.recompute_cost;
  record.peak_step = sim.peak_step;
  if (!sim.steps.empty()) {
    const Node& node = graph.nodes[sim.steps[sim.peak_step].node];
    record.peak_node = node.name;
    record.peak_op = node.op;
    record.peak_scope = node.scope;
    record.peak_phase = ToString(node.phase);
    record.peak_recompute = sim.steps[sim.peak_step].recompute;
  }
  record.breakdown = CategoriesAt(sim, sim.peak_step);
  for (const LiveTensor& live : LiveAt(graph, sim, sim.peak_step, top)) {
    const Tensor& tensor = graph.tensors[live.tensor];
    PeakTensor entry{tensor.name, live.bytes, live.category, "", "", ""};
    if (tensor.producer != kNoId) {
      const Node& producer = graph.nodes[tensor.producer];
      entry.node = producer.name;
      entry.op = producer.op;
      entry.scope = producer.scope;
    }
    record.top_tensors.push_back(std::move(entry));
  }
  return record;
}

namespace {

ordered_json RecordJson(const PeakRecord& record) {
  ordered_json out;
  out["graph"] = record.graph;
  out["graph_sha256"] = record.graph_sha256;
  out["mode"] = record.mode;
  out["budget_bytes"] = record.budget_bytes;
  out["reserve_bytes"] = record.reserve_bytes;
  out["peak_bytes"] = record.peak_bytes;
  out["save_all_peak_bytes"] = record.save_all_peak_bytes;
  out["cost_unit"] = record.cost_unit;
  out["recompute_cost"] = record.recompute_cost;
  out["peak"] = {{"step", record.peak_step},   {"node", record.peak_node},
                 {"op", record.peak_op},       {"scope", record.peak_scope},
                 {"phase", record.peak_phase}, {"recompute", record.peak_recompute}};
  ordered_json breakdown = ordered_json::object();
  for (size_t c = 0; c < kNumCategories; ++c) {
    breakdown[std::string(ToString(static_cast<Category>(c)))] = record.breakdown[c];
  }
  out["peak_breakdown"] = std::move(breakdown);
  ordered_json tensors = ordered_json::array();
  for (const PeakTensor& tensor : record.top_tensors) {
    tensors.push_back({{"tensor", tensor.tensor},
                       {"bytes", tensor.bytes},
                       {"category", ToString(tensor.category)},
                       {"node", tensor.node},
                       {"op", tensor.op},
                       {"scope", tensor.scope}});
  }
  out["top_tensors"] = std::move(tensors);
  return out;
}

// Field readers: each records a problem naming `where` and returns a default
// when the field is missing or has the wrong type.
class Reader {
 public:
  Reader(const json& object, std::string where, Problems* problems)
      : object_(object), where_(std::move(where)), problems_(problems) {}

  const json* Field(const char* key, bool (json::*is)() const, const char* expected) const {
    auto it = object_.find(key);
    if (it == object_.end()) {
      problems_->Add(where_ + ": missing \"" + key + "\"");
      return nullptr;
    }
    if (!((*it).*is)()) {
      problems_->Add(where_ + ": \"" + key + "\" must be " + expected + ", got " + it->dump());
      return nullptr;
    }
    return &*it;
  }
  std::string String(const char* key) const {
    const json* value = Field(key, &json::is_string, "a string");
    return value ? value->get<std::string>() : "";
  }
  int64_t Bytes(const char* key) const {
    const json* value = Field(key, &json::is_number_integer, "an integer number of bytes");
    if (!value) return 0;
    if (value->is_number_unsigned() && value->get<uint64_t>() > INT64_MAX) {
      problems_->Add(where_ + ": \"" + key + "\" is over 2^63-1 bytes");
      return 0;
    }
    int64_t bytes = value->get<int64_t>();
    if (bytes < 0) problems_->Add(where_ + ": \"" + key + "\" must be >= 0, got " + value->dump());
    return bytes;
  }
  double Number(const char* key) const {
    const json* value = Field(key, &json::is_number, "a number");
    return value ? value->get<double>() : 0;
  }
  bool Bool(const char* key) const {
    const json* value = Field(key, &json::is_boolean, "true or false");
    return value ? value->get<bool>() : false;
  }

 private:
  const json& object_;
  std::string where_;
  Problems* problems_;
};

void ReadPeak(const json& entry, const std::string& where, Problems* problems, PeakRecord* record) {
  auto peak = entry.find("peak");
  if (peak == entry.end() || !peak->is_object()) {
    problems->Add(where + ": \"peak\" must be an object with step, node, op, scope, phase");
    return;
  }
  Reader reader(*peak, where + ": peak", problems);
  record->peak_step = static_cast<uint32_t>(reader.Bytes("step"));
  record->peak_node = reader.String("node");
  record->peak_op = reader.String("op");
  record->peak_scope = reader.String("scope");
  record->peak_phase = reader.String("phase");
  record->peak_recompute = reader.Bool("recompute");
}

void ReadBreakdown(const json& entry, const std::string& where, Problems* problems,
                   PeakRecord* record) {
  auto breakdown = entry.find("peak_breakdown");
  if (breakdown == entry.end() || !breakdown->is_object()) {
    problems->Add(where + ": \"peak_breakdown\" must be an object of bytes per category");
    return;
  }
  for (auto& [name, bytes] : breakdown->items()) {
    Category category;
    if (!ParseCategory(name, &category)) {
      problems->Add(where + ": peak_breakdown: unknown category '" + name + "'");
      continue;
    }
    if (!bytes.is_number_integer() || bytes.get<int64_t>() < 0) {
      problems->Add(where + ": peak_breakdown: '" + name +
                    "' must be a non-negative integer, got " + bytes.dump());
      continue;
    }
    record->breakdown[static_cast<size_t>(category)] = bytes.get<int64_t>();
  }
}

void ReadTopTensors(const json& entry, const std::string& where, Problems* problems,
                    PeakRecord* record) {
  auto tensors = entry.find("top_tensors");
  if (tensors == entry.end() || !tensors->is_array()) {
    problems->Add(where + ": \"top_tensors\" must be an array");
    return;
  }
  for (size_t i = 0; i < tensors->size(); ++i) {
    const json& item = (*tensors)[i];
    std::string item_where = where + ": top_tensors[" + std::to_string(i) + "]";
    if (!item.is_object()) {
      problems->Add(item_where + " must be an object, got " + item.dump());
      continue;
    }
    Reader reader(item, item_where, problems);
    PeakTensor tensor;
    tensor.tensor = reader.String("tensor");
    tensor.bytes = reader.Bytes("bytes");
    std::string category = reader.String("category");
    if (!category.empty() && !ParseCategory(category, &tensor.category)) {
      problems->Add(item_where + ": unknown category '" + category + "'");
    }
    tensor.node = reader.String("node");
    tensor.op = reader.String("op");
    tensor.scope = reader.String("scope");
    record->top_tensors.push_back(std::move(tensor));
  }
}

PeakRecord ReadRecord(const json& entry, const std::string& where, Problems* problems) {
  PeakRecord record;
  if (!entry.is_object()) {
    problems->Add(where + " must be an object, got " + entry.dump());
    return record;
  }
  Reader reader(entry, where, problems);
  record.graph = reader.String("graph");
  record.graph_sha256 = reader.String("graph_sha256");
  record.mode = reader.String("mode");
  if (!record.mode.empty() && record.mode != "plan" && record.mode != "save-all") {
    problems->Add(where + ": \"mode\" must be \"plan\" or \"save-all\", got \"" + record.mode +
                  "\"");
  }
  record.budget_bytes = reader.Bytes("budget_bytes");
  record.reserve_bytes = reader.Bytes("reserve_bytes");
  record.peak_bytes = reader.Bytes("peak_bytes");
  record.save_all_peak_bytes = reader.Bytes("save_all_peak_bytes");
  record.cost_unit = reader.String("cost_unit");
  record.recompute_cost = reader.Number("recompute_cost");
  ReadPeak(entry, where, problems, &record);
  ReadBreakdown(entry, where, problems, &record);
  ReadTopTensors(entry, where, problems, &record);
  return record;
}

}  // namespace

Baseline ParseBaseline(std::string_view text, const std::string& source) {
  CheckJsonDepth(text, Limits().max_depth, source);
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    throw InputError(source + ": corrupt baseline: malformed JSON at byte " +
                     std::to_string(e.byte) + " (" + e.what() + "); fix it");
  } catch (const json::exception& e) {  // e.g. a number too large for a double
    throw InputError(source + ": corrupt baseline: malformed JSON (" + e.what() + "); fix it");
  }
  Problems problems(source);
  Baseline baseline;
  if (!root.is_object()) {
    problems.Add("top level must be a JSON object, got " + root.dump());
    problems.ThrowIfAny();
  }
  if (root.value("format", json()) != "ckptplan.baseline") {
    problems.Add("\"format\" must be \"ckptplan.baseline\", got " +
                 (root.contains("format") ? root["format"].dump() : std::string("nothing")));
  }
  if (root.value("version", json()) != 1) {
    problems.Add("\"version\" must be 1, got " +
                 (root.contains("version") ? root["version"].dump() : std::string("nothing")) +
                 " (this ckptplan reads baseline format version 1)");
  }
  auto graphs = root.find("graphs");
  if (graphs == root.end() || !graphs->is_object()) {
    problems.Add("\"graphs\" must be an object keyed by graph key");
  } else {
    for (auto& [key, entry] : graphs->items()) {
      baseline[key] = ReadRecord(entry, "graph '" + key + "'", &problems);
    }
  }
  if (!problems.empty()) {
    problems.Add("corrupt baseline: fix the problems above");
  }
  problems.ThrowIfAny();
  return baseline;
}

Baseline ReadBaseline(const std::string& path) { return ParseBaseline(ReadFile(path), path); }

std::string BaselineText(const Baseline& baseline) {
  ordered_json out;
  out["format"] = "ckptplan.baseline";
  out["version"] = 1;
  out["tool"] = "ckptplan " CKPTPLAN_VERSION;
  ordered_json graphs = ordered_json::object();
  for (const auto& [key, record] : baseline) graphs[key] = RecordJson(record);
  out["graphs"] = std::move(graphs);
  return out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace ckptplan

#include "ckptplan/emit/plan_io.h"

#include <algorithm>

#include <cmath>
#include <unordered_map>

#include "ckptplan/base/errors.h"
#include "ckptplan/ir/cost.h"
#include "ckptplan/ir/scope.h"
#include "ckptplan/base/file_io.h"
#include "ckptplan/base/json_document.h"
#include "ckptplan/base/limits.h"
#include "ckptplan/base/problems.h"

namespace ckptplan {

OffloadOptions TimeOffloads(const Graph& graph, const OffloadSettings& settings) {
  OffloadOptions offload;
  offload.link = settings.link;
  offload.node_time_us = NodeTimes(graph, settings.flops_per_us);
  offload.cost_per_us = graph.cost_unit == CostUnit::kMicroseconds ? 1.0 : settings.flops_per_us;
  offload.host_budget_bytes = settings.host_budget_bytes;
  return offload;
}

using nlohmann::ordered_json;

std::vector<Decision> MakeDecisions(const Graph& graph, const SaveSet& keep,
                                    const SimResult& planned, const ApproxPlan* approx) {
  std::unordered_map<TensorId, const Recompute*> by_tensor;
  for (const Recompute& record : planned.recomputes) by_tensor.emplace(record.tensor, &record);
  std::vector<Decision> decisions;
  for (TensorId t : SaveCandidates(graph)) {
    Decision decision{t, keep[t] == 0, graph.tensors[graph.StorageRoot(t)].bytes, 0, {}};
    auto it = by_tensor.find(t);
    if (decision.recompute && it != by_tensor.end()) {
      decision.recompute_cost = it->second->cost;
      decision.chain = it->second->chain;
      if (approx != nullptr && ChainApproximated(*approx, decision.chain)) {
        decision.approximate = true;
        decision.recompute_cost = ApproxChainCost(*approx, *it->second);
      }
    }
    decisions.push_back(std::move(decision));
  }
  return decisions;
}

ordered_json BreakdownJson(const SimResult& sim, uint32_t step) {
  ordered_json breakdown = ordered_json::object();
  for (size_t c = 0; c < kNumCategories; ++c) {
    breakdown[std::string(ToString(static_cast<Category>(c)))] =
        CategoriesAt(sim, step)[c];
  }
  return breakdown;
}

namespace {

ordered_json StepJson(const Graph& graph, const SimResult& sim, uint32_t step) {
  ordered_json out;
  out["step"] = step;
  if (sim.steps.empty()) return out;
  const Node& node = graph.nodes[sim.steps[step].node];
  out["node"] = node.name;
  out["op"] = node.op;
  out["phase"] = ToString(node.phase);
  out["recompute"] = sim.steps[step].recompute;
  return out;
}

bool PositiveInteger(const nlohmann::json& value) {
  return value.is_number_integer() && value.get<int64_t>() > 0;
}

}  // namespace

// Maps are sorted by name (std::map), so the object's key order is too.
ordered_json LoadJson(const LoadOptions& load) {
  ordered_json out;
  out["dims"] = ordered_json::object();
  for (const auto& [name, value] : load.dims) out["dims"][name] = value;
  out["input_shapes"] = ordered_json::object();
  for (const auto& [name, shape] : load.input_shapes) out["input_shapes"][name] = shape;
  out["frozen"] = load.frozen;
  out["precision"] = ToString(load.precision);
  out["optimizer"] = ToString(load.optimizer);
  out["device"] = load.device->name;
  if (load.optimizer_impl) out["optimizer_impl"] = ToString(*load.optimizer_impl);
  if (load.loss) out["loss"] = ToString(*load.loss);
  out["dropout_mask_bytes"] = load.dropout_mask_bytes;
  return out;
}

LoadOptions ParseLoadJson(const nlohmann::json& load, const std::string& where,
                          Problems* problems) {
  LoadOptions out;
  if (!load.is_object()) {
    problems->Add(where.substr(0, where.size() - 1) + " must be an object");
    return out;
  }
  if (auto it = load.find("dims"); it != load.end()) {
    if (!it->is_object()) problems->Add(where + "\"dims\" must be an object");
    const nlohmann::json dims = it->is_object() ? *it : nlohmann::json::object();
    for (const auto& [name, value] : dims.items()) {
      if (!PositiveInteger(value)) {
        problems->Add(where + "\"dims\".\"" + name + "\" must be a positive integer");
        continue;
      }
      out.dims[name] = value.get<int64_t>();
    }
  }
  if (auto it = load.find("input_shapes"); it != load.end()) {
    if (!it->is_object()) problems->Add(where + "\"input_shapes\" must be an object");
    const nlohmann::json shapes = it->is_object() ? *it : nlohmann::json::object();
    for (const auto& [name, shape] : shapes.items()) {
      bool ok = shape.is_array() && !shape.empty();
      for (size_t i = 0; ok && i < shape.size(); ++i) ok = PositiveInteger(shape[i]);
      if (!ok) {
        problems->Add(where + "\"input_shapes\".\"" + name +
                     "\" must be a non-empty array of positive integers");
        continue;
      }
      out.input_shapes[name] = shape.get<std::vector<int64_t>>();
    }
  }
  if (auto it = load.find("frozen"); it != load.end()) {
    bool ok = it->is_array();
    for (size_t i = 0; ok && i < it->size(); ++i) ok = (*it)[i].is_string();
    if (ok) {
      out.frozen = it->get<std::vector<std::string>>();
    } else {
      problems->Add(where + "\"frozen\" must be an array of strings");
    }
  }
  auto name = [&](const char* key) -> std::string {
    auto it = load.find(key);
    if (it == load.end()) return "";
    if (!it->is_string()) {
      problems->Add(std::string(where + "\"") + key + "\" must be a string");
      return "";
    }
    return it->get<std::string>();
  };
  if (std::string p = name("precision"); !p.empty() && !ParsePrecision(p, &out.precision)) {
    problems->Add(where + "\"precision\": unknown precision '" + p + "'");
  }
  if (std::string o = name("optimizer"); !o.empty() && !ParseOptimizer(o, &out.optimizer)) {
    problems->Add(where + "\"optimizer\": unknown optimizer '" + o + "'");
  }
  if (std::string d = name("device"); !d.empty()) {
    if (const DeviceSpec* device = LookupDevice(d)) {
      out.device = device;
    } else {
      problems->Add(where + "\"device\": unknown device '" + d + "'");
    }
  }
  if (std::string i = name("optimizer_impl"); !i.empty()) {
    OptimizerImpl impl;
    if (ParseOptimizerImpl(i, &impl)) {
      out.optimizer_impl = impl;
    } else {
      problems->Add(where + "\"optimizer_impl\": unknown implementation '" + i + "'");
    }
  }
  if (std::string l = name("loss"); !l.empty()) {
    LossKind loss;
    if (ParseLossKind(l, &loss)) {
      out.loss = loss;
    } else {
      problems->Add(where + "\"loss\": unknown loss '" + l + "'");
    }
  }
  if (auto it = load.find("dropout_mask_bytes"); it != load.end()) {
    if (it->is_number_integer() && (*it == 1 || *it == 4)) {
      out.dropout_mask_bytes = it->get<int>();
    } else {
      problems->Add(where + "\"dropout_mask_bytes\" must be 1 or 4");
    }
  }
  return out;
}

PlanHeader ReadPlanHeader(const std::string& path) { return ParsePlanHeader(ReadFile(path), path); }

PlanHeader ParsePlanHeader(std::string_view text, const std::string& source) {
  const nlohmann::json root = ParseJsonDocument(text, source);
  Problems problems(source);
  PlanHeader header;
  if (!root.is_object()) return header;  // ParsePlan says what is wrong
  if (auto graph = root.find("graph"); graph != root.end() && graph->is_object()) {
    if (auto file = graph->find("file"); file != graph->end() && file->is_string()) {
      header.graph_file = file->get<std::string>();
    }
  }
  if (auto load = root.find("load"); load != root.end()) {
    header.load = ParseLoadJson(*load, "\"load\".", &problems);
  }
  problems.ThrowIfAny();
  return header;
}

ordered_json PlanToJson(const Graph& graph, const PlanRecord& record) {
  const SimResult& planned = *record.planned;
  ordered_json plan;
  plan["format"] = "ckptplan.plan";
  plan["version"] = 1;
  plan["tool"] = "ckptplan " CKPTPLAN_VERSION;
  // With offload, `graph` is the rewrite: count the loaded graph's nodes and
  // tensors, the ones the inserted copies are not.
  size_t inserted_nodes = 0, inserted_tensors = 0;
  if (record.offloaded) {
    inserted_tensors = record.offloaded->copies.size();
    for (NodeId n : record.offloaded->original_node) inserted_nodes += n == kNoId;
  }
  plan["graph"] = {{"file", record.graph_path},
                   {"sha256", record.graph_sha256},
                   {"nodes", graph.nodes.size() - inserted_nodes},
                   {"tensors", graph.tensors.size() - inserted_tensors}};
  plan["budget_bytes"] = record.budget_bytes;
  plan["reserve_bytes"] = record.reserve_bytes;
  plan["start"] = record.start;
  if (record.load) plan["load"] = LoadJson(*record.load);
  plan["save_all_peak_bytes"] = record.save_all->peak_bytes;
  plan["predicted_peak_bytes"] = planned.peak_bytes;
  plan["lower_bound_bytes"] = record.lower_bound.bytes;
  plan["peak_step"] = StepJson(graph, planned, planned.peak_step);
  plan["peak_breakdown"] = BreakdownJson(planned, planned.peak_step);
  plan["cost_unit"] = ToString(graph.cost_unit);
  plan["step_cost"] = planned.step_cost;
  const ApproxPlan* approx = record.approx != nullptr && record.approx->any() ? record.approx
                                                                              : nullptr;
  if (approx) {
    // The cost as run: the approximations applied; the exact figure beside it.
    plan["recompute_cost"] = approx->recompute_cost;
    plan["recompute_overhead_percent"] = Percent(approx->recompute_cost, planned.step_cost);
    plan["exact_recompute_cost"] = approx->exact_recompute_cost;
    plan["max_error"] = approx->max_error;
    plan["estimated_error"] = approx->estimated_error;
  } else {
    plan["recompute_cost"] = planned.recompute_cost;
    plan["recompute_overhead_percent"] = Percent(planned.recompute_cost, planned.step_cost);
  }
  if (record.offloaded && record.offload_settings) {
    const OffloadedGraph& off = *record.offloaded;
    const OffloadSettings& settings = *record.offload_settings;
    ordered_json offload;
    offload["to_host_bytes_per_s"] = settings.link.to_host_bytes_per_s;
    offload["to_device_bytes_per_s"] = settings.link.to_device_bytes_per_s;
    offload["flops_per_us"] = settings.flops_per_us;
    if (settings.host_budget_bytes) offload["host_budget_bytes"] = *settings.host_budget_bytes;
    offload["exposed_us"] = off.exposed_us;
    offload["exposed_cost"] = off.exposed_cost;
    offload["host_peak_bytes"] = off.host_peak_bytes;
    plan["offload"] = std::move(offload);
  }
  // Offloaded tensors are not candidates of the rewrite: their entries go in
  // by tensor id among the others.
  std::vector<std::pair<TensorId, ordered_json>> entries;
  if (record.offloaded) {
    const std::vector<NodeId>& position = record.offloaded->rewritten_node;
    for (const OffloadCopy& copy : record.offloaded->copies) {
      ordered_json entry;
      entry["tensor"] = graph.tensors[copy.tensor].name;
      entry["action"] = "offload";
      entry["bytes"] = copy.bytes;
      entry["recompute_cost"] = 0;
      const NodeId producer = graph.tensors[copy.tensor].producer;
      if (producer != kNoId && !graph.nodes[producer].scope.empty()) {
        entry["block"] = ScopeBlock(graph.nodes[producer].scope);
      }
      entry["host_bytes"] = copy.host_bytes;
      entry["freed_after"] = graph.nodes[position[copy.freed_after]].name;
      entry["reloaded_before"] = graph.nodes[position[copy.reloaded_before]].name;
      entry["copy_out_us"] = {copy.out_start_us, copy.out_end_us};
      entry["copy_in_us"] = {copy.in_start_us, copy.in_end_us};
      entries.emplace_back(copy.tensor, std::move(entry));
    }
  }
  if (approx) {
    ordered_json approximations = ordered_json::array();
    for (const ApproxChoice& choice : approx->choices) {
      approximations.push_back({{"node", graph.nodes[choice.node].name},
                                {"rank", choice.rank},
                                {"error", choice.error},
                                {"cost_saved", choice.cost_saved}});
    }
    plan["approximations"] = std::move(approximations);
  }
  for (const Decision& decision : MakeDecisions(graph, *record.keep, planned, approx)) {
    ordered_json entry;
    entry["tensor"] = graph.tensors[decision.tensor].name;
    entry["action"] = !decision.recompute    ? "save"
                      : decision.approximate ? "recompute_approx"
                                             : "recompute";
    entry["bytes"] = decision.bytes;
    entry["recompute_cost"] = decision.recompute_cost;
    const NodeId producer = graph.tensors[decision.tensor].producer;
    if (producer != kNoId && !graph.nodes[producer].scope.empty()) {
      entry["block"] = ScopeBlock(graph.nodes[producer].scope);
    }
    if (decision.recompute) {
      ordered_json chain = ordered_json::array();
      for (NodeId n : decision.chain) chain.push_back(graph.nodes[n].name);
      entry["chain"] = std::move(chain);
    }
    entries.emplace_back(decision.tensor, std::move(entry));
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  ordered_json decisions = ordered_json::array();
  for (auto& [tensor, entry] : entries) decisions.push_back(std::move(entry));
  plan["decisions"] = std::move(decisions);
  ordered_json dtypes = ordered_json::object();
  for (const DtypeSize& dtype : DtypeSizes()) dtypes[std::string(dtype.name)] = dtype.bytes;
  plan["dtype_bytes"] = std::move(dtypes);
  return plan;
}

namespace {

int64_t ReadBytesField(const nlohmann::json& root, const char* key, Problems& problems) {
  auto it = root.find(key);
  if (it == root.end() || !it->is_number_integer() || it->get<int64_t>() < 0) {
    problems.Add(std::string("\"") + key + "\" must be a non-negative integer");
    return 0;
  }
  return it->get<int64_t>();
}

// "approximations": [{"node", "rank", ...}]; "max_error", "estimated_error".
void ReadApproximations(const Graph& graph, const nlohmann::json& root, LoadedPlan* plan,
                        Problems& problems) {
  auto list = root.find("approximations");
  if (list == root.end()) return;
  if (!list->is_array()) {
    problems.Add("\"approximations\" must be an array");
    return;
  }
  std::unordered_map<std::string, NodeId> nodes;
  for (NodeId n = 0; n < graph.nodes.size(); ++n) nodes.emplace(graph.nodes[n].name, n);
  for (size_t i = 0; i < list->size(); ++i) {
    const nlohmann::json& entry = (*list)[i];
    const std::string where = "approximations[" + std::to_string(i) + "]";
    if (!entry.is_object() || !entry.contains("node") || !entry["node"].is_string() ||
        !entry.contains("rank") || !entry["rank"].is_number_integer()) {
      problems.Add(where + ": needs a \"node\" string and an integer \"rank\"");
      continue;
    }
    const std::string name = entry["node"].get<std::string>();
    const int64_t rank = entry["rank"].get<int64_t>();
    auto it = nodes.find(name);
    if (it == nodes.end()) {
      problems.Add(where + ": unknown node '" + name + "' (not in " + graph.source + ")");
      continue;
    }
    const std::vector<ApproxOption>& options = graph.nodes[it->second].approx;
    auto option = std::find_if(options.begin(), options.end(),
                               [&](const ApproxOption& o) { return o.rank == rank; });
    if (option == options.end()) {
      std::string ranks;
      for (const ApproxOption& o : options) ranks += (ranks.empty() ? "" : ", ") + std::to_string(o.rank);
      problems.Add(where + ": node '" + name + "' has no approx option of rank " +
                   std::to_string(rank) + " in " + graph.source +
                   (ranks.empty() ? " (it has no approx options)" : " (ranks: " + ranks + ")"));
      continue;
    }
    plan->approximations.emplace_back(it->second, static_cast<size_t>(option - options.begin()));
  }
  std::sort(plan->approximations.begin(), plan->approximations.end());
  for (size_t i = 1; i < plan->approximations.size(); ++i) {
    if (plan->approximations[i].first == plan->approximations[i - 1].first) {
      problems.Add("approximations: node '" + graph.nodes[plan->approximations[i].first].name +
                   "' is listed twice");
    }
  }
  for (auto [key, value] : {std::pair{"max_error", &plan->max_error},
                            std::pair{"estimated_error", &plan->estimated_error}}) {
    auto it = root.find(key);
    if (it == root.end()) continue;
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0) {
      problems.Add(std::string("\"") + key + "\" must be a number >= 0");
      continue;
    }
    *value = it->get<double>();
  }
}

}  // namespace

LoadedPlan ReadPlan(const Graph& graph, const std::string& path) {
  return ParsePlan(graph, ReadFile(path), path);
}

LoadedPlan ParsePlan(const Graph& graph, std::string_view text, const std::string& path) {
  const nlohmann::json root = ParseJsonDocument(text, path);
  Problems problems(path);
  if (!root.is_object() || root.value("format", nlohmann::json()) != "ckptplan.plan") {
    problems.Add("not a ckptplan plan (\"format\" must be \"ckptplan.plan\")");
    problems.ThrowIfAny();
  }
  if (root.value("version", nlohmann::json()) != 1) {
    problems.Add("\"version\" must be 1, got " + root.value("version", nlohmann::json()).dump());
  }
  LoadedPlan plan;
  plan.keep = SaveAll(graph);
  plan.budget_bytes = ReadBytesField(root, "budget_bytes", problems);
  plan.reserve_bytes = ReadBytesField(root, "reserve_bytes", problems);
  if (plan.reserve_bytes > kMaxReserveBytes) {
    problems.Add("\"reserve_bytes\" " + std::to_string(plan.reserve_bytes) +
                 " is over the limit of " + std::to_string(kMaxReserveBytes));
    plan.reserve_bytes = 0;
  }
  plan.predicted_peak_bytes = ReadBytesField(root, "predicted_peak_bytes", problems);
  if (root.contains("graph") && root["graph"].is_object() &&
      root["graph"].contains("sha256") && root["graph"]["sha256"].is_string()) {
    plan.graph_sha256 = root["graph"]["sha256"].get<std::string>();
  }
  std::unordered_map<std::string, TensorId> ids;
  for (TensorId t = 0; t < graph.tensors.size(); ++t) ids.emplace(graph.tensors[t].name, t);
  std::vector<uint8_t> is_candidate(graph.tensors.size(), 0);
  for (TensorId t : SaveCandidates(graph)) is_candidate[t] = 1;
  auto decisions = root.find("decisions");
  if (decisions == root.end() || !decisions->is_array()) {
    problems.Add("\"decisions\" must be an array");
    problems.ThrowIfAny();
  }
  std::optional<std::vector<TensorId>> offloadable;  // OffloadCandidates, at the first offload
  for (size_t i = 0; i < decisions->size(); ++i) {
    const nlohmann::json& entry = (*decisions)[i];
    std::string where = "decisions[" + std::to_string(i) + "]";
    if (!entry.is_object() || !entry.contains("tensor") || !entry["tensor"].is_string()) {
      problems.Add(where + ": needs a \"tensor\" string");
      continue;
    }
    std::string name = entry["tensor"].get<std::string>();
    std::string action = entry.contains("action") && entry["action"].is_string()
                             ? entry["action"].get<std::string>()
                             : "";
    auto it = ids.find(name);
    if (it == ids.end()) {
      problems.Add(where + ": unknown tensor '" + name + "' (not in " + graph.source + ")");
    } else if (!is_candidate[it->second]) {
      problems.Add(where + ": tensor '" + name +
                   "' is not a forward tensor the backward reads, so it cannot be saved "
                   "or recomputed");
    } else if (action == "offload") {
      if (!offloadable) offloadable = OffloadCandidates(graph);
      if (!std::binary_search(offloadable->begin(), offloadable->end(), it->second)) {
        problems.Add(where + ": tensor '" + name +
                     "' cannot be offloaded (it shares its storage with another tensor the "
                     "backward reads)");
      }
      plan.offloaded.push_back(it->second);
    } else if (action != "save" && action != "recompute" && action != "recompute_approx") {
      problems.Add(where + ": \"action\" must be save, recompute, recompute_approx or offload, "
                   "got '" + action + "'");
    } else {
      plan.keep[it->second] = action == "save";
    }
  }
  ReadApproximations(graph, root, &plan, problems);
  std::sort(plan.offloaded.begin(), plan.offloaded.end());
  if (!plan.offloaded.empty()) {
    auto offload = root.find("offload");
    auto rate = [&](const char* key) {
      if (offload == root.end() || !offload->is_object() || !offload->contains(key) ||
          !(*offload)[key].is_number() || (*offload)[key].get<double>() <= 0) {
        problems.Add(std::string("\"offload\".\"") + key +
                     "\" must be a positive number when a decision offloads");
        return 0.0;
      }
      return (*offload)[key].get<double>();
    };
    plan.offload.link.to_host_bytes_per_s = rate("to_host_bytes_per_s");
    plan.offload.link.to_device_bytes_per_s = rate("to_device_bytes_per_s");
    plan.offload.flops_per_us = rate("flops_per_us");
    if (offload != root.end() && offload->is_object() && offload->contains("host_budget_bytes")) {
      plan.offload.host_budget_bytes = ReadBytesField(*offload, "host_budget_bytes", problems);
    }
  }
  problems.ThrowIfAny();
  return plan;
}

}  // namespace ckptplan

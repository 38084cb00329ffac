#include "ckptplan/emit/export.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "ckptplan/base/errors.h"
#include "ckptplan/base/size.h"
#include "ckptplan/ir/cost.h"
#include "ckptplan/ir/scope.h"
#include "ckptplan/plan/strategies.h"
#include "ckptplan/sim/offload.h"

namespace ckptplan {
namespace {

using nlohmann::ordered_json;

constexpr std::string_view kTargetNames[] = {"pytorch-sac", "jax", "megatron", "torchtitan",
                                             "deepspeed"};

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// Where each candidate comes from, and the module structure over scopes.
class Structure {
 public:
  explicit Structure(const Graph& graph) : graph_(graph) {
    candidates_ = SaveCandidates(graph);
    producer_scope_.assign(graph.tensors.size(), "");
    for (const Node& node : graph.nodes) {
      if (node.phase != Phase::kForward) continue;
      for (TensorId t : node.outputs) producer_scope_[t] = node.scope;
      if (node.scope.empty()) continue;
      std::vector<std::string> parts = SplitScope(node.scope);
      std::string prefix;
      for (size_t i = 0; i < parts.size(); ++i) {
        prefix += (i ? "/" : "") + parts[i];
        if (seen_scopes_.insert(prefix).second) scopes_.push_back(prefix);
      }
      const std::string layer = ScopeLayer(node.scope);
      if (!layer.empty() && seen_layers_.insert(layer).second) layers_.push_back(layer);
    }
  }

  const std::vector<TensorId>& candidates() const { return candidates_; }
  const std::vector<std::string>& layers() const { return layers_; }  ///< first-use order
  const std::vector<std::string>& scopes() const { return scopes_; }  ///< first-use order
  const std::string& ProducerScope(TensorId t) const { return producer_scope_[t]; }

  /// The module `scope`'s internal tensors (InternalCandidates, strategies.h).
  std::vector<TensorId> Internal(const std::string& scope) const {
    std::vector<uint32_t> group(graph_.nodes.size(), kNoId);
    for (NodeId n = 0; n < graph_.nodes.size(); ++n) {
      const Node& node = graph_.nodes[n];
      if (node.phase == Phase::kForward && ScopeInside(node.scope, scope)) group[n] = 0;
    }
    return InternalCandidates(graph_, group);
  }

 private:
  const Graph& graph_;
  std::vector<TensorId> candidates_;
  std::vector<std::string> producer_scope_;
  std::vector<std::string> layers_, scopes_;
  std::set<std::string> seen_layers_, seen_scopes_;
};

class Exporter {
 public:
  Exporter(const Graph& graph, const ExportInput& input)
      : graph_(graph), input_(input), structure_(graph) {
    for (NodeId n = 0; n < graph.nodes.size(); ++n) step_cost_ += graph.NodeCost(n);
  }

  // With offloads, simulated on the rewrite (sim/offload.h), as plan and
  // simulate --plan do.
  Expressed Evaluate(std::string label, SaveSet keep,
                     const std::vector<TensorId>& offloaded = {}) const {
    SimOptions options;
    options.reserve_bytes = input_.reserve_bytes;
    Expressed e;
    if (offloaded.empty()) {
      SimResult sim = Simulate(graph_, keep, options);
      e.peak_bytes = sim.peak_bytes;
      e.recompute_cost = sim.recompute_cost;
    } else {
      const OffloadedGraph off = ApplyOffload(graph_, offloaded, input_.offload);
      SimResult sim = Simulate(off.graph, KeepOnRewrite(keep, off), options);
      e.peak_bytes = sim.peak_bytes;
      e.recompute_cost = sim.recompute_cost;
      e.exposed_cost = off.exposed_cost;
      e.over_host_budget = off.over_host_budget;
      for (const OffloadCopy& copy : off.copies) e.offloaded.push_back(copy.tensor);
      for (TensorId t : e.offloaded) keep[t] = 0;
    }
    e.label = std::move(label);
    e.keep = std::move(keep);
    std::vector<uint8_t> moved(graph_.tensors.size(), 0);
    for (TensorId t : e.offloaded) moved[t] = 1;
    for (TensorId t : structure_.candidates()) e.dropped += e.keep[t] == 0 && !moved[t];
    return e;
  }

  Expressed Dropping(std::string label, const std::set<TensorId>& dropped,
                     const std::set<TensorId>& offloaded = {}) const {
    SaveSet keep = SaveAll(graph_);
    for (TensorId t : dropped) keep[t] = 0;
    return Evaluate(std::move(label), std::move(keep),
                    std::vector<TensorId>(offloaded.begin(), offloaded.end()));
  }

  bool SameDrops(const SaveSet& a, const SaveSet& b) const {
    for (TensorId t : structure_.candidates()) {
      if ((a[t] == 0) != (b[t] == 0)) return false;
    }
    return true;
  }

  std::set<TensorId> PlanDrops() const {
    std::set<TensorId> drops;
    for (TensorId t : structure_.candidates()) {
      if (input_.keep[t] == 0 &&
          !std::binary_search(input_.offloaded.begin(), input_.offloaded.end(), t)) {
        drops.insert(t);
      }
    }
    return drops;
  }

  // The fitting option with the least cost (recompute plus exposed copy
  // time); ties: fewer drops, then the earlier option.
  const Expressed& Choose(const std::vector<Expressed>& options, ExportTarget target) const {
    const Expressed* best = nullptr;
    const Expressed* lowest = nullptr;
    auto cost = [](const Expressed& e) { return e.recompute_cost + e.exposed_cost; };
    for (const Expressed& e : options) {
      if (!lowest || e.peak_bytes < lowest->peak_bytes) lowest = &e;
      if (e.peak_bytes > input_.budget_bytes || e.over_host_budget) continue;
      if (!best || cost(e) < cost(*best) || (cost(e) == cost(*best) && e.dropped < best->dropped)) {
        best = &e;
      }
    }
    if (best) return *best;
    throw InfeasibleError(std::string(ToString(target)) + ": no plan it can express fits the " +
                          "budget " + FormatBytes(input_.budget_bytes) + "; the lowest peak, " +
                          FormatBytes(lowest->peak_bytes) + ", is with " + lowest->label);
  }

  double step_cost() const { return step_cost_; }
  const Structure& structure() const { return structure_; }
  const Graph& graph() const { return graph_; }

 private:
  const Graph& graph_;
  const ExportInput& input_;
  Structure structure_;
  double step_cost_ = 0;  ///< every node run once
};

void RequireLayers(const Structure& structure, ExportTarget target, const Graph& graph) {
  if (!structure.layers().empty()) return;
  throw InputError(graph.source + ": " + std::string(ToString(target)) +
                   " recomputes whole layers, but no forward node has a layer scope "
                   "(a scope component like 'h.0' or 'layers.3'); export the graph with "
                   "module scopes");
}

// ---- Megatron-LM -----------------------------------------------------------

// Megatron's --recompute-modules name for a layer's child module, or "".
std::string MegatronModule(const std::string& rest_of_scope) {
  std::vector<std::string> parts = SplitScope(rest_of_scope);
  if (parts.empty()) return "";
  std::string child = Lower(parts[0]);
  if (child.find("attn") != std::string::npos || child.find("attention") != std::string::npos) {
    return parts.size() == 1 ? "core_attn" : "";  // the core, not its projections
  }
  if (child.find("mlp") != std::string::npos || child.find("ffn") != std::string::npos ||
      child.find("feed_forward") != std::string::npos) {
    return "mlp";
  }
  if (child.find("norm") != std::string::npos || child.rfind("ln", 0) == 0) return "layernorm";
  return "";
}

std::vector<Expressed> MegatronOptions(const Exporter& ex) {
  const Structure& s = ex.structure();
  // Internal tensors of each (layer child module) by Megatron module name.
  std::map<std::string, std::set<TensorId>> by_module;
  for (const std::string& layer : s.layers()) {
    for (const std::string& scope : s.scopes()) {
      if (scope.size() <= layer.size() || !ScopeInside(scope, layer)) continue;
      std::string rest = scope.substr(layer.size() + 1);
      if (rest.find('/') != std::string::npos) continue;  // children of the layer only
      for (TensorId t : s.Internal(scope)) {
        std::string name = MegatronModule(rest + (s.ProducerScope(t) == scope ? "" : "/x"));
        if (!name.empty()) by_module[name].insert(t);
      }
    }
  }
  std::vector<Expressed> options;
  options.push_back(ex.Dropping("no recompute flags", {}));
  std::vector<std::string> names;
  for (const auto& [name, tensors] : by_module) names.push_back(name);
  for (uint32_t mask = 1; mask < (1u << names.size()); ++mask) {
    std::set<TensorId> drops;
    std::string label = "--recompute-granularity selective --recompute-modules";
    for (size_t i = 0; i < names.size(); ++i) {
      if (!(mask & (1u << i))) continue;
      label += " " + names[i];
      drops.insert(by_module[names[i]].begin(), by_module[names[i]].end());
    }
    options.push_back(ex.Dropping(label, drops));
  }
  std::set<TensorId> drops;
  for (size_t n = 1; n <= s.layers().size(); ++n) {
    for (TensorId t : s.Internal(s.layers()[n - 1])) drops.insert(t);
    options.push_back(ex.Dropping("--recompute-granularity full --recompute-method block "
                                  "--recompute-num-layers " + std::to_string(n),
                                  drops));
  }
  return options;
}

// Megatron's --offload-modules name (fine-grained activation offloading) for
// the part of a scope below its layer ("attn/c_attn", "ln_1"), or "".
std::string MegatronOffloadModule(std::string below_layer) {
  below_layer = Lower(below_layer);
  std::replace(below_layer.begin(), below_layer.end(), '.', '/');
  const std::vector<std::string> parts = SplitScope(below_layer);
  if (parts.empty()) return "";
  const std::string& child = parts[0];
  auto has = [](const std::string& text, const char* part) {
    return text.find(part) != std::string::npos;
  };
  if (has(child, "attn") || has(child, "attention")) {
    if (parts.size() == 1) return "core_attn";
    const std::string& sub = parts[1];
    if (has(sub, "qkv") || sub == "c_attn" || has(sub, "in_proj")) return "qkv_linear";
    if (has(sub, "proj") || has(sub, "out") || has(sub, "dense")) return "attn_proj";
    return "";
  }
  if (has(child, "norm") || child.rfind("ln", 0) == 0) {
    return has(child, "2") || has(child, "post") || has(child, "mlp") ? "mlp_norm" : "attn_norm";
  }
  return "";
}

// Offloadable candidates by --offload-modules name: those that module's
// forward nodes make, in any layer (Megatron offloads what a module saves
// for its backward; ckptplan's graph names the tensors by their maker).
std::map<std::string, std::set<TensorId>> MegatronOffloadGroups(const Exporter& ex) {
  std::map<std::string, std::set<TensorId>> groups;
  for (TensorId t : OffloadCandidates(ex.graph())) {
    const std::string& scope = ex.structure().ProducerScope(t);
    const std::string layer = ScopeLayer(scope);
    if (layer.empty() || scope.size() <= layer.size() + 1) continue;
    const std::string name = MegatronOffloadModule(scope.substr(layer.size() + 1));
    if (!name.empty()) groups[name].insert(t);
  }
  return groups;
}

// Each recompute option with each set of the offload modules that hold a
// tensor the plan offloads (a tensor a recompute flag drops is not offloaded).
void AddMegatronOffloads(const Exporter& ex, const std::vector<TensorId>& plan_offloaded,
                         std::vector<Expressed>* options) {
  std::map<std::string, std::set<TensorId>> groups = MegatronOffloadGroups(ex);
  std::vector<std::string> names;
  for (const auto& group : groups) {
    // Not a structured binding: C++17 lambdas cannot capture one (clang refuses).
    const std::set<TensorId>& tensors = group.second;
    if (std::any_of(plan_offloaded.begin(), plan_offloaded.end(),
                    [&](TensorId t) { return tensors.count(t) > 0; })) {
      names.push_back(group.first);
    }
  }
  const size_t recompute_options = options->size();
  for (size_t i = 0; i < recompute_options; ++i) {
    const Expressed recompute = (*options)[i];  // a copy: push_back reallocates
    std::set<TensorId> drops;
    for (TensorId t : ex.structure().candidates()) {
      if (recompute.keep[t] == 0) drops.insert(t);
    }
    const std::string flags = recompute.label.rfind("--", 0) == 0 ? recompute.label + " " : "";
    for (uint32_t mask = 1; mask < (1u << names.size()); ++mask) {
      std::set<TensorId> moved;
      std::string label = flags + "--fine-grained-activation-offloading --offload-modules";
      for (size_t m = 0; m < names.size(); ++m) {
        if (!(mask & (1u << m))) continue;
        label += " " + names[m];
        for (TensorId t : groups[names[m]]) {
          if (!drops.count(t)) moved.insert(t);
        }
      }
      options->push_back(ex.Dropping(label, drops, moved));
    }
  }
}

// ---- PyTorch selective checkpointing ------------------------------------------

// CheckpointPolicy has no offload value: a plan's offloads are saved, or
// recomputed where a planner may drop them (no random op re-run).
std::vector<Expressed> SacOffloadOptions(const Exporter& ex, const ExportInput& input) {
  SaveSet saved = input.keep, recomputed = input.keep;
  for (TensorId t : input.offloaded) saved[t] = recomputed[t] = 1;
  const std::vector<TensorId> droppable = DroppableCandidates(ex.graph());
  for (TensorId t : input.offloaded) {
    if (std::binary_search(droppable.begin(), droppable.end(), t)) recomputed[t] = 0;
  }
  std::vector<Expressed> options;
  options.push_back(ex.Evaluate("must_save for the plan's offloaded tensors", saved));
  options.push_back(ex.Evaluate("must_recompute for the plan's offloaded tensors", recomputed));
  return options;
}

// ---- TorchTitan -------------------------------------------------------------

std::vector<Expressed> TorchTitanOptions(const Exporter& ex) {
  const Structure& s = ex.structure();
  std::vector<Expressed> options;
  options.push_back(ex.Dropping("mode = \"none\"", {}));
  const size_t layers = s.layers().size();
  // selective_ac_option = N wraps the layers whose 1-based count is a
  // multiple of N; N = 1 is every layer, which is mode = "full".
  for (size_t n = layers; n >= 1; --n) {
    std::set<TensorId> drops;
    for (size_t i = 0; i < layers; ++i) {
      if ((i + 1) % n != 0) continue;
      for (TensorId t : s.Internal(s.layers()[i])) drops.insert(t);
    }
    std::string label = n == 1 ? "mode = \"full\""
                               : "mode = \"selective\"\nselective_ac_option = \"" +
                                     std::to_string(n) + "\"";
    options.push_back(ex.Dropping(label, drops));
  }
  return options;
}

// ---- DeepSpeed ----------------------------------------------------------------

std::string ModuleName(const std::string& scope) {
  std::string name = scope;
  std::replace(name.begin(), name.end(), '/', '.');
  return name;
}

std::string WrapLabel(const std::set<std::string>& modules) {
  if (modules.empty()) return "no modules wrapped";
  std::string label = "wrap";
  for (const std::string& m : modules) label += " " + ModuleName(m);
  return label;
}

std::set<TensorId> InternalOf(const Structure& s, const std::set<std::string>& modules) {
  std::set<TensorId> drops;
  for (const std::string& m : modules) {
    for (TensorId t : s.Internal(m)) drops.insert(t);
  }
  return drops;
}

// Modules whose internal tensors the plan drops, outermost first; then the
// smallest module around each other dropped tensor; then, greedily, drops
// those extra modules again while the peak still fits.
Expressed Wrapping(const Exporter& ex, const std::set<std::string>& modules) {
  Expressed e = ex.Dropping(WrapLabel(modules), InternalOf(ex.structure(), modules));
  for (const std::string& m : modules) e.modules.push_back(ModuleName(m));
  return e;
}

std::vector<Expressed> DeepSpeedOptions(const Exporter& ex, const std::set<TensorId>& plan,
                                        int64_t budget) {
  const Structure& s = ex.structure();
  std::vector<std::string> by_depth = s.scopes();
  std::stable_sort(by_depth.begin(), by_depth.end(), [](const auto& a, const auto& b) {
    return std::count(a.begin(), a.end(), '/') < std::count(b.begin(), b.end(), '/');
  });
  std::set<std::string> exact;
  for (const std::string& scope : by_depth) {
    bool covered = false;
    for (const std::string& m : exact) covered |= ScopeInside(scope, m);
    if (covered) continue;
    std::vector<TensorId> internal = s.Internal(scope);
    if (internal.empty()) continue;
    if (std::all_of(internal.begin(), internal.end(),
                    [&](TensorId t) { return plan.count(t) > 0; })) {
      exact.insert(scope);
    }
  }
  std::set<std::string> wrapped = exact;
  std::set<TensorId> covered = InternalOf(s, exact);
  for (TensorId t : plan) {
    if (covered.count(t)) continue;
    for (auto it = by_depth.rbegin(); it != by_depth.rend(); ++it) {
      std::vector<TensorId> internal = s.Internal(*it);
      if (std::find(internal.begin(), internal.end(), t) == internal.end()) continue;
      wrapped.insert(*it);
      covered.insert(internal.begin(), internal.end());
      break;
    }
  }
  // A module inside another wrapped one adds nothing.
  for (auto it = wrapped.begin(); it != wrapped.end();) {
    bool nested = false;
    for (const std::string& m : wrapped) nested |= m != *it && ScopeInside(*it, m);
    it = nested ? wrapped.erase(it) : std::next(it);
  }
  std::vector<Expressed> options;
  options.push_back(Wrapping(ex, wrapped));
  while (true) {
    const Expressed* current = &options.back();
    std::set<std::string> best_set;
    const Expressed* best = nullptr;
    std::vector<Expressed> tried;
    tried.reserve(wrapped.size());
    for (const std::string& m : wrapped) {
      if (exact.count(m)) continue;
      std::set<std::string> fewer = wrapped;
      fewer.erase(m);
      tried.push_back(Wrapping(ex, fewer));
      const Expressed& e = tried.back();
      if (e.peak_bytes > budget || e.recompute_cost >= current->recompute_cost) continue;
      if (!best || e.recompute_cost < best->recompute_cost) {
        best = &e;
        best_set = fewer;
      }
    }
    if (!best) break;
    wrapped = best_set;
    options.push_back(*best);
  }
  return options;
}

// ---- Writers ------------------------------------------------------------------

ordered_json ReportJson(const Graph& graph, const ExportResult& r, double step_cost) {
  ordered_json j;
  j["exact"] = r.exact;
  j["expressed"] = r.chosen.label;
  j["plan_peak_bytes"] = r.plan.peak_bytes;
  j["peak_bytes"] = r.chosen.peak_bytes;
  j["cost_unit"] = ToString(graph.cost_unit);
  j["plan_recompute_cost"] = r.plan.recompute_cost;
  j["recompute_cost"] = r.chosen.recompute_cost;
  j["recompute_cost_given_up"] = r.chosen.recompute_cost - r.plan.recompute_cost;
  j["step_cost"] = step_cost;
  if (!r.plan.offloaded.empty() || !r.chosen.offloaded.empty()) {
    j["plan_offloaded"] = r.plan.offloaded.size();
    j["offloaded"] = r.chosen.offloaded.size();
    j["plan_exposed_cost"] = r.plan.exposed_cost;
    j["exposed_cost"] = r.chosen.exposed_cost;
  }
  return j;
}

std::string CommentLines(const std::string& text) {
  std::string out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out += "# " + line + "\n";
  return out;
}

constexpr const char* kSacOffloadNote =
    "torch's CheckpointPolicy has no offload value (MUST_SAVE, PREFER_SAVE, MUST_RECOMPUTE, "
    "PREFER_RECOMPUTE; torch 1.13 has no selective checkpointing at all): the policy above "
    "saves or recomputes these as the rounding chose. To offload them, move them with "
    "torch.autograd.graph.saved_tensors_hooks, or apply the plan file with "
    "ckptplan_torch.apply_plan, which offloads them as planned";

std::string PytorchSacText(const Graph& graph, const SaveSet& keep,
                           const std::vector<TensorId>& offloaded, const ordered_json& head) {
  std::vector<uint8_t> candidate(graph.tensors.size(), 0), moved(graph.tensors.size(), 0);
  for (TensorId t : SaveCandidates(graph)) candidate[t] = 1;
  for (TensorId t : offloaded) moved[t] = 1;
  ordered_json save = ordered_json::array(), recompute = ordered_json::array();
  ordered_json offload = ordered_json::array();
  std::map<std::string, int> calls;
  for (const Node& node : graph.nodes) {
    if (node.phase != Phase::kForward) continue;
    int index = calls[node.op]++;
    bool saved = false, dropped = false;
    ordered_json tensors = ordered_json::array(), offloaded_here = ordered_json::array();
    for (TensorId t : node.outputs) {
      if (!candidate[t]) continue;
      tensors.push_back(graph.tensors[t].name);
      (keep[t] ? saved : dropped) = true;
      if (moved[t]) offloaded_here.push_back(graph.tensors[t].name);
    }
    if (!saved && !dropped) continue;
    ordered_json entry;
    entry["op"] = node.op;
    entry["call_index"] = index;
    entry["node"] = node.name;
    entry["scope"] = node.scope;
    if (!offloaded_here.empty()) {
      ordered_json moved_entry = entry;
      moved_entry["tensors"] = std::move(offloaded_here);
      offload.push_back(std::move(moved_entry));
    }
    entry["tensors"] = std::move(tensors);
    (saved ? save : recompute).push_back(std::move(entry));
  }
  ordered_json j = head;
  j["key"] = "(aten op, index of the call among the forward's calls of that op)";
  j["default"] = "PREFER_RECOMPUTE";
  j["must_save"] = std::move(save);
  j["must_recompute"] = std::move(recompute);
  if (!offload.empty()) {
    j["offload"] = std::move(offload);
    j["offload_note"] = kSacOffloadNote;
  }
  return j.dump(2, ' ', true, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string JaxText(const Graph& graph, const SaveSet& keep,
                    const std::vector<TensorId>& offloaded, const ordered_json& head) {
  ordered_json names = ordered_json::array(), tags = ordered_json::array();
  ordered_json offload_names = ordered_json::array();
  for (TensorId t : SaveCandidates(graph)) {
    const bool moved = std::binary_search(offloaded.begin(), offloaded.end(), t);
    if (!keep[t] && !moved) continue;
    const Tensor& tensor = graph.tensors[t];
    (moved ? offload_names : names).push_back(tensor.name);
    ordered_json tag;
    tag["name"] = tensor.name;
    tag["tensor"] = tensor.name;
    const Node& producer = graph.nodes[tensor.producer];
    tag["op"] = producer.op;
    tag["scope"] = producer.scope;
    tags.push_back(std::move(tag));
  }
  ordered_json j = head;
  if (!offloaded.empty()) {
    j["policy"] = "jax.checkpoint_policies.save_and_offload_only_these_names";
    j["usage"] =
        "tag each value below with jax.ad_checkpoint.checkpoint_name(x, name) where the model "
        "makes it, then jax.checkpoint(f, policy=jax.checkpoint_policies."
        "save_and_offload_only_these_names(names_which_can_be_saved=..., "
        "names_which_can_be_offloaded=..., offload_src=\"device\", "
        "offload_dst=\"pinned_host\")); untagged values are recomputed; XLA schedules the "
        "copies, not ckptplan's copy model";
    j["names_which_can_be_saved"] = std::move(names);
    j["names_which_can_be_offloaded"] = std::move(offload_names);
    j["offload_src"] = "device";
    j["offload_dst"] = "pinned_host";
    j["checkpoint_name_tags"] = std::move(tags);
    return j.dump(2, ' ', true, nlohmann::json::error_handler_t::replace) + "\n";
  }
  j["policy"] = "jax.checkpoint_policies.save_only_these_names";
  j["usage"] =
      "tag each value below with jax.ad_checkpoint.checkpoint_name(x, name) where the model "
      "makes it, then jax.checkpoint(f, policy=jax.checkpoint_policies."
      "save_only_these_names(*names)); untagged values are recomputed";
  j["names"] = std::move(names);
  j["checkpoint_name_tags"] = std::move(tags);
  return j.dump(2, ' ', true, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string Report(const ExportResult& result, ExportTarget target, const ExportInput& input,
                   size_t num_candidates, double step_cost, CostUnit unit) {
  std::ostringstream report;
  const bool offloads = !result.plan.offloaded.empty() || !result.chosen.offloaded.empty();
  report << "export " << ToString(target) << ": " << input.plan_path << " ("
         << result.plan.dropped << " of " << num_candidates << " candidates recomputed, ";
  if (offloads) report << result.plan.offloaded.size() << " offloaded, ";
  report << "peak " << FormatBytes(result.plan.peak_bytes) << ", recompute "
         << CostText(unit, result.plan.recompute_cost);
  if (offloads) report << ", exposed copies " << CostText(unit, result.plan.exposed_cost);
  report << ")\n";
  if (result.exact) {
    report << ToString(target) << " takes the plan exactly: " << result.chosen.label << "\n";
    if (offloads && target == ExportTarget::kJax) {
      report << "  " << result.plan.offloaded.size()
             << " offloaded to pinned_host; XLA schedules the copies, so ckptplan's copy "
                "timing (and the peak it implies) is its model's, not XLA's\n";
    }
  } else {
    double given_up = (result.chosen.recompute_cost + result.chosen.exposed_cost) -
                      (result.plan.recompute_cost + result.plan.exposed_cost);
    report << ToString(target) << " cannot express the plan exactly; nearest plan that fits: "
           << result.chosen.label << "\n"
           << "  peak " << FormatBytes(result.chosen.peak_bytes) << " (" << result.chosen.peak_bytes
           << " B; plan " << result.plan.peak_bytes << " B, budget " << input.budget_bytes
           << " B)\n"
           << "  recompute " << CostText(unit, result.chosen.recompute_cost) << ", "
           << (given_up >= 0 ? "+" : "") << CostText(unit, given_up) << " vs the plan ("
           << (given_up >= 0 ? "+" : "") << PercentText(given_up, step_cost) << " of the step)\n"
           << "  " << result.chosen.dropped << " candidates recomputed (plan: "
           << result.plan.dropped << ")\n";
    if (offloads) {
      report << "  " << result.chosen.offloaded.size() << " offloaded (plan: "
             << result.plan.offloaded.size() << "), exposed copies "
             << CostText(unit, result.chosen.exposed_cost) << "\n";
    }
    if (offloads && target == ExportTarget::kPytorchSac) {
      report << "  pytorch-sac has no offload policy (torch 1.13 has no selective "
                "checkpointing); the file lists the plan's offloads under \"offload\"\n";
    }
  }
  if (input.approx != nullptr && input.approx->any()) {
    const ApproxPlan& approx = *input.approx;
    report << "approximations: the plan re-runs " << approx.choices.size()
           << " linear(s) approximately (estimated gradient error "
           << ErrorText(approx.estimated_error) << ", recompute "
           << CostText(unit, approx.recompute_cost) << "); " << ToString(target)
           << " cannot express approximate recompute, so this file recomputes exactly (recompute "
           << CostText(unit, result.chosen.recompute_cost)
           << "); apply the plan file with ckptplan_torch.apply_plan to run them\n";
  }
  return report.str();
}

std::string WriteText(const Graph& graph, const ExportInput& input, ExportTarget target,
                      const ExportResult& result, double step_cost) {
  std::string text;
  ordered_json head;
  head["format"] = "ckptplan.export." + std::string(ToString(target));
  head["version"] = 1;
  head["plan"] = input.plan_path;
  head["rounding"] = ReportJson(graph, result, step_cost);
  if (input.approx != nullptr && input.approx->any()) {
    head["approximations"] = {
        {"expressed", false},
        {"count", input.approx->choices.size()},
        {"plan_recompute_cost", input.approx->recompute_cost},
        {"note", "approximate recompute is not expressible here: recomputed exactly"}};
  }
  switch (target) {
    case ExportTarget::kPytorchSac:
      text = PytorchSacText(graph, result.chosen.keep, result.plan.offloaded, head);
      break;
    case ExportTarget::kJax:
      text = JaxText(graph, result.chosen.keep, result.chosen.offloaded, head);
      break;
    case ExportTarget::kMegatron: {
      std::string flags = result.chosen.label.rfind("--", 0) == 0 ? result.chosen.label : "";
      text = CommentLines(result.report) + flags + "\n";
      break;
    }
    case ExportTarget::kTorchTitan:
      text = CommentLines(result.report) + "[activation_checkpoint]\n" + result.chosen.label + "\n";
      break;
    case ExportTarget::kDeepSpeed: {
      ordered_json j;
      ordered_json block;
      ordered_json wrap = result.chosen.modules;
      block["partition_activations"] = false;
      block["cpu_checkpointing"] = false;
      block["contiguous_memory_optimization"] = false;
      block["number_checkpoints"] = wrap.size();
      block["synchronize_checkpoint_boundary"] = false;
      block["profile"] = false;
      j["activation_checkpointing"] = std::move(block);
      ordered_json info = head;
      info["checkpoint_modules"] = std::move(wrap);
      info["usage"] =
          "call each listed module through deepspeed.checkpointing.checkpoint(module, *inputs)";
      j["ckptplan"] = std::move(info);
      text = j.dump(2, ' ', true, nlohmann::json::error_handler_t::replace) + "\n";
      break;
    }
  }
  return text;
}

}  // namespace

bool ParseExportTarget(std::string_view name, ExportTarget* target) {
  for (size_t i = 0; i < std::size(kTargetNames); ++i) {
    if (kTargetNames[i] == name) {
      *target = static_cast<ExportTarget>(i);
      return true;
    }
  }
  return false;
}

std::string_view ToString(ExportTarget target) {
  return kTargetNames[static_cast<size_t>(target)];
}

ExportResult ExportPlan(const Graph& graph, const ExportInput& input, ExportTarget target) {
  Exporter ex(graph, input);
  ExportResult result;
  result.plan = ex.Evaluate("the plan's save set", input.keep, input.offloaded);
  std::vector<Expressed> options;
  switch (target) {
    case ExportTarget::kPytorchSac:
      if (result.plan.offloaded.empty()) {
        result.chosen = result.plan;
      } else {
        options = SacOffloadOptions(ex, input);
      }
      break;
    case ExportTarget::kJax:
      result.chosen = result.plan;
      break;
    case ExportTarget::kMegatron:
      RequireLayers(ex.structure(), target, graph);
      options = MegatronOptions(ex);
      if (!result.plan.offloaded.empty()) AddMegatronOffloads(ex, result.plan.offloaded, &options);
      break;
    case ExportTarget::kTorchTitan:
      RequireLayers(ex.structure(), target, graph);
      options = TorchTitanOptions(ex);
      break;
    case ExportTarget::kDeepSpeed:
      options = DeepSpeedOptions(ex, ex.PlanDrops(), input.budget_bytes);
      break;
  }
  if (!options.empty()) result.chosen = ex.Choose(options, target);
  result.exact = ex.SameDrops(result.chosen.keep, result.plan.keep) &&
                 result.chosen.offloaded == result.plan.offloaded;
  const double step_cost = ex.step_cost();
  result.report = Report(result, target, input, ex.structure().candidates().size(), step_cost,
                         graph.cost_unit);

  result.text = WriteText(graph, input, target, result, step_cost);
  spdlog::info("export {}: {} -> {}", ToString(target), input.plan_path, result.chosen.label);
  return result;
}

}  // namespace ckptplan

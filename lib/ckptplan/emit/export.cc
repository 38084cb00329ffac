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

  Expressed Evaluate(std::string label, SaveSet keep) const {
    SimOptions options;
    options.reserve_bytes = input_.reserve_bytes;
    SimResult sim = Simulate(graph_, keep, options);
    Expressed e;
    e.label = std::move(label);
    e.keep = std::move(keep);
    e.peak_bytes = sim.peak_bytes;
    e.recompute_cost = sim.recompute_cost;
    for (TensorId t : structure_.candidates()) e.dropped += e.keep[t] == 0;
    return e;
  }

  Expressed Dropping(std::string label, const std::set<TensorId>& dropped) const {
    SaveSet keep = SaveAll(graph_);
    for (TensorId t : dropped) keep[t] = 0;
    return Evaluate(std::move(label), std::move(keep));
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
      if (input_.keep[t] == 0) drops.insert(t);
    }
    return drops;
  }

  // The fitting option with the least recompute cost; ties: fewer drops,
  // then the earlier option.
  const Expressed& Choose(const std::vector<Expressed>& options, ExportTarget target) const {
    const Expressed* best = nullptr;
    const Expressed* lowest = nullptr;
    for (const Expressed& e : options) {
      if (!lowest || e.peak_bytes < lowest->peak_bytes) lowest = &e;
      if (e.peak_bytes > input_.budget_bytes) continue;
      if (!best || e.recompute_cost < best->recompute_cost ||
          (e.recompute_cost == best->recompute_cost && e.dropped < best->dropped)) {
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
  return j;
}

std::string CommentLines(const std::string& text) {
  std::string out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out += "# " + line + "\n";
  return out;
}

std::string PytorchSacText(const Graph& graph, const SaveSet& keep, const ordered_json& head) {
  std::vector<uint8_t> candidate(graph.tensors.size(), 0);
  for (TensorId t : SaveCandidates(graph)) candidate[t] = 1;
  ordered_json save = ordered_json::array(), recompute = ordered_json::array();
  std::map<std::string, int> calls;
  for (const Node& node : graph.nodes) {
    if (node.phase != Phase::kForward) continue;
    int index = calls[node.op]++;
    bool saved = false, dropped = false;
    ordered_json tensors = ordered_json::array();
    for (TensorId t : node.outputs) {
      if (!candidate[t]) continue;
      tensors.push_back(graph.tensors[t].name);
      (keep[t] ? saved : dropped) = true;
    }
    if (!saved && !dropped) continue;
    ordered_json entry;
    entry["op"] = node.op;
    entry["call_index"] = index;
    entry["node"] = node.name;
    entry["scope"] = node.scope;
    entry["tensors"] = std::move(tensors);
    (saved ? save : recompute).push_back(std::move(entry));
  }
  ordered_json j = head;
  j["key"] = "(aten op, index of the call among the forward's calls of that op)";
  j["default"] = "PREFER_RECOMPUTE";
  j["must_save"] = std::move(save);
  j["must_recompute"] = std::move(recompute);
  return j.dump(2, ' ', true, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string JaxText(const Graph& graph, const SaveSet& keep, const ordered_json& head) {
  ordered_json names = ordered_json::array(), tags = ordered_json::array();
  for (TensorId t : SaveCandidates(graph)) {
    if (!keep[t]) continue;
    const Tensor& tensor = graph.tensors[t];
    names.push_back(tensor.name);
    ordered_json tag;
    tag["name"] = tensor.name;
    tag["tensor"] = tensor.name;
    const Node& producer = graph.nodes[tensor.producer];
    tag["op"] = producer.op;
    tag["scope"] = producer.scope;
    tags.push_back(std::move(tag));
  }
  ordered_json j = head;
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
  report << "export " << ToString(target) << ": " << input.plan_path << " ("
         << result.plan.dropped << " of " << num_candidates
         << " candidates recomputed, peak " << FormatBytes(result.plan.peak_bytes)
         << ", recompute " << CostText(unit, result.plan.recompute_cost) << ")\n";
  if (result.exact) {
    report << ToString(target) << " takes the plan exactly: " << result.chosen.label << "\n";
  } else {
    double given_up = result.chosen.recompute_cost - result.plan.recompute_cost;
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
      text = PytorchSacText(graph, result.chosen.keep, head);
      break;
    case ExportTarget::kJax:
      text = JaxText(graph, result.chosen.keep, head);
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
  result.plan = ex.Evaluate("the plan's save set", input.keep);
  std::vector<Expressed> options;
  switch (target) {
    case ExportTarget::kPytorchSac:
    case ExportTarget::kJax:
      result.chosen = result.plan;
      break;
    case ExportTarget::kMegatron:
      RequireLayers(ex.structure(), target, graph);
      options = MegatronOptions(ex);
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
  result.exact = ex.SameDrops(result.chosen.keep, input.keep);
  const double step_cost = ex.step_cost();
  result.report = Report(result, target, input, ex.structure().candidates().size(), step_cost,
                         graph.cost_unit);

  result.text = WriteText(graph, input, target, result, step_cost);
  spdlog::info("export {}: {} -> {}", ToString(target), input.plan_path, result.chosen.label);
  return result;
}

}  // namespace ckptplan

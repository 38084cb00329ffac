#include "ckptplan/emit/json_writer.h"

#include <nlohmann/json.hpp>

namespace ckptplan {
namespace {

std::string Str(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string Num(double value) { return nlohmann::json(value).dump(); }

void IdList(std::string& out, const Graph& graph, const std::vector<TensorId>& ids) {
  out += '[';
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ',';
    out += Str(graph.tensors[ids[i]].name);
  }
  out += ']';
}

}  // namespace

std::string GraphToJson(const Graph& graph) {
  const TrainingState& training = graph.training;
  std::string out = "{\"format\":\"ckptplan.graph\",\"version\":1,\n\"training\":{";
  out += "\"optimizer\":" + Str(training.optimizer);
  out += ",\"optimizer_bytes_per_param\":" + Num(training.optimizer_bytes_per_param);
  out += ",\"parameter_count\":" + std::to_string(training.parameter_count);
  out += ",\"parameter_bytes\":" + std::to_string(training.extra_parameter_bytes);
  out += ",\"buffer_bytes\":" + std::to_string(training.extra_buffer_bytes);
  if (training.parameter_count > 0 && training.implicit_gradient_bytes > 0) {
    // Implicit gradients are parameter_count x gradient dtype size.
    int64_t per_param = training.implicit_gradient_bytes / training.parameter_count;
    out += std::string(",\"gradient_dtype\":") +
           (per_param == 2 ? "\"bfloat16\"" : per_param == 8 ? "\"float64\"" : "\"float32\"");
  }
  out += "},\n\"tensors\":[\n";
  for (size_t t = 0; t < graph.tensors.size(); ++t) {
    const Tensor& tensor = graph.tensors[t];
    out += "{\"id\":" + Str(tensor.name) + ",\"bytes\":" + std::to_string(tensor.bytes) +
           ",\"kind\":\"" + std::string(ToString(tensor.kind)) + "\"";
    if (tensor.alias_of != kNoId) out += ",\"alias_of\":" + Str(graph.tensors[tensor.alias_of].name);
    out += t + 1 < graph.tensors.size() ? "},\n" : "}\n";
  }
  out += "],\n\"nodes\":[\n";
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    out += "{\"id\":" + Str(node.name) + ",\"op\":" + Str(node.op) + ",\"phase\":\"" +
           std::string(ToString(node.phase)) + "\",\"inputs\":";
    IdList(out, graph, node.inputs);
    out += ",\"outputs\":";
    IdList(out, graph, node.outputs);
    if (node.flops >= 0) out += ",\"flops\":" + Num(node.flops);
    if (node.time_us >= 0) out += ",\"time_us\":" + Num(node.time_us);
    if (node.workspace_bytes > 0) out += ",\"workspace_bytes\":" + std::to_string(node.workspace_bytes);
    if (!node.scope.empty()) out += ",\"scope\":" + Str(node.scope);
    if (node.tp != TpRole::kAuto) out += ",\"tp\":" + Str(std::string(ToString(node.tp)));
    for (size_t i = 0; i < node.approx.size(); ++i) {
      const ApproxOption& option = node.approx[i];
      out += i == 0 ? ",\"approx\":[" : ",";
      out += "{\"rank\":" + std::to_string(option.rank) + ",\"flops\":" + Num(option.flops);
      if (option.time_us >= 0) out += ",\"time_us\":" + Num(option.time_us);
      out += ",\"error\":" + Num(option.error);
      if (option.output_error >= 0) out += ",\"output_error\":" + Num(option.output_error);
      if (option.workspace_bytes >= 0) {
        out += ",\"workspace_bytes\":" + std::to_string(option.workspace_bytes);
      }
      if (option.factor_bytes > 0) {
        out += ",\"factor_bytes\":" + std::to_string(option.factor_bytes);
      }
      out += i + 1 < node.approx.size() ? "}" : "}]";
    }
    out += n + 1 < graph.nodes.size() ? "},\n" : "}\n";
  }
  out += "]}\n";
  return out;
}

}  // namespace ckptplan

#include "ckptplan/json_loader.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "ckptplan/errors.h"
#include "ckptplan/problems.h"

namespace ckptplan {
namespace {

using nlohmann::json;

std::string Quote(std::string_view name) { return "'" + std::string(name) + "'"; }

std::string TypeName(const json& value) { return value.type_name(); }

// Elements of `shape`, or -1 (with a problem added) when it is not a list of
// non-negative integers or its product overflows 64 bits.
int64_t ShapeElements(const json& shape, const std::string& where, Problems& problems,
                      uint32_t max_rank) {
  if (!shape.is_array()) {
    problems.Add(where + ": shape must be an array of integers, got " + TypeName(shape));
    return -1;
  }
  if (shape.size() > max_rank) {
    problems.Add(where + ": shape has " + std::to_string(shape.size()) +
                 " dims, over the limit of " + std::to_string(max_rank));
    return -1;
  }
  unsigned __int128 elements = 1;
  for (const json& dim : shape) {
    if (!dim.is_number_integer() || dim.get<int64_t>() < 0) {
      problems.Add(where + ": shape dims must be non-negative integers, got " + dim.dump());
      return -1;
    }
    elements *= static_cast<uint64_t>(dim.get<int64_t>());
    if (elements > static_cast<unsigned __int128>(INT64_MAX)) {
      problems.Add(where + ": shape " + shape.dump() + " overflows 64 bits");
      return -1;
    }
  }
  return static_cast<int64_t>(elements);
}

// Reads an optional non-negative number field; -1 when absent.
double OptionalCost(const json& object, const char* key, const std::string& where,
                    Problems& problems) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return -1;
  if (!it->is_number()) {
    problems.Add(where + ": " + key + " must be a number, got " + TypeName(*it));
    return -1;
  }
  double value = it->get<double>();
  if (!std::isfinite(value) || value < 0) {
    problems.Add(where + ": " + key + " must be finite and >= 0, got " + it->dump());
    return -1;
  }
  return value;
}

int64_t OptionalBytes(const json& object, const char* key, const std::string& where,
                      Problems& problems, int64_t fallback) {
  auto it = object.find(key);
  if (it == object.end()) return fallback;
  if (!it->is_number_integer() || (it->is_number_integer() && it->get<int64_t>() < 0) ||
      (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))) {
    problems.Add(where + ": " + key + " must be an integer in [0, 2^63-1], got " + it->dump());
    return fallback;
  }
  return it->get<int64_t>();
}

std::string OptionalString(const json& object, const char* key, const std::string& where,
                           Problems& problems, std::string fallback) {
  auto it = object.find(key);
  if (it == object.end()) return fallback;
  if (!it->is_string()) {
    problems.Add(where + ": " + key + " must be a string, got " + TypeName(*it));
    return fallback;
  }
  return it->get<std::string>();
}

// Bytes of one tensor entry from "bytes" or "shape" + "dtype".
int64_t TensorBytes(const json& entry, const std::string& where, Problems& problems,
                    uint32_t max_rank) {
  bool has_bytes = entry.contains("bytes");
  bool has_shape = entry.contains("shape");
  int64_t bytes = OptionalBytes(entry, "bytes", where, problems, -1);
  if (!has_shape) {
    if (!has_bytes && !entry.contains("alias_of")) {
      problems.Add(where + ": needs \"bytes\" or \"shape\" + \"dtype\"");
    }
    return bytes < 0 ? 0 : bytes;
  }
  std::string dtype = OptionalString(entry, "dtype", where, problems, "");
  uint32_t element_bytes = DtypeBytes(dtype);
  if (dtype.empty()) {
    problems.Add(where + ": \"shape\" needs a \"dtype\"");
    return 0;
  }
  if (element_bytes == 0) {
    problems.Add(where + ": unknown dtype " + Quote(dtype) +
                 " (expected e.g. float32, bfloat16, float16, int64, bool)");
    return 0;
  }
  int64_t elements = ShapeElements(entry["shape"], where, problems, max_rank);
  if (elements < 0) return 0;
  if (elements > INT64_MAX / element_bytes) {
    problems.Add(where + ": shape " + entry["shape"].dump() + " x " + dtype +
                 " overflows 64 bits");
    return 0;
  }
  int64_t shape_bytes = elements * element_bytes;
  if (has_bytes && bytes >= 0 && bytes != shape_bytes && !entry.contains("alias_of")) {
    problems.Add(where + ": bytes " + std::to_string(bytes) + " disagrees with shape " +
                 entry["shape"].dump() + " x " + dtype + " = " + std::to_string(shape_bytes));
  }
  return has_bytes && bytes >= 0 ? bytes : shape_bytes;
}

class Loader {
 public:
  Loader(const json& root, const std::string& source, const Limits& limits)
      : root_(root), limits_(limits), problems_(source) {
    graph_.source = source;
  }

  Graph Run() {
    CheckHeader();
    problems_.ThrowIfAny();
    ReadTensors();
    ReadNodes();
    problems_.ThrowIfAny();
    graph_.Finalize();
    ReadTraining();
    problems_.ThrowIfAny();
    ValidateGraph(graph_, limits_);
    return std::move(graph_);
  }

 private:
  void CheckHeader() {
    if (!root_.is_object()) {
      problems_.Add("top level must be a JSON object, got " + TypeName(root_));
      return;
    }
    std::string format = OptionalString(root_, "format", "top level", problems_, "");
    if (format != "ckptplan.graph") {
      problems_.Add("\"format\" must be \"ckptplan.graph\", got " +
                    (root_.contains("format") ? root_["format"].dump() : "nothing"));
    }
    auto version = root_.find("version");
    if (version == root_.end() || !version->is_number_integer() || version->get<int64_t>() != 1) {
      problems_.Add("\"version\" must be 1, got " +
                    (version == root_.end() ? std::string("nothing") : version->dump()) +
                    " (this ckptplan reads graph format version 1)");
    }
    for (const char* key : {"tensors", "nodes"}) {
      if (!root_.contains(key) || !root_[key].is_array()) {
        problems_.Add(std::string("\"") + key + "\" must be an array");
        continue;
      }
      // Checked before anything is sized from these counts.
      const bool is_nodes = key[0] == 'n';
      const uint64_t limit = is_nodes ? limits_.max_nodes : limits_.max_tensors;
      if (root_[key].size() > limit) {
        problems_.Add(std::to_string(root_[key].size()) + " " + key +
                      " is over the limit of " + std::to_string(limit) + " (raise it with " +
                      (is_nodes ? "--max-nodes)" : "--max-tensors)"));
      }
    }
  }

  void ReadTensors() {
    const json& tensors = root_["tensors"];
    graph_.tensors.reserve(tensors.size());
    std::vector<std::string> alias_names(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      const json& entry = tensors[i];
      std::string where = "tensors[" + std::to_string(i) + "]";
      if (!entry.is_object()) {
        problems_.Add(where + " must be an object, got " + TypeName(entry));
        graph_.tensors.emplace_back();
        continue;
      }
      Tensor tensor;
      tensor.name = OptionalString(entry, "id", where, problems_, "");
      if (tensor.name.empty()) problems_.Add(where + ": missing \"id\"");
      else where = "tensor " + Quote(tensor.name);
      std::string kind = OptionalString(entry, "kind", where, problems_, "activation");
      if (!ParseTensorKind(kind, &tensor.kind)) {
        problems_.Add(where + ": unknown kind " + Quote(kind) +
                      " (expected activation, input, parameter, buffer, gradient or "
                      "optimizer_state)");
      }
      tensor.bytes = TensorBytes(entry, where, problems_, limits_.max_rank);
      alias_names[i] = OptionalString(entry, "alias_of", where, problems_, "");
      if (!tensor.name.empty() &&
          !tensor_ids_.emplace(tensor.name, static_cast<TensorId>(i)).second) {
        problems_.Add(where + ": duplicate tensor id");
      }
      graph_.tensors.push_back(std::move(tensor));
    }
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (alias_names[i].empty()) continue;
      auto it = tensor_ids_.find(alias_names[i]);
      if (it == tensor_ids_.end()) {
        problems_.Add("tensor " + Quote(graph_.tensors[i].name) + ": alias_of names unknown tensor " +
                      Quote(alias_names[i]));
        continue;
      }
      graph_.tensors[i].alias_of = it->second;
    }
  }

  void ReadIdList(const json& node, const char* key, const std::string& where,
                  std::vector<TensorId>* out) {
    auto it = node.find(key);
    if (it == node.end()) return;
    if (!it->is_array()) {
      problems_.Add(where + ": \"" + key + "\" must be an array of tensor ids");
      return;
    }
    for (const json& id : *it) {
      if (!id.is_string()) {
        problems_.Add(where + ": \"" + key + "\" entries must be strings, got " + id.dump());
        continue;
      }
      auto found = tensor_ids_.find(id.get<std::string>());
      if (found == tensor_ids_.end()) {
        problems_.Add(where + ": " + key + " names unknown tensor " + Quote(id.get<std::string>()));
        continue;
      }
      out->push_back(found->second);
    }
  }

  void ReadNodes() {
    const json& nodes = root_["nodes"];
    graph_.nodes.reserve(nodes.size());
    std::unordered_map<std::string, size_t> node_ids;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const json& entry = nodes[i];
      std::string where = "nodes[" + std::to_string(i) + "]";
      Node node;
      if (!entry.is_object()) {
        problems_.Add(where + " must be an object, got " + TypeName(entry));
        graph_.nodes.push_back(std::move(node));
        continue;
      }
      node.name = OptionalString(entry, "id", where, problems_, "");
      if (node.name.empty()) problems_.Add(where + ": missing \"id\"");
      else where = "node " + Quote(node.name);
      if (!node.name.empty() && !node_ids.emplace(node.name, i).second) {
        problems_.Add(where + ": duplicate node id");
      }
      node.op = OptionalString(entry, "op", where, problems_, "");
      if (node.op.empty()) problems_.Add(where + ": missing \"op\"");
      node.scope = OptionalString(entry, "scope", where, problems_, "");
      std::string phase = OptionalString(entry, "phase", where, problems_, "");
      if (!ParsePhase(phase, &node.phase)) {
        problems_.Add(where + ": \"phase\" must be forward, backward or optimizer, got " +
                      (entry.contains("phase") ? entry["phase"].dump() : "nothing"));
      }
      ReadIdList(entry, "inputs", where, &node.inputs);
      ReadIdList(entry, "outputs", where, &node.outputs);
      node.flops = OptionalCost(entry, "flops", where, problems_);
      node.time_us = OptionalCost(entry, "time_us", where, problems_);
      node.workspace_bytes = OptionalBytes(entry, "workspace_bytes", where, problems_, 0);
      graph_.nodes.push_back(std::move(node));
    }
  }

  // Defaults: optimizer state bytes per parameter, in fp32 moments.
  static bool OptimizerBytesPerParam(const std::string& name, double* bytes) {
    if (name == "adam" || name == "adamw") *bytes = 8;
    else if (name == "sgd_momentum") *bytes = 4;
    else if (name == "sgd" || name == "none") *bytes = 0;
    else return false;
    return true;
  }

  void ReadTraining() {
    static const json kEmpty = json::object();
    const json& training = root_.contains("training") ? root_["training"] : kEmpty;
    const std::string where = "training";
    if (!training.is_object()) {
      problems_.Add("\"training\" must be an object");
      return;
    }
    TrainingState& state = graph_.training;
    state.optimizer = OptionalString(training, "optimizer", where, problems_, "none");
    double default_bytes = 0;
    if (!OptimizerBytesPerParam(state.optimizer, &default_bytes)) {
      problems_.Add(where + ": unknown optimizer " + Quote(state.optimizer) +
                    " (expected adam, adamw, sgd, sgd_momentum or none)");
    }
    state.optimizer_bytes_per_param = default_bytes;
    if (training.contains("optimizer_bytes_per_param")) {
      double value = OptionalCost(training, "optimizer_bytes_per_param", where, problems_);
      if (value >= 0) state.optimizer_bytes_per_param = value;
    }
    std::string param_dtype = OptionalString(training, "parameter_dtype", where, problems_, "float32");
    std::string grad_dtype = OptionalString(training, "gradient_dtype", where, problems_, param_dtype);
    uint32_t param_size = DtypeBytes(param_dtype), grad_size = DtypeBytes(grad_dtype);
    if (param_size == 0) problems_.Add(where + ": unknown parameter_dtype " + Quote(param_dtype));
    if (grad_size == 0) problems_.Add(where + ": unknown gradient_dtype " + Quote(grad_dtype));
    if (param_size == 0 || grad_size == 0) return;

    int64_t listed_params = 0, listed_param_bytes = 0;
    bool has_gradients = false, has_optimizer_state = false;
    for (const Tensor& tensor : graph_.tensors) {
      if (tensor.alias_of != kNoId) continue;
      if (tensor.kind == TensorKind::kParameter) {
        ++listed_params;
        listed_param_bytes = SaturatingAdd(listed_param_bytes, tensor.bytes);
      }
      has_gradients |= tensor.kind == TensorKind::kGradient;
      has_optimizer_state |= tensor.kind == TensorKind::kOptimizerState;
    }
    state.parameter_count = OptionalBytes(training, "parameter_count", where, problems_,
                                          listed_param_bytes / param_size);
    int64_t default_extra = listed_params == 0 ? SaturatingMul(state.parameter_count, param_size) : 0;
    state.extra_parameter_bytes =
        OptionalBytes(training, "parameter_bytes", where, problems_, default_extra);
    state.extra_buffer_bytes = OptionalBytes(training, "buffer_bytes", where, problems_, 0);
    if (!has_optimizer_state) {
      double bytes = std::round(state.optimizer_bytes_per_param *
                                static_cast<double>(state.parameter_count));
      state.extra_optimizer_bytes = bytes < 0x1p63 ? static_cast<int64_t>(bytes) : INT64_MAX;
    }
    if (!has_gradients) state.implicit_gradient_bytes = SaturatingMul(state.parameter_count, grad_size);
  }

  const json& root_;
  const Limits& limits_;
  Problems problems_;
  Graph graph_;
  std::unordered_map<std::string, TensorId> tensor_ids_;
};

}  // namespace

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path + ": cannot open file for reading");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw IoError(path + ": read failed");
  return buffer.str();
}

Graph ParseJsonGraph(std::string_view text, const std::string& source, const Limits& limits) {
  CheckJsonDepth(text, limits.max_depth, source);
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    throw InputError(source + ": malformed JSON at byte " + std::to_string(e.byte) +
                     ": " + e.what());
  } catch (const json::exception& e) {  // e.g. a number too large for a double
    throw InputError(source + ": malformed JSON: " + e.what());
  }
  return Loader(root, source, limits).Run();
}

Graph LoadJsonGraph(const std::string& path, const Limits& limits) {
  return ParseJsonGraph(ReadFile(path), path, limits);
}

}  // namespace ckptplan

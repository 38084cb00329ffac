#include "ckptplan/ingest/json_loader.h"

#include <sys/stat.h>

#include <algorithm>
#include <iterator>
#include <cmath>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "ckptplan/base/text_escape.h"
#include "ckptplan/base/errors.h"
#include "ckptplan/base/file_io.h"
#include "ckptplan/base/json_document.h"
#include "ckptplan/base/problems.h"
#include "ckptplan/base/sha256.h"

namespace ckptplan {
namespace {

using nlohmann::json;

std::string Quote(std::string_view name) { return "'" + ShowName(name) + "'"; }

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

// Ids by name, without a second copy of the names: a hash set of ids whose
// names live in the graph. Must not move once built (the functors point at it).
class NameIndex {
 public:
  using Names = std::function<const std::string&(uint32_t)>;
  explicit NameIndex(Names names)
      : names_(std::move(names)), set_(64, Hash{this}, Equal{this}) {}
  NameIndex(const NameIndex&) = delete;
  NameIndex& operator=(const NameIndex&) = delete;

  /// Adds `id` under its name; returns false when the name was taken.
  bool Insert(uint32_t id) { return set_.insert(id).second; }
  /// The first id added under `name`, or kNoId.
  uint32_t Find(std::string_view name) const {
    probe_ = name;
    auto it = set_.find(kProbe);
    return it == set_.end() ? kNoId : *it;
  }

 private:
  static constexpr uint32_t kProbe = UINT32_MAX;
  std::string_view Name(uint32_t id) const { return id == kProbe ? probe_ : names_(id); }
  struct Hash {
    const NameIndex* self;
    size_t operator()(uint32_t id) const { return std::hash<std::string_view>()(self->Name(id)); }
  };
  struct Equal {
    const NameIndex* self;
    bool operator()(uint32_t a, uint32_t b) const { return self->Name(a) == self->Name(b); }
  };

  Names names_;
  std::unordered_set<uint32_t, Hash, Equal> set_;
  mutable std::string_view probe_;
};

class Loader {
 public:
  Loader(const std::string& source, const Limits& limits)
      : limits_(limits),
        header_problems_(source),
        problems_(source),
        tensor_ids_([this](uint32_t id) -> const std::string& { return graph_.tensors[id].name; }),
        node_ids_([this](uint32_t id) -> const std::string& { return graph_.nodes[id].name; }) {
    graph_.source = source;
  }

  /// Reads a whole document: the DOM path.
  Graph RunDom(const json& root) {
    root_ = root;
    if (root_.is_object()) {
      for (const char* key : {"tensors", "nodes"}) {
        auto it = root_.find(key);
        if (it == root_.end() || !it->is_array()) continue;
        streamed_array_[key[0] == 'n'] = true;
      }
    }
    CheckHeader();
    header_problems_.ThrowIfAny();
    const json& tensors = root_["tensors"];
    graph_.tensors.reserve(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) ReadTensor(tensors[i]);
    FinishTensors();
    const json& nodes = root_["nodes"];
    graph_.nodes.reserve(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) ReadNode(nodes[i]);
    return Finish();
  }

  // The streaming path: the handler below feeds top-level members other than
  // the two arrays into root(), and the arrays' entries one at a time.
  json& root() { return root_; }
  void StartArray(bool nodes) { streamed_array_[nodes] = true; }
  void ReadTensor(const json& entry);
  void FinishTensors();
  void ReadNode(const json& entry);
  bool tensors_finished() const { return tensors_finished_; }

  /// Checks the header, then reports the entries' problems, then validates.
  Graph Finish() {
    CheckHeader();
    header_problems_.ThrowIfAny();
    problems_.ThrowIfAny();
    graph_.Finalize();
    ReadTraining();
    problems_.ThrowIfAny();
    ValidateGraph(graph_, limits_);
    CheckApproxNodes();
    problems_.ThrowIfAny();
    return std::move(graph_);
  }

 private:
  void CheckHeader() {
    if (!root_.is_object()) {
      header_problems_.Add("top level must be a JSON object, got " + TypeName(root_));
      return;
    }
    std::string format = OptionalString(root_, "format", "top level", header_problems_, "");
    if (format != "ckptplan.graph") {
      header_problems_.Add("\"format\" must be \"ckptplan.graph\", got " +
                           (root_.contains("format") ? root_["format"].dump() : "nothing"));
    }
    auto version = root_.find("version");
    if (version == root_.end() || !version->is_number_integer() || version->get<int64_t>() != 1) {
      header_problems_.Add("\"version\" must be 1, got " +
                           (version == root_.end() ? std::string("nothing") : version->dump()) +
                           " (this ckptplan reads graph format version 1)");
    }
    for (const char* key : {"tensors", "nodes"}) {
      if (!streamed_array_[key[0] == 'n']) {
        header_problems_.Add(std::string("\"") + key + "\" must be an array");
      }
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
    out->reserve(it->size());
    for (const json& id : *it) {
      if (!id.is_string()) {
        problems_.Add(where + ": \"" + key + "\" entries must be strings, got " + id.dump());
        continue;
      }
      const TensorId found = tensor_ids_.Find(id.get_ref<const std::string&>());
      if (found == kNoId) {
        problems_.Add(where + ": " + key + " names unknown tensor " + Quote(id.get<std::string>()));
        continue;
      }
      out->push_back(found);
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

  json root_ = json::object();
  bool streamed_array_[2] = {false, false};  // "tensors", "nodes" seen as arrays
  const Limits& limits_;
  Problems header_problems_;
  Problems problems_;
  Graph graph_;
  NameIndex tensor_ids_;
  NameIndex node_ids_;
  std::vector<std::pair<TensorId, std::string>> alias_names_;
  bool tensors_finished_ = false;
  // In-place writes (see WriteInPlace): the latest version of each tensor,
  // and whether a tensor's storage holds a value before the node being read.
  std::vector<TensorId> latest_;
  std::vector<uint8_t> available_;
  std::unordered_map<std::string, uint32_t> version_suffix_;

  void WriteInPlace(Node& node);
  void ReadApprox(const json& entry, const std::string& where, Node* node);
  void CheckApproxNodes();
  static constexpr int kWeightHops = 3;
  bool IsWeight(TensorId t, int hops) const;
  TensorId NewVersion(TensorId written, TensorId current, const std::string& node_name);
};

void Loader::ReadTensor(const json& entry) {
  const size_t i = graph_.tensors.size();
  std::string where = "tensors[" + std::to_string(i) + "]";
  if (!entry.is_object()) {
    problems_.Add(where + " must be an object, got " + TypeName(entry));
    graph_.tensors.emplace_back();
    return;
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
  std::string alias = OptionalString(entry, "alias_of", where, problems_, "");
  if (!alias.empty()) alias_names_.emplace_back(static_cast<TensorId>(i), std::move(alias));
  const bool named = !tensor.name.empty();
  graph_.tensors.push_back(std::move(tensor));
  if (named && !tensor_ids_.Insert(static_cast<TensorId>(i))) {
    problems_.Add(where + ": duplicate tensor id");
  }
}

void Loader::FinishTensors() {
  tensors_finished_ = true;
  for (auto& [i, name] : alias_names_) {
    const TensorId found = tensor_ids_.Find(name);
    if (found == kNoId) {
      problems_.Add("tensor " + Quote(graph_.tensors[i].name) + ": alias_of names unknown tensor " +
                    Quote(name));
      continue;
    }
    graph_.tensors[i].alias_of = found;
  }
  alias_names_.clear();
  alias_names_.shrink_to_fit();
  latest_.resize(graph_.tensors.size());
  available_.resize(graph_.tensors.size());
  for (TensorId t = 0; t < graph_.tensors.size(); ++t) {
    const Tensor& tensor = graph_.tensors[t];
    latest_[t] = t;
    available_[t] = IsResidentKind(tensor.kind) && tensor.alias_of == kNoId;
  }
}

// A node that lists among its outputs a tensor whose storage already holds a
// value (a resident tensor, or one an earlier node made) and that it reads, or
// that is resident, writes it in place. Lowered to the alias form: the output
// becomes a new version, alias_of the version the node reads (added to its
// inputs when the write does not read it), of the same kind; later reads by
// name read the newest version. Forward reads of a parameter before its
// update therefore read the original, and the simulator sees one storage.
void Loader::WriteInPlace(Node& node) {
  for (TensorId& in : node.inputs) in = latest_[in];
  const size_t num_inputs = node.inputs.size();
  for (TensorId& out : node.outputs) {
    const TensorId current = latest_[out];
    if (!available_[current]) continue;
    const bool reads = std::find(node.inputs.begin(), node.inputs.begin() + num_inputs,
                                 current) != node.inputs.begin() + num_inputs;
    if (!reads && !IsResidentKind(graph_.tensors[current].kind)) continue;
    if (!reads) node.inputs.push_back(current);
    const TensorId version = NewVersion(out, current, node.name);
    latest_[out] = latest_[current] = version;
    out = version;
  }
  for (TensorId out : node.outputs) available_[out] = 1;
}

// Version names are `<tensor>@<node>`, made unique with `#2`, `#3`...: the
// same graph file always gives the same names (plan files name tensors).
TensorId Loader::NewVersion(TensorId written, TensorId current, const std::string& node_name) {
  const TensorId id = static_cast<TensorId>(graph_.tensors.size());
  Tensor version;
  version.name = graph_.tensors[written].name + "@" + node_name;
  version.kind = graph_.tensors[written].kind;
  version.bytes = graph_.tensors[written].bytes;
  version.alias_of = current;
  if (tensor_ids_.Find(version.name) != kNoId) {
    // The counter per name keeps a file with many such writes linear.
    uint32_t& suffix = version_suffix_[version.name];
    const std::string base = version.name;
    do {
      version.name = base + "#" + std::to_string(++suffix + 1);
    } while (tensor_ids_.Find(version.name) != kNoId);
  }
  graph_.tensors.push_back(std::move(version));
  tensor_ids_.Insert(id);
  latest_.push_back(id);
  available_.push_back(0);
  return id;
}

void Loader::ReadNode(const json& entry) {
  const size_t i = graph_.nodes.size();
  std::string where = "nodes[" + std::to_string(i) + "]";
  Node node;
  if (!entry.is_object()) {
    problems_.Add(where + " must be an object, got " + TypeName(entry));
    graph_.nodes.push_back(std::move(node));
    return;
  }
  node.name = OptionalString(entry, "id", where, problems_, "");
  if (node.name.empty()) problems_.Add(where + ": missing \"id\"");
  else where = "node " + Quote(node.name);
  const bool fresh = !node.name.empty() && node_ids_.Find(node.name) == kNoId;
  if (!node.name.empty() && !fresh) problems_.Add(where + ": duplicate node id");
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
  const std::string tp = OptionalString(entry, "tp", where, problems_, "");
  if (!tp.empty() && !ParseTpRole(tp, &node.tp)) {
    problems_.Add(where + ": \"tp\" must be column, row or replicated, got " + entry["tp"].dump());
  }
  ReadApprox(entry, where, &node);
  WriteInPlace(node);
  graph_.nodes.push_back(std::move(node));
  if (fresh) node_ids_.Insert(static_cast<uint32_t>(i));
}

// "approx": [{"rank", "flops", "time_us"?, "error", "output_error"?,
//             "workspace_bytes"?, "factor_bytes"?}, ...],
// one option per rank; kept sorted by rank.
void Loader::ReadApprox(const json& entry, const std::string& where, Node* node) {
  auto it = entry.find("approx");
  if (it == entry.end()) return;
  if (!it->is_array()) {
    problems_.Add(where + ": \"approx\" must be an array of options, got " + TypeName(*it));
    return;
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const json& option = (*it)[i];
    const std::string at = where + ": approx[" + std::to_string(i) + "]";
    if (!option.is_object()) {
      problems_.Add(at + " must be an object, got " + TypeName(option));
      continue;
    }
    ApproxOption read;
    auto rank = option.find("rank");
    if (rank == option.end() || !rank->is_number_integer() || rank->get<int64_t>() < 1) {
      problems_.Add(at + ": \"rank\" must be a positive integer, got " +
                    (rank == option.end() ? std::string("nothing") : rank->dump()));
      continue;
    }
    read.rank = rank->get<int64_t>();
    for (const char* key : {"flops", "error"}) {
      if (!option.contains(key)) problems_.Add(at + ": missing \"" + key + "\"");
    }
    read.flops = std::max(0.0, OptionalCost(option, "flops", at, problems_));
    read.error = std::max(0.0, OptionalCost(option, "error", at, problems_));
    read.time_us = OptionalCost(option, "time_us", at, problems_);
    read.output_error = OptionalCost(option, "output_error", at, problems_);
    read.workspace_bytes = OptionalBytes(option, "workspace_bytes", at, problems_, -1);
    read.factor_bytes = OptionalBytes(option, "factor_bytes", at, problems_, 0);
    node->approx.push_back(read);
  }
  std::stable_sort(node->approx.begin(), node->approx.end(),
                   [](const ApproxOption& a, const ApproxOption& b) { return a.rank < b.rank; });
  for (size_t i = 1; i < node->approx.size(); ++i) {
    if (node->approx[i].rank == node->approx[i - 1].rank) {
      problems_.Add(where + ": approx lists rank " + std::to_string(node->approx[i].rank) +
                    " twice");
    }
  }
}

// A parameter, or a view of one (alias_of), or made from one by at most
// `hops` forward view, layout or cast ops (a transpose copied, autocast's
// _to_copy of a weight).
bool Loader::IsWeight(TensorId t, int hops) const {
  const TensorId root = graph_.StorageRoot(t);
  if (graph_.tensors[root].kind == TensorKind::kParameter) return true;
  const NodeId p = graph_.tensors[root].producer;
  if (hops == 0 || p == kNoId || graph_.nodes[p].phase != Phase::kForward) return false;
  static const char* const kWeightOps[] = {"t",     "transpose", "permute", "view",
                                           "reshape", "tocopy",  "to",      "clone",
                                           "contiguous", "expand", "unsafeview", "detach",
                                           "cast", "alias"};
  const std::string op = OpBaseName(graph_.nodes[p].op);
  if (std::none_of(std::begin(kWeightOps), std::end(kWeightOps),
                   [&](const char* weight_op) { return op == weight_op; })) {
    return false;
  }
  const std::vector<TensorId>& inputs = graph_.nodes[p].inputs;
  return std::any_of(inputs.begin(), inputs.end(),
                     [&](TensorId in) { return IsWeight(in, hops - 1); });
}

// Approximate options belong to forward linear nodes whose weight is a
// parameter (read directly, through a view or a cast): what the PyTorch side
// replaces by a truncated SVD. Runs on a validated graph (alias chains end).
void Loader::CheckApproxNodes() {
  for (const Node& node : graph_.nodes) {
    if (node.approx.empty()) continue;
    const std::string where = "node " + Quote(node.name) + ": approx";
    if (node.phase != Phase::kForward) {
      problems_.Add(where + " is only for forward nodes, got phase " +
                    std::string(ToString(node.phase)));
    }
    if (!IsLinearOp(node.op)) {
      problems_.Add(where + " is only for linear ops (mm, addmm, matmul, bmm, linear, Gemm), got " +
                    Quote(node.op));
    }
    const bool reads_weight = std::any_of(node.inputs.begin(), node.inputs.end(),
                                          [&](TensorId t) { return IsWeight(t, kWeightHops); });
    if (!reads_weight) {
      problems_.Add(where + ": the node reads no parameter (or view or cast of one) as its "
                    "weight");
    }
  }
}

// SAX handler that never holds the whole document: each entry of the
// top-level "tensors" and "nodes" arrays is built as a small DOM, handed to
// the Loader and dropped; other top-level members go into Loader::root().
// Gives up (wants_dom) on documents it does not expect, e.g. a top level that
// is not an object or a repeated "tensors" key, so that the DOM path reports
// them exactly as before.
class StreamHandler {
 public:
  StreamHandler(Loader& loader, const std::string& source) : loader_(loader), source_(source) {}

  bool wants_dom() const { return wants_dom_; }
  void Finish() {
    if (!loader_.tensors_finished()) loader_.FinishTensors();
    for (const json& entry : nodes_pending_) loader_.ReadNode(entry);
    nodes_pending_.clear();
  }

  bool null() { return Value([](auto& b) { return b.null(); }); }
  bool boolean(bool v) { return Value([&](auto& b) { return b.boolean(v); }); }
  bool number_integer(json::number_integer_t v) {
    return Value([&](auto& b) { return b.number_integer(v); });
  }
  bool number_unsigned(json::number_unsigned_t v) {
    return Value([&](auto& b) { return b.number_unsigned(v); });
  }
  bool number_float(json::number_float_t v, const json::string_t& text) {
    return Value([&](auto& b) { return b.number_float(v, text); });
  }
  bool string(json::string_t& v) { return Value([&](auto& b) { return b.string(v); }); }
  bool binary(json::binary_t& v) { return Value([&](auto& b) { return b.binary(v); }); }

  bool start_object(std::size_t size) {
    if (depth_ == 0) {  // the top level
      ++depth_;
      return true;
    }
    return Open([&](auto& b) { return b.start_object(size); });
  }
  bool key(json::string_t& k) {
    if (builder_) return builder_->key(k);
    // A repeated array key: the DOM keeps the last value; let it decide.
    if ((k == "tensors" && seen_[0]) || (k == "nodes" && seen_[1])) return GiveUp();
    key_ = k;
    return true;
  }
  bool end_object() {
    if (builder_) return Close([](auto& b) { return b.end_object(); });
    --depth_;  // the top level ends
    return true;
  }
  bool start_array(std::size_t size) {
    if (depth_ == 0) return GiveUp();
    if (depth_ == 1 && !builder_ && (key_ == "tensors" || key_ == "nodes")) {
      const bool nodes = key_ == "nodes";
      if (seen_[nodes]) return GiveUp();
      seen_[nodes] = true;
      array_ = nodes ? kNodes : kTensors;
      loader_.StartArray(nodes);
      ++depth_;
      return true;
    }
    return Open([&](auto& b) { return b.start_array(size); });
  }
  bool end_array() {
    if (builder_) return Close([](auto& b) { return b.end_array(); });
    if (array_ == kTensors) loader_.FinishTensors();
    array_ = kNone;
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    if (const auto* parse = dynamic_cast<const json::parse_error*>(&e)) {
      throw InputError(source_ + ": malformed JSON at byte " + std::to_string(parse->byte) +
                       ": " + e.what());
    }
    throw InputError(source_ + ": malformed JSON: " + e.what());
  }

 private:
  enum Array { kNone, kTensors, kNodes };
  using Builder = nlohmann::detail::json_sax_dom_parser<json>;

  bool GiveUp() {
    wants_dom_ = true;
    return false;  // stops the parser
  }
  // A value starts where the handler is not inside a built value.
  json& Target() {
    if (array_ != kNone) {
      entry_ = json();
      return entry_;
    }
    return loader_.root()[key_];
  }
  template <typename F>
  bool Value(F event) {
    if (depth_ == 0) return GiveUp();
    if (builder_) return event(*builder_);
    Builder builder(Target());
    bool ok = event(builder);
    Done();
    return ok;
  }
  template <typename F>
  bool Open(F event) {
    if (!builder_) {
      builder_.emplace(Target());
      nested_ = 0;
    }
    ++nested_;
    return event(*builder_);
  }
  template <typename F>
  bool Close(F event) {
    bool ok = event(*builder_);
    if (--nested_ == 0) {
      builder_.reset();
      Done();
    }
    return ok;
  }
  // A whole value was built: hand an array entry to the loader.
  void Done() {
    if (array_ == kTensors) {
      loader_.ReadTensor(entry_);
    } else if (array_ == kNodes) {
      // Nodes name tensors: hold them back until the tensors are read.
      if (loader_.tensors_finished()) {
        loader_.ReadNode(entry_);
      } else {
        nodes_pending_.push_back(std::move(entry_));
      }
    }
  }

  Loader& loader_;
  const std::string& source_;
  int depth_ = 0;
  Array array_ = kNone;
  bool seen_[2] = {false, false};
  bool wants_dom_ = false;
  std::string key_;
  json entry_;
  std::optional<Builder> builder_;
  int nested_ = 0;
  std::vector<json> nodes_pending_;
};

}  // namespace

Graph ParseJsonGraph(std::string_view text, const std::string& source, const Limits& limits) {
  CheckJsonDepth(text, limits.max_depth, source, limits.max_depth_hint);
  {
    Loader loader(source, limits);
    StreamHandler handler(loader, source);
    json::sax_parse(text.begin(), text.end(), &handler);
    if (!handler.wants_dom()) {
      handler.Finish();
      return loader.Finish();
    }
  }
  const json root = ParseJsonDocument(text, source, limits.max_depth);
  return Loader(source, limits).RunDom(root);
}

Graph LoadJsonGraph(const std::string& path, const Limits& limits, std::string* sha256_hex) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) {
    // A pipe cannot be read twice: hold it in memory.
    const std::string text = ReadFile(path);
    if (sha256_hex) *sha256_hex = Sha256Hex(text);
    return ParseJsonGraph(text, path, limits);
  }
  // A regular file is read twice in pieces (depth scan, then the streaming
  // parse), so that a large graph's text is never held in memory at once.
  auto open = [&](std::ifstream& in) {
    in.open(path, std::ios::binary);
    if (!in) throw IoError(path + ": cannot open file for reading");
  };
  {
    std::ifstream in;
    open(in);
    JsonDepthScanner scanner(limits.max_depth, path, limits.max_depth_hint);
    Sha256 sha;
    std::vector<char> piece(1 << 16);
    while (in.read(piece.data(), static_cast<std::streamsize>(piece.size())) || in.gcount() > 0) {
      const std::string_view read(piece.data(), static_cast<size_t>(in.gcount()));
      scanner.Feed(read);
      sha.Update(read);
    }
    if (in.bad()) throw IoError(path + ": read failed");
    if (sha256_hex) *sha256_hex = sha.HexDigest();
  }
  {
    std::ifstream in;
    open(in);
    Loader loader(path, limits);
    StreamHandler handler(loader, path);
    json::sax_parse(in, &handler);
    if (in.bad()) throw IoError(path + ": read failed");
    if (!handler.wants_dom()) {
      handler.Finish();
      return loader.Finish();
    }
  }
  // The document needs the whole-document reader (see StreamHandler).
  return ParseJsonGraph(ReadFile(path), path, limits);
}

}  // namespace ckptplan

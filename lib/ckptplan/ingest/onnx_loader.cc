#include "ckptplan/ingest/onnx_loader.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <set>
#include <unordered_map>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/onnx_pb.h>
#include <spdlog/spdlog.h>

#include "ckptplan/base/text_escape.h"
#include "ckptplan/ir/device.h"
#include "ckptplan/base/errors.h"
#include "ckptplan/base/limits.h"
#include "ckptplan/ingest/onnx_shapes.h"
#include "ckptplan/base/output_file.h"
#include "ckptplan/ingest/op_rules.h"
#include "ckptplan/base/problems.h"

namespace ckptplan {
namespace {

using onnx::NodeProto;
using onnx::TensorProto;

std::string Quote(const std::string& name) { return "'" + ShowName(name) + "'"; }

// ---- parsing -------------------------------------------------------------

onnx::ModelProto ParseModel(std::string_view bytes, const std::string& source) {
  onnx::ModelProto model;
  google::protobuf::io::ArrayInputStream stream(bytes.data(), static_cast<int>(
      std::min<size_t>(bytes.size(), INT_MAX)));
  google::protobuf::io::CodedInputStream coded(&stream);
  coded.SetTotalBytesLimit(INT_MAX);  // graph protos of hundreds of MB
  if (bytes.size() > static_cast<size_t>(INT_MAX)) {
    throw InputError(source + ": file is " + std::to_string(bytes.size()) +
                     " bytes; protobuf reads at most 2 GiB (keep weights in external data)");
  }
  bool parsed = model.ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
  if (!parsed) {
    throw InputError(source + ": not a valid ONNX model (protobuf parse failed after " +
                     std::to_string(coded.CurrentPosition()) + " of " +
                     std::to_string(bytes.size()) + " bytes: truncated or not an .onnx file)");
  }
  // Random bytes can parse as protobuf; an ONNX model has these.
  if (model.ir_version() <= 0 || !model.has_graph() || model.opset_import_size() == 0 ||
      model.graph().node_size() == 0) {
    throw InputError(source + ": not an ONNX model (ir_version " +
                     std::to_string(model.ir_version()) + ", " +
                     std::to_string(model.opset_import_size()) + " opset imports, " +
                     std::to_string(model.graph().node_size()) +
                     " nodes; expected ir_version >= 1, an opset import and a graph with nodes)");
  }
  return model;
}

// ---- skipping weights in the wire format ----------------------------------

bool ReadVarint(const char*& p, const char* end, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    uint8_t byte = static_cast<uint8_t>(*p++);
    *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return true;
  }
  return false;
}

void AppendVarint(std::string* out, uint64_t value) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>(value | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// Field numbers in onnx.proto.
constexpr uint32_t kModelGraph = 7, kGraphInitializer = 5;
constexpr uint32_t kTensorDataFields[] = {4, 5, 7, 9, 10, 11};  // *_data, raw_data
// Payloads above this hold weights, never shapes (kMaxFoldedElements int64s).
constexpr uint64_t kMaxKeptPayload = 8 * kMaxFoldedElements;

// Copies the serialized message `in` to `out` without large tensor payloads
// of graph initializers: `depth` 0 is a ModelProto, 1 its GraphProto, 2 an
// initializer. False when the bytes are not well-formed protobuf.
bool CopyWithoutWeights(std::string_view in, int depth, std::string* out) {
  const char* p = in.data();
  const char* end = p + in.size();
  while (p < end) {
    const char* field_start = p;
    uint64_t tag = 0, length = 0;
    if (!ReadVarint(p, end, &tag)) return false;
    uint32_t field = static_cast<uint32_t>(tag >> 3);
    switch (tag & 7) {
      case 0: if (!ReadVarint(p, end, &length)) return false; break;
      case 1: p += 8; break;
      case 5: p += 4; break;
      case 2: {
        if (!ReadVarint(p, end, &length) || length > static_cast<uint64_t>(end - p)) return false;
        std::string_view payload(p, length);
        p += length;
        bool descend = (depth == 0 && field == kModelGraph) ||
                       (depth == 1 && field == kGraphInitializer);
        if (descend) {
          std::string inner;
          if (!CopyWithoutWeights(payload, depth + 1, &inner)) return false;
          AppendVarint(out, tag);
          AppendVarint(out, inner.size());
          out->append(inner);
          continue;
        }
        bool weights = depth == 2 && length > kMaxKeptPayload &&
                       std::find(std::begin(kTensorDataFields), std::end(kTensorDataFields),
                                 field) != std::end(kTensorDataFields);
        if (weights) continue;
        break;
      }
      default:
        return false;  // groups: not used by ONNX
    }
    if (p > end) return false;
    out->append(field_start, p - field_start);
  }
  return true;
}

// Every node input must be a graph input, an initializer or an output of an
// earlier node, and every tensor has one producer. Checked before ONNX shape
// inference, which dereferences undefined inputs.
void CheckTopology(const onnx::ModelProto& model, const std::string& source) {
  Problems problems(source);
  std::set<std::string> defined;
  for (const auto& input : model.graph().input()) defined.insert(input.name());
  for (const TensorProto& init : model.graph().initializer()) defined.insert(init.name());
  if (model.graph().sparse_initializer_size() > 0) {
    problems.Add("sparse initializers are not supported (first: " +
                 Quote(model.graph().sparse_initializer(0).values().name()) + ")");
  }
  for (const NodeProto& node : model.graph().node()) {
    std::string where = "node " + Quote(node.name()) + " (" + ShowName(node.op_type()) + ")";
    for (const std::string& in : node.input()) {
      if (!in.empty() && !defined.count(in)) {
        problems.Add(where + " reads tensor " + Quote(in) +
                     ", which is no graph input, initializer or output of an earlier node "
                     "(ONNX graphs must be topologically sorted)");
      }
    }
    for (const std::string& out : node.output()) {
      if (!out.empty() && !defined.insert(out).second) {
        problems.Add(where + " makes tensor " + Quote(out) +
                     ", which is already defined (expected one producer per tensor)");
      }
    }
  }
  problems.ThrowIfAny();
}

// Weights are never needed: drop large initializer payloads before shape
// inference copies the model around.
void DropWeightData(onnx::ModelProto& model) {
  for (TensorProto& init : *model.mutable_graph()->mutable_initializer()) {
    int64_t elements = 1;
    for (int64_t d : init.dims()) elements = SaturatingMul(elements, d);
    if (elements <= kMaxFoldedElements) continue;
    init.clear_raw_data();
    init.clear_float_data();
    init.clear_int32_data();
    init.clear_int64_data();
    init.clear_double_data();
  }
}

// ---- precision and optimizer ---------------------------------------------

struct Precision {
  std::string name;
  uint32_t activation_bytes;  ///< floating activations and their gradients
  uint32_t parameter_bytes;   ///< the copy forward/backward read
  uint32_t gradient_bytes;
  uint32_t master_bytes;      ///< fp32 master weights, counted as optimizer state
  bool sixteen_bit;
};

Precision ParsePrecision(const std::string& name) {
  if (name == "fp32") return {name, 4, 4, 4, 0, false};
  if (name == "bf16-mixed" || name == "fp16-mixed") return {name, 2, 2, 2, 4, true};
  throw InputError("--precision: unknown precision '" + name +
                       "' (expected fp32, bf16-mixed or fp16-mixed)",
                   kExitUsage);
}

// Optimizer state bytes per parameter (fp32 moments) and the graph's name.
std::pair<std::string, uint32_t> ParseOptimizer(const std::string& name) {
  if (name == "adamw" || name == "adam") return {name, 8};
  if (name == "sgd-momentum") return {"sgd_momentum", 4};
  if (name == "sgd" || name == "none") return {name, 0};
  throw InputError("--optimizer: unknown optimizer '" + name +
                       "' (expected adamw, adam, sgd, sgd-momentum or none)",
                   kExitUsage);
}

std::string FormulaText(const Precision& p, const std::string& optimizer, uint32_t moments) {
  std::string dtype = p.name == "fp32" ? "fp32" : p.name.substr(0, 4);
  std::string text = std::to_string(p.parameter_bytes) + " (" + dtype + " param) + " +
                     std::to_string(p.gradient_bytes) + " (" + dtype + " grad)";
  if (p.master_bytes) text += " + " + std::to_string(p.master_bytes) + " (fp32 master)";
  if (moments == 8) text += " + 8 (" + optimizer + " exp_avg, exp_avg_sq fp32)";
  if (moments == 4) text += " + 4 (momentum fp32)";
  uint32_t total = p.parameter_bytes + p.gradient_bytes + p.master_bytes + moments;
  return text + " = " + std::to_string(total) + " bytes/param (" + optimizer + ", " + p.name + ")";
}

// ---- the forward op list -------------------------------------------------

// One forward op: an ONNX node, or several fused into one (GELU).
struct ForwardOp {
  std::string name;
  std::string op;
  std::string scope;
  std::vector<std::string> inputs;  // "" for absent optional inputs
  std::vector<std::string> outputs;
  const NodeProto* proto = nullptr;
  bool folded = false;  // every output's value is known at load time
};

std::string ScopeOf(const std::string& node_name) {
  size_t begin = node_name.empty() || node_name[0] != '/' ? 0 : 1;
  size_t end = node_name.rfind('/');
  if (end == std::string::npos || end < begin) return "";
  return node_name.substr(begin, end - begin);
}

class Builder {
 public:
  Builder(onnx::ModelProto& model, const ShapeTable& shapes, const LoadOptions& options,
          const std::string& source)
      : model_(model), shapes_(shapes), options_(options),
        precision_(ParsePrecision(options.precision)),
        device_(FindDevice(options.device)) {
    graph_.source = source;
  }

  Graph Run() {
    CollectOps();
    FuseGelu();
    FuseSilu();
    DecideFolding();
    ClassifyInitializers();
    MakeTensors();
    if (HasOwnBackward()) {
      EmitOwnGraph();
    } else {
      EmitForward();
      EmitBackward();
    }
    SetTraining();
    graph_.Finalize();
    ValidateGraph(graph_, options_.limits);
    WarnFallbacks();
    return std::move(graph_);
  }

 private:
  // ---- ops ----
  void CollectOps() {
    std::set<std::string> names;
    const auto& nodes = model_.graph().node();
    for (int i = 0; i < nodes.size(); ++i) {
      const NodeProto& node = nodes[i];
      ForwardOp op;
      op.name = node.name().empty() ? node.op_type() + "_" + std::to_string(i) : node.name();
      while (!names.insert(op.name).second) op.name += "#" + std::to_string(i);
      op.op = node.op_type();
      op.scope = ScopeOf(node.name());
      op.inputs.assign(node.input().begin(), node.input().end());
      op.outputs.assign(node.output().begin(), node.output().end());
      op.proto = &node;
      ops_.push_back(std::move(op));
    }
    for (const ForwardOp& op : ops_) {
      for (const std::string& in : op.inputs) ++consumers_[in];
    }
    for (const auto& out : model_.graph().output()) ++consumers_[out.name()];
  }

  const TensorShape* Shape(const std::string& name) const { return shapes_.Find(name); }

  bool ScalarNear(const std::string& name, double want) const {
    const TensorShape* s = Shape(name);
    return s && s->has_value && s->value.size() == 1 && std::fabs(s->value[0] - want) < 1e-3;
  }

  // The other input of a binary node, given one of them; "" if absent.
  static std::string Other(const ForwardOp& op, const std::string& one) {
    if (op.inputs.size() != 2) return "";
    return op.inputs[0] == one ? op.inputs[1] : op.inputs[1] == one ? op.inputs[0] : "";
  }

  // torch's erf GELU: x * 0.5 * (1 + erf(x / sqrt(2))) as Div, Erf, Add,
  // Mul, Mul. Fused into one Gelu op (PyTorch keeps only x for backward).
  void FuseGelu() {
    std::unordered_map<std::string, size_t> producer, consumer;
    for (size_t i = 0; i < ops_.size(); ++i) {
      for (const std::string& out : ops_[i].outputs) producer[out] = i;
      for (const std::string& in : ops_[i].inputs) consumer[in] = i;  // unique ones are checked
    }
    auto sole_consumer = [&](const std::string& t, const char* op) -> ForwardOp* {
      if (consumers_[t] != 1 || !consumer.count(t)) return nullptr;
      ForwardOp& next = ops_[consumer[t]];
      return next.op == op && next.outputs.size() == 1 ? &next : nullptr;
    };
    for (ForwardOp& erf : ops_) {
      if (erf.op != "Erf" || erf.inputs.size() != 1 || !producer.count(erf.inputs[0])) continue;
      ForwardOp& scale = ops_[producer[erf.inputs[0]]];
      if (scale.inputs.size() != 2 || consumers_[erf.inputs[0]] != 1) continue;
      std::string x = scale.inputs[0];
      bool scaled = (scale.op == "Div" && ScalarNear(scale.inputs[1], std::sqrt(2.0))) ||
                    (scale.op == "Mul" && ScalarNear(scale.inputs[1], std::sqrt(0.5)));
      ForwardOp* add = scaled ? sole_consumer(erf.outputs[0], "Add") : nullptr;
      if (!add || !ScalarNear(Other(*add, erf.outputs[0]), 1.0)) continue;
      ForwardOp* mul = sole_consumer(add->outputs[0], "Mul");
      if (!mul || Other(*mul, add->outputs[0]) != x) continue;
      ForwardOp* half = sole_consumer(mul->outputs[0], "Mul");
      if (!half || !ScalarNear(Other(*half, mul->outputs[0]), 0.5)) continue;
      // The fused op takes the last node's place, so x is read in order.
      ForwardOp fused = *half;
      fused.name = erf.name + ":gelu";
      fused.op = "Gelu";
      fused.scope = ScopeOf(erf.proto->name());
      fused.inputs = {x};
      for (ForwardOp* gone : {&scale, &erf, add, mul}) gone->op.clear();
      *half = std::move(fused);
    }
    RemoveFusedAway();
  }

  // SiLU exported as Sigmoid(x) then Mul(x, sigmoid): fused into one Silu
  // (PyTorch's silu keeps only x).
  void FuseSilu() {
    std::unordered_map<std::string, size_t> consumer;
    for (size_t i = 0; i < ops_.size(); ++i) {
      for (const std::string& in : ops_[i].inputs) consumer[in] = i;
    }
    for (ForwardOp& sigmoid : ops_) {
      if (sigmoid.op != "Sigmoid" || sigmoid.inputs.size() != 1 || sigmoid.outputs.size() != 1) {
        continue;
      }
      const std::string& s = sigmoid.outputs[0];
      if (consumers_[s] != 1 || !consumer.count(s)) continue;
      ForwardOp& mul = ops_[consumer[s]];
      if (mul.op != "Mul" || Other(mul, s) != sigmoid.inputs[0]) continue;
      mul.name = sigmoid.name + ":silu";
      mul.op = "Silu";
      mul.inputs = sigmoid.inputs;
      sigmoid.op.clear();
    }
    RemoveFusedAway();
  }

  void RemoveFusedAway() {
    ops_.erase(std::remove_if(ops_.begin(), ops_.end(),
                              [](const ForwardOp& op) { return op.op.empty(); }),
               ops_.end());
  }

  void DecideFolding() {
    for (ForwardOp& op : ops_) {
      bool all = !op.outputs.empty();
      for (const std::string& out : op.outputs) {
        const TensorShape* s = Shape(out);
        all &= out.empty() || (s && s->has_value);
      }
      op.folded = all || op.op == "Constant";
    }
  }

  const OpRule& Rule(const ForwardOp& op) {
    const OpRule* rule = FindOpRule(op.op);
    if (rule && (op.proto == nullptr || op.proto->domain().empty() ||
                 op.proto->domain() == "ai.onnx")) {
      return *rule;
    }
    return FallbackOpRule();
  }

  bool Differentiable(const OpRule& rule, size_t i) const {
    return i < 32 && (rule.differentiable_inputs >> i) & 1;
  }

  bool IsFloating(const std::string& name) const {
    const TensorShape* s = Shape(name);
    return s && IsFloatingType(s->elem_type);
  }

  // Parameters: floating initializers on a differentiable path to an output.
  void ClassifyInitializers() {
    std::unordered_map<std::string, bool> needs;
    for (const auto& out : model_.graph().output()) needs[out.name()] = true;
    for (auto it = ops_.rbegin(); it != ops_.rend(); ++it) {
      if (it->folded) continue;
      bool any = false;
      for (const std::string& out : it->outputs) any |= needs.count(out) > 0;
      if (!any) continue;
      const OpRule& rule = Rule(*it);
      for (size_t i = 0; i < it->inputs.size(); ++i) {
        if (Differentiable(rule, i) && IsFloating(it->inputs[i])) needs[it->inputs[i]] = true;
      }
    }
    needs_grad_ = std::move(needs);
    for (const TensorProto& init : model_.graph().initializer()) {
      initializers_.insert(init.name());
      bool frozen = false;
      for (const std::string& pattern : options_.frozen) {
        frozen |= fnmatch(pattern.c_str(), init.name().c_str(), 0) == 0;
      }
      if (IsFloatingType(init.data_type()) && needs_grad_.count(init.name()) && !frozen) {
        parameters_.insert(init.name());
      }
    }
  }

  // ---- tensors ----
  int64_t Elements(const std::string& name) const {
    const TensorShape* s = Shape(name);
    if (!s) return 0;
    // -1 for a known shape: the product overflowed. Saturate, so that the
    // total-bytes limit reports it instead of a negative size.
    int64_t n = s->Elements();
    return n < 0 && s->Known() ? INT64_MAX : n;
  }

  uint32_t ElementBytes(const std::string& name) const {
    const TensorShape* s = Shape(name);
    if (!s) return 0;
    if (IsFloatingType(s->elem_type)) {
      if (parameters_.count(name)) return precision_.parameter_bytes;
      if (!initializers_.count(name) && !folded_outputs_.count(name)) {
        return precision_.activation_bytes;
      }
    }
    return OnnxElementBytes(s->elem_type);
  }

  TensorId AddTensor(std::string name, int64_t bytes, TensorKind kind) {
    while (ids_.count(name)) name += "'";
    TensorId id = static_cast<TensorId>(graph_.tensors.size());
    ids_.emplace(name, id);
    Tensor tensor;
    tensor.name = std::move(name);
    tensor.bytes = bytes;
    tensor.kind = kind;
    graph_.tensors.push_back(std::move(tensor));
    return id;
  }

  TensorId Id(const std::string& name) const { return ids_.at(name); }

  void MakeTensors() {
    for (const ForwardOp& op : ops_) {
      if (op.folded) folded_outputs_.insert(op.outputs.begin(), op.outputs.end());
    }
    const auto& graph = model_.graph();
    for (const auto& input : graph.input()) {
      if (initializers_.count(input.name())) continue;
      AddTensor(input.name(), SaturatingMul(Elements(input.name()), ElementBytes(input.name())),
                TensorKind::kInput);
    }
    for (const TensorProto& init : graph.initializer()) {
      if (ids_.count(init.name())) continue;
      TensorKind kind = parameters_.count(init.name()) ? TensorKind::kParameter : TensorKind::kBuffer;
      AddTensor(init.name(), SaturatingMul(Elements(init.name()), ElementBytes(init.name())), kind);
    }
    for (const ForwardOp& op : ops_) {
      // Normalisation statistics (LayerNorm Mean/InvStdDev) stay fp32 under
      // mixed precision.
      bool stats = op.op == "LayerNormalization" || op.op == "BatchNormalization";
      for (size_t i = 0; i < op.outputs.size(); ++i) {
        const std::string& out = op.outputs[i];
        if (out.empty() || ids_.count(out)) continue;
        const TensorShape* shape = Shape(out);
        uint32_t element_bytes = stats && i > 0 && shape ? OnnxElementBytes(shape->elem_type)
                                                         : ElementBytes(out);
        AddTensor(out, SaturatingMul(Elements(out), element_bytes),
                  op.folded ? TensorKind::kBuffer : TensorKind::kActivation);
      }
    }
  }

  // ---- costs ----
  double ForwardFlops(const ForwardOp& op, const OpRule& rule) const {
    const std::string& first_out = op.outputs.empty() ? std::string() : op.outputs[0];
    double out = static_cast<double>(Elements(first_out));
    double in = op.inputs.empty() ? 0.0 : static_cast<double>(Elements(op.inputs[0]));
    auto dims = [&](size_t i) -> std::vector<int64_t> {
      const TensorShape* s = i < op.inputs.size() ? Shape(op.inputs[i]) : nullptr;
      return s ? s->dims : std::vector<int64_t>{};
    };
    if (rule.view) return 0;
    if (op.op == "MatMul") {
      std::vector<int64_t> a = dims(0);
      return 2.0 * out * (a.empty() ? 1 : a.back());
    }
    if (op.op == "Gemm") {
      std::vector<int64_t> a = dims(0);
      bool trans_a = false;
      for (const auto& attr : op.proto->attribute()) trans_a |= attr.name() == "transA" && attr.i();
      double k = a.size() == 2 ? (trans_a ? a[0] : a[1]) : 1;
      return 2.0 * out * k + out;
    }
    if (op.op == "Conv" || op.op == "ConvTranspose") {
      std::vector<int64_t> w = dims(1);
      double window = 1;
      for (size_t i = 1; i < w.size(); ++i) window *= w[i];
      return 2.0 * (op.op == "Conv" ? out : in) * window;
    }
    if (op.op == "MaxPool" || op.op == "AveragePool") {
      double window = 1;
      for (const auto& attr : op.proto->attribute()) {
        if (attr.name() == "kernel_shape") for (int64_t k : attr.ints()) window *= k;
      }
      return out * window;
    }
    if (op.op.rfind("Reduce", 0) == 0 || op.op.rfind("Global", 0) == 0) return in;
    if (op.op == "LayerNormalization" || op.op == "BatchNormalization") return in * 8;
    return out * rule.flops_per_element;
  }

  bool IsMatrixOp(const std::string& op) const {
    return op == "MatMul" || op == "Gemm" || op == "Conv" || op == "ConvTranspose" ||
           op == "Einsum";
  }

  // Time from flops and the bytes its inputs and outputs occupy.
  void SetCost(Node& node, double flops, const std::string& op) {
    double bytes = 0;
    std::set<TensorId> seen;
    for (const auto* list : {&node.inputs, &node.outputs}) {
      for (TensorId t : *list) {
        TensorId root = graph_.StorageRoot(t);
        if (!seen.insert(root).second) continue;
        bytes += graph_.tensors[root].bytes;
      }
    }
    // An embedding lookup reads rows, not the table: count its output twice.
    if (op == "Gather" && !node.outputs.empty()) {
      bytes = 2.0 * graph_.tensors[node.outputs[0]].bytes;
    }
    node.flops = flops;
    node.time_us = flops == 0 && bytes == 0
                       ? 0
                       : RooflineMicros(device_, flops, bytes, IsMatrixOp(op),
                                        precision_.sixteen_bit);
  }

  // ---- forward ----
  // Tensors an op saves beyond its inputs/outputs.
  std::vector<TensorId> AddExtras(const ForwardOp& op, const OpRule& rule, Node& node) {
    std::vector<TensorId> extras;
    const std::string& out = op.outputs[0];
    int64_t elements = Elements(out);
    switch (rule.extra) {
      case SavedExtra::kRowStats: {
        if (op.outputs.size() > 1) break;  // ONNX Mean / InvStdDev outputs exist
        const TensorShape* s = Shape(op.inputs[0]);
        if (s == nullptr) break;
        int64_t axis = -1;
        for (const auto& attr : op.proto->attribute()) if (attr.name() == "axis") axis = attr.i();
        int64_t rows = 1;
        const int64_t rank = static_cast<int64_t>(s->dims.size());
        if (op.op == "InstanceNormalization") {
          rows = rank >= 2 ? SaturatingMul(s->dims[0], s->dims[1]) : 1;
        } else {
          // A hostile axis is clamped to the rank rather than read past it.
          if (axis < 0) axis += rank;
          axis = std::clamp<int64_t>(axis, 0, rank);
          for (int64_t i = 0; i < axis; ++i) rows = SaturatingMul(rows, s->dims[i]);
        }
        extras.push_back(AddTensor(out + ".mean_rstd", SaturatingMul(rows, 2 * 4),
                                   TensorKind::kActivation));
        break;
      }
      case SavedExtra::kChannelStats: {
        const TensorShape* s = Shape(op.inputs[0]);
        int64_t channels = s != nullptr && s->dims.size() > 1 ? s->dims[1] : 1;
        extras.push_back(AddTensor(out + ".save_stats", SaturatingMul(channels, 2 * 4),
                                   TensorKind::kActivation));
        break;
      }
      case SavedExtra::kPoolIndices:
        if (op.outputs.size() > 1 && !op.outputs[1].empty()) break;
        extras.push_back(AddTensor(out + ".indices", SaturatingMul(elements, 8),
                                   TensorKind::kActivation));
        break;
      case SavedExtra::kDropoutMask:
        if (op.outputs.size() > 1 && !op.outputs[1].empty()) break;
        extras.push_back(AddTensor(out + ".mask", elements, TensorKind::kActivation));
        break;
      case SavedExtra::kNone:
        break;
    }
    for (TensorId t : extras) node.outputs.push_back(t);
    return extras;
  }

  void EmitForward() {
    extras_.resize(ops_.size());
    for (size_t i = 0; i < ops_.size(); ++i) {
      const ForwardOp& op = ops_[i];
      if (op.folded) continue;
      const OpRule& rule = Rule(op);
      if (&rule == &FallbackOpRule()) fallback_ops_.insert(op.op);
      Node node;
      node.name = op.name;
      node.op = op.op;
      node.scope = op.scope;
      node.phase = Phase::kForward;
      for (const std::string& in : op.inputs) {
        if (!in.empty()) node.inputs.push_back(Id(in));
      }
      for (const std::string& out : op.outputs) {
        if (out.empty()) continue;
        TensorId t = Id(out);
        node.outputs.push_back(t);
        if (rule.view && !op.inputs.empty() && !op.inputs[0].empty()) {
          graph_.tensors[t].alias_of = Id(op.inputs[0]);
        }
      }
      extras_[i] = AddExtras(op, rule, node);
      SetCost(node, ForwardFlops(op, rule), op.op);
      forward_flops_.push_back(node.flops);
      node_of_op_.push_back(graph_.nodes.size());
      graph_.nodes.push_back(std::move(node));
    }
  }

  // ---- backward ----
  bool RequiresGrad(const std::string& name) const { return requires_grad_.count(name) > 0; }

  void PropagateRequiresGrad() {
    requires_grad_ = parameters_;
    for (const ForwardOp& op : ops_) {
      if (op.folded) continue;
      const OpRule& rule = Rule(op);
      bool any = false;
      for (size_t i = 0; i < op.inputs.size(); ++i) {
        any |= Differentiable(rule, i) && RequiresGrad(op.inputs[i]);
      }
      if (!any) continue;
      for (const std::string& out : op.outputs) {
        if (!out.empty() && IsFloating(out) && needs_grad_.count(out)) requires_grad_.insert(out);
      }
    }
  }

  // Gradient of `name` made (or accumulated in place) by backward node `node`.
  void MakeGradient(const std::string& name, TensorId view_of, Node& node) {
    TensorId forward = Id(name);
    bool parameter = graph_.tensors[forward].kind == TensorKind::kParameter;
    TensorKind kind = parameter ? TensorKind::kGradient : TensorKind::kActivation;
    int64_t bytes = SaturatingMul(Elements(name), parameter ? precision_.gradient_bytes
                                                              : precision_.activation_bytes);
    auto it = grad_.find(name);
    TensorId grad;
    if (it != grad_.end()) {
      // Several consumers: accumulate into the existing gradient.
      grad = AddTensor(name + ".grad", 0, kind);
      graph_.tensors[grad].alias_of = it->second;
      node.inputs.push_back(it->second);
    } else {
      grad = AddTensor(name + ".grad", bytes, kind);
      if (view_of != kNoId && !parameter) graph_.tensors[grad].alias_of = view_of;
    }
    node.outputs.push_back(grad);
    grad_[name] = grad;
  }

  void EmitBackward() {
    PropagateRequiresGrad();
    Node seed;
    seed.name = "backward/seed";
    seed.op = "LossGrad";
    seed.phase = Phase::kBackward;
    for (const auto& out : model_.graph().output()) {
      if (RequiresGrad(out.name())) MakeGradient(out.name(), kNoId, seed);
    }
    seed.flops = 0;
    seed.time_us = 0;
    graph_.nodes.push_back(std::move(seed));
    size_t emitted = node_of_op_.size();
    for (size_t i = ops_.size(); i-- > 0;) {
      const ForwardOp& op = ops_[i];
      if (op.folded) continue;
      --emitted;
      EmitBackwardNode(op, extras_[i], forward_flops_[emitted]);
    }
  }

  void EmitBackwardNode(const ForwardOp& op, const std::vector<TensorId>& extras,
                        double forward_flops) {
    const OpRule& rule = Rule(op);
    Node node;
    node.name = op.name + ".backward";
    node.op = op.op + "Grad";
    node.scope = op.scope;
    node.phase = Phase::kBackward;
    TensorId output_grad = kNoId;
    for (const std::string& out : op.outputs) {
      auto it = out.empty() ? grad_.end() : grad_.find(out);
      if (it == grad_.end()) continue;
      node.inputs.push_back(it->second);
      if (output_grad == kNoId) output_grad = it->second;
    }
    if (output_grad == kNoId) return;  // no gradient reaches this op
    std::vector<size_t> grad_inputs;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      bool duplicate = std::find(op.inputs.begin(), op.inputs.begin() + i, op.inputs[i]) !=
                       op.inputs.begin() + i;
      if (Differentiable(rule, i) && RequiresGrad(op.inputs[i]) && !duplicate) {
        grad_inputs.push_back(i);
      }
    }
    if (grad_inputs.empty()) return;
    SaveForBackward(op, rule, grad_inputs, extras, node);
    for (size_t i : grad_inputs) {
      MakeGradient(op.inputs[i], rule.view ? output_grad : kNoId, node);
    }
    SetCost(node, forward_flops * rule.backward_flops_ratio, op.op);
    graph_.nodes.push_back(std::move(node));
  }

  void SaveForBackward(const ForwardOp& op, const OpRule& rule,
                       const std::vector<size_t>& grad_inputs,
                       const std::vector<TensorId>& extras, Node& node) {
    auto save = [&](TensorId t) {
      if (std::find(node.inputs.begin(), node.inputs.end(), t) == node.inputs.end()) {
        node.inputs.push_back(t);
      }
    };
    for (size_t i = 0; i < op.inputs.size() && i < 32; ++i) {
      if (op.inputs[i].empty()) continue;
      bool saved = (rule.saved_inputs >> i) & 1;
      if (!saved && ((rule.saved_inputs_for_others >> i) & 1)) {
        for (size_t j : grad_inputs) saved |= j != i;
      }
      if (saved) save(Id(op.inputs[i]));
    }
    for (size_t i = 0; i < op.outputs.size() && i < 32; ++i) {
      // ONNX-provided extras: Dropout's mask, MaxPool's indices, LayerNorm's
      // Mean/InvStdDev (BatchNorm's extra outputs are running stats).
      bool onnx_extra = i > 0 && rule.extra != SavedExtra::kNone &&
                        rule.extra != SavedExtra::kChannelStats;
      bool saved = ((rule.saved_outputs >> i) & 1) || onnx_extra;
      if (saved && !op.outputs[i].empty()) save(Id(op.outputs[i]));
    }
    for (TensorId t : extras) save(t);
  }

  // ---- models that already hold their backward ----
  bool HasOwnBackward() const {
    for (const ForwardOp& op : ops_) {
      for (const std::string& out : op.outputs) {
        if (out.size() > 5 && out.compare(out.size() - 5, 5, "_grad") == 0) return true;
      }
    }
    return false;
  }

  // Nodes from the first one that makes a "_grad" tensor on are backward;
  // "<param>_grad" tensors are gradients, "<param>.exp_avg*" initializers
  // optimizer state.
  void EmitOwnGraph() {
    bool backward = false;
    for (const ForwardOp& op : ops_) {
      if (op.folded) continue;
      for (const std::string& out : op.outputs) {
        bool grad = out.size() > 5 && out.compare(out.size() - 5, 5, "_grad") == 0;
        backward |= grad;
        if (grad && parameters_.count(out.substr(0, out.size() - 5))) {
          graph_.tensors[Id(out)].kind = TensorKind::kGradient;
        }
      }
      const OpRule& rule = Rule(op);  // only views matter: the backward is the model's
      Node node;
      node.name = op.name;
      node.op = op.op;
      node.scope = op.scope;
      node.phase = backward ? Phase::kBackward : Phase::kForward;
      for (const std::string& in : op.inputs) if (!in.empty()) node.inputs.push_back(Id(in));
      for (const std::string& out : op.outputs) {
        if (out.empty()) continue;
        node.outputs.push_back(Id(out));
        if (rule.view && !op.inputs.empty() && !op.inputs[0].empty()) {
          graph_.tensors[Id(out)].alias_of = Id(op.inputs[0]);
        }
      }
      SetCost(node, ForwardFlops(op, rule), op.op);
      graph_.nodes.push_back(std::move(node));
    }
    for (Tensor& tensor : graph_.tensors) {
      const std::string& n = tensor.name;
      if (n.find(".exp_avg") != std::string::npos && tensor.kind == TensorKind::kBuffer) {
        tensor.kind = TensorKind::kOptimizerState;
        has_optimizer_state_ = true;
      }
    }
  }

  // ---- training state ----
  void SetTraining() {
    auto [optimizer, moments] = ParseOptimizer(options_.optimizer);
    TrainingState& state = graph_.training;
    state.optimizer = optimizer;
    for (const std::string& name : parameters_) {
      state.parameter_count = SaturatingAdd(state.parameter_count, Elements(name));
    }
    state.optimizer_bytes_per_param = moments + precision_.master_bytes;
    if (!has_optimizer_state_) {
      state.extra_optimizer_bytes = SaturatingMul(
          state.parameter_count, static_cast<int64_t>(state.optimizer_bytes_per_param));
    }
    state.implicit_gradient_bytes = 0;  // gradients are tensors of the graph
    state.bytes_per_param_formula = FormulaText(precision_, optimizer, moments);
  }

  void WarnFallbacks() const {
    if (fallback_ops_.empty()) return;
    std::string list;
    for (const std::string& op : fallback_ops_) list += (list.empty() ? "" : ", ") + ShowName(op);
    spdlog::warn("{}: no backward rule for op(s) {}; assumed they keep every input for backward",
                 graph_.source, list);
  }

  onnx::ModelProto& model_;
  const ShapeTable& shapes_;
  const LoadOptions& options_;
  Precision precision_;
  const DeviceSpec& device_;
  Graph graph_;
  std::vector<ForwardOp> ops_;
  std::unordered_map<std::string, int> consumers_;
  std::unordered_map<std::string, bool> needs_grad_;
  std::set<std::string> initializers_, parameters_, folded_outputs_, requires_grad_;
  std::set<std::string> fallback_ops_;
  std::unordered_map<std::string, TensorId> ids_;
  std::unordered_map<std::string, TensorId> grad_;  // latest gradient of a forward tensor
  std::vector<std::vector<TensorId>> extras_;       // per op
  std::vector<double> forward_flops_;               // per emitted forward node
  std::vector<size_t> node_of_op_;
  bool has_optimizer_state_ = false;
};

}  // namespace

Graph ParseOnnxGraph(std::string_view bytes, const std::string& source,
                     const LoadOptions& options) {
  // Flags first: a typo should not wait for a large model to parse.
  ParsePrecision(options.precision);
  ParseOptimizer(options.optimizer);
  FindDevice(options.device);
  ShapeBindings bindings = ParseShapeBindings(options.dims, options.input_shapes);
  // Parse a copy without the weights (hundreds of MB are never copied); bytes
  // that are not well-formed go to the real parser for its error message.
  std::string skeleton;
  bool stripped = CopyWithoutWeights(bytes, 0, &skeleton);
  onnx::ModelProto model = ParseModel(stripped ? std::string_view(skeleton) : bytes, source);
  // Before any per-node work; ValidateGraph checks the built graph again.
  if (static_cast<uint64_t>(model.graph().node_size()) > options.limits.max_nodes) {
    throw InputError(source + ": " + std::to_string(model.graph().node_size()) +
                     " ONNX nodes is over the limit of " +
                     std::to_string(options.limits.max_nodes) + " (raise it with --max-nodes)");
  }
  CheckTopology(model, source);
  DropWeightData(model);
  ShapeTable shapes = ResolveShapes(model, bindings, source);
  Graph graph = Builder(model, shapes, options, source).Run();
  spdlog::info("{}: {} ONNX nodes -> {} nodes, {} tensors, {} parameters", source,
               model.graph().node_size(), graph.nodes.size(), graph.tensors.size(),
               graph.training.parameter_count);
  return graph;
}

}  // namespace ckptplan

namespace ckptplan {
namespace {

// A read-only mapping of a whole file, unmapped on destruction.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw IoError(path + ": cannot open file for reading");
    struct stat info;
    if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
      close(fd);
      throw IoError(path + ": not a regular file");
    }
    size_ = static_cast<size_t>(info.st_size);
    if (size_ > 0) {
      data_ = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (data_ == MAP_FAILED) {
        close(fd);
        throw IoError(path + ": cannot map file for reading");
      }
    }
    close(fd);
  }
  ~MappedFile() {
    if (data_ && data_ != MAP_FAILED) munmap(data_, size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::string_view bytes() const {
    return data_ ? std::string_view(static_cast<const char*>(data_), size_) : std::string_view();
  }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace

LoadedGraph LoadOnnxGraph(const std::string& path, const LoadOptions& options) {
  MappedFile file(path);
  Graph graph = ParseOnnxGraph(file.bytes(), path, options);
  return {std::move(graph), Sha256Hex(file.bytes())};
}

}  // namespace ckptplan

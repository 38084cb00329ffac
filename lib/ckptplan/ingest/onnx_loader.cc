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
#include "ckptplan/base/sha256.h"
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

// A tensor's raw_data must hold exactly its dims' elements of its type.
// libonnx 1.12's ParseData (run by data propagation on Constant values and
// initializers) sizes its buffer as raw bytes / element size and then copies
// every raw byte into it: 4 raw bytes of an int64 scalar made it write to
// null (found by onnx_fuzzer). Checked in subgraphs too, which inference
// visits.
void CheckPayloads(const onnx::GraphProto& graph, const std::string& scope, Problems& problems) {
  auto check = [&](const TensorProto& tensor, const std::string& where) {
    if (tensor.raw_data().empty() || tensor.data_location() == TensorProto::EXTERNAL) return;
    const uint32_t element = OnnxElementBytes(tensor.data_type());
    if (element == 0) return;
    int64_t elements = 1;
    for (int64_t d : tensor.dims()) elements = SaturatingMul(elements, d < 0 ? 0 : d);
    const int64_t need = SaturatingMul(elements, element);
    const int64_t have = static_cast<int64_t>(tensor.raw_data().size());
    if (have != need) {
      problems.Add(where + " holds " + std::to_string(have) + " bytes of raw_data; its dims and " +
                   "type need " + std::to_string(need));
    }
  };
  for (const TensorProto& init : graph.initializer()) {
    check(init, scope + "initializer " + Quote(init.name()));
  }
  for (const NodeProto& node : graph.node()) {
    const std::string where = scope + "node " + Quote(node.name()) + " (" +
                              ShowName(node.op_type()) + ")";
    for (const auto& attribute : node.attribute()) {
      const std::string at = where + " attribute " + Quote(attribute.name());
      if (attribute.has_t()) check(attribute.t(), at);
      for (const TensorProto& tensor : attribute.tensors()) check(tensor, at);
      if (attribute.has_g()) CheckPayloads(attribute.g(), at + ": ", problems);
      for (const auto& body : attribute.graphs()) CheckPayloads(body, at + ": ", problems);
    }
  }
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
    bool named_output = false;
    for (const std::string& out : node.output()) {
      named_output |= !out.empty();
      if (!out.empty() && !defined.insert(out).second) {
        problems.Add(where + " makes tensor " + Quote(out) +
                     ", which is already defined (expected one producer per tensor)");
      }
    }
    // Every ONNX op makes at least one output; the builder reads the first.
    if (!named_output) {
      problems.Add(where + " names no output tensor (expected at least 1)");
    }
  }
  CheckPayloads(model.graph(), "", problems);
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

struct PrecisionBytes {
  std::string name;
  uint32_t activation_bytes;  ///< floating activations and their gradients
  uint32_t parameter_bytes;   ///< the copy forward/backward read
  uint32_t gradient_bytes;
  uint32_t master_bytes;      ///< fp32 master weights, counted as optimizer state
  bool sixteen_bit;
};

PrecisionBytes BytesOf(Precision precision) {
  std::string name(ToString(precision));
  if (precision == Precision::kFp32) return {name, 4, 4, 4, 0, false};
  return {name, 2, 2, 2, 4, true};  // bf16-mixed, fp16-mixed
}

// Optimizer state bytes per parameter (fp32 moments) and the graph's name.
std::pair<std::string, uint32_t> StateOf(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::kAdamW:
    case Optimizer::kAdam:
      return {std::string(ToString(optimizer)), 8};
    case Optimizer::kSgdMomentum:
      return {"sgd_momentum", 4};
    case Optimizer::kSgd:
    case Optimizer::kNone:
      break;
  }
  return {std::string(ToString(optimizer)), 0};
}

std::string FormulaText(const PrecisionBytes& p, const std::string& optimizer, uint32_t moments) {
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
  bool relayout = false;  // a Concat of parameter views: a parameter itself
  int64_t select_axis = -1;  // a Gather read as eager's select (SelectAxis): its axis
};

// ---- strides of views (what eager PyTorch can view and what it copies) ----

std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = SaturatingMul(strides[i], dims[i]);
  return strides;
}

// Strides of `new_dims` viewing a tensor of `dims` and `strides` without a
// copy (ATen's computeStride, behind view and reshape); false when the
// layout cannot be viewed so and reshape copies.
bool ViewStrides(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                 const std::vector<int64_t>& new_dims, std::vector<int64_t>* out) {
  out->assign(new_dims.size(), 1);
  if (dims.empty()) return true;
  int64_t view_d = static_cast<int64_t>(new_dims.size()) - 1;
  int64_t chunk_base = strides.back(), tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
    // Saturating: absurd dims from a hostile model must not overflow.
    tensor_numel = SaturatingMul(tensor_numel, dims[d]);
    if (d == 0 || (dims[d - 1] != 1 && strides[d - 1] != SaturatingMul(tensor_numel, chunk_base))) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_dims[view_d] == 1)) {
        (*out)[view_d] = SaturatingMul(view_numel, chunk_base);
        view_numel = SaturatingMul(view_numel, new_dims[view_d]);
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

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
        precision_(BytesOf(options.precision)),
        device_(*options.device) {
    graph_.source = source;
  }

  Graph Run() {
    CollectOps();
    AppendLoss();
    MakeIdentityDropouts();
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
      EmitOptimizerStep();
      MakeFoldedValuesPerStep();
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
    for (const auto& out : model_.graph().output()) {
      ++consumers_[out.name()];
      outputs_.push_back(out.name());
    }
  }

  const TensorShape* Shape(const std::string& name) const {
    auto it = added_shapes_.find(name);
    return it != added_shapes_.end() ? &it->second : shapes_.Find(name);
  }

  // Outputs a training step cannot start its backward from as they are: the
  // floating ones with more than one element (logits, not a loss).
  std::vector<std::string> NonScalarOutputs() const {
    std::vector<std::string> found;
    for (const std::string& out : outputs_) {
      const TensorShape* s = Shape(out);
      if (s && IsFloatingType(s->elem_type) && s->Known() && s->Elements() > 1) {
        found.push_back(out);
      }
    }
    return found;
  }

  // A graph that ends at logits misses the loss users train with: warn, or
  // append the one --loss names (cross-entropy over the last dim against
  // int64 targets, a new graph input; or the mean of the output).
  void AppendLoss() {
    if (HasOwnBackward()) return;
    std::vector<std::string> logits = NonScalarOutputs();
    if (logits.empty() || options_.loss == LossKind::kNone) return;
    if (!options_.loss) {
      spdlog::warn("{}: the graph ends at output '{}' ({} elements), not at a loss: the loss "
                   "(e.g. SoftmaxCrossEntropyLoss) is missing, so its saved log-probabilities "
                   "and gradients are not counted{}{}",
                   ShowName(graph_.source), ShowName(logits[0]), Shape(logits[0])->Elements(),
                   options_.loss_hint.empty() ? "" : "; ", options_.loss_hint);
      return;
    }
    if (logits.size() > 1) {
      throw InputError(graph_.source + ": cannot append the " +
                           std::string(ToString(*options_.loss)) + " loss: the graph has " +
                           std::to_string(logits.size()) + " non-scalar outputs ('" + logits[0] +
                           "', '" + logits[1] + "'...); expected one to append the loss to",
                       kExitUsage);
    }
    const std::string& out = logits[0];
    const TensorShape& shape = *Shape(out);
    ForwardOp loss;
    loss.outputs = {out + ".loss"};
    TensorShape scalar;
    scalar.elem_type = shape.elem_type;
    scalar.has_rank = true;
    added_shapes_[loss.outputs[0]] = scalar;
    if (*options_.loss == LossKind::kCrossEntropy) {
      std::string targets = out + ".targets";
      TensorShape target_shape;
      target_shape.elem_type = TensorProto::INT64;
      target_shape.has_rank = true;
      target_shape.dims.assign(shape.dims.begin(), shape.dims.end() - (shape.dims.empty() ? 0 : 1));
      added_shapes_[targets] = target_shape;
      added_inputs_.push_back(targets);
      loss.name = "loss/SoftmaxCrossEntropyLoss";
      loss.op = "SoftmaxCrossEntropyLoss";
      loss.inputs = {out, targets};
    } else {
      loss.name = "loss/ReduceMean";
      loss.op = "ReduceMean";
      loss.inputs = {out};
    }
    loss.scope = "loss";
    ++consumers_[out];
    for (const std::string& in : loss.inputs) ++consumers_[in];
    ++consumers_[loss.outputs[0]];
    outputs_ = {loss.outputs[0]};
    ops_.push_back(std::move(loss));
  }

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

  // Dropout with ratio 0, or not in training mode, returns its input: an
  // Identity (a view, no mask), unless something reads its mask.
  void MakeIdentityDropouts() {
    for (ForwardOp& op : ops_) {
      if (op.op != "Dropout" || op.inputs.empty() || op.inputs[0].empty()) continue;
      bool zero_ratio = op.inputs.size() > 1 && !op.inputs[1].empty() &&
                        ScalarNear(op.inputs[1], 0.0);
      bool training = op.inputs.size() > 2 && !op.inputs[2].empty() &&
                      !ScalarNear(op.inputs[2], 0.0);
      bool mask_read = op.outputs.size() > 1 && !op.outputs[1].empty() &&
                       consumers_[op.outputs[1]] > 0;
      if ((!zero_ratio && training) || mask_read) continue;
      op.op = "Identity";
      op.inputs.resize(1);
      op.outputs.resize(1);
    }
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
    for (const std::string& out : outputs_) needs[out] = true;
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
    MarkParameterRelayouts();
  }

  // Exporters re-lay parameters out for ONNX (torch reorders LSTM/GRU gates
  // with Slice + Concat of the weights): a Concat of views of parameters is
  // a parameter laid out anew, which eager PyTorch never allocates. Its
  // output is a resident parameter of no bytes of its own whose gradient
  // stands for the gradients of the parameters it is made of (the same
  // bytes, as the slices partition them); no nodes are emitted for it.
  void MarkParameterRelayouts() {
    std::set<std::string> rooted(parameters_.begin(), parameters_.end());
    for (ForwardOp& op : ops_) {
      if (op.folded || op.inputs.empty() || op.outputs.empty()) continue;
      const OpRule& rule = Rule(op);
      if (rule.view && rooted.count(op.inputs[0])) {
        rooted.insert(op.outputs[0]);
        continue;
      }
      if (op.op != "Concat") continue;
      bool all = true;
      for (const std::string& in : op.inputs) all &= in.empty() || rooted.count(in) > 0;
      if (!all) continue;
      op.relayout = true;
      rooted.insert(op.outputs[0]);
      relayouts_.insert(op.outputs[0]);
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
    for (const std::string& input : added_inputs_) {
      AddTensor(input, SaturatingMul(Elements(input), ElementBytes(input)), TensorKind::kInput);
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
        if (op.relayout) {
          AddTensor(out, 0, TensorKind::kParameter);
          continue;
        }
        const TensorShape* shape = Shape(out);
        uint32_t element_bytes = stats && i > 0 && shape ? OnnxElementBytes(shape->elem_type)
                                                         : ElementBytes(out);
        // Dropout's mask: a bool per element (native_dropout) or the float
        // noise CPU eager F.dropout multiplies by (--dropout-mask-bytes).
        if (op.op == "Dropout" && i == 1) element_bytes = options_.dropout_mask_bytes;
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
    if (op.op == "LSTM" || op.op == "GRU") {
      // Per step: gates = X W^T + H R^T, G gates of `hidden` each.
      std::vector<int64_t> w = dims(1), r = dims(2);
      double gates_x = 1, gates_h = 1;
      for (int64_t d : w) gates_x *= d;
      for (int64_t d : r) gates_h *= d;
      std::vector<int64_t> x = dims(0);
      double steps_batch = x.size() == 3 ? static_cast<double>(x[0]) * x[1] : 1;
      return 2.0 * steps_batch * (gates_x + gates_h) + 10.0 * out;
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

  // Scratch a convolution allocates while it runs, by --device; see
  // docs/onnx-fidelity.md for the measurements behind it. cpu: PyTorch runs
  // fp32 Conv through oneDNN (mkldnn_convolution; torch 1.13, one thread:
  // 1x1 unstrided kernels on batches under 16 take the native path, no
  // scratch). oneDNN reorders plain tensors to a layout blocked by 16
  // channels (padded up to a multiple of 16) and back; an input with fewer
  // than 16 channels stays plain. Forward: reordered input and weight and
  // the blocked output, then the blocked output with the plain one.
  // Backward: the blocked input gradient beside the reordered output
  // gradient and weight, then the plain input gradient beside the reordered
  // output gradient, input and weight gradient. ConvTranspose runs
  // slow_conv_transpose2d: a column buffer of one sample (C_out x kernel x
  // input spatial) and a ones vector of the output's spatial size. GPU
  // presets: 0, as cuDNN's workspace depends on the algorithm it picks at
  // run time (hold it back with --reserve).
  int64_t ConvWorkspace(const ForwardOp& op, Phase phase, bool input_grad = true) const {
    const bool cpu = std::string_view(options_.device->name) == "cpu";
    if (!cpu || op.inputs.size() < 2 || op.outputs.empty()) return 0;
    const TensorShape* x = Shape(op.inputs[0]);
    const TensorShape* w = Shape(op.inputs[1]);
    const TensorShape* y = Shape(op.outputs[0]);
    if (!x || !w || !y || x->dims.size() < 3 || w->dims.size() != x->dims.size()) return 0;
    const int64_t bytes = precision_.activation_bytes;
    int64_t kernel = 1, spatial_x = 1, spatial_y = 1;
    for (size_t i = 2; i < w->dims.size(); ++i) {
      kernel = SaturatingMul(kernel, w->dims[i]);
      spatial_x = SaturatingMul(spatial_x, x->dims[i]);
      spatial_y = SaturatingMul(spatial_y, y->dims[i]);
    }
    const int64_t batch = x->dims[0];
    if (op.op == "ConvTranspose") {
      int64_t columns = SaturatingMul(SaturatingMul(w->dims[1], kernel), spatial_x);
      return SaturatingMul(SaturatingAdd(columns, spatial_y), bytes);
    }
    if (op.op != "Conv") return 0;
    bool strided = false;
    for (const auto& attr : op.proto->attribute()) {
      if (attr.name() == "strides") for (int64_t v : attr.ints()) strided |= v != 1;
    }
    if (kernel == 1 && !strided && batch < 16) return 0;  // native path
    auto pad = [](int64_t c) { return (c + 15) / 16 * 16; };
    const int64_t c_in = x->dims[1], c_out = y->dims[1];
    const bool blocked_in = c_in >= 16;
    const int64_t c_in_r = blocked_in ? pad(c_in) : c_in;
    auto tensor = [&](int64_t c, int64_t spatial) {
      return SaturatingMul(SaturatingMul(SaturatingMul(batch, c), spatial), bytes);
    };
    const int64_t x_plain = tensor(c_in, spatial_x), y_plain = tensor(c_out, spatial_y);
    const int64_t x_r = tensor(c_in_r, spatial_x), y_r = tensor(pad(c_out), spatial_y);
    const int64_t group_in = w->dims[1];
    const int64_t w_plain = SaturatingMul(SaturatingMul(c_out, group_in), kernel * bytes);
    const int64_t w_r = SaturatingMul(SaturatingMul(pad(c_out), blocked_in ? pad(group_in)
                                                                            : group_in),
                                      kernel * bytes);
    if (phase == Phase::kForward) {
      int64_t held = std::max(SaturatingAdd(SaturatingAdd(blocked_in ? x_r : 0, w_r), y_r),
                              SaturatingAdd(y_r, y_plain));
      return std::max<int64_t>(0, held - y_plain);
    }
    const int64_t gx = input_grad ? x_plain : 0;
    const int64_t w_data = SaturatingMul(SaturatingMul(pad(c_out), pad(group_in)), kernel * bytes);
    const int64_t data = input_grad ? std::max(SaturatingAdd(SaturatingAdd(y_r, w_data),
                                                             tensor(pad(c_in), spatial_x)),
                                               SaturatingAdd(tensor(pad(c_in), spatial_x), gx))
                                    : 0;
    const int64_t weights = SaturatingAdd(SaturatingAdd(gx, y_r),
                                          SaturatingAdd(blocked_in ? x_r : x_plain, w_r));
    return std::max<int64_t>(0, std::max(data, weights) - gx - w_plain);
  }

  // LSTM/GRU on CPU: the input's share of every step's gates, X W^T for the
  // whole sequence (G = 4 or 3 gates of `hidden` per step), is computed
  // before the first step and freed after the last; the backward stacks its
  // gradient, the same size, before the input weights' gradient.
  int64_t RecurrentWorkspace(const ForwardOp& op) const {
    if ((op.op != "LSTM" && op.op != "GRU") || op.outputs.empty()) return 0;
    const int64_t gates = op.op == "LSTM" ? 4 : 3;
    return SaturatingMul(Elements(op.outputs[0]), gates * precision_.activation_bytes);
  }

  // Cast to the input's own dtype returns the input (eager's .to() of a
  // tensor already of that type): an alias, and its gradient passes through.
  bool IsSameTypeCast(const ForwardOp& op) const {
    if (op.op != "Cast" || op.inputs.empty() || op.outputs.empty()) return false;
    const TensorShape* in = Shape(op.inputs[0]);
    const TensorShape* out = Shape(op.outputs[0]);
    return in && out && in->elem_type != 0 && in->elem_type == out->elem_type;
  }

  // Gather of an activation at a 0-d index (x[:, 0]) is eager's select: a
  // view that keeps its whole base alive while the view is saved; its
  // backward makes a gradient of the base's size (EmitSelectBackward).
  // Returns the (non-negative) axis, -1 when `op` is no such select.
  int64_t SelectAxis(const ForwardOp& op) {
    if (op.op != "Gather" || op.inputs.size() < 2 || op.outputs.empty()) return -1;
    const TensorShape* index = Shape(op.inputs[1]);
    const TensorShape* data = Shape(op.inputs[0]);
    if (!index || !index->has_rank || !index->dims.empty() || !data || !data->Known()) {
      return -1;
    }
    if (initializers_.count(op.inputs[0]) || folded_outputs_.count(op.inputs[0])) return -1;
    int64_t axis = 0;
    for (const auto& attr : op.proto->attribute()) if (attr.name() == "axis") axis = attr.i();
    const int64_t rank = static_cast<int64_t>(data->dims.size());
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return -1;
    std::vector<int64_t> strides = StridesOf(op.inputs[0]);
    strides.erase(strides.begin() + axis);
    strides_[op.outputs[0]] = std::move(strides);
    return axis;
  }

  // Strides of `name` relative to its storage: a view's as TrackView found
  // them, anything else's contiguous.
  std::vector<int64_t> StridesOf(const std::string& name) const {
    auto it = strides_.find(name);
    if (it != strides_.end()) return it->second;
    const TensorShape* s = Shape(name);
    return s ? ContiguousStrides(s->dims) : std::vector<int64_t>{};
  }

  // Records the strides of view `out` of op.inputs[0]; false when eager
  // PyTorch cannot view it so and copies (reshape of a transposed tensor):
  // then `out` is a tensor of its own.
  bool TrackView(const ForwardOp& op, const std::string& out) {
    const TensorShape* in_shape = Shape(op.inputs[0]);
    const TensorShape* out_shape = Shape(out);
    if (!in_shape || !out_shape || !in_shape->Known() || !out_shape->Known()) return true;
    std::vector<int64_t> in = StridesOf(op.inputs[0]);
    std::vector<int64_t> strides;
    if (op.op == "Transpose") {
      std::vector<int64_t> perm;
      for (const auto& attr : op.proto->attribute()) {
        if (attr.name() == "perm") perm.assign(attr.ints().begin(), attr.ints().end());
      }
      if (perm.empty()) for (size_t i = in.size(); i-- > 0;) perm.push_back(i);
      for (int64_t p : perm) {
        if (p < 0 || p >= static_cast<int64_t>(in.size())) return true;
        strides.push_back(in[p]);
      }
    } else if (op.op == "Slice" || op.op == "Split") {
      strides = in;
    } else if (!ViewStrides(in_shape->dims, in, out_shape->dims, &strides)) {
      return false;  // Reshape, Flatten, (Un)Squeeze that cannot view: a copy
    }
    if (strides.size() != out_shape->dims.size()) return true;
    strides_[out] = std::move(strides);
    return true;
  }

  // TensorIterator's elementwise ops (ATen TensorIterator.cpp,
  // reorder_dimensions) lay their output out densely in the dim order of the
  // operands: for each pair of dims the first operand whose strides tell
  // them apart (broadcast dims skipped; equal strides: the larger dim goes
  // outer) decides. So `attention(x).transpose(1, 0) + x` is laid out like
  // the transposed operand, and so is what follows it. Records the strides
  // of output 0 when it is not contiguous.
  void PropagateElementwiseLayout(const ForwardOp& op) {
    static const std::set<std::string_view> kElementwise = {
        "Abs", "Add", "Clip", "Cos", "Div", "Dropout", "Elu", "Erf", "Exp", "LeakyRelu", "Log", "Mul",
        "Neg", "Pow", "Reciprocal", "Relu", "Sigmoid", "Sin", "Sqrt", "Sub", "Tanh", "Where"};
    if (!kElementwise.count(op.op) || op.outputs.empty() || op.outputs[0].empty()) return;
    const TensorShape* out = Shape(op.outputs[0]);
    if (!out || !out->Known() || out->dims.size() < 2) return;
    const std::vector<int64_t>& dims = out->dims;
    const size_t rank = dims.size();
    std::vector<std::vector<int64_t>> operands;  // strides aligned to `dims`, 0 if broadcast
    bool strided = false;
    for (const std::string& in : op.inputs) {
      const TensorShape* s = in.empty() ? nullptr : Shape(in);
      if (!s || !s->Known() || s->dims.size() > rank) continue;
      strided |= strides_.count(in) > 0;
      std::vector<int64_t> strides = StridesOf(in);
      std::vector<int64_t> aligned(rank, 0);
      const size_t lead = rank - s->dims.size();
      for (size_t i = 0; i < s->dims.size(); ++i) {
        bool broadcast = s->dims[i] == 1 && dims[lead + i] != 1;
        aligned[lead + i] = broadcast || i >= strides.size() ? 0 : strides[i];
      }
      operands.push_back(std::move(aligned));
    }
    if (!strided) return;
    // 1 when dim a goes inside dim b, -1 when outside, 0 when no operand says.
    auto inner = [&](size_t a, size_t b) {
      for (const std::vector<int64_t>& st : operands) {
        if (st[a] == 0 || st[b] == 0) continue;
        if (st[a] < st[b]) return -1;
        if (st[a] > st[b]) return 1;
        if (dims[a] > dims[b]) return 1;
      }
      return 0;
    };
    std::vector<size_t> perm(rank);  // innermost dim first, as ATen's perm_
    for (size_t i = 0; i < rank; ++i) perm[i] = rank - 1 - i;
    for (size_t i = 1; i < rank; ++i) {
      size_t b = i;
      for (size_t a = i; a-- > 0;) {
        int c = inner(perm[a], perm[b]);
        if (c > 0) {
          std::swap(perm[a], perm[b]);
          b = a;
        } else if (c < 0) {
          break;
        }
      }
    }
    std::vector<int64_t> strides(rank, 1);
    int64_t next = 1;
    for (size_t d : perm) {
      strides[d] = next;
      next = SaturatingMul(next, std::max<int64_t>(dims[d], 1));
    }
    if (strides != ContiguousStrides(dims)) strides_[op.outputs[0]] = std::move(strides);
  }

  // Bytes of the contiguous copy ATen makes of a LayerNorm input that is not
  // contiguous (layer_norm_cpu and its backward call expect_contiguous on
  // X); the copy lives while the kernel runs.
  int64_t NormInputCopy(const ForwardOp& op) const {
    if (op.op != "LayerNormalization" || op.inputs.empty()) return 0;
    const TensorShape* x = Shape(op.inputs[0]);
    if (!x || !x->Known() || !strides_.count(op.inputs[0])) return 0;
    std::vector<int64_t> contiguous = ContiguousStrides(x->dims);
    const std::vector<int64_t>& strides = strides_.at(op.inputs[0]);
    for (size_t i = 0; i < x->dims.size() && i < strides.size(); ++i) {
      if (x->dims[i] != 1 && strides[i] != contiguous[i]) {
        return SaturatingMul(Elements(op.inputs[0]), ElementBytes(op.inputs[0]));
      }
    }
    return 0;
  }

  // A matrix product's operand eager PyTorch cannot fold into the shape the
  // kernel takes without a copy: matmul reshapes an N-d operand to
  // [batch, rows, cols] (or [rows, cols] against a 2-d weight) and mm takes
  // row- or column-major matrices. Such an operand is copied, and the copy
  // is what the backward keeps (LSTM/GRU: X goes through one such matmul).
  bool NeedsContiguousCopy(const std::string& name, bool batched) const {
    const TensorShape* s = Shape(name);
    if (!strides_.count(name) || !s || !s->Known() || s->dims.size() < 2) return false;
    const std::vector<int64_t>& dims = s->dims;
    std::vector<int64_t> strides = StridesOf(name);
    const size_t rank = dims.size();
    if (rank == 2 || batched) {
      std::vector<int64_t> folded;
      int64_t lead = 1;
      for (size_t i = 0; i + 2 < rank; ++i) lead *= dims[i];
      if (rank > 2) folded.push_back(lead);
      folded.push_back(dims[rank - 2]);
      folded.push_back(dims[rank - 1]);
      std::vector<int64_t> view;
      if (!ViewStrides(dims, strides, folded, &view)) return true;
      // The last two dims: row-major or column-major.
      int64_t r = view[view.size() - 2], c = view.back();
      bool row = c == 1 || folded.back() == 1, col = r == 1 || folded[folded.size() - 2] == 1;
      return !row && !col;
    }
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < rank; ++i) rows *= dims[i];
    std::vector<int64_t> view;
    return !ViewStrides(dims, strides, {rows, dims[rank - 1]}, &view);
  }

  void AddContiguousCopies(const ForwardOp& op, Node& node) {
    std::vector<size_t> operands;
    if (op.op == "MatMul") operands = {0, 1};
    if (op.op == "Gemm" || op.op == "LSTM" || op.op == "GRU") operands = {0};
    for (size_t i : operands) {
      if (i >= op.inputs.size() || op.inputs[i].empty()) continue;
      const TensorShape* a = Shape(op.inputs[0]);
      const TensorShape* b = op.inputs.size() > 1 ? Shape(op.inputs[1]) : nullptr;
      bool batched = op.op == "MatMul" && a && b && a->dims.size() > 2 && b->dims.size() > 2;
      if (op.op == "LSTM" || op.op == "GRU") batched = false;
      if (!NeedsContiguousCopy(op.inputs[i], batched)) continue;
      const std::string& in = op.inputs[i];
      TensorId copy = AddTensor(in + ":contiguous", SaturatingMul(Elements(in), ElementBytes(in)),
                                TensorKind::kActivation);
      node.outputs.push_back(copy);
      contiguous_copies_[op.name + "#" + std::to_string(i)] = copy;
    }
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
        extras.push_back(AddTensor(out + ".mask",
                                   SaturatingMul(elements, options_.dropout_mask_bytes),
                                   TensorKind::kActivation));
        break;
      case SavedExtra::kLogProbs:
        extras.push_back(AddTensor(out + ".total_weight", 4, TensorKind::kActivation));
        if (op.outputs.size() > 1 && !op.outputs[1].empty()) break;
        extras.push_back(AddTensor(out + ".log_prob",
                                   SaturatingMul(Elements(op.inputs[0]),
                                                 precision_.activation_bytes),
                                   TensorKind::kActivation));
        break;
      case SavedExtra::kRecurrentSteps: {
        // Y: [seq, directions, batch, hidden]. The last step's values apart:
        // the backward frees them after its first step back.
        const TensorShape* y = Shape(out);
        int64_t seq = y && !y->dims.empty() ? std::max<int64_t>(y->dims[0], 1) : 1;
        int64_t step = SaturatingMul(elements / seq, 7 * precision_.activation_bytes);
        extras.push_back(AddTensor(out + ".steps", SaturatingMul(step, seq - 1),
                                   TensorKind::kActivation));
        extras.push_back(AddTensor(out + ".last_step", step, TensorKind::kActivation));
        break;
      }
      case SavedExtra::kNone:
        break;
    }
    for (TensorId t : extras) node.outputs.push_back(t);
    return extras;
  }

  void EmitForward() {
    extras_.resize(ops_.size());
    for (size_t i = 0; i < ops_.size(); ++i) {
      ForwardOp& op = ops_[i];
      if (op.folded || op.relayout) continue;
      const OpRule& rule = Rule(op);
      if (&rule == &FallbackOpRule()) fallback_ops_.insert(op.op);
      op.select_axis = SelectAxis(op);
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
        if (rule.view && !op.inputs.empty() && !op.inputs[0].empty() && TrackView(op, out)) {
          graph_.tensors[t].alias_of = Id(op.inputs[0]);
        }
        if ((op.select_axis >= 0 || IsSameTypeCast(op)) && out == op.outputs[0]) {
          graph_.tensors[t].alias_of = Id(op.inputs[0]);
        }
      }
      if (!rule.view) PropagateElementwiseLayout(op);
      AddContiguousCopies(op, node);
      extras_[i] = AddExtras(op, rule, node);
      node.workspace_bytes = SaturatingAdd(
          SaturatingAdd(ConvWorkspace(op, Phase::kForward), RecurrentWorkspace(op)),
          NormInputCopy(op));
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
    requires_grad_.insert(relayouts_.begin(), relayouts_.end());
    for (const ForwardOp& op : ops_) {
      if (op.folded || op.relayout) continue;
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

  // Gradient of `name` made by backward node `node`. `same_as` is a gradient
  // the contribution is (a view's, or Add's incoming gradient passed
  // through), kNoId when the node computes a new one. The gradient of a
  // parameter or of a view of one (Transpose(W) into MatMul) is the
  // parameter's gradient: resident to the step's end, accumulated in place
  // (AccumulateGrad), the contribution live while the node runs. Any other
  // tensor's second contribution is summed out of place (autograd's
  // InputBuffer): old, new and sum are live at once; a new buffer replaces
  // the old, which is freed after this node.
  void MakeGradient(const std::string& name, TensorId same_as, Node& node) {
    TensorId forward = Id(name);
    const TensorId root = graph_.StorageRoot(forward);
    bool parameter = graph_.tensors[root].kind == TensorKind::kParameter &&
                     Elements(name) == Elements(graph_.tensors[root].name);
    TensorKind kind = parameter ? TensorKind::kGradient : TensorKind::kActivation;
    int64_t bytes = SaturatingMul(Elements(name), parameter ? precision_.gradient_bytes
                                                              : precision_.activation_bytes);
    if (same_as != kNoId && graph_.tensors[graph_.StorageRoot(same_as)].bytes != bytes) {
      same_as = kNoId;  // not the same size: a new buffer (e.g. a broadcast's reduction)
    }
    auto it = grad_.find(name);
    TensorId grad;
    if (it == grad_.end()) {
      grad = AddTensor(name + ".grad", same_as == kNoId ? bytes : 0, kind);
      if (same_as != kNoId) graph_.tensors[grad].alias_of = same_as;
    } else {
      node.inputs.push_back(it->second);
      if (same_as == kNoId) node.workspace_bytes = SaturatingAdd(node.workspace_bytes, bytes);
      grad = AddTensor(name + ".grad", parameter ? 0 : bytes, kind);
      if (parameter) graph_.tensors[grad].alias_of = it->second;
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
    for (const std::string& out : outputs_) {
      if (RequiresGrad(out)) MakeGradient(out, kNoId, seed);
    }
    seed.flops = 0;
    seed.time_us = 0;
    graph_.nodes.push_back(std::move(seed));
    size_t emitted = node_of_op_.size();
    for (size_t i = ops_.size(); i-- > 0;) {
      const ForwardOp& op = ops_[i];
      if (op.folded || op.relayout) continue;
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
    if (op.op == "LSTM" || op.op == "GRU") {
      EmitRecurrentBackward(op, grad_inputs, extras, forward_flops * rule.backward_flops_ratio,
                            node);
      return;
    }
    TensorId select_grad = kNoId;
    for (size_t i : grad_inputs) {
      if (i == 0 && op.select_axis > 0) {
        select_grad = AddTensor(op.outputs[0] + ":select_backward",
                                SaturatingMul(Elements(op.inputs[0]), precision_.activation_bytes),
                                TensorKind::kActivation);
        node.outputs.push_back(select_grad);
        continue;
      }
      bool passes = rule.view || rule.passes_gradient || IsSameTypeCast(op);
      MakeGradient(op.inputs[i], passes ? output_grad : kNoId, node);
    }
    bool input_grad = std::find(grad_inputs.begin(), grad_inputs.end(), 0) != grad_inputs.end();
    node.workspace_bytes = SaturatingAdd(node.workspace_bytes,
                                         ConvWorkspace(op, Phase::kBackward, input_grad));
    node.workspace_bytes = SaturatingAdd(node.workspace_bytes, NormInputCopy(op));
    for (size_t i = 0; i < op.inputs.size() && i < 32; ++i) {
      if (!((rule.backward_temporaries >> i) & 1) || op.inputs[i].empty()) continue;
      node.workspace_bytes = SaturatingAdd(
          node.workspace_bytes, SaturatingMul(Elements(op.inputs[i]), precision_.activation_bytes));
    }
    SetCost(node, forward_flops * rule.backward_flops_ratio, op.op);
    graph_.nodes.push_back(std::move(node));
    if (select_grad != kNoId) EmitSliceBackward(op, select_grad);
  }

  // Eager's x[:, i] (Python indexing: how a class token or a pooled first
  // position is taken) is a full-range slice per leading dim, then a select;
  // the ONNX export keeps only the select, a Gather at a 0-d index on axis
  // `select_axis`. ATen's select_backward and slice_backward each make a
  // zeroed tensor of their input's size (the base's) and copy the incoming
  // gradient into it: the select's and the first slice's are live at once,
  // then each slice's and the next's. The last one is the base's gradient.
  void EmitSliceBackward(const ForwardOp& op, TensorId select_grad) {
    TensorId previous = select_grad;
    for (int64_t k = 1; k <= op.select_axis; ++k) {
      Node node;
      node.name = op.name + ".backward/slice" + std::to_string(k);
      node.op = "SliceGrad";
      node.scope = op.scope;
      node.phase = Phase::kBackward;
      node.inputs.push_back(previous);
      if (k == op.select_axis) {
        MakeGradient(op.inputs[0], kNoId, node);
      } else {
        previous = AddTensor(op.outputs[0] + ":slice_backward" + std::to_string(k),
                             graph_.tensors[select_grad].bytes, TensorKind::kActivation);
        node.outputs.push_back(previous);
      }
      SetCost(node, 0, "Slice");
      graph_.nodes.push_back(std::move(node));
    }
  }

  // LSTM/GRU's backward in three nodes, as autograd walks it. The last
  // timestep first (reading the outputs' gradients and that step's saved
  // values, released after it). Then back through the other steps (`node`):
  // each step's contribution to the hidden weights' gradient is summed out of
  // place into the running one, so 2 x R sit beside it, with the step's gate
  // gradients (batch x G x hidden). Then the input side, from the stacked gate
  // gradients of the whole sequence (workspace) and X: the gradients of X, W
  // and B.
  void EmitRecurrentBackward(const ForwardOp& op, const std::vector<size_t>& grad_inputs,
                             const std::vector<TensorId>& extras, double flops, Node& node) {
    TensorId last_step = extras.empty() ? kNoId : extras.back();
    Node first;
    first.name = op.name + ".backward/last_step";
    first.op = op.op + "StepGrad";
    first.scope = op.scope;
    first.phase = Phase::kBackward;
    for (const std::string& out : op.outputs) {
      auto it = out.empty() ? grad_.end() : grad_.find(out);
      if (it != grad_.end()) first.inputs.push_back(it->second);
    }
    if (last_step != kNoId) first.inputs.push_back(last_step);
    node.inputs.erase(std::remove(node.inputs.begin(), node.inputs.end(), last_step),
                      node.inputs.end());
    SetCost(first, 0, op.op);
    graph_.nodes.push_back(std::move(first));
    Node input;
    input.name = op.name + ".backward/input";
    input.op = op.op + "InputGrad";
    input.scope = op.scope;
    input.phase = Phase::kBackward;
    auto copy = contiguous_copies_.find(op.name + "#0");
    input.inputs.push_back(copy != contiguous_copies_.end() ? copy->second : Id(op.inputs[0]));
    for (size_t i : grad_inputs) {
      bool input_side = i == 0 || i == 1 || i == 3;  // X, W, B
      MakeGradient(op.inputs[i], kNoId, input_side ? input : node);
      if (i == 2) {
        const int64_t gates = op.op == "LSTM" ? 4 : 3;
        const TensorShape* y = Shape(op.outputs[0]);
        int64_t seq = y && !y->dims.empty() ? std::max<int64_t>(y->dims[0], 1) : 1;
        node.workspace_bytes = SaturatingAdd(
            SaturatingMul(Elements(op.inputs[2]), 2 * precision_.gradient_bytes),
            SaturatingMul(Elements(op.outputs[0]) / seq, gates * precision_.activation_bytes));
      }
    }
    input.workspace_bytes = RecurrentWorkspace(op);
    SetCost(node, flops / 2, op.op);
    SetCost(input, flops / 2, op.op);
    graph_.nodes.push_back(std::move(node));
    graph_.nodes.push_back(std::move(input));
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
      if (!saved) continue;
      auto copy = contiguous_copies_.find(op.name + "#" + std::to_string(i));
      save(copy != contiguous_copies_.end() ? copy->second : Id(op.inputs[i]));
    }
    for (size_t i = 0; i < op.outputs.size() && i < 32; ++i) {
      // ONNX-provided extras: Dropout's mask, MaxPool's indices, LayerNorm's
      // Mean/InvStdDev (BatchNorm's extra outputs are running stats).
      // (BatchNorm's extra outputs are running stats, LSTM/GRU's the last
      // hidden and cell states.)
      bool onnx_extra = i > 0 && rule.extra != SavedExtra::kNone &&
                        rule.extra != SavedExtra::kChannelStats &&
                        rule.extra != SavedExtra::kRecurrentSteps;
      bool saved = ((rule.saved_outputs >> i) & 1) || onnx_extra;
      if (saved && !op.outputs[i].empty()) save(Id(op.outputs[i]));
    }
    for (TensorId t : extras) save(t);
  }

  // Values folded at load time (shape arithmetic, scalars, masks built from
  // constants) are what eager PyTorch computes each step, not buffers: one the
  // backward reads (a mask Where keeps, positions an embedding keeps) is an
  // activation made by a "Constant" node right before its first reader;
  // any other (shapes, scalars: Python values in eager) costs nothing.
  void MakeFoldedValuesPerStep() {
    std::vector<NodeId> first_reader(graph_.tensors.size(), kNoId);
    std::vector<uint8_t> backward_read(graph_.tensors.size(), 0);
    for (NodeId n = 0; n < graph_.nodes.size(); ++n) {
      for (TensorId t : graph_.nodes[n].inputs) {
        if (first_reader[t] == kNoId) first_reader[t] = n;
        backward_read[t] |= graph_.nodes[n].phase != Phase::kForward;
      }
    }
    std::vector<std::pair<NodeId, TensorId>> made;  // (before node, tensor)
    for (const std::string& name : folded_outputs_) {
      auto it = ids_.find(name);
      if (it == ids_.end() || initializers_.count(name)) continue;
      Tensor& tensor = graph_.tensors[it->second];
      if (tensor.kind != TensorKind::kBuffer || tensor.alias_of != kNoId) continue;
      // A scalar is a Python number in eager code (mul by a Scalar keeps no
      // tensor).
      if (!backward_read[it->second] || first_reader[it->second] == kNoId ||
          Elements(name) <= 1) {
        tensor.bytes = 0;
        continue;
      }
      tensor.kind = TensorKind::kActivation;
      made.emplace_back(first_reader[it->second], it->second);
    }
    // Insert from the back so earlier positions stay valid; ties by tensor id.
    std::sort(made.begin(), made.end());
    for (auto it = made.rbegin(); it != made.rend(); ++it) {
      Node node;
      node.name = graph_.tensors[it->second].name + ":constant";
      node.op = "Constant";
      node.scope = graph_.nodes[it->first].scope;
      node.phase = Phase::kForward;
      node.outputs = {it->second};
      node.flops = 0;
      node.time_us = 0;
      graph_.nodes.insert(graph_.nodes.begin() + it->first, std::move(node));
    }
  }

  // ---- the optimizer step ----
  OptimizerImpl Impl() const {
    if (options_.optimizer_impl) return *options_.optimizer_impl;
    // PyTorch 2.x (_default_to_fused_or_foreach) picks foreach when every
    // parameter is on CUDA, the per-parameter loop otherwise; fused is opt-in.
    return std::string_view(options_.device->name) == "cpu" ? OptimizerImpl::kForLoop
                                                            : OptimizerImpl::kForeach;
  }

  // Adam/AdamW's step after the backward, as nodes whose temporaries are
  // what torch.optim allocates (exp_avg and exp_avg_sq update in place; the
  // 0-d fp32 `step` of each parameter is optimizer state):
  // - for-loop: per parameter, denom = (exp_avg_sq.sqrt() / c).add_(eps):
  //   the sqrt and the quotient (2 x the parameter, fp32) live at once while
  //   the previous parameter's denom is still bound, so node i makes denom_i,
  //   has the sqrt as workspace and reads denom_{i-1};
  // - foreach: one node over the group holding sqrt(exp_avg_sq) for every
  //   parameter (div_ and add_ run in place);
  // - fused: one node, no temporaries.
  // SGD (with or without momentum) updates in place: no nodes.
  void EmitOptimizerStep() {
    const std::string optimizer(ToString(options_.optimizer));
    if (optimizer != "adam" && optimizer != "adamw") return;
    std::vector<std::string> params;
    for (const TensorProto& init : model_.graph().initializer()) {
      if (parameters_.count(init.name())) params.push_back(init.name());
    }
    for (const std::string& name : params) {
      AddTensor(name + ".step", 4, TensorKind::kOptimizerState);
    }
    const OptimizerImpl impl = Impl();
    auto state_bytes = [&](const std::string& name) { return SaturatingMul(Elements(name), 4); };
    if (impl != OptimizerImpl::kForLoop) {
      Node node;
      node.name = "optimizer/" + optimizer + (impl == OptimizerImpl::kFused ? ".fused" : ".foreach");
      node.op = optimizer == "adam" ? "Adam" : "AdamW";
      node.phase = Phase::kOptimizer;
      for (const std::string& name : params) {
        node.inputs.push_back(Id(name));
        if (grad_.count(name)) node.inputs.push_back(grad_.at(name));
        if (impl == OptimizerImpl::kForeach) {
          node.workspace_bytes = SaturatingAdd(node.workspace_bytes, state_bytes(name));
        }
      }
      SetCost(node, 0, node.op);
      graph_.nodes.push_back(std::move(node));
      return;
    }
    TensorId previous_denom = kNoId;
    for (const std::string& name : params) {
      Node node;
      node.name = "optimizer/" + name;
      node.op = optimizer == "adam" ? "Adam" : "AdamW";
      node.phase = Phase::kOptimizer;
      node.inputs.push_back(Id(name));
      if (grad_.count(name)) node.inputs.push_back(grad_.at(name));
      if (previous_denom != kNoId) node.inputs.push_back(previous_denom);
      previous_denom = AddTensor(name + ".denom", state_bytes(name), TensorKind::kActivation);
      node.outputs.push_back(previous_denom);
      node.workspace_bytes = state_bytes(name);
      SetCost(node, 12.0 * static_cast<double>(Elements(name)), node.op);
      graph_.nodes.push_back(std::move(node));
    }
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
    auto [optimizer, moments] = StateOf(options_.optimizer);
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
  PrecisionBytes precision_;
  const DeviceSpec& device_;
  Graph graph_;
  std::vector<ForwardOp> ops_;
  std::vector<std::string> outputs_;  // the step's outputs: the model's, or the appended loss
  std::unordered_map<std::string, TensorShape> added_shapes_;  // of what AppendLoss adds
  std::vector<std::string> added_inputs_;                      // e.g. the loss's targets
  std::unordered_map<std::string, int> consumers_;
  std::unordered_map<std::string, bool> needs_grad_;
  std::set<std::string> initializers_, parameters_, folded_outputs_, requires_grad_;
  std::set<std::string> relayouts_;
  std::unordered_map<std::string, std::vector<int64_t>> strides_;  // of views
  std::unordered_map<std::string, TensorId> contiguous_copies_;    // "<op>#<input>"  // Concat outputs that are parameters laid out anew
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
  if (options.dropout_mask_bytes != 1 && options.dropout_mask_bytes != 4) {
    throw InputError("dropout mask bytes per element: " +
                         std::to_string(options.dropout_mask_bytes) + " (expected 1 or 4)",
                     kExitUsage);
  }
  ShapeBindings bindings{options.dims, options.input_shapes};
  // Parse a copy without the weights (hundreds of MB are never copied); bytes
  // that are not well-formed go to the real parser for its error message.
  std::string skeleton;
  bool stripped = CopyWithoutWeights(bytes, 0, &skeleton);
  onnx::ModelProto model = ParseModel(stripped ? std::string_view(skeleton) : bytes, source);
  // Before any per-node work; ValidateGraph checks the built graph again.
  if (static_cast<uint64_t>(model.graph().node_size()) > options.limits.max_nodes) {
    throw InputError(source + ": " + std::to_string(model.graph().node_size()) +
                     " ONNX nodes is over the limit of " +
                     std::to_string(options.limits.max_nodes) +
                     LimitHint(options.limits.max_nodes_hint));
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

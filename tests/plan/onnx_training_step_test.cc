// The ONNX loader's training-step mechanisms on tiny inline models: the
// optimizer step, the loss, parameter views, gradient accumulation, norm
// parameters, Dropout, saved views, Add, recurrent ops and convolution
// scratch. Each checks bytes worked out by hand in a comment; the rules are
// checked against measured PyTorch steps by scripts/fidelity_onnx.py
// (docs/onnx-fidelity.md).
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>

#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "ckptplan/ingest/loader.h"
#include "ckptplan/ingest/onnx_loader.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {
namespace {

using onnx::TensorProto;

// Builds a small ONNX model in memory.
class Model {
 public:
  Model() {
    model_.set_ir_version(8);
    model_.add_opset_import()->set_version(17);
    model_.mutable_graph()->set_name("test");
  }

  void Input(const std::string& name, std::vector<int64_t> dims,
             int32_t type = TensorProto::FLOAT) {
    auto* info = model_.mutable_graph()->add_input();
    info->set_name(name);
    auto* tensor = info->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(type);
    tensor->mutable_shape();
    for (int64_t d : dims) tensor->mutable_shape()->add_dim()->set_dim_value(d);
  }

  // An initializer; small ones get `values` (zeros when empty).
  void Init(const std::string& name, std::vector<int64_t> dims,
            int32_t type = TensorProto::FLOAT, std::vector<double> values = {}) {
    TensorProto* init = model_.mutable_graph()->add_initializer();
    init->set_name(name);
    init->set_data_type(type);
    int64_t n = 1;
    for (int64_t d : dims) {
      init->add_dims(d);
      n *= d;
    }
    if (values.empty()) values.assign(n, 0.0);
    for (double v : values) {
      if (type == TensorProto::FLOAT) init->add_float_data(static_cast<float>(v));
      if (type == TensorProto::INT64) init->add_int64_data(static_cast<int64_t>(v));
      if (type == TensorProto::BOOL) init->add_int32_data(static_cast<int32_t>(v));
    }
  }

  onnx::NodeProto* Node(const std::string& op, std::vector<std::string> inputs,
                        std::vector<std::string> outputs) {
    onnx::NodeProto* node = model_.mutable_graph()->add_node();
    node->set_name("/" + outputs[0]);
    node->set_op_type(op);
    for (const std::string& in : inputs) node->add_input(in);
    for (const std::string& out : outputs) node->add_output(out);
    return node;
  }

  static void Ints(onnx::NodeProto* node, const std::string& name, std::vector<int64_t> values) {
    auto* attr = node->add_attribute();
    attr->set_name(name);
    attr->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values) attr->add_ints(v);
  }
  static void Int(onnx::NodeProto* node, const std::string& name, int64_t value) {
    auto* attr = node->add_attribute();
    attr->set_name(name);
    attr->set_type(onnx::AttributeProto::INT);
    attr->set_i(value);
  }

  void Output(const std::string& name) {
    auto* info = model_.mutable_graph()->add_output();
    info->set_name(name);
    info->mutable_type()->mutable_tensor_type()->set_elem_type(TensorProto::FLOAT);
  }

  // A scalar loss: the mean of `name` over all elements.
  void MeanLoss(const std::string& name) {
    Int(Node("ReduceMean", {name}, {"loss"}), "keepdims", 0);
    Output("loss");
  }

  std::string Bytes() const { return model_.SerializeAsString(); }

  Graph Load(LoadOptions options = {}) const {
    // The measured device.
    if (options.device == &FindDevice("h100")) options.device = &FindDevice("cpu");
    return ParseOnnxGraph(Bytes(), "test.onnx", options);
  }

 private:
  onnx::ModelProto model_;
};

const Node& NodeNamed(const Graph& graph, const std::string& name) {
  for (const Node& node : graph.nodes) {
    if (node.name == name) return node;
  }
  FAIL("no node " << name);
  return graph.nodes[0];
}

const Tensor& TensorNamed(const Graph& graph, const std::string& name) {
  for (const Tensor& tensor : graph.tensors) {
    if (tensor.name == name) return tensor;
  }
  FAIL("no tensor " << name);
  return graph.tensors[0];
}

TensorId IdNamed(const Graph& graph, const std::string& name) {
  for (TensorId t = 0; t < graph.tensors.size(); ++t) {
    if (graph.tensors[t].name == name) return t;
  }
  FAIL("no tensor " << name);
  return kNoId;
}

NodeId IdOfNode(const Graph& graph, const std::string& name) {
  for (NodeId n = 0; n < graph.nodes.size(); ++n) {
    if (graph.nodes[n].name == name) return n;
  }
  FAIL("no node " << name);
  return kNoId;
}

// Bytes of unique storages of `kind` (aliases share their root's).
int64_t StorageBytes(const Graph& graph, TensorKind kind) {
  int64_t bytes = 0;
  for (const Tensor& tensor : graph.tensors) {
    if (tensor.alias_of == kNoId && tensor.kind == kind) bytes += tensor.bytes;
  }
  return bytes;
}

// Bytes of the unique non-resident storages backward nodes read from the
// forward: the saved activations of a save-everything step.
int64_t SavedBytes(const Graph& graph) {
  std::vector<uint8_t> roots(graph.tensors.size(), 0);
  for (TensorId t : SaveCandidates(graph)) roots[graph.StorageRoot(t)] = 1;
  int64_t bytes = 0;
  for (TensorId t = 0; t < roots.size(); ++t) bytes += roots[t] ? graph.tensors[t].bytes : 0;
  return bytes;
}

// Bytes live at the step of node `name` with every candidate saved.
int64_t TotalAt(const Graph& graph, const std::string& name) {
  SimResult sim = Simulate(graph, SaveAll(graph), {});
  for (size_t s = 0; s < sim.steps.size(); ++s) {
    if (graph.nodes[sim.steps[s].node].name == name) return sim.total[s];
  }
  FAIL("no step for " << name);
  return 0;
}

// x[2,8] @ A[8,8] @ B[8,4], mean: two parameters for the optimizer.
Model TwoMatMuls() {
  Model m;
  m.Input("x", {2, 8});
  m.Init("A", {8, 8});
  m.Init("B", {8, 4});
  m.Node("MatMul", {"x", "A"}, {"h"});
  m.Node("MatMul", {"h", "B"}, {"y"});
  m.MeanLoss("y");
  return m;
}

TEST_CASE("Adam's step: for-loop, foreach and fused temporaries, a 4-byte step per tensor") {
  Model m = TwoMatMuls();
  LoadOptions options;
  options.optimizer = Optimizer::kAdam;
  Graph loop = m.Load(options);
  // Resident: parameters A 8*8*4 = 256 + B 8*4*4 = 128 = 384 bytes; x 2*8*4 =
  // 64; optimizer state 8 bytes a parameter (96 parameters: 768) + a 4-byte
  // fp32 step for each of the 2 tensors = 776.
  SimResult sim = Simulate(loop, SaveAll(loop), {});
  CHECK(sim.resident[size_t(Category::kParameters)] == 384);
  CHECK(sim.resident[size_t(Category::kOptimizerState)] == 96 * 8 + 2 * 4);
  // for-loop (cpu's default): at B's update, gradients 256 + 128, A's denom
  // 256 still bound, B's denom 128 and its sqrt 128:
  // 384 + 64 + 776 + 384 + 256 + 128 + 128 = 2120.
  CHECK(NodeNamed(loop, "optimizer/B").workspace_bytes == 128);
  CHECK(TotalAt(loop, "optimizer/B") == 2120);
  // At A's (the first) update: 384 + 64 + 776 + 384 + 256 + 256 = 2120 too.
  CHECK(TotalAt(loop, "optimizer/A") == 2120);

  options.optimizer_impl = OptimizerImpl::kForeach;
  Graph foreach = m.Load(options);
  // foreach: sqrt(exp_avg_sq) for the whole group, 384 bytes:
  // 384 + 64 + 776 + 384 (gradients) + 384 = 1992.
  CHECK(TotalAt(foreach, "optimizer/adam.foreach") == 1992);

  options.optimizer_impl = OptimizerImpl::kFused;
  Graph fused = m.Load(options);
  // fused: no temporaries: 384 + 64 + 776 + 384 = 1608.
  CHECK(TotalAt(fused, "optimizer/adam.fused") == 1608);

  // Without --optimizer-impl a GPU preset picks foreach, as PyTorch 2 does.
  options.optimizer_impl.reset();
  options.device = &FindDevice("a100");
  Graph gpu = ParseOnnxGraph(m.Bytes(), "test.onnx", options);
  CHECK(NodeNamed(gpu, "optimizer/adam.foreach").workspace_bytes == 384);

  // SGD updates in place: no optimizer nodes, no step tensors.
  options.optimizer = Optimizer::kSgd;
  Graph sgd = m.Load(options);
  for (const Node& node : sgd.nodes) CHECK(node.phase != Phase::kOptimizer);
}

// x[2,8] @ W[8,5] -> logits [2,5].
Model Logits() {
  Model m;
  m.Input("x", {2, 8});
  m.Init("W", {8, 5});
  m.Node("MatMul", {"x", "W"}, {"logits"});
  return m;
}

TEST_CASE("SoftmaxCrossEntropyLoss keeps log-probabilities and total_weight") {
  Model m = Logits();
  m.Input("t", {2}, TensorProto::INT64);
  m.Node("SoftmaxCrossEntropyLoss", {"logits", "t"}, {"loss"});
  m.Output("loss");
  Graph graph = m.Load();
  // Saved: log-probabilities 2*5*4 = 40 bytes + total_weight 4 = 44 (x and
  // the targets are inputs, W a parameter).
  CHECK(SavedBytes(graph) == 44);
  // Its backward holds the log-probabilities' gradient (40) beside the
  // logits' gradient it makes (40).
  CHECK(NodeNamed(graph, "/loss.backward").workspace_bytes == 40);
  CHECK(TensorNamed(graph, "logits.grad").bytes == 40);
}

TEST_CASE("a graph that ends at logits: a warning naming the loss, --loss appends one") {
  Model m = Logits();
  m.Output("logits");
  std::ostringstream log;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  auto logger = std::make_shared<spdlog::logger>("capture", sink);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(logger);
  Graph plain = m.Load();
  // The library names no flag; the caller's hint (the CLI's flag) follows.
  const std::string library = log.str();
  LoadOptions hinted;
  hinted.loss_hint = "use the caller's option";
  log.str("");
  m.Load(hinted);
  spdlog::set_default_logger(previous);
  CHECK(library.find("'logits' (10 elements), not at a loss") != std::string::npos);
  CHECK(library.find("SoftmaxCrossEntropyLoss") != std::string::npos);
  CHECK(library.find("--") == std::string::npos);
  CHECK(log.str().find("not counted; use the caller's option") != std::string::npos);

  LoadOptions options;
  options.loss = LossKind::kCrossEntropy;
  Graph ce = m.Load(options);
  // The appended loss reads int64 targets, one per row: 2 * 8 = 16 bytes of
  // input, and keeps 40 + 4 bytes as above.
  CHECK(TensorNamed(ce, "logits.targets").kind == TensorKind::kInput);
  CHECK(TensorNamed(ce, "logits.targets").bytes == 16);
  CHECK(NodeNamed(ce, "loss/SoftmaxCrossEntropyLoss").op == "SoftmaxCrossEntropyLoss");
  CHECK(SavedBytes(ce) == 44);

  options.loss = LossKind::kMean;
  Graph mean = m.Load(options);
  CHECK(NodeNamed(mean, "loss/ReduceMean").outputs.size() == 1);
  CHECK(SavedBytes(mean) == 0);  // the mean keeps nothing; x is an input
}

TEST_CASE("the gradient of Transpose(W) into MatMul is W's gradient, one buffer") {
  Model m;
  m.Input("x", {2, 8});
  m.Init("W", {4, 8});
  m.Node("Transpose", {"W"}, {"Wt"});
  m.Node("MatMul", {"x", "Wt"}, {"y"});
  m.MeanLoss("y");
  Graph graph = m.Load();
  // One gradient storage of W's 4*8*4 = 128 bytes; Wt's gradient is it, and
  // W's gradient is an alias of that.
  CHECK(StorageBytes(graph, TensorKind::kGradient) == 128);
  CHECK(TensorNamed(graph, "Wt.grad").kind == TensorKind::kGradient);
  CHECK(TensorNamed(graph, "W.grad").alias_of != kNoId);
}

TEST_CASE("gradient accumulation: out of place for activations, a dense table for Gather") {
  Model m;
  m.Input("x", {2, 8});
  m.Init("A", {8, 8});
  m.Node("MatMul", {"x", "A"}, {"h"});
  m.Node("Relu", {"h"}, {"r"});
  m.Node("Sigmoid", {"h"}, {"s"});
  m.Node("Mul", {"r", "s"}, {"y"});
  m.MeanLoss("y");
  Graph graph = m.Load();
  // h (2*8*4 = 64 bytes) gets its first gradient from Sigmoid's backward
  // (emitted first), its second from Relu's: the new contribution (64, the
  // workspace), the old gradient (64, read) and their sum (64, a new buffer)
  // are live at once.
  const Node& relu = NodeNamed(graph, "/r.backward");
  CHECK(relu.workspace_bytes == 64);
  TensorId sum = relu.outputs.back();
  CHECK(graph.tensors[sum].bytes == 64);
  CHECK(graph.tensors[sum].alias_of == kNoId);

  // A table used twice (a tied embedding and lm_head): Gather's contribution
  // is the dense table, 10*8*4 = 320 bytes, added in place to the gradient
  // the lm_head's MatMul made: one 320-byte gradient storage.
  Model tied;
  tied.Input("ids", {2}, TensorProto::INT64);
  tied.Init("E", {10, 8});
  tied.Node("Gather", {"E", "ids"}, {"e"});
  tied.Node("Transpose", {"E"}, {"Et"});
  tied.Node("MatMul", {"e", "Et"}, {"y"});
  tied.MeanLoss("y");
  Graph g = tied.Load();
  CHECK(NodeNamed(g, "/e.backward").workspace_bytes == 320);
  CHECK(StorageBytes(g, TensorKind::kGradient) == 320);
}

TEST_CASE("LayerNorm and BatchNorm scale and bias are trained parameters") {
  Model m;
  m.Input("x", {2, 4, 3, 3});
  m.Init("gamma", {4});
  m.Init("beta", {4});
  m.Init("mean", {4});
  m.Init("var", {4});
  m.Int(m.Node("BatchNormalization", {"x", "gamma", "beta", "mean", "var"}, {"b"}),
        "training_mode", 1);
  m.Init("ln_w", {3});
  m.Init("ln_b", {3});
  m.Node("LayerNormalization", {"b", "ln_w", "ln_b"}, {"y"});
  m.MeanLoss("y");
  Graph graph = m.Load();
  // 4 + 4 BatchNorm + 3 + 3 LayerNorm = 14 trained; running stats are buffers.
  CHECK(graph.training.parameter_count == 14);
  CHECK(TensorNamed(graph, "gamma").kind == TensorKind::kParameter);
  CHECK(TensorNamed(graph, "ln_b").kind == TensorKind::kParameter);
  CHECK(TensorNamed(graph, "mean").kind == TensorKind::kBuffer);
  // Gradients: 14 * 4 = 56 bytes.
  CHECK(StorageBytes(graph, TensorKind::kGradient) == 56);
}

// x[2,8] -> MatMul A -> Dropout(ratio) -> mean.
Model WithDropout(double ratio) {
  Model m;
  m.Input("x", {2, 8});
  m.Init("A", {8, 8});
  // As torch.onnx exports them: Constant nodes.
  auto* r = m.Node("Constant", {}, {"ratio"})->add_attribute();
  r->set_name("value");
  r->set_type(onnx::AttributeProto::TENSOR);
  r->mutable_t()->set_data_type(TensorProto::FLOAT);
  r->mutable_t()->add_float_data(static_cast<float>(ratio));
  auto* t = m.Node("Constant", {}, {"train"})->add_attribute();
  t->set_name("value");
  t->set_type(onnx::AttributeProto::TENSOR);
  t->mutable_t()->set_data_type(TensorProto::BOOL);
  t->mutable_t()->add_int32_data(1);
  m.Node("MatMul", {"x", "A"}, {"h"});
  m.Node("Dropout", {"h", "ratio", "train"}, {"d", "mask"});
  m.MeanLoss("d");
  return m;
}

TEST_CASE("Dropout: ratio 0 is the identity; the mask is 1 or 4 bytes an element") {
  Graph zero = WithDropout(0.0).Load();
  // An alias of h, no mask: nothing saved (x is an input).
  CHECK(TensorNamed(zero, "d").alias_of == IdNamed(zero, "h"));
  CHECK(SavedBytes(zero) == 0);
  Graph p = WithDropout(0.1).Load();
  // The mask: 2*8 elements, 1 byte each = 16 bytes, the only saved tensor.
  CHECK(TensorNamed(p, "mask").bytes == 16);
  CHECK(SavedBytes(p) == 16);
  LoadOptions options;
  options.dropout_mask_bytes = 4;
  Graph cpu = WithDropout(0.1).Load(options);
  // CPU eager F.dropout keeps float noise: 16 * 4 = 64 bytes.
  CHECK(TensorNamed(cpu, "mask").bytes == 64);
}

TEST_CASE("saved views: copies of non-contiguous MatMul operands, select, Cast, constants") {
  // x[2,3,4] transposed to [3,2,4] into a MatMul with W[4,5]: matmul cannot
  // fold it to [6,4] without a copy, and the copy (3*2*4*4 = 96 bytes) is
  // what the backward keeps, though x is an input.
  Model m;
  m.Input("x", {2, 3, 4});
  m.Init("W", {4, 5});
  Model::Ints(m.Node("Transpose", {"x"}, {"xt"}), "perm", {1, 0, 2});
  m.Node("MatMul", {"xt", "W"}, {"y"});
  m.MeanLoss("y");
  Graph graph = m.Load();
  CHECK(TensorNamed(graph, "xt:contiguous").bytes == 96);
  CHECK(SavedBytes(graph) == 96);

  // A Gather at a 0-d index of an activation (x[:, 0]) is a view: the
  // MatMul that reads it keeps all of h (2*3*4*4 = 96 bytes), not 2*4*4.
  // The Cast to h's own dtype is an alias; the folded index costs nothing.
  Model s;
  s.Input("x", {2, 3, 4});
  s.Init("A", {4, 4});
  s.Init("W", {4, 5});
  s.Init("zero", {}, TensorProto::INT64, {0});
  s.Node("MatMul", {"x", "A"}, {"h"});
  s.Int(s.Node("Cast", {"h"}, {"hc"}), "to", TensorProto::FLOAT);
  s.Int(s.Node("Gather", {"hc", "zero"}, {"first"}), "axis", 1);
  s.Node("MatMul", {"first", "W"}, {"y"});
  s.MeanLoss("y");
  Graph sel = s.Load();
  CHECK(TensorNamed(sel, "hc").alias_of != kNoId);
  CHECK(TensorNamed(sel, "first").alias_of != kNoId);
  CHECK(SavedBytes(sel) == 96);
}

// h = x[2,3,4] @ A[4,4] (96 bytes), then h's select at index 0 on `axis`
// (x[:, 0] for axis 1) and the mean of it.
Model SelectOf(int64_t axis) {
  Model m;
  m.Input("x", {2, 3, 4});
  m.Init("A", {4, 4});
  m.Init("zero", {}, TensorProto::INT64, {0});
  m.Node("MatMul", {"x", "A"}, {"h"});
  Model::Int(m.Node("Gather", {"h", "zero"}, {"first"}), "axis", axis);
  m.MeanLoss("first");
  return m;
}

TEST_CASE("the backward of x[:, 0]: zeroed gradients of the base's size, select's and slice's") {
  // Eager x[:, 0] is a full-range slice of dim 0 and a select on dim 1; the
  // export keeps only the select. select_backward makes zeros of h's size
  // (2*3*4*4 = 96 bytes) and copies first's gradient (2*4*4 = 32 bytes) in;
  // slice_backward makes another 96 while that one is live. So the slice's
  // step holds 96 + 96 where the select's held 32 + 96: 64 bytes more.
  Graph graph = SelectOf(1).Load();
  CHECK(TensorNamed(graph, "first:select_backward").bytes == 96);
  const Node& slice = NodeNamed(graph, "/first.backward/slice1");
  CHECK(slice.inputs == std::vector<TensorId>{IdNamed(graph, "first:select_backward")});
  CHECK(slice.outputs == std::vector<TensorId>{IdNamed(graph, "h.grad")});
  CHECK(TensorNamed(graph, "h.grad").bytes == 96);
  CHECK(TotalAt(graph, "/first.backward/slice1") == TotalAt(graph, "/first.backward") + 64);

  // x[0] is a select alone: its backward makes h's gradient (96 bytes) itself.
  Graph row = SelectOf(0).Load();
  CHECK(NodeNamed(row, "/first.backward").outputs ==
        std::vector<TensorId>{IdNamed(row, "h.grad")});
  for (const Node& node : row.nodes) CHECK(node.op != "SliceGrad");

  // x[:, :, 0]: two slices, each a 96-byte tensor made beside the last.
  Graph two = SelectOf(2).Load();
  CHECK(NodeNamed(two, "/first.backward/slice1").outputs ==
        std::vector<TensorId>{IdNamed(two, "first:slice_backward1")});
  CHECK(TensorNamed(two, "first:slice_backward1").bytes == 96);
  CHECK(NodeNamed(two, "/first.backward/slice2").outputs ==
        std::vector<TensorId>{IdNamed(two, "h.grad")});
}

// s = Transpose(x[2,3,4] @ A[4,4], perm 1,0,2) + u[3,2,4] (or u + the
// transpose, or no transpose), then LayerNorm over the last dim and a mean.
Model ResidualNorm(bool transposed, bool transposed_first) {
  Model m;
  m.Input("x", transposed ? std::vector<int64_t>{2, 3, 4} : std::vector<int64_t>{3, 2, 4});
  m.Input("u", {3, 2, 4});
  m.Init("A", {4, 4});
  m.Init("scale", {4});
  m.Init("bias", {4});
  m.Node("MatMul", {"x", "A"}, {"h"});
  std::string a = "h";
  if (transposed) Model::Ints(m.Node("Transpose", {"h"}, {"ht"}), "perm", {1, 0, 2}), a = "ht";
  m.Node("Add", transposed_first ? std::vector<std::string>{a, "u"}
                                 : std::vector<std::string>{"u", a}, {"s"});
  Model::Int(m.Node("LayerNormalization", {"s", "scale", "bias"}, {"y"}), "axis", -1);
  m.MeanLoss("y");
  return m;
}

TEST_CASE("an elementwise op is laid out like its first strided operand; LayerNorm copies it") {
  // The transpose of h[2,3,4] has strides (4, 12, 1) over [3,2,4]; u's are
  // (8, 4, 1). Add's first operand decides the output's dim order (ATen
  // TensorIterator), so s = ht + u is laid out like ht, not contiguous, and
  // LayerNorm's forward and backward each hold a contiguous copy of s,
  // 3*2*4*4 = 96 bytes, while they run.
  Graph plain = ResidualNorm(false, true).Load();
  Graph strided = ResidualNorm(true, true).Load();
  Graph swapped = ResidualNorm(true, false).Load();  // u + ht: laid out like u
  CHECK(NodeNamed(plain, "/y").workspace_bytes == 0);
  CHECK(NodeNamed(strided, "/y").workspace_bytes == 96);
  CHECK(NodeNamed(swapped, "/y").workspace_bytes == 0);
  const int64_t backward = NodeNamed(plain, "/y.backward").workspace_bytes;
  CHECK(NodeNamed(strided, "/y.backward").workspace_bytes == backward + 96);
  CHECK(NodeNamed(swapped, "/y.backward").workspace_bytes == backward);
}

TEST_CASE("Add passes its gradient through; a broadcast bias gets its reduction") {
  Model m;
  m.Input("x", {2, 8});
  m.Init("A", {8, 8});
  m.Init("b", {8});
  m.Node("MatMul", {"x", "A"}, {"h"});
  m.Node("Add", {"h", "b"}, {"y"});
  m.MeanLoss("y");
  Graph graph = m.Load();
  // h's gradient is y's (an alias, no bytes); b's is a new 8*4 = 32 bytes.
  CHECK(TensorNamed(graph, "h.grad").alias_of != kNoId);
  CHECK(TensorNamed(graph, "b.grad").alias_of == kNoId);
  CHECK(TensorNamed(graph, "b.grad").bytes == 32);
}

TEST_CASE("LSTM and GRU keep per-timestep gate activations") {
  for (const char* op : {"LSTM", "GRU"}) {
    CAPTURE(op);
    const int64_t gates = std::string(op) == "LSTM" ? 4 : 3;
    Model m;
    m.Input("x", {3, 2, 4});  // seq 3, batch 2, input 4
    m.Init("W", {1, gates * 4, 4});
    m.Init("R", {1, gates * 4, 4});
    m.Int(m.Node(op, {"x", "W", "R"}, {"Y"}), "hidden_size", 4);
    m.MeanLoss("Y");
    Graph graph = m.Load();
    // Per step and direction 7 x batch x hidden values: 2 * 4 * 7 * 4 = 224
    // bytes a step; the last step's apart (freed after the first step back):
    // 2 * 224 + 224 = 672 bytes, all that is saved (x is an input).
    CHECK(TensorNamed(graph, "Y.steps").bytes == 2 * 224);
    CHECK(TensorNamed(graph, "Y.last_step").bytes == 224);
    CHECK(SavedBytes(graph) == 672);
    const Node& last = NodeNamed(graph, "/Y.backward/last_step");
    CHECK(last.inputs.back() == IdNamed(graph, "Y.last_step"));
    // The whole sequence's input gates: 3 * 2 * 4 * gates * 4 bytes, in the
    // forward and, as their stacked gradient, in the input side's backward.
    CHECK(NodeNamed(graph, "/Y").workspace_bytes == 3 * 2 * 4 * gates * 4);
    CHECK(NodeNamed(graph, "/Y.backward/input").workspace_bytes == 3 * 2 * 4 * gates * 4);
    // Back through time: R's gradient (gates*4 x 4 x 4 bytes) with the step's
    // contribution and their sum beside it, 2 * gates * 64, and the step's
    // gate gradients, batch 2 x gates x hidden 4 x 4 bytes.
    CHECK(NodeNamed(graph, "/Y.backward").workspace_bytes ==
          2 * gates * 4 * 4 * 4 + 2 * gates * 4 * 4);
    CHECK(TensorNamed(graph, "R.grad").producer == IdOfNode(graph, "/Y.backward"));
    CHECK(TensorNamed(graph, "W.grad").producer == IdOfNode(graph, "/Y.backward/input"));
  }
}

TEST_CASE("convolution scratch on --device cpu (oneDNN), none on GPU presets") {
  Model m;
  m.Input("x", {2, 16, 8, 8});
  m.Init("W", {8, 16, 3, 3});
  Model::Ints(m.Node("Conv", {"x", "W"}, {"y"}), "pads", {1, 1, 1, 1});
  m.MeanLoss("y");
  Graph cpu = m.Load();
  // 16 input channels: the input is reordered (2*16*64*4 = 8192 bytes); the
  // weight to 16 output channels padded from 8: 16*16*9*4 = 9216; the
  // blocked output, 8 channels padded to 16: 8192. 8192 + 9216 + 8192 =
  // 25600 held at once, of which the plain output (2*8*64*4 = 4096) is the
  // node's own: workspace 21504.
  CHECK(NodeNamed(cpu, "/y").workspace_bytes == 21504);
  // Backward without an input gradient (x is an input): the reordered
  // output gradient 8192, input 8192 and weight gradient 9216 = 25600, less
  // the plain weight gradient (8*16*9*4 = 4608) the node makes: 20992.
  CHECK(NodeNamed(cpu, "/y.backward").workspace_bytes == 20992);
  LoadOptions gpu;
  gpu.device = &FindDevice("a100");
  Graph a100 = ParseOnnxGraph(m.Bytes(), "test.onnx", gpu);
  CHECK(NodeNamed(a100, "/y").workspace_bytes == 0);
}

}  // namespace
}  // namespace ckptplan

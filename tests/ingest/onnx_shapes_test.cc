// ONNX shape resolution on hostile models: libonnx's inference must not
// crash, and shape arithmetic on absurd dims and attributes must neither
// overflow nor divide by zero.
#include "ckptplan/ingest/onnx_shapes.h"

#include <cstdint>
#include <initializer_list>
#include <string>

#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include "ckptplan/base/errors.h"

namespace ckptplan {
namespace {

using onnx::TensorProto;

onnx::ModelProto EmptyModel() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  model.mutable_graph()->set_name("g");
  return model;
}

void SetType(onnx::ValueInfoProto* info, const std::string& name,
             std::initializer_list<int64_t> dims) {
  info->set_name(name);
  auto* type = info->mutable_type()->mutable_tensor_type();
  type->set_elem_type(TensorProto::FLOAT);
  auto* shape = type->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

void AddInput(onnx::ModelProto& model, const std::string& name,
              std::initializer_list<int64_t> dims) {
  SetType(model.mutable_graph()->add_input(), name, dims);
}

void AddInt64s(onnx::ModelProto& model, const std::string& name,
               std::initializer_list<int64_t> values) {
  auto* init = model.mutable_graph()->add_initializer();
  init->set_name(name);
  init->set_data_type(TensorProto::INT64);
  init->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) init->add_int64_data(v);
}

onnx::NodeProto* AddNode(onnx::ModelProto& model, const std::string& op,
                         std::initializer_list<std::string> inputs,
                         std::initializer_list<std::string> outputs) {
  auto* node = model.mutable_graph()->add_node();
  node->set_name(op + "_" + std::to_string(model.graph().node_size()));
  node->set_op_type(op);
  for (const std::string& in : inputs) node->add_input(in);
  for (const std::string& out : outputs) node->add_output(out);
  return node;
}

void AddInts(onnx::NodeProto* node, const std::string& name,
             std::initializer_list<int64_t> values) {
  auto* attr = node->add_attribute();
  attr->set_name(name);
  attr->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) attr->add_ints(v);
}

// A default-domain op libonnx has no schema for: ckptplan then skips
// libonnx's inference, so the shapes checked come from its own pass. Its
// output z[1] is declared in value_info.
void SkipLibOnnxInference(onnx::ModelProto& model) {
  AddInput(model, "u", {1});
  AddNode(model, "NoSuchOp", {"u"}, {"z"});
  SetType(model.mutable_graph()->add_value_info(), "z", {1});
}

std::vector<int64_t> DimsOf(const ShapeTable& table, const std::string& name) {
  const TensorShape* shape = table.Find(name);
  REQUIRE(shape != nullptr);
  return shape->dims;
}

std::string ResolveError(onnx::ModelProto& model) {
  try {
    ResolveShapes(model, {}, "m.onnx");
  } catch (const InputError& e) {
    CHECK(e.exit_code() == kExitBadInput);
    return e.what();
  }
  FAIL("expected an InputError");
  return "";
}

TEST_CASE("a Shape of a tensor whose inference failed does not crash libonnx") {
  // Found by onnx_fuzzer: Add's inference fails (2x3 and 4x5 do not
  // broadcast), leaving `a` untyped, and libonnx 1.12's data propagation for
  // Shape dereferenced the missing type (SEGV). Now `a` is reported.
  onnx::ModelProto model = EmptyModel();
  AddInput(model, "x", {2, 3});
  AddInput(model, "y", {4, 5});
  AddNode(model, "Add", {"x", "y"}, {"a"});
  AddNode(model, "Shape", {"a"}, {"s"});
  std::string what = ResolveError(model);
  CHECK(what.find("m.onnx: tensor 'a' (output 0 of node 'Add_1', op Add): shape unknown rank") !=
        std::string::npos);

  // An untyped graph input read by Shape: the same missing type.
  onnx::ModelProto untyped = EmptyModel();
  untyped.mutable_graph()->add_input()->set_name("x");
  AddNode(untyped, "Shape", {"x"}, {"s"});
  CHECK(ResolveError(untyped).find("graph input 'x' declares no shape") != std::string::npos);
}

TEST_CASE("no op with an ONNX data-propagation function crashes on an untyped input") {
  // libonnx 1.12's data propagators; all but Cast and Size crashed on an
  // untyped first input (checked with onnx.shape_inference.infer_shapes(...,
  // data_prop=True)). `a` is untyped: 2x3 + 4x5 fails to broadcast.
  for (const char* op : {"Add", "Cast", "Concat", "Gather", "Mul", "Shape", "Size", "Slice",
                         "Squeeze", "Sub", "Unsqueeze"}) {
    CAPTURE(op);
    onnx::ModelProto model = EmptyModel();
    AddInput(model, "x", {2, 3});
    AddInput(model, "y", {4, 5});
    AddInt64s(model, "one", {1});
    AddNode(model, "Add", {"x", "y"}, {"a"});
    const std::string name(op);
    auto* node = name == "Slice"  ? AddNode(model, op, {"a", "one", "one"}, {"o"})
                 : name == "Cast" || name == "Shape" || name == "Size"
                     ? AddNode(model, op, {"a"}, {"o"})
                     : AddNode(model, op, {"a", "one"}, {"o"});
    auto* attr = node->add_attribute();
    attr->set_name(name == "Cast" ? "to" : "axis");
    attr->set_type(onnx::AttributeProto::INT);
    attr->set_i(name == "Cast" ? TensorProto::FLOAT : 0);
    AddNode(model, "Shape", {"o"}, {"s"});
    CHECK(ResolveError(model).find("tensor 'a' (output 0 of node 'Add_1', op Add)") !=
          std::string::npos);
  }
}

TEST_CASE("types inferred into the declared inputs of Shape reach the shape table") {
  // x[2,3] -> Relu -> r -> Shape -> s: r's type merges into the empty
  // value_info declared for it; s = [2] with value {2, 3}.
  onnx::ModelProto model = EmptyModel();
  AddInput(model, "x", {2, 3});
  AddNode(model, "Relu", {"x"}, {"r"});
  AddNode(model, "Shape", {"r"}, {"s"});
  ShapeTable table = ResolveShapes(model, {}, "m.onnx");
  CHECK(DimsOf(table, "r") == std::vector<int64_t>{2, 3});
  CHECK(table.Find("s")->value == std::vector<double>{2, 3});
}

TEST_CASE("a Slice end of INT64_MAX slices to the end of the axis") {
  // Torch exports x[:, 1:] as Slice(starts=[1], ends=[2^63-1]); the end is
  // held as a double (2^63), whose cast to int64 was undefined behaviour
  // (x86 gives INT64_MIN, so the slice was empty): it must saturate.
  onnx::ModelProto model = EmptyModel();
  SkipLibOnnxInference(model);
  AddInput(model, "x", {2, 8});
  AddInt64s(model, "starts", {1});
  AddInt64s(model, "ends", {INT64_MAX});
  AddInt64s(model, "axes", {1});
  AddNode(model, "Slice", {"x", "starts", "ends", "axes"}, {"y"});
  ShapeTable table = ResolveShapes(model, {}, "m.onnx");
  CHECK(DimsOf(table, "y") == std::vector<int64_t>{2, 7});  // 8 - 1
}

TEST_CASE("dim products and sums past int64 saturate") {
  onnx::ModelProto model = EmptyModel();
  SkipLibOnnxInference(model);
  AddInput(model, "x", {2, 8});
  AddInt64s(model, "repeats", {INT64_MAX, 2});
  AddNode(model, "Tile", {"x", "repeats"}, {"tiled"});
  AddNode(model, "Flatten", {"tiled"}, {"flat"});
  auto* axis = AddNode(model, "Concat", {"tiled", "tiled"}, {"both"})->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(0);
  ShapeTable table = ResolveShapes(model, {}, "m.onnx");
  // 2 * (2^63 - 1) saturates, and so do Flatten's product of the leading
  // dims and Concat's sum of (2^63 - 1) + (2^63 - 1) along axis 0.
  CHECK(DimsOf(table, "tiled") == std::vector<int64_t>{INT64_MAX, 16});
  CHECK(DimsOf(table, "flat") == std::vector<int64_t>{INT64_MAX, 16});
  CHECK(DimsOf(table, "both") == std::vector<int64_t>{INT64_MAX, 16});
}

TEST_CASE("a pool with stride 0 and a Split with no outputs leave shapes unknown") {
  // Both divided by zero (SIGFPE) before.
  onnx::ModelProto model = EmptyModel();
  SkipLibOnnxInference(model);
  AddInput(model, "x", {1, 3, 8, 8});
  auto* pool = AddNode(model, "MaxPool", {"x"}, {"p"});
  AddInts(pool, "kernel_shape", {2, 2});
  AddInts(pool, "strides", {0, 0});
  AddNode(model, "Split", {"x"}, {});
  std::string what = ResolveError(model);
  CHECK(what.find("tensor 'p' (output 0 of node 'MaxPool_2', op MaxPool): shape [1, 3, ?, ?]") !=
        std::string::npos);
}

}  // namespace
}  // namespace ckptplan

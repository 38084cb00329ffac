// The ONNX loader on malformed models the fuzzer made: a clear InputError
// naming the file and the node, exit kExitBadInput, never undefined behaviour.
#include "ckptplan/ingest/onnx_loader.h"

#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include "ckptplan/base/errors.h"

namespace ckptplan {
namespace {

using onnx::TensorProto;

void AddFloat(onnx::ValueInfoProto* info, const std::string& name, int64_t rows, int64_t cols) {
  info->set_name(name);
  auto* type = info->mutable_type()->mutable_tensor_type();
  type->set_elem_type(TensorProto::FLOAT);
  type->mutable_shape()->add_dim()->set_dim_value(rows);
  type->mutable_shape()->add_dim()->set_dim_value(cols);
}

std::string LoadError(const onnx::ModelProto& model) {
  try {
    ParseOnnxGraph(model.SerializeAsString(), "m.onnx", LoadOptions{});
  } catch (const InputError& e) {
    CHECK(e.exit_code() == kExitBadInput);
    return e.what();
  }
  FAIL("expected an InputError");
  return "";
}

TEST_CASE("a node that names no output is an error naming the file and the node") {
  // onnx_fuzzer: the last Gemm of an MLP lost its output; the builder bound a
  // reference to outputs[0] of an empty list (UBSan: null reference in
  // Builder::EmitForward). tests/fuzz/seeds/onnx/onnx_emitforward_null_reference.onnx
  for (bool empty_name : {false, true}) {
    onnx::ModelProto model;
    model.set_ir_version(8);
    model.add_opset_import()->set_version(17);
    AddFloat(model.mutable_graph()->add_input(), "x", 2, 4);
    TensorProto* w = model.mutable_graph()->add_initializer();
    w->set_name("w");
    w->set_data_type(TensorProto::FLOAT);
    w->add_dims(4);
    w->add_dims(4);
    for (int i = 0; i < 16; ++i) w->add_float_data(0.f);
    onnx::NodeProto* relu = model.mutable_graph()->add_node();
    relu->set_name("/relu");
    relu->set_op_type("Relu");
    relu->add_input("x");
    relu->add_output("h");
    onnx::NodeProto* gemm = model.mutable_graph()->add_node();
    gemm->set_name("/fc/Gemm");
    gemm->set_op_type("Gemm");
    gemm->add_input("h");
    gemm->add_input("w");
    if (empty_name) gemm->add_output("");  // an optional-output placeholder
    AddFloat(model.mutable_graph()->add_output(), "h", 2, 4);
    std::string what = LoadError(model);
    CHECK(what.find("m.onnx") != std::string::npos);
    CHECK(what.find("node '/fc/Gemm' (Gemm) names no output tensor (expected at least 1)") !=
          std::string::npos);
  }
}

TEST_CASE("raw_data of another size than the tensor's dims and type is an error") {
  // onnx_fuzzer: a Constant int64 scalar with 4 raw bytes (it needs 1 x 8 =
  // 8) made libonnx's data propagation copy 4 bytes into an empty vector
  // (SEGV in ParseData<long>). tests/fuzz/seeds/onnx/fuzz_raw_data_short_scalar.onnx
  // Each case: raw bytes given, and what dims x element size need.
  struct Case { int32_t type; std::vector<int64_t> dims; size_t raw; int64_t need; };
  for (const Case& c : {Case{TensorProto::INT64, {}, 4, 8},        // 1 x 8
                        Case{TensorProto::INT64, {3}, 8, 24},      // 3 x 8
                        Case{TensorProto::FLOAT, {2, 2}, 20, 16}}) {  // 4 x 4
    onnx::ModelProto model;
    model.set_ir_version(8);
    model.add_opset_import()->set_version(17);
    AddFloat(model.mutable_graph()->add_input(), "x", 2, 4);
    onnx::NodeProto* constant = model.mutable_graph()->add_node();
    constant->set_name("/c");
    constant->set_op_type("Constant");
    constant->add_output("k");
    onnx::AttributeProto* value = constant->add_attribute();
    value->set_name("value");
    value->set_type(onnx::AttributeProto::TENSOR);
    value->mutable_t()->set_data_type(c.type);
    for (int64_t d : c.dims) value->mutable_t()->add_dims(d);
    value->mutable_t()->set_raw_data(std::string(c.raw, '\0'));
    onnx::NodeProto* add = model.mutable_graph()->add_node();
    add->set_name("/add");
    add->set_op_type("Add");
    add->add_input("x");
    add->add_input("k");
    add->add_output("y");
    AddFloat(model.mutable_graph()->add_output(), "y", 2, 4);
    const std::string what = LoadError(model);
    CHECK(what.find("m.onnx") != std::string::npos);
    CHECK(what.find("node '/c' (Constant) attribute 'value' holds " + std::to_string(c.raw) +
                    " bytes of raw_data; its dims and type need " + std::to_string(c.need)) !=
          std::string::npos);
  }
}

}  // namespace
}  // namespace ckptplan

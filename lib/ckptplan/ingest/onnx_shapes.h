// Concrete shapes for every tensor of an ONNX graph.
//
// Symbolic dims are bound first (LoadOptions dims, input shapes), then ONNX shape
// inference runs with data propagation, then a pass of our own walks the
// nodes in order, evaluating small constant tensors (Shape -> Gather ->
// Concat -> Reshape chains and the like) and inferring the shapes stock
// inference leaves unknown. Whatever is still unknown is one error that lists
// every unresolved tensor and the dims that would fix it.
#ifndef CKPTPLAN_ONNX_SHAPES_H_
#define CKPTPLAN_ONNX_SHAPES_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <onnx/onnx_pb.h>

namespace ckptplan {

/// User bindings (LoadOptions::dims and input_shapes): symbolic dim name ->
/// size, and graph input -> shape.
struct ShapeBindings {
  std::map<std::string, int64_t> dims;
  std::map<std::string, std::vector<int64_t>> input_shapes;
};

/// Largest tensor (in elements) whose values are computed at load time.
inline constexpr int64_t kMaxFoldedElements = 1 << 16;

/// What is known about one tensor.
struct TensorShape {
  int32_t elem_type = 0;      ///< onnx::TensorProto_DataType; 0 when unknown
  bool has_rank = false;
  std::vector<int64_t> dims;  ///< -1 for an unknown dim
  /// Values computed at load time (constants, shape arithmetic); empty
  /// unless has_value.
  bool has_value = false;
  std::vector<double> value;

  bool Known() const;
  int64_t Elements() const;  ///< -1 when not Known()
};

struct ShapeTable {
  std::unordered_map<std::string, uint32_t> index;  ///< tensor name -> slot
  std::vector<TensorShape> shapes;
  const TensorShape* Find(const std::string& name) const;
};

/// Binds, infers and folds. `model` is modified (bound input dims, inferred
/// value_info). Throws InputError naming `source` when a binding names no
/// input, a bound dim contradicts the model, or any tensor stays unresolved.
ShapeTable ResolveShapes(onnx::ModelProto& model, const ShapeBindings& bindings,
                         const std::string& source);

/// The dtype name (ir/graph.h's DtypeBytes) of an ONNX data type, "" for
/// string, sub-byte and unknown types.
std::string_view OnnxDtypeName(int32_t elem_type);
/// Bytes per element of an ONNX data type (DtypeBytes of its name); 0 for
/// unknown / string / sub-byte.
uint32_t OnnxElementBytes(int32_t elem_type);
bool IsFloatingType(int32_t elem_type);

}  // namespace ckptplan

#endif  // CKPTPLAN_ONNX_SHAPES_H_

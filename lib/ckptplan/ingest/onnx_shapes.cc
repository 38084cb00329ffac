#include "ckptplan/ingest/onnx_shapes.h"

#include "ckptplan/ingest/loader.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>
#include <spdlog/spdlog.h>

#include "ckptplan/base/errors.h"
#include "ckptplan/base/limits.h"
#include "ckptplan/ir/graph.h"

namespace ckptplan {
namespace {

using onnx::NodeProto;
using onnx::TensorProto;
using Dims = std::vector<int64_t>;

std::string Quote(const std::string& name) { return "'" + name + "'"; }

// Shape arithmetic on dims and attributes read from the model saturates at
// int64's range instead of overflowing (undefined behaviour): an absurd
// result then fails ValidateGraph's size limits with a clear error, and a
// negative one reads as an unknown dim.
int64_t Saturate(__int128 value) {
  if (value > INT64_MAX) return INT64_MAX;
  return value < INT64_MIN ? INT64_MIN : static_cast<int64_t>(value);
}

// A folded value as an int64: out-of-range values saturate (casting them is
// undefined behaviour; int64 2^63-1, a common Slice end, reads back from
// double as 2^63), and NaN reads as INT64_MIN, which no op takes as a
// meaningful dim, axis or index.
int64_t ToInt64(double value) {
  if (std::isnan(value)) return INT64_MIN;
  if (value >= 9223372036854775808.0) return INT64_MAX;
  if (value < -9223372036854775808.0) return INT64_MIN;
  return static_cast<int64_t>(value);
}

std::string DimsText(const TensorShape& shape) {
  if (!shape.has_rank) return "unknown rank";
  std::string text = "[";
  for (size_t i = 0; i < shape.dims.size(); ++i) {
    text += (i ? ", " : "") + (shape.dims[i] < 0 ? std::string("?") : std::to_string(shape.dims[i]));
  }
  return text + "]";
}

// ---- attributes ----------------------------------------------------------

const onnx::AttributeProto* FindAttr(const NodeProto& node, const char* name) {
  for (const auto& attr : node.attribute()) {
    if (attr.name() == name) return &attr;
  }
  return nullptr;
}

int64_t AttrInt(const NodeProto& node, const char* name, int64_t fallback) {
  const auto* attr = FindAttr(node, name);
  return attr ? attr->i() : fallback;
}

Dims AttrInts(const NodeProto& node, const char* name) {
  const auto* attr = FindAttr(node, name);
  return attr ? Dims(attr->ints().begin(), attr->ints().end()) : Dims{};
}

// ---- tensor values -------------------------------------------------------

template <typename T>
void AppendRaw(const std::string& raw, std::vector<double>* out) {
  size_t count = raw.size() / sizeof(T);
  out->reserve(count);
  for (size_t i = 0; i < count; ++i) {
    T value;
    std::memcpy(&value, raw.data() + i * sizeof(T), sizeof(T));
    out->push_back(static_cast<double>(value));
  }
}

// Values of a small tensor held in the model file; false when they are
// external, too many, or of a type we do not evaluate.
bool ReadTensorValues(const TensorProto& tensor, std::vector<double>* out) {
  if (tensor.data_location() == TensorProto::EXTERNAL) return false;
  int64_t elements = 1;
  for (int64_t d : tensor.dims()) {
    if (d < 0) return false;
    elements = SaturatingMul(elements, d);
  }
  if (elements > kMaxFoldedElements) return false;
  out->clear();
  const std::string& raw = tensor.raw_data();
  switch (tensor.data_type()) {
    case TensorProto::FLOAT:
      if (!raw.empty()) AppendRaw<float>(raw, out);
      else out->assign(tensor.float_data().begin(), tensor.float_data().end());
      break;
    case TensorProto::DOUBLE:
      if (!raw.empty()) AppendRaw<double>(raw, out);
      else out->assign(tensor.double_data().begin(), tensor.double_data().end());
      break;
    case TensorProto::INT64:
      if (!raw.empty()) AppendRaw<int64_t>(raw, out);
      else out->assign(tensor.int64_data().begin(), tensor.int64_data().end());
      break;
    case TensorProto::INT32:
      if (!raw.empty()) AppendRaw<int32_t>(raw, out);
      else out->assign(tensor.int32_data().begin(), tensor.int32_data().end());
      break;
    case TensorProto::BOOL:
    case TensorProto::UINT8:
      if (!raw.empty()) AppendRaw<uint8_t>(raw, out);
      else out->assign(tensor.int32_data().begin(), tensor.int32_data().end());
      break;
    case TensorProto::INT8:
      if (!raw.empty()) AppendRaw<int8_t>(raw, out);
      else out->assign(tensor.int32_data().begin(), tensor.int32_data().end());
      break;
    default:
      return false;
  }
  return static_cast<int64_t>(out->size()) == elements;
}

bool IsIntegerType(int32_t type) {
  switch (type) {
    case TensorProto::INT8: case TensorProto::INT16: case TensorProto::INT32:
    case TensorProto::INT64: case TensorProto::UINT8: case TensorProto::UINT16:
    case TensorProto::UINT32: case TensorProto::UINT64: case TensorProto::BOOL:
      return true;
    default:
      return false;
  }
}

double CastValue(double v, int32_t type) {
  if (type == TensorProto::BOOL) return v != 0 ? 1 : 0;
  if (IsIntegerType(type)) return std::trunc(v);
  if (type == TensorProto::FLOAT) return static_cast<float>(v);
  return v;
}

// ---- shape helpers -------------------------------------------------------

TensorShape Ranked(int32_t type, Dims dims) {
  TensorShape shape;
  shape.elem_type = type;
  shape.has_rank = true;
  shape.dims = std::move(dims);
  return shape;
}

TensorShape WithValue(int32_t type, Dims dims, std::vector<double> value) {
  TensorShape shape = Ranked(type, std::move(dims));
  for (double& v : value) v = CastValue(v, type);
  shape.has_value = true;
  shape.value = std::move(value);
  return shape;
}

int64_t Product(const Dims& dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < dims.size(); ++i) {
    if (dims[i] < 0) return -1;
    p = SaturatingMul(p, dims[i]);
  }
  return p;
}

bool Broadcast(const Dims& a, const Dims& b, Dims* out) {
  size_t rank = std::max(a.size(), b.size());
  out->assign(rank, -1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t x = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t y = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (x == 1) (*out)[i] = y;
    else if (y == 1) (*out)[i] = x;
    else if (x < 0 || y < 0) (*out)[i] = std::max(x, y) > 1 ? std::max(x, y) : -1;
    else if (x == y) (*out)[i] = x;
    else return false;
  }
  return true;
}

// Flat index into an input of dims `in` broadcast to `out`.
int64_t BroadcastIndex(const Dims& out, const Dims& in, int64_t flat) {
  int64_t index = 0, stride = 1;
  for (size_t k = 0; k < out.size(); ++k) {
    size_t i = out.size() - 1 - k;
    int64_t coord = flat % out[i];
    flat /= out[i];
    if (k < in.size()) {
      int64_t d = in[in.size() - 1 - k];
      if (d != 1) index += coord * stride;
      stride *= d;
    }
  }
  return index;
}

int64_t NormalizeAxis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

// ---- per-op inference ----------------------------------------------------

using Inputs = std::vector<const TensorShape*>;  // nullptr: absent input

struct Context {
  const NodeProto& node;
  const Inputs& in;
  int opset;
  const TensorShape* Input(size_t i) const { return i < in.size() ? in[i] : nullptr; }
  bool Known(size_t i) const { return Input(i) && Input(i)->Known(); }
  bool Ranked(size_t i) const { return Input(i) && Input(i)->has_rank; }
  bool Value(size_t i) const { return Input(i) && Input(i)->has_value; }
  int32_t Type(size_t i) const { return Input(i) ? Input(i)->elem_type : 0; }
  Dims Ints(size_t i) const {
    Dims out;
    for (double v : in[i]->value) out.push_back(ToInt64(v));
    return out;
  }
};

using Outputs = std::vector<TensorShape>;

// Elementwise n-ary op over broadcast inputs, evaluating values when all are
// known and small.
Outputs Elementwise(const Context& c, int32_t out_type,
                    const std::function<double(const std::vector<double>&)>& fn) {
  Dims dims;
  bool ranked = true;
  for (const TensorShape* s : c.in) {
    if (!s || !s->has_rank) { ranked = false; break; }
    Dims next;
    if (!Broadcast(dims, s->dims, &next)) return {};
    dims = next;
  }
  if (!ranked || c.in.empty()) return {};
  TensorShape out = Ranked(out_type, dims);
  bool all_values = fn != nullptr;
  for (const TensorShape* s : c.in) all_values &= s->has_value;
  int64_t n = out.Elements();
  if (all_values && n >= 0 && n <= kMaxFoldedElements) {
    std::vector<double> value(n), args(c.in.size());
    for (int64_t e = 0; e < n; ++e) {
      for (size_t k = 0; k < c.in.size(); ++k) {
        args[k] = c.in[k]->value[BroadcastIndex(dims, c.in[k]->dims, e)];
      }
      value[e] = fn(args);
    }
    out = WithValue(out_type, dims, std::move(value));
  }
  return {out};
}

Outputs SameAsInput(const Context& c, int32_t type) {
  if (!c.Ranked(0)) return {};
  return {Ranked(type ? type : c.Type(0), c.in[0]->dims)};
}

// Values unchanged, dims replaced (Reshape, Squeeze, Unsqueeze, Flatten).
Outputs Redim(const Context& c, Dims dims) {
  const TensorShape& x = *c.in[0];
  if (x.has_value) return {WithValue(x.elem_type, dims, x.value)};
  return {Ranked(x.elem_type, std::move(dims))};
}

Outputs InferReshape(const Context& c) {
  if (!c.Value(1) || !c.Ranked(0)) return {};
  Dims target = c.Ints(1);
  const Dims& in = c.in[0]->dims;
  bool allow_zero = AttrInt(c.node, "allowzero", 0) != 0;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allow_zero) target[i] = i < in.size() ? in[i] : -1;
    if (target[i] == -1 && infer < 0) { infer = i; continue; }
    if (target[i] < 0) return {};
    known = SaturatingMul(known, target[i]);
  }
  if (infer >= 0) {
    int64_t total = Product(in, 0, in.size());
    if (total < 0 || known == 0) return {Ranked(c.Type(0), target)};
    target[infer] = total / known;
  }
  return Redim(c, target);
}

Dims AxesOf(const Context& c, size_t input) {
  if (c.Value(input)) return c.Ints(input);
  return AttrInts(c.node, "axes");
}

Outputs InferUnsqueeze(const Context& c) {
  if (!c.Ranked(0)) return {};
  Dims axes = AxesOf(c, 1);
  if (axes.empty() && c.Input(1)) return {};
  size_t rank = c.in[0]->dims.size() + axes.size();
  for (int64_t& a : axes) a = NormalizeAxis(a, rank);
  std::sort(axes.begin(), axes.end());
  Dims dims;
  size_t next = 0;
  for (size_t i = 0; i < rank; ++i) {
    if (std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(i))) dims.push_back(1);
    else if (next < c.in[0]->dims.size()) dims.push_back(c.in[0]->dims[next++]);
  }
  return Redim(c, dims);
}

Outputs InferSqueeze(const Context& c) {
  if (!c.Ranked(0)) return {};
  const Dims& in = c.in[0]->dims;
  Dims axes = AxesOf(c, 1);
  if (axes.empty() && c.Input(1)) return {};
  for (int64_t& a : axes) a = NormalizeAxis(a, in.size());
  Dims dims;
  for (size_t i = 0; i < in.size(); ++i) {
    bool drop = axes.empty() ? in[i] == 1
                             : std::find(axes.begin(), axes.end(), int64_t(i)) != axes.end();
    if (axes.empty() && in[i] < 0) return {};
    if (!drop) dims.push_back(in[i]);
  }
  return Redim(c, dims);
}

Outputs InferFlatten(const Context& c) {
  if (!c.Ranked(0)) return {};
  const Dims& in = c.in[0]->dims;
  size_t axis = NormalizeAxis(AttrInt(c.node, "axis", 1), in.size());
  return Redim(c, {Product(in, 0, axis), Product(in, axis, in.size())});
}

Outputs InferShapeOp(const Context& c) {
  if (!c.Known(0)) {
    if (!c.Ranked(0)) return {};
    return {Ranked(TensorProto::INT64, {static_cast<int64_t>(c.in[0]->dims.size())})};
  }
  const Dims& in = c.in[0]->dims;
  int64_t rank = in.size();
  int64_t start = NormalizeAxis(AttrInt(c.node, "start", 0), rank);
  int64_t end = NormalizeAxis(AttrInt(c.node, "end", rank), rank);
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  std::vector<double> value(in.begin() + start, in.begin() + end);
  return {WithValue(TensorProto::INT64, {end - start}, value)};
}

Outputs InferGather(const Context& c) {
  if (!c.Ranked(0) || !c.Ranked(1)) return {};
  const TensorShape& data = *c.in[0];
  const TensorShape& indices = *c.in[1];
  size_t axis = NormalizeAxis(AttrInt(c.node, "axis", 0), data.dims.size());
  if (axis >= data.dims.size()) return {};
  Dims dims(data.dims.begin(), data.dims.begin() + axis);
  dims.insert(dims.end(), indices.dims.begin(), indices.dims.end());
  dims.insert(dims.end(), data.dims.begin() + axis + 1, data.dims.end());
  TensorShape out = Ranked(data.elem_type, dims);
  int64_t n = out.Elements();
  if (!data.has_value || !indices.has_value || n < 0 || n > kMaxFoldedElements) return {out};
  int64_t outer = Product(data.dims, 0, axis), inner = Product(data.dims, axis + 1, data.dims.size());
  int64_t extent = data.dims[axis];
  std::vector<double> value;
  value.reserve(n);
  for (int64_t o = 0; o < outer; ++o) {
    for (double idx : indices.value) {
      int64_t k = ToInt64(idx);
      if (k < 0) k += extent;
      if (k < 0 || k >= extent) return {out};
      for (int64_t i = 0; i < inner; ++i) value.push_back(data.value[(o * extent + k) * inner + i]);
    }
  }
  return {WithValue(data.elem_type, dims, std::move(value))};
}

Outputs InferConcat(const Context& c) {
  if (c.in.empty()) return {};
  for (size_t i = 0; i < c.in.size(); ++i) {
    if (!c.Ranked(i)) return {};
  }
  size_t rank = c.in[0]->dims.size();
  size_t axis = NormalizeAxis(AttrInt(c.node, "axis", 0), rank);
  Dims dims = c.in[0]->dims;
  if (axis >= rank) return {};
  bool values = true;
  for (size_t i = 1; i < c.in.size(); ++i) {
    const Dims& d = c.in[i]->dims;
    if (d.size() != rank) return {};
    dims[axis] = dims[axis] < 0 || d[axis] < 0 ? -1 : SaturatingAdd(dims[axis], d[axis]);
    for (size_t k = 0; k < rank; ++k) {
      if (k != axis && dims[k] < 0) dims[k] = d[k];
    }
  }
  for (const TensorShape* s : c.in) values &= s->has_value;
  TensorShape out = Ranked(c.Type(0), dims);
  int64_t n = out.Elements();
  if (!values || n < 0 || n > kMaxFoldedElements) return {out};
  int64_t outer = Product(dims, 0, axis);
  std::vector<double> value;
  for (int64_t o = 0; o < outer; ++o) {
    for (const TensorShape* s : c.in) {
      int64_t chunk = Product(s->dims, axis, rank);
      value.insert(value.end(), s->value.begin() + o * chunk, s->value.begin() + (o + 1) * chunk);
    }
  }
  return {WithValue(c.Type(0), dims, std::move(value))};
}

Outputs InferSlice(const Context& c) {
  if (!c.Ranked(0)) return {};
  const TensorShape& x = *c.in[0];
  size_t rank = x.dims.size();
  Dims starts, ends, axes, steps;
  if (c.opset < 10) {
    starts = AttrInts(c.node, "starts");
    ends = AttrInts(c.node, "ends");
    axes = AttrInts(c.node, "axes");
  } else {
    if (!c.Value(1) || !c.Value(2)) return {};
    starts = c.Ints(1);
    ends = c.Ints(2);
    if (c.Input(3)) { if (!c.Value(3)) return {}; axes = c.Ints(3); }
    if (c.Input(4)) { if (!c.Value(4)) return {}; steps = c.Ints(4); }
  }
  if (axes.empty()) for (size_t i = 0; i < starts.size(); ++i) axes.push_back(i);
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || ends.size() != starts.size() || steps.size() != starts.size()) {
    return {};
  }
  Dims dims = x.dims, first(rank, 0), step(rank, 1);
  for (size_t k = 0; k < axes.size(); ++k) {
    size_t a = NormalizeAxis(axes[k], rank);
    if (a >= rank || x.dims[a] < 0 || steps[k] == 0) return {Ranked(x.elem_type, Dims(rank, -1))};
    int64_t d = x.dims[a], s = starts[k], e = ends[k];
    if (s < 0) s += d;
    if (e < 0) e += d;
    // Counts as ceil(span / |step|) = (span - 1) / |step| + 1: a step near
    // int64's limits must not overflow.
    if (steps[k] > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      dims[a] = e > s ? (e - s - 1) / steps[k] + 1 : 0;
    } else if (d == 0) {
      dims[a] = 0;
    } else {
      s = std::clamp<int64_t>(s, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
      __int128 magnitude = -static_cast<__int128>(steps[k]);
      dims[a] = s > e ? Saturate((static_cast<__int128>(s) - e - 1) / magnitude + 1) : 0;
    }
    first[a] = s;
    step[a] = steps[k];
  }
  TensorShape out = Ranked(x.elem_type, dims);
  int64_t n = out.Elements();
  if (!x.has_value || n < 0 || n > kMaxFoldedElements) return {out};
  std::vector<double> value(n);
  for (int64_t e = 0; e < n; ++e) {
    int64_t rest = e, index = 0, stride = 1;
    for (size_t k = 0; k < rank; ++k) {
      size_t a = rank - 1 - k;
      int64_t coord = rest % dims[a];
      rest /= dims[a];
      index += (first[a] + coord * step[a]) * stride;
      stride *= x.dims[a];
    }
    value[e] = x.value[index];
  }
  return {WithValue(x.elem_type, dims, std::move(value))};
}

Outputs InferSplit(const Context& c) {
  if (!c.Ranked(0)) return {};
  const Dims& in = c.in[0]->dims;
  size_t axis = NormalizeAxis(AttrInt(c.node, "axis", 0), in.size());
  if (axis >= in.size()) return {};
  size_t n = c.node.output_size();
  if (n == 0) return {};
  Dims sizes = c.Input(1) ? (c.Value(1) ? c.Ints(1) : Dims{}) : AttrInts(c.node, "split");
  if (sizes.empty()) {
    if (c.Input(1) || in[axis] < 0) return {};
    int64_t chunk = in[axis] == 0 ? 0 : (in[axis] - 1) / static_cast<int64_t>(n) + 1;
    for (size_t i = 0; i < n; ++i) {
      __int128 rest = in[axis] - static_cast<__int128>(chunk) * i;
      sizes.push_back(std::min<int64_t>(chunk, Saturate(rest)));
    }
  }
  if (sizes.size() != n) return {};
  Outputs outs;
  for (int64_t size : sizes) {
    Dims dims = in;
    dims[axis] = size;
    outs.push_back(Ranked(c.Type(0), dims));
  }
  return outs;
}

Outputs InferTranspose(const Context& c) {
  if (!c.Ranked(0)) return {};
  const Dims& in = c.in[0]->dims;
  Dims perm = AttrInts(c.node, "perm");
  if (perm.empty()) for (size_t i = 0; i < in.size(); ++i) perm.push_back(in.size() - 1 - i);
  if (perm.size() != in.size()) return {};
  Dims dims;
  for (int64_t p : perm) {
    int64_t axis = NormalizeAxis(p, in.size());
    if (axis < 0 || axis >= static_cast<int64_t>(in.size())) return {};  // bad perm: no shape
    dims.push_back(in[axis]);
  }
  return {Ranked(c.Type(0), dims)};
}

Outputs InferMatMul(const Context& c) {
  if (!c.Ranked(0) || !c.Ranked(1)) return {};
  Dims a = c.in[0]->dims, b = c.in[1]->dims;
  if (a.empty() || b.empty()) return {};
  bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), 1);
  if (b_vec) b.push_back(1);
  Dims batch;
  if (!Broadcast(Dims(a.begin(), a.end() - 2), Dims(b.begin(), b.end() - 2), &batch)) return {};
  Dims dims = batch;
  if (!a_vec) dims.push_back(a[a.size() - 2]);
  if (!b_vec) dims.push_back(b.back());
  return {Ranked(c.Type(0), dims)};
}

Outputs InferGemm(const Context& c) {
  if (!c.Ranked(0) || !c.Ranked(1)) return {};
  const Dims& a = c.in[0]->dims;
  const Dims& b = c.in[1]->dims;
  if (a.size() != 2 || b.size() != 2) return {};
  int64_t m = AttrInt(c.node, "transA", 0) ? a[1] : a[0];
  int64_t n = AttrInt(c.node, "transB", 0) ? b[0] : b[1];
  return {Ranked(c.Type(0), {m, n})};
}

// Output spatial extent of a conv or pool window.
// Unknown (-1) for a stride or dilation below 1; 128-bit arithmetic, as
// attributes are the model's to choose.
int64_t WindowOut(int64_t in, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_begin,
                  int64_t pad_end, const std::string& auto_pad, bool ceil_mode) {
  if (in < 0 || kernel < 0 || stride < 1 || dilation < 1) return -1;
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    return in == 0 ? 0 : (in - 1) / stride + 1;
  }
  __int128 window = static_cast<__int128>(kernel - 1) * dilation + 1;
  __int128 pads = auto_pad == "VALID" ? 0 : static_cast<__int128>(pad_begin) + pad_end;
  __int128 span = in + pads - window;
  if (span < 0) return -1;
  return Saturate((ceil_mode ? (span + stride - 1) / stride : span / stride) + 1);
}

Outputs InferWindow(const Context& c, bool conv) {
  if (!c.Ranked(0)) return {};
  const Dims& x = c.in[0]->dims;
  if (x.size() < 3) return {};
  size_t spatial = x.size() - 2;
  Dims kernel = AttrInts(c.node, "kernel_shape");
  int64_t channels = x[1];
  if (conv) {
    if (!c.Ranked(1)) return {};
    const Dims& w = c.in[1]->dims;
    if (w.size() != x.size()) return {};
    if (kernel.empty()) kernel.assign(w.begin() + 2, w.end());
    channels = w[0];
  }
  if (kernel.size() != spatial) return {};
  Dims strides = AttrInts(c.node, "strides"), dilations = AttrInts(c.node, "dilations"),
       pads = AttrInts(c.node, "pads");
  strides.resize(spatial, 1);
  dilations.resize(spatial, 1);
  pads.resize(2 * spatial, 0);
  const auto* auto_pad_attr = FindAttr(c.node, "auto_pad");
  std::string auto_pad = auto_pad_attr ? auto_pad_attr->s() : "NOTSET";
  bool ceil_mode = AttrInt(c.node, "ceil_mode", 0) != 0;
  Dims dims{x[0], channels};
  for (size_t i = 0; i < spatial; ++i) {
    dims.push_back(WindowOut(x[i + 2], kernel[i], strides[i], dilations[i], pads[i],
                             pads[i + spatial], auto_pad, ceil_mode));
  }
  Outputs outs{Ranked(c.Type(0), dims)};
  if (c.node.output_size() > 1) outs.push_back(Ranked(TensorProto::INT64, dims));
  return outs;
}

Outputs InferConvTranspose(const Context& c) {
  if (!c.Ranked(0) || !c.Ranked(1)) return {};
  const Dims& x = c.in[0]->dims;
  const Dims& w = c.in[1]->dims;
  if (x.size() < 3 || w.size() != x.size()) return {};
  size_t spatial = x.size() - 2;
  int64_t group = AttrInt(c.node, "group", 1);
  Dims dims{x[0], w[1] < 0 ? -1 : SaturatingMul(w[1], group)};
  Dims output_shape = AttrInts(c.node, "output_shape");
  if (output_shape.size() == spatial) {
    dims.insert(dims.end(), output_shape.begin(), output_shape.end());
    return {Ranked(c.Type(0), dims)};
  }
  Dims strides = AttrInts(c.node, "strides"), dilations = AttrInts(c.node, "dilations"),
       pads = AttrInts(c.node, "pads"), out_pad = AttrInts(c.node, "output_padding");
  strides.resize(spatial, 1);
  dilations.resize(spatial, 1);
  pads.resize(2 * spatial, 0);
  out_pad.resize(spatial, 0);
  for (size_t i = 0; i < spatial; ++i) {
    int64_t in = x[i + 2], k = w[i + 2];
    if (in < 0 || k < 0) {
      dims.push_back(-1);
      continue;
    }
    __int128 out = static_cast<__int128>(strides[i]) * (in - 1) + out_pad[i] +
                   static_cast<__int128>(k - 1) * dilations[i] + 1 - pads[i] - pads[i + spatial];
    dims.push_back(Saturate(out));
  }
  return {Ranked(c.Type(0), dims)};
}

Outputs InferGlobalPool(const Context& c) {
  if (!c.Ranked(0)) return {};
  Dims dims = c.in[0]->dims;
  for (size_t i = 2; i < dims.size(); ++i) dims[i] = 1;
  return {Ranked(c.Type(0), dims)};
}

Outputs InferReduce(const Context& c, int32_t type) {
  if (!c.Ranked(0)) return {};
  const Dims& in = c.in[0]->dims;
  Dims axes;
  bool from_input = c.Input(1) != nullptr;
  if (from_input) {
    if (!c.Value(1)) return {};
    axes = c.Ints(1);
  } else if (FindAttr(c.node, "axis")) {
    axes = {AttrInt(c.node, "axis", 0)};
  } else {
    axes = AttrInts(c.node, "axes");
  }
  bool keep = AttrInt(c.node, "keepdims", 1) != 0;
  if (axes.empty() && AttrInt(c.node, "noop_with_empty_axes", 0)) return SameAsInput(c, type);
  for (int64_t& a : axes) a = NormalizeAxis(a, in.size());
  Dims dims;
  for (size_t i = 0; i < in.size(); ++i) {
    bool reduced = axes.empty() || std::find(axes.begin(), axes.end(), int64_t(i)) != axes.end();
    if (!reduced) dims.push_back(in[i]);
    else if (keep) dims.push_back(1);
  }
  return {Ranked(type ? type : c.Type(0), dims)};
}

Outputs InferConstant(const Context& c) {
  if (const auto* attr = FindAttr(c.node, "value")) {
    const TensorProto& t = attr->t();
    std::vector<double> value;
    Dims dims(t.dims().begin(), t.dims().end());
    if (ReadTensorValues(t, &value)) return {WithValue(t.data_type(), dims, value)};
    return {Ranked(t.data_type(), dims)};
  }
  if (const auto* attr = FindAttr(c.node, "value_int")) {
    return {WithValue(TensorProto::INT64, {}, {double(attr->i())})};
  }
  if (const auto* attr = FindAttr(c.node, "value_float")) {
    return {WithValue(TensorProto::FLOAT, {}, {attr->f()})};
  }
  if (const auto* attr = FindAttr(c.node, "value_ints")) {
    std::vector<double> v(attr->ints().begin(), attr->ints().end());
    return {WithValue(TensorProto::INT64, {int64_t(v.size())}, v)};
  }
  if (const auto* attr = FindAttr(c.node, "value_floats")) {
    std::vector<double> v(attr->floats().begin(), attr->floats().end());
    return {WithValue(TensorProto::FLOAT, {int64_t(v.size())}, v)};
  }
  return {};
}

Outputs InferConstantOfShape(const Context& c) {
  if (!c.Value(0)) return {};
  Dims dims = c.Ints(0);
  int32_t type = TensorProto::FLOAT;
  double fill = 0;
  if (const auto* attr = FindAttr(c.node, "value")) {
    type = attr->t().data_type();
    std::vector<double> v;
    if (ReadTensorValues(attr->t(), &v) && !v.empty()) fill = v[0];
  }
  TensorShape out = Ranked(type, dims);
  int64_t n = out.Elements();
  if (n < 0 || n > kMaxFoldedElements) return {out};
  return {WithValue(type, dims, std::vector<double>(n, fill))};
}

Outputs InferRange(const Context& c) {
  if (!c.Value(0) || !c.Value(1) || !c.Value(2)) return {};
  double start = c.in[0]->value[0], limit = c.in[1]->value[0], delta = c.in[2]->value[0];
  if (delta == 0) return {};
  int64_t n = std::max<int64_t>(0, ToInt64(std::ceil((limit - start) / delta)));
  if (n > kMaxFoldedElements) return {Ranked(c.Type(0), {n})};
  std::vector<double> value(n);
  for (int64_t i = 0; i < n; ++i) value[i] = start + i * delta;
  return {WithValue(c.Type(0), {n}, std::move(value))};
}

Outputs InferExpand(const Context& c) {
  if (!c.Ranked(0) || !c.Value(1)) return {};
  Dims dims;
  if (!Broadcast(c.in[0]->dims, c.Ints(1), &dims)) return {};
  TensorShape out = Ranked(c.Type(0), dims);
  int64_t n = out.Elements();
  if (!c.in[0]->has_value || n < 0 || n > kMaxFoldedElements) return {out};
  std::vector<double> value(n);
  for (int64_t e = 0; e < n; ++e) value[e] = c.in[0]->value[BroadcastIndex(dims, c.in[0]->dims, e)];
  return {WithValue(c.Type(0), dims, std::move(value))};
}

Outputs InferTile(const Context& c) {
  if (!c.Ranked(0) || !c.Value(1)) return {};
  Dims dims = c.in[0]->dims, repeats = c.Ints(1);
  if (repeats.size() != dims.size()) return {};
  for (size_t i = 0; i < dims.size(); ++i) {
    dims[i] = dims[i] < 0 ? -1 : SaturatingMul(dims[i], repeats[i]);
  }
  return {Ranked(c.Type(0), dims)};
}

Outputs InferResize(const Context& c) {
  if (!c.Ranked(0)) return {};
  Dims dims = c.in[0]->dims;
  size_t scales_input = c.opset < 11 ? 1 : 2;
  if (c.Input(3) && c.Value(3) && c.in[3]->value.size() == dims.size()) {
    return {Ranked(c.Type(0), c.Ints(3))};
  }
  if (!c.Value(scales_input) || c.in[scales_input]->value.size() != dims.size()) return {};
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] >= 0) dims[i] = ToInt64(std::floor(dims[i] * c.in[scales_input]->value[i]));
  }
  return {Ranked(c.Type(0), dims)};
}

Outputs InferPad(const Context& c) {
  if (!c.Ranked(0)) return {};
  Dims dims = c.in[0]->dims;
  Dims pads = c.opset < 11 ? AttrInts(c.node, "pads") : (c.Value(1) ? c.Ints(1) : Dims{});
  if (pads.size() != 2 * dims.size()) return {};
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) continue;
    dims[i] = Saturate(static_cast<__int128>(dims[i]) + pads[i] + pads[i + dims.size()]);
  }
  return {Ranked(c.Type(0), dims)};
}

Outputs InferNormalization(const Context& c, bool per_row) {
  if (!c.Ranked(0)) return {};
  Dims dims = c.in[0]->dims;
  Outputs outs{Ranked(c.Type(0), dims)};
  Dims stats;
  if (per_row) {
    size_t axis = NormalizeAxis(AttrInt(c.node, "axis", -1), dims.size());
    stats = dims;
    for (size_t i = axis; i < stats.size(); ++i) stats[i] = 1;
  } else {
    stats = {dims.size() > 1 ? dims[1] : 1};
  }
  for (int i = 1; i < c.node.output_size(); ++i) outs.push_back(Ranked(TensorProto::FLOAT, stats));
  return outs;
}

Outputs InferCast(const Context& c) {
  int32_t to = static_cast<int32_t>(AttrInt(c.node, "to", 0));
  if (!c.Ranked(0)) return {};
  if (c.Value(0)) return {WithValue(to, c.in[0]->dims, c.in[0]->value)};
  return {Ranked(to, c.in[0]->dims)};
}

Outputs InferLoss(const Context& c) {
  if (!c.Ranked(0)) return {};
  const auto* reduction = FindAttr(c.node, "reduction");
  std::string mode = reduction ? reduction->s() : "mean";
  Dims dims = c.in[0]->dims;
  Dims loss_dims;
  if (mode == "none" && !dims.empty()) {
    loss_dims = dims;
    loss_dims.erase(loss_dims.begin() + (dims.size() > 1 ? 1 : 0));
  }
  Outputs outs{Ranked(c.Type(0), loss_dims)};
  if (c.node.output_size() > 1) outs.push_back(Ranked(c.Type(0), dims));
  return outs;
}

double Bool(bool b) { return b ? 1.0 : 0.0; }

Outputs Infer(const Context& c) {
  const std::string& op = c.node.op_type();
  int32_t t0 = c.Type(0);
  bool integer = IsIntegerType(t0);
  using Args = const std::vector<double>&;
  // A malformed node (a binary op with one input) gets no shape, rather than
  // its value lambda reading past its inputs.
  static const std::set<std::string> kBinary = {
      "Sub",  "Mul",      "Div",         "Pow",     "Mod", "Equal", "Less",
      "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or",  "Xor"};
  if ((kBinary.count(op) && c.in.size() < 2) || (op == "Where" && c.in.size() < 3)) return {};
  if (op == "Add" || op == "Sum") {
    return Elementwise(c, t0, [](Args a) { double s = 0; for (double v : a) s += v; return s; });
  }
  if (op == "Sub") return Elementwise(c, t0, [](Args a) { return a[0] - a[1]; });
  if (op == "Mul") return Elementwise(c, t0, [](Args a) { return a[0] * a[1]; });
  if (op == "Div") {
    return Elementwise(c, t0, [integer](Args a) {
      if (a[1] == 0) return 0.0;
      return integer ? std::trunc(a[0] / a[1]) : a[0] / a[1];
    });
  }
  if (op == "Pow") return Elementwise(c, t0, [](Args a) { return std::pow(a[0], a[1]); });
  if (op == "Mod") return Elementwise(c, t0, [](Args a) { return a[1] ? std::fmod(a[0], a[1]) : 0; });
  if (op == "Max") return Elementwise(c, t0, [](Args a) { return *std::max_element(a.begin(), a.end()); });
  if (op == "Min") return Elementwise(c, t0, [](Args a) { return *std::min_element(a.begin(), a.end()); });
  const int32_t kBool = TensorProto::BOOL;
  if (op == "Equal") return Elementwise(c, kBool, [](Args a) { return Bool(a[0] == a[1]); });
  if (op == "Less") return Elementwise(c, kBool, [](Args a) { return Bool(a[0] < a[1]); });
  if (op == "LessOrEqual") return Elementwise(c, kBool, [](Args a) { return Bool(a[0] <= a[1]); });
  if (op == "Greater") return Elementwise(c, kBool, [](Args a) { return Bool(a[0] > a[1]); });
  if (op == "GreaterOrEqual") return Elementwise(c, kBool, [](Args a) { return Bool(a[0] >= a[1]); });
  if (op == "And") return Elementwise(c, kBool, [](Args a) { return Bool(a[0] && a[1]); });
  if (op == "Or") return Elementwise(c, kBool, [](Args a) { return Bool(a[0] || a[1]); });
  if (op == "Xor") return Elementwise(c, kBool, [](Args a) { return Bool(!a[0] != !a[1]); });
  if (op == "Not") return Elementwise(c, kBool, [](Args a) { return Bool(!a[0]); });
  if (op == "Where") return Elementwise(c, c.Type(1), [](Args a) { return a[0] ? a[1] : a[2]; });
  if (op == "Neg") return Elementwise(c, t0, [](Args a) { return -a[0]; });
  if (op == "Abs") return Elementwise(c, t0, [](Args a) { return std::fabs(a[0]); });
  if (op == "Sqrt") return Elementwise(c, t0, [](Args a) { return std::sqrt(a[0]); });
  if (op == "Floor") return Elementwise(c, t0, [](Args a) { return std::floor(a[0]); });
  if (op == "Ceil") return Elementwise(c, t0, [](Args a) { return std::ceil(a[0]); });
  if (op == "PRelu" || op == "Mean" || op == "BitShift") return Elementwise(c, t0, nullptr);
  static const std::set<std::string> kSameShape = {
      "Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Log", "Reciprocal", "Softmax", "LogSoftmax",
      "Gelu", "Identity", "Elu", "Selu", "LeakyRelu", "HardSigmoid", "HardSwish", "Softplus",
      "Softsign", "Mish", "Clip", "Sin", "Cos", "Tan", "Round", "Sign", "CumSum", "Trilu",
      "Hardmax", "ThresholdedRelu", "Celu", "Shrink", "LRN", "InstanceNormalization",
      "GroupNormalization", "MeanVarianceNormalization", "Neg", "Dropout", "IsNaN", "IsInf"};
  if (op == "Dropout") {
    Outputs outs = SameAsInput(c, 0);
    if (!outs.empty() && c.node.output_size() > 1) outs.push_back(Ranked(kBool, outs[0].dims));
    return outs;
  }
  if (op == "IsNaN" || op == "IsInf") return SameAsInput(c, kBool);
  if (op == "Identity" && c.Value(0)) return {*c.in[0]};
  if (kSameShape.count(op)) return SameAsInput(c, 0);
  if (op == "Cast" || op == "CastLike") return op == "Cast" ? InferCast(c) : SameAsInput(c, c.Type(1));
  if (op == "Reshape") return InferReshape(c);
  if (op == "Unsqueeze") return InferUnsqueeze(c);
  if (op == "Squeeze") return InferSqueeze(c);
  if (op == "Flatten") return InferFlatten(c);
  if (op == "Shape") return InferShapeOp(c);
  if (op == "Size") {
    if (!c.Known(0)) return {Ranked(TensorProto::INT64, {})};
    return {WithValue(TensorProto::INT64, {}, {double(c.in[0]->Elements())})};
  }
  if (op == "Gather") return InferGather(c);
  if (op == "Concat") return InferConcat(c);
  if (op == "Slice") return InferSlice(c);
  if (op == "Split") return InferSplit(c);
  if (op == "Transpose") return InferTranspose(c);
  if (op == "MatMul") return InferMatMul(c);
  if (op == "Gemm") return InferGemm(c);
  if (op == "Conv") return InferWindow(c, true);
  if (op == "MaxPool" || op == "AveragePool" || op == "LpPool") return InferWindow(c, false);
  if (op == "ConvTranspose") return InferConvTranspose(c);
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool" || op == "GlobalLpPool") {
    return InferGlobalPool(c);
  }
  if (op.rfind("Reduce", 0) == 0) return InferReduce(c, 0);
  if (op == "ArgMax" || op == "ArgMin") return InferReduce(c, TensorProto::INT64);
  if (op == "Constant") return InferConstant(c);
  if (op == "ConstantOfShape") return InferConstantOfShape(c);
  if (op == "Range") return InferRange(c);
  if (op == "Expand") return InferExpand(c);
  if (op == "Tile") return InferTile(c);
  if (op == "Resize" || op == "Upsample") return InferResize(c);
  if (op == "Pad") return InferPad(c);
  if (op == "LayerNormalization") return InferNormalization(c, true);
  if (op == "BatchNormalization") return InferNormalization(c, false);
  if (op == "SoftmaxCrossEntropyLoss" || op == "NegativeLogLikelihoodLoss") return InferLoss(c);
  return {};
}

// ---- the resolver --------------------------------------------------------

class Resolver {
 public:
  Resolver(onnx::ModelProto& model, const ShapeBindings& bindings, const std::string& source)
      : model_(model), bindings_(bindings), source_(source) {}

  ShapeTable Run() {
    BindInputs();
    RunOnnxInference();
    Seed();
    int opset = 0;
    for (const auto& import : model_.opset_import()) {
      if (import.domain().empty() || import.domain() == "ai.onnx") opset = import.version();
    }
    for (const NodeProto& node : model_.graph().node()) Visit(node, opset);
    ReportUnresolved();
    return std::move(table_);
  }

 private:
  TensorShape& Slot(const std::string& name) {
    auto [it, inserted] = table_.index.emplace(name, table_.shapes.size());
    if (inserted) table_.shapes.emplace_back();
    return table_.shapes[it->second];
  }

  // Writes the bindings into the graph inputs' declared shapes.
  void BindInputs() {
    std::set<std::string> symbols, names;
    std::vector<std::string> problems;
    auto* graph = model_.mutable_graph();
    for (auto& input : *graph->mutable_input()) {
      names.insert(input.name());
      bool had_shape = input.type().tensor_type().has_shape();
      auto it = bindings_.input_shapes.find(input.name());
      if (!had_shape && it == bindings_.input_shapes.end()) continue;
      auto* shape = input.mutable_type()->mutable_tensor_type()->mutable_shape();
      if (it != bindings_.input_shapes.end()) {
        const Dims& want = it->second;
        if (had_shape && shape->dim_size() != static_cast<int>(want.size())) {
          problems.push_back("input shape for " + Quote(input.name()) + ": rank " +
                             std::to_string(want.size()) + " but the model declares rank " +
                             std::to_string(shape->dim_size()));
          continue;
        }
        for (size_t i = 0; i < want.size(); ++i) {
          if (had_shape && shape->dim(i).has_dim_value() && shape->dim(i).dim_value() != want[i]) {
            problems.push_back("input shape for " + Quote(input.name()) + ": dim " + std::to_string(i) +
                               " is " + std::to_string(want[i]) + " but the model fixes it at " +
                               std::to_string(shape->dim(i).dim_value()));
          }
          if (had_shape && shape->dim(i).has_dim_param()) symbols.insert(shape->dim(i).dim_param());
        }
        shape->clear_dim();
        for (int64_t d : want) shape->add_dim()->set_dim_value(d);
      }
      for (auto& dim : *shape->mutable_dim()) {
        if (!dim.has_dim_param()) continue;
        symbols.insert(dim.dim_param());
        auto bound = bindings_.dims.find(dim.dim_param());
        if (bound != bindings_.dims.end()) dim.set_dim_value(bound->second);
      }
    }
    for (const auto& [name, value] : bindings_.input_shapes) {
      if (!names.count(name)) problems.push_back("an input shape is given for " + Quote(name) + ", which is no graph input");
    }
    for (const auto& [name, value] : bindings_.dims) {
      if (symbols.count(name)) continue;
      std::string known;
      for (const std::string& s : symbols) known += (known.empty() ? "" : ", ") + s;
      problems.push_back("dim binding " + Quote(name) + ": no graph input has a symbolic dim named " +
                         Quote(name) + " (symbolic dims: " + (known.empty() ? "none" : known) + ")");
    }
    if (problems.empty()) return;
    std::string text;
    for (const std::string& p : problems) text += (text.empty() ? "" : "\n") + source_ + ": " + p;
    throw InputError(text, kExitUsage);
  }

  void RunOnnxInference() {
    // Symbolic dims bound by --dim also appear in value_info/outputs written
    // by the exporter: substitute them so inference does not see conflicts.
    auto substitute = [&](onnx::ValueInfoProto& info) {
      // mutable_shape() on a tensor without one would declare a scalar.
      if (!info.type().tensor_type().has_shape()) return;
      auto* shape = info.mutable_type()->mutable_tensor_type()->mutable_shape();
      for (auto& dim : *shape->mutable_dim()) {
        auto bound = dim.has_dim_param() ? bindings_.dims.find(dim.dim_param()) : bindings_.dims.end();
        if (bound != bindings_.dims.end()) dim.set_dim_value(bound->second);
      }
    };
    for (auto& info : *model_.mutable_graph()->mutable_value_info()) substitute(info);
    for (auto& info : *model_.mutable_graph()->mutable_output()) substitute(info);
    // libonnx's InferShapes dereferences null on a default-domain op it has
    // no schema for (found by onnx_fuzzer: "Gather" renamed "Xather"): leave
    // such models to our own pass below.
    int opset = 0;
    for (const auto& import : model_.opset_import()) {
      if (import.domain().empty() || import.domain() == "ai.onnx") opset = import.version();
    }
    for (const NodeProto& node : model_.graph().node()) {
      bool onnx_domain = node.domain().empty() || node.domain() == "ai.onnx";
      if (onnx_domain && onnx::OpSchemaRegistry::Schema(node.op_type(), opset, "") == nullptr) {
        spdlog::debug("{}: skipping ONNX shape inference: unknown op '{}'", source_,
                      node.op_type());
        return;
      }
    }
    std::map<std::string, int> opsets;
    for (const auto& import : model_.opset_import()) {
      opsets[import.domain() == "ai.onnx" ? "" : import.domain()] = import.version();
    }
    DeclarePropagatorInputs(*model_.mutable_graph(), opsets, /*top=*/true);
    onnx::ShapeInferenceOptions options(/*check_type=*/false, /*error_mode=*/0,
                                        /*data_prop=*/true);
    try {
      onnx::shape_inference::InferShapes(model_, onnx::OpSchemaRegistry::Instance(), options);
    } catch (const std::exception& e) {
      // Our own pass below still runs; ONNX's partial results are kept.
      spdlog::debug("{}: ONNX shape inference stopped early: {}", source_, e.what());
    }
  }

  // libonnx 1.12 runs a node's data-propagation function (Shape's, ...)
  // after its type inference, and that function reads its input's type with
  // no null check: an input whose producer failed inference (error_mode 0
  // records the error and leaves the output untyped), or an untyped graph
  // input, made InferShapes dereference null (found by onnx_fuzzer: a Reshape
  // to a size other than its input's made a later Add fail to broadcast, and
  // the Shape of that Add's consumer crashed). Which producers fail is only
  // known while inference runs, so no pre-check can reject exactly these
  // models; instead every input of a data-propagating node gets a value_info
  // with an empty type before inference. That is the entry libonnx itself
  // adds for a newly inferred tensor, only made earlier: an inferred type
  // merges into it unchanged, and a failed one leaves an empty type the
  // propagators treat as "no shape" (Seed skips it). `top` is the model's
  // graph; a subgraph declares only its own tensors, never names from an
  // outer scope (that would hide their types).
  static void DeclarePropagatorInputs(onnx::GraphProto& graph,
                                      const std::map<std::string, int>& opsets, bool top) {
    std::set<std::string> typed, local;
    for (const auto& info : graph.value_info()) {
      if (info.has_type()) typed.insert(info.name());
    }
    for (const auto& info : graph.output()) {
      if (info.has_type()) typed.insert(info.name());
    }
    for (const auto& info : graph.input()) {
      if (info.has_type()) typed.insert(info.name());
      else local.insert(info.name());
    }
    for (const TensorProto& init : graph.initializer()) typed.insert(init.name());
    for (const NodeProto& node : graph.node()) {
      local.insert(node.output().begin(), node.output().end());
    }
    std::set<std::string> wanted;
    for (NodeProto& node : *graph.mutable_node()) {
      for (auto& attr : *node.mutable_attribute()) {
        if (attr.has_g()) DeclarePropagatorInputs(*attr.mutable_g(), opsets, false);
        for (auto& sub : *attr.mutable_graphs()) DeclarePropagatorInputs(sub, opsets, false);
      }
      const std::string domain = node.domain() == "ai.onnx" ? std::string() : node.domain();
      auto opset = opsets.find(domain);
      if (opset == opsets.end()) continue;
      const auto* schema = onnx::OpSchemaRegistry::Schema(node.op_type(), opset->second, domain);
      if (schema == nullptr || !schema->has_data_propagation_function()) continue;
      for (const std::string& in : node.input()) {
        if (!in.empty() && !typed.count(in) && (top || local.count(in))) wanted.insert(in);
      }
    }
    for (const std::string& name : wanted) {  // std::set: a deterministic order
      auto* info = graph.add_value_info();
      info->set_name(name);
      info->mutable_type();
    }
  }

  void SeedFrom(const onnx::ValueInfoProto& info) {
    if (!info.type().has_tensor_type()) return;
    const auto& tensor_type = info.type().tensor_type();
    TensorShape& slot = Slot(info.name());
    if (tensor_type.elem_type() != 0) slot.elem_type = tensor_type.elem_type();
    if (!tensor_type.has_shape() || slot.Known()) return;
    slot.has_rank = true;
    slot.dims.clear();
    for (const auto& dim : tensor_type.shape().dim()) {
      slot.dims.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
    }
  }

  void Seed() {
    const auto& graph = model_.graph();
    for (const TensorProto& init : graph.initializer()) {
      TensorShape& slot = Slot(init.name());
      slot.elem_type = init.data_type();
      slot.has_rank = true;
      slot.dims.assign(init.dims().begin(), init.dims().end());
      // Only non-floating initializers are folded: floating ones are weights.
      if (!IsFloatingType(init.data_type())) slot.has_value = ReadTensorValues(init, &slot.value);
    }
    for (const auto& info : graph.input()) SeedFrom(info);
    for (const auto& info : graph.value_info()) SeedFrom(info);
    for (const auto& info : graph.output()) SeedFrom(info);
  }

  void Visit(const NodeProto& node, int opset) {
    Inputs inputs;
    for (const std::string& name : node.input()) {
      if (name.empty()) {
        inputs.push_back(nullptr);
        continue;
      }
      auto it = table_.index.find(name);
      inputs.push_back(it == table_.index.end() ? nullptr : &table_.shapes[it->second]);
    }
    Outputs outs = Infer(Context{node, inputs, opset});
    // Slot() may grow the vector: take no references across it.
    for (int i = 0; i < node.output_size(); ++i) {
      if (node.output(i).empty()) continue;
      TensorShape& slot = Slot(node.output(i));
      if (static_cast<size_t>(i) >= outs.size() || !outs[i].has_rank) continue;
      const TensorShape& mine = outs[i];
      if (slot.elem_type == 0) slot.elem_type = mine.elem_type;
      if (!slot.Known() && (mine.Known() || !slot.has_rank)) {
        slot.has_rank = true;
        slot.dims = mine.dims;
      } else if (slot.has_rank && slot.dims.size() == mine.dims.size()) {
        for (size_t d = 0; d < slot.dims.size(); ++d) {
          if (slot.dims[d] < 0) slot.dims[d] = mine.dims[d];
        }
      }
      if (mine.has_value && mine.Known() && mine.dims == slot.dims) {
        slot.has_value = true;
        slot.value = mine.value;
      }
    }
    for (const std::string& out : node.output()) InferGradientLike(out);
  }

  // Training graphs (ONNX Runtime) name gradients "<tensor>_grad" and make
  // them with ops that have no ONNX schema (com.microsoft ReluGrad, ...): a
  // gradient has its tensor's shape and type.
  void InferGradientLike(const std::string& name) {
    const std::string kSuffix = "_grad";
    if (name.size() <= kSuffix.size() ||
        name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
      return;
    }
    auto base = table_.index.find(name.substr(0, name.size() - kSuffix.size()));
    if (base == table_.index.end()) return;
    TensorShape& slot = Slot(name);
    const TensorShape& of = table_.shapes[base->second];
    if (slot.Known() || !of.Known()) return;
    slot.has_rank = true;
    slot.dims = of.dims;
    if (slot.elem_type == 0) slot.elem_type = of.elem_type;
  }

  // One error listing every unresolved tensor, after the root causes.
  void ReportUnresolved() {
    std::vector<std::string> lines;
    std::set<std::string> initializers, unbound, unshaped;
    for (const auto& init : model_.graph().initializer()) initializers.insert(init.name());
    for (const auto& input : model_.graph().input()) {
      if (initializers.count(input.name())) continue;
      if (!input.type().tensor_type().has_shape()) {
        lines.push_back("graph input " + Quote(input.name()) + " declares no shape");
        unshaped.insert(input.name());
        continue;
      }
      const auto& shape = input.type().tensor_type().shape();
      for (int i = 0; i < shape.dim_size(); ++i) {
        const auto& dim = shape.dim(i);
        if (dim.has_dim_value()) continue;
        lines.push_back("graph input " + Quote(input.name()) + " dim " + std::to_string(i) +
                        (dim.has_dim_param() ? " is symbolic " + Quote(dim.dim_param()) +
                                                   ", which is unbound"
                                             : " has no size or name"));
        if (dim.has_dim_param()) {
          unbound.insert(dim.dim_param());
        } else {
          unshaped.insert(input.name());
        }
      }
    }
    size_t causes = lines.size();
    for (const NodeProto& node : model_.graph().node()) {
      for (int i = 0; i < node.output_size(); ++i) {
        if (node.output(i).empty()) continue;
        const TensorShape& shape = table_.shapes[table_.index.at(node.output(i))];
        if (shape.Known() && OnnxElementBytes(shape.elem_type) > 0) continue;
        std::string what = shape.Known() ? "element type " + std::to_string(shape.elem_type) +
                                               " has no byte size"
                                         : "shape " + DimsText(shape);
        const std::string& domain = node.domain() == "ai.onnx" ? std::string() : node.domain();
        if (!onnx::OpSchemaRegistry::Schema(node.op_type(), domain)) {
          what += " (op " + (domain.empty() ? "" : domain + ".") + node.op_type() +
                  " is unknown to ONNX: declare this output's shape in the model's value_info)";
        }
        lines.push_back("tensor " + Quote(node.output(i)) + " (output " + std::to_string(i) +
                        " of node " + Quote(node.name()) + ", op " + node.op_type() +
                        "): " + what);
      }
    }
    if (lines.size() == causes) return;
    std::string text = source_ + ": " + std::to_string(lines.size() - causes) +
                       " tensors have no concrete shape";
    text += causes > 0 ? "; the graph inputs above need sizes"
                       : "; ops ckptplan cannot infer need shapes in the model's value_info";
    for (const std::string& line : lines) text += "\n" + source_ + ": " + line;
    throw UnresolvedShapesError(text, {unbound.begin(), unbound.end()},
                                {unshaped.begin(), unshaped.end()});
  }

  onnx::ModelProto& model_;
  const ShapeBindings& bindings_;
  const std::string& source_;
  ShapeTable table_;
};

}  // namespace

bool TensorShape::Known() const {
  if (!has_rank) return false;
  for (int64_t d : dims) {
    if (d < 0) return false;
  }
  return true;
}

int64_t TensorShape::Elements() const {
  if (!Known()) return -1;
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d != 0 && n > INT64_MAX / d) return -1;
    n *= d;
  }
  return n;
}

const TensorShape* ShapeTable::Find(const std::string& name) const {
  auto it = index.find(name);
  return it == index.end() ? nullptr : &shapes[it->second];
}

ShapeTable ResolveShapes(onnx::ModelProto& model, const ShapeBindings& bindings,
                         const std::string& source) {
  return Resolver(model, bindings, source).Run();
}

std::string_view OnnxDtypeName(int32_t elem_type) {
  switch (elem_type) {
    case TensorProto::FLOAT: return "float32";
    case TensorProto::DOUBLE: return "float64";
    case TensorProto::FLOAT16: return "float16";
    case TensorProto::BFLOAT16: return "bfloat16";
    case TensorProto::INT64: return "int64";
    case TensorProto::UINT64: return "uint64";
    case TensorProto::INT32: return "int32";
    case TensorProto::UINT32: return "uint32";
    case TensorProto::INT16: return "int16";
    case TensorProto::UINT16: return "uint16";
    case TensorProto::INT8: return "int8";
    case TensorProto::UINT8: return "uint8";
    case TensorProto::BOOL: return "bool";
    case TensorProto::COMPLEX64: return "complex64";
    case TensorProto::COMPLEX128: return "complex128";
    default: return "";
  }
}

uint32_t OnnxElementBytes(int32_t elem_type) { return DtypeBytes(OnnxDtypeName(elem_type)); }

bool IsFloatingType(int32_t elem_type) {
  return elem_type == TensorProto::FLOAT || elem_type == TensorProto::DOUBLE ||
         elem_type == TensorProto::FLOAT16 || elem_type == TensorProto::BFLOAT16;
}

}  // namespace ckptplan

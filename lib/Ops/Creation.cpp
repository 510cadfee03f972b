// Ops that create tensors: named constants, fills, iota and range.
#include "Families.h"
#include "OpHelpers.h"
#include "maxc/IR/Graph.h"
#include "maxc/Ops/Ops.h"
#include "maxc/Realization/RealizationContext.h"

#include <cmath>

namespace maxc {
using namespace ophelpers;

namespace {

OpDef constant_op() {
  OpDef def;
  def.name = "constant";
  def.traits = OpTrait::structural;
  def.summary = "reads a named constant of the graph (weights)";
  def.min_operands = def.max_operands = 0;
  def.attrs = {{"name", AttrKind::string, std::nullopt, "name in the graph's constant table"}};
  def.infer = [](const InferContext &c) {
    if (!c.graph)
      fail_attr("constant", "needs a graph to resolve its name");
    const std::string &name = c.attrs.get_string("name");
    if (!c.graph->has_constant(name))
      throw Error(ErrorCode::InvalidGraph, "constant: the graph has no constant named '" + name + "'");
    const HostTensor &data = c.graph->constant_types().at(name);
    return std::vector<TensorType>{TensorType(data.dtype(), make_shape(data.shape()))};
  };
  def.reference = [](const ReferenceContext &c) {
    return std::vector<HostTensor>{c.graph.constant(c.attrs.get_string("name"))};
  };
  return def;
}

OpDef full_op() {
  OpDef def;
  def.name = "full";
  def.traits = OpTrait::generator;
  def.summary = "a tensor filled with one value";
  def.min_operands = def.max_operands = 0;
  def.attrs = {{"value", AttrKind::real, std::nullopt, "fill value"},
               {"dtype", AttrKind::dtype, std::nullopt, "element type"},
               {"shape", AttrKind::shape, AttrValue(Shape{}), "result shape (may be symbolic)"}};
  def.infer = [](const InferContext &c) {
    return std::vector<TensorType>{TensorType(c.attrs.get_dtype("dtype"), c.attrs.get_shape("shape"))};
  };
  def.reference = [](const ReferenceContext &c) {
    HostTensor out = c.make_result();
    double v = c.attrs.get_real("value");
    for (int64_t i = 0; i < out.numel(); ++i)
      out.set_f64(i, v);
    return std::vector<HostTensor>{out};
  };
  return def;
}

OpDef iota_op() {
  OpDef def;
  def.name = "iota";
  def.traits = OpTrait::generator;
  def.summary = "0, 1, 2, ... along one axis of a shape";
  def.min_operands = def.max_operands = 0;
  def.attrs = {{"shape", AttrKind::shape, std::nullopt, "result shape"},
               {"axis", AttrKind::integer, AttrValue(int64_t{0}), "counting axis"},
               {"dtype", AttrKind::dtype, AttrValue(DType::i64), "element type"}};
  def.infer = [](const InferContext &c) {
    const Shape &shape = c.attrs.get_shape("shape");
    normalize_axis("iota", c.attrs.get_int("axis"), static_cast<int64_t>(shape.size()));
    if (is_bool(c.attrs.get_dtype("dtype")))
      fail_dtype("iota", "dtype must be numeric");
    return std::vector<TensorType>{TensorType(c.attrs.get_dtype("dtype"), shape)};
  };
  def.reference = [](const ReferenceContext &c) {
    HostTensor out = c.make_result();
    int64_t axis = normalize_axis("iota", c.attrs.get_int("axis"), out.rank());
    for (int64_t i = 0; i < out.numel(); ++i)
      out.set_i64(i, unravel(i, out.shape())[axis]);
    return std::vector<HostTensor>{out};
  };
  return def;
}

int64_t range_length(double start, double stop, double step) {
  if (step == 0 || !std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step))
    fail_attr("range", "start, stop and step must be finite and step non-zero");
  double n = std::ceil((stop - start) / step);
  if (n > 1e12)
    throw Error(ErrorCode::DimOverflow, "range: too many elements");
  return n > 0 ? static_cast<int64_t>(n) : 0;
}

OpDef range_op() {
  OpDef def;
  def.name = "range";
  def.traits = OpTrait::generator;
  def.summary = "start, start+step, ... below stop (1-D)";
  def.min_operands = def.max_operands = 0;
  def.attrs = {{"start", AttrKind::real, AttrValue(0.0), ""},
               {"stop", AttrKind::real, std::nullopt, ""},
               {"step", AttrKind::real, AttrValue(1.0), ""},
               {"dtype", AttrKind::dtype, AttrValue(DType::i64), ""}};
  def.infer = [](const InferContext &c) {
    int64_t n = range_length(c.attrs.get_real("start"), c.attrs.get_real("stop"), c.attrs.get_real("step"));
    if (is_bool(c.attrs.get_dtype("dtype")))
      fail_dtype("range", "dtype must be numeric");
    return std::vector<TensorType>{TensorType(c.attrs.get_dtype("dtype"), {Dim(n)})};
  };
  def.reference = [](const ReferenceContext &c) {
    HostTensor out = c.make_result();
    double start = c.attrs.get_real("start"), step = c.attrs.get_real("step");
    for (int64_t i = 0; i < out.numel(); ++i)
      out.set_f64(i, start + static_cast<double>(i) * step);
    return std::vector<HostTensor>{out};
  };
  return def;
}

// The run-time values of symbolic dims as an integer tensor: dims as values
// (ONNX Shape/Size arithmetic that reaches a run-time tensor).
OpDef dim_values_op() {
  OpDef def;
  def.name = "dim_values";
  def.traits = OpTrait::generator;
  def.summary = "the values of dims (symbolic ones at run time) as an integer tensor: [len(dims)], or a scalar";
  def.min_operands = def.max_operands = 0;
  def.attrs = {{"dims", AttrKind::shape, std::nullopt, "the dims whose values the elements are"},
               {"dtype", AttrKind::dtype, AttrValue(DType::i64), "integer element type"},
               {"scalar", AttrKind::boolean, AttrValue(false), "rank 0 (dims holds one dim)"}};
  def.infer = [](const InferContext &c) {
    const Shape &dims = c.attrs.get_shape("dims");
    DType dtype = c.attrs.get_dtype("dtype");
    if (!is_integer(dtype))
      fail_dtype("dim_values", "dtype must be an integer type, got " + std::string(dtype_name(dtype)));
    bool scalar = c.attrs.get_bool("scalar");
    if (scalar && dims.size() != 1)
      fail_attr("dim_values", "a scalar holds one dim, got " + std::to_string(dims.size()));
    return std::vector<TensorType>{
        TensorType(dtype, scalar ? Shape{} : Shape{Dim(static_cast<int64_t>(dims.size()))})};
  };
  def.reference = [](const ReferenceContext &c) {
    HostTensor out = c.make_result();
    const Shape &dims = c.attrs.get_shape("dims");
    for (int64_t i = 0; i < out.numel(); ++i)
      out.set_i64(i, dims[static_cast<size_t>(i)].evaluate(c.dims));
    return std::vector<HostTensor>{out};
  };
  return def;
}

} // namespace

void register_creation_ops(OpRegistry &r) {
  r.add(constant_op());
  r.add(full_op());
  r.add(iota_op());
  r.add(range_op());
  r.add(dim_values_op());
}

namespace ops {

Tensor full(double value, DType dtype, const Shape &shape) {
  return record_op("full", {}, {{"value", value}, {"dtype", dtype}, {"shape", shape}});
}
Tensor scalar(double value, DType dtype) { return full(value, dtype, {}); }
Tensor iota(const Shape &shape, int64_t axis, DType dtype) {
  return record_op("iota", {}, {{"shape", shape}, {"axis", axis}, {"dtype", dtype}});
}
Tensor dim_values(const Shape &dims, DType dtype, bool scalar) {
  return record_op("dim_values", {}, {{"dims", dims}, {"dtype", dtype}, {"scalar", scalar}});
}
Tensor range(double start, double stop, double step, DType dtype) {
  return record_op("range", {}, {{"start", start}, {"stop", stop}, {"step", step}, {"dtype", dtype}});
}

} // namespace ops
} // namespace maxc

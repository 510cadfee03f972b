// ONNX ops → maxc ops. Each ONNX op is mapped in one place (map_node); ops
// the core lacks are decomposed where a composition of core ops is exact.
#include "OnnxOps.h"
#include "OnnxTensor.h"

#include "maxc/Ops/Ops.h"
#include "maxc/Ops/TopK.h"
#include "maxc/Support/Error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace maxc::onnx_import {

// ---- node access ----

const Val &OnnxNode::val(size_t i) const {
  if (!has(i))
    throw Error(ErrorCode::OnnxGraph, "required input " + std::to_string(i) + " is missing");
  return *inputs_[i];
}

Tensor OnnxNode::in(size_t i) const { return host_.tensor_of(val(i), *this, i); }

HostTensor OnnxNode::known(size_t i) const {
  const Val &v = val(i);
  if (v.kind == Val::Kind::known)
    return v.data;
  if (v.kind == Val::Kind::sym) {
    std::vector<int64_t> values;
    for (const Dim &d : v.dims) {
      if (!d.is_static())
        throw Error(ErrorCode::OnnxNotFoldable, "input " + std::to_string(i) + " holds the symbolic values " +
                                                    shape_to_string(v.dims) + ", but this node needs numbers");
      values.push_back(d.value());
    }
    return HostTensor::from_i64(v.dtype, v.scalar ? std::vector<int64_t>{} : std::vector<int64_t>{int64_t(values.size())},
                                values);
  }
  host_.needs_value(v, *this, i);
  // needs_value throws; a call through a virtual does not carry [[noreturn]].
  throw Error(ErrorCode::Internal, "needs_value returned");
}

std::vector<int64_t> OnnxNode::ints(size_t i) const {
  HostTensor t = known(i);
  if (!is_integer(t.dtype()))
    throw Error(ErrorCode::OnnxAttribute, "input " + std::to_string(i) + " must hold integers");
  return t.to_i64();
}

std::vector<double> OnnxNode::reals(size_t i) const { return known(i).to_f64(); }

std::vector<Dim> OnnxNode::dims(size_t i) const {
  const Val &v = val(i);
  if (v.kind == Val::Kind::sym)
    return v.dims;
  std::vector<Dim> out;
  for (int64_t x : ints(i))
    out.emplace_back(x);
  return out;
}

std::optional<HostTensor> OnnxNode::value_hint(size_t i) const {
  const Val &v = val(i);
  if (v.kind == Val::Kind::known)
    return v.data;
  return host_.run_value(v);
}

Tensor OnnxNode::element(size_t i, int64_t k) const {
  Tensor t = in(i);
  if (!is_integer(t.dtype()) || t.rank() > 1)
    throw Error(ErrorCode::OnnxAttribute, "input " + std::to_string(i) + " must be an integer scalar or vector");
  if (t.dtype() != DType::i64)
    t = ops::cast(t, DType::i64);
  return t.rank() == 0 ? t : ops::reshape(ops::slice(t, {k}, {k + 1}, {0}, {1}), Shape{});
}

std::vector<Dim> OnnxNode::runtime_dims(size_t i, const std::function<std::optional<int64_t>(size_t)> &bound) const {
  if (!is_runtime(i))
    return dims(i);
  Tensor t = in(i);
  if (t.rank() > 1 || (t.rank() == 1 && !t.shape()[0].is_static()))
    throw Error(ErrorCode::OnnxAttribute, "input " + std::to_string(i) + " ('" + input_name(i) +
                                              "') must be a vector of static length, got " + t.type().to_string());
  int64_t n = t.rank() == 0 ? 1 : t.shape()[0].value();
  std::vector<Dim> out;
  for (int64_t k = 0; k < n; ++k)
    out.push_back(bind(i, element(i, k), t.rank() == 0 ? "n" : "d" + std::to_string(k),
                       bound ? bound(static_cast<size_t>(k)) : std::nullopt, k));
  return out;
}

const onnx::AttributeProto *OnnxNode::attr(const std::string &name) const {
  for (const auto &a : proto_.attribute())
    if (a.name() == name) {
      if (!a.ref_attr_name().empty())
        throw Error(ErrorCode::OnnxAttribute, "attribute '" + name + "' refers to a function attribute");
      return &a;
    }
  return nullptr;
}

int64_t OnnxNode::attr_int(const std::string &name, int64_t fallback) const {
  const auto *a = attr(name);
  return a ? a->i() : fallback;
}
double OnnxNode::attr_float(const std::string &name, double fallback) const {
  const auto *a = attr(name);
  return a ? a->f() : fallback;
}
std::string OnnxNode::attr_string(const std::string &name, const std::string &fallback) const {
  const auto *a = attr(name);
  return a ? a->s() : fallback;
}
std::vector<int64_t> OnnxNode::attr_ints(const std::string &name, std::vector<int64_t> fallback) const {
  const auto *a = attr(name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : fallback;
}
std::vector<double> OnnxNode::attr_floats(const std::string &name) const {
  const auto *a = attr(name);
  return a ? std::vector<double>(a->floats().begin(), a->floats().end()) : std::vector<double>{};
}

namespace {

[[noreturn]] void unsupported(const std::string &what) { throw Error(ErrorCode::OnnxAttribute, what); }

void require(bool ok, const std::string &what) {
  if (!ok)
    throw Error(ErrorCode::OnnxAttribute, what);
}

int64_t norm_axis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    throw Error(ErrorCode::OnnxAttribute,
                "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

} // namespace

Tensor sc(double v, DType dtype) { return ops::scalar(v, dtype); }
Tensor dim_scalar(const Dim &d) {
  return d.is_static() ? sc(double(d.value()), DType::i64) : ops::dim_values({d}, DType::i64, true);
}

int64_t static_dim(const Dim &d, const std::string &what) {
  if (!d.is_static())
    unsupported(what + " must be static, got " + d.to_string() + " (pin it with --dim NAME=N)");
  return d.value();
}

namespace {

/// Makes a sym value; a known one when every element is static.
Val make_sym(std::vector<Dim> dims, bool scalar, DType dtype) {
  Val v;
  bool all_static = std::all_of(dims.begin(), dims.end(), [](const Dim &d) { return d.is_static(); });
  if (all_static) {
    std::vector<int64_t> values;
    for (const Dim &d : dims)
      values.push_back(d.value());
    v.kind = Val::Kind::known;
    v.data = HostTensor::from_i64(dtype, scalar ? std::vector<int64_t>{} : std::vector<int64_t>{int64_t(values.size())},
                                  values);
    return v;
  }
  v.kind = Val::Kind::sym;
  v.dims = std::move(dims);
  v.scalar = scalar;
  v.dtype = dtype;
  return v;
}

/// The integer elements of a known (rank ≤ 1) or sym value.
bool as_dims(const Val &v, std::vector<Dim> &out, bool &scalar) {
  if (v.kind == Val::Kind::sym) {
    out = v.dims;
    scalar = v.scalar;
    return true;
  }
  if (v.kind == Val::Kind::known && is_integer(v.data.dtype()) && v.data.rank() <= 1) {
    out.clear();
    for (int64_t x : v.data.to_i64())
      out.emplace_back(x);
    scalar = v.data.rank() == 0;
    return true;
  }
  return false;
}

Shape shape_of(const Val &v) {
  switch (v.kind) {
  case Val::Kind::traced: return v.tensor.shape();
  case Val::Kind::known: return make_shape(v.data.shape());
  case Val::Kind::sym: return v.scalar ? Shape{} : Shape{Dim(int64_t(v.dims.size()))};
  default: return {};
  }
}

Val known_val(HostTensor data) {
  Val v;
  v.kind = Val::Kind::known;
  v.data = std::move(data);
  return v;
}

HostTensor tensor_attr(const OnnxNode &node, const onnx::AttributeProto &a) {
  return tensor_from_proto(a.t(), ".", nullptr);
}

// ---- ops on shapes ----

const std::set<std::string> kSupported = {
    "Abs", "Add", "And", "ArgMax", "ArgMin", "AveragePool", "BatchNormalization", "Cast", "CastLike", "Ceil",
    "Celu", "Clip", "Concat", "Constant", "ConstantOfShape", "Conv", "ConvTranspose", "Cos", "Cosh", "CumSum",
    "DepthToSpace", "Div", "Dropout", "Einsum", "Elu", "Equal", "Erf", "Exp", "Expand", "EyeLike", "Flatten", "Floor", "Gather",
    "GatherElements", "Gemm", "GlobalAveragePool", "GlobalMaxPool", "Greater", "GreaterOrEqual", "HardSigmoid",
    "GRU", "LSTM", "RNN", // OnnxRecurrent.cpp
    "ConvInteger", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "QLinearConv", "QLinearMatMul",
    "QuantizeLinear", // OnnxQuantized.cpp
    "Loop", "Scan",       // OnnxLoop.cpp (the importer runs their bodies)
    "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "BlackmanWindow", "GatherND", "HammingWindow", "HannWindow",
    "LRN", "OneHot", "ReverseSequence", "BitShift", "Compress", "DFT", "Det", "Upsample",
    "MaxUnpool", "Scatter", "ScatterElements", "ScatterND", "GridSample", "STFT",
    "MelWeightMatrix", "RoiAlign", // OnnxComposite.cpp
    "HardSwish", "Hardmax", "Identity", "If", "InstanceNormalization", "IsInf", "IsNaN", "LayerNormalization", "LeakyRelu",
    "Less", "LessOrEqual", "Log", "LogSoftmax", "MatMul", "Max", "MaxPool", "Mean", "MeanVarianceNormalization", "Min",
    "Mod", "Mul", "Neg", "NonZero", "Not", "Or", "PRelu", "Pad", "Pow", "Range", "Reciprocal", "ReduceL1", "ReduceL2",
    "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum",
    "ReduceSumSquare", "Relu", "Reshape", "Resize", "Round", "Selu", "Shape", "Shrink", "Sigmoid", "Sign", "Sin",
    "Sinh", "Size", "Slice", "Softmax", "Softplus", "Softsign", "SpaceToDepth", "Split", "Sqrt", "Squeeze", "Sub",
    "Sum", "Tan", "Tanh", "ThresholdedRelu", "Tile", "TopK", "Transpose", "Trilu", "Unsqueeze", "Where", "Xor",
    "CenterCropPad", "Gelu", "GroupNormalization", "Mish"}; // opsets 18-20

} // namespace

bool is_supported_op(const std::string &op) { return kSupported.count(op) != 0; }
bool is_deterministic(const std::string &op) { return op != "Dropout"; }
std::vector<std::string> supported_ops() { return {kSupported.begin(), kSupported.end()}; }

std::optional<std::vector<Val>> fold_shape_op(const OnnxNode &node) {
  const std::string &op = node.op();
  if (op == "Constant") {
    for (const auto &a : node.proto().attribute()) {
      if (a.name() == "value")
        return std::vector<Val>{known_val(tensor_attr(node, a))};
      if (a.name() == "value_float")
        return std::vector<Val>{known_val(HostTensor::scalar(DType::f32, a.f()))};
      if (a.name() == "value_int")
        return std::vector<Val>{known_val(HostTensor::from_i64(DType::i64, {}, {a.i()}))};
      if (a.name() == "value_floats") {
        std::vector<double> v(a.floats().begin(), a.floats().end());
        return std::vector<Val>{known_val(HostTensor::from_f64(DType::f32, {int64_t(v.size())}, v))};
      }
      if (a.name() == "value_ints") {
        std::vector<int64_t> v(a.ints().begin(), a.ints().end());
        return std::vector<Val>{known_val(HostTensor::from_i64(DType::i64, {int64_t(v.size())}, v))};
      }
      throw Error(ErrorCode::OnnxUnsupportedType, "Constant attribute '" + a.name() + "' is not supported");
    }
    throw Error(ErrorCode::OnnxAttribute, "Constant has no value");
  }
  if (op == "Shape" || op == "Size") {
    Shape shape = shape_of(node.val(0));
    if (op == "Size")
      return std::vector<Val>{make_sym({shape_numel(shape)}, true, DType::i64)};
    int64_t rank = static_cast<int64_t>(shape.size());
    int64_t start = node.attr_int("start", 0), end = node.attr_int("end", rank);
    start = std::clamp(start < 0 ? start + rank : start, int64_t(0), rank);
    end = std::clamp(end < 0 ? end + rank : end, int64_t(0), rank);
    std::vector<Dim> dims(shape.begin() + start, shape.begin() + std::max(start, end));
    return std::vector<Val>{make_sym(dims, false, DType::i64)};
  }
  return std::nullopt;
}

namespace {

/// Elementwise binary arithmetic on dims with NumPy broadcasting of rank ≤ 1.
std::optional<Val> sym_binary(const OnnxNode &node) {
  std::vector<Dim> a, b;
  bool as = false, bs = false;
  if (!as_dims(node.val(0), a, as) || !as_dims(node.val(1), b, bs))
    return std::nullopt;
  if (a.size() != b.size() && a.size() != 1 && b.size() != 1)
    return std::nullopt;
  size_t n = std::max(a.size(), b.size());
  if (a.empty() || b.empty())
    n = 0;
  const std::string &op = node.op();
  bool compare = op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" || op == "GreaterOrEqual";
  std::vector<Dim> out;
  std::vector<int64_t> flags;
  for (size_t i = 0; i < n; ++i) {
    const Dim &x = a[a.size() == 1 ? 0 : i], &y = b[b.size() == 1 ? 0 : i];
    if (compare) {
      Dim diff = x - y;
      std::optional<bool> r;
      if (diff.is_static()) {
        int64_t d = diff.value();
        r = op == "Equal" ? d == 0 : op == "Less" ? d < 0 : op == "Greater" ? d > 0 : op == "LessOrEqual" ? d <= 0 : d >= 0;
      } else if (op == "Equal" && ((x.is_static() && x.value() < 0) || (y.is_static() && y.value() < 0))) {
        r = false; // a dim is never negative
      }
      if (!r)
        return std::nullopt;
      flags.push_back(*r);
      continue;
    }
    if (op == "Add")
      out.push_back(x + y);
    else if (op == "Sub")
      out.push_back(x - y);
    else if (op == "Mul")
      out.push_back(x * y);
    else if (op == "Div") {
      if (x.is_static() && y.is_static()) {
        if (y.value() == 0)
          return std::nullopt;
        out.emplace_back(x.value() / y.value());
      } else if (auto q = x.exact_div(y)) {
        out.push_back(*q);
      } else {
        return std::nullopt;
      }
    } else if (op == "Max" || op == "Min") {
      Dim diff = x - y;
      if (x == y)
        out.push_back(x);
      else if (diff.is_static())
        out.push_back((diff.value() > 0) == (op == "Max") ? x : y);
      else
        return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  bool scalar = as && bs;
  auto dtype_of = [](const Val &v) { return v.kind == Val::Kind::sym ? v.dtype : v.data.dtype(); };
  if (op == "Div" && (is_float(dtype_of(node.val(0))) || is_float(dtype_of(node.val(1)))))
    return std::nullopt; // float division of dims is not integer division
  if (compare) {
    std::vector<int64_t> shape;
    if (!scalar)
      shape.push_back(static_cast<int64_t>(n));
    return known_val(HostTensor::from_i64(DType::boolean, shape, flags));
  }
  DType dtype = node.val(0).kind == Val::Kind::sym ? node.val(0).dtype : node.val(0).data.dtype();
  return make_sym(out, scalar, dtype);
}

} // namespace

std::optional<std::vector<Val>> fold_symbolic(const OnnxNode &node) {
  const std::string &op = node.op();
  const Val &x = node.val(0);
  std::vector<Dim> d;
  bool scalar = false;
  auto one = [](std::optional<Val> v) -> std::optional<std::vector<Val>> {
    if (!v)
      return std::nullopt;
    return std::vector<Val>{std::move(*v)};
  };
  if (op == "Identity")
    return std::vector<Val>{x};
  if (op == "Cast" || op == "CastLike") {
    std::optional<DType> to = op == "Cast" ? dtype_from_onnx(static_cast<int32_t>(node.attr_int("to", 0)))
                                           : std::optional<DType>(node.val(1).kind == Val::Kind::traced
                                                                      ? node.val(1).tensor.dtype()
                                                                      : node.val(1).kind == Val::Kind::known
                                                                            ? node.val(1).data.dtype()
                                                                            : node.val(1).dtype);
    // To a float type too (torch.arange(seq, dtype=float) is Range over Cast(seq)): the
    // elements stay whole numbers, which only Range and exact arithmetic consume.
    if (x.kind != Val::Kind::sym || !to || is_bool(*to))
      return std::nullopt;
    return std::vector<Val>{make_sym(x.dims, x.scalar, *to)};
  }
  if (x.kind != Val::Kind::sym) {
    // A sym value in another position.
    if (op == "Concat" || op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Equal" ||
        op == "Max" || op == "Min" || op == "Less" || op == "Greater" || op == "LessOrEqual" || op == "GreaterOrEqual")
      ; // handled below
    else if (op == "Where")
      ;
    else
      return std::nullopt;
  }
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Max" || op == "Min" || op == "Equal" ||
      op == "Less" || op == "Greater" || op == "LessOrEqual" || op == "GreaterOrEqual") {
    if (node.num_inputs() != 2)
      return std::nullopt;
    return one(sym_binary(node));
  }
  if (op == "Neg") {
    std::vector<Dim> out;
    for (const Dim &e : x.dims)
      out.push_back(Dim(0) - e);
    return std::vector<Val>{make_sym(out, x.scalar, x.dtype)};
  }
  if (op == "Gather") {
    if (x.scalar || node.attr_int("axis", 0) != 0)
      return std::nullopt;
    HostTensor idx = node.known(1);
    if (idx.rank() > 1)
      return std::nullopt;
    std::vector<Dim> out;
    int64_t n = static_cast<int64_t>(x.dims.size());
    for (int64_t i : idx.to_i64()) {
      if (i < -n || i >= n)
        throw Error(ErrorCode::OnnxAttribute, "Gather index " + std::to_string(i) + " is out of range");
      out.push_back(x.dims[i < 0 ? i + n : i]);
    }
    return std::vector<Val>{make_sym(out, idx.rank() == 0, x.dtype)};
  }
  if (op == "Unsqueeze" && x.scalar)
    return std::vector<Val>{make_sym(x.dims, false, x.dtype)};
  if (op == "Squeeze" && !x.scalar && x.dims.size() == 1)
    return std::vector<Val>{make_sym(x.dims, true, x.dtype)};
  if (op == "Reshape") {
    std::vector<int64_t> shape = node.ints(1);
    if (shape.size() > 1)
      return std::nullopt;
    return std::vector<Val>{make_sym(x.dims, shape.empty(), x.dtype)};
  }
  if (op == "Concat") {
    std::vector<Dim> out;
    DType dtype = DType::i64;
    for (size_t i = 0; i < node.num_inputs(); ++i) {
      if (!as_dims(node.val(i), d, scalar) || scalar)
        return std::nullopt;
      out.insert(out.end(), d.begin(), d.end());
    }
    if (x.kind == Val::Kind::sym)
      dtype = x.dtype;
    else if (x.kind == Val::Kind::known)
      dtype = x.data.dtype();
    return std::vector<Val>{make_sym(out, false, dtype)};
  }
  if (op == "Slice" && !x.scalar) {
    // Opset 10+: starts, ends, (axes,) steps as inputs; before: attributes.
    bool inputs = node.opset() >= 10;
    std::vector<int64_t> starts = inputs ? node.ints(1) : node.attr_ints("starts");
    std::vector<int64_t> ends = inputs ? node.ints(2) : node.attr_ints("ends");
    std::vector<int64_t> steps = inputs && node.has(4) ? node.ints(4) : std::vector<int64_t>{1};
    std::vector<int64_t> axes = inputs ? std::vector<int64_t>{0} : node.attr_ints("axes", {0}); // 1-D: axis 0
    if (axes.size() != 1 || (axes[0] != 0 && axes[0] != -1))
      return std::nullopt;
    if (starts.size() != 1 || ends.size() != 1 || steps.size() != 1 || steps[0] == 0)
      return std::nullopt;
    int64_t n = static_cast<int64_t>(x.dims.size()), s = starts[0], e = ends[0], st = steps[0];
    auto clampi = [&](int64_t v, int64_t lo, int64_t hi) {
      if (v < 0)
        v += n;
      return std::clamp(v, lo, hi);
    };
    std::vector<Dim> out;
    if (st > 0) {
      for (int64_t i = clampi(s, 0, n), end = clampi(e, 0, n); i < end; i += st)
        out.push_back(x.dims[i]);
    } else {
      for (int64_t i = clampi(s, -1, n - 1), end = clampi(e, -1, n - 1); i > end; i += st)
        out.push_back(x.dims[i]);
    }
    return std::vector<Val>{make_sym(out, false, x.dtype)};
  }
  if (op == "ReduceProd" || op == "ReduceSum") {
    if (x.scalar || (node.has(1) && op == "ReduceSum"))
      return std::nullopt;
    Dim acc(op == "ReduceProd" ? 1 : 0);
    for (const Dim &e : x.dims)
      acc = op == "ReduceProd" ? acc * e : acc + e;
    return std::vector<Val>{make_sym({acc}, node.attr_int("keepdims", 1) == 0, x.dtype)};
  }
  if (op == "Where") {
    HostTensor cond = node.known(0);
    std::vector<Dim> a, b;
    bool as = false, bs = false;
    if (cond.rank() > 1 || !as_dims(node.val(1), a, as) || !as_dims(node.val(2), b, bs))
      return std::nullopt;
    size_t n = std::max({size_t(cond.numel()), a.size(), b.size()});
    if (cond.numel() != 1 && size_t(cond.numel()) != n)
      return std::nullopt;
    std::vector<Dim> out;
    for (size_t i = 0; i < n; ++i) {
      bool c = cond.get_i64(cond.numel() == 1 ? 0 : int64_t(i)) != 0;
      const std::vector<Dim> &src = c ? a : b;
      if (src.size() != 1 && src.size() != n)
        return std::nullopt;
      out.push_back(src[src.size() == 1 ? 0 : i]);
    }
    DType dtype = node.val(1).kind == Val::Kind::sym ? node.val(1).dtype : DType::i64;
    return std::vector<Val>{make_sym(out, cond.rank() == 0 && as && bs, dtype)};
  }
  return std::nullopt;
}

// ---- the op mapping ----

Tensor unary_op(const std::string &op, const Tensor &x, const OnnxNode &node, const FloatAttr &attr) {
  DType t = x.dtype();
  if (op == "Abs") return ops::abs(x);
  if (op == "Neg") return ops::neg(x);
  if (op == "Exp") return ops::exp(x);
  if (op == "Log") return ops::log(x);
  if (op == "Sqrt") return ops::sqrt(x);
  if (op == "Tanh") return ops::tanh(x);
  if (op == "Sigmoid") return ops::sigmoid(x);
  if (op == "Relu") return ops::relu(x);
  if (op == "Erf") return ops::erf(x);
  if (op == "Sin") return ops::sin(x);
  if (op == "Cos") return ops::cos(x);
  if (op == "Tan") return ops::div(ops::sin(x), ops::cos(x));
  if (op == "Floor") return ops::floor(x);
  if (op == "Ceil") return ops::ceil(x);
  if (op == "Round") return ops::round(x);
  if (op == "Sign") return ops::sign(x);
  if (op == "Not") return ops::logical_not(x);
  if (op == "Reciprocal") return ops::div(sc(1, t), x);
  if (op == "Softsign") return ops::div(x, ops::add(sc(1, t), ops::abs(x)));
  if (op == "Softplus") {
    // log(1 + e^x), stable for large x: max(x,0) + log(1 + e^-|x|)
    return ops::add(ops::relu(x), ops::log(ops::add(sc(1, t), ops::exp(ops::neg(ops::abs(x))))));
  }
  if (op == "Sinh" || op == "Cosh") {
    Tensor e = ops::exp(x), em = ops::exp(ops::neg(x));
    return ops::mul(op == "Sinh" ? ops::sub(e, em) : ops::add(e, em), sc(0.5, t));
  }
  if (op == "IsNaN") return ops::not_equal(x, x);
  if (op == "IsInf") {
    bool pos = node.attr_int("detect_positive", 1) != 0, neg = node.attr_int("detect_negative", 1) != 0;
    double inf = std::numeric_limits<double>::infinity();
    Tensor p = ops::equal(x, sc(inf, t)), n = ops::equal(x, sc(-inf, t));
    if (pos && neg) return ops::logical_or(p, n);
    if (pos) return p;
    if (neg) return n;
    return ops::logical_and(p, n); // all false
  }
  if (op == "Elu") {
    double alpha = attr("alpha", 1.0);
    return ops::where(ops::greater(x, sc(0, t)), x, ops::mul(sc(alpha, t), ops::sub(ops::exp(x), sc(1, t))));
  }
  if (op == "Celu") {
    double alpha = attr("alpha", 1.0);
    Tensor neg = ops::mul(sc(alpha, t), ops::sub(ops::exp(ops::div(x, sc(alpha, t))), sc(1, t)));
    return ops::add(ops::relu(x), ops::minimum(sc(0, t), neg));
  }
  if (op == "Selu") {
    double alpha = attr("alpha", 1.67326319217681884765625),
           gamma = attr("gamma", 1.05070102214813232421875);
    Tensor neg = ops::sub(ops::mul(sc(alpha, t), ops::exp(x)), sc(alpha, t));
    return ops::mul(sc(gamma, t), ops::where(ops::greater(x, sc(0, t)), x, neg));
  }
  if (op == "LeakyRelu") {
    double alpha = attr("alpha", 0.01);
    return ops::where(ops::less(x, sc(0, t)), ops::mul(x, sc(alpha, t)), x);
  }
  if (op == "ThresholdedRelu") {
    double alpha = attr("alpha", 1.0);
    return ops::where(ops::greater(x, sc(alpha, t)), x, sc(0, t));
  }
  if (op == "HardSigmoid" || op == "HardSwish") {
    double alpha = op == "HardSwish" ? 1.0 / 6 : attr("alpha", 0.2);
    double beta = op == "HardSwish" ? 0.5 : attr("beta", 0.5);
    Tensor h = ops::maximum(sc(0, t), ops::minimum(sc(1, t), ops::add(ops::mul(x, sc(alpha, t)), sc(beta, t))));
    return op == "HardSwish" ? ops::mul(x, h) : h;
  }
  if (op == "Mish") // x tanh(softplus(x)), softplus as above
    return ops::mul(x, ops::tanh(ops::add(ops::relu(x), ops::log(ops::add(sc(1, t), ops::exp(ops::neg(ops::abs(x))))))));
  if (op == "Gelu") { // opset 20
    std::string approximate = node.attr_string("approximate", "none");
    if (approximate != "none" && approximate != "tanh")
      unsupported("Gelu approximate must be none or tanh, got '" + approximate + "'");
    return ops::gelu(x, approximate);
  }
  if (op == "Shrink") {
    double bias = attr("bias", 0.0), lambd = attr("lambd", 0.5);
    return ops::where(ops::less(x, sc(-lambd, t)), ops::add(x, sc(bias, t)),
                      ops::where(ops::greater(x, sc(lambd, t)), ops::sub(x, sc(bias, t)), sc(0, t)));
  }
  throw Error(ErrorCode::Internal, "no unary mapping for " + op);
}

namespace {

using Outs = std::vector<Tensor>;

/// ONNX takes dims that meet in a broadcast (or off a Concat's axis) to be
/// equal at run time; maxc's ops need them equal as Dims. Where every such
/// dim at one position (right-aligned; static 1s broadcast) is symbolic and
/// they differ — a feature pyramid adds an upsampled coarse map,
/// 2*floordiv(floordiv(h+1,2)+1,2), to a finer one, floordiv(h+1,2), equal
/// for the sizes the model accepts (h a multiple of the strides) — each
/// operand is cropped to one of them (the shortest text, then the first)
/// by a gather of iota indices: equal sizes read every element, and as a
/// gather clamps its indices, no other size reads out of range. A static
/// dim among them is left to the op's own check. `skip`: an axis (from the
/// left, in the operands' common rank) not to reconcile (Concat's axis).
std::vector<Tensor> reconcile_symbolic_dims(std::vector<Tensor> ts, int64_t skip = -1) {
  int64_t rank = 0;
  for (const Tensor &t : ts)
    rank = std::max(rank, t.rank());
  for (int64_t back = 1; back <= rank; ++back) {
    if (rank - back == skip)
      continue;
    std::optional<Dim> target;
    bool differ = false, all_symbolic = true;
    for (const Tensor &t : ts) {
      if (t.rank() < back)
        continue;
      const Dim &d = t.shape()[t.rank() - back];
      if (d.is_static() && d.value() == 1)
        continue;
      all_symbolic = all_symbolic && !d.is_static();
      if (target && *target != d)
        differ = true;
      if (!target || d.to_string().size() < target->to_string().size())
        target = d;
    }
    if (!differ || !all_symbolic)
      continue;
    for (Tensor &t : ts) {
      if (t.rank() < back)
        continue;
      int64_t axis = t.rank() - back;
      const Dim &d = t.shape()[axis];
      if (d != *target && !(d.is_static() && d.value() == 1))
        t = ops::gather(t, ops::iota({*target}, 0, DType::i64), axis);
    }
  }
  return ts;
}

Tensor binary_op(const std::string &op, Tensor a, Tensor b, const OnnxNode &node) {
  if (!shape_is_static(a.shape()) || !shape_is_static(b.shape())) {
    std::vector<Tensor> ab = reconcile_symbolic_dims({a, b});
    a = ab[0];
    b = ab[1];
  }
  if (op == "Pow" && !is_float(a.dtype())) // integer powers: computed in f64, exact below 2^53
    return ops::cast(ops::pow(ops::cast(a, DType::f64), ops::cast(b, DType::f64)), a.dtype());
  if (op == "Pow" && a.dtype() != b.dtype())
    b = ops::cast(b, a.dtype());
  if (a.dtype() != b.dtype())
    throw Error(ErrorCode::DTypeMismatch, op + " operands have different types: " +
                                              std::string(dtype_name(a.dtype())) + " and " +
                                              std::string(dtype_name(b.dtype())));
  if (op == "Add") return ops::add(a, b);
  if (op == "Sub") return ops::sub(a, b);
  if (op == "Mul") return ops::mul(a, b);
  if (op == "Div") return ops::div(a, b);
  if (op == "Pow") return ops::pow(a, b);
  if (op == "Max") return ops::maximum(a, b);
  if (op == "Min") return ops::minimum(a, b);
  if (op == "Sum") return ops::add(a, b);
  if (op == "Equal") return ops::equal(a, b);
  if (op == "Less") return ops::less(a, b);
  if (op == "Greater") return ops::greater(a, b);
  if (op == "LessOrEqual") return ops::less_equal(a, b);
  if (op == "GreaterOrEqual") return ops::greater_equal(a, b);
  if (op == "And") return ops::logical_and(a, b);
  if (op == "Or") return ops::logical_or(a, b);
  if (op == "Xor") return ops::not_equal(a, b);
  if (op == "Mod") {
    if (node.attr_int("fmod", 0) == 0 && is_float(a.dtype()))
      unsupported("Mod with fmod=0 on floats is invalid");
    if (node.attr_int("fmod", 0) == 0)
      return ops::mod(a, b);
    // C fmod: the sign of the dividend.
    if (is_float(a.dtype())) {
      Tensor q = ops::div(a, b);
      Tensor tq = ops::where(ops::less(q, sc(0, q.dtype())), ops::ceil(q), ops::floor(q));
      return ops::sub(a, ops::mul(tq, b));
    }
    return ops::sub(a, ops::mul(ops::div(a, b), b)); // integer division truncates
  }
  throw Error(ErrorCode::Internal, "no binary mapping for " + op);
}

std::vector<int64_t> reduce_axes(const OnnxNode &node, int64_t rank, bool &noop) {
  std::vector<int64_t> axes;
  bool from_input = node.op() == "ReduceSum" ? node.opset() >= 13 : node.opset() >= 18;
  if (from_input) {
    if (node.has(1))
      axes = node.ints(1);
  } else {
    axes = node.attr_ints("axes");
  }
  noop = false;
  if (axes.empty()) {
    if (node.attr_int("noop_with_empty_axes", 0)) {
      noop = true;
      return {};
    }
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  for (int64_t &a : axes)
    a = norm_axis(a, rank);
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

Tensor reduce_op(const OnnxNode &node, const Tensor &x) {
  const std::string &op = node.op();
  bool noop = false;
  std::vector<int64_t> axes = reduce_axes(node, x.rank(), noop);
  bool keep = node.attr_int("keepdims", 1) != 0;
  DType t = x.dtype();
  if (noop) {
    if (op == "ReduceL1") return ops::abs(x);
    if (op == "ReduceSumSquare") return ops::mul(x, x);
    if (op == "ReduceL2") return ops::abs(x);
    if (op == "ReduceLogSum") return ops::log(x);
    if (op == "ReduceLogSumExp") return x;
    return x;
  }
  if (op == "ReduceSum") return ops::sum(x, axes, keep);
  if (op == "ReduceMean") return ops::mean(x, axes, keep);
  if (op == "ReduceMax") return ops::max(x, axes, keep);
  if (op == "ReduceMin") return ops::min(x, axes, keep);
  if (op == "ReduceProd") return ops::prod(x, axes, keep);
  if (op == "ReduceL1") return ops::sum(ops::abs(x), axes, keep);
  if (op == "ReduceSumSquare") return ops::sum(ops::mul(x, x), axes, keep);
  if (op == "ReduceL2") return ops::sqrt(ops::sum(ops::mul(x, x), axes, keep));
  if (op == "ReduceLogSum") return ops::log(ops::sum(x, axes, keep));
  if (op == "ReduceLogSumExp") {
    Tensor m = ops::max(x, axes, true);
    Tensor m_safe = ops::where(ops::equal(ops::abs(m), sc(std::numeric_limits<double>::infinity(), t)),
                               sc(0, t), m);
    Tensor s = ops::log(ops::sum(ops::exp(ops::sub(x, m_safe)), axes, true));
    Tensor r = ops::add(s, m_safe);
    return keep ? r : ops::squeeze(r, axes);
  }
  throw Error(ErrorCode::Internal, "no reduction mapping for " + op);
}

/// Softmax-like ops; before opset 13 the input is coerced to 2-D at `axis`.
Tensor softmax_like(const OnnxNode &node, const Tensor &x) {
  const std::string &op = node.op();
  bool legacy = node.opset() < 13;
  int64_t axis = norm_axis(node.attr_int("axis", legacy ? 1 : -1), x.rank());
  auto apply = [&](const Tensor &v, int64_t ax) -> Tensor {
    if (op == "Softmax") return ops::softmax(v, ax);
    if (op == "LogSoftmax") return ops::log_softmax(v, ax);
    // Hardmax: one-hot of the first maximum.
    Tensor idx = ops::argmax(v, ax, true);
    Tensor pos = ops::iota(v.shape(), ax, DType::i64);
    return ops::cast(ops::equal(pos, idx), v.dtype());
  };
  if (!legacy || axis == x.rank() - 1)
    return apply(x, legacy ? x.rank() - 1 : axis);
  Shape shape = x.shape();
  Dim outer = 1, inner = 1;
  for (int64_t i = 0; i < x.rank(); ++i)
    (i < axis ? outer : inner) = (i < axis ? outer : inner) * shape[i];
  return ops::reshape(apply(ops::reshape(x, {outer, inner}), 1), shape);
}

/// ONNX conv/pool pads [b1, b2, e1, e2] (after auto_pad) for 2 spatial dims.
std::vector<int64_t> spatial_pads(const OnnxNode &node, const Shape &in_shape, const std::vector<int64_t> &kernel,
                                  const std::vector<int64_t> &strides, const std::vector<int64_t> &dilations) {
  size_t n = kernel.size();
  std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  if (auto_pad == "NOTSET") {
    std::vector<int64_t> pads = node.attr_ints("pads", std::vector<int64_t>(2 * n, 0));
    if (pads.size() != 2 * n)
      unsupported("pads must have " + std::to_string(2 * n) + " values");
    return pads;
  }
  std::vector<int64_t> pads(2 * n, 0);
  if (auto_pad == "VALID")
    return pads;
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
    unsupported("auto_pad '" + auto_pad + "' is not supported");
  for (size_t i = 0; i < n; ++i) {
    int64_t in = static_dim(in_shape[2 + i], "a spatial dim with auto_pad");
    int64_t out = (in + strides[i] - 1) / strides[i];
    int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - in);
    int64_t small = total / 2, large = total - small;
    pads[i] = auto_pad == "SAME_UPPER" ? small : large;
    pads[i + n] = auto_pad == "SAME_UPPER" ? large : small;
  }
  return pads;
}

/// 1-D conv/pool go through the 2-D ops with H = 1.
struct Spatial {
  bool one_d = false;
  Tensor lift(const Tensor &x) const { return one_d ? ops::unsqueeze(x, {2}) : x; }
  Tensor lower(const Tensor &x) const { return one_d ? ops::squeeze(x, {2}) : x; }
  std::vector<int64_t> two(const std::vector<int64_t> &v, int64_t fill) const {
    return one_d ? std::vector<int64_t>{fill, v[0]} : v;
  }
  std::vector<int64_t> pads2(const std::vector<int64_t> &p) const { // [b, e] → [0, b, 0, e]
    return one_d ? std::vector<int64_t>{0, p[0], 0, p[1]} : p;
  }
};

Spatial spatial_for(const Tensor &x, const std::string &op) {
  if (x.rank() == 3)
    return Spatial{true};
  if (x.rank() != 4)
    unsupported(op + " on a rank-" + std::to_string(x.rank()) + " input (maxc supports 1-D and 2-D)");
  return Spatial{false};
}

/// Kernel, strides and dilations of a Conv/ConvTranspose node.
struct ConvGeometry {
  Tensor x, w;
  Spatial sp;
  size_t n;
  std::vector<int64_t> kernel, strides, dil;
  ConvGeometry(const OnnxNode &node) : ConvGeometry(node, node.in(0), node.in(1)) {}
  ConvGeometry(const OnnxNode &node, Tensor x_, Tensor w_)
      : x(std::move(x_)), w(std::move(w_)), sp(x.rank() == 5 ? Spatial{false} : spatial_for(x, node.op())) {
    n = x.rank() == 5 ? 3 : sp.one_d ? 1 : 2; // 3-D: conv3d, conv_transpose3d
    require(w.rank() == x.rank(), "the weight's rank must equal the input's");
    kernel = node.attr_ints("kernel_shape");
    if (kernel.empty())
      for (size_t i = 0; i < n; ++i)
        kernel.push_back(static_dim(w.shape()[2 + i], "the kernel size"));
    strides = node.attr_ints("strides", std::vector<int64_t>(n, 1));
    dil = node.attr_ints("dilations", std::vector<int64_t>(n, 1));
    require(kernel.size() == n && strides.size() == n && dil.size() == n,
            "kernel_shape, strides and dilations need one value per spatial dim");
  }
};

/// 3-D convolution as a sum over the kernel's depth of 2-D convolutions,
/// the output depths folded into the batch:
/// Y[:, :, od] = sum over kd of conv2d(Xpad[:, :, od*sd + kd*dd], W[:, :, kd]).
Outs conv3d(const OnnxNode &node) {
  ConvGeometry g(node);
  const Tensor &x = g.x, &w = g.w;
  const std::vector<int64_t> &kernel = g.kernel, &strides = g.strides, &dil = g.dil;
  std::vector<int64_t> pads = spatial_pads(node, x.shape(), kernel, strides, dil);
  Shape s = x.shape();
  int64_t depth = static_dim(s[2], "the input's depth") + pads[0] + pads[3];
  int64_t od = (depth - dil[0] * (kernel[0] - 1) - 1) / strides[0] + 1;
  require(od >= 1, "the kernel is deeper than the padded input");
  Tensor xp = pads[0] || pads[3] ? ops::pad(x, {0, 0, 0, 0, pads[0], pads[3], 0, 0, 0, 0}) : x;
  ops::Conv2dOptions o;
  o.stride = {strides[1], strides[2]};
  o.dilation = {dil[1], dil[2]};
  o.padding = {pads[1], pads[2], pads[4], pads[5]};
  o.groups = node.attr_int("group", 1);
  std::optional<Tensor> sum;
  for (int64_t kd = 0; kd < kernel[0]; ++kd) {
    int64_t start = kd * dil[0];
    Tensor xs = ops::slice(xp, {start}, {start + (od - 1) * strides[0] + 1}, {2}, {strides[0]}); // [N,C,OD,H,W]
    Tensor xb = ops::reshape(ops::permute(xs, {0, 2, 1, 3, 4}), {s[0] * Dim(od), s[1], s[3], s[4]});
    Tensor wk = ops::squeeze(ops::slice(w, {kd}, {kd + 1}, {2}), {2}); // [M, C/group, KH, KW]
    std::optional<Tensor> bias;
    if (kd == 0 && node.has(2))
      bias = node.in(2);
    Tensor y = ops::conv2d(xb, wk, bias, o); // [N*OD, M, OH, OW]
    sum = sum ? ops::add(*sum, y) : y;
  }
  Shape ys = sum->shape();
  return {ops::permute(ops::reshape(*sum, {s[0], Dim(od), ys[1], ys[2], ys[3]}), {0, 2, 1, 3, 4})};
}

Outs conv(const OnnxNode &node) {
  if (node.in(0).rank() == 5)
    return conv3d(node);
  std::optional<Tensor> bias;
  if (node.has(2))
    bias = node.in(2);
  return {conv_of(node, node.in(0), node.in(1), bias)};
}

} // namespace

Tensor conv_of(const OnnxNode &node, const Tensor &x_in, const Tensor &w_in, const std::optional<Tensor> &bias,
               bool exact) {
  ConvGeometry g(node, x_in, w_in);
  const Tensor &x = g.x, &w = g.w;
  const Spatial &sp = g.sp;
  const std::vector<int64_t> &kernel = g.kernel, &strides = g.strides, &dil = g.dil;
  ops::Conv2dOptions o;
  o.stride = sp.two(strides, 1);
  o.dilation = sp.two(dil, 1);
  o.padding = sp.pads2(spatial_pads(node, x.shape(), kernel, strides, dil));
  o.groups = node.attr_int("group", 1);
  o.exact = exact;
  return sp.lower(ops::conv2d(sp.lift(x), sp.lift(w), bias, o));
}

namespace {

/// 3-D transposed convolution: for each kernel depth kd, a 2-D transposed
/// convolution of every input depth (folded into the batch) with W[:, :, kd],
/// placed at output depths d*sd + kd*dd (zeros between, by pad + reshape) and
/// summed; then the depth padding is cropped. pads: [db, hb, wb, de, he, we].
Tensor conv_transpose3d(const ConvGeometry &g, const std::vector<int64_t> &pads, const std::vector<int64_t> &out_pad,
                        int64_t groups, const std::optional<Tensor> &bias) {
  const Tensor &x = g.x, &w = g.w;
  const std::vector<int64_t> &kernel = g.kernel, &strides = g.strides, &dil = g.dil;
  Shape s = x.shape();
  int64_t depth = static_dim(s[2], "the input's depth");
  int64_t full = (depth - 1) * strides[0] + (kernel[0] - 1) * dil[0] + 1 + out_pad[0];
  int64_t od = full - pads[0] - pads[3];
  require(od >= 1, "the depth padding removes the whole output");
  ops::ConvTranspose2dOptions o;
  o.stride = {strides[1], strides[2]};
  o.dilation = {dil[1], dil[2]};
  o.padding = {pads[1], pads[2], pads[4], pads[5]};
  o.output_padding = {out_pad[1], out_pad[2]};
  o.groups = groups;
  Tensor xb = ops::reshape(ops::permute(x, {0, 2, 1, 3, 4}), {s[0] * Dim(depth), s[1], s[3], s[4]});
  std::optional<Tensor> sum;
  for (int64_t kd = 0; kd < kernel[0]; ++kd) {
    Tensor wk = ops::squeeze(ops::slice(w, {kd}, {kd + 1}, {2}), {2}); // [C, M/group, KH, KW]
    Tensor z = ops::conv_transpose2d(xb, wk, std::nullopt, o);    // [N*D, M, OH, OW]
    Shape zs = z.shape();
    z = ops::reshape(z, {s[0], Dim(depth), zs[1], zs[2], zs[3]});
    if (strides[0] > 1) // depth d to d*sd: sd-1 zero planes after each
      z = ops::slice(ops::reshape(ops::pad(ops::unsqueeze(z, {2}), {0, 0, 0, 0, 0, strides[0] - 1, 0, 0, 0, 0, 0, 0}),
                                  {s[0], Dim(depth * strides[0]), zs[1], zs[2], zs[3]}),
                     {0}, {(depth - 1) * strides[0] + 1}, {1});
    int64_t before = kd * dil[0], after = full - before - ((depth - 1) * strides[0] + 1);
    z = ops::pad(z, {0, 0, before, after, 0, 0, 0, 0, 0, 0});
    sum = sum ? ops::add(*sum, z) : z;
  }
  Tensor y = ops::permute(ops::slice(*sum, {pads[0]}, {pads[0] + od}, {1}), {0, 2, 1, 3, 4}); // [N, M, OD, OH, OW]
  if (bias)
    y = ops::add(y, ops::reshape(*bias, {bias->shape()[0], Dim(1), Dim(1), Dim(1)}));
  return y;
}

Outs conv_transpose(const OnnxNode &node) {
  ConvGeometry g(node);
  const Tensor &x = g.x, &w = g.w;
  const Spatial &sp = g.sp;
  size_t n = g.n;
  const std::vector<int64_t> &kernel = g.kernel, &strides = g.strides, &dil = g.dil;
  std::vector<int64_t> out_pad = node.attr_ints("output_padding", std::vector<int64_t>(n, 0));
  std::vector<int64_t> pads = node.attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  std::vector<int64_t> output_shape = node.attr_ints("output_shape");
  require(out_pad.size() == n && pads.size() == 2 * n && (output_shape.empty() || output_shape.size() >= n),
          "output_padding, pads or output_shape have the wrong length");
  std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  if (!output_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < n; ++i) {
      int64_t in = static_dim(x.shape()[2 + i], "a spatial dim");
      int64_t out = output_shape.empty() ? in * strides[i] : output_shape[output_shape.size() - n + i];
      int64_t total = strides[i] * (in - 1) + out_pad[i] + ((kernel[i] - 1) * dil[i] + 1) - out;
      if (total < 0) { // more output than the kernel covers: output padding at the end
        out_pad[i] += -total;
        total = 0;
      }
      bool upper = auto_pad != "SAME_LOWER";
      pads[i] = upper ? total / 2 : total - total / 2;
      pads[i + n] = total - pads[i];
    }
  } else if (auto_pad == "VALID") {
    std::fill(pads.begin(), pads.end(), 0);
  }
  std::optional<Tensor> bias;
  if (node.has(2))
    bias = node.in(2);
  if (n == 3)
    return {conv_transpose3d(g, pads, out_pad, node.attr_int("group", 1), bias)};
  ops::ConvTranspose2dOptions o;
  o.stride = sp.two(strides, 1);
  o.dilation = sp.two(dil, 1);
  o.padding = sp.pads2(pads);
  o.output_padding = sp.two(out_pad, 0);
  o.groups = node.attr_int("group", 1);
  return {sp.lower(ops::conv_transpose2d(sp.lift(x), sp.lift(w), bias, o))};
}

/// MaxPool as the running max of one strided slice per kernel offset (any
/// rank, dilations), with the Indices output: each max's flat position in
/// the input tensor (row-major, or column-major spatial dims with
/// storage_order 1), the first of equal maxima in window order. pads:
/// [begins..., ends...] per spatial dim.
Outs max_pool_windows(const Tensor &x, const std::vector<int64_t> &kernel, const std::vector<int64_t> &strides,
                      const std::vector<int64_t> &dil, const std::vector<int64_t> &pads, bool column_major,
                      bool with_indices) {
  size_t n = kernel.size();
  int64_t r = x.rank();
  std::vector<int64_t> in(n), out(n), place(n);
  for (size_t i = 0; i < n; ++i) {
    in[i] = static_dim(x.shape()[2 + i], "a pooled dim");
    out[i] = (in[i] + pads[i] + pads[i + n] - ((kernel[i] - 1) * dil[i] + 1)) / strides[i] + 1;
    require(out[i] >= 1, "the pooling window is larger than the padded input");
  }
  // Spatial strides of the flat index.
  int64_t plane = 1;
  for (size_t j = 0; j < n; ++j) {
    size_t i = column_major ? j : n - 1 - j;
    place[i] = plane;
    plane *= in[i];
  }
  std::vector<int64_t> pad_all(2 * static_cast<size_t>(r), 0);
  for (size_t i = 0; i < n; ++i) {
    pad_all[2 * (2 + i)] = pads[i];
    pad_all[2 * (2 + i) + 1] = pads[i + n];
  }
  Tensor padded = ops::pad(x, pad_all, -std::numeric_limits<double>::infinity());
  Shape oshape = {x.shape()[0], x.shape()[1]};
  for (int64_t o : out)
    oshape.emplace_back(o);
  int64_t channels = static_dim(x.shape()[1], "the channels");
  Tensor base = with_indices ? ops::mul(ops::add(ops::mul(ops::iota(oshape, 0, DType::i64),
                                                         sc(double(channels), DType::i64)),
                                                 ops::iota(oshape, 1, DType::i64)),
                                        sc(double(plane), DType::i64))
                             : Tensor();
  std::optional<Tensor> best, index;
  std::vector<int64_t> k(n, 0);
  for (;;) {
    std::vector<int64_t> starts, ends, axes, steps;
    Tensor at = base;
    for (size_t i = 0; i < n; ++i) {
      starts.push_back(k[i] * dil[i]);
      ends.push_back(k[i] * dil[i] + (out[i] - 1) * strides[i] + 1);
      axes.push_back(static_cast<int64_t>(2 + i));
      steps.push_back(strides[i]);
      if (!with_indices)
        continue;
      // The input coordinate o * stride + k * dilation - pad_begin.
      Tensor coord = ops::add(ops::mul(ops::iota(oshape, static_cast<int64_t>(2 + i), DType::i64),
                                       sc(double(strides[i]), DType::i64)),
                              sc(double(k[i] * dil[i] - pads[i]), DType::i64));
      at = ops::add(at, ops::mul(coord, sc(double(place[i]), DType::i64)));
    }
    Tensor v = ops::slice(padded, starts, ends, axes, steps);
    if (!best) {
      best = v;
      index = at;
    } else if (with_indices) {
      Tensor better = ops::greater(v, *best);
      index = ops::where(better, at, *index);
      best = ops::where(better, v, *best);
    } else {
      best = ops::maximum(*best, v);
    }
    size_t i = n;
    while (i > 0 && ++k[i - 1] == kernel[i - 1])
      k[--i] = 0;
    if (i == 0)
      break;
  }
  return {*best, with_indices ? *index : Tensor()};
}

Outs pool(const OnnxNode &node) {
  Tensor x = node.in(0);
  bool is_max = node.op() == "MaxPool";
  bool three_d = x.rank() == 5;
  Spatial sp = three_d ? Spatial{false} : spatial_for(x, node.op());
  size_t n = three_d ? 3 : sp.one_d ? 1 : 2;
  std::vector<int64_t> kernel = node.attr_ints("kernel_shape");
  if (kernel.size() != n)
    unsupported("kernel_shape must have " + std::to_string(n) + " values");
  std::vector<int64_t> strides = node.attr_ints("strides", std::vector<int64_t>(n, 1));
  std::vector<int64_t> dil = node.attr_ints("dilations", std::vector<int64_t>(n, 1));
  require(strides.size() == n && dil.size() == n, "strides and dilations need one value per spatial dim");
  bool dilated = std::any_of(dil.begin(), dil.end(), [](int64_t d) { return d != 1; });
  if (dilated && !is_max)
    unsupported("AveragePool with dilations is not supported");
  // The core pools are float-only: MaxPool on int8/uint8 pools in f32, which
  // holds every 8-bit value exactly (the max is one of them), and casts back.
  DType in_dtype = x.dtype();
  if (is_max && (in_dtype == DType::u8 || in_dtype == DType::i8))
    x = ops::cast(x, DType::f32);
  else if (!is_float(in_dtype))
    throw Error(ErrorCode::OnnxUnsupportedType,
                node.op() + " on " + std::string(dtype_name(x.dtype())) + " is not supported (maxc pools floats)");
  auto back = [&](const Tensor &t) { return t.dtype() == in_dtype ? t : ops::cast(t, in_dtype); };
  std::vector<int64_t> pads = spatial_pads(node, x.shape(), kernel, strides, dil);
  bool include_pad = node.attr_int("count_include_pad", 0) != 0;
  if (node.attr_int("ceil_mode", 0)) {
    // Extra padding at the end so the floor formula gives the ceil size.
    for (size_t i = 0; i < n; ++i) {
      int64_t in = static_dim(x.shape()[2 + i], "a spatial dim with ceil_mode");
      int64_t span = in + pads[i] + pads[i + n] - kernel[i];
      int64_t out = (span + strides[i] - 1) / strides[i] + 1;
      if ((out - 1) * strides[i] >= in + pads[i])
        --out; // the last window must start inside the input or its left padding
      int64_t extra = (out - 1) * strides[i] + kernel[i] - (in + pads[i] + pads[i + n]);
      if (extra > 0) {
        if (!is_max && include_pad)
          unsupported("AveragePool with ceil_mode and count_include_pad is not supported");
        pads[i + n] += extra;
      }
    }
  }
  int64_t offsets = 1;
  for (int64_t k : kernel)
    offsets *= k;
  bool phases = dilated && !node.wants_output(1) && !three_d;
  for (size_t i = 0; i < n; ++i)
    phases = phases && strides[i] % dil[i] == 0 && pads[i] % dil[i] == 0;
  if ((dilated || node.wants_output(1)) && !phases) {
    if (offsets > 64)
      unsupported("MaxPool with " + std::string(node.wants_output(1) ? "Indices" : "dilations") + " and a window of " +
                  std::to_string(offsets) + " elements is not supported (up to 64; or dilations dividing the "
                  "strides and pads)");
    Outs r = max_pool_windows(x, kernel, strides, dil, pads, node.attr_int("storage_order", 0) != 0,
                              node.wants_output(1));
    return {back(r[0]), r[1]};
  }
  ops::Pool2dOptions o;
  o.count_include_pad = include_pad;
  std::vector<int64_t> phase_out; // the output's extents (the phase's pool may cover more)
  if (phases) {
    // Dilation d dividing the stride and the begin padding: every window
    // reads one phase of the input, x[.., ::d], as an undilated window.
    std::vector<int64_t> starts, ends, axes, steps;
    for (size_t i = 0; i < n; ++i) {
      int64_t in = static_dim(x.shape()[2 + i], "a pooled dim");
      int64_t out = (in + pads[i] + pads[i + n] - ((kernel[i] - 1) * dil[i] + 1)) / strides[i] + 1;
      int64_t len = (in + dil[i] - 1) / dil[i]; // the phase's length
      int64_t begin = pads[i] / dil[i], stride = strides[i] / dil[i];
      int64_t end = std::max<int64_t>(0, (out - 1) * stride + kernel[i] - begin - len);
      starts.push_back(0);
      ends.push_back(in);
      axes.push_back(static_cast<int64_t>(2 + i));
      steps.push_back(dil[i]);
      pads[i] = begin;
      pads[i + n] = end;
      strides[i] = stride;
      phase_out.push_back(out);
    }
    x = ops::slice(x, starts, ends, axes, steps);
  }
  auto pool2d = [&](const Tensor &t) { return is_max ? ops::max_pool2d(t, o) : ops::avg_pool2d(t, o); };
  if (three_d) {
    // Box windows are separable: pool H and W with D folded into the
    // channels, then D with H*W as the last axis. Max: the max of maxes; average:
    // the H-W divisor does not depend on D, so the two divisors multiply to
    // the 3-D one (with or without the padding counted).
    Shape s = x.shape();
    o.kernel = {kernel[1], kernel[2]};
    o.stride = {strides[1], strides[2]};
    o.padding = {pads[1], pads[2], pads[4], pads[5]};
    Tensor hw = pool2d(ops::reshape(x, {s[0], s[1] * s[2], s[3], s[4]}));
    Dim oh = hw.shape()[2], ow = hw.shape()[3];
    o.kernel = {kernel[0], 1};
    o.stride = {strides[0], 1};
    o.padding = {pads[0], 0, pads[3], 0};
    Tensor d = pool2d(ops::reshape(hw, {s[0], s[1], s[2], oh * ow}));
    return {back(ops::reshape(d, {s[0], s[1], d.shape()[2], oh, ow}))};
  }
  o.kernel = sp.two(kernel, 1);
  o.stride = sp.two(strides, 1);
  o.padding = sp.pads2(pads);
  Tensor y = sp.lower(pool2d(sp.lift(x)));
  if (!phase_out.empty()) {
    std::vector<int64_t> zeros(n, 0), axes;
    for (size_t i = 0; i < n; ++i)
      axes.push_back(static_cast<int64_t>(2 + i));
    y = ops::slice(y, zeros, phase_out, axes);
  }
  return {back(y)};
}

Outs gemm(const OnnxNode &node) {
  Tensor a = node.in(0), b = node.in(1);
  double alpha = node.attr_float("alpha", 1.0), beta = node.attr_float("beta", 1.0);
  Tensor y = ops::matmul(a, b, node.attr_int("transA", 0) != 0, node.attr_int("transB", 0) != 0);
  if (alpha != 1.0)
    y = ops::mul(y, sc(alpha, y.dtype()));
  if (node.has(2) && beta != 0.0) {
    Tensor c = node.in(2);
    if (beta != 1.0)
      c = ops::mul(c, sc(beta, c.dtype()));
    y = ops::add(y, c);
  }
  return {y};
}

Outs matmul(const OnnxNode &node) {
  Tensor a = node.in(0), b = node.in(1);
  bool va = a.rank() == 1, vb = b.rank() == 1;
  if (va)
    a = ops::unsqueeze(a, {0});
  if (vb)
    b = ops::unsqueeze(b, {1});
  Tensor y = ops::matmul(a, b);
  if (vb)
    y = ops::squeeze(y, {-1});
  if (va)
    y = ops::squeeze(y, {y.rank() - (vb ? 1 : 2)});
  return {y};
}

/// Bidirectional broadcast of two shapes (Expand).
Shape broadcast_shapes(const Shape &a, const Shape &b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    Dim x = i < n - a.size() ? Dim(1) : a[i - (n - a.size())];
    Dim y = i < n - b.size() ? Dim(1) : b[i - (n - b.size())];
    if (x == y || y == Dim(1))
      out[i] = x;
    else if (x == Dim(1))
      out[i] = y;
    else
      throw Error(ErrorCode::ShapeMismatch, "cannot broadcast " + shape_to_string(a) + " and " + shape_to_string(b));
  }
  return out;
}

/// i64 scalar constant.
Tensor i64c(int64_t v) { return sc(static_cast<double>(v), DType::i64); }

/// Reshape to a shape known only at run time: 0 (copy, unless allowzero)
/// and -1 (inferred) resolved by tensor ops, each element a dim bound at
/// run time (at most x's element count), the data gathered from the
/// flattened x; a run whose shape holds another element count fails
/// (a check dim bound to [0, 0]).
Outs reshape_runtime(const OnnxNode &node, const Tensor &x, bool allow_zero) {
  Tensor t = node.in(1);
  require(t.rank() == 1 && t.shape()[0].is_static(), "Reshape's shape must be a vector of static length");
  int64_t r = t.shape()[0].value();
  Dim numel = shape_numel(x.shape());
  // No dim exceeds the element count, unless it is 0 (allowzero: [0, 3]
  // → [3, 0]); then the bound comes from --max-dim or the run's value.
  std::optional<int64_t> bound =
      numel.is_static() && numel.value() > 0 ? std::optional<int64_t>(numel.value()) : std::nullopt;
  Tensor n = ops::dim_values({numel}, DType::i64, true);
  std::vector<Tensor> e;
  Tensor known = i64c(1);
  for (int64_t k = 0; k < r; ++k) {
    Tensor v = node.element(1, k);
    if (!allow_zero && k < x.rank())
      v = ops::where(ops::equal(v, i64c(0)), ops::dim_values({x.shape()[k]}, DType::i64, true), v);
    known = ops::mul(known, ops::where(ops::equal(v, i64c(-1)), i64c(1), v));
    e.push_back(v);
  }
  Tensor inferred = ops::div(n, ops::maximum(known, i64c(1)));
  Shape shape;
  Tensor total = i64c(1);
  for (int64_t k = 0; k < r; ++k) {
    e[k] = ops::where(ops::equal(e[k], i64c(-1)), inferred, e[k]);
    total = ops::mul(total, e[k]);
    shape.push_back(node.bind(1, e[k], "d" + std::to_string(k), bound, k));
  }
  Dim check = node.bind(1, ops::where(ops::equal(total, n), i64c(0), i64c(-1)), "numel_check", 0);
  Dim out_numel = shape_numel(shape);
  // The index: iota + the check dim's value (0 when the run may go on).
  Tensor idx = ops::add(ops::iota({out_numel}, 0, DType::i64), ops::dim_values({check}, DType::i64, true));
  idx = ops::minimum(idx, ops::maximum(ops::sub(n, i64c(1)), i64c(0)));
  Tensor flat = ops::reshape(x, {numel});
  return {ops::reshape(ops::gather(flat, idx, 0), shape)};
}

Outs reshape(const OnnxNode &node) {
  Tensor x = node.in(0);
  if (node.is_runtime(1))
    return reshape_runtime(node, x, node.attr_int("allowzero", 0) != 0);
  std::vector<Dim> target = node.dims(1);
  bool allow_zero = node.attr_int("allowzero", 0) != 0;
  Shape shape;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i].is_static() && target[i].value() == 0 && !allow_zero) {
      if (i >= x.shape().size())
        unsupported("Reshape copies dim " + std::to_string(i) + " of a rank-" + std::to_string(x.rank()) + " input");
      shape.push_back(x.shape()[i]);
    } else {
      shape.push_back(target[i]);
    }
  }
  return {ops::reshape(x, shape)};
}

/// Slice with starts or ends known only at run time (axes and steps known):
/// per axis, the start clamped as ONNX says, the length a dim bound at run
/// time (at most the axis' size), the elements gathered.
Outs slice_runtime(const OnnxNode &node, Tensor x) {
  int64_t count = node.in(1).rank() == 1 && node.in(1).shape()[0].is_static() ? node.in(1).shape()[0].value() : -1;
  require(count >= 0, "Slice's starts must be a vector of static length");
  std::vector<int64_t> axes, steps;
  if (node.has(3))
    axes = node.ints(3);
  else
    for (int64_t i = 0; i < count; ++i)
      axes.push_back(i);
  steps = node.has(4) ? node.ints(4) : std::vector<int64_t>(static_cast<size_t>(count), 1);
  require(static_cast<int64_t>(axes.size()) == count && static_cast<int64_t>(steps.size()) == count,
          "Slice starts, ends, axes and steps must have the same length");
  auto value = [&](size_t input, int64_t k) {
    return node.is_runtime(input) ? node.element(input, k) : i64c(node.ints(input).at(static_cast<size_t>(k)));
  };
  for (int64_t i = 0; i < count; ++i) {
    int64_t a = norm_axis(axes[i], x.rank()), step = steps[i];
    require(step != 0, "Slice step 0");
    const Dim &d = x.shape()[a];
    Tensor n = ops::dim_values({d}, DType::i64, true);
    auto norm = [&](Tensor v) {
      v = ops::where(ops::less(v, i64c(0)), ops::add(v, n), v);
      return step > 0 ? ops::minimum(ops::maximum(v, i64c(0)), n)
                      : ops::minimum(ops::maximum(v, i64c(-1)), ops::sub(n, i64c(1)));
    };
    Tensor s = norm(value(1, i)), e = norm(value(2, i));
    int64_t m = step > 0 ? step : -step;
    Tensor span = step > 0 ? ops::sub(e, s) : ops::sub(s, e);
    Tensor len = ops::maximum(ops::div(ops::add(span, i64c(m - 1)), i64c(m)), i64c(0));
    std::optional<int64_t> bound = d.is_static() ? std::optional<int64_t>(d.value()) : std::nullopt;
    Dim l = node.bind(1, len, "len" + std::to_string(a), bound);
    Tensor idx = ops::add(s, ops::mul(ops::iota({l}, 0, DType::i64), i64c(step)));
    x = ops::gather(x, idx, a);
  }
  return {x};
}

/// Slice where a start or end holds a symbolic dim (a shape's element, e.g.
/// `table[:, :Shape(x)[1]]`) or a symbolic axis is cut short
/// (`x[..., 10:-10]` on a signal of run-time length), step 1 on such axes:
/// per axis, the start s' and end e' clamped as ONNX says (a negative
/// number counts from the end; a symbolic one is a length, not negative),
/// the extent max(e' - s', 0) as a Dim, the elements gathered from s' on.
/// nullopt: no such axis (Slice's plain path).
std::optional<Outs> slice_symbolic(const OnnxNode &node, Tensor x) {
  if (node.opset() < 10 || node.is_runtime(1) || node.is_runtime(2) || node.is_runtime(3) || node.is_runtime(4))
    return std::nullopt;
  std::vector<Dim> starts = node.dims(1), ends = node.dims(2);
  std::vector<int64_t> axes, steps;
  if (node.has(3))
    axes = node.ints(3);
  else
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(static_cast<int64_t>(i));
  steps = node.has(4) ? node.ints(4) : std::vector<int64_t>(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return std::nullopt; // Slice's plain path reports it
  auto full_range = [](const Dim &s, const Dim &e, int64_t step) {
    return step == 1 && s == Dim(0) && e.is_static() && e.value() >= (int64_t(1) << 62);
  };
  auto symbolic_axis = [&](size_t i) {
    const Dim &d = x.shape()[norm_axis(axes[i], x.rank())];
    return !starts[i].is_static() || !ends[i].is_static() ||
           (!d.is_static() && !full_range(starts[i], ends[i], steps[i]));
  };
  bool any = false;
  for (size_t i = 0; i < axes.size(); ++i)
    any = any || symbolic_axis(i);
  if (!any)
    return std::nullopt;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = norm_axis(axes[i], x.rank());
    const Dim &d = x.shape()[a];
    if (!symbolic_axis(i)) { // this axis by numbers, as Slice's plain path does
      if (!d.is_static())
        continue; // the full range
      int64_t n = d.value();
      auto clamp = [n](int64_t v) { return std::clamp(v, -n - 1, n + 1); };
      x = ops::slice(x, {clamp(starts[i].value())}, {clamp(ends[i].value())}, {a}, {steps[i]});
      continue;
    }
    if (steps[i] != 1)
      unsupported("Slice of axis " + std::to_string(a) + " (size " + d.to_string() + ") from " +
                  starts[i].to_string() + " to " + ends[i].to_string() + " with step " + std::to_string(steps[i]) +
                  ": symbolic bounds or sizes are supported with step 1 only");
    auto clamped = [&](const Dim &v) {
      if (!v.is_static())
        return Dim::min(v, d);
      return v.value() < 0 ? Dim::max(d + Dim(v.value()), Dim(0)) : Dim::min(v, d);
    };
    Dim s = clamped(starts[i]), e = clamped(ends[i]);
    Dim extent = Dim::max(e - s, Dim(0));
    Tensor idx = ops::iota({extent}, 0, DType::i64);
    if (s != Dim(0))
      idx = ops::add(idx, dim_scalar(s));
    x = ops::gather(x, idx, a);
  }
  return Outs{x};
}

Outs slice(const OnnxNode &node) {
  Tensor x = node.in(0);
  if (std::optional<Outs> sym = slice_symbolic(node, x))
    return *sym;
  std::vector<int64_t> starts, ends, axes, steps;
  if (node.opset() < 10) {
    starts = node.attr_ints("starts");
    ends = node.attr_ints("ends");
    axes = node.attr_ints("axes");
  } else if (node.is_runtime(1) || node.is_runtime(2)) {
    return slice_runtime(node, x);
  } else {
    starts = node.ints(1);
    ends = node.ints(2);
    if (node.has(3))
      axes = node.ints(3);
    if (node.has(4))
      steps = node.ints(4);
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(static_cast<int64_t>(i));
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    unsupported("Slice starts, ends, axes and steps must have the same length");
  for (size_t i = 0; i < axes.size(); ++i) {
    axes[i] = norm_axis(axes[i], x.rank());
    // Clamp huge bounds (INT64_MAX/MIN mean "to the end") to the dim.
    const Dim &d = x.shape()[axes[i]];
    if (d.is_static()) {
      int64_t n = d.value();
      auto clamp = [n](int64_t v) { return std::clamp(v, -n - 1, n + 1); };
      starts[i] = clamp(starts[i]);
      ends[i] = clamp(ends[i]);
    }
  }
  return {ops::slice(x, starts, ends, axes, steps)};
}

Outs split(const OnnxNode &node) {
  Tensor x = node.in(0);
  int64_t axis = norm_axis(node.attr_int("axis", 0), x.rank());
  std::vector<int64_t> sizes = node.opset() >= 13 ? (node.has(1) ? node.ints(1) : std::vector<int64_t>{})
                                                  : node.attr_ints("split");
  size_t outputs = node.num_outputs();
  if (sizes.empty()) {
    int64_t n = static_dim(x.shape()[axis], "the split dim");
    int64_t parts = static_cast<int64_t>(outputs);
    if (node.has_attr("num_outputs"))
      parts = node.attr_int("num_outputs", parts);
    int64_t each = (n + parts - 1) / parts;
    for (int64_t i = 0; i < parts; ++i)
      sizes.push_back(std::min(each, n - i * each));
  }
  return ops::split(x, sizes, axis);
}

std::vector<int64_t> axes_arg(const OnnxNode &node, size_t input, int since) {
  if (node.opset() >= since)
    return node.has(input) ? node.ints(input) : std::vector<int64_t>{};
  return node.attr_ints("axes");
}

Outs pad(const OnnxNode &node) {
  Tensor x = node.in(0);
  std::string mode = node.attr_string("mode", "constant");
  std::vector<int64_t> pads = node.opset() >= 11 ? node.ints(1) : node.attr_ints("pads");
  double value = 0;
  if (node.opset() >= 11 && node.has(2))
    value = node.reals(2).at(0);
  else if (node.opset() < 11)
    value = node.attr_float("value", 0.0);
  int64_t rank = x.rank();
  std::vector<int64_t> axes;
  if (node.has(3))
    axes = node.ints(3);
  else
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  if (pads.size() != 2 * axes.size())
    unsupported("Pad needs 2 values per axis");
  std::vector<int64_t> core(2 * rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = norm_axis(axes[i], rank);
    core[2 * a] = pads[i];
    core[2 * a + 1] = pads[i + axes.size()];
  }
  if (mode == "constant")
    return {ops::pad(x, core, value)};
  if (mode != "edge" && mode != "reflect" && mode != "wrap")
    unsupported("Pad mode '" + mode + "' is not supported");
  // edge / reflect / wrap (opset 19): gather along each padded axis with
  // computed indices.
  Tensor y = x;
  for (int64_t a = 0; a < rank; ++a) {
    int64_t before = core[2 * a], after = core[2 * a + 1];
    if (before == 0 && after == 0)
      continue;
    if (before < 0 || after < 0)
      unsupported("negative pads with mode '" + mode + "'");
    if (!x.shape()[a].is_static()) {
      // A symbolic dim n: the same index map computed at run time from n's
      // value (dims as values), i = -before .. n + after - 1 mapped by clamp
      // (edge) or by reflection about 0 and n - 1 (period 2(n - 1); n = 1
      // reads element 0).
      const Dim &dn = x.shape()[a];
      Tensor n = ops::dim_values({dn}, DType::i64, true);
      Tensor i = ops::sub(ops::iota({dn + Dim(before + after)}, 0, DType::i64), sc(double(before), DType::i64));
      Tensor last = ops::sub(n, sc(1, DType::i64));
      Tensor j;
      if (mode == "edge") {
        j = ops::minimum(ops::maximum(i, sc(0, DType::i64)), last);
      } else if (mode == "wrap") { // i + before * n >= 0
        j = ops::mod(ops::add(i, ops::mul(n, sc(double(before), DType::i64))), n);
      } else {
        Tensor period = ops::maximum(ops::mul(last, sc(2, DType::i64)), sc(1, DType::i64));
        Tensor m = ops::mod(i, period);
        j = ops::where(ops::greater(m, last), ops::sub(period, m), m);
      }
      y = ops::gather(y, j, a);
      continue;
    }
    int64_t n = static_dim(x.shape()[a], "a padded dim");
    if (n == 0)
      unsupported("Pad mode '" + mode + "' on the empty dim " + std::to_string(a));
    std::vector<int64_t> idx;
    for (int64_t i = -before; i < n + after; ++i) {
      int64_t j = i;
      if (mode == "edge")
        j = std::clamp<int64_t>(i, 0, n - 1);
      else if (mode == "wrap")
        j = ((i % n) + n) % n;
      else {
        if (n == 1)
          j = 0;
        else {
          int64_t period = 2 * (n - 1);
          j = ((i % period) + period) % period;
          if (j >= n)
            j = period - j;
        }
      }
      idx.push_back(j);
    }
    y = ops::gather(y, Tensor::from_i64(DType::i64, {int64_t(idx.size())}, idx), a);
  }
  return {y};
}

/// Index maps for Resize along one axis.
struct Taps {
  std::vector<std::vector<int64_t>> index;  // per tap, per output position
  std::vector<std::vector<double>> weight;  // per tap, per output position
  std::vector<bool> outside; // per output position: tf_crop_and_resize's coordinate lies off the input
};

/// `roi`: tf_crop_and_resize's crop along this axis (start, end), as
/// fractions of in - 1.
Taps resize_taps(const OnnxNode &node, int64_t in, int64_t out, double scale, double out_len,
                 std::pair<double, double> roi = {0.0, 1.0}) {
  std::string mode = node.attr_string("mode", "nearest");
  std::string ctm = node.attr_string("coordinate_transformation_mode", "half_pixel");
  std::string nearest = node.attr_string("nearest_mode", "round_prefer_floor");
  double a = node.attr_float("cubic_coeff_a", -0.75);
  bool exclude = node.attr_int("exclude_outside", 0) != 0;
  Taps taps;
  size_t ntaps = mode == "nearest" ? 1 : mode == "linear" ? 2 : 4;
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    unsupported("Resize mode '" + mode + "' is not supported");
  taps.index.assign(ntaps, {});
  taps.weight.assign(ntaps, {});
  for (int64_t o = 0; o < out; ++o) {
    double x;
    if (ctm == "half_pixel")
      x = (o + 0.5) / scale - 0.5;
    else if (ctm == "half_pixel_symmetric") // opset 19: centred when out is not in * scale
      x = in / 2.0 * (1 - double(out) / (scale * double(in))) + (o + 0.5) / scale - 0.5;
    else if (ctm == "pytorch_half_pixel")
      x = out_len > 1 ? (o + 0.5) / scale - 0.5 : 0;
    else if (ctm == "align_corners")
      x = out_len == 1 ? 0 : o * double(in - 1) / (out_len - 1);
    else if (ctm == "asymmetric")
      x = o / scale;
    else if (ctm == "tf_half_pixel_for_nearest" || ctm == "tf_half_pixel_for_nn")
      x = (o + 0.5) / scale;
    else if (ctm == "tf_crop_and_resize")
      x = out > 1 ? roi.first * (in - 1) + o * (roi.second - roi.first) * (in - 1) / double(out - 1)
                  : 0.5 * (roi.first + roi.second) * (in - 1);
    else
      unsupported("Resize coordinate_transformation_mode '" + ctm + "' is not supported");
    taps.outside.push_back(ctm == "tf_crop_and_resize" && (x < 0 || x > double(in - 1)));
    if (mode == "nearest") {
      double r;
      if (nearest == "round_prefer_floor")
        r = (x - std::floor(x) == 0.5) ? std::floor(x) : std::round(x);
      else if (nearest == "round_prefer_ceil")
        r = (x - std::floor(x) == 0.5) ? std::ceil(x) : std::round(x);
      else if (nearest == "floor")
        r = std::floor(x);
      else if (nearest == "ceil")
        r = std::ceil(x);
      else
        unsupported("Resize nearest_mode '" + nearest + "' is not supported");
      taps.index[0].push_back(std::clamp<int64_t>(static_cast<int64_t>(r), 0, in - 1));
      taps.weight[0].push_back(1.0);
      continue;
    }
    double base = std::floor(x), t = x - base;
    if (mode == "linear") {
      x = std::clamp(x, 0.0, double(in - 1));
      base = std::floor(x);
      t = x - base;
      int64_t i0 = static_cast<int64_t>(base);
      taps.index[0].push_back(i0);
      taps.index[1].push_back(std::min<int64_t>(i0 + 1, in - 1));
      taps.weight[0].push_back(1 - t);
      taps.weight[1].push_back(t);
      continue;
    }
    double w[4] = {((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
                   ((a + 2) * t - (a + 3)) * t * t + 1, ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
                   0};
    w[3] = ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a;
    double total = 0;
    for (int k = 0; k < 4; ++k) {
      int64_t i = static_cast<int64_t>(base) - 1 + k;
      if (exclude && (i < 0 || i >= in))
        w[k] = 0;
      total += w[k];
    }
    for (int k = 0; k < 4; ++k) {
      int64_t i = static_cast<int64_t>(base) - 1 + k;
      taps.index[k].push_back(std::clamp<int64_t>(i, 0, in - 1));
      taps.weight[k].push_back(exclude ? w[k] / total : w[k]);
    }
  }
  return taps;
}

/// Resize along a symbolic dim `a` of `y` by any scale: the taps computed at
/// run time from the dims' values, by the same formulas as resize_taps (in
/// f64), then gathered and weighted. The output length floor(in * scale)
/// must be a Dim: the scale a ratio p/q (q <= 4096) to 1e-6 relative (an
/// f32 scale of 1/300) and `in`'s coefficients making floor(in * p / q)
/// (Dim::floor_div). Nearest and
/// linear modes; cubic and tf_crop_and_resize need the dim pinned.
template <typename Refuse>
Tensor resize_symbolic_taps(const OnnxNode &node, const Tensor &y, int64_t a, double scale, const Refuse &refuse) {
  const Dim &in = y.shape()[a];
  std::string mode = node.attr_string("mode", "nearest"), ctm = node.attr_string("coordinate_transformation_mode", "half_pixel");
  std::string nearest = node.attr_string("nearest_mode", "round_prefer_floor");
  if (mode != "nearest" && mode != "linear")
    refuse("in mode '" + mode + "' is not supported (nearest and linear are)");
  if (!(scale > 0))
    refuse("by the scale " + std::to_string(scale) + " is not supported");
  int64_t p = 0, q = 0;
  for (int64_t d = 1; d <= 4096 && !q; ++d) {
    double n = std::nearbyint(scale * double(d));
    if (n >= 1 && std::abs(scale * double(d) - n) <= 1e-6 * n) // an f32 scale is within 6e-8 of p/q
      p = static_cast<int64_t>(n), q = d;
  }
  if (!q)
    refuse("by the scale " + std::to_string(scale) + " is not supported (not a ratio of small integers)");
  // floor(in * scale) as ONNX Runtime computes it with the rounded scale:
  // one less where in * p / q is a whole number and the scale is below p/q.
  Dim out = in;
  try {
    out = Dim::floor_div(in * Dim(p) - Dim(scale * double(q) < double(p) ? 1 : 0), Dim(q));
  } catch (const Error &) {
    refuse("by the scale " + std::to_string(p) + "/" + std::to_string(q) + " is not supported (its length is no Dim)");
  }
  DType f = DType::f64;
  auto c = [&](double v) { return sc(v, f); };
  Tensor o = ops::cast(ops::iota({out}, 0, DType::i64), f);
  Tensor n_in = ops::cast(ops::dim_values({in}, DType::i64, true), f), n_out = ops::cast(ops::dim_values({out}, DType::i64, true), f);
  Tensor x;
  if (ctm == "half_pixel")
    x = ops::sub(ops::div(ops::add(o, c(0.5)), c(scale)), c(0.5));
  else if (ctm == "pytorch_half_pixel")
    x = ops::where(ops::greater(n_out, c(1)), ops::sub(ops::div(ops::add(o, c(0.5)), c(scale)), c(0.5)), c(0));
  else if (ctm == "half_pixel_symmetric")
    x = ops::add(ops::mul(ops::div(n_in, c(2)), ops::sub(c(1), ops::div(n_out, ops::mul(c(scale), n_in)))),
                 ops::sub(ops::div(ops::add(o, c(0.5)), c(scale)), c(0.5)));
  else if (ctm == "align_corners")
    x = ops::where(ops::greater(n_out, c(1)),
                   ops::div(ops::mul(o, ops::sub(n_in, c(1))), ops::maximum(ops::sub(n_out, c(1)), c(1))), c(0));
  else if (ctm == "asymmetric")
    x = ops::div(o, c(scale));
  else if (ctm == "tf_half_pixel_for_nearest" || ctm == "tf_half_pixel_for_nn")
    x = ops::div(ops::add(o, c(0.5)), c(scale));
  else
    refuse("with coordinate_transformation_mode '" + ctm + "' is not supported");
  Tensor last = ops::sub(n_in, c(1));
  auto index = [&](const Tensor &v) { // clamped to [0, in - 1], as i64
    return ops::cast(ops::minimum(ops::maximum(v, c(0)), last), DType::i64);
  };
  std::vector<int64_t> wshape_axes; // the weights broadcast along every axis but a
  for (int64_t i = 0; i < y.rank(); ++i)
    if (i != a)
      wshape_axes.push_back(i);
  auto weight = [&](const Tensor &w) {
    Tensor t = ops::cast(w, y.dtype());
    return wshape_axes.empty() ? t : ops::unsqueeze(t, wshape_axes);
  };
  if (mode == "nearest") {
    Tensor r;
    Tensor fl = ops::floor(x), frac = ops::sub(x, fl);
    if (nearest == "round_prefer_floor")
      r = ops::where(ops::greater(frac, c(0.5)), ops::add(fl, c(1)), fl);
    else if (nearest == "round_prefer_ceil")
      r = ops::where(ops::less(frac, c(0.5)), fl, ops::add(fl, c(1)));
    else if (nearest == "floor")
      r = fl;
    else if (nearest == "ceil")
      r = ops::ceil(x);
    else
      refuse("with nearest_mode '" + nearest + "' is not supported");
    return ops::gather(y, index(r), a);
  }
  Tensor xc = ops::minimum(ops::maximum(x, c(0)), last);
  Tensor base = ops::floor(xc), t = ops::sub(xc, base);
  Tensor i0 = index(base), i1 = index(ops::add(base, c(1)));
  return ops::add(ops::mul(ops::gather(y, i0, a), weight(ops::sub(c(1), t))), ops::mul(ops::gather(y, i1, a), weight(t)));
}

/// Each element of `y` along axis `a` repeated k times (nearest Resize by
/// a whole-number scale): unsqueeze, broadcast and reshape, views that fuse
/// into the consumer's kernel (a gather by an index constant would read the
/// index per element).
Tensor repeat_along(const Tensor &y, int64_t a, int64_t k) {
  if (k == 1)
    return y;
  Shape wide = y.shape(), out = y.shape();
  wide.insert(wide.begin() + a + 1, Dim(k));
  out[a] = y.shape()[a] * Dim(k);
  return ops::reshape(ops::broadcast_to(ops::unsqueeze(y, {a + 1}), wide), out);
}

/// Resize along a symbolic dim `a` of `y`: a whole-number scale k whose
/// index map repeats each input element k times (nearest mode with a
/// coordinate transform that maps output o to input o / k, e.g. asymmetric
/// or half_pixel) as unsqueeze, broadcast and reshape (the map is checked on
/// the static lengths 1..16); anything else through resize_symbolic_taps.
Tensor resize_symbolic(const OnnxNode &node, const Tensor &y, int64_t a, std::optional<double> scale) {
  const Dim &in = y.shape()[a];
  auto refuse = [&](const std::string &why) {
    unsupported("Resize along the symbolic dim " + in.to_string() + " (axis " + std::to_string(a) + ") " + why +
                "; pin it with --dim");
  };
  if (!scale)
    refuse("by `sizes` is not supported (only a whole-number scale)");
  int64_t k = static_cast<int64_t>(std::llround(*scale));
  if (k < 1 || double(k) != *scale)
    return resize_symbolic_taps(node, y, a, *scale, refuse);
  // Each input element repeated k times (checked on the lengths 1..16):
  // views; any other map, the taps at run time.
  bool repeats = node.attr_string("mode", "nearest") == "nearest";
  for (int64_t n = 1; n <= 16 && repeats; ++n) {
    Taps taps = resize_taps(node, n, n * k, double(k), double(n * k));
    for (int64_t o = 0; o < n * k && repeats; ++o)
      repeats = taps.index.size() == 1 && taps.index[0][o] == o / k;
  }
  return repeats ? repeat_along(y, a, k) : resize_symbolic_taps(node, y, a, *scale, refuse);
}

Outs resize(const OnnxNode &node) {
  Tensor x = node.in(0);
  int64_t rank = x.rank();
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  if (node.opset() < 11) {
    scales = node.reals(1);
  } else {
    if (node.has(3))
      sizes = node.ints(3);
    else if (node.has(2))
      scales = node.reals(2);
  }
  // Opset 18: scales or sizes for the listed axes only (the others keep
  // their size), and sizes that keep the aspect ratio (one scale for the
  // listed axes: the smallest or the largest of sizes / input).
  std::optional<double> common_scale;
  if (node.has_attr("axes")) {
    std::vector<int64_t> axes = node.attr_ints("axes");
    std::vector<int64_t> full_sizes;
    std::vector<double> full_scales(static_cast<size_t>(rank), 1.0);
    size_t given = sizes.empty() ? scales.size() : sizes.size();
    if (given != axes.size())
      unsupported("Resize with axes needs one scale or size per listed axis (" + std::to_string(axes.size()) + "), not " +
                  std::to_string(given));
    if (!sizes.empty())
      for (int64_t a = 0; a < rank; ++a)
        full_sizes.push_back(x.shape()[a].is_static() ? x.shape()[a].value() : -1);
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t a = norm_axis(axes[i], rank);
      if (seen[a])
        unsupported("Resize axes lists axis " + std::to_string(a) + " twice");
      seen[a] = true;
      if (sizes.empty())
        full_scales[a] = scales[i];
      else
        full_sizes[a] = sizes[i];
    }
    for (int64_t a = 0; a < rank; ++a)
      if (!sizes.empty() && !seen[a] && full_sizes[a] < 0)
        unsupported("Resize sizes with axes leave the symbolic dim " + x.shape()[a].to_string() + " as it is; pin it with --dim");
    if (sizes.empty())
      scales = full_scales;
    else
      sizes = full_sizes;
  }
  std::string policy = node.attr_string("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch") {
    if (policy != "not_larger" && policy != "not_smaller")
      unsupported("Resize keep_aspect_ratio_policy '" + policy + "' is not stretch, not_larger or not_smaller");
    if (!sizes.empty()) {
      std::vector<int64_t> axes = node.attr_ints("axes");
      if (axes.empty())
        for (int64_t a = 0; a < rank; ++a)
          axes.push_back(a);
      for (int64_t a : axes) {
        a = norm_axis(a, rank);
        if (!x.shape()[a].is_static())
          unsupported("Resize keep_aspect_ratio_policy along the symbolic dim " + x.shape()[a].to_string() +
                      "; pin it with --dim");
        double r = double(sizes[a]) / double(x.shape()[a].value());
        common_scale = !common_scale ? r : policy == "not_larger" ? std::min(*common_scale, r) : std::max(*common_scale, r);
      }
      // The kept axes' sizes are round(scale * input) (half to even, as the
      // ONNX reference), resized by that one scale.
      for (int64_t a : axes) {
        a = norm_axis(a, rank);
        sizes[a] = static_cast<int64_t>(std::nearbyint(*common_scale * double(x.shape()[a].value())));
      }
      scales.assign(static_cast<size_t>(rank), 1.0);
      for (int64_t a : axes)
        scales[norm_axis(a, rank)] = *common_scale;
    }
  }
  if (node.attr_int("antialias", 0) != 0 && node.attr_string("mode", "nearest") != "nearest")
    for (int64_t a = 0; a < rank; ++a) {
      bool down = sizes.empty() ? scales[a] < 1.0
                                : x.shape()[a].is_static() && sizes[a] < x.shape()[a].value();
      if (down)
        unsupported("Resize antialias when downsampling (axis " + std::to_string(a) + ") is not supported");
    }
  if (!sizes.empty() && int64_t(sizes.size()) != rank)
    unsupported("Resize sizes must have one value per dim");
  if (sizes.empty() && int64_t(scales.size()) != rank)
    unsupported("Resize needs scales or sizes with one value per dim");
  // tf_crop_and_resize: the crop box (starts, then ends, per dim; a run-time
  // roi must be known at import) and the value where a coordinate lies off
  // the input on any axis (a mask multiplied over the axes, applied last).
  bool crop = node.attr_string("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize";
  std::vector<double> roi;
  if (crop) {
    if (node.opset() < 11 || !node.has(1))
      unsupported("Resize tf_crop_and_resize needs the roi input");
    roi = node.reals(1);
    if (int64_t(roi.size()) != 2 * rank)
      unsupported("Resize roi must have 2 values per dim (" + std::to_string(2 * rank) + "), not " +
                  std::to_string(roi.size()));
  }
  std::optional<Tensor> inside;
  Tensor y = x;
  for (int64_t a = 0; a < rank; ++a) {
    if (!x.shape()[a].is_static()) {
      if (crop)
        unsupported("Resize tf_crop_and_resize along the symbolic dim " + x.shape()[a].to_string() +
                    "; pin it with --dim");
      y = resize_symbolic(node, y, a, sizes.empty() ? std::optional<double>(scales[a]) : std::nullopt);
      continue;
    }
    int64_t in = x.shape()[a].value();
    int64_t out = sizes.empty() ? static_cast<int64_t>(std::floor(in * scales[a])) : sizes[a];
    double scale = sizes.empty() ? scales[a] : common_scale ? scales[a] : double(out) / double(in);
    std::pair<double, double> box = crop ? std::pair(roi[a], roi[a + rank]) : std::pair(0.0, 1.0);
    if (out == in && scale == 1.0 && box == std::pair(0.0, 1.0))
      continue;
    Taps taps = resize_taps(node, in, out, scale, sizes.empty() ? in * scales[a] : double(out), box);
    if (std::count(taps.outside.begin(), taps.outside.end(), true)) {
      std::vector<int64_t> mshape(rank, 1);
      mshape[a] = out;
      std::vector<double> m;
      for (bool off : taps.outside)
        m.push_back(off ? 0.0 : 1.0);
      Tensor ma = Tensor::from_f64(DType::f32, mshape, m);
      inside = inside ? ops::mul(*inside, ma) : ma;
    }
    // Nearest by a whole-number scale k whose map reads input o / k: views.
    if (int64_t k = out / in; taps.index.size() == 1 && !crop && k >= 2 && out == k * in) {
      bool repeats = true;
      for (int64_t o = 0; o < out && repeats; ++o)
        repeats = taps.index[0][static_cast<size_t>(o)] == o / k;
      if (repeats) {
        y = repeat_along(y, a, k);
        continue;
      }
    }
    Tensor acc;
    for (size_t k = 0; k < taps.index.size(); ++k) {
      Tensor g = ops::gather(y, Tensor::from_i64(DType::i64, {out}, taps.index[k]), a);
      if (taps.index.size() == 1) {
        acc = g;
        break;
      }
      std::vector<int64_t> wshape(rank, 1);
      wshape[a] = out;
      Tensor w = Tensor::from_f64(x.dtype(), wshape, taps.weight[k]);
      Tensor term = ops::mul(g, w);
      acc = k == 0 ? term : ops::add(acc, term);
    }
    y = acc;
  }
  if (inside)
    y = ops::where(ops::greater(*inside, sc(0.5, DType::f32)), y,
                   sc(node.attr_float("extrapolation_value", 0.0), y.dtype()));
  return {y};
}

Outs layer_norm(const OnnxNode &node) {
  Tensor x = node.in(0), scale = node.in(1);
  int64_t axis = norm_axis(node.attr_int("axis", -1), x.rank());
  double eps = node.attr_float("epsilon", 1e-5);
  std::optional<Tensor> bias;
  if (node.has(2))
    bias = node.in(2);
  bool exact_scale = scale.rank() == x.rank() - axis &&
                     std::equal(scale.shape().begin(), scale.shape().end(), x.shape().begin() + axis);
  if (exact_scale && (!bias || bias->shape() == scale.shape()) && !node.wants_output(1) && !node.wants_output(2))
    return {ops::layer_norm(x, scale, bias, eps)};
  std::vector<int64_t> axes;
  for (int64_t i = axis; i < x.rank(); ++i)
    axes.push_back(i);
  DType t = x.dtype();
  Tensor mean = ops::mean(x, axes, true);
  Tensor centered = ops::sub(x, mean);
  Tensor var = ops::mean(ops::mul(centered, centered), axes, true);
  Tensor inv = ops::rsqrt(ops::add(var, sc(eps, t)));
  Tensor y = ops::mul(ops::mul(centered, inv), scale);
  if (bias)
    y = ops::add(y, *bias);
  return {y, mean, inv};
}

// GroupNormalization (opset 18; 21 made scale and bias per channel): x
// [N, C, ...] as [N, G, C/G, ...], normalized over all but N and G.
Outs group_norm(const OnnxNode &node) {
  Tensor x = node.in(0), scale = node.in(1), bias = node.in(2);
  require(x.rank() >= 3, "GroupNormalization needs a rank >= 3 input [N, C, ...]");
  int64_t groups = node.attr_int("num_groups", 0);
  int64_t c = static_dim(x.shape()[1], "GroupNormalization's channel dim");
  require(groups > 0 && c % groups == 0, "GroupNormalization num_groups must divide the " + std::to_string(c) +
                                             " channels, got " + std::to_string(groups));
  double eps = node.attr_float("epsilon", 1e-5);
  DType t = x.dtype();
  Shape grouped{x.shape()[0], Dim(groups), Dim(c / groups)};
  grouped.insert(grouped.end(), x.shape().begin() + 2, x.shape().end());
  std::vector<int64_t> axes;
  for (int64_t i = 2; i < x.rank() + 1; ++i)
    axes.push_back(i);
  Tensor g = ops::reshape(x, grouped);
  Tensor centered = ops::sub(g, ops::mean(g, axes, true));
  Tensor var = ops::mean(ops::mul(centered, centered), axes, true);
  Tensor y = ops::reshape(ops::mul(centered, ops::rsqrt(ops::add(var, sc(eps, t)))), x.shape());
  auto per_channel = [&](const Tensor &v, const char *what) {
    int64_t n = v.rank() == 1 ? static_dim(v.shape()[0], "GroupNormalization's scale") : -1;
    require(n == c || n == groups, std::string("GroupNormalization ") + what + " must have C (" + std::to_string(c) +
                                       ") or num_groups (" + std::to_string(groups) + ") values");
    Tensor per = n == c ? v : ops::reshape(ops::broadcast_to(ops::reshape(v, {Dim(groups), Dim(1)}),
                                                       {Dim(groups), Dim(c / groups)}),
                                           {Dim(c)});
    std::vector<int64_t> tail;
    for (int64_t i = 1; i < x.rank() - 1; ++i)
      tail.push_back(i);
    return ops::unsqueeze(per, tail); // [C, 1, ...]
  };
  return {ops::add(ops::mul(y, per_channel(scale, "scale")), per_channel(bias, "bias"))};
}

// CenterCropPad (opset 18): each listed axis cropped to the middle or
// padded with zeros on both sides (the extra element after) to its size.
Outs center_crop_pad(const OnnxNode &node) {
  Tensor y = node.in(0);
  int64_t rank = y.rank();
  std::vector<int64_t> shape = node.ints(1), axes = node.attr_ints("axes");
  if (axes.empty())
    for (int64_t a = 0; a < rank; ++a)
      axes.push_back(a);
  require(shape.size() == axes.size(), "CenterCropPad needs one size per axis (" + std::to_string(axes.size()) +
                                           "), got " + std::to_string(shape.size()));
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = norm_axis(axes[i], rank), in = static_dim(y.shape()[a], "a CenterCropPad dim"), want = shape[i];
    require(want >= 0, "CenterCropPad sizes must be >= 0");
    if (want < in) {
      int64_t start = (in - want) / 2;
      y = ops::slice(y, {start}, {start + want}, {a});
    } else if (want > in) {
      std::vector<int64_t> pads(2 * static_cast<size_t>(rank), 0);
      pads[2 * a] = (want - in) / 2;
      pads[2 * a + 1] = want - in - (want - in) / 2;
      y = ops::pad(y, pads);
    }
  }
  return {y};
}

Outs instance_norm(const OnnxNode &node) {
  Tensor x = node.in(0), scale = node.in(1), bias = node.in(2);
  double eps = node.attr_float("epsilon", 1e-5);
  require(x.rank() >= 3, "InstanceNormalization needs a rank >= 3 input");
  std::vector<int64_t> axes;
  for (int64_t i = 2; i < x.rank(); ++i)
    axes.push_back(i);
  DType t = x.dtype();
  Tensor mean = ops::mean(x, axes, true);
  Tensor centered = ops::sub(x, mean);
  Tensor var = ops::mean(ops::mul(centered, centered), axes, true);
  Shape cshape(x.rank(), Dim(1));
  cshape[1] = x.shape()[1];
  Tensor y = ops::mul(centered, ops::rsqrt(ops::add(var, sc(eps, t))));
  return {ops::add(ops::mul(y, ops::reshape(scale, cshape)), ops::reshape(bias, cshape))};
}

Outs batch_norm(const OnnxNode &node) {
  if (node.attr_int("training_mode", 0) || node.wants_output(1))
    unsupported("BatchNormalization in training mode is not supported (inference only)");
  Tensor x = node.in(0);
  double eps = node.attr_float("epsilon", 1e-5);
  require(x.rank() >= 2, "BatchNormalization needs a rank >= 2 input");
  if (x.rank() == 4 || x.rank() == 2)
    return {ops::batch_norm(x, node.in(1), node.in(2), node.in(3), node.in(4), eps)};
  Shape cshape(x.rank(), Dim(1));
  cshape[1] = x.shape()[1];
  DType t = x.dtype();
  auto c = [&](size_t i) { return ops::reshape(node.in(i), cshape); };
  Tensor inv = ops::rsqrt(ops::add(c(4), sc(eps, t)));
  return {ops::add(ops::mul(ops::mul(ops::sub(x, c(3)), inv), c(1)), c(2))};
}

/// A 0/1 cumulative-sum mask [n, n]: M[i, j] = 1 where x[i] adds into y[j]
/// (i <= j forward, i >= j reverse; strict when exclusive). A constant for a
/// static n, else made from iotas.
Tensor cumsum_mask(const Dim &n, DType dtype, bool exclusive, bool reverse) {
  if (n.is_static()) {
    int64_t k = n.value();
    std::vector<double> mask(static_cast<size_t>(k * k), 0.0);
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < k; ++j)
        mask[i * k + j] = reverse ? (exclusive ? i > j : i >= j) : (exclusive ? i < j : i <= j);
    return Tensor::from_f64(dtype, {k, k}, mask);
  }
  Tensor i = ops::iota({n, n}, 0, DType::i64), j = ops::iota({n, n}, 1, DType::i64);
  Tensor on = reverse ? (exclusive ? ops::greater(i, j) : ops::greater_equal(i, j))
                      : (exclusive ? ops::less(i, j) : ops::less_equal(i, j));
  return ops::cast(on, dtype);
}

/// Cumulative sums along the last axis of `flat` [rows, n]. Up to
/// kCumSumBlock elements: one matmul with the [n, n] mask. Longer or
/// symbolic: blocks of kCumSumBlock (the signal padded with zeros to whole
/// blocks), each block's sums by a matmul with the block's mask, plus the
/// sum of the blocks before it (a matmul of the block totals with an
/// exclusive [blocks, blocks] mask): O(n·block + blocks²) work instead of
/// O(n²) — a 54 600-sample phase accumulation (Kokoro's sine source) is
/// 28 M multiply-adds per row, not 3 G.
constexpr int64_t kCumSumBlock = 512;
Tensor cumsum_rows(const Tensor &flat, bool exclusive, bool reverse) {
  const Dim rows = flat.shape()[0], n = flat.shape()[1];
  DType dt = flat.dtype();
  if (n.is_static() && n.value() <= kCumSumBlock)
    return ops::matmul(flat, cumsum_mask(n, dt, exclusive, reverse));
  const Dim blocks = Dim::ceil_div(n, Dim(kCumSumBlock)), padded = blocks * Dim(kCumSumBlock);
  Tensor xp;
  if (n.is_static()) {
    xp = ops::pad(flat, {0, 0, 0, padded.value() - n.value()}, 0.0);
  } else { // zeros past n: a gather clamped to n - 1, masked
    Tensor pos = ops::iota({padded}, 0, DType::i64);
    Tensor nv = dim_scalar(n);
    Tensor at = ops::minimum(pos, ops::maximum(ops::sub(nv, i64c(1)), i64c(0)));
    xp = ops::where(ops::less(pos, nv), ops::gather(flat, at, 1), sc(0, dt));
  }
  Tensor b = ops::reshape(xp, {rows, blocks, Dim(kCumSumBlock)});
  Tensor within = ops::matmul(b, cumsum_mask(Dim(kCumSumBlock), dt, exclusive, reverse)); // [rows, blocks, B]
  Tensor totals = ops::sum(b, {2});                                                        // [rows, blocks]
  Tensor before = ops::matmul(totals, cumsum_mask(blocks, dt, true, reverse));             // the blocks before (after)
  Tensor y = ops::reshape(ops::add(within, ops::unsqueeze(before, {2})), {rows, padded});
  if (n.is_static())
    return ops::slice(y, {0}, {n.value()}, {1});
  return ops::gather(y, ops::iota({n}, 0, DType::i64), 1);
}

Outs cumsum(const OnnxNode &node) {
  Tensor x = node.in(0);
  int64_t axis = norm_axis(node.ints(1).at(0), x.rank());
  bool exclusive = node.attr_int("exclusive", 0) != 0, reverse = node.attr_int("reverse", 0) != 0;
  const Dim nd = x.shape()[axis];
  // The axis moved last, rows flattened: cumsum_rows.
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < x.rank(); ++i)
    if (i != axis)
      perm.push_back(i);
  perm.push_back(axis);
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[perm[i]] = static_cast<int64_t>(i);
  Tensor moved = ops::transpose(x, perm);
  Shape ms = moved.shape();
  Dim rows(1);
  for (size_t k = 0; k + 1 < ms.size(); ++k)
    rows = rows * ms[k];
  Tensor flat = ops::reshape(moved, {rows, nd});
  Tensor y = cumsum_rows(flat, exclusive, reverse);
  return {ops::transpose(ops::reshape(y, ms), inverse)};
}

Outs gather_elements(const OnnxNode &node) {
  // y[i][j][k] = x[i][idx[i][j][k]][k] (axis 1): a one-hot select over the
  // axis, exact (one non-zero term per output).
  Tensor x = node.in(0), idx = node.in(1);
  int64_t axis = norm_axis(node.attr_int("axis", 0), x.rank());
  require(idx.rank() == x.rank(), "GatherElements indices must have the data's rank");
  int64_t n = static_dim(x.shape()[axis], "the GatherElements dim");
  Tensor i64 = ops::cast(idx, DType::i64);
  i64 = ops::where(ops::less(i64, sc(0, DType::i64)), ops::add(i64, sc(n, DType::i64)), i64);
  // Align: x[..., axis→ new trailing position], idx[..., 1] vs iota[n].
  Tensor xi = ops::unsqueeze(x, {x.rank()});                  // x with a trailing 1
  Tensor xt = ops::transpose(xi, [&] {
    std::vector<int64_t> p;
    for (int64_t i = 0; i <= x.rank(); ++i)
      p.push_back(i == axis ? x.rank() : i == x.rank() ? axis : i);
    return p;
  }());                                                     // axis moved to the end, 1 in its place
  Shape ishape = idx.shape();
  ishape.push_back(Dim(n));
  Tensor pos = ops::iota(ishape, static_cast<int64_t>(ishape.size()) - 1, DType::i64);
  Tensor hit = ops::equal(ops::unsqueeze(i64, {idx.rank()}), pos);
  // Broadcast x's other dims against idx's (idx dims ≤ x dims): slice x to idx's extent.
  std::vector<int64_t> starts, ends, axes;
  for (int64_t i = 0; i < x.rank(); ++i)
    if (i != axis && idx.shape()[i] != x.shape()[i]) {
      starts.push_back(0);
      ends.push_back(static_dim(idx.shape()[i], "a GatherElements dim"));
      axes.push_back(i);
    }
  if (!axes.empty())
    xt = ops::slice(xt, starts, ends, axes);
  Tensor picked = ops::where(hit, xt, sc(0, x.dtype()));
  return {ops::sum(picked, {idx.rank()}, false)};
}

Outs range(const OnnxNode &node) {
  if (node.is_runtime(0) || node.is_runtime(1) || node.is_runtime(2)) {
    // Values known only at run time: max(ceil((limit - start) / delta), 0)
    // elements, a dim bound at run time.
    Tensor start = node.in(0), limit = node.in(1), delta = node.in(2);
    DType dtype = start.dtype();
    auto f = [](const Tensor &t) { return ops::cast(t, DType::f64); };
    Tensor count = ops::cast(
        ops::maximum(ops::ceil(ops::div(ops::sub(f(limit), f(start)), f(delta))), sc(0, DType::f64)), DType::i64);
    std::optional<int64_t> bound; // from the values the run gives (maxc run), when all are known then
    std::optional<HostTensor> hs = node.value_hint(0), hl = node.value_hint(1), hd = node.value_hint(2);
    if (hs && hl && hd && hs->numel() == 1 && hl->numel() == 1 && hd->numel() == 1 && hd->get_f64(0) != 0)
      bound = std::max<int64_t>(
          0, static_cast<int64_t>(std::ceil((hl->get_f64(0) - hs->get_f64(0)) / hd->get_f64(0))));
    Dim n = node.bind(node.is_runtime(1) ? 1 : node.is_runtime(0) ? 0 : 2, count, "n", bound);
    Tensor i = ops::iota({n}, 0, dtype);
    return {ops::add(ops::mul(i, ops::reshape(delta, Shape{})), ops::reshape(start, Shape{}))};
  }
  if (node.val(1).kind != Val::Kind::sym) {
    HostTensor start = node.known(0), limit = node.known(1), delta = node.known(2);
    DType dtype = start.dtype();
    double s = start.get_f64(0), l = limit.get_f64(0), d = delta.get_f64(0);
    if (d == 0)
      unsupported("Range with delta 0");
    int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((l - s) / d)));
    Tensor i = ops::iota({Dim(n)}, 0, dtype);
    return {ops::add(ops::mul(i, sc(d, dtype)), sc(s, dtype))};
  }
  // A symbolic limit: start and delta must be static integers.
  std::vector<Dim> lim = node.dims(1);
  HostTensor start = node.known(0);
  double sd = start.get_f64(0), dd = node.reals(2).at(0);
  if (lim.size() != 1 || (dd != 1 && dd != -1) || sd != std::floor(sd))
    unsupported("Range with a symbolic limit needs a whole-number start and delta 1 or -1");
  int64_t s = static_cast<int64_t>(sd), d = static_cast<int64_t>(dd);
  DType dtype = start.dtype();
  Dim n = d == 1 ? lim[0] - Dim(s) : Dim(s) - lim[0];
  Tensor i = ops::iota({n}, 0, dtype);
  return {ops::add(ops::mul(i, sc(double(d), dtype)), sc(double(s), dtype))};
}

/// NonZero, a data-dependent output: [rank, n], n (the nonzero count) a dim
/// bound at run time, at most x's element count. Composed: the k-th nonzero
/// element is the one whose exclusive prefix count of nonzeros is k (a
/// [n, N] comparison, so N is limited as TopK's n), its flat index split
/// into coordinates.
Outs non_zero(const OnnxNode &node) {
  Tensor x = node.in(0);
  require(x.rank() >= 1, "NonZero of a scalar is not supported");
  int64_t total = static_dim(shape_numel(x.shape()), "NonZero's element count");
  if (total > 4096)
    unsupported("NonZero over more than 4096 elements is not supported");
  Tensor m = ops::cast(ops::not_equal(ops::reshape(x, {Dim(total)}), sc(0, x.dtype())), DType::i64); // [N]
  Shape nn{Dim(total), Dim(total)};
  Tensor before = ops::less(ops::iota(nn, 0, DType::i64), ops::iota(nn, 1, DType::i64)); // i < j
  Tensor prefix = ops::sum(ops::where(before, ops::unsqueeze(m, {1}), i64c(0)), {0}); // [N]: nonzeros before j
  Dim n = node.bind(0, ops::sum(m, {0}), "n", total);
  Shape kn{n, Dim(total)};
  Tensor hit = ops::logical_and(ops::equal(ops::unsqueeze(prefix, {0}), ops::iota(kn, 0, DType::i64)),
                                ops::equal(ops::unsqueeze(m, {0}), i64c(1))); // [n, N]
  Tensor flat = ops::sum(ops::where(hit, ops::iota(kn, 1, DType::i64), i64c(0)), {1}); // [n]
  std::vector<Tensor> coords;
  int64_t stride = total;
  for (int64_t d = 0; d < x.rank(); ++d) {
    int64_t size = x.shape()[d].value();
    stride = size ? stride / size : 0;
    Tensor c = stride ? ops::div(flat, i64c(stride)) : flat;
    coords.push_back(ops::unsqueeze(size ? ops::mod(c, i64c(size)) : c, {0}));
  }
  return {coords.size() == 1 ? coords[0] : ops::concat(coords, 0)};
}

Outs trilu(const OnnxNode &node) {
  Tensor x = node.in(0);
  int64_t k = node.has(1) ? node.ints(1).at(0) : 0;
  bool upper = node.attr_int("upper", 1) != 0;
  require(x.rank() >= 2, "Trilu needs a rank >= 2 input");
  Shape s = x.shape();
  Shape m{s[s.size() - 2], s[s.size() - 1]};
  Tensor rows = ops::iota(m, 0, DType::i64), cols = ops::iota(m, 1, DType::i64);
  Tensor diff = ops::sub(cols, rows); // j - i
  Tensor keep = upper ? ops::greater_equal(diff, sc(double(k), DType::i64))
                      : ops::less_equal(diff, sc(double(k), DType::i64));
  return {ops::where(keep, x, sc(0, x.dtype()))};
}

Outs arg_reduce(const OnnxNode &node) {
  Tensor x = node.in(0);
  int64_t axis = norm_axis(node.attr_int("axis", 0), x.rank());
  bool keep = node.attr_int("keepdims", 1) != 0;
  bool is_max = node.op() == "ArgMax";
  if (node.attr_int("select_last_index", 0)) {
    // The last extremum = n-1 - (first extremum of the reversed axis).
    int64_t n = static_dim(x.shape()[axis], "the reduced dim");
    Tensor rev = ops::slice(x, {-1}, {-n - 1}, {axis}, {-1});
    Tensor i = is_max ? ops::argmax(rev, axis, keep) : ops::argmin(rev, axis, keep);
    return {ops::sub(sc(double(n - 1), DType::i64), i)};
  }
  return {is_max ? ops::argmax(x, axis, keep) : ops::argmin(x, axis, keep)};
}

Outs depth_space(const OnnxNode &node) {
  Tensor x = node.in(0);
  int64_t b = node.attr_int("blocksize", 0);
  if (x.rank() != 4 || b <= 0)
    unsupported("needs a rank-4 input and a positive blocksize");
  Dim N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  if (node.op() == "SpaceToDepth") {
    Tensor t = ops::reshape(x, {N, C, H / Dim(b), Dim(b), W / Dim(b), Dim(b)});
    t = ops::transpose(t, {0, 3, 5, 1, 2, 4});
    return {ops::reshape(t, {N, C * Dim(b * b), H / Dim(b), W / Dim(b)})};
  }
  bool crd = node.attr_string("mode", "DCR") == "CRD";
  Dim c = C / Dim(b * b);
  Tensor t = crd ? ops::reshape(x, {N, c, Dim(b), Dim(b), H, W}) : ops::reshape(x, {N, Dim(b), Dim(b), c, H, W});
  t = crd ? ops::transpose(t, {0, 1, 4, 2, 5, 3}) : ops::transpose(t, {0, 3, 4, 1, 5, 2});
  return {ops::reshape(t, {N, c, H * Dim(b), W * Dim(b)})};
}

/// TopK: the core top_k (Ops/TopK.h) over the axis moved last, k static
/// or a dim bound at run time from its input (at most the axis' size).
Outs top_k(const OnnxNode &node) {
  Tensor x = node.in(0);
  int64_t axis = norm_axis(node.attr_int("axis", -1), x.rank());
  bool largest = node.attr_int("largest", 1) != 0;
  int64_t n = static_dim(x.shape()[axis], "the TopK dim");
  // k from a run-time input: a dim bound at run time, at most n.
  Dim k = node.opset() >= 10 && node.is_runtime(1) ? node.bind(1, node.element(1, 0), "k", n)
                                                    : Dim(node.opset() >= 10 ? node.ints(1).at(0) : node.attr_int("k", 1));
  if (k.is_static() && (k.value() < 0 || k.value() > n))
    unsupported("TopK k=" + k.to_string() + " is out of range");
  std::vector<int64_t> perm, inverse(x.rank());
  for (int64_t i = 0; i < x.rank(); ++i)
    if (i != axis)
      perm.push_back(i);
  perm.push_back(axis);
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[perm[i]] = static_cast<int64_t>(i);
  std::vector<Tensor> top = ops::top_k(ops::transpose(x, perm), k, largest);
  return {ops::transpose(top[0], inverse), ops::transpose(top[1], inverse)};
}

/// Einsum: a label repeated in one operand first takes that operand's
/// diagonal (a gather); then each operand is permuted
/// to a common label order with size-1 dims for labels it lacks, the
/// operands are multiplied (broadcasting), the labels missing from the
/// output summed. Exact; intermediate size is the product of all label sizes.
Outs einsum(const OnnxNode &node) {
  std::string eq;
  for (char c : node.attr_string("equation", ""))
    if (c != ' ')
      eq += c;
  std::vector<Tensor> xs;
  for (size_t i = 0; i < node.num_inputs(); ++i)
    xs.push_back(node.in(i));
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  if (terms.size() != xs.size())
    unsupported("Einsum equation '" + eq + "' does not match its " + std::to_string(xs.size()) + " inputs");
  // "..." becomes the labels 0, 1, ... (right-aligned, like NumPy).
  size_t ellipsis_rank = 0;
  for (size_t i = 0; i < terms.size(); ++i)
    if (terms[i].find("...") != std::string::npos)
      ellipsis_rank = std::max(ellipsis_rank, size_t(xs[i].rank()) - (terms[i].size() - 3));
  auto expand = [&](std::string t, size_t rank) {
    size_t e = t.find("...");
    if (e == std::string::npos)
      return t;
    std::string labels;
    for (size_t k = ellipsis_rank - rank; k < ellipsis_rank; ++k)
      labels += static_cast<char>('0' + k);
    return t.replace(e, 3, labels);
  };
  std::string all, written;
  for (size_t i = 0; i < terms.size(); ++i) {
    size_t explicit_labels = terms[i].size() - (terms[i].find("...") != std::string::npos ? 3 : 0);
    terms[i] = expand(terms[i], size_t(xs[i].rank()) - explicit_labels);
    if (terms[i].size() != size_t(xs[i].rank()))
      unsupported("Einsum term '" + terms[i] + "' does not match a rank-" + std::to_string(xs[i].rank()) + " input");
    written += terms[i]; // the implicit output counts labels as written
    // A label repeated in one operand takes the diagonal over its axes: the
    // two axes moved last, flattened, and every (n+1)-th element gathered
    // (the label once, at the end), until no label repeats.
    for (size_t p = 0; p < terms[i].size(); ++p) {
      size_t q = terms[i].find(terms[i][p], p + 1);
      if (q == std::string::npos)
        continue;
      const Dim &dp = xs[i].shape()[p], &dq = xs[i].shape()[q];
      if (!(dp == dq))
        unsupported("Einsum label '" + std::string(1, terms[i][p]) + "' repeated in term '" + terms[i] +
                    "' has the dims " + dp.to_string() + " and " + dq.to_string());
      int64_t n = static_dim(dp, "an Einsum diagonal's dim");
      std::vector<int64_t> perm;
      std::string rest;
      Shape flat;
      for (size_t k = 0; k < terms[i].size(); ++k)
        if (k != p && k != q) {
          perm.push_back(static_cast<int64_t>(k));
          rest += terms[i][k];
          flat.push_back(xs[i].shape()[k]);
        }
      perm.push_back(static_cast<int64_t>(p));
      perm.push_back(static_cast<int64_t>(q));
      flat.emplace_back(n * n);
      std::vector<int64_t> diag;
      for (int64_t k = 0; k < n; ++k)
        diag.push_back(k * (n + 1));
      xs[i] = ops::gather(ops::reshape(ops::transpose(xs[i], perm), flat),
                          Tensor::from_i64(DType::i64, {n}, diag), static_cast<int64_t>(flat.size()) - 1);
      terms[i] = rest + terms[i][p];
      p = size_t(-1); // the term changed: look again from its start
    }
    for (char c : terms[i])
      if (all.find(c) == std::string::npos)
        all += c;
  }
  std::string out;
  if (arrow != std::string::npos) {
    out = expand(eq.substr(arrow + 2), ellipsis_rank);
  } else { // implicit: ellipsis labels, then labels seen once, alphabetically
    std::string once;
    for (char c : all) {
      auto n = std::count(written.begin(), written.end(), c);
      if (c >= 'A' && n == 1)
        once += c;
    }
    std::sort(once.begin(), once.end());
    for (size_t k = 0; k < ellipsis_rank; ++k)
      out += static_cast<char>('0' + k);
    out += once;
  }
  Tensor acc;
  for (size_t i = 0; i < xs.size(); ++i) {
    std::vector<int64_t> perm;
    Shape shape;
    for (char c : all) {
      size_t p = terms[i].find(c);
      if (p != std::string::npos) {
        perm.push_back(static_cast<int64_t>(p));
        shape.push_back(xs[i].shape()[p]);
      } else {
        shape.emplace_back(1);
      }
    }
    Tensor t = ops::reshape(ops::transpose(xs[i], perm), shape);
    acc = i == 0 ? t : ops::mul(acc, t);
  }
  std::vector<int64_t> reduce;
  std::string kept;
  for (size_t k = 0; k < all.size(); ++k)
    if (out.find(all[k]) == std::string::npos)
      reduce.push_back(static_cast<int64_t>(k));
    else
      kept += all[k];
  if (!reduce.empty())
    acc = ops::sum(acc, reduce, false);
  std::vector<int64_t> perm;
  for (char c : out) {
    size_t p = kept.find(c);
    if (p == std::string::npos)
      unsupported("Einsum output label '" + std::string(1, c) + "' is not an input label");
    perm.push_back(static_cast<int64_t>(p));
  }
  return {perm.empty() ? acc : ops::transpose(acc, perm)};
}

Tensor cast_to(const OnnxNode &node, const Tensor &x, int32_t to) {
  std::optional<DType> dt = dtype_from_onnx(to);
  if (!dt)
    throw Error(ErrorCode::OnnxUnsupportedType, "Cast to " + onnx_dtype_name(to) + " is not supported");
  return x.dtype() == *dt ? x : ops::cast(x, *dt);
}

} // namespace

std::vector<Tensor> map_node(const OnnxNode &node) {
  const std::string &op = node.op();
  static const std::set<std::string> unary = {
      "Abs", "Neg", "Exp", "Log", "Sqrt", "Tanh", "Sigmoid", "Relu", "Erf", "Sin", "Cos", "Tan", "Floor",
      "Ceil", "Round", "Sign", "Not", "Reciprocal", "Softsign", "Softplus", "Sinh", "Cosh", "IsNaN", "IsInf",
      "Elu", "Celu", "Selu", "LeakyRelu", "ThresholdedRelu", "HardSigmoid", "HardSwish", "Shrink", "Mish", "Gelu"};
  static const std::set<std::string> binary = {"Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "Greater",
                                               "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Mod"};
  if (unary.count(op))
    return {unary_op(op, node.in(0), node,
                     [&](const std::string &name, double fallback) { return node.attr_float(name, fallback); })};
  if (binary.count(op))
    return {binary_op(op, node.in(0), node.in(1), node)};
  if (op == "Max" || op == "Min" || op == "Sum" || op == "Mean") {
    Tensor acc = node.in(0);
    for (size_t i = 1; i < node.num_inputs(); ++i)
      acc = binary_op(op == "Mean" ? "Sum" : op, acc, node.in(i), node);
    if (op == "Mean")
      acc = ops::div(acc, sc(double(node.num_inputs()), acc.dtype()));
    return {acc};
  }
  if (op.rfind("Reduce", 0) == 0)
    return {reduce_op(node, node.in(0))};
  if (op == "Softmax" || op == "LogSoftmax" || op == "Hardmax")
    return {softmax_like(node, node.in(0))};
  if (op == "Identity")
    return {node.in(0)};
  if (op == "Dropout") {
    if (node.has(2) && node.known(2).get_i64(0))
      unsupported("Dropout in training mode is not supported");
    Tensor x = node.in(0);
    if (node.wants_output(1))
      return {x, ops::full(1, DType::boolean, x.shape())};
    return {x};
  }
  if (op == "Cast")
    return {cast_to(node, node.in(0), static_cast<int32_t>(node.attr_int("to", 0)))};
  if (op == "CastLike") {
    Tensor x = node.in(0), like = node.in(1);
    return {x.dtype() == like.dtype() ? x : ops::cast(x, like.dtype())};
  }
  if (op == "Clip") {
    Tensor x = node.in(0);
    DType t = x.dtype();
    std::optional<Tensor> lo, hi;
    if (node.opset() < 11) {
      if (node.has_attr("min")) lo = sc(node.attr_float("min", 0), t);
      if (node.has_attr("max")) hi = sc(node.attr_float("max", 0), t);
    } else {
      if (node.has(1)) lo = node.in(1);
      if (node.has(2)) hi = node.in(2);
    }
    if (lo) x = ops::maximum(x, *lo);
    if (hi) x = ops::minimum(x, *hi);
    return {x};
  }
  if (op == "PRelu") {
    Tensor x = node.in(0), slope = node.in(1);
    if (node.opset() < 7 && slope.rank() == 1 && x.rank() > 2) { // per-channel slope (no broadcasting before 7)
      Shape s(x.rank() - 1, Dim(1));
      s[0] = slope.shape()[0];
      slope = ops::reshape(slope, s);
    }
    return {ops::where(ops::less(x, sc(0, x.dtype())), ops::mul(x, slope), x)};
  }
  if (op == "Conv") return conv(node);
  if (op == "ConvTranspose") return conv_transpose(node);
  if (op == "MaxPool" || op == "AveragePool") return pool(node);
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    Tensor x = node.in(0);
    if (op == "GlobalAveragePool" && x.rank() == 4)
      return {ops::global_avg_pool2d(x)};
    std::vector<int64_t> axes;
    for (int64_t i = 2; i < x.rank(); ++i)
      axes.push_back(i);
    return {op == "GlobalAveragePool" ? ops::mean(x, axes, true) : ops::max(x, axes, true)};
  }
  if (op == "BatchNormalization") return batch_norm(node);
  if (op == "InstanceNormalization") return instance_norm(node);
  if (op == "GroupNormalization") return group_norm(node);
  if (op == "CenterCropPad") return center_crop_pad(node);
  if (op == "LayerNormalization") return layer_norm(node);
  if (op == "MeanVarianceNormalization") {
    Tensor x = node.in(0);
    std::vector<int64_t> axes = node.attr_ints("axes", {0, 2, 3});
    Tensor mean = ops::mean(x, axes, true);
    Tensor c = ops::sub(x, mean);
    Tensor var = ops::mean(ops::mul(c, c), axes, true);
    return {ops::div(c, ops::add(ops::sqrt(var), sc(1e-9, x.dtype())))};
  }
  if (op == "Gemm") return gemm(node);
  if (op == "MatMul") return matmul(node);
  if (op == "Transpose") {
    Tensor x = node.in(0);
    std::vector<int64_t> perm = node.attr_ints("perm");
    if (perm.empty())
      for (int64_t i = x.rank() - 1; i >= 0; --i)
        perm.push_back(i);
    return {ops::transpose(x, perm)};
  }
  if (op == "Reshape") return reshape(node);
  if (op == "Flatten") {
    Tensor x = node.in(0);
    int64_t axis = node.attr_int("axis", 1);
    require(axis >= -x.rank() && axis <= x.rank(), "Flatten axis is out of range");
    axis = axis < 0 ? axis + x.rank() : axis;
    Dim outer = 1, inner = 1;
    for (int64_t i = 0; i < x.rank(); ++i)
      (i < axis ? outer : inner) = (i < axis ? outer : inner) * x.shape()[i];
    return {ops::reshape(x, {outer, inner})};
  }
  if (op == "Squeeze") {
    Tensor x = node.in(0);
    std::vector<int64_t> axes = axes_arg(node, 1, 13);
    for (int64_t &a : axes)
      a = norm_axis(a, x.rank());
    return {ops::squeeze(x, axes)};
  }
  if (op == "Unsqueeze") {
    Tensor x = node.in(0);
    std::vector<int64_t> axes = axes_arg(node, 1, 13);
    int64_t out_rank = x.rank() + static_cast<int64_t>(axes.size());
    for (int64_t &a : axes)
      a = norm_axis(a, out_rank);
    std::sort(axes.begin(), axes.end());
    return {ops::unsqueeze(x, axes)};
  }
  if (op == "Concat") {
    std::vector<Tensor> xs;
    for (size_t i = 0; i < node.num_inputs(); ++i)
      if (node.has(i))
        xs.push_back(node.in(i));
    int64_t axis = norm_axis(node.attr_int("axis", 0), xs.at(0).rank());
    // Empty inputs add nothing (ONNX allows [0]-shaped pieces).
    std::vector<Tensor> kept;
    for (const Tensor &t : xs)
      if (!(t.shape()[axis].is_static() && t.shape()[axis].value() == 0))
        kept.push_back(t);
    if (kept.empty())
      kept.push_back(xs[0]);
    if (kept.size() == 1)
      return {kept[0]};
    return {ops::concat(reconcile_symbolic_dims(kept, axis), axis)};
  }
  if (op == "Split") return split(node);
  if (op == "Slice") return slice(node);
  if (op == "Gather") {
    Tensor x = node.in(0);
    int64_t axis = norm_axis(node.attr_int("axis", 0), x.rank());
    const Val &iv = node.val(1);
    Tensor idx;
    if (iv.kind == Val::Kind::known && x.shape()[axis].is_static()) {
      int64_t n = x.shape()[axis].value();
      std::vector<int64_t> v = iv.data.to_i64();
      for (int64_t &i : v) {
        if (i < -n || i >= n)
          throw Error(ErrorCode::OnnxAttribute, "Gather index " + std::to_string(i) + " is out of range");
        if (i < 0)
          i += n;
      }
      idx = Tensor::from_i64(DType::i64, iv.data.shape(), v);
    } else {
      idx = node.in(1);
      if (idx.dtype() != DType::i64)
        idx = ops::cast(idx, DType::i64);
      // Negative indices count from the end.
      Tensor n = ops::reshape(ops::sum(ops::full(1, DType::i64, {x.shape()[axis]}), {0}), {});
      idx = ops::where(ops::less(idx, sc(0, DType::i64)), ops::add(idx, n), idx);
    }
    return {ops::gather(x, idx, axis)};
  }
  if (op == "GatherElements") return gather_elements(node);
  if (op == "Expand") {
    Tensor x = node.in(0);
    std::vector<Dim> target;
    if (node.is_runtime(1)) {
      // A shape known only at run time: a dim where x has a static size
      // other than 1 is x's (ONNX allows only 1 or that size there); the
      // others are bound at run time.
      Tensor t = node.in(1);
      int64_t r = t.rank() == 1 && t.shape()[0].is_static() ? t.shape()[0].value() : -1;
      require(r >= 0, "Expand's shape must be a vector of static length");
      for (int64_t k = 0; k < r; ++k) {
        int64_t xi = k - (r - x.rank());
        if (xi >= 0 && x.shape()[xi].is_static() && x.shape()[xi].value() != 1)
          target.push_back(x.shape()[xi]);
        else
          target.push_back(node.bind(1, node.element(1, k), "d" + std::to_string(k), std::nullopt, k));
      }
    } else {
      target = node.dims(1);
    }
    Shape out = broadcast_shapes(x.shape(), Shape(target.begin(), target.end()));
    return {out == x.shape() ? x : ops::broadcast_to(x, out)};
  }
  if (op == "Tile") {
    Tensor x = node.in(0);
    if (!node.is_runtime(1))
      return {ops::tile(x, node.ints(1))};
    // Repeats known only at run time: [.., n, ..] → [.., 1, n, ..] broadcast
    // to [.., r, n, ..] → [.., r*n, ..].
    std::vector<Dim> reps = node.runtime_dims(1);
    require(static_cast<int64_t>(reps.size()) == x.rank(), "Tile needs one repeat per dim");
    std::vector<int64_t> axes;
    Shape wide, out;
    for (int64_t i = 0; i < x.rank(); ++i) {
      axes.push_back(2 * i);
      wide.push_back(reps[i]);
      wide.push_back(x.shape()[i]);
      out.push_back(reps[i] * x.shape()[i]);
    }
    return {ops::reshape(ops::broadcast_to(ops::unsqueeze(x, axes), wide), out)};
  }
  if (op == "Where") {
    Tensor c = node.in(0), a = node.in(1), b = node.in(2);
    return {ops::where(c, a, b)};
  }
  if (op == "Pad") return pad(node);
  if (op == "Resize") return resize(node);
  if (op == "ConstantOfShape") {
    std::vector<Dim> shape = node.runtime_dims(0);
    double value = 0;
    DType dtype = DType::f32;
    if (const auto *a = node.attr("value")) {
      HostTensor v = tensor_attr(node, *a);
      if (v.numel() != 1)
        unsupported("ConstantOfShape value must hold one element");
      value = v.get_f64(0);
      dtype = v.dtype();
    }
    return {ops::full(value, dtype, Shape(shape.begin(), shape.end()))};
  }
  if (op == "EyeLike") {
    Tensor x = node.in(0);
    int64_t k = node.attr_int("k", 0);
    DType dtype = node.has_attr("dtype") ? *dtype_from_onnx(static_cast<int32_t>(node.attr_int("dtype", 1)))
                                         : x.dtype();
    Tensor rows = ops::iota(x.shape(), 0, DType::i64), cols = ops::iota(x.shape(), 1, DType::i64);
    return {ops::cast(ops::equal(ops::sub(cols, rows), sc(double(k), DType::i64)), dtype)};
  }
  if (op == "Range") return range(node);
  if (op == "Trilu") return trilu(node);
  if (op == "NonZero") return non_zero(node);
  if (op == "CumSum") return cumsum(node);
  if (op == "ArgMax" || op == "ArgMin") return arg_reduce(node);
  if (op == "DepthToSpace" || op == "SpaceToDepth") return depth_space(node);
  if (op == "TopK") return top_k(node);
  if (op == "Einsum") return einsum(node);
  if (op == "LSTM" || op == "GRU" || op == "RNN") return recurrent(node);
  if (is_contrib_op(node.proto().domain(), op)) return contrib(node);
  if (is_quantized_op(op)) return quantized(node);
  if (is_composite_op(op)) return composite(node);
  if (op == "Shape" || op == "Size" || op == "Constant")
    throw Error(ErrorCode::Internal, op + " should have been folded");
  throw Error(ErrorCode::OnnxUnsupportedOp, "the op " + op + " is not supported");
}

} // namespace maxc::onnx_import

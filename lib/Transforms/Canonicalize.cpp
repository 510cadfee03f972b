#include "maxc/Transforms/Canonicalize.h"

#include "maxc/Ops/Ops.h"
#include "maxc/Realization/EagerRealizationContext.h"
#include "maxc/Transforms/ConvTransposeAsMatmul.h"
#include "maxc/Transforms/DequantizedMatmul.h"
#include "maxc/Transforms/FuseActivations.h"
#include "maxc/Transforms/FuseNorms.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace maxc {

namespace {

/// The node's result type: a rule replaces the node only by something of
/// exactly this type.
const TensorType &result_type(const RewriteContext &rc, const Node &node) {
  return rc.match.graph().type_of(node.results[0]);
}

/// x itself, where x is operand `i` of `node` and already has the node's type.
std::vector<Tensor> forward(const RewriteContext &rc, const Node &node, const std::vector<Tensor> &operands,
                            size_t i) {
  if (operands[i].type() != result_type(rc, node))
    return {};
  return {operands[i]};
}

class PowByConstant final : public RewritePattern {
public:
  const char *name() const override { return "pow-by-constant"; }
  const char *root_op() const override { return "pow"; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &in, RewriteContext &rc) const override {
    std::optional<double> c = rc.match.splat(node.operands[1]);
    const Tensor &x = in[0];
    if (!c || x.type() != result_type(rc, node))
      return {};
    DType d = x.dtype();
    if (*c == 1)
      return {x};
    if (*c == 2)
      return {x * x};
    if (*c == 3)
      return {x * x * x};
    if (*c == 0.5)
      return {ops::sqrt(x)};
    if (*c == -0.5)
      return {ops::rsqrt(x)};
    if (*c == -1)
      return {ops::full(1.0, d) / x};
    if (*c == 0)
      return {ops::full(1.0, d, x.shape())};
    return {};
  }
};

class DivBySqrt final : public RewritePattern {
public:
  const char *name() const override { return "div-by-sqrt"; }
  const char *root_op() const override { return "div"; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &in, RewriteContext &rc) const override {
    // Only where the sqrt is read here alone: else it stays and the rsqrt
    // would be work on top of it.
    const Node *root = rc.match.producer_op(node.operands[1], "sqrt");
    if (!root || !is_float(in[0].dtype()) || !rc.match.single_use(node.operands[1]))
      return {};
    Tensor y = ops::mul(in[0], ops::rsqrt(rc.value(root->operands[0])));
    return {y};
  }
};

class DivByConstant final : public RewritePattern {
public:
  const char *name() const override { return "div-by-constant"; }
  const char *root_op() const override { return "div"; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &in, RewriteContext &rc) const override {
    std::optional<double> c = rc.match.splat(node.operands[1]);
    const Tensor &x = in[0];
    if (!c || !is_float(x.dtype()) || *c == 0 || !std::isfinite(*c) || *c == 1 || x.type() != result_type(rc, node))
      return {};
    int exp = 0;
    if (std::frexp(*c, &exp) != 0.5 && !worth_a_rounding(node, rc.match)) // 1/c not exact: ≤ 1 ulp off
      return {};
    return {x * ops::full(1.0 / *c, x.dtype())};
  }

private:
  /// Whether x · (1/c), one ulp from x / c, may stand for it: not for a
  /// one-element quotient (nothing to gain), nor for one rounded to an
  /// integer (round, floor, ceil, a cast to an integer), directly or through
  /// a few elementwise steps — quantization: ONNX's QuantizeLinear divides,
  /// and QLinearConv's multiplier (x_scale · w_scale) / y_scale scales the
  /// accumulator before the rounding; one ulp moves a tie or a boundary.
  static bool worth_a_rounding(const Node &node, const GraphMatcher &m) {
    const Graph &g = m.graph();
    if (shape_numel(g.type_of(node.results[0]).shape) == Dim(1))
      return false;
    return !rounded(node.results[0], m, 4);
  }

  static bool rounded(ValueId v, const GraphMatcher &m, int depth) {
    static const std::set<std::string> through = {"add", "sub", "mul", "div", "neg", "maximum", "minimum",
                                                  "where", "reshape", "broadcast_to"};
    const Graph &g = m.graph();
    for (int64_t r : m.readers().of(v)) {
      if (r < 0)
        continue;
      const Node &reader = g.nodes()[static_cast<size_t>(r)];
      if (reader.op == "round" || reader.op == "floor" || reader.op == "ceil" ||
          (reader.op == "cast" && !is_float(reader.attrs.get_dtype("dtype"))))
        return true;
      if (depth > 1 && through.count(reader.op))
        for (ValueId out : reader.results)
          if (rounded(out, m, depth - 1))
            return true;
    }
    return false;
  }
};

/// x·1, 1·x, x-0, x/1 (and x+0, 0+x for integers, where -0 does not exist).
class Identity final : public RewritePattern {
public:
  explicit Identity(const char *op) : op_(op) {}
  const char *name() const override { return "identity"; }
  const char *root_op() const override { return op_; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &in, RewriteContext &rc) const override {
    const std::string &op = node.op;
    bool integral = !is_float(in[0].dtype());
    for (size_t side = 0; side < 2; ++side) {
      std::optional<double> c = rc.match.splat(node.operands[1 - side]);
      if (!c)
        continue;
      bool neutral = op == "mul"   ? *c == 1
                     : op == "div" ? side == 0 && *c == 1
                     : op == "sub" ? side == 0 && *c == 0
                     : op == "add" ? integral && *c == 0
                                   : false;
      if (neutral)
        if (auto y = forward(rc, node, in, side); !y.empty())
          return y;
    }
    return {};
  }

private:
  const char *op_;
};

class CastChain final : public RewritePattern {
public:
  const char *name() const override { return "cast-chain"; }
  const char *root_op() const override { return "cast"; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &in, RewriteContext &rc) const override {
    DType to = result_type(rc, node).dtype;
    if (in[0].dtype() == to)
      return forward(rc, node, in, 0);
    const Node *inner = rc.match.producer_op(node.operands[0], "cast");
    if (!inner)
      return {};
    const Tensor &x = rc.value(inner->operands[0]);
    if (!cast_is_exact(x.dtype(), in[0].dtype()))
      return {};
    return {x.dtype() == to ? x : ops::cast(x, to)};
  }
};

class ReshapeChain final : public RewritePattern {
public:
  const char *name() const override { return "reshape-chain"; }
  const char *root_op() const override { return "reshape"; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &in, RewriteContext &rc) const override {
    const TensorType &type = result_type(rc, node);
    if (in[0].type() == type)
      return {in[0]};
    const Node *inner = rc.match.producer_op(node.operands[0], "reshape");
    if (!inner)
      return {};
    const Tensor &x = rc.value(inner->operands[0]);
    return {x.type() == type ? x : ops::reshape(x, type.shape)};
  }
};

/// reshape / squeeze / unsqueeze of a constant read only there (its value
/// has one reader, and no other constant node reads its bytes): a constant
/// of the new shape holding the same bytes (HostTensor::reshaped shares
/// them). A kernel that needs its operand in a buffer (a conv's weight, a
/// GEMM's packed B) then reads the constant where it lies, instead of a copy
/// of it made on every run (openWakeWord's mel spectrogram: its two STFT
/// weights, 257 x 512 each, unsqueezed to conv weights, were copied every
/// run, 25 % of the model's time).
class ConstantReshape final : public RewritePattern {
public:
  explicit ConstantReshape(const char *op) : op_(op) {}
  const char *name() const override { return "constant-reshape"; }
  const char *root_op() const override { return op_; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &, RewriteContext &rc) const override {
    const Node *c = rc.match.producer_op(node.operands[0], "constant");
    const TensorType &type = result_type(rc, node);
    if (!c || !rc.match.single_use(node.operands[0]) ||
        !std::all_of(type.shape.begin(), type.shape.end(), [](const Dim &d) { return d.is_static(); }))
      return {};
    const std::string &name = c->attrs.get_string("name");
    // Read nowhere else: not by a second constant node of the same name.
    const Graph &g = rc.match.graph();
    if (std::count_if(g.nodes().begin(), g.nodes().end(), [&](const Node &n) {
          return n.op == "constant" && n.attrs.get_string("name") == name;
        }) != 1)
      return {};
    const HostTensor &data = g.constant(name);
    if (data.dtype() != type.dtype)
      return {};
    std::vector<int64_t> shape;
    for (const Dim &d : type.shape)
      shape.push_back(d.value());
    return {rc.out.add_source(Tensor::from_host(data.reshaped(shape)), name)};
  }

private:
  const char *op_;
};

/// Data movement on constants computed at compile time: a slice, concat,
/// transpose, gather or pad whose every operand is (already, in the graph
/// being built) a constant becomes a constant, so a weight an
/// exporter reorders (an LSTM's gates sliced and concatenated, a matrix
/// transposed) is read where it lies instead of rebuilt on every run, and
/// the kernels that pack constant weights see it. Bit-exact: the reference
/// interpreter moves the same elements. (Not casts: a widened 8-bit weight
/// is what the integer GEMM recognizes, and would take 4x the bytes.) Chains fold in one round
/// (the operands are looked up in the new graph; reshapes of the result,
/// ConstantReshape's, in the next). No copies of big constants: each
/// operand is read only here unless the result is small
/// (kMaxGrownElements), nothing past kMaxFoldedElements, and an op that
/// makes more elements than it reads (pad, a gather that repeats) only up
/// to kMaxGrownElements.
class ConstantFold final : public RewritePattern {
public:
  static constexpr int64_t kMaxFoldedElements = int64_t(1) << 24;
  static constexpr int64_t kMaxGrownElements = int64_t(1) << 16;
  explicit ConstantFold(const char *op) : op_(op) {}
  const char *name() const override { return "constant-fold"; }
  const char *root_op() const override { return op_; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &in, RewriteContext &rc) const override {
    const TensorType &type = result_type(rc, node);
    if (node.results.size() != 1 || in.empty() ||
        !std::all_of(type.shape.begin(), type.shape.end(), [](const Dim &d) { return d.is_static(); }))
      return {};
    const Graph &to = rc.out.graph();
    std::vector<Tensor> operands;
    int64_t read = 0;
    std::string base;
    bool single_use = true;
    for (size_t i = 0; i < in.size(); ++i) {
      const Tensor &t = in[i];
      single_use = single_use && rc.match.single_use(node.operands[i]);
      if (t.is_null() || t.value().graph() != &to)
        return {};
      int64_t producer = to.value_info(t.value().id()).producer;
      if (producer < 0 || to.nodes()[static_cast<size_t>(producer)].op != "constant")
        return {};
      const std::string &name = to.nodes()[static_cast<size_t>(producer)].attrs.get_string("name");
      const HostTensor &data = to.constant(name);
      read += data.numel();
      operands.push_back(Tensor::from_host(data));
      if (base.empty())
        base = name + "." + node.op;
    }
    int64_t made = 1;
    for (const Dim &d : type.shape)
      made *= d.value();
    if (made > kMaxFoldedElements || (made > kMaxGrownElements && (made > read || !single_use)))
      return {};
    HostTensor result;
    {
      EagerRealizationContext eager;
      std::vector<Tensor> out = eager.record(node.op, operands, node.attrs);
      if (out.size() != 1)
        return {};
      result = out[0].realize().host();
    }
    if (result.dtype() != type.dtype)
      return {};
    return {rc.out.add_source(Tensor::from_host(result), base)};
  }

private:
  const char *op_;
};

/// A transpose that moves only dims of size 1 (the other dims keep their
/// order): a reshape, which moves no data. tf2onnx writes an NHWC -> NCHW
/// transpose before a model's first conv even when C is 1 (an MRZ
/// character classifier's [88, 28, 28, 1] input), and a transpose kernel
/// that moves the last axis runs one element at a time there.
class TransposeOfUnitDims final : public RewritePattern {
public:
  const char *name() const override { return "transpose-of-unit-dims"; }
  const char *root_op() const override { return "transpose"; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &in, RewriteContext &rc) const override {
    const Shape &shape = in[0].shape();
    std::vector<int64_t> perm = node.attrs.get_ints("perm");
    if (perm.empty())
      for (int64_t i = static_cast<int64_t>(shape.size()); i-- > 0;)
        perm.push_back(i);
    if (perm.size() != shape.size())
      return {};
    int64_t last = -1; // the input axis of the previous dim not of size 1
    bool moved = false;
    for (size_t i = 0; i < perm.size(); ++i) {
      int64_t axis = perm[i] < 0 ? perm[i] + static_cast<int64_t>(shape.size()) : perm[i];
      if (axis < 0 || axis >= static_cast<int64_t>(shape.size()))
        return {};
      moved = moved || axis != static_cast<int64_t>(i);
      const Dim &d = shape[static_cast<size_t>(axis)];
      if (d.is_static() && d.value() == 1)
        continue;
      if (axis < last)
        return {};
      last = axis;
    }
    if (!moved)
      return {}; // the identity: transpose-chain forwards it
    return {ops::reshape(in[0], result_type(rc, node).shape)};
  }
};

class TransposeChain final : public RewritePattern {
public:
  const char *name() const override { return "transpose-chain"; }
  const char *root_op() const override { return "transpose"; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &in, RewriteContext &rc) const override {
    std::vector<int64_t> outer = perm_of(node.attrs.get_ints("perm"), in[0].rank());
    if (is_identity(outer))
      return forward(rc, node, in, 0);
    const Node *inner = rc.match.producer_op(node.operands[0], "transpose");
    if (!inner)
      return {};
    const Tensor &x = rc.value(inner->operands[0]);
    std::vector<int64_t> first = perm_of(inner->attrs.get_ints("perm"), x.rank());
    // result[i] = mid[outer[i]] = x[first[outer[i]]]
    std::vector<int64_t> both(outer.size());
    for (size_t i = 0; i < outer.size(); ++i)
      both[i] = first[static_cast<size_t>(outer[i])];
    return {is_identity(both) ? x : ops::transpose(x, both)};
  }

private:
  static std::vector<int64_t> perm_of(const std::vector<int64_t> &perm, int64_t rank) {
    if (!perm.empty())
      return perm;
    std::vector<int64_t> reversed(static_cast<size_t>(rank));
    for (int64_t i = 0; i < rank; ++i)
      reversed[static_cast<size_t>(i)] = rank - 1 - i;
    return reversed;
  }
  static bool is_identity(const std::vector<int64_t> &perm) {
    for (size_t i = 0; i < perm.size(); ++i)
      if (perm[i] != static_cast<int64_t>(i))
        return false;
    return true;
  }
};

} // namespace

const std::vector<const RewritePattern *> &canonicalization_patterns() {
  static const PowByConstant pow_by_constant;
  static const DivBySqrt div_by_sqrt;
  static const DivByConstant div_by_constant;
  static const Identity mul_identity("mul"), div_identity("div"), sub_identity("sub"), add_identity("add");
  static const CastChain cast_chain;
  static const ReshapeChain reshape_chain;
  static const TransposeChain transpose_chain;
  static const TransposeOfUnitDims transpose_of_unit_dims;
  static const ConstantReshape constant_reshape("reshape"), constant_squeeze("squeeze"),
      constant_unsqueeze("unsqueeze");
  static const ConstantFold fold_slice("slice"), fold_concat("concat"), fold_transpose("transpose"),
      fold_gather("gather"), fold_pad("pad");
  static const std::vector<const RewritePattern *> list = [&] {
    std::vector<const RewritePattern *> l = {&pow_by_constant, &div_identity, &div_by_sqrt,  &div_by_constant,
                                             &mul_identity,    &sub_identity, &add_identity, &cast_chain,
                                             &reshape_chain,   &transpose_chain, &transpose_of_unit_dims,
                                             &constant_reshape,
                                             &constant_squeeze, &constant_unsqueeze, &fold_slice, &fold_concat,
                                             &fold_transpose, &fold_gather, &fold_pad};
    for (const RewritePattern *p : norm_patterns())
      l.push_back(p);
    for (const RewritePattern *p : activation_patterns())
      l.push_back(p);
    l.push_back(&conv_transpose_as_matmul_pattern());
    l.push_back(&dequantized_matmul_pattern());
    return l;
  }();
  return list;
}

std::unique_ptr<Graph> canonicalize(const Graph &graph, RewriteStats *stats) {
  return apply_patterns(graph, canonicalization_patterns(), stats);
}

} // namespace maxc

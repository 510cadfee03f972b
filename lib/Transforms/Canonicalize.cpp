#include "maxc/Transforms/Canonicalize.h"

#include "maxc/Ops/OpRegistry.h"
#include "maxc/Ops/Ops.h"
#include "maxc/Realization/EagerRealizationContext.h"
#include "maxc/Transforms/ConvTransposeAsMatmul.h"
#include "maxc/Transforms/DequantizedMatmul.h"
#include "maxc/Transforms/FuseActivations.h"
#include "maxc/Transforms/FoldBatchNorm.h"
#include "maxc/Transforms/FuseNorms.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
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

/// A transpose node's perm as the op reads it (ops::normalize_perm).
std::vector<int64_t> transpose_perm(const Node &t, int64_t rank) {
  return ops::normalize_perm(t.attrs.get_ints("perm"), rank);
}

/// perm[inverse[a]] = a: the perm that undoes `perm`.
std::vector<int64_t> inverse_perm(const std::vector<int64_t> &perm) {
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return inverse;
}

bool is_identity_perm(const std::vector<int64_t> &perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i))
      return false;
  return true;
}

/// True when the dims of `in` (a transpose's operand) not of static size 1
/// keep their order under `perm`: the transpose moves no element.
bool moves_only_unit_axes(const std::vector<int64_t> &perm, const Shape &in) {
  int64_t last = -1; // the input axis of the previous dim not of size 1
  for (int64_t axis : perm) {
    const Dim &d = in[static_cast<size_t>(axis)];
    if (d.is_static() && d.value() == 1)
      continue;
    if (axis < last)
      return false;
    last = axis;
  }
  return true;
}

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
    std::vector<int64_t> perm = transpose_perm(node, in[0].rank());
    if (is_identity_perm(perm) || !moves_only_unit_axes(perm, in[0].shape()))
      return {}; // the identity (transpose-chain forwards it), or data moves
    return {ops::reshape(in[0], result_type(rc, node).shape)};
  }
};

/// A conv (groups 1) whose input is a depthwise 1x1 conv: a per-channel
/// scale d[c] (and bias e[c]) of its input, which folds into the conv's
/// weights, W'[o, c, ..] = W[o, c, ..] * d[c], and bias,
/// b'[o] = b[o] + sum over c, ky, kx of W[o, c, ky, kx] * e[c] (only where
/// the conv has no padding: a padded tap reads a zero, not e[c]). tf2onnx
/// writes Keras' SeparableConv2D with a 1x1 depthwise step this way (an MRZ
/// character classifier: six such pairs, a whole pass over the activations
/// each). Computed in double, stored in the weights' dtype: within the
/// rounding of the two convs it replaces, not bit-exact.
class ConvOfChannelScale final : public RewritePattern {
public:
  const char *name() const override { return "conv-of-channel-scale"; }
  const char *root_op() const override { return "conv2d"; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &, RewriteContext &rc) const override {
    const Graph &g = rc.match.graph();
    const Node *dw = rc.match.producer_op(node.operands[0], "conv2d");
    if (!dw || !rc.match.single_use(node.operands[0]) || node.attrs.get_int("groups") != 1 ||
        node.attrs.get_int("exact", 0) != 0 || !is_channel_scale(g, *dw) ||
        g.type_of(node.operands[1]).dtype != g.type_of(dw->operands[0]).dtype)
      return {};
    const HostTensor *d = rc.match.constant(dw->operands[1]), *wt = rc.match.constant(node.operands[1]);
    const HostTensor *e = dw->operands.size() > 2 ? rc.match.constant(dw->operands[2]) : nullptr;
    const HostTensor *b = node.operands.size() > 2 ? rc.match.constant(node.operands[2]) : nullptr;
    std::vector<int64_t> padding = node.attrs.get_ints("padding");
    if (!d || !wt || (dw->operands.size() > 2 && !e) || (node.operands.size() > 2 && !b) ||
        (e && !std::all_of(padding.begin(), padding.end(), [](int64_t p) { return p == 0; })))
      return {};
    // b'[o] = b[o] + sum over c, ky, kx of W[o, c, ky, kx] * e[c], in double.
    int64_t O = wt->shape()[0], C = d->numel(), per_c = O > 0 ? wt->numel() / (O * C) : 0;
    HostTensor bf(wt->dtype(), {O});
    for (int64_t o = 0; o < O; ++o) {
      double sum = b ? b->get_f64(o) : 0.0;
      for (int64_t i = 0; e && i < C * per_c; ++i)
        sum += wt->get_f64(o * C * per_c + i) * e->get_f64(i / per_c);
      bf.set_f64(o, sum);
    }
    std::string wname = g.nodes()[g.value_info(node.operands[1]).producer].attrs.get_string("name");
    std::vector<Tensor> operands{rc.value(dw->operands[0]),
                                 rc.out.add_source(Tensor::from_host(scaled_by_channel(*wt, *d)), wname + ".channel_scaled")};
    if (b || e)
      operands.push_back(rc.out.add_source(Tensor::from_host(bf), wname + ".channel_bias"));
    return rc.out.record("conv2d", operands, node.attrs);
  }
};

/// A conv whose weight is computed from constants on every run — a weight
/// stored in 8 bits and dequantized in the graph (ONNX Runtime's weight
/// quantizer writes Cast → Mul(scale) → Add(zero point) before a float
/// Conv: Moonshine's audio stem; DequantizeLinear of an initializer) — gets
/// that weight computed at compile time: the conv kernels then see a
/// constant (packed panels, Winograd transforms, the folds above), and the
/// dequantization no longer runs on every call (ONNX Runtime folds it when
/// a session loads). The weight is evaluated by the reference ops on the
/// constants, through at most kMaxNodes elementwise ops, `full`s and views
/// (at least one op that computes; the leaves checked before anything is
/// evaluated), up to ConstantFold::kMaxFoldedElements elements: the values
/// the graph computes, op by op (bit-exact unless the CPU would have
/// contracted a mul and an add into one FMA). The f32 weight takes 4 bytes per element
/// where the 8-bit one took 1.
class ConvOfComputedWeight final : public RewritePattern {
public:
  static constexpr int kMaxNodes = 16;
  const char *name() const override { return "conv-of-computed-weight"; }
  const char *root_op() const override { return "conv2d"; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &, RewriteContext &rc) const override {
    const GraphMatcher &m = rc.match;
    const Graph &g = m.graph();
    if (node.operands.size() < 2 || m.constant(node.operands[1]) || !m.producer(node.operands[1]))
      return {};
    const TensorType &wt = g.type_of(node.operands[1]);
    if (!shape_is_static(wt.shape) || !is_float(wt.dtype) ||
        shape_numel(wt.shape).value() > ConstantFold::kMaxFoldedElements)
      return {};
    // First the chain's shape alone: allowed ops, constant leaves, at least
    // one op that computes (a chain of views is constant-reshape's, which
    // also checks the weight's other readers).
    int budget = kMaxNodes, computing = 0;
    std::set<ValueId> seen;
    std::function<bool(ValueId)> foldable = [&](ValueId v) -> bool {
      if (!seen.insert(v).second || m.constant(v))
        return true;
      const Node *p = m.producer(v);
      if (!p || --budget < 0 || !shape_is_static(g.type_of(v).shape) || p->results.size() != 1)
        return false;
      OpTraits traits = op_traits(p->op);
      bool view = p->op == "reshape" || p->op == "squeeze" || p->op == "unsqueeze" || p->op == "transpose" ||
                  p->op == "broadcast_to";
      bool generator = traits.has(OpTrait::generator) && p->op == "full"; // (not dim_values: run-time dims)
      if (!(traits.has(OpTrait::elementwise) || generator || view) || traits.has(OpTrait::indirect))
        return false;
      computing += view ? 0 : 1;
      return std::all_of(p->operands.begin(), p->operands.end(), foldable);
    };
    if (!foldable(node.operands[1]) || computing == 0)
      return {};
    std::map<ValueId, HostTensor> known;
    std::string base;
    // v's value from the constants (its chain checked above).
    std::function<bool(ValueId)> eval = [&](ValueId v) -> bool {
      if (known.count(v))
        return true;
      if (const HostTensor *c = m.constant(v)) {
        if (base.empty() || c->numel() == shape_numel(wt.shape).value())
          base = g.nodes()[static_cast<size_t>(g.value_info(v).producer)].attrs.get_string("name");
        known.emplace(v, *c);
        return true;
      }
      const Node *p = m.producer(v);
      std::vector<Tensor> operands;
      for (ValueId o : p->operands) {
        if (!eval(o))
          return false;
        operands.push_back(Tensor::from_host(known.at(o)));
      }
      HostTensor result;
      {
        EagerRealizationContext eager;
        std::vector<Tensor> out = eager.record(p->op, operands, p->attrs);
        if (out.size() != 1)
          return false;
        result = out[0].realize().host();
      }
      if (result.dtype() != g.type_of(v).dtype)
        return false;
      known.emplace(v, std::move(result));
      return true;
    };
    try {
      if (!eval(node.operands[1]) || base.empty())
        return {};
    } catch (const std::exception &) { // an op the reference refuses on these values: leave the conv alone
      return {};
    }
    std::vector<Tensor> operands;
    for (size_t i = 0; i < node.operands.size(); ++i)
      operands.push_back(i == 1 ? rc.out.add_source(Tensor::from_host(known.at(node.operands[1])), base + ".folded")
                                : rc.value(node.operands[i]));
    return rc.out.record("conv2d", operands, node.attrs);
  }
};

/// The padding (top, left, bottom, right) of a conv or pool `node` that
/// reads `pad` (its operand 0's producer, or null) once, with the pad's
/// spatial pads added, when `pad` fills zeros (value 0) into the spatial
/// dims of a rank-4 value only, none negative (a crop); else nullopt.
std::optional<std::vector<int64_t>> with_zero_pad(const RewriteContext &rc, const Node &node, const Node *pad) {
  if (!pad || !rc.match.single_use(node.operands[0]) || pad->attrs.get_real("value", 0.0) != 0.0)
    return std::nullopt;
  std::vector<int64_t> pads = pad->attrs.get_ints("pads"), padding = node.attrs.get_ints("padding");
  if (padding.size() == 2) // [top, left] for both sides
    padding = {padding[0], padding[1], padding[0], padding[1]};
  if (pads.size() != 8 || padding.size() != 4 || pads[0] != 0 || pads[1] != 0 || pads[2] != 0 || pads[3] != 0 ||
      std::any_of(pads.begin() + 4, pads.end(), [](int64_t p) { return p < 0; }))
    return std::nullopt;
  // pads: [.., h_before, h_after, w_before, w_after].
  return std::vector<int64_t>{padding[0] + pads[4], padding[1] + pads[6], padding[2] + pads[5], padding[3] + pads[7]};
}

/// A conv whose input is a zero pad of its spatial dims: the conv's own
/// padding (ORT's PadFusion). tf2onnx writes a strided "same" conv of
/// MobileNet as an explicit Pad before a conv without padding, so the pad
/// was a pass over the activations of its own (M-LSD's three stride-2
/// depthwise convs) and kept the ReLU6 before it out of the producing
/// conv's epilogue. Bit-exact: a padded tap reads the same zero.
class ConvOfZeroPad final : public RewritePattern {
public:
  const char *name() const override { return "conv-of-zero-pad"; }
  const char *root_op() const override { return "conv2d"; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &in, RewriteContext &rc) const override {
    const Node *pad = rc.match.producer_op(node.operands[0], "pad");
    std::optional<std::vector<int64_t>> padding = with_zero_pad(rc, node, pad);
    if (!padding)
      return {};
    Attrs attrs = node.attrs;
    attrs.set("padding", *padding);
    std::vector<Tensor> operands = in;
    operands[0] = rc.value(pad->operands[0]);
    return rc.out.record("conv2d", operands, attrs);
  }
};

/// A max pool of a zero pad of its spatial dims, where the padded values
/// are never negative (a ReLU's, a ReLU6's, a sigmoid's result): the pool's
/// own padding, which never wins a window (a zero padded cell loses or
/// ties to the window's values, all >= 0, and every window keeps one: the
/// pads stay below the kernel). Keras' ZeroPadding2D before MaxPooling2D
/// (an MRZ classifier's stem: ReLU, Pad, MaxPool) was a pass over the
/// activations of its own, and kept the ReLU out of the conv's epilogue.
/// Bit-exact.
class MaxPoolOfZeroPad final : public RewritePattern {
public:
  const char *name() const override { return "max-pool-of-zero-pad"; }
  const char *root_op() const override { return "max_pool2d"; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &, RewriteContext &rc) const override {
    const Node *pad = rc.match.producer_op(node.operands[0], "pad");
    std::optional<std::vector<int64_t>> padding = with_zero_pad(rc, node, pad);
    std::vector<int64_t> kernel = node.attrs.get_ints("kernel");
    if (!padding || kernel.size() != 2 || !never_negative(rc.match, pad->operands[0], 4))
      return {};
    const std::vector<int64_t> &p = *padding;
    if (p[0] >= kernel[0] || p[2] >= kernel[0] || p[1] >= kernel[1] || p[3] >= kernel[1])
      return {}; // a window of padding alone: -inf, where the zero pad gave 0
    Attrs attrs = node.attrs;
    attrs.set("padding", p);
    return rc.out.record("max_pool2d", {rc.value(pad->operands[0])}, attrs);
  }

private:
  /// v is >= 0 (or NaN) wherever it is defined: a relu, a sigmoid, a
  /// maximum with a splat >= 0, a minimum of such values (within `depth`
  /// producers).
  static bool never_negative(const GraphMatcher &m, ValueId v, int depth) {
    if (std::optional<double> c = m.splat(v))
      return *c >= 0;
    const Node *p = m.producer(v);
    if (!p || depth == 0 || p->results.size() != 1)
      return false;
    if (p->op == "relu" || p->op == "sigmoid")
      return true;
    if (p->op == "maximum")
      return never_negative(m, p->operands[0], depth - 1) || never_negative(m, p->operands[1], depth - 1);
    if (p->op == "minimum")
      return never_negative(m, p->operands[0], depth - 1) && never_negative(m, p->operands[1], depth - 1);
    return false;
  }
};

class TransposeChain final : public RewritePattern {
public:
  const char *name() const override { return "transpose-chain"; }
  const char *root_op() const override { return "transpose"; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &in, RewriteContext &rc) const override {
    std::vector<int64_t> outer = transpose_perm(node, in[0].rank());
    if (is_identity_perm(outer))
      return forward(rc, node, in, 0);
    const Node *inner = rc.match.producer_op(node.operands[0], "transpose");
    if (!inner)
      return {};
    const Tensor &x = rc.value(inner->operands[0]);
    std::vector<int64_t> first = transpose_perm(*inner, x.rank());
    // result[i] = mid[outer[i]] = x[first[outer[i]]]
    std::vector<int64_t> both(outer.size());
    for (size_t i = 0; i < outer.size(); ++i)
      both[i] = first[static_cast<size_t>(outer[i])];
    return {is_identity_perm(both) ? x : ops::transpose(x, both)};
  }
};

/// transpose(split(transpose(x, p), axis)[r], q) with q undoing p → the
/// slice of x that piece r is, along x's axis p[axis]: tf2onnx's NHWC split
/// between NCHW ops (Transpose, Split on channels, Transpose back per
/// piece). The piece is then a contiguous range of x's rows, not a view
/// through two transposes that every reader computes a row apart.
class TransposeOfSplitOfTranspose final : public RewritePattern {
public:
  const char *name() const override { return "transpose-of-split-of-transpose"; }
  const char *root_op() const override { return "transpose"; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &in, RewriteContext &rc) const override {
    const Node *split = rc.match.producer_op(node.operands[0], "split");
    if (!split)
      return {};
    const Node *inner = rc.match.producer_op(split->operands[0], "transpose");
    if (!inner)
      return {};
    const Tensor &x = rc.value(inner->operands[0]);
    const int64_t rank = x.rank();
    std::vector<int64_t> p = transpose_perm(*inner, rank), q = transpose_perm(node, rank);
    for (int64_t i = 0; i < rank; ++i) // result[i] = mid[q[i]] = x[p[q[i]]]: must be x[i]
      if (p[static_cast<size_t>(q[static_cast<size_t>(i)])] != i)
        return {};
    int64_t axis = split->attrs.get_int("axis");
    if (axis < 0)
      axis += rank;
    if (axis < 0 || axis >= rank)
      return {};
    std::vector<int64_t> sizes = split->attrs.get_ints("sizes");
    size_t r = static_cast<size_t>(std::find(split->results.begin(), split->results.end(), node.operands[0]) -
                                   split->results.begin());
    if (r >= sizes.size())
      return {};
    int64_t start = 0;
    for (size_t k = 0; k < r; ++k)
      start += sizes[k];
    int64_t x_axis = p[static_cast<size_t>(axis)];
    return {ops::slice(x, {start}, {start + sizes[r]}, {x_axis})};
  }
};

/// cast(f(transpose(x)), narrower) → transpose(cast(f(x))): f a chain of
/// at most 16 elementwise ops, each read only by the next, whose other
/// operands are one-element values (a DynamicQuantizeLinear's divide,
/// round, shift and clamp before its cast to 8 bits), the transpose read
/// only by the chain. The chain then runs along x's rows into a narrow
/// result, and the transpose moves that (on the CPU, its tiled kernel:
/// PlanOptions::store_before_tiled_transposes), where a read through the
/// transpose computed each element alone, a row apart, and moved the wide
/// values. Bit-exact: the same ops on the same elements.
class NarrowBeforeTranspose final : public RewritePattern {
public:
  const char *name() const override { return "narrow-before-transpose"; }
  const char *root_op() const override { return "cast"; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &in, RewriteContext &rc) const override {
    const Graph &g = rc.match.graph();
    if (dtype_size(g.type_of(node.results[0]).dtype) >= dtype_size(in[0].dtype()))
      return {};
    std::vector<std::pair<const Node *, size_t>> chain; // (node, its chain operand), from the cast up
    ValueId v = node.operands[0];
    const Node *t = nullptr;
    for (int depth = 0; depth <= 16 && !t; ++depth) {
      const Node *p = rc.match.producer(v);
      if (!p || !rc.match.single_use(v) || p->results.size() != 1)
        return {};
      if (p->op == "transpose") {
        t = p;
        break;
      }
      if (!op_traits(p->op).has(OpTrait::elementwise) || depth == 16)
        return {};
      const TensorType &out = g.type_of(p->results[0]);
      size_t at = p->operands.size();
      for (size_t i = 0; i < p->operands.size(); ++i) {
        const TensorType &o = g.type_of(p->operands[i]);
        if (o.shape == out.shape && at == p->operands.size())
          at = i;
        else if (o.rank() > out.rank() || shape_numel(o.shape) != Dim(1))
          return {};
      }
      if (at == p->operands.size())
        return {};
      chain.emplace_back(p, at);
      v = p->operands[at];
    }
    if (!t)
      return {};
    Graph &to = rc.out.graph();
    Tensor cur = rc.value(t->operands[0]);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      std::vector<Tensor> operands;
      for (size_t i = 0; i < it->first->operands.size(); ++i)
        operands.push_back(i == it->second ? cur : rc.value(it->first->operands[i]));
      cur = copy_node(to, *it->first, operands).at(0);
    }
    cur = copy_node(to, node, {cur}).at(0);
    std::vector<int64_t> perm = t->attrs.get_ints("perm");
    return {ops::transpose(cur, perm)};
  }
};

/// reshape(transpose(x, p), s) → transpose(reshape(x, s'), p') where the
/// reshape only splits axes of the transposed value (each of its axes is a
/// run of the result's, sizes static; an axis of 1 may vanish), the
/// transpose read only there. The split happens in x's layout and the
/// transpose moves the pieces: a 1x1 conv computed as a GEMM over
/// [H·W, C] rows and reshaped to [C, H, W] is then transpose([H, W, C]),
/// which cancels against an exporter's transpose back to NHWC
/// (transpose-chain) and lets elementwise-before-transpose move its
/// epilogue into the GEMM's layout. Exact: a relabelling of elements.
class ReshapeOfTranspose final : public RewritePattern {
public:
  const char *name() const override { return "reshape-of-transpose"; }
  const char *root_op() const override { return "reshape"; }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &, RewriteContext &rc) const override {
    const Node *t = rc.match.producer_op(node.operands[0], "transpose");
    if (!t || !rc.match.single_use(node.operands[0]))
      return {};
    const Graph &g = rc.match.graph();
    const Shape &y = g.type_of(node.operands[0]).shape, &out = result_type(rc, node).shape;
    for (const Shape *shape : {&y, &out})
      for (const Dim &d : *shape)
        if (!d.is_static())
          return {};
    const int64_t rank = static_cast<int64_t>(y.size());
    std::vector<int64_t> p = transpose_perm(*t, rank);
    // groups[i]: the result axes [first, last) that y's axis i splits into.
    std::vector<std::pair<size_t, size_t>> groups;
    size_t j = 0;
    for (const Dim &d : y) {
      size_t first = j;
      if (d.value() == 1) {
        if (j < out.size() && out[j].value() == 1)
          ++j;
      } else {
        int64_t product = 1;
        while (product < d.value() && j < out.size())
          product *= out[j++].value();
        if (product != d.value())
          return {};
      }
      groups.emplace_back(first, j);
    }
    if (j != out.size())
      return {};
    // x's axes in order, each replaced by its group's sizes; where each
    // result axis lands in that layout.
    std::vector<int64_t> inverse = inverse_perm(p);
    Shape split;
    std::vector<int64_t> perm(out.size());
    for (int64_t k = 0; k < rank; ++k) {
      auto [first, last] = groups[static_cast<size_t>(inverse[static_cast<size_t>(k)])];
      for (size_t a = first; a < last; ++a) {
        perm[a] = static_cast<int64_t>(split.size());
        split.push_back(out[a]);
      }
    }
    Tensor x = ops::reshape(rc.value(t->operands[0]), split);
    return {is_identity_perm(perm) ? x : ops::transpose(x, perm)};
  }
};

/// f(transpose(x, p), c...) → transpose(f(x, c'...), p) for an elementwise
/// op f whose other operands are one-element values or constants (a bias
/// per channel: c' is c transposed back, folded), the transpose read only
/// by f and of f's shape. Applied again, a chain of such ops runs in x's
/// layout, contiguous, and fuses into x's producer (a GEMM's epilogue), and
/// the transpose, moved after it, cancels against a later inverse one or
/// runs as a tiled transpose; read through the transpose, each element of
/// the chain was computed alone, a row apart (YOLOv10's int8 1x1 convs:
/// cast, scale, bias and SiLU after the GEMM, 1.1 ms for 143,000 elements).
/// Only for a transpose that moves the last axis, and not where a GEMM,
/// conv or composite op reads f's result. Exact: the same ops on the same
/// elements.
class ElementwiseBeforeTranspose final : public RewritePattern {
public:
  explicit ElementwiseBeforeTranspose(std::string op) : op_(std::move(op)) {}
  const char *name() const override { return "elementwise-before-transpose"; }
  const char *root_op() const override { return op_.c_str(); }
  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &in, RewriteContext &rc) const override {
    if (node.results.size() != 1)
      return {};
    const Graph &g = rc.match.graph();
    const TensorType &type = result_type(rc, node);
    const int64_t rank = type.rank();
    size_t at = node.operands.size();
    const Node *t = nullptr;
    for (size_t i = 0; i < node.operands.size() && !t; ++i)
      if (const Node *p = rc.match.producer_op(node.operands[i], "transpose");
          p && rc.match.single_use(node.operands[i]) && g.type_of(node.operands[i]).shape == type.shape) {
        t = p;
        at = i;
      }
    if (!t)
      return {};
    std::vector<int64_t> p = transpose_perm(*t, rank);
    if (moves_only_unit_axes(p, g.type_of(t->operands[0]).shape))
      return {}; // a reshape (transpose-of-unit-dims)
    if (p.back() == rank - 1)
      return {}; // rows stay contiguous: nothing is read a row apart
    // A GEMM or conv reading f's result takes a transposed operand as it
    // is (an attention's k^T·scale, q·scale: the recognizers' spellings),
    // and so do composites.
    for (int64_t r : rc.match.readers().of(node.results[0]))
      if (r >= 0 && (op_traits(g.nodes()[static_cast<size_t>(r)].op).has(OpTrait::gemm_like) ||
                     op_traits(g.nodes()[static_cast<size_t>(r)].op).has(OpTrait::composite)))
        return {};
    // Transposes the other rules fold first: of a transpose
    // (transpose-chain), of a split of one (transpose-of-split-of-transpose).
    if (const Node *src = rc.match.producer(t->operands[0]);
        src && (src->op == "transpose" || (src->op == "split" && rc.match.producer_op(src->operands[0], "transpose"))))
      return {};
    std::vector<int64_t> inverse = inverse_perm(p);
    std::vector<Tensor> operands;
    for (size_t i = 0; i < node.operands.size(); ++i) {
      const TensorType &o = g.type_of(node.operands[i]);
      if (i == at) {
        operands.push_back(rc.value(t->operands[0]));
      } else if (shape_numel(o.shape) == Dim(1) && o.rank() <= rank) {
        operands.push_back(in[i]);
      } else if (rc.match.producer_op(node.operands[i], "constant") && o.rank() <= rank) {
        Shape full(static_cast<size_t>(rank - o.rank()), Dim(1));
        full.insert(full.end(), o.shape.begin(), o.shape.end());
        Tensor c = o.rank() < rank ? ops::reshape(in[i], full) : in[i];
        operands.push_back(ops::transpose(c, inverse));
      } else {
        return {};
      }
    }
    Tensor y = copy_node(rc.out.graph(), node, operands).at(0);
    return {ops::transpose(y, p)};
  }

private:
  std::string op_;
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
  static const NarrowBeforeTranspose narrow_before_transpose;
  static const ReshapeOfTranspose reshape_of_transpose;
  static const std::vector<ElementwiseBeforeTranspose> elementwise_before_transpose = [] {
    std::vector<ElementwiseBeforeTranspose> v;
    for (const OpDef *def : OpRegistry::instance().all())
      if (def->has(OpTrait::elementwise))
        v.emplace_back(def->name);
    return v;
  }();
  static const TransposeOfSplitOfTranspose transpose_of_split_of_transpose;
  static const ConvOfChannelScale conv_of_channel_scale;
  static const ConvOfZeroPad conv_of_zero_pad;
  static const ConvOfComputedWeight conv_of_computed_weight;
  static const MaxPoolOfZeroPad max_pool_of_zero_pad;
  static const ConstantReshape constant_reshape("reshape"), constant_squeeze("squeeze"),
      constant_unsqueeze("unsqueeze");
  static const ConstantFold fold_slice("slice"), fold_concat("concat"), fold_transpose("transpose"),
      fold_gather("gather"), fold_pad("pad");
  static const std::vector<const RewritePattern *> list = [&] {
    std::vector<const RewritePattern *> l = {&pow_by_constant, &div_identity, &div_by_sqrt,  &div_by_constant,
                                             &mul_identity,    &sub_identity, &add_identity, &cast_chain,
                                             &reshape_chain,   &transpose_chain, &transpose_of_unit_dims, &transpose_of_split_of_transpose,
                                             &narrow_before_transpose, &reshape_of_transpose,
                                             &conv_of_channel_scale, &conv_of_zero_pad, &conv_of_computed_weight,
                                             &max_pool_of_zero_pad,
                                             &constant_reshape,
                                             &constant_squeeze, &constant_unsqueeze, &fold_slice, &fold_concat,
                                             &fold_transpose, &fold_gather, &fold_pad};
    for (const ElementwiseBeforeTranspose &p : elementwise_before_transpose)
      l.push_back(&p);
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

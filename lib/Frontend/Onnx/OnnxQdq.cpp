// QDQ models → the integer ops ONNX Runtime runs them as (docs/ONNX.md,
// "QDQ models").
//
// A statically quantized model in ONNX Runtime's QDQ format (what
// onnxruntime.quantization.quantize_static writes by default) is float ops
// between DequantizeLinear and QuantizeLinear nodes:
//
//   x8 → DQ ─┐
//   w8 → DQ ─┼→ Conv → [Relu] → Q → y8          (w8, b32 initializers)
//   b32 → DQ ┘
//
// ONNX Runtime does not run that composition: its QDQ transformer
// (QDQSelectorActionTransformer) replaces each such group by one integer op
// — QLinearConv, QLinearMatMul, com.microsoft QGemm, QLinearAdd,
// QLinearGlobalAveragePool — and drops DQ → op → Q around ops that move
// values (MaxPool, Reshape, ...) when both sides share scale and zero point.
// The integer ops round differently from the float composition (one
// rounding of the exact integer accumulator instead of one per product and
// partial sum), so a QDQ model's integer results are ORT's only if the same
// replacement is made. fuse_qdq makes it here, on the ModelProto before
// import, with ORT's conditions (below); the replacement ops' importers
// (OnnxQuantized.cpp) compute ORT's arithmetic. Every maxc path (reference,
// CPU, GPU emulator) then computes the same integers, and the CPU runs the
// convs and GEMMs on its integer GEMM with the requantization as epilogue.
//
// A group is replaced only when (ORT's selectors, plus maxc's need to know
// the constants): every input of the op comes from a DequantizeLinear (for
// Conv/Gemm/MatMul the weight's from an 8-bit initializer, the optional
// bias's from an int32 initializer whose scale is x_scale * w_scale), the
// op's only consumer is a QuantizeLinear (or a Relu whose only consumer is
// a QuantizeLinear with the zero point at the bottom of its range, which
// makes the Relu redundant: saturation is the relu), the op's output is no
// graph output, the activations' and the output's 8-bit types agree, every
// scale and zero point is an initializer, activation scales are per tensor
// and a weight's per-axis scale runs along its output channels (Conv axis
// 0, MatMul's B axis 1, Gemm's B along N). Anything else stays the float
// composition (its exact ONNX meaning). QDQ nodes inside If/Loop bodies
// are left alone.
#include "OnnxOps.h"
#include "OnnxTensor.h"

#include "maxc/Support/Error.h"

#include <cmath>
#include <map>
#include <set>

namespace maxc::onnx_import {
namespace {

bool onnx_domain(const onnx::NodeProto &n) { return n.domain().empty() || n.domain() == "ai.onnx"; }

class QdqFusion {
public:
  QdqFusion(onnx::GraphProto &g, const std::string &dir) : g_(g), dir_(dir) {
    std::set<std::string> inputs;
    for (const auto &in : g.input())
      inputs.insert(in.name());
    for (const auto &t : g.initializer())
      if (!inputs.count(t.name())) // an initializer that is also an input can be overridden
        consts_[t.name()] = &t;
    for (int i = 0; i < g.node_size(); ++i)
      for (const std::string &o : g.node(i).output())
        if (!o.empty())
          producer_[o] = i;
    for (const auto &o : g.output())
      graph_outputs_.insert(o.name());
    removed_.assign(static_cast<size_t>(g.node_size()), false);
    for (int i = 0; i < g.node_size(); ++i)
      for (const std::string &in : g.node(i).input())
        consumers_[in].push_back(i);
    count_uses_live();
  }

  int run() {
    int fused = 0;
    for (int i = 0; i < g_.node_size(); ++i) {
      if (removed_[i] || !onnx_domain(g_.node(i)))
        continue;
      const std::string &op = g_.node(i).op_type();
      bool done = false;
      try {
        if (op == "Conv" || op == "MatMul" || op == "Gemm" || op == "Add" || op == "GlobalAveragePool")
          done = fuse_compute(i);
        else if (op == "MaxPool" || op == "Flatten" || op == "Reshape" || op == "Transpose" || op == "Squeeze" ||
                 op == "Unsqueeze")
          done = drop_qdq(i);
      } catch (const Error &) {
        done = false; // a constant maxc cannot read: leave the group as it is
      }
      fused += done;
    }
    if (fused)
      compact();
    return fused;
  }

private:
  struct Dq {
    int node = -1;
    std::string x, scale, zp; // zp "" when absent
    int64_t axis = 1;
  };

  int uses(const std::string &name) const {
    auto it = uses_.find(name);
    return it == uses_.end() ? 0 : it->second;
  }

  const onnx::TensorProto *constant(const std::string &name) const {
    auto it = consts_.find(name);
    return it == consts_.end() ? nullptr : it->second;
  }

  HostTensor value(const std::string &name) const { return tensor_from_proto(*constant(name), dir_, nullptr); }

  static int64_t numel(const onnx::TensorProto &t) {
    int64_t n = 1;
    for (int64_t d : t.dims())
      n *= d;
    return n;
  }

  static bool is_8bit(int32_t type) {
    return type == onnx::TensorProto::UINT8 || type == onnx::TensorProto::INT8;
  }

  /// The DequantizeLinear producing `name` with constant scale (and zero
  /// point), no blocks; nullopt otherwise.
  std::optional<Dq> dq_of(const std::string &name) const {
    auto it = producer_.find(name);
    if (it == producer_.end() || removed_[it->second])
      return std::nullopt;
    const onnx::NodeProto &n = g_.node(it->second);
    if (!onnx_domain(n) || n.op_type() != "DequantizeLinear" || n.input_size() < 2 || n.input(1).empty())
      return std::nullopt;
    Dq d;
    d.node = it->second;
    d.x = n.input(0);
    d.scale = n.input(1);
    d.zp = n.input_size() > 2 ? n.input(2) : "";
    for (const auto &a : n.attribute()) {
      if (a.name() == "axis")
        d.axis = a.i();
      if (a.name() == "block_size" && a.i() != 0)
        return std::nullopt;
    }
    const onnx::TensorProto *s = constant(d.scale);
    if (!s || s->data_type() != onnx::TensorProto::FLOAT || (!d.zp.empty() && !constant(d.zp)))
      return std::nullopt;
    return d;
  }

  /// An activation's DQ: per-tensor scale and a zero point (its dtype is
  /// the activation's) of 8 bits.
  std::optional<Dq> activation_dq(const std::string &name, int32_t &type) const {
    std::optional<Dq> d = dq_of(name);
    if (!d || d->zp.empty() || numel(*constant(d->scale)) != 1 || numel(*constant(d->zp)) != 1 ||
        !is_8bit(constant(d->zp)->data_type()))
      return std::nullopt;
    type = constant(d->zp)->data_type();
    return d;
  }

  /// A weight's DQ: an 8-bit initializer, scale per tensor or per axis
  /// `axis` (of a rank-`rank` weight), zero point likewise or absent.
  std::optional<Dq> weight_dq(const std::string &name, int64_t axis) const {
    std::optional<Dq> d = dq_of(name);
    if (!d)
      return std::nullopt;
    const onnx::TensorProto *w = constant(d->x);
    if (!w || !is_8bit(w->data_type()))
      return std::nullopt;
    int64_t rank = w->dims_size();
    const onnx::TensorProto &s = *constant(d->scale);
    int64_t ns = numel(s);
    if (ns != 1) {
      int64_t a = d->axis < 0 ? d->axis + rank : d->axis;
      if (s.dims_size() != 1 || a != axis || axis >= rank || ns != w->dims(static_cast<int>(axis)))
        return std::nullopt;
    }
    if (!d->zp.empty()) {
      const onnx::TensorProto &z = *constant(d->zp);
      if (z.data_type() != w->data_type() || (numel(z) != 1 && numel(z) != ns))
        return std::nullopt;
    }
    return d;
  }

  /// A bias's DQ: an int32 initializer [n] with zero point 0 and scale
  /// x_scale * w_scale (per element; ORT's QLinearConv and QGemm add the
  /// integers and ignore the bias's scale, so the scales must be those).
  std::optional<Dq> bias_dq(const std::string &name, const Dq &x, const Dq &w) const {
    std::optional<Dq> d = dq_of(name);
    if (!d)
      return std::nullopt;
    const onnx::TensorProto *b = constant(d->x);
    if (!b || b->data_type() != onnx::TensorProto::INT32 || b->dims_size() != 1)
      return std::nullopt;
    if (!d->zp.empty()) {
      HostTensor z = value(d->zp);
      for (int64_t i = 0; i < z.numel(); ++i)
        if (z.get_i64(i) != 0)
          return std::nullopt;
    }
    HostTensor bs = value(d->scale), xs = value(x.scale), ws = value(w.scale);
    int64_t n = b->dims(0);
    if (bs.numel() != 1 && bs.numel() != n)
      return std::nullopt;
    for (int64_t i = 0; i < n; ++i) {
      float want = static_cast<float>(xs.get_f64(0)) * static_cast<float>(ws.get_f64(ws.numel() == 1 ? 0 : i));
      float got = static_cast<float>(bs.get_f64(bs.numel() == 1 ? 0 : i));
      if (!(std::fabs(got - want) <= std::fabs(want) * 0x1p-20f))
        return std::nullopt;
    }
    return d;
  }

  /// The QuantizeLinear that is the only consumer of node i's output 0 (or
  /// of a Relu that is, redundant under the Q's saturation); its node index,
  /// and the Relu's (-1 if none) in `relu`.
  int sole_q(int i, int32_t type, int &relu) const {
    relu = -1;
    const onnx::NodeProto &n = g_.node(i);
    if (n.output_size() != 1 || graph_outputs_.count(n.output(0)) || uses(n.output(0)) != 1)
      return -1;
    int c = consumer(n.output(0));
    if (c >= 0 && onnx_domain(g_.node(c)) && g_.node(c).op_type() == "Relu") {
      const std::string &r = g_.node(c).output(0);
      if (graph_outputs_.count(r) || uses(r) != 1)
        return -1;
      relu = c;
      c = consumer(r);
    }
    if (c < 0 || !onnx_domain(g_.node(c)) || g_.node(c).op_type() != "QuantizeLinear")
      return -1;
    const onnx::NodeProto &q = g_.node(c);
    if (q.input_size() < 3 || q.input(2).empty())
      return -1;
    const onnx::TensorProto *s = constant(q.input(1)), *z = constant(q.input(2));
    if (!s || !z || s->data_type() != onnx::TensorProto::FLOAT || numel(*s) != 1 || numel(*z) != 1 ||
        z->data_type() != type)
      return -1;
    for (const auto &a : q.attribute())
      if ((a.name() == "block_size" && a.i() != 0) || (a.name() == "output_dtype" && a.i() != type))
        return -1;
    if (relu >= 0 && value(q.input(2)).get_i64(0) != (type == onnx::TensorProto::UINT8 ? 0 : -128))
      return -1;
    return c;
  }

  int consumer(const std::string &name) const {
    auto it = consumers_.find(name);
    if (it != consumers_.end())
      for (int k : it->second)
        if (!removed_[k])
          for (const std::string &in : g_.node(k).input())
            if (in == name)
              return k;
    return -1;
  }

  static int64_t attr_int(const onnx::NodeProto &n, const std::string &name, int64_t fallback) {
    for (const auto &a : n.attribute())
      if (a.name() == name)
        return a.i();
    return fallback;
  }

  static float attr_float(const onnx::NodeProto &n, const std::string &name, float fallback) {
    for (const auto &a : n.attribute())
      if (a.name() == name)
        return a.f();
    return fallback;
  }

  /// A scalar zero initializer of `type` (a DQ without a zero point).
  std::string zero_of(int32_t type) {
    std::string name = "maxc.qdq.zero." + std::to_string(type);
    if (!constant(name)) {
      onnx::TensorProto *t = g_.add_initializer();
      t->set_name(name);
      t->set_data_type(type);
      t->add_int32_data(0);
      consts_[name] = t; // stable: repeated field of pointers (protobuf keeps elements in place)
    }
    return name;
  }

  std::string zp_or_zero(const Dq &d) { return d.zp.empty() ? zero_of(constant(d.x)->data_type()) : d.zp; }

  /// DQ(inputs) → op → [Relu] → Q → the QLinear op.
  bool fuse_compute(int i) {
    onnx::NodeProto &n = *g_.mutable_node(i);
    const std::string &op = n.op_type();
    int32_t type = 0, type_b = 0;
    if (n.input_size() < 1)
      return false;
    std::optional<Dq> x = activation_dq(n.input(0), type);
    if (!x)
      return false;
    onnx::NodeProto fused;
    std::vector<std::string> in;
    std::vector<int> dqs = {x->node};
    if (op == "Conv" || op == "Gemm" || op == "MatMul") {
      if (n.input_size() < 2 || (op != "Conv" && op != "Gemm" && n.input_size() != 2))
        return false;
      int64_t axis = 0; // Conv: output channels; Gemm: N (B [N, K] with transB, else [K, N])
      if (op == "Gemm") {
        if (attr_int(n, "transA", 0) != 0 || attr_float(n, "alpha", 1.0f) != 1.0f ||
            attr_float(n, "beta", 1.0f) != 1.0f)
          return false;
        axis = attr_int(n, "transB", 0) ? 0 : 1;
      }
      if (op == "MatMul")
        axis = 1;
      std::optional<Dq> w = weight_dq(n.input(1), axis);
      if (!w || (op != "Conv" && constant(w->x)->dims_size() != 2))
        return false;
      dqs.push_back(w->node);
      std::optional<Dq> b;
      if (op != "MatMul" && n.input_size() > 2 && !n.input(2).empty()) {
        b = bias_dq(n.input(2), *x, *w);
        if (!b)
          return false;
        dqs.push_back(b->node);
      }
      int relu = -1, q = sole_q(i, type, relu);
      if (q < 0)
        return false;
      const onnx::NodeProto &qn = g_.node(q);
      if (op == "Conv") {
        fused.set_op_type("QLinearConv");
        in = {x->x, x->scale, x->zp, w->x, w->scale, zp_or_zero(*w), qn.input(1), qn.input(2)};
        if (b)
          in.push_back(b->x);
      } else if (op == "MatMul") {
        fused.set_op_type("QLinearMatMul");
        in = {x->x, x->scale, x->zp, w->x, w->scale, zp_or_zero(*w), qn.input(1), qn.input(2)};
      } else {
        fused.set_op_type("QGemm");
        fused.set_domain("com.microsoft");
        in = {x->x, x->scale, x->zp, w->x, w->scale, zp_or_zero(*w), b ? b->x : "", qn.input(1), qn.input(2)};
      }
      for (const auto &a : n.attribute())
        if (op == "Conv" || a.name() == "transB")
          *fused.add_attribute() = a;
      return replace(i, relu, q, std::move(fused), in);
    }
    if (op == "Add") {
      std::optional<Dq> y;
      if (n.input_size() != 2 || !(y = activation_dq(n.input(1), type_b)) || type_b != type)
        return false;
      int relu = -1, q = sole_q(i, type, relu);
      if (q < 0 || !add_exact_in_f64(*x, *y, g_.node(q)))
        return false;
      const onnx::NodeProto &qn = g_.node(q);
      fused.set_op_type("QLinearAdd");
      fused.set_domain("com.microsoft");
      return replace(i, relu, q, std::move(fused),
                     {x->x, x->scale, x->zp, y->x, y->scale, y->zp, qn.input(1), qn.input(2)});
    }
    if (op == "GlobalAveragePool") {
      int relu = -1, q = sole_q(i, type, relu);
      if (q < 0 || relu >= 0)
        return false;
      const onnx::NodeProto &qn = g_.node(q);
      fused.set_op_type("QLinearGlobalAveragePool");
      fused.set_domain("com.microsoft");
      return replace(i, -1, q, std::move(fused), {x->x, x->scale, x->zp, qn.input(1), qn.input(2)});
    }
    return false;
  }

  /// maxc computes QLinearAdd's arithmetic exactly for these scales
  /// (qlinear_add_exact, OnnxQuantized.cpp).
  bool add_exact_in_f64(const Dq &a, const Dq &b, const onnx::NodeProto &q) const {
    return qlinear_add_exact(static_cast<float>(value(a.scale).get_f64(0)), value(a.zp).get_i64(0),
                             static_cast<float>(value(b.scale).get_f64(0)), value(b.zp).get_i64(0),
                             static_cast<float>(value(q.input(1)).get_f64(0)), value(q.input(2)).get_i64(0),
                             constant(a.zp)->data_type() == onnx::TensorProto::UINT8);
  }

  /// DQ → op → Q with the same scale and zero point on both sides (and the
  /// same 8-bit type): the op on the integers (it only moves values; MaxPool
  /// also needs a positive scale, so the order is kept).
  bool drop_qdq(int i) {
    onnx::NodeProto &n = *g_.mutable_node(i);
    int32_t type = 0;
    if (n.input_size() < 1 || n.output_size() != 1)
      return false;
    std::optional<Dq> x = activation_dq(n.input(0), type);
    int relu = -1, q = x ? sole_q(i, type, relu) : -1;
    if (q < 0 || relu >= 0)
      return false;
    const onnx::NodeProto &qn = g_.node(q);
    HostTensor s1 = value(x->scale), s2 = value(qn.input(1)), z1 = value(x->zp), z2 = value(qn.input(2));
    if (static_cast<float>(s1.get_f64(0)) != static_cast<float>(s2.get_f64(0)) || z1.get_i64(0) != z2.get_i64(0) ||
        (n.op_type() == "MaxPool" && !(s1.get_f64(0) > 0)))
      return false;
    onnx::NodeProto fused = n;
    std::vector<std::string> in(n.input().begin(), n.input().end());
    in[0] = x->x;
    fused.clear_input();
    return replace(i, -1, q, std::move(fused), in);
  }

  /// Node i becomes `fused` (inputs `in`, output the Q's), the Relu and the
  /// Q are removed; DQs left without readers go in compact().
  bool replace(int i, int relu, int q, onnx::NodeProto fused, const std::vector<std::string> &in) {
    onnx::NodeProto &n = *g_.mutable_node(i);
    fused.set_name(n.name());
    fused.clear_input();
    for (const std::string &s : in)
      fused.add_input(s);
    fused.clear_output();
    fused.add_output(g_.node(q).output(0));
    n = std::move(fused);
    for (const std::string &s : in)
      consumers_[s].push_back(i);
    removed_[q] = true;
    if (relu >= 0)
      removed_[relu] = true;
    count_uses_live();
    return true;
  }

  /// Readers of each value among the nodes still there (a name a body
  /// reads counts as a use: a capture), graph outputs included.
  void count_uses_live() {
    uses_.clear();
    std::function<void(const onnx::NodeProto &)> node_uses = [&](const onnx::NodeProto &n) {
      for (const std::string &in : n.input())
        if (!in.empty())
          ++uses_[in];
      for (const auto &a : n.attribute()) { // a body's reads of outer names: captures
        std::vector<const onnx::GraphProto *> bodies;
        if (a.has_g())
          bodies.push_back(&a.g());
        for (const auto &sub : a.graphs())
          bodies.push_back(&sub);
        for (const onnx::GraphProto *body : bodies) {
          for (const auto &m : body->node())
            node_uses(m);
          for (const auto &o : body->output())
            ++uses_[o.name()];
        }
      }
    };
    for (int k = 0; k < g_.node_size(); ++k)
      if (!removed_[k])
        node_uses(g_.node(k));
    for (const auto &o : g_.output())
      ++uses_[o.name()];
  }

  /// Drops the removed nodes and the DequantizeLinear nodes nothing reads.
  void compact() {
    count_uses_live();
    for (bool changed = true; changed;) {
      changed = false;
      for (int k = 0; k < g_.node_size(); ++k)
        if (!removed_[k] && onnx_domain(g_.node(k)) && g_.node(k).op_type() == "DequantizeLinear" &&
            uses(g_.node(k).output(0)) == 0) {
          removed_[k] = true;
          changed = true;
        }
      if (changed)
        count_uses_live();
    }
    google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
    for (int k = 0; k < g_.node_size(); ++k)
      if (!removed_[k])
        *kept.Add() = std::move(*g_.mutable_node(k));
    g_.mutable_node()->Swap(&kept);
  }

  onnx::GraphProto &g_;
  std::string dir_;
  std::map<std::string, const onnx::TensorProto *> consts_;
  std::map<std::string, int> producer_;
  std::map<std::string, int> uses_;
  std::map<std::string, std::vector<int>> consumers_;
  std::set<std::string> graph_outputs_;
  std::vector<bool> removed_;
};

} // namespace

int fuse_qdq(onnx::ModelProto &model, const std::string &model_dir) {
  bool any_q = false, any_dq = false;
  for (const auto &n : model.graph().node()) {
    any_q = any_q || n.op_type() == "QuantizeLinear";
    any_dq = any_dq || n.op_type() == "DequantizeLinear";
  }
  if (!any_q || !any_dq)
    return 0;
  return QdqFusion(*model.mutable_graph(), model_dir).run();
}

} // namespace maxc::onnx_import

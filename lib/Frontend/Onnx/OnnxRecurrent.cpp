// ONNX LSTM, GRU and RNN → maxc ops. The recurrence is unrolled over the
// sequence, whose length must be static (pinned with --dim or constant):
// one matmul projects every time step's input for all directions at once
// (X [seq*batch, input] @ W^T + bias), then each step adds the recurrent
// matmul h @ R^T to its row and applies the gates and state updates. In a
// graph trace each step is a subgraph call (the projection, the step's row
// index, the state, R^T and the mask as operands), so the steps of one
// shape share one definition and the compiler sees one cell, not seq.
// sequence_lens masks the state update of rows past their length and zeroes
// Y there (a reverse direction then starts at each row's own last step:
// the masked steps before it keep the initial state).
#include "OnnxOps.h"

#include "maxc/Ops/Ops.h"
#include "maxc/Realization/GraphRealizationContext.h"
#include "maxc/Support/Error.h"

#include <algorithm>
#include <cctype>

namespace maxc::onnx_import {
namespace {

/// The most time steps a recurrence is unrolled to.
constexpr int64_t kMaxSteps = 4096;

[[noreturn]] void bad(const std::string &what) { throw Error(ErrorCode::OnnxAttribute, what); }

/// One activation function with its alpha and beta.
struct Activation {
  std::string name; // the ONNX op spelling (Sigmoid, LeakyRelu, ...)
  double alpha = 0, beta = 0;
};

/// The activations the spec lists: how many of alpha/beta each reads from
/// activation_alpha/activation_beta (in order, as ONNX Runtime consumes
/// them), and the defaults (the corresponding ONNX op's; Affine and
/// ScaledTanh, which have no op, default to the identity scale).
struct ActivationKind {
  const char *name;
  bool alpha, beta;
  double default_alpha, default_beta;
};
constexpr ActivationKind kActivations[] = {
    {"Relu", false, false, 0, 0},         {"Tanh", false, false, 0, 0},
    {"Sigmoid", false, false, 0, 0},      {"Affine", true, true, 1.0, 0.0},
    {"LeakyRelu", true, false, 0.01, 0},  {"ThresholdedRelu", true, false, 1.0, 0},
    {"ScaledTanh", true, true, 1.0, 1.0}, {"HardSigmoid", true, true, 0.2, 0.5},
    {"Elu", true, false, 1.0, 0},         {"Softsign", false, false, 0, 0},
    {"Softplus", false, false, 0, 0}};

std::string lower(std::string s) {
  for (char &ch : s)
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

/// The node's activations (`per_direction` per direction, defaults when the
/// attribute is absent), alpha/beta assigned in order.
std::vector<Activation> activations(const OnnxNode &node, const std::vector<std::string> &defaults,
                                    int64_t directions) {
  std::vector<std::string> names;
  if (const auto *a = node.attr("activations"))
    names.assign(a->strings().begin(), a->strings().end());
  size_t want = defaults.size() * static_cast<size_t>(directions);
  if (names.empty())
    for (int64_t d = 0; d < directions; ++d)
      names.insert(names.end(), defaults.begin(), defaults.end());
  if (names.size() != want)
    bad(node.op() + " needs " + std::to_string(want) + " activations (" + std::to_string(defaults.size()) +
        " per direction), got " + std::to_string(names.size()));
  std::vector<double> alphas = node.attr_floats("activation_alpha"), betas = node.attr_floats("activation_beta");
  size_t ai = 0, bi = 0;
  std::vector<Activation> out;
  for (const std::string &name : names) {
    const ActivationKind *kind = nullptr;
    for (const ActivationKind &k : kActivations)
      if (lower(k.name) == lower(name))
        kind = &k;
    if (!kind) {
      std::string all;
      for (const ActivationKind &k : kActivations)
        all += std::string(all.empty() ? "" : ", ") + k.name;
      throw Error(ErrorCode::OnnxUnsupportedOp,
                  node.op() + " activation '" + name + "' is not supported (supported: " + all + ")");
    }
    Activation act{kind->name, kind->default_alpha, kind->default_beta};
    if (kind->alpha && ai < alphas.size())
      act.alpha = alphas[ai++];
    if (kind->beta && bi < betas.size())
      act.beta = betas[bi++];
    out.push_back(act);
  }
  return out;
}

Tensor sc(double v, DType dtype) { return ops::scalar(v, dtype); }

Tensor activate(const Activation &a, const Tensor &x, const OnnxNode &node) {
  DType t = x.dtype();
  if (a.name == "Affine")
    return ops::add(ops::mul(x, sc(a.alpha, t)), sc(a.beta, t));
  if (a.name == "ScaledTanh")
    return ops::mul(sc(a.alpha, t), ops::tanh(ops::mul(x, sc(a.beta, t))));
  return unary_op(a.name, x, node, [&](const std::string &name, double fallback) {
    return name == "alpha" ? a.alpha : name == "beta" ? a.beta : fallback;
  });
}

/// A static dim of an operand, or an error naming it.
int64_t static_extent(const Tensor &t, int64_t axis, const std::string &what) {
  const Dim &d = t.shape()[static_cast<size_t>(axis)];
  if (!d.is_static())
    bad(what + " must have a static size, got " + d.to_string());
  return d.value();
}

void check_shape(const OnnxNode &node, const Tensor &t, const std::string &name, const std::vector<Dim> &want) {
  if (t.shape() != Shape(want.begin(), want.end()))
    bad(node.op() + " input " + name + " has the shape " + shape_to_string(t.shape()) + ", expected " +
        shape_to_string(Shape(want.begin(), want.end())));
}

/// x[d] of a [directions, ...] operand, as `shape`.
Tensor direction(const Tensor &x, int64_t d, const Shape &shape) {
  return ops::reshape(ops::slice(x, {d}, {d + 1}, {0}), shape);
}

/// The state update mask of a step: [batch, 1] booleans (row is within its
/// sequence_lens), or null where every row is.
class StepMask {
public:
  StepMask(const OnnxNode &node, const Dim &batch) {
    if (!node.has(4))
      return;
    const Val &v = node.val(4);
    if (v.kind == Val::Kind::traced) {
      runtime_ = node.in(4);
      if (!is_integer(runtime_.dtype()) || runtime_.rank() != 1)
        bad(node.op() + " sequence_lens must be a 1-D integer tensor");
      runtime_ = ops::reshape(runtime_, {batch, Dim(1)});
      return;
    }
    lens_ = node.ints(4);
    if (!batch.is_static() || static_cast<int64_t>(lens_.size()) != batch.value())
      bad(node.op() + " sequence_lens holds " + std::to_string(lens_.size()) + " lengths for a batch of " +
          batch.to_string());
    known_ = true;
  }
  /// Every row has finished before step t (a known sequence_lens): the step
  /// changes nothing and its output is zero.
  bool all_done(int64_t t) const {
    return known_ && std::all_of(lens_.begin(), lens_.end(), [&](int64_t n) { return t >= n; });
  }
  Tensor at(int64_t t) const {
    if (!runtime_.is_null())
      return ops::less(sc(double(t), runtime_.dtype()), runtime_);
    if (!known_ || std::all_of(lens_.begin(), lens_.end(), [&](int64_t n) { return t < n; }))
      return {};
    std::vector<int64_t> valid;
    for (int64_t n : lens_)
      valid.push_back(t < n ? 1 : 0);
    return Tensor::from_i64(DType::boolean, {int64_t(lens_.size()), 1}, valid);
  }

private:
  Tensor runtime_;
  std::vector<int64_t> lens_;
  bool known_ = false;
};

enum class Cell { lstm, gru, rnn };

} // namespace

// A concat's kernel picks each element's operand in turn, so one of 512
// pieces costs far more than three levels of 16.
Tensor concat_tree(std::vector<Tensor> xs, int64_t axis) {
  constexpr size_t kFan = 16;
  while (xs.size() > 1) {
    std::vector<Tensor> next;
    for (size_t i = 0; i < xs.size(); i += kFan) {
      std::vector<Tensor> group(xs.begin() + long(i), xs.begin() + long(std::min(xs.size(), i + kFan)));
      next.push_back(group.size() == 1 ? group[0] : ops::concat(group, axis));
    }
    xs = std::move(next);
  }
  return xs.at(0);
}

std::vector<Tensor> recurrent(const OnnxNode &node) {
  const std::string &op = node.op();
  Cell cell = op == "LSTM" ? Cell::lstm : op == "GRU" ? Cell::gru : Cell::rnn;
  const int64_t gates = cell == Cell::lstm ? 4 : cell == Cell::gru ? 3 : 1;

  std::string dir = node.attr_string("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    bad(op + " direction '" + dir + "' is not forward, reverse or bidirectional");
  const int64_t dirs = dir == "bidirectional" ? 2 : 1;
  const int64_t layout = node.attr_int("layout", 0);
  if (layout != 0 && layout != 1)
    bad(op + " layout " + std::to_string(layout) + " is not 0 or 1");
  const bool lbr = cell == Cell::gru && node.attr_int("linear_before_reset", 0) != 0;
  const bool input_forget = cell == Cell::lstm && node.attr_int("input_forget", 0) != 0;
  const std::optional<double> clip = node.has_attr("clip") ? std::optional<double>(node.attr_float("clip", 0))
                                                           : std::nullopt;
  if (clip && !(*clip >= 0))
    bad(op + " clip must be non-negative");
  std::vector<Activation> acts =
      activations(node, cell == Cell::lstm  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                        : cell == Cell::gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                            : std::vector<std::string>{"Tanh"},
                  dirs);
  const size_t per_dir = acts.size() / static_cast<size_t>(dirs);

  Tensor x = node.in(0);
  if (x.rank() != 3)
    bad(op + " input X must have rank 3, got " + shape_to_string(x.shape()));
  if (!is_float(x.dtype()))
    bad(op + " input X must be a float tensor");
  if (layout == 1)
    x = ops::transpose(x, {1, 0, 2});
  const Dim seq_dim = x.shape()[0], batch = x.shape()[1], in_dim = x.shape()[2];
  if (!seq_dim.is_static())
    bad(op + " has the symbolic sequence length " + seq_dim.to_string() +
        ": the recurrence is unrolled and needs a static length (there is no Loop op yet); pin it with --dim " +
        seq_dim.to_string() + "=N");
  const int64_t seq = seq_dim.value();
  if (seq < 1)
    bad(op + " has no time steps");
  if (seq > kMaxSteps)
    bad(op + " has " + std::to_string(seq) + " time steps; at most " + std::to_string(kMaxSteps) +
        " are unrolled");
  const DType t = x.dtype();

  Tensor w = node.in(1), r = node.in(2);
  if (r.rank() != 3)
    bad(op + " input R must have rank 3, got " + shape_to_string(r.shape()));
  const int64_t hidden = static_extent(r, 2, op + " input R");
  if (hidden < 1)
    bad(op + " has a hidden size of 0");
  if (node.has_attr("hidden_size") && node.attr_int("hidden_size", 0) != hidden)
    bad(op + " hidden_size " + std::to_string(node.attr_int("hidden_size", 0)) + " disagrees with R's " +
        std::to_string(hidden));
  const int64_t gh = gates * hidden;
  check_shape(node, w, "W", {Dim(dirs), Dim(gh), in_dim});
  check_shape(node, r, "R", {Dim(dirs), Dim(gh), Dim(hidden)});
  for (Tensor *p : {&w, &r})
    if (p->dtype() != t)
      bad(op + " inputs X, W and R must have one dtype");

  // The input projection of every step and direction: [seq, batch, dirs*gh].
  Tensor proj = ops::matmul(ops::reshape(x, {Dim(seq) * batch, in_dim}), ops::reshape(w, {Dim(dirs * gh), in_dim}),
                            false, true);
  Tensor rbh; // GRU linear_before_reset: R's bias of the h gate, [dirs, hidden]
  if (node.has(3)) {
    Tensor b = node.in(3);
    check_shape(node, b, "B", {Dim(dirs), Dim(2 * gh)});
    Tensor wb = ops::slice(b, {0}, {gh}, {1}), rb = ops::slice(b, {gh}, {2 * gh}, {1});
    Tensor bias;
    if (lbr) { // Rbh is applied inside r * (...): only the z and r parts join the input bias
      bias = ops::concat({ops::add(ops::slice(wb, {0}, {2 * hidden}, {1}), ops::slice(rb, {0}, {2 * hidden}, {1})),
                          ops::slice(wb, {2 * hidden}, {gh}, {1})},
                         1);
      rbh = ops::slice(rb, {2 * hidden}, {gh}, {1});
    } else {
      bias = ops::add(wb, rb);
    }
    proj = ops::add(proj, ops::reshape(bias, {Dim(dirs * gh)}));
  }
  proj = ops::reshape(proj, {Dim(seq), batch, Dim(dirs * gh)});

  // Initial states: [dirs, batch, hidden] ([batch, dirs, hidden] in layout 1).
  auto initial = [&](size_t index, const std::string &name) -> Tensor {
    if (!node.has(index))
      return {};
    Tensor s = node.in(index);
    if (layout == 1 && s.rank() == 3)
      s = ops::transpose(s, {1, 0, 2});
    check_shape(node, s, name, {Dim(dirs), batch, Dim(hidden)});
    return s;
  };
  Tensor init_h = initial(5, "initial_h"), init_c = cell == Cell::lstm ? initial(6, "initial_c") : Tensor();
  Tensor peep;
  if (cell == Cell::lstm && node.has(7)) {
    peep = node.in(7);
    check_shape(node, peep, "P", {Dim(dirs), Dim(3 * hidden)});
  }
  StepMask masks(node, batch);

  const Shape state{batch, Dim(hidden)};
  auto clipped = [&](Tensor v) {
    return clip ? ops::minimum(ops::maximum(v, sc(-*clip, t)), sc(*clip, t)) : v;
  };
  auto part = [&](const Tensor &v, int64_t k) { return ops::slice(v, {k * hidden}, {(k + 1) * hidden}, {1}); };

  struct Weights {
    Tensor r, r_zr, r_h, rbh, p_i, p_o, p_f; // r, r_zr, r_h: transposed ([hidden, gates*hidden])
    std::vector<std::pair<std::string, Tensor *>> fields() {
      return {{"r", &r}, {"r_zr", &r_zr}, {"r_h", &r_h}, {"rbh", &rbh}, {"p_i", &p_i}, {"p_o", &p_o}, {"p_f", &p_f}};
    }
  };
  // One time step: the new h, the new c (LSTM), and where `mask` is given
  // (rows past their length keep their state), Y's step.
  auto step_fn = [&](const Activation *f, bool h_zero, int64_t d, const Tensor &proj_all, const Tensor &index, Tensor h,
                     Tensor c, const Tensor &mask, const Weights &w) {
    // The step's input projection: row `index` (a scalar) of the projection
    // (an operand of the step, not a slice per step in the caller).
    Tensor pt = ops::gather(proj_all, index, 0);
    if (dirs > 1)
      pt = ops::slice(pt, {d * gh}, {(d + 1) * gh}, {1});
    const Tensor &rd = w.r;
    Tensor h_new, c_new;
    if (cell == Cell::lstm) { // gates i, o, f, c
      Tensor g = h_zero ? pt : ops::add(pt, ops::matmul(h, rd));
      Tensor gi = part(g, 0), go = part(g, 1), gf = part(g, 2), gc = part(g, 3);
      if (!w.p_i.is_null()) {
        gi = ops::add(gi, ops::mul(w.p_i, c));
        gf = ops::add(gf, ops::mul(w.p_f, c));
      }
      Tensor i = activate(f[0], clipped(gi), node);
      Tensor fg = input_forget ? ops::sub(sc(1, t), i) : activate(f[0], clipped(gf), node);
      Tensor cand = activate(f[1], clipped(gc), node);
      c_new = ops::add(ops::mul(fg, c), ops::mul(i, cand));
      if (!w.p_o.is_null())
        go = ops::add(go, ops::mul(w.p_o, c_new));
      Tensor o = activate(f[0], clipped(go), node);
      h_new = ops::mul(o, activate(f[2], c_new, node));
    } else if (cell == Cell::gru) { // gates z, r, h
      Tensor gzr = ops::slice(pt, {0}, {2 * hidden}, {1}), gh_in = part(pt, 2), hr;
      if (lbr) {
        Tensor rec = h_zero ? Tensor() : ops::matmul(h, rd);
        if (!rec.is_null()) {
          gzr = ops::add(gzr, ops::slice(rec, {0}, {2 * hidden}, {1}));
          hr = part(rec, 2);
        }
        if (!w.rbh.is_null())
          hr = hr.is_null() ? ops::broadcast_to(w.rbh, state) : ops::add(hr, w.rbh);
      } else if (!h_zero) {
        gzr = ops::add(gzr, ops::matmul(h, w.r_zr));
      }
      Tensor z = activate(f[0], clipped(part(gzr, 0)), node);
      Tensor rg = activate(f[0], clipped(part(gzr, 1)), node);
      if (lbr && !hr.is_null())
        gh_in = ops::add(gh_in, ops::mul(rg, hr));
      else if (!lbr && !h_zero)
        gh_in = ops::add(gh_in, ops::matmul(ops::mul(rg, h), w.r_h));
      Tensor cand = activate(f[1], clipped(gh_in), node);
      h_new = ops::add(ops::mul(ops::sub(sc(1, t), z), cand), ops::mul(z, h));
    } else {
      Tensor g = h_zero ? pt : ops::add(pt, ops::matmul(h, rd));
      h_new = activate(f[0], clipped(g), node);
    }
    std::vector<Tensor> out{mask.is_null() ? h_new : ops::where(mask, h_new, h)};
    if (cell == Cell::lstm)
      out.push_back(mask.is_null() ? c_new : ops::where(mask, c_new, c));
    if (!mask.is_null())
      out.push_back(ops::where(mask, h_new, sc(0, t)));
    return out;
  };
  auto *graph_ctx = dynamic_cast<GraphRealizationContext *>(RealizationContext::current());
  std::vector<Tensor> ys(static_cast<size_t>(dirs)), hs, cs;
  for (int64_t d = 0; d < dirs; ++d) {
    const Activation *f = &acts[size_t(d) * per_dir];
    Weights w;
    Tensor rd = direction(r, d, {Dim(gh), Dim(hidden)});
    // R^T, transposed once here rather than in every step's matmul.
    if (cell == Cell::gru && !lbr) { // (r ⊙ h) @ Rh^T needs the h gate's R apart
      w.r_zr = ops::transpose(ops::slice(rd, {0}, {2 * hidden}, {0}), {1, 0});
      w.r_h = ops::transpose(ops::slice(rd, {2 * hidden}, {gh}, {0}), {1, 0});
    } else {
      w.r = ops::transpose(rd, {1, 0});
    }
    if (!rbh.is_null())
      w.rbh = direction(rbh, d, {Dim(hidden)});
    if (!peep.is_null()) {
      Tensor pd = direction(peep, d, {Dim(3 * hidden)});
      w.p_i = ops::slice(pd, {0}, {hidden}, {0});
      w.p_o = ops::slice(pd, {hidden}, {2 * hidden}, {0});
      w.p_f = ops::slice(pd, {2 * hidden}, {3 * hidden}, {0});
    }
    // A state that is still the implicit zero skips its matmul.
    bool h_zero = init_h.is_null();
    Tensor h = h_zero ? ops::full(0, t, state) : direction(init_h, d, state);
    Tensor c = cell != Cell::lstm ? Tensor()
               : init_c.is_null() ? ops::full(0, t, state)
                                  : direction(init_c, d, state);
    std::vector<Tensor> y(static_cast<size_t>(seq));
    for (int64_t s = 0; s < seq; ++s) {
      const int64_t step = d == 1 || dir == "reverse" ? seq - 1 - s : s;
      if (masks.all_done(step)) {
        y[size_t(step)] = ops::full(0, t, state);
        continue;
      }
      Tensor index = Tensor::from_i64(DType::i64, {}, {step});
      Tensor mask = masks.at(step);
      std::vector<Tensor> args{proj, index, h};
      if (cell == Cell::lstm)
        args.push_back(c);
      if (!mask.is_null())
        args.push_back(mask);
      std::vector<Tensor> out;
      if (graph_ctx) { // one definition for every step of the same shape
        CallOptions call;
        call.name = lower(op) + "_step";
        SubgraphBody body = [&](GraphRealizationContext &, const std::vector<Tensor> &a, const NamedTensors &p) {
          Weights bw;
          for (auto &[name, field] : bw.fields())
            if (auto it = p.find(name); it != p.end())
              *field = it->second;
          size_t k = 3;
          Tensor bc = cell == Cell::lstm ? a[k++] : Tensor(), bm = mask.is_null() ? Tensor() : a[k++];
          std::vector<TensorTree> leaves;
          for (Tensor &v : step_fn(f, h_zero, d, a[0], a[1], a[2], bc, bm, bw))
            leaves.emplace_back(std::move(v));
          return TensorTree::list(std::move(leaves));
        };
        NamedTensors params;
        for (auto &[name, field] : w.fields())
          if (!field->is_null())
            params[name] = *field;
        out = graph_ctx->call(call, body, args, params).flatten();
      } else {
        out = step_fn(f, h_zero, d, proj, index, h, c, mask, w);
      }
      // out: h, then c (LSTM), then Y's step where rows are masked
      h = out[0];
      if (cell == Cell::lstm)
        c = out[1];
      y[size_t(step)] = mask.is_null() ? h : out.back();
      h_zero = false;
    }
    if (node.wants_output(0)) {
      std::vector<Tensor> steps;
      for (const Tensor &v : y)
        steps.push_back(ops::unsqueeze(v, {0, 1}));
      ys[size_t(d)] = concat_tree(steps, 0); // [seq, 1, batch, hidden]
    }
    hs.push_back(ops::unsqueeze(h, {0}));
    if (cell == Cell::lstm)
      cs.push_back(ops::unsqueeze(c, {0}));
  }

  auto join = [&](const std::vector<Tensor> &v, int64_t axis) { return v.size() == 1 ? v[0] : ops::concat(v, axis); };
  std::vector<Tensor> out(node.num_outputs());
  if (node.wants_output(0)) {
    Tensor y = join(ys, 1); // [seq, dirs, batch, hidden]
    out[0] = layout == 1 ? ops::transpose(y, {2, 0, 1, 3}) : y;
  }
  if (node.wants_output(1)) {
    Tensor y = join(hs, 0); // [dirs, batch, hidden]
    out[1] = layout == 1 ? ops::transpose(y, {1, 0, 2}) : y;
  }
  if (cell == Cell::lstm && node.wants_output(2)) {
    Tensor y = join(cs, 0);
    out[2] = layout == 1 ? ops::transpose(y, {1, 0, 2}) : y;
  }
  if (cell != Cell::lstm && node.num_outputs() > 2)
    bad(op + " has at most 2 outputs");
  return out;
}

} // namespace maxc::onnx_import

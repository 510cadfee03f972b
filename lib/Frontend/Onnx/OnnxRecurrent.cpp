// ONNX LSTM, GRU and RNN → maxc ops: one matmul projects every time step's
// input for all directions at once (X [seq*batch, input] @ W^T + bias), then
// one `recurrence` node per direction (maxc/Ops/Recurrence.h) runs the cell
// over the sequence, whose length may be symbolic. R^T goes to it in the
// column blocks its kernel reads, packed here when R is a weight.
// sequence_lens masks the state update of rows past their length and zeroes
// Y there (a reverse direction then starts at each row's own last step:
// the masked steps before it keep the initial state). Backends without a
// recurrence kernel (the GPU ones) get it unrolled by decompose(), which
// needs a static length.
#include "OnnxOps.h"

#include "maxc/Ops/Ops.h"
#include "maxc/Ops/Recurrence.h"
#include "maxc/Support/Error.h"

#include <algorithm>
#include <cctype>

namespace maxc::onnx_import {
namespace {

[[noreturn]] void bad(const std::string &what) { throw Error(ErrorCode::OnnxAttribute, what); }

std::string lower(std::string s) {
  for (char &ch : s)
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

/// One activation function with its alpha and beta.
struct Activation {
  std::string name; // the ONNX op spelling (Sigmoid, LeakyRelu, ...)
  double alpha = 0, beta = 0;
};

/// The node's activations (`per_direction` per direction, defaults when the
/// attribute is absent), alpha/beta assigned in order (as ONNX Runtime
/// consumes activation_alpha/activation_beta), else the defaults of
/// maxc/Ops/Recurrence.h.
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
    recurrence::Act kind;
    if (!recurrence::parse_act(name, &kind))
      throw Error(ErrorCode::OnnxUnsupportedOp, node.op() + " activation '" + name +
                                                    "' is not supported (supported: " + recurrence::act_names() + ")");
    Activation act{recurrence::act_name(kind), recurrence::act_default_alpha(kind), recurrence::act_default_beta(kind)};
    if (recurrence::act_has_alpha(kind) && ai < alphas.size())
      act.alpha = alphas[ai++];
    if (recurrence::act_has_beta(kind) && bi < betas.size())
      act.beta = betas[bi++];
    out.push_back(act);
  }
  return out;
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
  const Dim seq = x.shape()[0], batch = x.shape()[1], in_dim = x.shape()[2];
  if (seq.is_static() && seq.value() < 1)
    bad(op + " has no time steps");
  const DType t = x.dtype();

  Tensor w = node.in(1);
  const Val &r_val = node.val(2);
  Tensor r = r_val.kind == Val::Kind::known ? Tensor() : node.in(2);
  const Shape r_shape = r.is_null() ? Shape(r_val.data.shape().begin(), r_val.data.shape().end()) : r.shape();
  const DType r_dtype = r.is_null() ? r_val.data.dtype() : r.dtype();
  if (r_shape.size() != 3)
    bad(op + " input R must have rank 3, got " + shape_to_string(r_shape));
  if (!r_shape[2].is_static())
    bad(op + " input R must have a static size, got " + r_shape[2].to_string());
  const int64_t hidden = r_shape[2].value();
  if (hidden < 1)
    bad(op + " has a hidden size of 0");
  if (node.has_attr("hidden_size") && node.attr_int("hidden_size", 0) != hidden)
    bad(op + " hidden_size " + std::to_string(node.attr_int("hidden_size", 0)) + " disagrees with R's " +
        std::to_string(hidden));
  const int64_t gh = gates * hidden;
  check_shape(node, w, "W", {Dim(dirs), Dim(gh), in_dim});
  if (r_shape != Shape{Dim(dirs), Dim(gh), Dim(hidden)})
    bad(op + " input R has the shape " + shape_to_string(r_shape) + ", expected " +
        shape_to_string(Shape{Dim(dirs), Dim(gh), Dim(hidden)}));
  if (w.dtype() != t || r_dtype != t)
    bad(op + " inputs X, W and R must have one dtype");

  // The input projection of every step and direction: [seq, batch, dirs*gh].
  Tensor proj = ops::matmul(ops::reshape(x, {seq * batch, in_dim}), ops::reshape(w, {Dim(dirs * gh), in_dim}),
                            false, true);
  Tensor rbh; // GRU linear_before_reset: R's bias of the h gate, [dirs, hidden]
  const Val &b_val = node.has(3) ? node.val(3) : node.val(0);
  if (node.has(3) && !lbr && b_val.kind == Val::Kind::known && b_val.data.dtype() == t &&
      b_val.data.shape() == std::vector<int64_t>{dirs, 2 * gh}) {
    // A known B: Wb + Rb summed here (the same f32 rounding as an add), one
    // constant the projection GEMM adds in its epilogue.
    HostTensor bias(t, {dirs * gh});
    for (int64_t d = 0; d < dirs; ++d)
      for (int64_t j = 0; j < gh; ++j)
        bias.set_f64(d * gh + j, b_val.data.get_f64(d * 2 * gh + j) + b_val.data.get_f64(d * 2 * gh + gh + j));
    proj = ops::add(proj, Tensor::from_host(bias));
  } else if (node.has(3)) {
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
  proj = ops::reshape(proj, {seq, batch, Dim(dirs * gh)});

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
  Tensor lens;
  if (node.has(4)) {
    lens = node.in(4);
    if (!is_integer(lens.dtype()) || lens.rank() != 1)
      bad(op + " sequence_lens must be a 1-D integer tensor");
    if (lens.shape()[0] != batch)
      bad(op + " sequence_lens holds " + lens.shape()[0].to_string() + " lengths for a batch of " + batch.to_string());
  }

  // R^T of each direction in column blocks of K, the layout the recurrence
  // kernel reads ([G*H/K, H, K], maxc/Ops/Recurrence.h): packed here when R
  // is known (a weight), else by a transpose at run time.
  const int64_t kb = recurrence::block_of(hidden);
  auto packed_r = [&](int64_t d) -> Tensor {
    if (r.is_null()) {
      const HostTensor &src = r_val.data;
      HostTensor dst(t, {gh / kb, hidden, kb});
      for (int64_t j = 0; j < gh; ++j)
        for (int64_t k = 0; k < hidden; ++k)
          dst.set_f64(((j / kb) * hidden + k) * kb + j % kb, src.get_f64((d * gh + j) * hidden + k));
      return Tensor::from_host(dst);
    }
    Tensor rd = direction(r, d, {Dim(gh / kb), Dim(kb), Dim(hidden)});
    return ops::transpose(rd, {0, 2, 1});
  };

  std::string act_names;
  std::vector<double> alphas, betas;
  Attrs attrs{{"cell", std::string(lower(op))},
              {"input_forget", input_forget},
              {"linear_before_reset", lbr},
              {"peephole", !peep.is_null()},
              {"masked", !lens.is_null()}};
  if (clip)
    attrs.set("clip", *clip);
  std::vector<Tensor> ys, hs, cs;
  const Shape state{batch, Dim(hidden)};
  for (int64_t d = 0; d < dirs; ++d) {
    std::string names;
    std::vector<double> al, be;
    for (size_t i = 0; i < per_dir; ++i) {
      const Activation &a = acts[size_t(d) * per_dir + i];
      names += std::string(i ? "," : "") + a.name;
      al.push_back(a.alpha);
      be.push_back(a.beta);
    }
    Attrs da = attrs;
    da.set("activations", names);
    da.set("activation_alpha", al);
    da.set("activation_beta", be);
    da.set("reverse", d == 1 || dir == "reverse");
    std::vector<Tensor> operands{dirs > 1 ? ops::slice(proj, {d * gh}, {(d + 1) * gh}, {2}) : proj, packed_r(d),
                                 init_h.is_null() ? ops::full(0, t, state) : direction(init_h, d, state)};
    if (cell == Cell::lstm)
      operands.push_back(init_c.is_null() ? ops::full(0, t, state) : direction(init_c, d, state));
    if (!peep.is_null())
      operands.push_back(direction(peep, d, {Dim(3 * hidden)}));
    if (lbr)
      operands.push_back(rbh.is_null() ? ops::full(0, t, {Dim(hidden)}) : direction(rbh, d, {Dim(hidden)}));
    if (!lens.is_null())
      operands.push_back(lens);
    std::vector<Tensor> res = ops::recurrence(operands, da);
    ys.push_back(ops::unsqueeze(res[0], {1})); // [seq, 1, batch, hidden]
    hs.push_back(ops::unsqueeze(res[1], {0}));
    if (cell == Cell::lstm)
      cs.push_back(ops::unsqueeze(res[2], {0}));
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

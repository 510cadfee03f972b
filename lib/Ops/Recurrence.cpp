// recurrence: one direction of an LSTM / GRU / RNN layer over a sequence of
// any length (the operands, attributes and results: maxc/Ops/Recurrence.h).
// The ONNX importer records one per direction after the input projection.
// A composite: backends that lower it whole (the CPU, f32:
// Codegen/Cpu/RecurrenceEmitter) keep it; decompose() unrolls it into
// per-step primitives for every other backend (a static length only).
//
// Reference semantics: each step's gates and state update in double, the
// state kept in double between steps, results rounded once.
#include "Families.h"
#include "OpHelpers.h"
#include "maxc/Ops/OpRegistry.h"
#include "maxc/Ops/Ops.h"
#include "maxc/Ops/Recurrence.h"
#include "maxc/Realization/RealizationContext.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

namespace maxc {
using namespace ophelpers;

namespace recurrence {
namespace {
struct ActInfo {
  Act act;
  const char *name;
  bool alpha, beta;
  double default_alpha, default_beta;
};
// Affine and ScaledTanh, which have no ONNX op, default to the identity scale.
constexpr ActInfo kActs[] = {
    {Act::relu, "Relu", false, false, 0, 0},
    {Act::tanh, "Tanh", false, false, 0, 0},
    {Act::sigmoid, "Sigmoid", false, false, 0, 0},
    {Act::affine, "Affine", true, true, 1.0, 0.0},
    {Act::leaky_relu, "LeakyRelu", true, false, 0.01, 0},
    {Act::thresholded_relu, "ThresholdedRelu", true, false, 1.0, 0},
    {Act::scaled_tanh, "ScaledTanh", true, true, 1.0, 1.0},
    {Act::hard_sigmoid, "HardSigmoid", true, true, 0.2, 0.5},
    {Act::elu, "Elu", true, false, 1.0, 0},
    {Act::softsign, "Softsign", false, false, 0, 0},
    {Act::softplus, "Softplus", false, false, 0, 0},
};
const ActInfo &info(Act a) { return kActs[static_cast<size_t>(a)]; }
std::string lower(std::string s) {
  for (char &ch : s)
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}
} // namespace

const char *act_name(Act a) { return info(a).name; }
bool parse_act(const std::string &name, Act *out) {
  for (const ActInfo &i : kActs)
    if (lower(i.name) == lower(name)) {
      *out = i.act;
      return true;
    }
  return false;
}
std::string act_names() {
  std::string all;
  for (const ActInfo &i : kActs)
    all += std::string(all.empty() ? "" : ", ") + i.name;
  return all;
}
bool act_has_alpha(Act a) { return info(a).alpha; }
bool act_has_beta(Act a) { return info(a).beta; }
double act_default_alpha(Act a) { return info(a).default_alpha; }
double act_default_beta(Act a) { return info(a).default_beta; }

double act_apply(const Activation &a, double x) {
  switch (a.act) {
  case Act::relu: return x > 0 ? x : (std::isnan(x) ? x : 0.0);
  case Act::tanh: return std::tanh(x);
  case Act::sigmoid: return 1 / (1 + std::exp(-x));
  case Act::affine: return a.alpha * x + a.beta;
  case Act::leaky_relu: return x < 0 ? a.alpha * x : x;
  case Act::thresholded_relu: return x > a.alpha ? x : 0.0;
  case Act::scaled_tanh: return a.alpha * std::tanh(a.beta * x);
  case Act::hard_sigmoid: return std::max(0.0, std::min(1.0, a.alpha * x + a.beta));
  case Act::elu: return x > 0 ? x : a.alpha * (std::exp(x) - 1);
  case Act::softsign: return x / (1 + std::fabs(x));
  case Act::softplus: return std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x)));
  }
  return x;
}

int gates_of(Cell c) { return c == Cell::lstm ? 4 : c == Cell::gru ? 3 : 1; }
size_t acts_of(Cell c) { return c == Cell::lstm ? 3 : c == Cell::gru ? 2 : 1; }
const char *cell_name(Cell c) { return c == Cell::lstm ? "lstm" : c == Cell::gru ? "gru" : "rnn"; }
Cell parse_cell(const std::string &name) {
  if (name == "lstm")
    return Cell::lstm;
  if (name == "gru")
    return Cell::gru;
  if (name == "rnn")
    return Cell::rnn;
  fail_attr("recurrence", "cell '" + name + "' is not lstm, gru or rnn");
}

long block_of(long hidden) {
  for (long k = std::min<long>(hidden, 128); k > 1; --k)
    if (hidden % k == 0)
      return k;
  return 1;
}

std::vector<Activation> node_activations(const Attrs &attrs, Cell cell) {
  std::vector<Activation> out;
  std::string names = attrs.get_string("activations");
  if (names.empty())
    names = cell == Cell::lstm ? "Sigmoid,Tanh,Tanh" : cell == Cell::gru ? "Sigmoid,Tanh" : "Tanh";
  std::vector<double> alphas = attrs.get_reals("activation_alpha"), betas = attrs.get_reals("activation_beta");
  std::stringstream ss(names);
  std::string name;
  while (std::getline(ss, name, ',')) {
    Activation a;
    if (!parse_act(name, &a.act))
      fail_attr("recurrence", "activation '" + name + "' is not one of " + act_names());
    size_t i = out.size();
    a.alpha = i < alphas.size() ? alphas[i] : act_default_alpha(a.act);
    a.beta = i < betas.size() ? betas[i] : act_default_beta(a.act);
    out.push_back(a);
  }
  if (out.size() != acts_of(cell))
    fail_attr("recurrence", std::string(cell_name(cell)) + " needs " + std::to_string(acts_of(cell)) +
                                " activations, got '" + names + "'");
  return out;
}

} // namespace recurrence

namespace {
using namespace recurrence;

/// Operand positions of a node (absent: npos).
struct Layout {
  size_t proj = 0, r = 1, h0 = 2, c0 = SIZE_MAX, p = SIZE_MAX, rbh = SIZE_MAX, lens = SIZE_MAX, count = 3;
  Layout(const Attrs &a, Cell cell) {
    if (cell == Cell::lstm)
      c0 = count++;
    if (cell == Cell::lstm && a.get_bool("peephole"))
      p = count++;
    if (cell == Cell::gru && a.get_bool("linear_before_reset"))
      rbh = count++;
    if (a.get_bool("masked"))
      lens = count++;
  }
};

OpDef recurrence_op() {
  OpDef def;
  def.name = "recurrence";
  def.traits = OpTrait::composite;
  def.summary = "one direction of an LSTM (gates i o f c), GRU (z r h) or RNN over a sequence of any length, after "
                "its input projection proj = X @ W^T + biases; r is R^T in column blocks of K (r[b, k, j] = "
                "R[b*K + j, k]); c0 and the peepholes p: lstm only; a GRU with linear_before_reset takes rbh [H] "
                "(R's h-gate bias) in their place; lens (with `masked`): rows past their length keep their state "
                "and get zeros in Y (maxc/Ops/Recurrence.h)";
  def.min_operands = 3;
  def.max_operands = 6;
  def.attrs = {
      {"cell", AttrKind::string, std::nullopt, "lstm (gates i o f c), gru (z r h) or rnn"},
      {"reverse", AttrKind::boolean, AttrValue(false), "the steps run from the last to the first"},
      {"activations", AttrKind::string, AttrValue(std::string()),
       "comma-separated ONNX activation names (lstm f,g,h; gru f,g; rnn f); empty: the defaults"},
      {"activation_alpha", AttrKind::reals, AttrValue(std::vector<double>{}), "alpha of each activation"},
      {"activation_beta", AttrKind::reals, AttrValue(std::vector<double>{}), "beta of each activation"},
      {"clip", AttrKind::real, AttrValue(-1.0), "the gates' inputs clipped to [-clip, clip]; negative: no clip"},
      {"input_forget", AttrKind::boolean, AttrValue(false), "lstm: the forget gate is 1 - input gate"},
      {"linear_before_reset", AttrKind::boolean, AttrValue(false), "gru: r * (h @ Rh^T + Rbh) (operand rbh)"},
      {"peephole", AttrKind::boolean, AttrValue(false), "lstm: operand p [3H] (peepholes i, o, f)"},
      {"masked", AttrKind::boolean, AttrValue(false), "last operand: lens [B], each row's length"}};
  def.infer = [](const InferContext &c) {
    const std::string op = "recurrence";
    Cell cell = parse_cell(c.attrs.get_string("cell"));
    Layout at(c.attrs, cell);
    node_activations(c.attrs, cell);
    if (c.operands.size() != at.count)
      fail_shape(op, std::string(cell_name(cell)) + " with these attributes takes " + std::to_string(at.count) +
                         " operands, got " + std::to_string(c.operands.size()));
    const TensorType &proj = c.operands[at.proj], &r = c.operands[at.r];
    require_float(op, proj, "proj");
    require_rank(op, proj, 3, "proj");
    require_rank(op, r, 3, "r");
    for (const Dim &d : r.shape)
      if (!d.is_static())
        fail_shape(op, "r " + r.to_string() + " must have a static shape");
    int64_t hidden = r.shape[1].value(), k = r.shape[2].value(), g = gates_of(cell);
    if (hidden < 1 || k < 1 || hidden % k != 0 || r.shape[0].value() * k != g * hidden)
      fail_shape(op, "r " + r.to_string() + " must be [" + std::to_string(g) + "*H/K, H, K] with K dividing H");
    const Dim &batch = proj.shape[1];
    if (proj.shape[2] != Dim(g * hidden))
      fail_shape(op, "proj " + proj.to_string() + " must be [S, B, " + std::to_string(g * hidden) + "]");
    std::vector<TensorType> same{proj, r};
    auto check = [&](size_t i, Shape want, const char *what) {
      if (i == SIZE_MAX)
        return;
      if (c.operands[i].shape != want)
        fail_shape(op, std::string(what) + " " + c.operands[i].to_string() + " must be " + shape_to_string(want));
      same.push_back(c.operands[i]);
    };
    check(at.h0, {batch, Dim(hidden)}, "h0");
    check(at.c0, {batch, Dim(hidden)}, "c0");
    check(at.p, {Dim(3 * hidden)}, "p");
    check(at.rbh, {Dim(hidden)}, "rbh");
    require_same_dtype(op, same);
    if (at.lens != SIZE_MAX) {
      const TensorType &lens = c.operands[at.lens];
      require_integer(op, lens, "lens");
      if (lens.shape != Shape{batch})
        fail_shape(op, "lens " + lens.to_string() + " must be [" + batch.to_string() + "]");
    }
    std::vector<TensorType> out{TensorType(proj.dtype, {proj.shape[0], batch, Dim(hidden)}),
                                TensorType(proj.dtype, {batch, Dim(hidden)})};
    if (cell == Cell::lstm)
      out.push_back(TensorType(proj.dtype, {batch, Dim(hidden)}));
    return out;
  };
  def.reference = [](const ReferenceContext &c) {
    Cell cell = parse_cell(c.attrs.get_string("cell"));
    Layout at(c.attrs, cell);
    std::vector<Activation> f = node_activations(c.attrs, cell);
    const HostTensor &proj = c.operands[at.proj], &r = c.operands[at.r];
    const int64_t S = proj.shape()[0], B = proj.shape()[1], H = r.shape()[1], K = r.shape()[2],
                  G = gates_of(cell), GH = G * H;
    const bool reverse = c.attrs.get_bool("reverse"), input_forget = c.attrs.get_bool("input_forget");
    const double clip = c.attrs.get_real("clip");
    auto clipped = [&](double v) { return clip >= 0 ? std::min(std::max(v, -clip), clip) : v; };
    // R[j, k] (gate column j, hidden k) from the blocked R^T.
    auto R = [&](int64_t j, int64_t k) { return r.get_f64(((j / K) * H + k) * K + j % K); };
    std::vector<double> h(static_cast<size_t>(B * H)), cst(h.size()), rec(static_cast<size_t>(GH)), hh(static_cast<size_t>(H));
    for (int64_t i = 0; i < B * H; ++i) {
      h[i] = c.operands[at.h0].get_f64(i);
      if (at.c0 != SIZE_MAX)
        cst[i] = c.operands[at.c0].get_f64(i);
    }
    HostTensor y = c.make_result(0);
    auto mat = [&](const std::vector<double> &x, int64_t j0, int64_t j1) { // rec[j] = x @ R[j]^T
      for (int64_t j = j0; j < j1; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < H; ++k)
          acc += x[k] * R(j, k);
        rec[j] = acc;
      }
    };
    for (int64_t s = 0; s < S; ++s) {
      const int64_t t = reverse ? S - 1 - s : s;
      for (int64_t b = 0; b < B; ++b) {
        double *hb = &h[b * H], *cb = &cst[b * H];
        bool active = at.lens == SIZE_MAX || t < c.operands[at.lens].get_i64(b);
        if (!active) {
          for (int64_t j = 0; j < H; ++j)
            y.set_f64((t * B + b) * H + j, 0.0);
          continue;
        }
        auto x = [&](int64_t j) { return proj.get_f64((t * B + b) * GH + j); };
        std::vector<double> hprev(hb, hb + H);
        if (cell == Cell::lstm) {
          mat(hprev, 0, GH);
          for (int64_t j = 0; j < H; ++j) {
            double gi = x(j) + rec[j], go = x(H + j) + rec[H + j], gf = x(2 * H + j) + rec[2 * H + j],
                   gc = x(3 * H + j) + rec[3 * H + j];
            if (at.p != SIZE_MAX) {
              gi += c.operands[at.p].get_f64(j) * cb[j];
              gf += c.operands[at.p].get_f64(2 * H + j) * cb[j];
            }
            double i = act_apply(f[0], clipped(gi));
            double fg = input_forget ? 1 - i : act_apply(f[0], clipped(gf));
            double cn = fg * cb[j] + i * act_apply(f[1], clipped(gc));
            if (at.p != SIZE_MAX)
              go += c.operands[at.p].get_f64(H + j) * cn;
            double o = act_apply(f[0], clipped(go));
            cb[j] = cn;
            hb[j] = o * act_apply(f[2], cn);
          }
        } else if (cell == Cell::gru) {
          bool lbr = at.rbh != SIZE_MAX;
          mat(hprev, 0, lbr ? GH : 2 * H);
          std::vector<double> z(static_cast<size_t>(H)), rg(static_cast<size_t>(H));
          for (int64_t j = 0; j < H; ++j) {
            z[j] = act_apply(f[0], clipped(x(j) + rec[j]));
            rg[j] = act_apply(f[0], clipped(x(H + j) + rec[H + j]));
            hh[j] = rg[j] * hprev[j];
          }
          if (!lbr)
            mat(hh, 2 * H, GH);
          for (int64_t j = 0; j < H; ++j) {
            double gh = lbr ? x(2 * H + j) + rg[j] * (rec[2 * H + j] + c.operands[at.rbh].get_f64(j))
                            : x(2 * H + j) + rec[2 * H + j];
            double n = act_apply(f[1], clipped(gh));
            hb[j] = (1 - z[j]) * n + z[j] * hprev[j];
          }
        } else {
          mat(hprev, 0, H);
          for (int64_t j = 0; j < H; ++j)
            hb[j] = act_apply(f[0], clipped(x(j) + rec[j]));
        }
        for (int64_t j = 0; j < H; ++j)
          y.set_f64((t * B + b) * H + j, hb[j]);
      }
    }
    std::vector<HostTensor> out{y, c.make_result(1)};
    for (int64_t i = 0; i < B * H; ++i)
      out[1].set_f64(i, h[i]);
    if (cell == Cell::lstm) {
      out.push_back(c.make_result(2));
      for (int64_t i = 0; i < B * H; ++i)
        out[2].set_f64(i, cst[i]);
    }
    return out;
  };
  return def;
}

} // namespace

void register_recurrence_ops(OpRegistry &registry) { registry.add(recurrence_op()); }

namespace ops {
std::vector<Tensor> recurrence(const std::vector<Tensor> &operands, const Attrs &attrs) {
  return record_op_multi("recurrence", operands, attrs);
}
} // namespace ops

} // namespace maxc

// decompose(): a `recurrence` node (maxc/Ops/Recurrence.h) unrolled into
// per-step primitives, for backends without a recurrence kernel (the GPU
// ones). The sequence length must then be static.
#include "DecomposeRecurrence.h"

#include "maxc/Ops/Ops.h"
#include "maxc/Ops/Recurrence.h"
#include "maxc/Support/Error.h"


namespace maxc {
namespace {
using namespace recurrence;

Tensor sc(double v, DType dtype) { return ops::scalar(v, dtype); }

Tensor activate(const Activation &a, const Tensor &x) {
  DType t = x.dtype();
  switch (a.act) {
  case Act::relu: return ops::relu(x);
  case Act::tanh: return ops::tanh(x);
  case Act::sigmoid: return ops::sigmoid(x);
  case Act::affine: return ops::add(ops::mul(x, sc(a.alpha, t)), sc(a.beta, t));
  case Act::leaky_relu: return ops::where(ops::less(x, sc(0, t)), ops::mul(x, sc(a.alpha, t)), x);
  case Act::thresholded_relu: return ops::where(ops::greater(x, sc(a.alpha, t)), x, sc(0, t));
  case Act::scaled_tanh: return ops::mul(sc(a.alpha, t), ops::tanh(ops::mul(x, sc(a.beta, t))));
  case Act::hard_sigmoid:
    return ops::maximum(sc(0, t), ops::minimum(sc(1, t), ops::add(ops::mul(x, sc(a.alpha, t)), sc(a.beta, t))));
  case Act::elu:
    return ops::where(ops::greater(x, sc(0, t)), x, ops::mul(sc(a.alpha, t), ops::sub(ops::exp(x), sc(1, t))));
  case Act::softsign: return ops::div(x, ops::add(sc(1, t), ops::abs(x)));
  case Act::softplus:
    return ops::add(ops::relu(x), ops::log(ops::add(sc(1, t), ops::exp(ops::neg(ops::abs(x))))));
  }
  return x;
}

} // namespace

std::vector<Tensor> unroll_recurrence(const Node &node, const std::vector<Tensor> &in) {
  const Attrs &a = node.attrs;
  const Cell cell = parse_cell(a.get_string("cell"));
  const std::vector<Activation> f = node_activations(a, cell);
  const bool reverse = a.get_bool("reverse"), input_forget = a.get_bool("input_forget");
  const bool peephole = cell == Cell::lstm && a.get_bool("peephole");
  const bool lbr = cell == Cell::gru && a.get_bool("linear_before_reset");
  const double clip = a.get_real("clip");
  size_t k = 3;
  const Tensor &proj = in[0], &rb = in[1];
  Tensor h = in[2], c = cell == Cell::lstm ? in[k++] : Tensor();
  Tensor p = peephole ? in[k++] : Tensor(), rbh = lbr ? in[k++] : Tensor();
  Tensor lens = a.get_bool("masked") ? in[k++] : Tensor();
  const Dim &seq_dim = proj.shape()[0], &batch = proj.shape()[1];
  if (!seq_dim.is_static())
    throw Error(ErrorCode::UnboundDim,
                "recurrence '" + node.name + "': this backend unrolls the recurrence and needs a static sequence length, got " +
                    seq_dim.to_string() + "; pin it with --dim " + seq_dim.to_string() + "=N");
  constexpr int64_t kMaxSteps = 4096; // the unrolled graph grows with the steps
  if (seq_dim.value() > kMaxSteps)
    throw Error(ErrorCode::InvalidGraph, "recurrence '" + node.name + "' has " + std::to_string(seq_dim.value()) +
                                             " time steps; this backend unrolls at most " + std::to_string(kMaxSteps) +
                                             " (the CPU runs any length)");
  const int64_t seq = seq_dim.value(), hidden = rb.shape()[1].value(), gh = gates_of(cell) * hidden;
  const DType t = proj.dtype();
  // R^T [H, G*H] from its column blocks [G*H/K, H, K].
  Tensor rt = ops::reshape(ops::transpose(rb, {1, 0, 2}), {Dim(hidden), Dim(gh)});
  auto cols = [&](const Tensor &v, int64_t from, int64_t to) { return ops::slice(v, {from}, {to}, {1}); };
  auto part = [&](const Tensor &v, int64_t g) { return cols(v, g * hidden, (g + 1) * hidden); };
  auto vec = [&](const Tensor &v, int64_t g) { return ops::slice(v, {g * hidden}, {(g + 1) * hidden}, {0}); };
  auto clipped = [&](Tensor v) { return clip >= 0 ? ops::minimum(ops::maximum(v, sc(-clip, t)), sc(clip, t)) : v; };
  Tensor lens_col = lens.is_null() ? Tensor() : ops::reshape(lens, {batch, Dim(1)});
  std::vector<Tensor> ys(static_cast<size_t>(seq));
  for (int64_t s = 0; s < seq; ++s) {
    const int64_t step = reverse ? seq - 1 - s : s;
    Tensor pt = ops::gather(proj, Tensor::from_i64(DType::i64, {}, {step}), 0); // [B, G*H]
    Tensor h_new, c_new;
    if (cell == Cell::lstm) { // gates i, o, f, c
      Tensor g = ops::add(pt, ops::matmul(h, rt));
      Tensor gi = part(g, 0), go = part(g, 1), gf = part(g, 2), gc = part(g, 3);
      if (peephole) {
        gi = ops::add(gi, ops::mul(vec(p, 0), c));
        gf = ops::add(gf, ops::mul(vec(p, 2), c));
      }
      Tensor i = activate(f[0], clipped(gi));
      Tensor fg = input_forget ? ops::sub(sc(1, t), i) : activate(f[0], clipped(gf));
      c_new = ops::add(ops::mul(fg, c), ops::mul(i, activate(f[1], clipped(gc))));
      if (peephole)
        go = ops::add(go, ops::mul(vec(p, 1), c_new));
      h_new = ops::mul(activate(f[0], clipped(go)), activate(f[2], c_new));
    } else if (cell == Cell::gru) { // gates z, r, h
      Tensor rec = ops::matmul(h, lbr ? rt : cols(rt, 0, 2 * hidden));
      Tensor gzr = ops::add(cols(pt, 0, 2 * hidden), cols(rec, 0, 2 * hidden));
      Tensor z = activate(f[0], clipped(part(gzr, 0))), rg = activate(f[0], clipped(part(gzr, 1)));
      Tensor gh_in = part(pt, 2);
      if (lbr)
        gh_in = ops::add(gh_in, ops::mul(rg, ops::add(part(rec, 2), rbh)));
      else
        gh_in = ops::add(gh_in, ops::matmul(ops::mul(rg, h), cols(rt, 2 * hidden, gh)));
      Tensor cand = activate(f[1], clipped(gh_in));
      h_new = ops::add(ops::mul(ops::sub(sc(1, t), z), cand), ops::mul(z, h));
    } else {
      h_new = activate(f[0], clipped(ops::add(pt, ops::matmul(h, rt))));
    }
    if (lens_col.is_null()) {
      ys[size_t(step)] = h_new;
      h = h_new;
      c = c_new;
    } else {
      Tensor mask = ops::less(sc(double(step), lens_col.dtype()), lens_col); // [B, 1]
      ys[size_t(step)] = ops::where(mask, h_new, sc(0, t));
      h = ops::where(mask, h_new, h);
      if (cell == Cell::lstm)
        c = ops::where(mask, c_new, c);
    }
  }
  // Y: the steps stacked, a concat tree (a concat's kernel picks each
  // element's operand in turn, so one of 512 pieces costs far more than three
  // levels of 16).
  std::vector<Tensor> pieces;
  for (const Tensor &y : ys)
    pieces.push_back(ops::unsqueeze(y, {0}));
  while (pieces.size() > 1) {
    std::vector<Tensor> next;
    for (size_t i = 0; i < pieces.size(); i += 16) {
      std::vector<Tensor> group(pieces.begin() + long(i), pieces.begin() + long(std::min(pieces.size(), i + 16)));
      next.push_back(group.size() == 1 ? group[0] : ops::concat(group, 0));
    }
    pieces = std::move(next);
  }
  std::vector<Tensor> out{pieces.empty() ? ops::full(0, t, {Dim(0), batch, Dim(hidden)}) : pieces[0], h};
  if (cell == Cell::lstm)
    out.push_back(c);
  return out;
}

} // namespace maxc

// A matmul whose B is an 8-bit constant dequantized on every run (ONNX's
// DequantizeLinear of an initializer, as the importer spells it: f32(i32(q)
// - i32(zp)) * scale, or f32(q) * scale without a zero point), optionally
// transposed before or after the dequantization:
//
//   y = matmul(a, [transpose](mul(cast_f32([sub](cast_i32([transpose](Q)),
//                                                 zp)), s)))      (either mul order)
//
// with Q a u8/i8 constant, s an f32 constant per tensor or per output
// column (N), zp a constant of the same kind, becomes
//
//   y = matmul_nbits(a, codes, scales, zero_points)   (bits 8, block | K)
//
// (maxc/Ops/MatmulNbits.h): the weight stays in its 8 bits, read where it
// lies when Q is already [N, K] u8 with K a multiple of 16 (codes is Q's
// storage reshaped to [N, K / block, block]; the weights section writes
// storage two constants share once), else an 8-bit copy made at compile
// time (i8 codes shifted by 128 to u8 with the zero point; K padded to a
// whole block). The f32 weight is never made. Whisper's decoder reads its
// tied 51865 x 384 token embedding so (logits = h · dequant(E)ᵀ): the
// dequantization and transpose were half its time.
//
// Only where a has at most kMaxRows rows, static (decode: M 1..16; the CPU
// kernel is a GEMV that loops over groups of four rows), and a is f32 with
// no transpose_a. Per-K scales or zero points (DequantizeLinear along the
// contraction axis) do not fit the layout (one scale per block of K per
// row) unless constant along K, and are left alone.
//
// Accuracy: the reference matmul_nbits dequantizes in double; the CPU
// kernel computes code · s - zp · s in f32 (one FMA), the original f32(q -
// zp) · s rounds once: the weights agree within 1 ulp of each product, the
// sums within f32 rounding of a K-term dot product.
#include "maxc/Transforms/DequantizedMatmul.h"

#include "maxc/Ops/MatmulNbits.h"
#include "maxc/Ops/Ops.h"

#include <algorithm>
#include <cstring>

namespace maxc {

namespace {

constexpr int64_t kMaxRows = 16;

/// A constant read through shape-only views (reshape, squeeze, unsqueeze):
/// its values and the shape the graph gives it.
struct Known {
  HostTensor data;
  std::vector<int64_t> shape;
};

std::optional<Known> known_constant(const GraphMatcher &m, ValueId v) {
  const TensorType &t = m.graph().type_of(v);
  std::vector<int64_t> shape;
  for (const Dim &d : t.shape) {
    if (!d.is_static())
      return std::nullopt;
    shape.push_back(d.value());
  }
  for (int depth = 0; depth < 4; ++depth) {
    const Node *p = m.producer(v);
    if (!p)
      return std::nullopt;
    if (p->op == "constant")
      return Known{m.graph().constant(p->attrs.get_string("name")), shape};
    if (p->op != "reshape" && p->op != "squeeze" && p->op != "unsqueeze")
      return std::nullopt;
    v = p->operands[0];
  }
  return std::nullopt;
}

/// How a per-tensor or per-axis operand broadcasts against a [R, C] value:
/// its element for (r, c), or nullopt when its shape does not broadcast so.
/// `along` gets 0 (one value), 1 (varies along R only) or 2 (along C only).
struct Broadcast2 {
  std::vector<double> values;
  int64_t stride_r = 0, stride_c = 0;
  double at(int64_t r, int64_t c) const { return values[static_cast<size_t>(r * stride_r + c * stride_c)]; }
};

std::optional<Broadcast2> broadcast2(const Known &k, int64_t rows, int64_t cols) {
  std::vector<int64_t> s = k.shape;
  while (s.size() > 2 && s.front() == 1)
    s.erase(s.begin());
  if (s.size() > 2)
    return std::nullopt;
  while (s.size() < 2)
    s.insert(s.begin(), 1);
  if ((s[0] != 1 && s[0] != rows) || (s[1] != 1 && s[1] != cols))
    return std::nullopt;
  Broadcast2 b;
  b.values = k.data.to_f64();
  b.stride_c = s[1] == 1 ? 0 : 1;
  b.stride_r = s[0] == 1 ? 0 : s[1];
  return b;
}

bool is_transpose2(const Node *p) {
  if (!p || p->op != "transpose")
    return false;
  std::vector<int64_t> perm = p->attrs.get_ints("perm");
  return perm.empty() || perm == std::vector<int64_t>{1, 0};
}

class DequantizedMatmul final : public RewritePattern {
public:
  const char *name() const override { return "dequantized-matmul"; }
  const char *root_op() const override { return "matmul"; }

  std::vector<Tensor> rewrite(const Node &node, const std::vector<Tensor> &in, RewriteContext &rc) const override {
    const GraphMatcher &m = rc.match;
    const Graph &g = m.graph();
    if (in.size() != 2 || node.attrs.get_bool("transpose_a"))
      return {};
    const Tensor &a = in[0];
    if (a.dtype() != DType::f32 || a.rank() < 1 || g.type_of(node.operands[1]).rank() != 2)
      return {};
    int64_t rows = 1;
    for (int64_t d = 0; d + 1 < a.rank(); ++d) {
      if (!a.shape()[d].is_static())
        return {};
      rows *= a.shape()[d].value();
    }
    if (rows > kMaxRows)
      return {};
    // B = transpose^outer(deq), deq = mul(f32 codes - zp, s) of shape [R, C].
    int outer = node.attrs.get_bool("transpose_b") ? 1 : 0;
    ValueId v = node.operands[1];
    while (is_transpose2(m.producer(v)))
      v = m.producer(v)->operands[0], outer ^= 1;
    const Node *mul = m.producer_op(v, "mul");
    if (!mul || g.type_of(v).dtype != DType::f32)
      return {};
    for (int side = 0; side < 2; ++side)
      if (auto r = match_dequant(rc, node, a, mul->operands[side], mul->operands[1 - side], v, outer))
        return {*r};
    return {};
  }

private:
  std::optional<Tensor> match_dequant(RewriteContext &rc, const Node &node, const Tensor &a, ValueId x,
                                      ValueId scale, ValueId deq, int outer) const {
    const GraphMatcher &m = rc.match;
    const Graph &g = m.graph();
    const Shape &ds = g.type_of(deq).shape;
    if (!ds[0].is_static() || !ds[1].is_static() || g.type_of(x).shape != ds)
      return std::nullopt;
    int64_t R = ds[0].value(), C = ds[1].value();
    std::optional<Known> sk = known_constant(m, scale);
    if (!sk || sk->data.dtype() != DType::f32)
      return std::nullopt;
    // x = cast_f32(y); y = cast_i32(q) | sub(cast_i32(q), zp) | q itself.
    const Node *cf = m.producer_op(x, "cast");
    if (!cf || g.type_of(x).dtype != DType::f32)
      return std::nullopt;
    ValueId y = cf->operands[0];
    std::optional<ValueId> zp;
    if (const Node *sub = m.producer_op(y, "sub")) {
      y = sub->operands[0];
      zp = sub->operands[1];
    }
    if (g.type_of(y).dtype == DType::i32) {
      const Node *ci = m.producer_op(y, "cast");
      if (!ci)
        return std::nullopt;
      y = ci->operands[0];
    } else if (zp) {
      return std::nullopt; // an 8-bit subtraction wraps
    }
    DType qt = g.type_of(y).dtype;
    if (qt != DType::u8 && qt != DType::i8)
      return std::nullopt;
    int inner = 0;
    while (is_transpose2(m.producer(y)))
      y = m.producer(y)->operands[0], inner ^= 1;
    const Node *qc = m.producer_op(y, "constant");
    if (!qc)
      return std::nullopt;
    const HostTensor &q = g.constant(qc->attrs.get_string("name"));
    if (q.rank() != 2)
      return std::nullopt;
    // The zero point: a constant of q's 8-bit kind, read through an i32 cast.
    std::optional<Known> zk;
    if (zp) {
      ValueId z = *zp;
      if (const Node *c = m.producer_op(z, "cast"); c && g.type_of(z).dtype == DType::i32)
        z = c->operands[0];
      zk = known_constant(m, z);
      if (!zk || zk->data.dtype() != qt)
        return std::nullopt;
    }
    // deq[r, c] = (codes[r, c] - zp) * s; codes = q or qᵀ (inner); the
    // matmul's B[k, n] = deq or deqᵀ (outer): N is C (outer even) or R.
    bool n_is_c = outer == 0;
    int64_t K = n_is_c ? R : C, N = n_is_c ? C : R;
    std::optional<Broadcast2> sb = broadcast2(*sk, R, C);
    std::optional<Broadcast2> zb = zk ? broadcast2(*zk, R, C) : std::nullopt;
    if (!sb || (zk && !zb))
      return std::nullopt;
    auto varies_along_k = [&](const Broadcast2 &b) { return n_is_c ? b.stride_r != 0 : b.stride_c != 0; };
    if (varies_along_k(*sb) || (zb && varies_along_k(*zb)))
      return std::nullopt;
    Shape out(a.shape().begin(), a.shape().end() - 1);
    out.push_back(Dim(N));
    if (a.shape().back() != Dim(K) || TensorType(DType::f32, out, a.type().device) != g.type_of(node.results[0]))
      return std::nullopt;
    // Per n: the scale and the zero point as a u8 code's.
    auto deq_at = [&](int64_t n, int64_t k) { return n_is_c ? std::pair{k, n} : std::pair{n, k}; };
    int64_t shift = qt == DType::i8 ? 128 : 0;
    std::vector<float> s_n(static_cast<size_t>(N));
    std::vector<uint8_t> z_n(static_cast<size_t>(N), static_cast<uint8_t>(shift));
    for (int64_t n = 0; n < N; ++n) {
      auto [r, c] = deq_at(n, 0);
      s_n[static_cast<size_t>(n)] = static_cast<float>(sb->at(r, c));
      if (zb)
        z_n[static_cast<size_t>(n)] = static_cast<uint8_t>(static_cast<int64_t>(zb->at(r, c)) + shift);
    }
    // The block: the largest power of two in [16, 256] dividing K (K a
    // multiple of 16), else 32 with K padded.
    int64_t block = 32;
    if (K % 16 == 0) {
      block = 16;
      while (block < 256 && K % (block * 2) == 0)
        block *= 2;
    }
    NbitsLayout l{K, N, 8, block};
    int64_t nb = l.blocks();
    // codes[r, c] = q[r, c] (inner even) or q[c, r], (r, c) = deq_at(n, k):
    // q is [N, K] row-major when n_is_c == (inner == 1).
    bool q_is_nk = n_is_c == (inner == 1);
    const std::string &qname = qc->attrs.get_string("name");
    Tensor codes;
    if (q_is_nk && shift == 0 && nb * block == K) {
      codes = rc.out.add_source(Tensor::from_host(q.reshaped({N, nb, block})), qname + ".nbits");
    } else {
      HostTensor b(DType::u8, {N, nb, block});
      uint8_t *dst = b.data_as<uint8_t>();
      const uint8_t *src = q.data_as<uint8_t>();
      for (int64_t n = 0; n < N; ++n) {
        uint8_t *row = dst + n * nb * block;
        for (int64_t k = 0; k < K; ++k)
          row[k] = static_cast<uint8_t>(src[q_is_nk ? n * K + k : k * N + n] + shift); // i8 + 128 wraps to u8
        std::fill(row + K, row + nb * block, z_n[static_cast<size_t>(n)]);
      }
      codes = rc.out.add_source(Tensor::from_host(b), qname + ".nbits");
    }
    HostTensor scales(DType::f32, {N * nb});
    float *sp = scales.data_as<float>();
    bool default_zp = true;
    HostTensor zps(DType::u8, {N * nb});
    uint8_t *zpp = zps.data_as<uint8_t>();
    for (int64_t n = 0; n < N; ++n)
      for (int64_t blk = 0; blk < nb; ++blk) {
        sp[n * nb + blk] = s_n[static_cast<size_t>(n)];
        zpp[n * nb + blk] = z_n[static_cast<size_t>(n)];
        default_zp = default_zp && z_n[static_cast<size_t>(n)] == l.default_zero_point();
      }
    Tensor st = rc.out.add_source(Tensor::from_host(scales), qname + ".nbits_scales");
    std::optional<Tensor> zt;
    if (!default_zp)
      zt = rc.out.add_source(Tensor::from_host(zps), qname + ".nbits_zero_points");
    return ops::matmul_nbits(a, codes, st, zt, K, N, 8, block);
  }
};

} // namespace

const RewritePattern &dequantized_matmul_pattern() {
  static const DequantizedMatmul pattern;
  return pattern;
}

} // namespace maxc

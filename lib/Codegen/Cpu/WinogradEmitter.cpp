#include "Cpu/WinogradEmitter.h"
#include "EntryPointUtil.h"

#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/IR/HostTensor.h"
#include "maxc/Ops/OpRegistry.h"
#include "maxc/Transforms/CallSites.h"

#include <llvm/IR/Intrinsics.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>

namespace maxc::codegen {

using llvm::Value;
using namespace conv_ir;

namespace {

/// G (a x 3) of F(m,3): U = G g Gᵀ.
const std::vector<std::array<double, 3>> &winograd_g(int64_t m) {
  static const std::vector<std::array<double, 3>> g2 = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  static const std::vector<std::array<double, 3>> g4 = {{1.0 / 4, 0, 0},
                                                        {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                                        {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                                        {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                                        {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                                        {0, 0, 1}};
  return m == 2 ? g2 : g4;
}

/// c * x + y (scalars or vectors).
Value *fma(llvm::IRBuilder<> &b, double c, Value *x, Value *y) {
  return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {x->getType()}, {llvm::ConstantFP::get(x->getType(), c), x, y});
}

/// v = Bᵀ d, a = m + 2 values in and out (one dimension of Bᵀ d B).
void input_1d(llvm::IRBuilder<> &b, int64_t m, Value *const *d, Value **v) {
  if (m == 2) {
    v[0] = b.CreateFSub(d[0], d[2]);
    v[1] = b.CreateFAdd(d[1], d[2]);
    v[2] = b.CreateFSub(d[2], d[1]);
    v[3] = b.CreateFSub(d[1], d[3]);
    return;
  }
  // Bᵀ rows: [4 0 -5 0 1 0], [0 -4 -4 1 1 0], [0 4 -4 -1 1 0],
  // [0 -2 -1 2 1 0], [0 2 -1 -2 1 0], [0 4 0 -5 0 1].
  Value *t1 = fma(b, -4, d[2], d[4]), *t2 = fma(b, -4, d[1], d[3]);
  Value *t3 = b.CreateFSub(d[4], d[2]), *t4 = b.CreateFSub(d[3], d[1]);
  v[0] = fma(b, 4, d[0], fma(b, -5, d[2], d[4]));
  v[1] = b.CreateFAdd(t1, t2);
  v[2] = b.CreateFSub(t1, t2);
  v[3] = fma(b, 2, t4, t3);
  v[4] = fma(b, -2, t4, t3);
  v[5] = fma(b, 4, d[1], fma(b, -5, d[3], d[5]));
}

/// y = Aᵀ x, a values in, m out (one dimension of Aᵀ M A).
void output_1d(llvm::IRBuilder<> &b, int64_t m, Value *const *x, Value **y) {
  if (m == 2) {
    y[0] = b.CreateFAdd(b.CreateFAdd(x[0], x[1]), x[2]);
    y[1] = b.CreateFSub(b.CreateFSub(x[1], x[2]), x[3]);
    return;
  }
  // Aᵀ rows: [1 1 1 1 1 0], [0 1 -1 2 -2 0], [0 1 1 4 4 0], [0 1 -1 8 -8 1].
  Value *s12 = b.CreateFAdd(x[1], x[2]), *d12 = b.CreateFSub(x[1], x[2]);
  Value *s34 = b.CreateFAdd(x[3], x[4]), *d34 = b.CreateFSub(x[3], x[4]);
  y[0] = b.CreateFAdd(b.CreateFAdd(x[0], s12), s34);
  y[1] = fma(b, 2, d34, d12);
  y[2] = fma(b, 4, s34, s12);
  y[3] = b.CreateFAdd(fma(b, 8, d34, d12), x[5]);
}

/// The first n lanes of a `width`-lane mask (null when n >= width).
Value *first_lanes(llvm::IRBuilder<> &b, int64_t width, int64_t n) {
  if (n >= width)
    return nullptr;
  std::vector<llvm::Constant *> bits;
  for (int64_t l = 0; l < width; ++l)
    bits.push_back(b.getInt1(l < n));
  return llvm::ConstantVector::get(bits);
}

std::vector<int> stride_lanes(int64_t count, int64_t stride, int64_t offset) {
  std::vector<int> idx;
  for (int64_t l = 0; l < count; ++l)
    idx.push_back(static_cast<int>(l * stride + offset));
  return idx;
}

/// Chunks of up to `lanes` tiles along a tile row: body(chunk, tiles, last)
/// for the full chunks before the last in a loop (`tiles` = lanes), then the
/// last one with its compile-time tile count.
void for_chunks(llvm::IRBuilder<> &b, int64_t tw, int64_t lanes,
                const std::function<void(Value *, int64_t, bool)> &body) {
  int64_t chunks = (tw + lanes - 1) / lanes;
  if (chunks > 1)
    for_count(b, chunks - 1, [&](Value *ch) { body(ch, lanes, false); });
  body(b.getInt64(chunks - 1), tw - (chunks - 1) * lanes, true);
}

} // namespace

std::vector<float> winograd_weights(const HostTensor &w, int64_t m) {
  int64_t O = w.shape()[0], C = w.shape()[1], a = m + 2;
  const auto &G = winograd_g(m);
  std::vector<float> u(static_cast<size_t>(a * a * O * C));
  for (int64_t o = 0; o < O; ++o)
    for (int64_t c = 0; c < C; ++c) {
      double g[3][3], gg[6][3];
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
          g[i][j] = w.get_f64(((o * C + c) * 3 + i) * 3 + j);
      for (int64_t i = 0; i < a; ++i)
        for (int j = 0; j < 3; ++j)
          gg[i][j] = G[i][0] * g[0][j] + G[i][1] * g[1][j] + G[i][2] * g[2][j];
      for (int64_t i = 0; i < a; ++i)
        for (int64_t j = 0; j < a; ++j) {
          double v = gg[i][0] * G[j][0] + gg[i][1] * G[j][1] + gg[i][2] * G[j][2];
          u[static_cast<size_t>(((i * a + j) * O + o) * C + c)] = static_cast<float>(v);
        }
    }
  return u;
}

std::string winograd_key(const std::string &constant, int64_t m) {
  return constant + ".winograd" + std::to_string(m);
}

int64_t winograd_input_tile(const Graph &sub, size_t input) {
  for (const Node &n : sub.nodes())
    if (conv_winograd_shape(sub, n) && sub.value_info(n.operands[1]).index == input &&
        sub.value_info(n.operands[1]).producer < 0)
      return winograd_plan(sub, n).m;
  return 0;
}

std::map<std::string, std::vector<size_t>> winograd_call_site_inputs(const Graph &root) {
  std::map<std::string, std::vector<size_t>> out;
  for (const auto &[name, bound] : constant_bound_inputs(root)) {
    const Graph &sub = *root.find_subgraph(name);
    std::map<size_t, std::set<int64_t>> tiles; // input -> the tiles of the convs reading it
    for (const Node &n : sub.nodes()) {
      if (!conv_winograd_shape(sub, n))
        continue;
      const ValueInfo &w = sub.value_info(n.operands[1]);
      if (w.producer < 0 && bound[w.index])
        tiles[w.index].insert(winograd_plan(sub, n).m);
    }
    for (const auto &[input, ms] : tiles)
      if (ms.size() == 1) // one transform per input (else its convs take im2col)
        out[name].push_back(input);
  }
  return out;
}

WinogradOnly plan_winograd_only(const Graph &root, const LoweringPlans &plans) {
  const std::map<std::string, std::vector<size_t>> call_inputs = winograd_call_site_inputs(root);
  // The one tile of value v's uses in g, all Winograd weights (with `calls`,
  // also arguments of call-site Winograd parameters whose uses are); 0 if
  // some use reads the original values.
  std::function<int64_t(const Graph &, ValueId, bool)> tile_of_uses = [&](const Graph &g, ValueId v, bool calls) {
    const std::vector<ValueId> &outs = g.output_ids();
    if (std::find(outs.begin(), outs.end(), v) != outs.end())
      return int64_t(0);
    std::set<int64_t> ms;
    for (const Node &n : g.nodes())
      for (size_t s = 0; s < n.operands.size(); ++s) {
        if (n.operands[s] != v)
          continue;
        if (s == 1 && n.operands[0] != v && (n.operands.size() < 3 || n.operands[2] != v) &&
            conv_winograd_shape(g, n) && node_uses_gemm(g, plans.at(&g), n)) {
          ms.insert(winograd_plan(g, n).m);
          continue;
        }
        const std::string *callee = calls ? call_body_name(n) : nullptr;
        if (!callee)
          return int64_t(0);
        auto it = call_inputs.find(*callee);
        if (it == call_inputs.end() || std::find(it->second.begin(), it->second.end(), s) == it->second.end())
          return int64_t(0);
        const Graph &sub = *root.find_subgraph(it->first);
        int64_t m = tile_of_uses(sub, sub.input_ids()[s], false);
        if (m == 0 || m != winograd_input_tile(sub, s))
          return int64_t(0);
        ms.insert(m);
      }
    return ms.size() == 1 ? *ms.begin() : int64_t(0);
  };
  WinogradOnly out;
  auto add = [&](const Graph &g) {
    for (const Node &n : g.nodes())
      if (n.op == "constant")
        if (int64_t m = tile_of_uses(g, n.results[0], &g == &root))
          out[{&g, n.attrs.get_string("name")}] = m;
  };
  add(root);
  for (const auto &[name, sub] : root.subgraphs())
    add(*sub);
  return out;
}

ConstantRewrite winograd_weights_rewrite(const WinogradOnly &only) {
  return [&only](const Graph &g, const std::string &name) -> std::pair<size_t, ByteChunks::Generator> {
    auto it = only.find({&g, name});
    if (it == only.end())
      return {0, nullptr};
    HostTensor w = g.constant(name);
    int64_t m = it->second, a = m + 2;
    size_t bytes = static_cast<size_t>(a * a * w.shape()[0] * w.shape()[1]) * sizeof(float);
    // The transform, made at the first block and dropped after the last
    // (the blob is written in order; a second pass makes it again).
    struct Cache {
      std::mutex mutex;
      std::vector<float> u;
    };
    auto cache = std::make_shared<Cache>();
    return {bytes, [w, m, bytes, cache](uint64_t offset, size_t n, char *dst) {
              std::lock_guard<std::mutex> lock(cache->mutex);
              if (cache->u.empty())
                cache->u = winograd_weights(w, m);
              std::memcpy(dst, reinterpret_cast<const char *>(cache->u.data()) + offset, n);
              if (offset + n == bytes)
                std::vector<float>().swap(cache->u);
            }};
  };
}

void append_winograd_weights(const Graph &root, ByteChunks &blob, ConstantOffsets &offsets, const WinogradOnly &only) {
  const std::map<std::string, std::vector<size_t>> call_inputs = winograd_call_site_inputs(root);
  auto add = [&](const Graph &g) {
    std::set<std::pair<std::string, int64_t>> names; // (constant, tile)
    auto constant_name = [&](ValueId v) -> const std::string * {
      int64_t p = g.value_info(v).producer;
      if (p < 0 || g.nodes()[static_cast<size_t>(p)].op != "constant")
        return nullptr;
      return &g.nodes()[static_cast<size_t>(p)].attrs.get_string("name");
    };
    for (const Node &n : g.nodes()) {
      if (conv_winograd_shape(g, n))
        if (const std::string *name = constant_name(n.operands[1]))
          names.insert({*name, winograd_plan(g, n).m});
      if (const std::string *callee = call_body_name(n))
        if (auto it = call_inputs.find(*callee); it != call_inputs.end())
          for (size_t index : it->second)
            if (const std::string *name = constant_name(n.operands[index]))
              names.insert({*name, winograd_input_tile(*root.find_subgraph(it->first), index)});
    }
    for (const auto &[name, m] : names) {
      if (only.count({&g, name})) { // stored transformed in the constant's place
        offsets[{&g, winograd_key(name, m)}] = offsets.at({&g, name});
        continue;
      }
      auto u = std::make_shared<std::vector<float>>(winograd_weights(g.constant(name), m));
      blob.append_zeros(((blob.size() + 63) & ~uint64_t(63)) - blob.size());
      offsets[{&g, winograd_key(name, m)}] = blob.size();
      blob.append_view(u->data(), u->size() * sizeof(float), u);
    }
  };
  add(root);
  for (const auto &[name, sub] : root.subgraphs())
    add(*sub);
}

namespace {

/// The three phases of a Winograd conv over a block of tile rows, shared by
/// the phased lowering (each phase its own tasks, over all tile rows) and
/// the fused one (one task per block of tile rows, all three phases).
struct WinogradPhases {
  const WinogradArgs &a;
  const ConvShape &s = a.shape;
  const WinogradPlan &p = a.plan;
  const int64_t m = p.m, A = p.a, E = A * A, L = a.lanes;

  /// Input channels [c0, c1) of tile rows [ty0, ty0 + nty) (`nty` at most
  /// (plane rows - 2) / m): each channel's input rows copied into `plane`
  /// (zeroed here: rows outside the input and the borders stay zero), then
  /// each tile row in chunks of L tiles as vector lanes: V[e][c][t] at
  /// v + e * esv + c * ldv + (tile row - ty0) * tw + tile column.
  void input(llvm::IRBuilder<> &b, Value *x, Value *v, int64_t ldv, int64_t esv, Value *plane, int64_t plane_rows,
             Value *c0, Value *c1, Value *ty0, Value *nty) {
    llvm::Type *f32 = b.getFloatTy();
    auto *wide = llvm::FixedVectorType::get(f32, static_cast<unsigned>(L * m));
    b.CreateMemSet(plane, b.getInt8(0), b.getInt64(plane_rows * p.plane_w * 4), llvm::Align(4));
    Value *iy0 = add(b, mul(b, ty0, m), -s.pad[0]); // input row of plane row 0
    for_range(b, c0, c1, [&](Value *c) {
      Value *src = f32_at(b, x, mul(b, c, s.H * s.W));
      for_count(b, plane_rows, [&](Value *r) {
        Value *iy = add(b, iy0, r);
        emit_if(b, b.CreateICmpULT(iy, b.getInt64(s.H)), [&] {
          b.CreateMemCpy(f32_at(b, plane, add(b, mul(b, r, p.plane_w), s.pad[1])), llvm::Align(4),
                         f32_at(b, src, mul(b, iy, s.W)), llvm::Align(4), s.W * 4);
        });
      });
      for_range(b, b.getInt64(0), nty, [&](Value *ty) {
        for_chunks(b, p.tw, L, [&](Value *ch, int64_t tiles, bool) {
          Value *x0 = mul(b, ch, L * m);
          std::vector<std::vector<Value *>> h(A, std::vector<Value *>(A));
          for (int64_t i = 0; i < A; ++i) {
            Value *row = f32_at(b, plane, add(b, mul(b, add(b, mul(b, ty, m), i), p.plane_w), x0));
            Value *lo = b.CreateAlignedLoad(wide, row, llvm::Align(4));
            Value *hi = b.CreateAlignedLoad(wide, f32_at(b, row, b.getInt64(m)), llvm::Align(4));
            std::vector<Value *> d(A);
            for (int64_t j = 0; j < A; ++j)
              d[j] = b.CreateShuffleVector(j < m ? lo : hi, stride_lanes(L, m, j % m));
            input_1d(b, m, d.data(), h[i].data());
          }
          Value *tile0 = add(b, mul(b, ty, p.tw), mul(b, ch, L));
          Value *mask = first_lanes(b, L, tiles);
          for (int64_t l = 0; l < A; ++l) {
            std::vector<Value *> col(A), vv(A);
            for (int64_t i = 0; i < A; ++i)
              col[i] = h[i][l];
            input_1d(b, m, col.data(), vv.data());
            for (int64_t k = 0; k < A; ++k) {
              Value *ptr = f32_at(b, v, add(b, add(b, mul(b, c, ldv), (k * A + l) * esv), tile0));
              if (mask)
                b.CreateMaskedStore(vv[k], ptr, llvm::Align(4), mask);
              else
                b.CreateAlignedStore(vv[k], ptr, llvm::Align(4));
            }
          }
        });
      });
    });
  }

  /// M[e] [O, n] = U[e] [O, C] @ V[e] [C, n] for e in [e0, e1), rows of V
  /// and M ld apart, V[e] and M[e] esv and esm floats apart, each GEMM
  /// serial (its bits never depend on the threads).
  void gemms(llvm::IRBuilder<> &b, Value *u, Value *v, Value *mm, Value *n, Value *ld, Value *esv, Value *esm,
             Value *e0, Value *e1) {
    for_range(b, e0, e1, [&](Value *e) {
      GemmArgs g{f32_at(b, u, mul(b, e, s.O * s.C)), f32_at(b, v, b.CreateMul(e, esv)),
                 f32_at(b, mm, b.CreateMul(e, esm)), b.getInt64(s.O), n,
                 b.getInt64(s.C), b.getInt64(s.C), ld, ld, a.lanes, a.prefix, nullptr};
      g.serial = true;
      emit_gemm_f32(b, g);
    });
  }

  /// Output channels [o0, o1) of tile rows [ty0, ty0 + nty), M[e][o][t] at
  /// mm + e * esm + o * ldm + (tile row - ty0) * tw + tile column: Y = Aᵀ M A,
  /// each output row's m*L columns interleaved and stored at once, then the
  /// epilogue (if any) on them.
  void output(llvm::IRBuilder<> &b, Value *mm, int64_t ldm, int64_t esm, Value *out, Value *o0, Value *o1, Value *ty0,
              Value *nty, bool rows_static) {
    llvm::Type *f32 = b.getFloatTy();
    auto *vec = llvm::FixedVectorType::get(f32, static_cast<unsigned>(L));
    for_range(b, o0, o1, [&](Value *o) {
      for_range(b, b.getInt64(0), nty, [&](Value *lty) {
        for_chunks(b, p.tw, L, [&](Value *ch, int64_t tiles, bool last) {
          Value *tile0 = add(b, mul(b, lty, p.tw), mul(b, ch, L));
          Value *mask = first_lanes(b, L, tiles);
          std::vector<std::vector<Value *>> mv(A, std::vector<Value *>(A)), r(m, std::vector<Value *>(A));
          for (int64_t e = 0; e < E; ++e) {
            Value *ptr = f32_at(b, mm, add(b, add(b, mul(b, o, ldm), e * esm), tile0));
            mv[e / A][e % A] = mask ? static_cast<Value *>(b.CreateMaskedLoad(vec, ptr, llvm::Align(4), mask,
                                                                             llvm::ConstantAggregateZero::get(vec)))
                                    : b.CreateAlignedLoad(vec, ptr, llvm::Align(4));
          }
          for (int64_t l = 0; l < A; ++l) { // Aᵀ M
            std::vector<Value *> col(A), y(m);
            for (int64_t k = 0; k < A; ++k)
              col[k] = mv[k][l];
            output_1d(b, m, col.data(), y.data());
            for (int64_t i = 0; i < m; ++i)
              r[i][l] = y[i];
          }
          // Columns x0 .. x0 + cols of the output rows.
          int64_t cols = last ? std::min(L * m, s.OW - (p.tw - tiles) * m) : L * m;
          Value *x0 = mul(b, ch, L * m);
          Value *store_mask = first_lanes(b, L * m, cols);
          for (int64_t i = 0; i < m; ++i) {
            std::vector<Value *> y(m);
            output_1d(b, m, r[i].data(), y.data()); // (Aᵀ M) A
            // Concatenate the m vectors, then interleave: lane l*m + j = y[j][l].
            std::vector<Value *> parts = y;
            while (parts.size() > 1) {
              std::vector<Value *> next;
              for (size_t q = 0; q < parts.size(); q += 2) {
                auto n = llvm::cast<llvm::FixedVectorType>(parts[q]->getType())->getNumElements();
                std::vector<int> idx;
                for (unsigned z = 0; z < 2 * n; ++z)
                  idx.push_back(static_cast<int>(z));
                next.push_back(b.CreateShuffleVector(parts[q], parts[q + 1], idx));
              }
              parts = next;
            }
            std::vector<int> inter;
            for (int64_t z = 0; z < L * m; ++z)
              inter.push_back(static_cast<int>((z % m) * L + z / m));
            Value *rowv = b.CreateShuffleVector(parts[0], inter);
            Value *oy = add(b, mul(b, add(b, ty0, lty), m), i);
            auto store = [&] {
              Value *orow = add(b, mul(b, o, s.OH * s.OW), mul(b, oy, s.OW));
              Value *ptr = f32_at(b, out, add(b, orow, x0));
              if (store_mask)
                b.CreateMaskedStore(rowv, ptr, llvm::Align(4), store_mask);
              else
                b.CreateAlignedStore(rowv, ptr, llvm::Align(4));
              if (!a.epilogue)
                return;
              for_range(b, x0, add(b, x0, cols), [&](Value *ox) {
                Value *q = f32_at(b, out, add(b, orow, ox));
                Value *col = add(b, mul(b, oy, s.OW), ox);
                b.CreateStore(a.epilogue->apply(b, b.CreateLoad(f32, q), o, col), q);
              });
            };
            // Only the last tile row can hang over the bottom (known here
            // when the rows are static: all tile rows, from 0).
            if (s.OH % m == 0 || (rows_static && i < s.OH % m))
              store();
            else
              emit_if(b, b.CreateICmpULT(oy, b.getInt64(s.OH)), store);
          }
        });
      });
    });
  }
};

} // namespace

void emit_winograd(llvm::IRBuilder<> &outer, const WinogradArgs &a) {
  const ConvShape &s = a.shape;
  const WinogradPlan &p = a.plan;
  const int64_t E = p.a * p.a, T = p.th * p.tw;
  // V and M hold T tiles, or (fused) row_tasks blocks of rows_per_task tile
  // rows (the last block may be shorter: its rows past th go unused).
  const int64_t t_slots = p.row_tasks > 0 ? p.row_tasks * p.rows_per_task * p.tw : T;
  WinogradPhases ph{a};
  // Phased: V[e] and M[e] p.v_estride and p.m_estride apart (padded off
  // multiples of 4 KB); fused: each block's [E][C or O][block's tiles].
  const int64_t v_floats = p.row_tasks > 0 ? E * s.C * t_slots : E * p.v_estride;
  const int64_t m_floats = p.row_tasks > 0 ? E * s.O * t_slots : E * p.m_estride;
  Value *v_base = a.scratch;
  Value *m_base = f32_at(outer, a.scratch, outer.getInt64(v_floats));
  Value *planes = f32_at(outer, a.scratch, outer.getInt64(v_floats + m_floats));

  if (p.row_tasks > 0) {
    // Fused: one task per block of rows_per_task tile rows runs all three
    // phases over all channels, its V and M blocks ([E][C or O][block's
    // tiles], at the block's share of V and M) in its own cache: no
    // transform or GEMM output crosses to another thread, and one pool
    // hand-off per conv instead of three.
    const int64_t r = p.rows_per_task, plane_rows = p.plane_h;
    emit_tasks(outer, a.prefix, "winograd", {a.x, a.u, v_base, m_base, a.out, planes}, p.row_tasks,
               E * T * (s.C * s.O + s.C + s.O), a.epilogue,
               [&](llvm::IRBuilder<> &b, const std::vector<Value *> &f, Value *t) {
                 Value *ty0 = mul(b, t, r);
                 Value *nty = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b.getInt64(r),
                                                      b.CreateSub(b.getInt64(p.th), ty0));
                 Value *n = mul(b, nty, p.tw); // the block's tiles
                 Value *tile0 = mul(b, ty0, p.tw);
                 Value *v = f32_at(b, f[2], mul(b, tile0, E * s.C)), *mm = f32_at(b, f[3], mul(b, tile0, E * s.O));
                 Value *plane = f32_at(b, f[5], mul(b, t, plane_rows * p.plane_w));
                 // V and M blocks: rows of the block's n tiles; input() and
                 // output() take a static row stride, so they address the
                 // block as r * tw wide (the last, shorter block leaves
                 // the rest of its rows unused) and the GEMMs read the
                 // same stride.
                 int64_t ld = r * p.tw;
                 ph.input(b, f[0], v, ld, s.C * ld, plane, plane_rows, b.getInt64(0), b.getInt64(s.C), ty0, nty);
                 ph.gemms(b, f[1], v, mm, n, b.getInt64(ld), b.getInt64(s.C * ld), b.getInt64(s.O * ld), b.getInt64(0),
                          b.getInt64(E));
                 ph.output(b, mm, ld, s.O * ld, f[4], b.getInt64(0), b.getInt64(s.O), ty0, nty, false);
               });
    return;
  }

  // 1. Input transform, tasks over channels, each with a plane of its own.
  emit_tasks(outer, a.prefix, "winograd_in", {a.x, v_base, planes}, p.in_tasks, E * T * s.C, nullptr,
             [&](llvm::IRBuilder<> &b, const std::vector<Value *> &f, Value *t) {
               Value *plane = f32_at(b, f[2], mul(b, t, p.plane_h * p.plane_w));
               Value *c0 = mul(b, t, p.in_per);
               Value *c1 = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, add(b, c0, p.in_per), b.getInt64(s.C));
               ph.input(b, f[0], f[1], T, p.v_estride, plane, p.plane_h, c0, c1, b.getInt64(0), b.getInt64(p.th));
             });

  // 2. M[e] [O, T] = U[e] [O, C] @ V[e] [C, T], e = 0..a*a-1: one task per
  // e (one hand-off to the pool for all of them, not one per GEMM; the
  // 7x7 layers' GEMMs of 16 columns split poorly), each GEMM run serially
  // inside its task, so its bits do not depend on the thread count.
  emit_tasks(outer, a.prefix, "winograd_gemm", {a.u, v_base, m_base}, E, E * T * s.C * s.O, nullptr,
             [&](llvm::IRBuilder<> &b, const std::vector<Value *> &f, Value *e) {
               ph.gemms(b, f[0], f[1], f[2], b.getInt64(T), b.getInt64(T), b.getInt64(p.v_estride),
                        b.getInt64(p.m_estride), e, add(b, e, 1));
             });

  // 3. Output transform and epilogue, tasks over output channels.
  const std::array<int64_t, 2> split = conv_task_split(s.O, E * T);
  const int64_t tasks = split[0], per = split[1];
  emit_tasks(outer, a.prefix, "winograd_out", {m_base, a.out}, tasks, E * T * s.O, a.epilogue,
             [&](llvm::IRBuilder<> &b, const std::vector<Value *> &f, Value *t) {
               Value *o0 = mul(b, t, per);
               Value *o1 = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, add(b, o0, per), b.getInt64(s.O));
               ph.output(b, f[0], T, p.m_estride, f[1], o0, o1, b.getInt64(0), b.getInt64(p.th), true);
             });
}

} // namespace maxc::codegen

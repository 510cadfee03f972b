#include "Cpu/WinogradEmitter.h"

#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/IR/HostTensor.h"
#include "maxc/Transforms/MatmulLayout.h"

#include <llvm/IR/Intrinsics.h>

#include <set>

namespace maxc::codegen {

using llvm::Value;
using namespace conv_ir;

namespace {

constexpr int64_t kElems = 16; // the 4x4 transform

int64_t tiles_h(const ConvShape &s) { return (s.OH + 1) / 2; }
int64_t tiles_w(const ConvShape &s) { return (s.OW + 1) / 2; }

} // namespace

std::vector<float> winograd_f23_weights(const HostTensor &w) {
  int64_t O = w.shape()[0], C = w.shape()[1];
  static const double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  std::vector<float> u(static_cast<size_t>(kElems * O * C));
  for (int64_t o = 0; o < O; ++o)
    for (int64_t c = 0; c < C; ++c) {
      double g[3][3], gg[4][3];
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
          g[i][j] = w.get_f64(((o * C + c) * 3 + i) * 3 + j);
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 3; ++j)
          gg[i][j] = G[i][0] * g[0][j] + G[i][1] * g[1][j] + G[i][2] * g[2][j];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          double v = gg[i][0] * G[j][0] + gg[i][1] * G[j][1] + gg[i][2] * G[j][2];
          u[static_cast<size_t>(((i * 4 + j) * O + o) * C + c)] = static_cast<float>(v);
        }
    }
  return u;
}

std::map<std::string, std::vector<size_t>> winograd_call_site_inputs(const Graph &root) {
  std::map<std::string, std::vector<size_t>> out;
  for (const auto &[name, bound] : constant_bound_inputs(root)) {
    const Graph &sub = *root.find_subgraph(name);
    std::set<size_t> inputs;
    for (const Node &n : sub.nodes()) {
      if (!conv_winograd_shape(sub, n))
        continue;
      const ValueInfo &w = sub.value_info(n.operands[1]);
      if (w.producer < 0 && bound[w.index])
        inputs.insert(w.index);
    }
    if (!inputs.empty())
      out[name].assign(inputs.begin(), inputs.end());
  }
  return out;
}

void append_winograd_weights(const Graph &root, ByteChunks &blob, ConstantOffsets &offsets) {
  const std::map<std::string, std::vector<size_t>> call_inputs = winograd_call_site_inputs(root);
  auto add = [&](const Graph &g) {
    std::set<std::string> names;
    auto constant_name = [&](ValueId v) -> const std::string * {
      int64_t p = g.value_info(v).producer;
      if (p < 0 || g.nodes()[static_cast<size_t>(p)].op != "constant")
        return nullptr;
      return &g.nodes()[static_cast<size_t>(p)].attrs.get_string("name");
    };
    for (const Node &n : g.nodes()) {
      if (conv_winograd_shape(g, n))
        if (const std::string *name = constant_name(n.operands[1]))
          names.insert(*name);
      if (n.op == "call")
        if (auto it = call_inputs.find(n.attrs.get_string("callee")); it != call_inputs.end())
          for (size_t index : it->second)
            if (const std::string *name = constant_name(n.operands[index]))
              names.insert(*name);
    }
    for (const std::string &name : names) {
      auto u = std::make_shared<std::vector<float>>(winograd_f23_weights(g.constant(name)));
      blob.append_zeros(((blob.size() + 63) & ~uint64_t(63)) - blob.size());
      offsets[{&g, name + ".winograd"}] = blob.size();
      blob.append_view(u->data(), u->size() * sizeof(float), u);
    }
  };
  add(root);
  for (const auto &[name, sub] : root.subgraphs())
    add(*sub);
}

void emit_winograd_f23(llvm::IRBuilder<> &outer, const WinogradArgs &a) {
  const ConvShape &s = a.shape;
  int64_t TH = tiles_h(s), TW = tiles_w(s), T = TH * TW;
  Value *v_base = a.scratch;
  Value *m_base = f32_at(outer, a.scratch, outer.getInt64(kElems * s.C * T));
  llvm::Type *f32 = outer.getFloatTy();

  // 1. Input transform, tasks over channels.
  {
    auto [tasks, per] = conv_task_split(s.C, kElems * T);
    emit_tasks(outer, a.prefix, "winograd_in", {a.x, v_base}, tasks, nullptr,
               [&](llvm::IRBuilder<> &b, const std::vector<Value *> &f, Value *t) {
                 Value *c0 = mul(b, t, per);
                 Value *c1 = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, add(b, c0, per), b.getInt64(s.C));
                 for_range(b, c0, c1, [&](Value *c) {
                   Value *plane = mul(b, c, s.H * s.W);
                   for_count(b, TH, [&](Value *ty) {
                     Value *iy0 = add(b, mul(b, ty, 2), -s.pad[0]);
                     for_count(b, TW, [&](Value *tx) {
                       Value *ix0 = add(b, mul(b, tx, 2), -s.pad[1]);
                       Value *d[4][4];
                       for (int i = 0; i < 4; ++i) {
                         Value *iy = add(b, iy0, i);
                         Value *y_ok = b.CreateICmpULT(iy, b.getInt64(s.H));
                         for (int j = 0; j < 4; ++j) {
                           Value *ix = add(b, ix0, j);
                           Value *ok = b.CreateAnd(y_ok, b.CreateICmpULT(ix, b.getInt64(s.W)));
                           Value *idx = b.CreateSelect(ok, add(b, plane, add(b, mul(b, iy, s.W), ix)), plane);
                           Value *v = b.CreateLoad(f32, f32_at(b, f[0], idx));
                           d[i][j] = b.CreateSelect(ok, v, llvm::ConstantFP::get(f32, 0.0));
                         }
                       }
                       // Bᵀ d (columns), then (Bᵀ d) B (rows).
                       Value *r[4][4], *v[4][4];
                       for (int j = 0; j < 4; ++j) {
                         r[0][j] = b.CreateFSub(d[0][j], d[2][j]);
                         r[1][j] = b.CreateFAdd(d[1][j], d[2][j]);
                         r[2][j] = b.CreateFSub(d[2][j], d[1][j]);
                         r[3][j] = b.CreateFSub(d[1][j], d[3][j]);
                       }
                       for (int i = 0; i < 4; ++i) {
                         v[i][0] = b.CreateFSub(r[i][0], r[i][2]);
                         v[i][1] = b.CreateFAdd(r[i][1], r[i][2]);
                         v[i][2] = b.CreateFSub(r[i][2], r[i][1]);
                         v[i][3] = b.CreateFSub(r[i][1], r[i][3]);
                       }
                       Value *tile = add(b, mul(b, ty, TW), tx);
                       for (int e = 0; e < kElems; ++e)
                         b.CreateStore(v[e / 4][e % 4], f32_at(b, f[1], add(b, mul(b, add(b, c, e * s.C), T), tile)));
                     });
                   });
                 });
               });
  }

  // 2. M[e] [O, T] = U[e] [O, C] @ V[e] [C, T], e = 0..15.
  for_count(outer, kElems, [&](Value *e) {
    GemmArgs g{f32_at(outer, a.u, mul(outer, e, s.O * s.C)), f32_at(outer, v_base, mul(outer, e, s.C * T)),
               f32_at(outer, m_base, mul(outer, e, s.O * T)), outer.getInt64(s.O), outer.getInt64(T),
               outer.getInt64(s.C), outer.getInt64(s.C), outer.getInt64(T), outer.getInt64(T), a.lanes, a.prefix,
               nullptr};
    emit_gemm_f32(outer, g);
  });

  // 3. Output transform and epilogue, tasks over output channels.
  auto [tasks, per] = conv_task_split(s.O, kElems * T);
  emit_tasks(outer, a.prefix, "winograd_out", {m_base, a.out}, tasks, a.epilogue,
             [&](llvm::IRBuilder<> &b, const std::vector<Value *> &f, Value *t) {
               Value *o0 = mul(b, t, per);
               Value *o1 = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, add(b, o0, per), b.getInt64(s.O));
               for_range(b, o0, o1, [&](Value *o) {
                 for_count(b, TH, [&](Value *ty) {
                   for_count(b, TW, [&](Value *tx) {
                     Value *tile = add(b, mul(b, ty, TW), tx);
                     Value *m[4][4], *r[2][4];
                     for (int e = 0; e < kElems; ++e)
                       m[e / 4][e % 4] =
                           b.CreateLoad(f32, f32_at(b, f[0], add(b, mul(b, add(b, o, e * s.O), T), tile)));
                     for (int j = 0; j < 4; ++j) { // Aᵀ m
                       r[0][j] = b.CreateFAdd(b.CreateFAdd(m[0][j], m[1][j]), m[2][j]);
                       r[1][j] = b.CreateFSub(b.CreateFSub(m[1][j], m[2][j]), m[3][j]);
                     }
                     for (int i = 0; i < 2; ++i) // (Aᵀ m) A
                       for (int j = 0; j < 2; ++j) {
                         Value *y = j == 0 ? b.CreateFAdd(b.CreateFAdd(r[i][0], r[i][1]), r[i][2])
                                           : b.CreateFSub(b.CreateFSub(r[i][1], r[i][2]), r[i][3]);
                         Value *oy = add(b, mul(b, ty, 2), i), *ox = add(b, mul(b, tx, 2), j);
                         auto store = [&] {
                           Value *col = add(b, mul(b, oy, s.OW), ox);
                           Value *v = a.epilogue ? a.epilogue->apply(b, y, o, col) : y;
                           b.CreateStore(v, f32_at(b, f[1], add(b, mul(b, o, s.OH * s.OW), col)));
                         };
                         // Only the last tile row / column can hang over.
                         bool edge = (i == 1 && s.OH % 2) || (j == 1 && s.OW % 2);
                         if (!edge) {
                           store();
                           continue;
                         }
                         Value *in = b.getTrue();
                         if (i == 1 && s.OH % 2)
                           in = b.CreateAnd(in, b.CreateICmpULT(oy, b.getInt64(s.OH)));
                         if (j == 1 && s.OW % 2)
                           in = b.CreateAnd(in, b.CreateICmpULT(ox, b.getInt64(s.OW)));
                         if_then(b, in, store);
                       }
                   });
                 });
               });
             });
}

} // namespace maxc::codegen

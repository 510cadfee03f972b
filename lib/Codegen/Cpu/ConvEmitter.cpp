#include "Cpu/ConvEmitter.h"
#include "EntryPointUtil.h"
#include "FpRange.h"

#include "Cpu/GemmPanels.h"
#include "Cpu/Runtime.h"
#include "maxc/Codegen/LoweringPlan.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <vector>

namespace maxc::codegen {

using llvm::Value;

namespace conv_ir {

void for_range(llvm::IRBuilder<> &b, Value *from, Value *to, const std::function<void(Value *)> &body) {
  llvm::LLVMContext &ctx = b.getContext();
  llvm::Function *fn = b.GetInsertBlock()->getParent();
  llvm::BasicBlock *pre = b.GetInsertBlock();
  auto *header = llvm::BasicBlock::Create(ctx, "conv.loop", fn);
  auto *bodyb = llvm::BasicBlock::Create(ctx, "conv.body", fn);
  auto *exit = llvm::BasicBlock::Create(ctx, "conv.exit", fn);
  b.CreateBr(header);
  b.SetInsertPoint(header);
  llvm::PHINode *i = b.CreatePHI(b.getInt64Ty(), 2);
  i->addIncoming(from, pre);
  b.CreateCondBr(b.CreateICmpSLT(i, to), bodyb, exit);
  b.SetInsertPoint(bodyb);
  body(i);
  i->addIncoming(b.CreateAdd(i, b.getInt64(1), "", true, true), b.GetInsertBlock());
  b.CreateBr(header);
  b.SetInsertPoint(exit);
}

void for_count(llvm::IRBuilder<> &b, int64_t n, const std::function<void(Value *)> &body) {
  for_range(b, b.getInt64(0), b.getInt64(n), body);
}

Value *f32_at(llvm::IRBuilder<> &b, Value *base, Value *index) { return b.CreateGEP(b.getFloatTy(), base, index); }

Value *mul(llvm::IRBuilder<> &b, Value *x, int64_t c) { return b.CreateMul(x, b.getInt64(c), "", false, true); }
Value *add(llvm::IRBuilder<> &b, Value *x, Value *y) { return b.CreateAdd(x, y, "", false, true); }
Value *add(llvm::IRBuilder<> &b, Value *x, int64_t c) { return b.CreateAdd(x, b.getInt64(c), "", false, true); }

/// Zeroes n floats at base + from (n > 0 only).
void zero_floats(llvm::IRBuilder<> &b, Value *base, Value *from, int64_t n) {
  if (n > 0)
    b.CreateMemSet(f32_at(b, base, from), b.getInt8(0), b.getInt64(n * 4), llvm::Align(4));
}

int64_t ceil_div(int64_t a, int64_t d) { return a >= 0 ? (a + d - 1) / d : -((-a) / d); }
int64_t floor_div(int64_t a, int64_t d) { return a >= 0 ? a / d : -((-a + d - 1) / d); }

void emit_tasks(llvm::IRBuilder<> &b, const std::string &prefix, const std::string &name,
                const std::vector<Value *> &fields, int64_t tasks, int64_t work, const GemmEpilogue *epilogue,
                const std::function<void(llvm::IRBuilder<> &, const std::vector<Value *> &, Value *)> &body) {
  emit_tasks(b, prefix, name, fields, b.getInt64(tasks), b.getInt64(work), epilogue, body);
}

void emit_tasks(llvm::IRBuilder<> &b, const std::string &prefix, const std::string &name,
                const std::vector<Value *> &fields, Value *tasks, Value *work, const GemmEpilogue *epilogue,
                const std::function<void(llvm::IRBuilder<> &, const std::vector<Value *> &, Value *)> &body) {
  llvm::Function *caller = b.GetInsertBlock()->getParent();
  llvm::Module &m = *caller->getParent();
  llvm::LLVMContext &c = m.getContext();
  std::vector<Value *> all = fields;
  if (epilogue)
    all.insert(all.end(), epilogue->captures.begin(), epilogue->captures.end());
  std::vector<llvm::Type *> types;
  for (Value *v : all)
    types.push_back(v->getType());
  llvm::StructType *st = llvm::StructType::get(c, types);
  llvm::IRBuilder<> entry(&caller->getEntryBlock(), caller->getEntryBlock().begin());
  Value *args = entry.CreateAlloca(st);
  for (unsigned i = 0; i < all.size(); ++i)
    b.CreateStore(all[i], b.CreateStructGEP(st, args, i));
  auto *task = llvm::Function::Create(task_function_type(c), llvm::GlobalValue::InternalLinkage,
                                      prefix + "." + name, m);
  task->addFnAttr(llvm::Attribute::NoUnwind);
  auto *task_entry = llvm::BasicBlock::Create(c, "entry", task);
  auto *task_body = llvm::BasicBlock::Create(c, "body", task);
  llvm::IRBuilder<> tb(task_entry);
  std::vector<Value *> captured;
  for (unsigned i = 0; i < all.size(); ++i)
    captured.push_back(tb.CreateLoad(types[i], tb.CreateStructGEP(st, task->getArg(0), i)));
  llvm::IRBuilder<> at(tb.CreateBr(task_body));
  if (epilogue)
    epilogue->enter(at, std::vector<Value *>(captured.begin() + fields.size(), captured.end()));
  tb.SetInsertPoint(task_body);
  body(tb, std::vector<Value *>(captured.begin(), captured.begin() + fields.size()), task->getArg(1));
  tb.CreateRetVoid();
  if (epilogue)
    epilogue->leave();
  emit_parallel_for(b, prefix, args, tasks, task, work);
}

} // namespace conv_ir

using namespace conv_ir;

/// dst[i] = src[i * sx] for i < n (sx > 1), elements of type `elem` (f32
/// or bytes), in vectors of 16 floats or 32 bytes: a wide load of vl * sx
/// elements and a shuffle keeping every sx-th lane (LLVM's own
/// vectorization of the scalar loop mixed gathers and scalar tails; the
/// byte im2col of a stride-2 integer conv was a scalar loop). The last
/// vector (the one whose wide load would pass src[(n - 1) * sx]) is masked
/// on both sides: it reads no element past the window's last one. Past this
/// stride the wide load would span vl * sx elements (an STFT as a conv,
/// stride 160: vectors of 2560 lanes, which LLVM's instruction selection
/// does not finish): one element at a time instead.
constexpr int64_t kStridedCopyMaxStride = 8;

static void emit_strided_copy(llvm::IRBuilder<> &b, llvm::Type *elem, Value *dst, Value *src, int64_t n, int64_t sx) {
  const int64_t size = static_cast<int64_t>(elem->getPrimitiveSizeInBits() / 8), vl = size == 1 ? 32 : 16;
  auto *wide = llvm::FixedVectorType::get(elem, static_cast<unsigned>(vl * sx));
  auto at = [&](Value *base, Value *i) { return b.CreateGEP(elem, base, i); };
  std::vector<int> every_s;
  for (int64_t l = 0; l < vl; ++l)
    every_s.push_back(static_cast<int>(l * sx));
  int64_t full = ((n - 1) * sx + 1) / (vl * sx), rest = n - full * vl;
  if (full > 0)
    for_count(b, full, [&](Value *i) {
      Value *v = b.CreateAlignedLoad(wide, at(src, mul(b, i, vl * sx)), llvm::Align(size));
      b.CreateAlignedStore(b.CreateShuffleVector(v, every_s), at(dst, mul(b, i, vl)), llvm::Align(size));
    });
  if (rest > 0) {
    std::vector<llvm::Constant *> in_bits, out_bits;
    for (int64_t l = 0; l < vl * sx; ++l)
      in_bits.push_back(b.getInt1(l <= (rest - 1) * sx));
    for (int64_t l = 0; l < vl; ++l)
      out_bits.push_back(b.getInt1(l < rest));
    Value *v = b.CreateMaskedLoad(wide, at(src, b.getInt64(full * vl * sx)), llvm::Align(size),
                                  llvm::ConstantVector::get(in_bits), llvm::Constant::getNullValue(wide));
    b.CreateMaskedStore(b.CreateShuffleVector(v, every_s), at(dst, b.getInt64(full * vl)), llvm::Align(size),
                        llvm::ConstantVector::get(out_bits));
  }
}

/// Units [u_begin, u_end) of im2col (one task's): unit u = c * KH + ky,
/// the KW rows (u * KW + kx) of cols for input channel c and kernel row ky,
/// output rows [oy_begin, oy_end) (oy at column (oy - oy_begin) * OW of a
/// cols row; rows ld elements apart). Elements of type `elem` (f32, or
/// bytes for the integer conv), `fill` (an i8, repeated) where the window
/// hangs over the padding.
static void emit_im2col_units(llvm::IRBuilder<> &b, const ConvShape &s, Value *x, Value *cols, Value *u_begin,
                              Value *u_end, Value *oy_begin, Value *oy_end, Value *ld, llvm::Type *elem,
                              Value *fill) {
  int64_t sy = s.stride[0], sx = s.stride[1], dy = s.dilation[0], dx = s.dilation[1];
  int64_t size = static_cast<int64_t>(elem->getPrimitiveSizeInBits() / 8);
  auto at = [&](Value *base, Value *i) { return b.CreateGEP(elem, base, i); };
  auto pad = [&](Value *from, int64_t n) { // n elements of fill (n > 0 only)
    if (n > 0)
      b.CreateMemSet(at(cols, from), fill, b.getInt64(n * size), llvm::Align(size));
  };
  for_range(b, u_begin, u_end, [&](Value *u) {
    Value *c = b.CreateUDiv(u, b.getInt64(s.KH)), *ky = b.CreateURem(u, b.getInt64(s.KH));
    {
      // Row u*KW + kx of cols, per kx (unrolled: its valid ox range
      // [lo, hi) is a constant).
      Value *row0 = mul(b, u, s.KW);
      for (int64_t kx = 0; kx < s.KW; ++kx) {
        int64_t off = kx * dx - s.pad[1]; // ix = ox * sx + off
        int64_t lo = std::clamp<int64_t>(ceil_div(-off, sx), 0, s.OW);
        int64_t hi = std::clamp<int64_t>(floor_div(s.W - 1 - off, sx) + 1, lo, s.OW);
        Value *row = b.CreateMul(add(b, row0, kx), ld, "", false, true);
        for_range(b, oy_begin, oy_end, [&](Value *oy) {
          Value *dst = add(b, row, mul(b, b.CreateSub(oy, oy_begin, "", false, true), s.OW));
          Value *iy = add(b, mul(b, oy, sy), add(b, mul(b, ky, dy), -s.pad[0]));
          Value *y_ok = b.CreateICmpULT(iy, b.getInt64(s.H)); // 0 <= iy < H
          llvm::Function *fn = b.GetInsertBlock()->getParent();
          auto *copy = llvm::BasicBlock::Create(b.getContext(), "im2col.copy", fn);
          auto *zero = llvm::BasicBlock::Create(b.getContext(), "im2col.zero", fn);
          auto *done = llvm::BasicBlock::Create(b.getContext(), "im2col.done", fn);
          b.CreateCondBr(y_ok, copy, zero);
          b.SetInsertPoint(copy);
          pad(dst, lo);
          Value *src = add(b, mul(b, add(b, mul(b, c, s.H), iy), s.W), lo * sx + off);
          if (hi > lo) {
            if (sx == 1) {
              b.CreateMemCpy(at(cols, add(b, dst, lo)), llvm::Align(size), at(x, src), llvm::Align(size),
                             b.getInt64((hi - lo) * size));
            } else if (sx <= kStridedCopyMaxStride) {
              emit_strided_copy(b, elem, at(cols, add(b, dst, lo)), at(x, src), hi - lo, sx);
            } else {
              for_count(b, hi - lo, [&](Value *i) {
                Value *v = b.CreateLoad(elem, at(x, add(b, src, mul(b, i, sx))));
                b.CreateStore(v, at(cols, add(b, dst, add(b, i, lo))));
              });
            }
          }
          pad(add(b, dst, hi), s.OW - hi);
          b.CreateBr(done);
          b.SetInsertPoint(zero);
          pad(dst, s.OW);
          b.CreateBr(done);
          b.SetInsertPoint(done);
        });
      }
    }
  });
}

static void emit_im2col_units(llvm::IRBuilder<> &b, const ConvShape &s, Value *x, Value *cols, Value *u_begin,
                              Value *u_end, Value *oy_begin, Value *oy_end, Value *ld) {
  emit_im2col_units(b, s, x, cols, u_begin, u_end, oy_begin, oy_end, ld, b.getFloatTy(), b.getInt8(0));
}

ConvShape conv_shape_of(const Graph &g, const Node &node) {
  const Shape &xs = g.type_of(node.operands[0]).shape, &ws = g.type_of(node.operands[1]).shape,
              &os = g.type_of(node.results[0]).shape;
  std::vector<int64_t> stride = node.attrs.get_ints("stride"), dil = node.attrs.get_ints("dilation");
  std::vector<int64_t> p = node.attrs.get_ints("padding"); // [t, l] or [t, l, b, r]
  std::array<int64_t, 4> pad = p.size() == 2 ? std::array<int64_t, 4>{p[0], p[1], p[0], p[1]}
                                             : std::array<int64_t, 4>{p[0], p[1], p[2], p[3]};
  return {xs[1].value(), xs[2].value(), xs[3].value(), ws[0].value(), ws[2].value(), ws[3].value(),
          os[2].value(), os[3].value(), node.attrs.get_int("groups"), {stride[0], stride[1]}, {dil[0], dil[1]},
          pad};
}

void emit_im2col_f32(llvm::IRBuilder<> &outer, const ConvShape &s, Value *x_in, Value *cols_in,
                     const std::string &prefix) {
  int64_t P = s.OH * s.OW;
  // Units (c, ky), not channels: a 3-channel stem splits too.
  const std::array<int64_t, 2> split = conv_task_split(s.C * s.KH, s.KW * P);
  const int64_t tasks = split[0], per = split[1];
  emit_tasks(outer, prefix, "im2col", {x_in, cols_in}, tasks, s.C * s.KH * s.KW * P, nullptr,
             [&](llvm::IRBuilder<> &b, const std::vector<Value *> &f, Value *t) {
               Value *u0 = mul(b, t, per);
               Value *u1 = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, add(b, u0, per), b.getInt64(s.C * s.KH));
               emit_im2col_units(b, s, f[0], f[1], u0, u1, b.getInt64(0), b.getInt64(s.OH), b.getInt64(P));
             });
}

void emit_im2col_serial_f32(llvm::IRBuilder<> &b, const ConvShape &s, Value *x, Value *cols, Value *ld) {
  emit_im2col_units(b, s, x, cols, b.getInt64(0), b.getInt64(s.C * s.KH), b.getInt64(0), b.getInt64(s.OH), ld);
}

void emit_im2col_dynamic_f32(llvm::IRBuilder<> &outer, const ConvShape &s, const ConvRunTimeSize &rt, Value *x_in,
                             Value *cols_in, const std::string &prefix) {
  // The (c, ky) units split as for a nominal 64x64 output (the size is not
  // known here; the copy's result does not depend on the split).
  const std::array<int64_t, 2> split = conv_task_split(s.C * s.KH, s.KW * 64 * 64);
  const int64_t tasks = split[0], per = split[1];
  int64_t sy = s.stride[0], sx = s.stride[1], dy = s.dilation[0], dx = s.dilation[1];
  emit_tasks(
      outer, prefix, "im2col.dyn", {x_in, cols_in, rt.H, rt.W, rt.OH, rt.OW}, tasks, -1, nullptr,
      [&](llvm::IRBuilder<> &b, const std::vector<Value *> &f, Value *t) {
        Value *x = f[0], *cols = f[1], *H = f[2], *W = f[3], *OH = f[4], *OW = f[5];
        Value *P = b.CreateMul(OH, OW);
        Value *u0 = mul(b, t, per);
        Value *u1 = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, add(b, u0, per), b.getInt64(s.C * s.KH));
        auto smin = [&](Value *a, Value *c) { return b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, a, c); };
        auto smax = [&](Value *a, Value *c) { return b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, a, c); };
        auto zero = [&](Value *from, Value *n) { // n >= 0 floats
          b.CreateMemSet(f32_at(b, cols, from), b.getInt8(0), b.CreateMul(n, b.getInt64(4)), llvm::Align(4));
        };
        for_range(b, u0, u1, [&](Value *u) {
          Value *c = b.CreateUDiv(u, b.getInt64(s.KH)), *ky = b.CreateURem(u, b.getInt64(s.KH));
          Value *row0 = mul(b, u, s.KW);
          for (int64_t kx = 0; kx < s.KW; ++kx) {
            // ix = ox * sx + off is inside [0, W) for ox in [lo, hi).
            int64_t off = kx * dx - s.pad[1];
            Value *lo = smin(b.getInt64(std::max<int64_t>(ceil_div(-off, sx), 0)), OW);
            Value *last = b.CreateSub(W, b.getInt64(1 + off)); // W - 1 - off
            Value *hi_raw = add(b, b.CreateSDiv(smax(last, b.getInt64(0)), b.getInt64(sx)), 1);
            Value *hi = b.CreateSelect(b.CreateICmpSLT(last, b.getInt64(0)), lo, smax(lo, smin(hi_raw, OW)));
            Value *row = b.CreateMul(add(b, row0, kx), P);
            for_range(b, b.getInt64(0), OH, [&](Value *oy) {
              Value *dst = add(b, row, b.CreateMul(oy, OW));
              Value *iy = add(b, mul(b, oy, sy), add(b, mul(b, ky, dy), -s.pad[0]));
              Value *y_ok = b.CreateICmpULT(iy, H); // 0 <= iy < H
              llvm::Function *fn = b.GetInsertBlock()->getParent();
              auto *copy = llvm::BasicBlock::Create(b.getContext(), "im2col.copy", fn);
              auto *none = llvm::BasicBlock::Create(b.getContext(), "im2col.zero", fn);
              auto *done = llvm::BasicBlock::Create(b.getContext(), "im2col.done", fn);
              b.CreateCondBr(y_ok, copy, none);
              b.SetInsertPoint(copy);
              zero(dst, lo);
              Value *src = add(b, b.CreateMul(add(b, b.CreateMul(c, H), iy), W), add(b, mul(b, lo, sx), off));
              Value *n = b.CreateSub(hi, lo);
              if (sx == 1) {
                b.CreateMemCpy(f32_at(b, cols, add(b, dst, lo)), llvm::Align(4), f32_at(b, x, src), llvm::Align(4),
                               b.CreateMul(n, b.getInt64(4)));
              } else {
                for_range(b, b.getInt64(0), n, [&](Value *i) {
                  Value *v = b.CreateLoad(b.getFloatTy(), f32_at(b, x, add(b, src, mul(b, i, sx))));
                  b.CreateStore(v, f32_at(b, cols, add(b, dst, add(b, i, lo))));
                });
              }
              zero(add(b, dst, hi), b.CreateSub(OW, hi));
              b.CreateBr(done);
              b.SetInsertPoint(none);
              zero(dst, OW);
              b.CreateBr(done);
              b.SetInsertPoint(done);
            });
          }
        });
      });
}

namespace {

/// The max pool's row kernel (emit_max_pool_f32) on a
/// task-local row buffer: the vertical maxima of one output row's window
/// rows, input column ix at pad_left + ix, -inf around (padding never wins);
/// the horizontal pass reads lane l of chunk ch, tap kx at (ch*L + l)*sx + kx.
/// NaN wins as in the reference (max_in). One buffer per channel of a
/// group (by_groups): the horizontal pass reads a buffer's row a whole
/// group's vertical passes after its stores (the wide loads straddle the
/// stores, which cannot forward: measured as a stall on every load).
struct PoolRows {
  static constexpr int64_t kGroup = 8;
  const PoolShape &s;
  const int64_t L, out_chunks, in_chunks, row_w, group;
  llvm::FixedVectorType *vec, *wide;
  Value *ninf_vec, *rows;
  PoolInput in; // the plane's elements: f32, or 8-bit integers widened

  /// Allocates the row buffers in the task's entry and fills them with -inf.
  PoolRows(llvm::IRBuilder<> &b, const PoolShape &shape, unsigned lanes, PoolInput input)
      : s(shape), L(lanes), out_chunks((s.OW + L - 1) / L), in_chunks((s.W + L - 1) / L),
        row_w(std::max(out_chunks * L * s.stride[1] + s.KW, s.pad[1] + in_chunks * L)),
        group(std::min(kGroup, std::max<int64_t>(s.C, 1))),
        vec(llvm::FixedVectorType::get(b.getFloatTy(), static_cast<unsigned>(L))),
        wide(llvm::FixedVectorType::get(b.getFloatTy(), static_cast<unsigned>(L * s.stride[1]))), in(input) {
    llvm::Constant *ninf = llvm::ConstantFP::getInfinity(b.getFloatTy(), true);
    ninf_vec = llvm::ConstantVector::getSplat(llvm::ElementCount::getFixed(L), ninf);
    llvm::Function *fn = b.GetInsertBlock()->getParent();
    llvm::IRBuilder<> entry(&fn->getEntryBlock(), fn->getEntryBlock().begin());
    rows = entry.CreateAlloca(b.getFloatTy(), entry.getInt64(group * row_w));
    for_count(b, group * row_w, [&](Value *i) { b.CreateStore(ninf, f32_at(b, rows, i)); });
  }

  /// Channels [0, C) in groups of `group`: per group, first(c, g) for each
  /// of its channels (g: the buffer), then second(c, g).
  void by_groups(llvm::IRBuilder<> &b, const std::function<void(Value *, Value *)> &first,
                 const std::function<void(Value *, Value *)> &second) const {
    for_count(b, (s.C + group - 1) / group, [&](Value *gi) {
      Value *c0 = mul(b, gi, group);
      Value *n = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b.getInt64(group), b.CreateSub(b.getInt64(s.C), c0));
      for_range(b, b.getInt64(0), n, [&](Value *g) { first(add(b, c0, g), g); });
      for_range(b, b.getInt64(0), n, [&](Value *g) { second(add(b, c0, g), g); });
    });
  }

  Value *row_of(llvm::IRBuilder<> &b, Value *g) const { return f32_at(b, rows, mul(b, g, row_w)); }

  llvm::Constant *lane_mask(llvm::IRBuilder<> &b, int64_t valid) const {
    std::vector<llvm::Constant *> bits;
    for (int64_t l = 0; l < L; ++l)
      bits.push_back(b.getInt1(l < valid));
    return llvm::ConstantVector::get(bits);
  }

  /// As the reference: v wins if it is NaN or greater (a NaN max stays).
  static Value *max_in(llvm::IRBuilder<> &b, Value *acc, Value *v) {
    return b.CreateSelect(b.CreateOr(b.CreateFCmpUNO(v, v), b.CreateFCmpOGT(v, acc)), v, acc);
  }

  /// Row buffer g = the max of rows [lo, hi) of `plane` (H x W; none:
  /// -inf), whole vectors straight from the plane (the last one masked,
  /// -inf past W); unrolled when hi - lo == fast, else a loop over the rows.
  void vertical(llvm::IRBuilder<> &b, Value *plane, Value *lo, Value *hi, int64_t fast, Value *g) const {
    llvm::Function *fn = b.GetInsertBlock()->getParent();
    Value *vrow = f32_at(b, row_of(b, g), b.getInt64(s.pad[1]));
    auto load_in = [&](Value *iy, int64_t ch) -> Value * {
      bool whole = ch < in_chunks - 1 || s.W % L == 0;
      if (in == PoolInput::f32) {
        Value *p = f32_at(b, plane, add(b, mul(b, iy, s.W), ch * L));
        if (whole)
          return b.CreateAlignedLoad(vec, p, llvm::Align(4));
        return b.CreateMaskedLoad(vec, p, llvm::Align(4), lane_mask(b, s.W - ch * L), ninf_vec);
      }
      // Bytes, widened as the fused cast does (exact), -inf past W.
      auto *bytes = llvm::FixedVectorType::get(b.getInt8Ty(), static_cast<unsigned>(L));
      Value *p = b.CreateGEP(b.getInt8Ty(), plane, add(b, mul(b, iy, s.W), ch * L));
      Value *raw = whole ? static_cast<Value *>(b.CreateAlignedLoad(bytes, p, llvm::Align(1)))
                         : b.CreateMaskedLoad(bytes, p, llvm::Align(1), lane_mask(b, s.W - ch * L),
                                              llvm::Constant::getNullValue(bytes));
      Value *v = in == PoolInput::i8 ? b.CreateSIToFP(raw, vec) : b.CreateUIToFP(raw, vec);
      return whole ? v : b.CreateSelect(lane_mask(b, s.W - ch * L), v, ninf_vec);
    };
    auto store_row = [&](Value *v, int64_t ch) {
      b.CreateAlignedStore(v, f32_at(b, vrow, b.getInt64(ch * L)), llvm::Align(4));
    };
    llvm::BasicBlock *fast_bb = llvm::BasicBlock::Create(b.getContext(), "pool.rows", fn);
    llvm::BasicBlock *edge = llvm::BasicBlock::Create(b.getContext(), "pool.edge", fn);
    llvm::BasicBlock *done = llvm::BasicBlock::Create(b.getContext(), "pool.vdone", fn);
    b.CreateCondBr(b.CreateICmpEQ(b.CreateSub(hi, lo), b.getInt64(fast)), fast_bb, edge);
    b.SetInsertPoint(fast_bb);
    for (int64_t ch = 0; ch < in_chunks; ++ch) {
      Value *acc = load_in(lo, ch);
      for (int64_t ky = 1; ky < fast; ++ky)
        acc = max_in(b, acc, load_in(add(b, lo, ky), ch));
      store_row(acc, ch);
    }
    b.CreateBr(done);
    b.SetInsertPoint(edge);
    for (int64_t ch = 0; ch < in_chunks; ++ch) {
      llvm::BasicBlock *pre = b.GetInsertBlock();
      auto *head = llvm::BasicBlock::Create(b.getContext(), "pool.ky", fn);
      auto *body = llvm::BasicBlock::Create(b.getContext(), "pool.kybody", fn);
      auto *exit = llvm::BasicBlock::Create(b.getContext(), "pool.kyexit", fn);
      b.CreateBr(head);
      b.SetInsertPoint(head);
      llvm::PHINode *iy = b.CreatePHI(b.getInt64Ty(), 2);
      llvm::PHINode *acc = b.CreatePHI(vec, 2);
      iy->addIncoming(lo, pre);
      acc->addIncoming(ninf_vec, pre);
      b.CreateCondBr(b.CreateICmpSLT(iy, hi), body, exit);
      b.SetInsertPoint(body);
      Value *next = max_in(b, acc, load_in(iy, ch));
      iy->addIncoming(add(b, iy, 1), body);
      acc->addIncoming(next, body);
      b.CreateBr(head);
      b.SetInsertPoint(exit);
      store_row(acc, ch);
    }
    b.CreateBr(done);
    b.SetInsertPoint(done);
  }

  /// dst[0, OW) = the KW taps of stride sx over row buffer g; taps kx and
  /// kx' with kx / sx equal share one wide load.
  void horizontal(llvm::IRBuilder<> &b, Value *dst, Value *g) const {
    const int64_t sx = s.stride[1];
    Value *row = row_of(b, g);
    for (int64_t ch = 0; ch < out_chunks; ++ch) {
      Value *acc = nullptr, *loaded = nullptr;
      for (int64_t kx = 0; kx < s.KW; ++kx) {
        Value *v;
        if (sx == 1) {
          v = b.CreateAlignedLoad(vec, f32_at(b, row, b.getInt64(ch * L + kx)), llvm::Align(4));
        } else {
          if (kx % sx == 0)
            loaded = b.CreateAlignedLoad(wide, f32_at(b, row, b.getInt64(ch * L * sx + kx)), llvm::Align(4));
          std::vector<int> every;
          for (int64_t l = 0; l < L; ++l)
            every.push_back(static_cast<int>(l * sx + kx % sx));
          v = b.CreateShuffleVector(loaded, every);
        }
        acc = acc ? max_in(b, acc, v) : v;
      }
      store_out(b, acc, f32_at(b, dst, b.getInt64(ch * L)), ch);
    }
  }

  /// Output chunk ch of a pooled row (the last one masked).
  void store_out(llvm::IRBuilder<> &b, Value *v, Value *p, int64_t ch) const {
    if (int64_t valid = s.OW - ch * L; valid < L)
      b.CreateMaskedStore(v, p, llvm::Align(4), lane_mask(b, valid));
    else
      b.CreateAlignedStore(v, p, llvm::Align(4));
  }
};

} // namespace

void emit_conv_blocks_f32(llvm::IRBuilder<> &outer, const ConvBlockArgs &a) {
  const ConvShape &s = a.shape;
  int64_t K = s.C * s.KH * s.KW, P = s.OH * s.OW, rows = a.plan.rows;
  std::vector<Value *> fields = {a.x, a.w, a.out, a.cols};
  emit_tasks(outer, a.prefix, "conv_blocks", fields, a.plan.blocks, s.O * K * P / s.groups, a.epilogue,
             [&](llvm::IRBuilder<> &b, const std::vector<Value *> &f, Value *t) {
               // Output rows [oy0, oy1): columns [p0, p0 + nb) of the conv's
               // [O, P] output; the task's colsT slice, K x nb.
               Value *oy0 = mul(b, t, rows);
               Value *oy1 = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, add(b, oy0, rows), b.getInt64(s.OH));
               Value *p0 = mul(b, oy0, s.OW);
               Value *nb = mul(b, b.CreateSub(oy1, oy0, "", false, true), s.OW);
               Value *cols = f32_at(b, f[3], mul(b, t, K * rows * s.OW));
               emit_im2col_units(b, s, f[0], cols, b.getInt64(0), b.getInt64(s.C * s.KH), oy0, oy1, nb);
               Value *out = f32_at(b, f[2], p0);
               GemmArgs g{f[1], cols, out, b.getInt64(s.O), nb, b.getInt64(K), b.getInt64(K), nb, b.getInt64(P),
                          a.lanes, a.prefix, nullptr};
               g.serial = g.whole_rows = true;
               emit_gemm_f32(b, g);
               // The epilogue (bias, the plan's chain) over the task's block
               // of the output while it is in this core's cache.
               if (a.epilogue)
                 for_count(b, s.O, [&](Value *o) {
                   Value *row = f32_at(b, out, mul(b, o, P));
                   for_range(b, b.getInt64(0), nb, [&](Value *j) {
                     Value *p = f32_at(b, row, j);
                     b.CreateStore(a.epilogue->apply(b, b.CreateLoad(b.getFloatTy(), p), o, add(b, p0, j)), p);
                   });
                 });
             });
}

/// Groups [g_begin, g_end) of the direct kernel (one task's), with a's
/// pointers those of the task.
static void emit_direct_groups(llvm::IRBuilder<> &b, const DirectConvArgs &a, Value *g_begin, Value *g_end) {
  const ConvShape &s = a.shape;
  llvm::Type *f32 = b.getFloatTy();
  int64_t Cg = s.C / s.groups, Og = s.O / s.groups, taps = s.KH * s.KW;
  int64_t sy = s.stride[0], sx = s.stride[1], dy = s.dilation[0], dx = s.dilation[1];
  // Vector width: the target's, halved while a row fits in half (7x7
  // planes: 8 lanes, not 16 mostly masked).
  int64_t vl = std::min<int64_t>(a.lanes, kConvDirectMaxLanes);
  while (vl > 4 && s.OW <= vl / 2)
    vl /= 2;
  int64_t chunks = (s.OW + vl - 1) / vl, tail = s.OW % vl;
  auto *vec = llvm::FixedVectorType::get(f32, static_cast<unsigned>(vl));
  auto *wide = llvm::FixedVectorType::get(f32, static_cast<unsigned>(vl * sx));
  llvm::Module *m = b.GetInsertBlock()->getModule();
  llvm::Function *fma = llvm::Intrinsic::getDeclaration(m, llvm::Intrinsic::fma, {vec});
  auto lane_mask = [&](int64_t n, const std::function<bool(int64_t)> &on) {
    std::vector<llvm::Constant *> bits;
    for (int64_t l = 0; l < n; ++l)
      bits.push_back(b.getInt1(on(l)));
    return llvm::ConstantVector::get(bits);
  };
  Value *tail_mask = tail ? lane_mask(vl, [&](int64_t l) { return l < tail; }) : nullptr;
  std::vector<int> every_s;
  for (int64_t l = 0; l < vl; ++l)
    every_s.push_back(static_cast<int>(l * sx));
  auto load_out = [&](Value *p, bool partial) -> Value * {
    if (partial)
      return b.CreateMaskedLoad(vec, p, llvm::Align(4), tail_mask, llvm::Constant::getNullValue(vec));
    return b.CreateAlignedLoad(vec, p, llvm::Align(4));
  };
  auto store_out = [&](Value *v, Value *p, bool partial) {
    if (partial)
      b.CreateMaskedStore(v, p, llvm::Align(4), tail_mask);
    else
      b.CreateAlignedStore(v, p, llvm::Align(4));
  };

  // The taps read the input rows in place: the wide load of vector j, tap
  // kx reads columns j*vl*sx + kx*dx - pad_left + l, lane l (a compile-time
  // mask where some fall outside the row: those read 0, never memory, as
  // the padding; a load with no lane inside is left out), and a kernel row
  // above or below the input reads a row of zeros (a constant of W floats)
  // instead. No padded copy: the input streams through once, and no plane
  // bigger than L1 is written and read back per channel.
  auto *zeros_type = llvm::ArrayType::get(f32, static_cast<uint64_t>(s.W));
  std::string zeros_name = "maxc.conv_direct.zeros." + std::to_string(s.W);
  llvm::GlobalVariable *zeros = m->getNamedGlobal(zeros_name);
  if (!zeros)
    zeros = new llvm::GlobalVariable(*m, zeros_type, true, llvm::GlobalValue::PrivateLinkage,
                                     llvm::ConstantAggregateZero::get(zeros_type), zeros_name);
  std::vector<std::vector<Value *>> col_mask(static_cast<size_t>(chunks)); // null: all lanes inside
  std::vector<std::vector<char>> col_any(static_cast<size_t>(chunks));
  for (int64_t j = 0; j < chunks; ++j)
    for (int64_t kx = 0; kx < s.KW; ++kx) {
      int64_t first = j * vl * sx + kx * dx - s.pad[1], inside = 0;
      auto in_row = [&](int64_t l) { return first + l >= 0 && first + l < s.W; };
      for (int64_t l = 0; l < vl * sx; ++l)
        inside += in_row(l);
      col_any[j].push_back(inside > 0);
      col_mask[j].push_back(inside == vl * sx ? nullptr : lane_mask(vl * sx, in_row));
    }

  for_range(b, g_begin, g_end, [&](Value *g) {
    for_count(b, Cg, [&](Value *ci) {
      Value *c = add(b, mul(b, g, Cg), ci);
      Value *xc = f32_at(b, a.x, mul(b, c, s.H * s.W));
      Value *first = b.CreateICmpEQ(ci, b.getInt64(0));
      Value *last = b.CreateICmpEQ(ci, b.getInt64(Cg - 1));
      for_count(b, Og, [&](Value *oo) {
        Value *o = add(b, mul(b, g, Og), oo);
        Value *wbase = mul(b, add(b, mul(b, o, Cg), ci), taps);
        std::vector<Value *> tap(static_cast<size_t>(taps));
        for (int64_t t = 0; t < taps; ++t)
          tap[t] = b.CreateVectorSplat(static_cast<unsigned>(vl), b.CreateLoad(f32, f32_at(b, a.w, add(b, wbase, t))));
        Value *init = llvm::Constant::getNullValue(vec);
        if (a.bias)
          init = b.CreateVectorSplat(static_cast<unsigned>(vl), b.CreateLoad(f32, f32_at(b, a.bias, o)));
        for_count(b, s.OH, [&](Value *oy) {
          Value *orow = mul(b, add(b, mul(b, o, s.OH), oy), s.OW);
          std::vector<Value *> rows;
          for (int64_t ky = 0; ky < s.KH; ++ky) {
            Value *iy = add(b, mul(b, oy, sy), ky * dy - s.pad[0]);
            Value *inside = b.CreateICmpULT(iy, b.getInt64(s.H));
            rows.push_back(b.CreateSelect(inside, b.CreateGEP(f32, xc, mul(b, iy, s.W)), zeros));
          }
          // Blocks of up to 8 vectors of output columns, each an independent
          // FMA chain over the taps.
          for (int64_t j0 = 0; j0 < chunks; j0 += 8) {
            int64_t j1 = std::min<int64_t>(chunks, j0 + 8);
            std::vector<Value *> acc;
            for (int64_t j = j0; j < j1; ++j) {
              Value *p = f32_at(b, a.out, add(b, orow, j * vl));
              acc.push_back(Cg == 1 ? init : b.CreateSelect(first, init, load_out(p, tail && j == chunks - 1)));
            }
            for (int64_t ky = 0; ky < s.KH; ++ky)
              for (int64_t kx = 0; kx < s.KW; ++kx)
                for (int64_t j = j0; j < j1; ++j) {
                  if (!col_any[j][kx])
                    continue;
                  Value *p = b.CreateGEP(f32, rows[ky], b.getInt64(j * vl * sx + kx * dx - s.pad[1]));
                  Value *mask = col_mask[j][kx];
                  Value *v = mask ? static_cast<Value *>(b.CreateMaskedLoad(wide, p, llvm::Align(4), mask,
                                                                            llvm::Constant::getNullValue(wide)))
                                  : b.CreateAlignedLoad(wide, p, llvm::Align(4));
                  if (sx > 1)
                    v = b.CreateShuffleVector(v, every_s);
                  acc[j - j0] = b.CreateCall(fma, {tap[ky * s.KW + kx], v, acc[j - j0]});
                }
            for (int64_t j = j0; j < j1; ++j)
              store_out(acc[j - j0], f32_at(b, a.out, add(b, orow, j * vl)), tail && j == chunks - 1);
          }
          if (a.epilogue) {
            auto finish = [&] {
              for_count(b, s.OW, [&](Value *ox) {
                Value *p = f32_at(b, a.out, add(b, orow, ox));
                Value *col = add(b, mul(b, oy, s.OW), ox);
                b.CreateStore(a.epilogue->apply(b, b.CreateLoad(f32, p), o, col), p);
              });
            };
            if (Cg == 1)
              finish();
            else
              emit_if(b, last, finish);
          }
        });
      });
    });
  });
}

void emit_conv_direct_f32(llvm::IRBuilder<> &b, const DirectConvArgs &a) {
  const int64_t tasks = a.split[0], per = a.split[1];
  std::vector<Value *> fields = {a.x, a.w, a.out};
  if (a.bias)
    fields.push_back(a.bias);
  const ConvShape &s = a.shape;
  emit_tasks(b, a.prefix, "conv_direct", fields, tasks, s.O * s.C / s.groups * s.KH * s.KW * s.OH * s.OW, a.epilogue,
             [&](llvm::IRBuilder<> &tb, const std::vector<Value *> &f, Value *t) {
               DirectConvArgs here = a;
               here.x = f[0];
               here.w = f[1];
               here.out = f[2];
               here.bias = a.bias ? f[3] : nullptr;
               Value *g0 = mul(tb, t, per);
               Value *g1 = tb.CreateBinaryIntrinsic(llvm::Intrinsic::smin, add(tb, g0, per), tb.getInt64(a.shape.groups));
               emit_direct_groups(tb, here, g0, g1);
             });
}

void emit_conv_depthwise_dynamic_f32(llvm::IRBuilder<> &outer, const DepthwiseDynamicArgs &a) {
  const ConvShape &s = a.shape;
  const int64_t taps = s.KH * s.KW, sy = s.stride[0], sx = s.stride[1], dy = s.dilation[0], dx = s.dilation[1];
  // Channels split as for a nominal 64x64 output (the result does not
  // depend on the split: each channel is one task's).
  const std::array<int64_t, 2> split = conv_task_split(s.C, taps * 64 * 64);
  const int64_t per = split[1];
  std::vector<Value *> fields = {a.x, a.w, a.out, a.rt.H, a.rt.W, a.rt.OH, a.rt.OW};
  if (a.bias)
    fields.push_back(a.bias);
  emit_tasks(outer, a.prefix, "conv_dw.dyn", fields, split[0], -1, nullptr,
             [&](llvm::IRBuilder<> &b, const std::vector<Value *> &f, Value *t) {
    Value *x = f[0], *w = f[1], *out = f[2], *H = f[3], *W = f[4], *OH = f[5], *OW = f[6];
    Value *bias = a.bias ? f[7] : nullptr;
    llvm::Type *f32 = b.getFloatTy(), *i64 = b.getInt64Ty();
    const int64_t vl = std::min<int64_t>(a.lanes, kConvDirectMaxLanes), wl = vl * sx;
    auto *vec = llvm::FixedVectorType::get(f32, static_cast<unsigned>(vl));
    auto *wide = llvm::FixedVectorType::get(f32, static_cast<unsigned>(wl));
    auto *wide_i = llvm::FixedVectorType::get(i64, static_cast<unsigned>(wl));
    llvm::Function *fma = llvm::Intrinsic::getDeclaration(b.GetInsertBlock()->getModule(), llvm::Intrinsic::fma, {vec});
    auto iota = [&](int64_t n) {
      std::vector<llvm::Constant *> v;
      for (int64_t l = 0; l < n; ++l)
        v.push_back(b.getInt64(l));
      return llvm::ConstantVector::get(v);
    };
    Value *iota_wide = iota(wl), *iota_out = iota(vl);
    std::vector<int> every_s;
    for (int64_t l = 0; l < vl; ++l)
      every_s.push_back(static_cast<int>(l * sx));
    Value *W_wide = b.CreateVectorSplat(static_cast<unsigned>(wl), W);
    Value *OW_out = b.CreateVectorSplat(static_cast<unsigned>(vl), OW);
    Value *plane = b.CreateMul(H, W), *out_plane = b.CreateMul(OH, OW);
    Value *c0 = mul(b, t, per);
    Value *c1 = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, add(b, c0, per), b.getInt64(s.C));
    Value *chunks = b.CreateUDiv(add(b, OW, vl - 1), b.getInt64(vl));
    for_range(b, c0, c1, [&](Value *c) {
      Value *xc = f32_at(b, x, b.CreateMul(c, plane)), *oc = f32_at(b, out, b.CreateMul(c, out_plane));
      std::vector<Value *> tap(static_cast<size_t>(taps));
      for (int64_t k = 0; k < taps; ++k)
        tap[k] = b.CreateVectorSplat(static_cast<unsigned>(vl), b.CreateLoad(f32, f32_at(b, w, add(b, mul(b, c, taps), k))));
      Value *init = bias ? b.CreateVectorSplat(static_cast<unsigned>(vl), b.CreateLoad(f32, f32_at(b, bias, c)))
                         : llvm::Constant::getNullValue(vec);
      for_range(b, b.getInt64(0), OH, [&](Value *oy) {
        // Kernel rows above or below the input: all lanes masked off (read
        // as the zero padding, never loaded).
        std::vector<Value *> row(static_cast<size_t>(s.KH)), row_in(static_cast<size_t>(s.KH));
        for (int64_t ky = 0; ky < s.KH; ++ky) {
          Value *iy = add(b, mul(b, oy, sy), ky * dy - s.pad[0]);
          Value *inside = b.CreateICmpULT(iy, H);
          row_in[ky] = inside;
          row[ky] = b.CreateSelect(inside, f32_at(b, xc, b.CreateMul(iy, W)), xc);
        }
        Value *orow = f32_at(b, oc, b.CreateMul(oy, OW));
        for_range(b, b.getInt64(0), chunks, [&](Value *j) {
          // Columns j*vl*sx + kx*dx - pad_left + l of each row, lane l,
          // masked where they fall outside [0, W).
          std::vector<Value *> first(static_cast<size_t>(s.KW)), col_mask(static_cast<size_t>(s.KW));
          for (int64_t kx = 0; kx < s.KW; ++kx) {
            first[kx] = add(b, mul(b, j, vl * sx), kx * dx - s.pad[1]);
            Value *idx = b.CreateAdd(b.CreateVectorSplat(static_cast<unsigned>(wl), first[kx]), iota_wide);
            col_mask[kx] = b.CreateAnd(b.CreateICmpSGE(idx, llvm::Constant::getNullValue(wide_i)),
                                       b.CreateICmpSLT(idx, W_wide));
          }
          Value *acc = init;
          for (int64_t ky = 0; ky < s.KH; ++ky)
            for (int64_t kx = 0; kx < s.KW; ++kx) {
              Value *mask = b.CreateSelect(row_in[ky], col_mask[kx], llvm::Constant::getNullValue(col_mask[kx]->getType()));
              Value *v = b.CreateMaskedLoad(wide, b.CreateGEP(f32, row[ky], first[kx]), llvm::Align(4), mask,
                                            llvm::Constant::getNullValue(wide));
              if (sx > 1)
                v = b.CreateShuffleVector(v, every_s);
              acc = b.CreateCall(fma, {tap[ky * s.KW + kx], v, acc});
            }
          Value *col = mul(b, j, vl);
          Value *store_mask = b.CreateICmpSLT(b.CreateAdd(b.CreateVectorSplat(static_cast<unsigned>(vl), col), iota_out), OW_out);
          b.CreateMaskedStore(acc, f32_at(b, orow, col), llvm::Align(4), store_mask);
        });
      });
    });
  });
}

void emit_max_pool_f32(llvm::IRBuilder<> &outer, const PoolShape &s, Value *images, Value *x_all, Value *out_all,
                       unsigned lanes, const std::string &prefix, PoolInput input) {
  // Tasks: (image, band of output rows), all channels each, so that a band
  // reads the input rows a row-split producer made on the same core.
  const std::array<int64_t, 2> split = conv_task_split(s.OH, s.C * s.OW * s.KH * s.KW);
  const int64_t tasks = split[0], per = split[1], work = s.OH * s.C * s.OW * s.KH * s.KW;
  emit_tasks(outer, prefix, "max_pool", {x_all, out_all}, mul(outer, images, tasks), mul(outer, images, work), nullptr,
             [&](llvm::IRBuilder<> &b, const std::vector<Value *> &f, Value *task) {
               PoolRows rows(b, s, lanes, input);
               llvm::Type *elem = input == PoolInput::f32 ? b.getFloatTy() : b.getInt8Ty();
               Value *n = b.CreateUDiv(task, b.getInt64(tasks)), *t = b.CreateURem(task, b.getInt64(tasks));
               Value *x = b.CreateGEP(elem, f[0], mul(b, n, s.C * s.H * s.W));
               Value *out = f32_at(b, f[1], mul(b, n, s.C * s.OH * s.OW));
               Value *oy0 = mul(b, t, per);
               Value *oy1 = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, add(b, oy0, per), b.getInt64(s.OH));
               for_range(b, oy0, oy1, [&](Value *oy) {
                 // The window's rows inside the image: [iy0, iy0 + KH) clipped.
                 Value *iy0 = add(b, mul(b, oy, s.stride[0]), -s.pad[0]);
                 Value *lo = b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, iy0, b.getInt64(0));
                 Value *hi = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, add(b, iy0, s.KH), b.getInt64(s.H));
                 rows.by_groups(
                     b, [&](Value *c, Value *g) { rows.vertical(b, b.CreateGEP(elem, x, mul(b, c, s.H * s.W)), lo, hi, s.KH, g); },
                     [&](Value *c, Value *g) {
                       rows.horizontal(b, f32_at(b, out, add(b, mul(b, c, s.OH * s.OW), mul(b, oy, s.OW))), g);
                     });
               });
             });
}


namespace {

/// Panels [p0, p1) of colsT (rows `ld` bytes apart) as the integer GEMM's B
/// (GemmPanels.h's layout: panels of nr columns, each column's four rows of
/// a group side by side; i8 activations xor 0x80, read as u8); with
/// a.col_sums, each column's sum of those bytes too (i32, at col_sums).
void emit_pack_i8(llvm::IRBuilder<> &b, const ConvInt8Args &a, Value *cols, Value *packed, Value *col_sums,
                  Value *p0, Value *p1, int64_t ld, int64_t K4) {
  int64_t nr = 2 * static_cast<int64_t>(a.lanes);
  auto *row_t = llvm::FixedVectorType::get(b.getInt8Ty(), static_cast<unsigned>(nr));
  auto *sum_t = llvm::FixedVectorType::get(b.getInt32Ty(), static_cast<unsigned>(nr));
  llvm::BasicBlock &entry_block = b.GetInsertBlock()->getParent()->getEntryBlock();
  llvm::IRBuilder<> entry(&entry_block, entry_block.begin());
  llvm::AllocaInst *sum = entry.CreateAlloca(sum_t);
  std::vector<int> two(2 * nr), four(4 * nr);
  for (int64_t i = 0; i < 2 * nr; ++i)
    two[i] = static_cast<int>(i);
  for (int64_t c = 0; c < nr; ++c)
    for (int64_t r = 0; r < 4; ++r)
      four[c * 4 + r] = static_cast<int>(r * nr + c);
  for_range(b, p0, p1, [&](Value *p) {
    if (a.col_sums)
      b.CreateStore(llvm::Constant::getNullValue(sum_t), sum);
    for_count(b, K4, [&](Value *g) {
      Value *rows[4];
      for (int64_t r = 0; r < 4; ++r) {
        Value *at = add(b, b.CreateMul(add(b, mul(b, g, 4), r), b.getInt64(ld)), mul(b, p, nr));
        rows[r] = b.CreateAlignedLoad(row_t, b.CreateGEP(b.getInt8Ty(), cols, at), llvm::Align(1));
        if (a.x_signed)
          rows[r] = b.CreateXor(rows[r], llvm::ConstantInt::get(row_t, 0x80));
      }
      if (a.col_sums) {
        Value *acc = b.CreateLoad(sum_t, sum);
        for (Value *row : rows)
          acc = b.CreateAdd(acc, b.CreateZExt(row, sum_t));
        b.CreateStore(acc, sum);
      }
      Value *v = b.CreateShuffleVector(b.CreateShuffleVector(rows[0], rows[1], two),
                                       b.CreateShuffleVector(rows[2], rows[3], two), four);
      Value *to = b.CreateMul(add(b, b.CreateMul(p, b.getInt64(K4)), g), b.getInt64(nr * 4));
      b.CreateAlignedStore(v, b.CreateGEP(b.getInt8Ty(), packed, to), llvm::Align(1));
    });
    if (a.col_sums)
      b.CreateAlignedStore(b.CreateLoad(sum_t, sum), b.CreateGEP(b.getInt32Ty(), col_sums, mul(b, p, nr)),
                           llvm::Align(4));
  });
}

/// weights (A, i8 [O, K] at w) @ packed (B, u8; n columns, at most `limit`
/// of them real), each tile's sums written back as they are finished:
/// out[o, col_base + p] = f32(acc[o, p] + z[o] * cs[p] - zp * S[o]) = sum_k
/// W[o, k] * (x - zp) (zp32 the zero point as the unsigned byte B holds; cs
/// the columns' sums, needed only where some z[o] is not 0), then the
/// epilogue (its captures `epi` as this function sees them), stored as out's
/// type.
void emit_gemm_store(llvm::IRBuilder<> &b, const ConvInt8Args &a, Value *w, Value *packed, Value *col_sums,
                     Value *out, Value *zp32, int64_t n, Value *col_base, Value *limit,
                     const std::vector<Value *> &epi, bool serial) {
  const ConvShape &s = a.shape;
  int64_t K = s.C * s.KH * s.KW, P = s.OH * s.OW, nr = 2 * static_cast<int64_t>(a.lanes);
  Value *tail = b.CreateGEP(b.getInt8Ty(), w, b.getInt64(static_cast<int64_t>(conv_int8_weight_tail(s.O, K))));
  std::vector<Value *> in_task; // out, tail, zp32, col_sums, col_base, limit in the GEMM's task
  Int8GemmStore store;
  store.captures = {out, tail, zp32, col_sums, col_base, limit};
  size_t own = store.captures.size();
  store.captures.insert(store.captures.end(), epi.begin(), epi.end());
  store.enter = [&](llvm::IRBuilder<> &entry, const std::vector<Value *> &captured) {
    in_task.assign(captured.begin(), captured.begin() + static_cast<std::ptrdiff_t>(own));
    if (a.epilogue)
      a.epilogue->enter(entry, std::vector<Value *>(captured.begin() + static_cast<std::ptrdiff_t>(own), captured.end()));
  };
  store.leave = [&] {
    if (a.epilogue)
      a.epilogue->leave();
  };
  store.store = [&](llvm::IRBuilder<> &tb, Value *o, Value *col0, Value *count, Value *sums) {
    Value *sum = tb.CreateLoad(tb.getInt32Ty(), tb.CreateGEP(tb.getInt32Ty(), in_task[1], o));
    Value *corr = tb.CreateMul(in_task[2], sum);
    Value *z = a.col_sums ? tb.CreateLoad(tb.getInt32Ty(), tb.CreateGEP(tb.getInt32Ty(), in_task[1], add(tb, o, s.O)))
                          : nullptr;
    llvm::Type *ot = a.out_type ? a.out_type : tb.getFloatTy();
    Value *col = add(tb, in_task[4], col0); // the image's column of the first
    Value *dst = tb.CreateGEP(ot, in_task[0], add(tb, mul(tb, o, P), col));
    Value *end = tb.CreateBinaryIntrinsic(llvm::Intrinsic::smin, count, tb.CreateSub(in_task[5], col0));
    auto element = [&](Value *j) {
      Value *v = tb.CreateLoad(tb.getInt32Ty(), tb.CreateGEP(tb.getInt32Ty(), sums, j));
      if (z) {
        Value *cs = tb.CreateLoad(tb.getInt32Ty(), tb.CreateGEP(tb.getInt32Ty(), in_task[3], add(tb, col0, j)));
        v = tb.CreateAdd(v, tb.CreateMul(z, cs));
      }
      Value *f = tb.CreateSIToFP(tb.CreateSub(v, corr), tb.getFloatTy());
      if (auto *conv = llvm::dyn_cast<llvm::Instruction>(f); conv && a.sum_bound >= 0 && a.sum_bound <= (int64_t(1) << 24))
        set_fp_range(conv,
                     {-static_cast<double>(a.sum_bound), static_cast<double>(a.sum_bound), 1.0});
      if (a.epilogue)
        f = a.epilogue->apply(tb, f, o, add(tb, col, j));
      tb.CreateStore(f, tb.CreateGEP(ot, dst, j));
    };
    // A whole panel's columns (all but the image's last panel): a loop of
    // constant trip count, which the loop vectorizer takes whole (the
    // conversion, epilogue and store in vectors); the rest one at a time.
    Value *whole = tb.CreateICmpEQ(end, tb.getInt64(nr));
    emit_if(tb, whole, [&] { for_count(tb, nr, element); });
    emit_if(tb, tb.CreateNot(whole), [&] { for_range(tb, tb.getInt64(0), end, element); });
  };
  Int8GemmArgs g{w, packed, nullptr, b.getInt64(s.O)};
  g.n = n;
  g.k = K;
  g.a_signed = true;
  g.b_signed = false;
  g.lanes = a.lanes;
  g.dot = a.dot;
  g.prefix = a.prefix;
  g.store = &store;
  g.serial = serial;
  g.a_grouped = true;
  emit_gemm_i8(b, g);
}

} // namespace

void emit_conv_i8(llvm::IRBuilder<> &outer, const ConvInt8Args &a) {
  const ConvShape &s = a.shape;
  int64_t K = s.C * s.KH * s.KW, K4 = (K + 3) / 4, Kp = K4 * 4, P = s.OH * s.OW;
  auto padded = [](int64_t p) { return (p + kConvInt8Panel - 1) / kConvInt8Panel * kConvInt8Panel; };
  int64_t Pp = padded(P), nr = 2 * static_cast<int64_t>(a.lanes);
  llvm::Type *i8 = outer.getInt8Ty(), *i32 = outer.getInt32Ty();
  Value *zp = a.zero_point ? static_cast<Value *>(outer.CreateLoad(i8, a.zero_point)) : outer.getInt8(0);
  Value *zp32 = outer.CreateZExt(a.x_signed ? outer.CreateXor(zp, outer.getInt8(0x80)) : zp, i32);
  // The rows of colsT past K: zeros once packed (0x80 for i8, flipped by
  // the packing), so that they add nothing to the columns' sums.
  llvm::Constant *k_fill = outer.getInt8(a.x_signed ? 0x80 : 0);
  std::vector<Value *> epi = a.epilogue ? a.epilogue->captures : std::vector<Value *>{};
  if (int64_t rows = conv_int8_block_rows(Kp, s.OH, s.OW)) {
    // Blocks of `rows` output rows, each a task: its byte im2col, packing
    // and GEMM (serial) while they are in L2.
    int64_t blocks = (s.OH + rows - 1) / rows, Pt = padded(rows * s.OW);
    int64_t block_bytes = 2 * Kp * Pt + Pt * 4;
    std::vector<Value *> fields = {a.x, a.w, a.out, a.scratch, zp, zp32};
    fields.insert(fields.end(), epi.begin(), epi.end());
    emit_tasks(outer, a.prefix, "conv_i8", fields, blocks, s.O * K * P, nullptr,
               [&](llvm::IRBuilder<> &b, const std::vector<Value *> &f, Value *t) {
                 Value *base = b.CreateGEP(b.getInt8Ty(), f[3], mul(b, t, block_bytes));
                 Value *cols = base, *packed = b.CreateGEP(b.getInt8Ty(), base, b.getInt64(Kp * Pt));
                 Value *col_sums = a.col_sums ? b.CreateGEP(b.getInt8Ty(), base, b.getInt64(2 * Kp * Pt))
                                              : llvm::ConstantPointerNull::get(b.getPtrTy());
                 Value *oy0 = mul(b, t, rows);
                 Value *oy1 = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, add(b, oy0, rows), b.getInt64(s.OH));
                 if (Kp > K)
                   b.CreateMemSet(b.CreateGEP(b.getInt8Ty(), cols, b.getInt64(K * Pt)), k_fill,
                                  b.getInt64((Kp - K) * Pt), llvm::Align(1));
                 emit_im2col_units(b, s, f[0], cols, b.getInt64(0), b.getInt64(s.C * s.KH), oy0, oy1, b.getInt64(Pt),
                                   b.getInt8Ty(), f[4]);
                 emit_pack_i8(b, a, cols, packed, col_sums, b.getInt64(0), b.getInt64(Pt / nr), Pt, K4);
                 emit_gemm_store(b, a, f[1], packed, col_sums, f[2], f[5], rows * s.OW, mul(b, oy0, s.OW),
                                 mul(b, b.CreateSub(oy1, oy0), s.OW),
                                 std::vector<Value *>(f.begin() + 6, f.end()), true);
               });
    return;
  }
  Value *cols = a.scratch, *packed = outer.CreateGEP(i8, a.scratch, outer.getInt64(Kp * Pp));
  Value *col_sums = a.col_sums ? outer.CreateGEP(i8, a.scratch, outer.getInt64(2 * Kp * Pp))
                               : llvm::ConstantPointerNull::get(outer.getPtrTy());
  // 1. The byte im2col (colsT [Kp, Pp], the padding the zero point; columns
  // past P are not read back). A colsT that fits L2 (kConvInt8BlockBytes)
  // is copied and packed on one thread: split between two cores, each
  // half is ~10 us of work, and on cores that are far apart (session 31's
  // slow VM state) the two-task jobs ran 3x slower than one (a QDQ
  // ResNet-18's im2col 13 -> 45 us, packing 2 -> 8 us: the data crosses
  // to the other core and back for the GEMM).
  const bool one_task = Kp * Pp <= kConvInt8BlockBytes;
  if (Kp > K)
    outer.CreateMemSet(outer.CreateGEP(i8, cols, outer.getInt64(K * Pp)), k_fill, outer.getInt64((Kp - K) * Pp),
                       llvm::Align(1));
  {
    const std::array<int64_t, 2> split =
        one_task ? std::array<int64_t, 2>{1, s.C * s.KH} : conv_task_split(s.C * s.KH, s.KW * P / 4);
    const int64_t per = split[1];
    emit_tasks(outer, a.prefix, "im2col_i8", {a.x, cols, zp}, split[0], s.C * s.KH * s.KW * P / 4, nullptr,
               [&](llvm::IRBuilder<> &b, const std::vector<Value *> &f, Value *t) {
                 Value *u0 = mul(b, t, per);
                 Value *u1 = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, add(b, u0, per), b.getInt64(s.C * s.KH));
                 emit_im2col_units(b, s, f[0], f[1], u0, u1, b.getInt64(0), b.getInt64(s.OH), b.getInt64(Pp),
                                   b.getInt8Ty(), f[2]);
               });
  }
  // 2. colsT as the integer GEMM's B.
  {
    int64_t panels = Pp / nr;
    const std::array<int64_t, 2> split =
        one_task ? std::array<int64_t, 2>{1, panels} : conv_task_split(panels, K4 * nr * 4);
    const int64_t per = split[1];
    emit_tasks(outer, a.prefix, "pack_i8", {cols, packed, col_sums}, split[0], panels * K4 * nr * 4, nullptr,
               [&](llvm::IRBuilder<> &b, const std::vector<Value *> &f, Value *t) {
                 Value *p0 = mul(b, t, per);
                 Value *p1 = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, add(b, p0, per), b.getInt64(panels));
                 emit_pack_i8(b, a, f[0], f[1], f[2], p0, p1, Pp, K4);
               });
  }
  // 3. The GEMM, requantized as its tiles are finished.
  emit_gemm_store(outer, a, a.w, packed, col_sums, a.out, zp32, P, outer.getInt64(0), outer.getInt64(P), epi, false);
}

} // namespace maxc::codegen

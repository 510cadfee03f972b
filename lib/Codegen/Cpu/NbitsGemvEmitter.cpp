// The weight-only quantized matmul (Cpu/NbitsGemvEmitter.h).
#include "Cpu/NbitsGemvEmitter.h"
#include "EntryPointUtil.h"

#include "Cpu/Runtime.h"
#include "maxc/Ops/MatmulNbits.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <vector>

namespace maxc::codegen {

using llvm::Value;

namespace {

constexpr int64_t kColumnsPerTask = 16;
constexpr unsigned kMaxRows = 4;             // rows of A sharing one dequantized chunk
constexpr int64_t kMaxChunk = 32;            // codes per vector step
constexpr int64_t kMaxSplitBytes = 32 << 10; // the task's stack buffer for A's rows copied (4 bits)
constexpr int64_t kZeroLanes = 16;           // blocks per vector of the zero points' share
constexpr int64_t kPanelRows = 16;           // from this many rows of A: the dequantized panel (Kernel::panel)
constexpr int64_t kPanelBytes = 64 << 10;    // the panel's stack buffer: a slice of K x 16 floats
constexpr unsigned kTileRows = 8;            // rows of A per panel tile

// The task's arguments: a, b, scales, zero points (or null), c, m.
llvm::StructType *task_args_type(llvm::LLVMContext &c) {
  auto *ptr = llvm::PointerType::getUnqual(c);
  return llvm::StructType::get(c, {ptr, ptr, ptr, ptr, ptr, llvm::Type::getInt64Ty(c)});
}

struct Kernel {
  llvm::IRBuilder<> &b;
  llvm::IRBuilder<> &entry;
  NbitsLayout l;
  bool has_zp;
  Value *a, *bq, *scales, *zp, *c_ptr, *m;
  int64_t lanes;
  int64_t chunk = std::min(l.block, kMaxChunk);
  bool split = false;                         // A's rows read from the even/odd copy (columns())
  llvm::AllocaInst *scratch_buffer = nullptr; // scratch()
  llvm::AllocaInst *sums = nullptr;           // block_sums()

  /// The task's one stack buffer (kPanelBytes, 64-byte aligned): A's rows
  /// copied (columns()) or the dequantized panel (panel()), never both in
  /// one task, so they share it.
  llvm::AllocaInst *scratch() {
    if (!scratch_buffer) {
      scratch_buffer = entry.CreateAlloca(llvm::ArrayType::get(b.getInt8Ty(), static_cast<uint64_t>(kPanelBytes)));
      scratch_buffer->setAlignment(llvm::Align(64));
    }
    return scratch_buffer;
  }
  llvm::LLVMContext &ctx = b.getContext();

  llvm::FixedVectorType *fvec() { return llvm::FixedVectorType::get(b.getFloatTy(), static_cast<unsigned>(chunk)); }
  Value *i64(int64_t v) { return b.getInt64(v); }
  /// The accumulators' width: one register (a chunk is summed into it piece by piece).
  int64_t piece() const { return std::min<int64_t>(chunk, lanes); }
  llvm::FixedVectorType *lvec() { return llvm::FixedVectorType::get(b.getFloatTy(), static_cast<unsigned>(piece())); }
  /// Piece `p` of a chunk-wide vector.
  Value *part(Value *v, int64_t p) {
    if (piece() == chunk)
      return v;
    std::vector<int> lanes_of(static_cast<size_t>(piece()));
    for (int64_t i = 0; i < piece(); ++i)
      lanes_of[i] = static_cast<int>(p * piece() + i);
    return b.CreateShuffleVector(v, lanes_of);
  }

  /// Chunk `ci` of block `blk` of column n: its codes as f32.
  Value *codes_f32(Value *col_bytes, Value *blk, Value *ci) {
    int64_t bytes = chunk * l.bits / 8;
    Value *at = b.CreateGEP(b.getInt8Ty(), col_bytes,
                            b.CreateAdd(b.CreateMul(blk, i64(l.blob_bytes())), b.CreateMul(ci, i64(bytes))));
    auto *bvec = llvm::FixedVectorType::get(b.getInt8Ty(), static_cast<unsigned>(bytes));
    Value *raw = b.CreateAlignedLoad(bvec, at, llvm::Align(1));
    Value *codes = raw;
    if (l.bits == 4) {
      Value *lo = b.CreateAnd(raw, llvm::ConstantInt::get(bvec, 15));
      Value *hi = b.CreateLShr(raw, llvm::ConstantInt::get(bvec, 4));
      std::vector<int> mix(static_cast<size_t>(chunk));
      for (int64_t i = 0; i < chunk; ++i)
        mix[i] = static_cast<int>(split ? i : i % 2 == 0 ? i / 2 : bytes + i / 2);
      codes = b.CreateShuffleVector(lo, hi, mix);
    }
    return b.CreateUIToFP(codes, fvec());
  }

  /// A mask of the first `valid` of `n` lanes.
  llvm::Constant *first_lanes(int64_t n, int64_t valid) {
    std::vector<llvm::Constant *> bits;
    for (int64_t i = 0; i < n; ++i)
      bits.push_back(b.getInt1(i < valid));
    return llvm::ConstantVector::get(bits);
  }

  /// A's block sums, sums[r * padded_blocks() + blk] = sum of row r's
  /// elements in block blk (zeros past the last block), for the zero
  /// points' share of each column (group()).
  int64_t padded_blocks() const { return (l.blocks() + kZeroLanes - 1) / kZeroLanes * kZeroLanes; }
  void block_sums(const std::vector<Value *> &arow) {
    if (!sums) {
      sums =
          entry.CreateAlloca(llvm::ArrayType::get(b.getFloatTy(), static_cast<uint64_t>(kMaxRows * padded_blocks())));
      sums->setAlignment(llvm::Align(64));
    }
    int64_t full = l.k / l.block, chunks = l.block / chunk;
    for (unsigned r = 0; r < arow.size(); ++r) {
      Value *row_sums = b.CreateGEP(b.getFloatTy(), sums, i64(r * padded_blocks()));
      auto one = [&](Value *blk, int64_t valid) { // valid: A's elements in the block (< block: the tail)
        Value *v = llvm::Constant::getNullValue(fvec());
        Value *k0 = b.CreateMul(blk, i64(l.block));
        for (int64_t ci = 0; ci < chunks && ci * chunk < valid; ++ci) {
          Value *at = b.CreateGEP(b.getFloatTy(), arow[r], b.CreateAdd(k0, i64(ci * chunk)));
          Value *x = valid - ci * chunk < chunk
                         ? static_cast<Value *>(b.CreateMaskedLoad(fvec(), at, llvm::Align(4),
                                                                   first_lanes(chunk, valid - ci * chunk),
                                                                   llvm::Constant::getNullValue(fvec())))
                         : static_cast<Value *>(b.CreateAlignedLoad(fvec(), at, llvm::Align(4)));
          v = b.CreateFAdd(v, x);
        }
        Value *sum = b.CreateFAddReduce(llvm::ConstantFP::get(b.getFloatTy(), 0.0), v);
        llvm::cast<llvm::Instruction>(sum)->setHasAllowReassoc(true);
        b.CreateAlignedStore(sum, b.CreateGEP(b.getFloatTy(), row_sums, blk), llvm::Align(4));
      };
      emit_counted_loop(
          b, i64(full), [&](Value *blk) { one(blk, l.block); }, "nbits.sums.");
      if (full < l.blocks())
        one(i64(full), l.k - full * l.block);
      for (int64_t blk = l.blocks(); blk < padded_blocks(); ++blk)
        b.CreateAlignedStore(llvm::ConstantFP::get(b.getFloatTy(), 0.0),
                             b.CreateGEP(b.getFloatTy(), row_sums, i64(blk)), llvm::Align(4));
    }
  }

  /// Column `col`'s zero points times its scales, z_b * s_b, for blocks
  /// [g0, g0 + kZeroLanes) (lanes past `valid` zero).
  Value *zero_times_scale(Value *col, Value *g0, int64_t valid) {
    auto *zvec = llvm::FixedVectorType::get(b.getFloatTy(), static_cast<unsigned>(kZeroLanes));
    Value *at = b.CreateGEP(b.getFloatTy(), scales, b.CreateAdd(b.CreateMul(col, i64(l.blocks())), g0));
    Value *s = valid < kZeroLanes
                   ? static_cast<Value *>(b.CreateMaskedLoad(zvec, at, llvm::Align(4), first_lanes(kZeroLanes, valid),
                                                             llvm::Constant::getNullValue(zvec)))
                   : static_cast<Value *>(b.CreateAlignedLoad(zvec, at, llvm::Align(4)));
    Value *z;
    if (!has_zp) {
      z = llvm::ConstantFP::get(zvec, static_cast<double>(l.default_zero_point()));
    } else {
      int64_t bytes = kZeroLanes * l.bits / 8, valid_bytes = (valid * l.bits + 7) / 8;
      auto *bvec = llvm::FixedVectorType::get(b.getInt8Ty(), static_cast<unsigned>(bytes));
      Value *row = b.CreateGEP(b.getInt8Ty(), zp, b.CreateMul(col, i64(l.zp_row_bytes())));
      Value *zat = b.CreateGEP(b.getInt8Ty(), row, l.bits == 8 ? g0 : b.CreateLShr(g0, 1));
      Value *raw =
          valid_bytes < bytes
              ? static_cast<Value *>(b.CreateMaskedLoad(bvec, zat, llvm::Align(1), first_lanes(bytes, valid_bytes),
                                                        llvm::Constant::getNullValue(bvec)))
              : static_cast<Value *>(b.CreateAlignedLoad(bvec, zat, llvm::Align(1)));
      if (l.bits == 4) { // block 2i in byte i's low nibble, 2i + 1 in its high one
        Value *lo = b.CreateAnd(raw, llvm::ConstantInt::get(bvec, 15));
        Value *hi = b.CreateLShr(raw, llvm::ConstantInt::get(bvec, 4));
        std::vector<int> mix(static_cast<size_t>(kZeroLanes));
        for (int64_t i = 0; i < kZeroLanes; ++i)
          mix[i] = static_cast<int>(i % 2 == 0 ? i / 2 : bytes + i / 2);
        raw = b.CreateShuffleVector(lo, hi, mix);
      }
      z = b.CreateUIToFP(raw, zvec);
    }
    return b.CreateFMul(z, s);
  }

  /// Rows [row0, row0 + rows) of C's columns [n0, n1): two columns at a
  /// time (independent FMA chains sharing A's loads) where the accumulators
  /// fit in eight vector registers, else one. 4 bits, where the rows fit in
  /// kMaxSplitBytes: A's rows copied first with each chunk's even elements
  /// ahead of its odd ones (zeros past K), so that the low and high nibbles
  /// need no interleaving (`split`).
  void columns(Value *row0, unsigned rows, Value *n0, Value *n1) {
    std::vector<Value *> arow(rows);
    for (unsigned r = 0; r < rows; ++r)
      arow[r] = b.CreateGEP(b.getFloatTy(), a, b.CreateMul(b.CreateAdd(row0, i64(r)), i64(l.k)));
    block_sums(arow);
    int64_t padded = l.blocks() * l.block;
    int64_t fit = std::min<int64_t>(kMaxRows, kMaxSplitBytes / (padded * 4)); // rows the buffer holds
    split = l.bits == 4 && static_cast<int64_t>(rows) <= fit;
    if (split) {
      llvm::AllocaInst *buffer = scratch(); // one buffer for every row count's code
      int64_t half = chunk / 2;
      std::vector<int> even_odd(static_cast<size_t>(chunk));
      for (int64_t p = 0; p < chunk; ++p)
        even_odd[p] = static_cast<int>(p < half ? 2 * p : 2 * (p - half) + 1);
      for (unsigned r = 0; r < rows; ++r) {
        Value *dst = b.CreateGEP(b.getFloatTy(), buffer, i64(r * padded));
        auto copy = [&](Value *k0, int64_t valid) {
          Value *at = b.CreateGEP(b.getFloatTy(), arow[r], k0);
          Value *x;
          if (valid < chunk) {
            std::vector<llvm::Constant *> bits;
            for (int64_t i = 0; i < chunk; ++i)
              bits.push_back(b.getInt1(i < valid));
            x = b.CreateMaskedLoad(fvec(), at, llvm::Align(4), llvm::ConstantVector::get(bits),
                                   llvm::Constant::getNullValue(fvec()));
          } else {
            x = b.CreateAlignedLoad(fvec(), at, llvm::Align(4));
          }
          b.CreateAlignedStore(b.CreateShuffleVector(x, even_odd), b.CreateGEP(b.getFloatTy(), dst, k0),
                               llvm::Align(4));
        };
        int64_t whole = l.k / chunk;
        emit_counted_loop(
            b, i64(whole), [&](Value *i) { copy(b.CreateMul(i, i64(chunk)), chunk); }, "nbits.split.");
        for (int64_t k0 = whole * chunk; k0 < padded; k0 += chunk) // the tail and the padding: zeros past K
          copy(i64(k0), std::max<int64_t>(0, l.k - k0));
        arow[r] = dst;
      }
    }
    int64_t registers = lanes >= 16 ? 32 : 16; // an accumulator and a block's sum per row and column
    unsigned width = rows * 2 * 2 <= registers / 2 ? 2 : 1;
    Value *count = b.CreateSub(n1, n0);
    emit_counted_loop(
        b, b.CreateUDiv(count, i64(width)),
        [&](Value *j) { group(arow, b.CreateAdd(n0, b.CreateMul(j, i64(width))), width, row0); }, "nbits.col.");
    if (width == 2)
      emit_if(b, b.CreateICmpNE(b.CreateAnd(count, i64(1)), i64(0)),
              [&] { group(arow, b.CreateSub(n1, i64(1)), 1, row0); });
  }

  /// Blocks of K per panel slice: as many as fit kPanelBytes (at least one).
  int64_t slice_blocks() const {
    return std::clamp<int64_t>(kPanelBytes / (l.block * kColumnsPerTask * 4), 1, l.blocks());
  }
  /// Whether a slice's buffer stays near kPanelBytes (a block of 1024
  /// codes or fewer): the panel path exists.
  bool panel_fits() const { return slice_blocks() * l.block * kColumnsPerTask * 4 <= kPanelBytes; }

  /// Many rows (prefill): the task's columns [n0, n1) dequantized once into
  /// a [K][16] f32 panel, a column per lane (each block's codes gathered
  /// for the 16 columns a 32-bit word at a time), then tiles of kTileRows
  /// rows x 16 columns, one broadcast FMA per row and k: the codes are
  /// unpacked once per task instead of once per four rows. K goes in
  /// slices of slice_blocks() blocks (the buffer at most 64 KB of the
  /// task's stack, like the f32 GEMM's packed panel): a tile's sums are
  /// stored after each slice and read back for the next.
  void panel(Value *n0, Value *n1) {
    const unsigned w = static_cast<unsigned>(kColumnsPerTask);
    auto *pv = llvm::FixedVectorType::get(b.getFloatTy(), w);
    int64_t slice = slice_blocks() * l.block;   // codes of K per slice
    llvm::AllocaInst *panel_buffer = scratch(); // slice * 16 floats: at most kPanelBytes
    std::vector<llvm::Constant *> iota_c;
    for (unsigned i = 0; i < w; ++i)
      iota_c.push_back(b.getInt64(i));
    Value *iota = llvm::ConstantVector::get(iota_c);
    Value *cols = b.CreateAdd(b.CreateVectorSplat(w, n0), iota);
    Value *real = b.CreateICmpULT(cols, b.CreateVectorSplat(w, n1));
    cols = b.CreateSelect(real, cols, b.CreateVectorSplat(w, n0)); // lanes past n1 read column n0, never stored
    auto splat = [&](int64_t v) { return b.CreateVectorSplat(w, i64(v)); };
    int64_t per_word = 32 / l.bits, words = l.blob_bytes() / 4;
    int64_t slices = (l.blocks() + slice_blocks() - 1) / slice_blocks();
    emit_counted_loop(
        b, i64(slices),
        [&](Value *sl) {
          Value *b0 = b.CreateMul(sl, i64(slice_blocks())); // the slice's first block
          Value *nbs = b.CreateSub(
              b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b.CreateAdd(b0, i64(slice_blocks())), i64(l.blocks())),
              b0);
          Value *k0 = b.CreateMul(b0, i64(l.block)); // the slice's first k
          Value *k1 = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b.CreateAdd(k0, i64(slice)), i64(l.k));
          emit_counted_loop(
              b, nbs,
              [&](Value *sb) {
                Value *blk = b.CreateAdd(b0, sb);
                Value *s = b.CreateMaskedGather(
                    pv,
                    b.CreateGEP(b.getFloatTy(), scales,
                                b.CreateAdd(b.CreateMul(cols, splat(l.blocks())), b.CreateVectorSplat(w, blk))),
                    llvm::Align(4), real, llvm::Constant::getNullValue(pv));
                Value *z;
                if (!has_zp) {
                  z = llvm::ConstantFP::get(pv, static_cast<double>(l.default_zero_point()));
                } else {
                  Value *byte_at = b.CreateAdd(b.CreateMul(cols, splat(l.zp_row_bytes())),
                                               b.CreateVectorSplat(w, l.bits == 8 ? blk : b.CreateLShr(blk, 1)));
                  auto *bv = llvm::FixedVectorType::get(b.getInt8Ty(), w);
                  Value *zb = b.CreateMaskedGather(bv, b.CreateGEP(b.getInt8Ty(), zp, byte_at), llvm::Align(1), real,
                                                   llvm::Constant::getNullValue(bv));
                  if (l.bits == 4)
                    zb = b.CreateAnd(
                        b.CreateLShr(zb, b.CreateVectorSplat(
                                             w, b.CreateTrunc(b.CreateShl(b.CreateAnd(blk, 1), 2), b.getInt8Ty()))),
                        llvm::ConstantInt::get(bv, 15));
                  z = b.CreateUIToFP(zb, pv);
                }
                Value *bias = b.CreateFNeg(b.CreateFMul(z, s));
                auto *wv = llvm::FixedVectorType::get(b.getInt32Ty(), w);
                Value *base = b.CreateAdd(b.CreateMul(cols, splat(l.row_bytes())),
                                          b.CreateVectorSplat(w, b.CreateMul(blk, i64(l.blob_bytes()))));
                for (int64_t g = 0; g < words; ++g) {
                  Value *word =
                      b.CreateMaskedGather(wv, b.CreateGEP(b.getInt8Ty(), bq, b.CreateAdd(base, splat(4 * g))),
                                           llvm::Align(1), real, llvm::Constant::getNullValue(wv));
                  for (int64_t e = 0; e < per_word; ++e) {
                    Value *code =
                        b.CreateAnd(b.CreateLShr(word, llvm::ConstantInt::get(wv, static_cast<uint64_t>(e * l.bits))),
                                    llvm::ConstantInt::get(wv, static_cast<uint64_t>((1 << l.bits) - 1)));
                    Value *wk = b.CreateIntrinsic(llvm::Intrinsic::fma, {pv}, {b.CreateUIToFP(code, pv), s, bias});
                    Value *k = b.CreateAdd(b.CreateMul(sb, i64(l.block)), i64(g * per_word + e)); // within the slice
                    b.CreateAlignedStore(wk, b.CreateGEP(b.getFloatTy(), panel_buffer, b.CreateMul(k, i64(w))),
                                         llvm::Align(64));
                  }
                }
              },
              "nbits.panel.");
          // The first slice starts the sums at zero, the others at C's.
          Value *carry = b.CreateAnd(real, b.CreateVectorSplat(w, b.CreateICmpNE(sl, i64(0))));
          auto tile = [&](Value *r0, unsigned rows) {
            std::vector<llvm::AllocaInst *> acc(rows);
            std::vector<Value *> arow(rows), crow(rows);
            for (unsigned r = 0; r < rows; ++r) {
              acc[r] = entry.CreateAlloca(pv);
              arow[r] = b.CreateGEP(b.getFloatTy(), a, b.CreateMul(b.CreateAdd(r0, i64(r)), i64(l.k)));
              crow[r] =
                  b.CreateGEP(b.getFloatTy(), c_ptr, b.CreateAdd(b.CreateMul(b.CreateAdd(r0, i64(r)), i64(l.n)), n0));
              b.CreateStore(b.CreateMaskedLoad(pv, crow[r], llvm::Align(4), carry, llvm::Constant::getNullValue(pv)),
                            acc[r]);
            }
            emit_counted_loop(
                b, b.CreateSub(k1, k0),
                [&](Value *kk) {
                  Value *wrow = b.CreateAlignedLoad(
                      pv, b.CreateGEP(b.getFloatTy(), panel_buffer, b.CreateMul(kk, i64(w))), llvm::Align(64));
                  Value *k = b.CreateAdd(k0, kk);
                  for (unsigned r = 0; r < rows; ++r) {
                    Value *x =
                        b.CreateVectorSplat(w, b.CreateLoad(b.getFloatTy(), b.CreateGEP(b.getFloatTy(), arow[r], k)));
                    b.CreateStore(b.CreateIntrinsic(llvm::Intrinsic::fma, {pv}, {x, wrow, b.CreateLoad(pv, acc[r])}),
                                  acc[r]);
                  }
                },
                "nbits.tile.");
            for (unsigned r = 0; r < rows; ++r)
              b.CreateMaskedStore(b.CreateLoad(pv, acc[r]), crow[r], llvm::Align(4), real);
          };
          Value *tiles = b.CreateUDiv(m, i64(kTileRows));
          emit_counted_loop(
              b, tiles, [&](Value *t) { tile(b.CreateMul(t, i64(kTileRows)), kTileRows); }, "nbits.tiles.");
          Value *rest = b.CreateMul(tiles, i64(kTileRows));
          emit_counted_loop(
              b, b.CreateSub(m, rest), [&](Value *r) { tile(b.CreateAdd(rest, r), 1); }, "nbits.rest.");
        },
        "nbits.slices.");
  }

  /// Columns [n, n + width) of the rows at `arow`. Per block, the codes'
  /// products with A summed (t = sum of code * a over the block's chunks)
  /// and scaled into the accumulator (acc += s * t); the zero points' share,
  /// sum over blocks of z_b * s_b * (A's block sum), once per column after
  /// the last block, kZeroLanes blocks to a vector. C = acc - that share.
  void group(const std::vector<Value *> &arow, Value *n, unsigned width, Value *row0) {
    unsigned rows = static_cast<unsigned>(arow.size());
    auto accumulators = [&] {
      std::vector<std::vector<llvm::AllocaInst *>> v(width, std::vector<llvm::AllocaInst *>(rows));
      for (auto &col : v)
        for (auto &s : col)
          s = entry.CreateAlloca(lvec());
      return v;
    };
    auto zero = [&](const std::vector<std::vector<llvm::AllocaInst *>> &v) {
      for (auto &col : v)
        for (auto *s : col)
          b.CreateStore(llvm::Constant::getNullValue(s->getAllocatedType()), s);
    };
    auto acc = accumulators(), t = accumulators();
    zero(acc);
    int64_t nb = l.blocks(), full = l.k / l.block, chunks = l.block / chunk;
    std::vector<Value *> cols(width), col_bytes(width);
    for (unsigned c = 0; c < width; ++c) {
      cols[c] = b.CreateAdd(n, i64(c));
      col_bytes[c] = b.CreateGEP(b.getInt8Ty(), bq, b.CreateMul(cols[c], i64(l.row_bytes())));
    }
    // One block: the codes' products with A, then scaled into acc.
    auto block = [&](Value *blk, bool tail) {
      zero(t);
      auto step = [&](Value *ci, int64_t valid) { // valid: A's elements in the chunk (< chunk: masked)
        std::vector<Value *> w(width);
        for (unsigned c = 0; c < width; ++c)
          w[c] = codes_f32(col_bytes[c], blk, ci);
        Value *k0 = b.CreateAdd(b.CreateMul(blk, i64(l.block)), b.CreateMul(ci, i64(chunk)));
        for (unsigned r = 0; r < rows; ++r) {
          Value *at = b.CreateGEP(b.getFloatTy(), arow[r], k0);
          Value *x =
              valid < chunk && !split
                  ? static_cast<Value *>(b.CreateMaskedLoad(fvec(), at, llvm::Align(4), first_lanes(chunk, valid),
                                                            llvm::Constant::getNullValue(fvec())))
                  : static_cast<Value *>(b.CreateAlignedLoad(fvec(), at, llvm::Align(4)));
          for (unsigned c = 0; c < width; ++c) { // the chunk's register-wide pieces into one register
            Value *sum = b.CreateLoad(lvec(), t[c][r]);
            for (int64_t p = 0; p < chunk / piece(); ++p)
              sum = b.CreateIntrinsic(llvm::Intrinsic::fma, {lvec()}, {part(w[c], p), part(x, p), sum});
            b.CreateStore(sum, t[c][r]);
          }
        }
      };
      if (!tail) {
        emit_counted_loop(
            b, i64(chunks), [&](Value *ci) { step(ci, chunk); }, "nbits.chunk.");
      } else {
        int64_t left = l.k - full * l.block; // the tail block's codes within K
        for (int64_t ci = 0; ci * chunk < left; ++ci)
          step(i64(ci), std::min(chunk, left - ci * chunk));
      }
      for (unsigned c = 0; c < width; ++c) {
        Value *s = b.CreateAlignedLoad(
            b.getFloatTy(), b.CreateGEP(b.getFloatTy(), scales, b.CreateAdd(b.CreateMul(cols[c], i64(nb)), blk)),
            llvm::Align(4));
        Value *splat = b.CreateVectorSplat(static_cast<unsigned>(piece()), s);
        for (unsigned r = 0; r < rows; ++r)
          b.CreateStore(b.CreateIntrinsic(llvm::Intrinsic::fma, {lvec()},
                                          {b.CreateLoad(lvec(), t[c][r]), splat, b.CreateLoad(lvec(), acc[c][r])}),
                        acc[c][r]);
      }
    };
    emit_counted_loop(
        b, i64(full), [&](Value *blk) { block(blk, false); }, "nbits.block.");
    if (full < nb)
      block(i64(full), true);
    // The zero points' share.
    auto *zvec = llvm::FixedVectorType::get(b.getFloatTy(), static_cast<unsigned>(kZeroLanes));
    std::vector<std::vector<llvm::AllocaInst *>> zacc(width, std::vector<llvm::AllocaInst *>(rows));
    for (auto &col : zacc)
      for (auto &s : col) {
        s = entry.CreateAlloca(zvec);
        b.CreateStore(llvm::Constant::getNullValue(zvec), s);
      }
    auto zero_share = [&](Value *g0, int64_t valid) {
      for (unsigned c = 0; c < width; ++c) {
        Value *zs = zero_times_scale(cols[c], g0, valid);
        for (unsigned r = 0; r < rows; ++r) {
          Value *sum = b.CreateAlignedLoad(
              zvec, b.CreateGEP(b.getFloatTy(), sums, b.CreateAdd(i64(r * padded_blocks()), g0)), llvm::Align(4));
          b.CreateStore(b.CreateIntrinsic(llvm::Intrinsic::fma, {zvec}, {zs, sum, b.CreateLoad(zvec, zacc[c][r])}),
                        zacc[c][r]);
        }
      }
    };
    emit_counted_loop(
        b, i64(nb / kZeroLanes), [&](Value *g) { zero_share(b.CreateMul(g, i64(kZeroLanes)), kZeroLanes); },
        "nbits.zero.");
    if (nb % kZeroLanes)
      zero_share(i64(nb / kZeroLanes * kZeroLanes), nb % kZeroLanes);
    auto reduce = [&](llvm::AllocaInst *v) {
      Value *sum =
          b.CreateFAddReduce(llvm::ConstantFP::get(b.getFloatTy(), 0.0), b.CreateLoad(v->getAllocatedType(), v));
      llvm::cast<llvm::Instruction>(sum)->setHasAllowReassoc(true);
      return sum;
    };
    for (unsigned c = 0; c < width; ++c)
      for (unsigned r = 0; r < rows; ++r) {
        Value *out =
            b.CreateGEP(b.getFloatTy(), c_ptr, b.CreateAdd(b.CreateMul(b.CreateAdd(row0, i64(r)), i64(l.n)), cols[c]));
        b.CreateAlignedStore(b.CreateFSub(reduce(acc[c][r]), reduce(zacc[c][r])), out, llvm::Align(4));
      }
  }
};

// void <prefix>.nbits.<K>.<N>.<bits>.<block>.<zp>(ptr args, i64 t): every
// row of columns [t * kColumnsPerTask, ...).
llvm::Function *task_function(llvm::Module &m, const NbitsGemvArgs &g) {
  bool has_zp = g.zero_points != nullptr;
  std::string name = g.prefix + ".nbits." + std::to_string(g.k) + "." + std::to_string(g.n) + "." +
                     std::to_string(g.bits) + "." + std::to_string(g.block) + (has_zp ? ".z" : ".s");
  if (llvm::Function *f = m.getFunction(name))
    return f;
  llvm::LLVMContext &c = m.getContext();
  llvm::IRBuilder<> entry(c), b(c);
  llvm::Function *fn = create_task_function(m, name, entry, b);
  llvm::StructType *st = task_args_type(c);
  auto field = [&](unsigned i, llvm::Type *t) { return task_arg(entry, st, fn->getArg(0), i, t); };
  Value *a = field(0, b.getPtrTy()), *bq = field(1, b.getPtrTy()), *sc = field(2, b.getPtrTy()),
        *zp = field(3, b.getPtrTy()), *cp = field(4, b.getPtrTy()), *rows = field(5, b.getInt64Ty());
  Kernel k{b, entry, NbitsLayout{g.k, g.n, g.bits, g.block}, has_zp, a, bq, sc, zp, cp, rows, g.lanes};
  Value *n0 = b.CreateMul(fn->getArg(1), b.getInt64(kColumnsPerTask));
  Value *n1 = b.CreateAdd(n0, b.getInt64(kColumnsPerTask));
  n1 = b.CreateSelect(b.CreateICmpSLT(n1, b.getInt64(g.n)), n1, b.getInt64(g.n));
  auto gemv = [&] {
    Value *groups = b.CreateUDiv(rows, b.getInt64(kMaxRows));
    emit_counted_loop(
        b, groups, [&](Value *i) { k.columns(b.CreateMul(i, b.getInt64(kMaxRows)), kMaxRows, n0, n1); }, "nbits.rows.");
    Value *rest = b.CreateMul(groups, b.getInt64(kMaxRows)), *left = b.CreateSub(rows, rest);
    for (unsigned r = 1; r < kMaxRows; ++r)
      emit_if(b, b.CreateICmpEQ(left, b.getInt64(r)), [&] { k.columns(rest, r, n0, n1); });
  };
  if (k.panel_fits()) {
    Value *many = b.CreateICmpSGE(rows, b.getInt64(kPanelRows));
    emit_if(b, many, [&] { k.panel(n0, n1); });
    emit_if(b, b.CreateNot(many), gemv);
  } else {
    gemv();
  }
  b.CreateRetVoid();
  return fn;
}

} // namespace

void emit_matmul_nbits_kernel(llvm::IRBuilder<> &b, const NbitsGemvArgs &args) {
  llvm::Function *fn = b.GetInsertBlock()->getParent();
  llvm::Module &m = *fn->getParent();
  Value *rows = b.CreateSelect(b.CreateICmpSGT(args.m, b.getInt64(0)), args.m, b.getInt64(0));
  Value *zp = args.zero_points ? args.zero_points : llvm::ConstantPointerNull::get(b.getPtrTy());
  Value *task_args = emit_task_args(b, task_args_type(m.getContext()), {args.a, args.b, args.scales, zp, args.c, rows});
  int64_t tasks = (args.n + kColumnsPerTask - 1) / kColumnsPerTask;
  Value *work = b.CreateMul(rows, b.getInt64(args.n * args.k));
  emit_parallel_for(b, args.prefix, task_args, b.getInt64(tasks), task_function(m, args), work);
}

} // namespace maxc::codegen

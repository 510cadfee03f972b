// Constant GEMM weights packed at compile time in the order the GEMM
// microkernel (Cpu/GemmEmitter.h) reads them: B[K, N] as column panels of
// NR = 2 * lanes floats, panel p (columns [p * NR, p * NR + NR)) at
// p * K * NR, its row k at + k * NR, the last panel padded with zeros past N.
// The GEMM then reads each K block of a panel as one contiguous run instead
// of packing it at run time (or reading B's rows in place).
//
// A weight is packed in place of its original bytes, so only where nothing
// else reads it: a constant whose every use is the B operand of a GEMM
// (matmul_uses_gemm, B [K, N] f32, static) or an argument of a call whose
// parameter is packed; a subgraph parameter that every call binds to such a
// constant (Transforms/CallSites.h: constant_bound_inputs) and whose every use is
// such a B operand. Call sites then pass the packed copy; the subgraph stays
// one function, and each instance's weights are stored once.
//
// The integer GEMM's B (an 8-bit constant [K, N] widened by a cast into an
// i32 matmul: matmul_uses_int8_gemm) is packed likewise, in bytes: panel p
// of NR columns at p * K4 * NR * 4 (K4 = ceil(K / 4)), its group of four
// rows g at + g * NR * 4, column c's four bytes (rows 4g..4g+3) at + c * 4,
// zeros past K and N (the operand of one vpdpbusd per 16 or 8 columns);
// after the last panel, the i32 column sums sum_k B[k, n] (as B's dtype,
// zeros past N) that correct a flipped A (Cpu/GemmEmitter.h: emit_gemm_i8).
//
// 16-bit panels: an f32 GEMM weight (a constant, a transposed-GEMM conv's
// weight, or a subgraph parameter every call binds to such constants) whose
// every value is exactly an f16 (or a bf16) — an f16/bf16 model's weights,
// which the precision policy widened (Transforms/PromotePrecision.h) — is
// packed in that type, the same layout in 2-byte elements (PackedWeights::
// narrow), and widened as the microkernel loads it (GemmArgs::b_dtype): half
// the weight bytes and memory traffic, and the same bits as f32 panels. f16
// where the target widens it in one instruction (cpu_converts_f16), else
// bf16 where exact; a parameter is 16-bit only where every call's constant
// is, in the same type.
#pragma once

#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Codegen/WeightsSection.h"
#include "maxc/IR/Graph.h"
#include "maxc/IR/HostTensor.h"

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace maxc::codegen {

struct PackedWeights {
  int64_t nr = 0; // panel width in floats (2 * lanes)
  std::set<std::pair<const Graph *, std::string>> constants; // (graph, constant name)
  std::set<std::pair<const Graph *, size_t>> inputs;         // (subgraph, input index)
  // Of `constants`: integer convs' weights (conv_uses_int8_gemm), packed by
  // pack_conv_int8_weight.
  std::set<std::pair<const Graph *, std::string>> conv_int8;
  // Of `constants`: the weights W [O, C, KH, KW] of convs run as colsᵀ × Wᵀ
  // (conv_uses_transposed_gemm), packed as the f32 GEMM's B = Wᵀ [K, O].
  std::set<std::pair<const Graph *, std::string>> conv_transposed;
  // Of `constants` and `inputs`: f32 weights packed in 16 bits (f16 or
  // bf16; see the header comment); the rest of the f32 ones stay f32.
  std::map<std::pair<const Graph *, std::string>, DType> narrow;
  std::map<std::pair<const Graph *, size_t>, DType> narrow_inputs;

  bool packed_constant(const Graph &g, const std::string &name) const { return constants.count({&g, name}) != 0; }
  /// Whether value `v` of `g` (a constant's result or a subgraph input) is packed.
  bool packed_value(const Graph &g, ValueId v) const;
  /// The element type of a packed f32 weight's panels (value `v` of `g`, or
  /// the constant `name`): f32, f16 or bf16.
  DType packed_dtype(const Graph &g, ValueId v) const;
  DType constant_dtype(const Graph &g, const std::string &name) const;
};

/// Which weights of `root` (decomposed, with `plans`) are packed for a
/// microkernel of `lanes` f32 lanes, and which of them in 16 bits (f16 only
/// where `f16` — the target's cpu_converts_f16).
PackedWeights plan_packed_weights(const Graph &root, const LoweringPlans &plans, unsigned lanes, bool f16);

/// The 16-bit type that holds every value of the f32 `t` exactly: f16 (when
/// `f16`), else bf16, else f32. NaNs hold in neither.
DType exact_narrow_type(const HostTensor &t, bool f16);

/// B [K, N] (f32) in panel order for panels of `nr` floats:
/// ceil(N / nr) * nr * K floats.
std::vector<float> pack_gemm_panels(const HostTensor &b, int64_t nr);
/// The same panels as the bits of `dtype` (f16 or bf16; every value exact:
/// exact_narrow_type).
std::vector<uint16_t> narrow_panels(const std::vector<float> &panels, DType dtype);

/// A conv weight W [O, C, KH, KW] (f32) as the packed B = Wᵀ [K, O]
/// (K = C * KH * KW) of a transposed-GEMM conv (PackedWeights::conv_transposed).
std::vector<float> pack_conv_transposed_weight(const HostTensor &w, int64_t nr);

/// B [K, N] (u8 or i8) in the integer GEMM's panel order, then its column
/// sums: int8_panel_bytes(K, N, nr) bytes.
std::vector<uint8_t> pack_int8_panels(const HostTensor &b, int64_t nr);
size_t int8_panel_bytes(int64_t k, int64_t n, int64_t nr);

/// An integer conv's weight W [O, C, KH, KW] (f32 integers, conv_int8_weight_ok)
/// as the integer GEMM's A [O, K] (K = C * KH * KW) in i8, row o = W[o] -
/// z[o], in groups of kConvInt8RowGroup rows (Int8GemmArgs::a_grouped):
/// byte (o, k) at ((o / 16 * K4 + k / 4) * 16 + o % 16) * 4 + k % 4 (K4 =
/// ceil(K / 4); zeros past O's last group and past K), so that one vector
/// holds four k of 16 rows and a row's four k are one i32; then (at
/// conv_int8_weight_tail) i32 S[O] = sum_k W[o, k] and i32 z[O], each z[o]
/// the offset that brings row o into [-128, 127] (0 where it is already).
/// Cpu/ConvEmitter.h: emit_conv_i8.
constexpr int64_t kConvInt8RowGroup = 16;
std::vector<uint8_t> pack_conv_int8_weight(const HostTensor &w);
size_t conv_int8_weight_bytes(int64_t o, int64_t k);
size_t conv_int8_weight_tail(int64_t o, int64_t k);
/// Whether some z[o] of pack_conv_int8_weight is not 0 (the conv then needs
/// its columns' sums).
bool conv_int8_weight_offsets(const HostTensor &w);

/// For weights_blob (WeightsSection.h): the packed bytes of packed
/// constants, made on demand while the blob is written (never all resident:
/// they would double the weights' memory during a compile).
ConstantRewrite packed_weights_rewrite(const PackedWeights &packed);

} // namespace maxc::codegen

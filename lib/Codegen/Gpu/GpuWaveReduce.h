// Wave-level reductions for the GPU kernel generator's reductions and row
// kernels (GpuKernelEmitter.cpp): after each work-item has folded its
// strided share of a row into a value in its private state, the lanes of
// each wave combine their values without LDS or barriers, in log2(width)
// exchange steps: at step `offset` (1, 2, ..., width/2) lane l reads the
// value of a lane in the other half of its aligned run of 2 * offset lanes
// and combines it with its own. Runs of `offset` lanes hold one value
// before the step (the previous steps made them uniform), so any partner
// in the other half will do, and after the last step every lane holds its
// wave's total; the waves' totals then meet in LDS (one barrier instead of
// one per tree level).
//
// Device (AMDGPU), per step (wave_reduce_steps), cheapest first:
//   offset 1, 2   DPP quad_perm [1,0,3,2], [2,3,0,1]  (v_mov_b32_dpp, lane
//                 crossbar inside a quad: no LDS hardware at all)
//   offset 4      DPP row_half_mirror (lane i of 8 reads 7 - i)
//   offset 8      DPP row_mirror      (lane i of 16 reads 15 - i)
//   offset 16     ds_swizzle_b32 bit mode, xor 16 (inside 32 lanes; the LDS
//                 crossbar without an address VGPR)
//   offset 32     ds_bpermute_b32 (lane l reads lane (addr[l] / 4) mod wave,
//                 addr = (l ^ 32) * 4; wave64 only)
// through llvm.amdgcn.update.dpp / ds.swizzle / ds.bpermute on 32-bit
// words (two per 64-bit value). DPP and ds_swizzle exist on gfx9, gfx10
// and gfx11 alike.
//
// Emulation: the same steps for all lanes of a wave at once. Each step's
// source lane comes from decoding the step's encoding as the hardware
// does (wave_step_source: the quad_perm selectors, the mirror controls,
// ds_swizzle's and/or/xor masks, ds_bpermute's byte address), every lane's
// value read before any lane writes — so a wrong control word in the
// kernel gives wrong sums on the emulator (test/unit/Codegen/
// GpuWaveReduceTest.cpp).
#pragma once

#include "Gpu/GpuKernelEmitter.h"

#include <llvm/IR/IRBuilder.h>

#include <cstdint>
#include <string>
#include <vector>

namespace maxc::codegen {

/// Lanes per wave the AMDGPU backend compiles `arch` for: 64 on gfx6-gfx9
/// (gfx9-generic included), 32 on gfx10 and later (LLVM's default wave32).
unsigned amdgpu_wave_size(const std::string &arch);

/// One exchange step of a wave reduction: how lanes read their partner.
struct WaveStep {
  enum class Kind { dpp, swizzle, bpermute } kind = Kind::dpp;
  unsigned control = 0; // dpp_ctrl; ds_swizzle's offset; bpermute: the xor of the lane
};

/// DPP controls (GCN3/RDNA ISA): quad_perm is 0x000-0x0FF.
constexpr unsigned kDppRowMirror = 0x140, kDppRowHalfMirror = 0x141;

/// The steps that reduce aligned runs of `width` lanes (a power of two,
/// at most the wave), in order (offset 1 first).
std::vector<WaveStep> wave_reduce_steps(unsigned width);

/// The lane whose value lane `lane` receives in `step` on a wave of `wave`
/// lanes, decoded from the step's encoding as the hardware reads it.
unsigned wave_step_source(const WaveStep &step, unsigned lane, unsigned wave);

/// Device: the butterfly on this work-item's value at `state` + offset
/// (waves are runs of consecutive work-items of a 1-D workgroup, so the
/// lanes of a run of `width` work-items are partners).
void emit_device_wave_reduce(llvm::IRBuilder<> &b, const WaveReduce &op, llvm::Value *state);

/// Emulation: the butterfly for the `lanes` work-items of one wave whose
/// states start at `lane_states`, `state_bytes` apart.
void emulate_wave_reduce(llvm::IRBuilder<> &b, const WaveReduce &op, llvm::Value *lane_states, uint64_t state_bytes,
                         uint64_t lanes);

} // namespace maxc::codegen

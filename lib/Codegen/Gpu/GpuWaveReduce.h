// Wave-level reductions for the GPU kernel generator's reductions and row
// kernels (GpuKernelEmitter.cpp): after each work-item has folded its
// strided share of a row into a value in its private state, the lanes of
// each wave combine their values without LDS or barriers, in a butterfly
// of log2(width) exchange steps: at step `offset` (width/2, ..., 1) lane l
// reads lane l ^ offset's value and combines it with its own. After the
// last step every lane holds its wave's total; the waves' totals then meet
// in LDS (one barrier instead of one per tree level).
//
// Device (AMDGPU): one exchange is `llvm.amdgcn.ds.bpermute` (ds_bpermute_b32:
// lane l receives the 32-bit value of lane (addr[l] / 4) mod wave, addr
// being the byte address lane l passes; two for 64-bit values), with addr
// = butterfly_address(l, offset). No LDS memory, no barrier, no readlane.
//
// Emulation: the same step for all lanes of a wave at once, implementing
// ds_bpermute's documented lane semantics (read every lane's value first,
// then lane l takes the value of lane (addr / 4) mod wave, addr computed by
// the same butterfly_address) — a wrong lane pattern in the kernel gives
// wrong sums on the emulator (test/unit/Codegen/GpuWaveReduceTest.cpp).
#pragma once

#include "Gpu/GpuKernelEmitter.h"

#include <llvm/IR/IRBuilder.h>

#include <cstdint>
#include <string>

namespace maxc::codegen {

/// Lanes per wave the AMDGPU backend compiles `arch` for: 64 on gfx6-gfx9
/// (gfx9-generic included), 32 on gfx10 and later (LLVM's default wave32).
unsigned amdgpu_wave_size(const std::string &arch);

/// The byte address lane `lane` (i32) passes to ds_bpermute in the
/// exchange step `offset`: its butterfly partner's, (lane ^ offset) * 4.
llvm::Value *butterfly_address(llvm::IRBuilder<> &b, llvm::Value *lane, unsigned offset);

/// Device: the butterfly on this work-item's value at `state` + offset
/// (waves are runs of consecutive work-items of a 1-D workgroup, so the
/// lanes of a run of `width` work-items are partners).
void emit_device_wave_reduce(llvm::IRBuilder<> &b, const WaveReduce &op, llvm::Value *state);

/// Emulation: the butterfly for the `lanes` work-items of one wave whose
/// states start at `lane_states`, `state_bytes` apart.
void emulate_wave_reduce(llvm::IRBuilder<> &b, const WaveReduce &op, llvm::Value *lane_states, uint64_t state_bytes,
                         uint64_t lanes);

} // namespace maxc::codegen

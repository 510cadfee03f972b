// The host side of a GPU model: one function per graph definition that
// launches the graph's kernels in order and calls its subgraphs (deduped
// blocks stay shared: one launch sequence per unique block, its weights
// passed as kernel arguments), plus its workspace size function.
//
//   i32 @<prefix>.gpu.<tag>(ptr buffers, ptr dims, ptr workspace, ptr context)
//   i64 @<prefix>.gpu.workspace.<tag>(ptr dims)
//
// `buffers` holds device pointers (inputs, then outputs), `workspace` is
// device memory laid out like the CPU backend's, and `context` starts with
// the device address of the weights blob (every constant at its offset).
// A conditional (`if`) copies its predicate to the host
// (KernelLauncher::copy_to_host) and calls the taken body's function.
// How a kernel is started is the KernelLauncher's business: HIP's
// hipModuleLaunchKernel in artifacts, a direct call of the emulation entry
// point in `maxc run --device amdgpu-emu`.
#pragma once

#include "Gpu/GpuKernelEmitter.h"

#include <llvm/IR/IRBuilder.h>

#include <map>
#include <string>
#include <vector>

namespace maxc::codegen {

/// Constants' byte offsets in the weights blob, by (graph, name).
using ConstantOffsets = std::map<std::pair<const Graph *, std::string>, uint64_t>;

class KernelLauncher {
public:
  virtual ~KernelLauncher() = default;
  /// Emits the launch of `kernel` (number `index` over all programs) on
  /// `grid` workgroups at the builder's insertion point; returns an i32
  /// status (0: launched).
  virtual llvm::Value *launch(llvm::IRBuilder<> &b, const GpuKernel &kernel, size_t index, llvm::Value *grid,
                              const std::vector<llvm::Value *> &buffers, llvm::Value *dims,
                              llvm::Value *context) = 0;
  /// Emits a copy of `bytes` bytes at device address `device` to the host
  /// memory `host`, after every launch so far has finished (a branch's
  /// predicate, read on the host); returns an i32 status (0: copied).
  virtual llvm::Value *copy_to_host(llvm::IRBuilder<> &b, llvm::Value *host, llvm::Value *device, uint64_t bytes,
                                    llvm::Value *context) = 0;
  /// Emits a copy of `bytes` bytes of host memory `host` to device address
  /// `device`, after every launch so far has finished (a loop's iteration
  /// number and condition); returns an i32 status.
  virtual llvm::Value *copy_to_device(llvm::IRBuilder<> &b, llvm::Value *device, llvm::Value *host, uint64_t bytes,
                                      llvm::Value *context) = 0;
  /// Emits a copy of `bytes` (an i64 value) bytes between device addresses,
  /// after every launch so far has finished (a loop's carried values);
  /// returns an i32 status.
  virtual llvm::Value *copy_on_device(llvm::IRBuilder<> &b, llvm::Value *dst, llvm::Value *src, llvm::Value *bytes,
                                      llvm::Value *context) = 0;
  /// Emits a tensor-parallel collective (`all_reduce`, `all_gather`: a
  /// node with OpTrait::communicates) from device address `in` to `out`,
  /// after every launch so far has finished: `count` f32 elements summed
  /// over the ranks, or `outer` chunks of `chunk` bytes gathered. Returns
  /// an i32 status. Only the emulator has one (its device memory is host
  /// memory, its communicator the CPU runtime's); the device backends
  /// refuse rank programs (docs/tensor-parallel.md).
  virtual llvm::Value *collective(llvm::IRBuilder<> &b, const Node &node, llvm::Value *in, llvm::Value *out,
                                  llvm::Value *count, llvm::Value *outer, llvm::Value *chunk, llvm::Value *context);
};

struct GpuHostGraph {
  llvm::Function *run = nullptr;
  llvm::Function *workspace_size = nullptr;
};

/// Emits the host functions of every program (subgraphs first, root last,
/// as emit_gpu_kernels orders them); returns the root's.
GpuHostGraph emit_gpu_host(llvm::Module &module, const std::vector<GpuGraphProgram> &programs,
                           const std::string &prefix, const std::vector<std::string> &symbols,
                           const ConstantOffsets &offsets, KernelLauncher &launcher);

} // namespace maxc::codegen

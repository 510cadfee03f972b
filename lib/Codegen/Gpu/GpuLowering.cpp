#include "Gpu/GpuLowering.h"

#include "EntryPointUtil.h"

#include "Gpu/GpuMatmul.h"
#include "Gpu/GpuWaveReduce.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/IntrinsicsAMDGPU.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Metadata.h>
#include <llvm/IR/Module.h>

#include "maxc/Support/Error.h"

#include <algorithm>
#include <functional>
#include <optional>

namespace maxc::codegen {

using llvm::Value;

namespace {

class Lowering {
public:
  Lowering(llvm::Module &m, GpuLoweringTarget target, size_t num_symbols)
      : m_(m), ctx_(m.getContext()), b_(ctx_), target_(target), num_symbols_(num_symbols) {}

  void lower(const GpuKernel &k) {
    if (target_ == GpuLoweringTarget::emulation)
      emulate(k);
    else
      device_kernel(k);
  }

private:
  /// for (i = 0; i < n; ++i) body(i); `unroll` > 0: llvm.loop.unroll.count
  /// (1: llvm.loop.unroll.disable) on the latch.
  void loop(Value *n, const std::function<void(Value *)> &body, unsigned unroll = 0) {
    set_loop_unroll(emit_counted_loop(b_, n, body), unroll);
  }

  /// Runs `steps`: run_phase(phase, iteration) for each phase, run_wave for
  /// wave-level matrix ops (no barrier around them: a wave runs them in
  /// step), loops repeated by their trip counts; `barrier` between
  /// consecutive phases.
  void run_steps(const std::vector<KernelStep> &steps, Value *buffers, Value *dims, Value *iteration,
                 const std::function<void(llvm::Function *, Value *)> &run_phase,
                 const std::function<void()> &barrier, bool &first,
                 const std::function<void(const KernelStep &)> &run_wave) {
    for (const KernelStep &s : steps) {
      if (!s.phase && !s.trip_count) {
        run_wave(s);
        continue;
      }
      if (s.phase) {
        if (!first)
          barrier();
        first = false;
        run_phase(s.phase, iteration);
        continue;
      }
      Value *trips = b_.CreateCall(s.trip_count, {buffers, dims});
      first = false; // every trip's first phase waits for what ran before it
      loop(trips, [&](Value *it) { run_steps(s.body, buffers, dims, it, run_phase, barrier, first, run_wave); },
           target_ == GpuLoweringTarget::emulation ? 0 : (s.unroll ? s.unroll : 1));
      // (a trip loop is kept rolled unless its step asks for a count: unrolled in
      // full, its phases' registers pile up until the kernel spills)
      // The loop's first phase of the next trip must wait for the last of
      // this one, and whatever follows the loop for its last trip.
      first = false;
    }
  }

  // ---- host emulation ----

  void emulate(const GpuKernel &k) {
    llvm::Type *ptr = b_.getPtrTy(), *i64 = b_.getInt64Ty();
    auto *fn = llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr, i64}, false),
                                      llvm::GlobalValue::InternalLinkage, emulation_entry_name(k), m_);
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
    Value *buffers = fn->getArg(0), *dims = fn->getArg(1), *groups = fn->getArg(2);
    uint64_t state_bytes = std::max<uint64_t>(k.state_bytes, 8);
    auto *lds = b_.CreateAlloca(b_.getInt8Ty(), b_.getInt64(static_cast<int64_t>(std::max<uint64_t>(k.lds_bytes, 16))));
    lds->setAlignment(llvm::Align(16));
    auto *states = b_.CreateAlloca(b_.getInt8Ty(), b_.getInt64(static_cast<int64_t>(state_bytes * k.workgroup_size)));
    states->setAlignment(llvm::Align(16));
    loop(groups, [&](Value *wg) {
      bool first = true;
      run_steps(
          k.steps, buffers, dims, b_.getInt64(0),
          [&](llvm::Function *phase, Value *iteration) {
            loop(b_.getInt64(k.workgroup_size), [&](Value *lid) {
              Value *state = b_.CreateGEP(b_.getInt8Ty(), states, b_.CreateMul(lid, b_.getInt64(static_cast<int64_t>(state_bytes))));
              b_.CreateCall(phase, {buffers, dims, wg, lid, lds, state, iteration});
            });
          },
          [] {}, first,
          [&](const KernelStep &s) {
            // Each wave's lanes execute a matrix op together.
            for (const WaveMma &op : s.wave_ops) {
              uint64_t lanes = matrix_core_of(op.instruction).wave;
              for (uint64_t w = 0; w < k.workgroup_size / lanes; ++w)
                emulate_wave_mma(b_, op, b_.CreateConstGEP1_64(b_.getInt8Ty(), states, w * lanes * state_bytes),
                                 state_bytes);
            }
            // (a workgroup smaller than a wave is one partial wave)
            for (const WaveReduce &op : s.wave_reduces)
              for (uint64_t first = 0; first < k.workgroup_size; first += op.wave)
                emulate_wave_reduce(b_, op, b_.CreateConstGEP1_64(b_.getInt8Ty(), states, first * state_bytes),
                                    state_bytes, std::min<uint64_t>(op.wave, k.workgroup_size - first));
          });
    });
    b_.CreateRetVoid();
  }

  // ---- AMDGPU and NVPTX ----

  void device_kernel(const GpuKernel &k) {
    bool amd = target_ == GpuLoweringTarget::amdgpu;
    llvm::Type *global_ptr = llvm::PointerType::get(ctx_, 1), *i64 = b_.getInt64Ty(), *ptr = b_.getPtrTy();
    std::vector<llvm::Type *> params(k.buffers.size(), global_ptr);
    params.insert(params.end(), num_symbols_, i64);
    // PTX identifiers have no '.': NVPTX entries say '_' instead.
    std::string name = k.name;
    if (!amd)
      std::replace(name.begin(), name.end(), '.', '_');
    auto *fn = llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), params, false),
                                      llvm::GlobalValue::ExternalLinkage, name, m_);
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    if (amd) {
      fn->setCallingConv(llvm::CallingConv::AMDGPU_KERNEL);
      std::string size = std::to_string(k.workgroup_size);
      fn->addFnAttr("amdgpu-flat-work-group-size", (k.waves_per_eu ? size : "1") + "," + size);
      if (k.waves_per_eu)
        fn->addFnAttr("amdgpu-waves-per-eu", std::to_string(k.waves_per_eu));
    } else {
      fn->setCallingConv(llvm::CallingConv::PTX_Kernel);
      llvm::Metadata *md[] = {llvm::ValueAsMetadata::get(fn), llvm::MDString::get(ctx_, "kernel"),
                              llvm::ValueAsMetadata::get(b_.getInt32(1))};
      m_.getOrInsertNamedMetadata("nvvm.annotations")->addOperand(llvm::MDNode::get(ctx_, md));
      llvm::Metadata *maxntid[] = {llvm::ValueAsMetadata::get(fn), llvm::MDString::get(ctx_, "maxntidx"),
                                   llvm::ValueAsMetadata::get(b_.getInt32(k.workgroup_size))};
      m_.getOrInsertNamedMetadata("nvvm.annotations")->addOperand(llvm::MDNode::get(ctx_, maxntid));
    }
    for (size_t i = 0; i < k.buffers.size(); ++i) {
      fn->addParamAttr(static_cast<unsigned>(i), llvm::Attribute::NoUndef);
      if (i < k.buffer_noalias.size() && k.buffer_noalias[i])
        fn->addParamAttr(static_cast<unsigned>(i), llvm::Attribute::NoAlias);
      if (i < k.buffer_align.size() && k.buffer_align[i])
        fn->addParamAttr(static_cast<unsigned>(i), llvm::Attribute::getWithAlignment(ctx_, llvm::Align(k.buffer_align[i])));
    }
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
    // Private tables of the kernel's arguments, as the phases take them
    // (SROA folds them back into the arguments after inlining).
    auto generic = [&](Value *p) { return p->getType() == ptr ? p : b_.CreateAddrSpaceCast(p, ptr); };
    Value *buffers = generic(b_.CreateAlloca(ptr, b_.getInt64(static_cast<int64_t>(std::max<size_t>(k.buffers.size(), 1)))));
    Value *dims = generic(b_.CreateAlloca(i64, b_.getInt64(static_cast<int64_t>(std::max<size_t>(num_symbols_, 1)))));
    for (size_t i = 0; i < k.buffers.size(); ++i)
      b_.CreateStore(b_.CreateAddrSpaceCast(fn->getArg(static_cast<unsigned>(i)), ptr),
                     b_.CreateConstGEP1_64(ptr, buffers, i));
    for (size_t i = 0; i < num_symbols_; ++i)
      b_.CreateStore(fn->getArg(static_cast<unsigned>(k.buffers.size() + i)), b_.CreateConstGEP1_64(i64, dims, i));
    auto *state_alloca = b_.CreateAlloca(b_.getInt8Ty(), b_.getInt64(static_cast<int64_t>(std::max<uint64_t>(k.state_bytes, 8))));
    state_alloca->setAlignment(llvm::Align(16));
    Value *state = generic(state_alloca);
    Value *lds;
    {
      auto *type = llvm::ArrayType::get(b_.getInt8Ty(), std::max<uint64_t>(k.lds_bytes, 16));
      auto *gv = new llvm::GlobalVariable(m_, type, false, llvm::GlobalValue::InternalLinkage,
                                          llvm::UndefValue::get(type), k.name + ".lds", nullptr,
                                          llvm::GlobalValue::NotThreadLocal, 3);
      gv->setAlignment(llvm::Align(16));
      lds = b_.CreateAddrSpaceCast(gv, ptr);
    }
    // The ids with their ranges: [0, workgroup size) and, for a grid of
    // static size, [0, grid). From them LLVM proves the index math of a
    // kernel over static shapes fits 32 bits and narrows it (32-bit
    // multiplies, VGPR offsets from an SGPR base); a dynamic grid keeps 64.
    auto id = [&](llvm::Intrinsic::ID which, std::optional<uint64_t> bound) {
      llvm::CallInst *v = b_.CreateIntrinsic(which, {}, {});
      if (bound && *bound > 0 && *bound < (uint64_t{1} << 31))
        v->setMetadata(llvm::LLVMContext::MD_range,
                       llvm::MDBuilder(ctx_).createRange(llvm::APInt(32, 0), llvm::APInt(32, *bound)));
      return b_.CreateZExt(v, i64, "", /*IsNonNeg=*/true);
    };
    std::optional<uint64_t> groups = uint64_t{1};
    for (const GridFactor &f : k.grid)
      if (!f.extent.is_static() || f.extent.value() < 0 || f.extent.value() >= (int64_t{1} << 31))
        groups.reset();
      else if (groups)
        groups = std::min<uint64_t>(*groups * static_cast<uint64_t>((f.extent.value() + f.divisor - 1) / f.divisor),
                                    uint64_t{1} << 31);
    Value *wg, *lid;
    if (amd) {
      wg = id(llvm::Intrinsic::amdgcn_workgroup_id_x, groups);
      lid = id(llvm::Intrinsic::amdgcn_workitem_id_x, k.workgroup_size);
    } else {
      wg = id(llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x, groups);
      lid = id(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x, k.workgroup_size);
    }
    auto barrier = [&] {
      if (amd) {
        // __syncthreads(): LDS writes before the barrier are seen after it.
        b_.CreateFence(llvm::AtomicOrdering::Release, ctx_.getOrInsertSyncScopeID("workgroup"));
        b_.CreateIntrinsic(llvm::Intrinsic::amdgcn_s_barrier, {}, {});
        b_.CreateFence(llvm::AtomicOrdering::Acquire, ctx_.getOrInsertSyncScopeID("workgroup"));
      } else {
        b_.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {});
      }
    };
    bool first = true;
    run_steps(
        k.steps, buffers, dims, b_.getInt64(0),
        [&](llvm::Function *phase, Value *iteration) {
          b_.CreateCall(phase, {buffers, dims, wg, lid, lds, state, iteration});
        },
        barrier, first,
        [&](const KernelStep &s) {
          if (!amd && !s.wave_reduces.empty())
            throw Error(ErrorCode::Internal, "gpu: wave-level reductions in an NVPTX kernel");
          for (const WaveMma &op : s.wave_ops)
            emit_device_wave_mma(b_, op, state); // mma.sync on NVPTX: the warp is converged here
          for (const WaveReduce &op : s.wave_reduces)
            emit_device_wave_reduce(b_, op, state);
        });
    b_.CreateRetVoid();
  }

  llvm::Module &m_;
  llvm::LLVMContext &ctx_;
  llvm::IRBuilder<> b_;
  GpuLoweringTarget target_;
  size_t num_symbols_;
};

} // namespace

std::string emulation_entry_name(const GpuKernel &kernel) { return kernel.name + ".emu"; }

void lower_gpu_kernels(llvm::Module &module, const std::vector<GpuGraphProgram> &programs, GpuLoweringTarget target,
                       size_t num_symbols) {
  Lowering lowering(module, target, num_symbols);
  for (const GpuGraphProgram &p : programs)
    for (const GpuKernel &k : p.kernels)
      lowering.lower(k);
}

} // namespace maxc::codegen

#include "Gpu/GpuRuntimeHost.h"

#include "maxc/Codegen/WeightsSection.h"

#include "AmdGpu/HipAbi.h"
#include "EntryPointUtil.h"
#include "Gpu/GpuHostEmitter.h"
#include "WorkspaceLayout.h"
#include "maxc/Codegen/GpuTarget.h"
#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Codegen/ObjectEmitter.h"
#include "maxc/Support/Error.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <algorithm>

namespace maxc::codegen {

namespace {

constexpr int32_t kOk = 0;
constexpr int32_t kNullPointer = static_cast<int32_t>(RunStatus::null_pointer);
constexpr int32_t kInvalidDim = static_cast<int32_t>(RunStatus::invalid_dim);
constexpr int32_t kOutOfMemory = static_cast<int32_t>(RunStatus::out_of_memory);
constexpr int32_t kNoDevice = static_cast<int32_t>(RunStatus::no_device);
constexpr int32_t kNoArch = static_cast<int32_t>(RunStatus::no_matching_arch);
constexpr int32_t kGpuError = static_cast<int32_t>(RunStatus::gpu_error);
constexpr int32_t kStateFull = static_cast<int32_t>(RunStatus::state_full);

// hipGetDeviceProperties, the exported symbol, fills the pre-R0600 layout
// in ROCm 5, 6 and 7 (generated code calls the symbol itself, never the
// R0600 one ROCm 6 headers switch to), so gcnArchName is read at that
// layout's offset (AmdGpu/HipAbi.h). The buffer is larger than any layout.
constexpr int64_t kHipPropsBufferBytes = 4096;
constexpr int64_t kGcnArchNameBytes = 256;
static_assert(kHipGcnArchNameOffsetR0000 + kGcnArchNameBytes <= kHipDevicePropR0000Bytes);

// The context the host code keeps: field 0 must be the weights' device
// address (GpuHostEmitter reads it there).
enum ContextField : unsigned {
  kWeights = 0, kStream = 1, kError = 2, kModule = 3, kDeviceContext = 4, kDevice = 5, kFunctions = 6
};

class RuntimeLauncher : public KernelLauncher {
public:
  RuntimeLauncher(llvm::Module &m, llvm::StructType *context_type, size_t num_symbols, const GpuRuntimeApi &api)
      : m_(m), context_type_(context_type), num_symbols_(num_symbols), api_(api) {}

  llvm::Value *launch(llvm::IRBuilder<> &b, const GpuKernel &k, size_t index, llvm::Value *grid,
                      const std::vector<llvm::Value *> &buffers, llvm::Value *dims, llvm::Value *context) override {
    llvm::Type *ptr = b.getPtrTy(), *i32 = b.getInt32Ty(), *i64 = b.getInt64Ty();
    size_t nargs = buffers.size() + num_symbols_;
    // kernelParams: one pointer per argument, to a slot holding its value.
    llvm::Value *params = b.CreateAlloca(ptr, b.getInt64(static_cast<int64_t>(std::max<size_t>(nargs, 1))));
    for (size_t i = 0; i < buffers.size(); ++i) {
      llvm::Value *slot = b.CreateAlloca(ptr);
      b.CreateStore(buffers[i], slot);
      b.CreateStore(slot, b.CreateConstGEP1_64(ptr, params, i));
    }
    for (size_t i = 0; i < num_symbols_; ++i) {
      llvm::Value *slot = b.CreateAlloca(i64);
      b.CreateStore(b.CreateLoad(i64, b.CreateConstGEP1_64(i64, dims, i)), slot);
      b.CreateStore(slot, b.CreateConstGEP1_64(ptr, params, buffers.size() + i));
    }
    llvm::Value *fn_slot = b.CreateGEP(context_type_, context, {b.getInt32(0), b.getInt32(kFunctions), b.getInt32(static_cast<unsigned>(index))});
    llvm::Value *function = b.CreateLoad(ptr, fn_slot);
    llvm::Value *stream = b.CreateLoad(ptr, b.CreateStructGEP(context_type_, context, kStream));
    // hipModuleLaunchKernel and cuLaunchKernel take the same arguments.
    llvm::FunctionCallee launch = m_.getOrInsertFunction(
        api_.launch, llvm::FunctionType::get(i32, {ptr, i32, i32, i32, i32, i32, i32, i32, ptr, ptr, ptr}, false));
    llvm::Value *too_big = b.CreateICmpUGT(grid, b.getInt64(0x7fffffff));
    llvm::Value *rc = b.CreateCall(launch, {function, b.CreateTrunc(grid, i32), b.getInt32(1), b.getInt32(1),
                                            b.getInt32(k.workgroup_size), b.getInt32(1), b.getInt32(1), b.getInt32(0),
                                            stream, params, llvm::ConstantPointerNull::get(b.getPtrTy())});
    b.CreateStore(rc, b.CreateStructGEP(context_type_, context, kError));
    llvm::Value *status = b.CreateSelect(b.CreateICmpEQ(rc, b.getInt32(0)), b.getInt32(kOk), b.getInt32(kGpuError));
    return b.CreateSelect(too_big, b.getInt32(kInvalidDim), status);
  }

  llvm::Value *copy_to_host(llvm::IRBuilder<> &b, llvm::Value *host, llvm::Value *device, uint64_t bytes,
                            llvm::Value *context) override {
    return synced_copy(b, api_.memcpy_dtoh, host, device, b.getInt64(static_cast<int64_t>(bytes)), context);
  }

  llvm::Value *copy_to_device(llvm::IRBuilder<> &b, llvm::Value *device, llvm::Value *host, uint64_t bytes,
                              llvm::Value *context) override {
    return synced_copy(b, api_.memcpy_htod, device, host, b.getInt64(static_cast<int64_t>(bytes)), context);
  }

  llvm::Value *copy_on_device(llvm::IRBuilder<> &b, llvm::Value *dst, llvm::Value *src, llvm::Value *bytes,
                              llvm::Value *context) override {
    return synced_copy(b, api_.memcpy_dtod, dst, src, bytes, context);
  }

private:
  /// The stream synchronized (every launch so far done), then the runtime's
  /// `copy(dst, src, bytes)`; the first failure is the context's error.
  llvm::Value *synced_copy(llvm::IRBuilder<> &b, const char *copy, llvm::Value *dst, llvm::Value *src,
                           llvm::Value *bytes, llvm::Value *context) {
    llvm::Type *ptr = b.getPtrTy(), *i32 = b.getInt32Ty(), *i64 = b.getInt64Ty();
    llvm::Value *stream = b.CreateLoad(ptr, b.CreateStructGEP(context_type_, context, kStream));
    llvm::Value *rc = b.CreateCall(
        m_.getOrInsertFunction(api_.stream_synchronize, llvm::FunctionType::get(i32, {ptr}, false)), {stream});
    llvm::Value *copied =
        b.CreateCall(m_.getOrInsertFunction(copy, llvm::FunctionType::get(i32, {ptr, ptr, i64}, false)), {dst, src, bytes});
    rc = b.CreateSelect(b.CreateICmpEQ(rc, b.getInt32(0)), copied, rc);
    b.CreateStore(rc, b.CreateStructGEP(context_type_, context, kError));
    return b.CreateSelect(b.CreateICmpEQ(rc, b.getInt32(0)), b.getInt32(kOk), b.getInt32(kGpuError));
  }

  llvm::Module &m_;
  llvm::StructType *context_type_;
  size_t num_symbols_;
  const GpuRuntimeApi &api_;
};

std::string replace_all(std::string text, const std::string &from, const std::string &to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

/// The state API's memory on a GPU (emit_state_entry_points): each state
/// holds a context of its own (NAME_init: code and weights on the device),
/// its buffers and workspace are device memory from the runtime (buffers
/// zeroed), and NAME_step runs NAME_run_packed on the default stream.
class GpuStateTarget : public StateTarget {
public:
  GpuStateTarget(llvm::Module &m, const std::string &name, llvm::StructType *context_type, const GpuRuntimeApi &api)
      : m_(m), name_(name), context_type_(context_type), api_(api) {}

  void declare(llvm::Module &) override {}
  llvm::Value *alloc_buffer(llvm::IRBuilder<> &b, llvm::Value *bytes) override { return device_alloc(b, bytes); }
  llvm::Value *zero(llvm::IRBuilder<> &b, llvm::Value *p, llvm::Value *bytes) override {
    bool hip = api_.runtime == GpuRuntime::hip;
    llvm::Type *value_t = hip ? b.getInt32Ty() : b.getInt8Ty();
    llvm::Value *rc = b.CreateCall(rt(api_.memset, b.getInt32Ty(), {b.getPtrTy(), value_t, b.getInt64Ty()}),
                                   {p, llvm::ConstantInt::get(value_t, 0), bytes});
    return b.CreateICmpNE(rc, b.getInt32(0));
  }
  llvm::Value *alloc_workspace(llvm::IRBuilder<> &b, llvm::Value *bytes) override { return device_alloc(b, bytes); }
  void release(llvm::IRBuilder<> &b, llvm::Value *p) override {
    emit_if(b, b.CreateICmpNE(p, null(b)),
            [&] { b.CreateCall(rt(api_.free, b.getInt32Ty(), {b.getPtrTy()}), {p}); });
  }
  bool has_context() const override { return true; }
  llvm::Value *open_context(llvm::IRBuilder<> &b) override {
    llvm::Value *slot = b.CreateAlloca(b.getPtrTy());
    b.CreateStore(null(b), slot);
    llvm::Value *rc = b.CreateCall(m_.getFunction(name_ + "_init"), {slot});
    return b.CreateSelect(b.CreateICmpEQ(rc, b.getInt32(0)), b.CreateLoad(b.getPtrTy(), slot), null(b));
  }
  void enter_context(llvm::IRBuilder<> &b, llvm::Value *ctx) override {
    if (api_.runtime != GpuRuntime::cuda) // CUDA: the memory calls act in the current context
      return;
    emit_if(b, b.CreateICmpNE(ctx, null(b)), [&] {
      llvm::Value *device_ctx = b.CreateLoad(b.getPtrTy(), b.CreateStructGEP(context_type_, ctx, kDeviceContext));
      b.CreateCall(rt("cuCtxSetCurrent", b.getInt32Ty(), {b.getPtrTy()}), {device_ctx});
    });
  }
  void close_context(llvm::IRBuilder<> &b, llvm::Value *ctx) override {
    b.CreateCall(m_.getFunction(name_ + "_destroy"), {ctx});
  }
  llvm::Value *run(llvm::IRBuilder<> &b, llvm::Value *ctx, llvm::Value *buffers, llvm::Value *dims,
                   llvm::Value *workspace) override {
    return b.CreateCall(m_.getFunction(name_ + "_run_packed"), {ctx, buffers, dims, workspace, null(b)});
  }

private:
  llvm::Value *null(llvm::IRBuilder<> &b) { return llvm::ConstantPointerNull::get(b.getPtrTy()); }
  llvm::FunctionCallee rt(const char *fn, llvm::Type *ret, std::vector<llvm::Type *> args) {
    return m_.getOrInsertFunction(fn, llvm::FunctionType::get(ret, args, false));
  }
  /// Device memory of `bytes` bytes, or null.
  llvm::Value *device_alloc(llvm::IRBuilder<> &b, llvm::Value *bytes) {
    llvm::Value *slot = b.CreateAlloca(b.getPtrTy());
    b.CreateStore(null(b), slot);
    llvm::Value *rc = b.CreateCall(rt(api_.malloc, b.getInt32Ty(), {b.getPtrTy(), b.getInt64Ty()}), {slot, bytes});
    return b.CreateSelect(b.CreateICmpEQ(rc, b.getInt32(0)), b.CreateLoad(b.getPtrTy(), slot), null(b));
  }

  llvm::Module &m_;
  std::string name_;
  llvm::StructType *context_type_;
  const GpuRuntimeApi &api_;
};

/// Builds the host module: code images and weights as constants, the
/// launch sequences, and the C entry points.
/// The weights' symbol in the host object (hidden: two models link into one program).
std::string weights_symbol(const ModelInterface &iface) { return iface.name + ".weights"; }

class HostModuleBuilder {
public:
  HostModuleBuilder(llvm::Module &m, const ModelInterface &iface, const GpuRuntimeApi &api)
      : m_(m), c_(m.getContext()), b_(c_), iface_(iface), dims_array_(iface.dims_array()), api_(api) {}

  /// `streamed_weights` non-null: the weights are only a symbol
  /// (append_weights_section defines it in the object) and their bytes, as
  /// views of the constants, go there; null (the JIT): a constant in the IR.
  void build(const Graph &lowered, const std::vector<GpuGraphProgram> &programs, const GpuImages &images,
             bool host_copy_entry, ByteChunks *streamed_weights) {
    ConstantOffsets offsets;
    ByteChunks blob = weights_blob(lowered, offsets);
    size_t total_kernels = 0;
    for (const auto &p : programs)
      total_kernels += p.kernels.size();
    llvm::Type *ptr = b_.getPtrTy(), *i32 = b_.getInt32Ty();
    context_type_ = llvm::StructType::create(
        c_, {ptr, ptr, i32, ptr, ptr, i32, llvm::ArrayType::get(ptr, total_kernels)}, iface_.name + ".context");
    RuntimeLauncher launcher(m_, context_type_, dims_array_.size(), api_);
    root_ = emit_gpu_host(m_, programs, iface_.name, dims_array_, offsets, launcher);
    if (streamed_weights) {
      weights_ = new llvm::GlobalVariable(m_, llvm::ArrayType::get(b_.getInt8Ty(), blob.size()), true,
                                          llvm::GlobalValue::ExternalLinkage, nullptr, weights_symbol(iface_));
      weights_->setVisibility(llvm::GlobalValue::HiddenVisibility);
      weights_->setDSOLocal(true);
      weights_->setAlignment(llvm::Align(64));
      *streamed_weights = blob;
    } else {
      weights_ = bytes_global(blob.str(), weights_symbol(iface_));
    }
    weights_size_ = blob.size();
    if (!images.bundle.empty())
      bundle_ = bytes_global(images.bundle, iface_.name + ".offload_bundle");
    for (const auto &[target, bytes] : images.images)
      images_.push_back({target, bytes_global(bytes, iface_.name + ".image." + target)});
    for (const auto &p : programs)
      for (const auto &k : p.kernels) {
        std::string name = k.name;
        if (api_.kernel_dots_to_underscores)
          std::replace(name.begin(), name.end(), '.', '_');
        kernel_names_.push_back(name);
      }
    emit_destroy(); // before init, which calls it on failure
    emit_init();
    emit_run();
    emit_workspace_size();
    emit_small_functions();
    if (iface_.state) {
      GpuStateTarget state(m_, iface_.name, context_type_, api_);
      emit_state_entry_points(m_, iface_, m_.getFunction(iface_.name + "_workspace_size"), state);
    }
    if (host_copy_entry)
      emit_host_copy_run();
  }

private:
  llvm::GlobalVariable *bytes_global(const std::string &bytes, const std::string &name) {
    auto *data = llvm::ConstantDataArray::getRaw(bytes, bytes.size(), b_.getInt8Ty());
    auto *gv = new llvm::GlobalVariable(m_, data->getType(), true, llvm::GlobalValue::InternalLinkage, data, name);
    gv->setAlignment(llvm::Align(4096)); // code objects and bundles: page-aligned, as the loaders prefer
    return gv;
  }

  llvm::FunctionCallee rt(const char *name, llvm::Type *ret, std::vector<llvm::Type *> args) {
    return m_.getOrInsertFunction(name, llvm::FunctionType::get(ret, args, false));
  }

  void fail_if(llvm::Value *cond, llvm::Value *status, const std::function<void()> &cleanup = {}) {
    return_if(b_, cond, status, cleanup);
  }

  llvm::Function *function(const std::string &suffix, llvm::Type *ret, std::vector<llvm::Type *> args) {
    auto *fn = llvm::Function::Create(llvm::FunctionType::get(ret, args, false), llvm::GlobalValue::ExternalLinkage,
                                      iface_.name + suffix, m_);
    b_.SetInsertPoint(llvm::BasicBlock::Create(c_, "entry", fn));
    return fn;
  }

  llvm::Value *null() { return llvm::ConstantPointerNull::get(b_.getPtrTy()); }
  llvm::Value *field(llvm::Value *ctx, ContextField f) { return b_.CreateStructGEP(context_type_, ctx, f); }
  llvm::Value *string(const std::string &text, const std::string &name) {
    return b_.CreateGlobalStringPtr(text, iface_.name + "." + name, 0, &m_);
  }

  /// if (cond) then(); — continuing after it either way.
  void when(llvm::Value *cond, const std::function<void()> &then) { emit_if(b_, cond, then); }

  /// The current device (CUDA: its primary context retained and made
  /// current), into `device`; returns early with NO_DEVICE / GPU_ERROR.
  void emit_select_device(llvm::Value *device) {
    llvm::Type *ptr = b_.getPtrTy(), *i32 = b_.getInt32Ty();
    llvm::Value *count = b_.CreateAlloca(i32);
    b_.CreateStore(b_.getInt32(0), count);
    auto no_device = [&](llvm::Value *rc) {
      fail_if(b_.CreateOr(b_.CreateICmpNE(rc, b_.getInt32(0)), b_.CreateICmpSLE(b_.CreateLoad(i32, count), b_.getInt32(0))),
              b_.getInt32(kNoDevice));
    };
    if (api_.runtime == GpuRuntime::hip) {
      no_device(b_.CreateCall(rt("hipGetDeviceCount", i32, {ptr}), {count}));
      llvm::Value *rc = b_.CreateCall(rt("hipGetDevice", i32, {ptr}), {device});
      fail_if(b_.CreateICmpNE(rc, b_.getInt32(0)), b_.getInt32(kGpuError));
      return;
    }
    // cuInit fails without a usable driver or device: NO_DEVICE.
    fail_if(b_.CreateICmpNE(b_.CreateCall(rt("cuInit", i32, {i32}), {b_.getInt32(0)}), b_.getInt32(0)),
            b_.getInt32(kNoDevice));
    no_device(b_.CreateCall(rt("cuDeviceGetCount", i32, {ptr}), {count}));
    // The device of the caller's current context, else device 0.
    llvm::Value *current = b_.CreateAlloca(i32);
    llvm::Value *has_current = b_.CreateICmpEQ(b_.CreateCall(rt("cuCtxGetDevice", i32, {ptr}), {current}), b_.getInt32(0));
    llvm::Value *first = b_.CreateAlloca(i32);
    llvm::Value *rc = b_.CreateCall(rt("cuDeviceGet", i32, {ptr, i32}), {first, b_.getInt32(0)});
    fail_if(b_.CreateICmpNE(rc, b_.getInt32(0)), b_.getInt32(kGpuError));
    b_.CreateStore(b_.CreateSelect(has_current, b_.CreateLoad(i32, current), b_.CreateLoad(i32, first)), device);
  }

  /// i1: the device's gcnArchName (`arch`) suits a code object for `target`.
  llvm::Value *arch_matches(llvm::Value *arch, llvm::Value *len, const std::string &target) {
    llvm::Type *ptr = b_.getPtrTy(), *i32 = b_.getInt32Ty(), *i64 = b_.getInt64Ty();
    AmdGpuTargetRequirements r = amdgpu_target_requirements(target);
    llvm::Value *ok = b_.getFalse();
    for (const std::string &p : r.processors) {
      llvm::Value *same_len = b_.CreateICmpEQ(len, b_.getInt64(static_cast<int64_t>(p.size())));
      llvm::Value *cmp = b_.CreateCall(rt("strncmp", i32, {ptr, ptr, i64}), {arch, string(p, "arch." + p), len});
      ok = b_.CreateOr(ok, b_.CreateAnd(same_len, b_.CreateICmpEQ(cmp, b_.getInt32(0))));
    }
    for (const std::string &f : r.features) {
      llvm::Value *at = b_.CreateCall(rt("strstr", ptr, {ptr, ptr}), {arch, string(":" + f, "feature." + f)});
      ok = b_.CreateAnd(ok, b_.CreateICmpNE(at, null()));
    }
    return ok;
  }

  /// NAME_init(NAME_context **out): device, code image, kernels, weights.
  void emit_init() {
    llvm::Type *ptr = b_.getPtrTy(), *i32 = b_.getInt32Ty(), *i64 = b_.getInt64Ty();
    llvm::Function *fn = function("_init", i32, {ptr});
    llvm::Value *out = fn->getArg(0);
    fail_if(b_.CreateICmpEQ(out, null()), b_.getInt32(kNullPointer));
    b_.CreateStore(null(), out);
    llvm::Value *device = b_.CreateAlloca(i32);
    b_.CreateStore(b_.getInt32(0), device);
    emit_select_device(device);
    uint64_t ctx_size = m_.getDataLayout().getTypeAllocSize(context_type_);
    llvm::Value *ctx = b_.CreateCall(rt("calloc", ptr, {i64, i64}), {b_.getInt64(1), b_.getInt64(static_cast<int64_t>(ctx_size))});
    fail_if(b_.CreateICmpEQ(ctx, null()), b_.getInt32(kOutOfMemory));
    b_.CreateStore(b_.CreateLoad(i32, device), field(ctx, kDevice));
    llvm::Function *destroy = m_.getFunction(iface_.name + "_destroy");
    auto fail_with = [&](llvm::Value *cond, llvm::Value *status) {
      fail_if(cond, status, [&] { b_.CreateCall(destroy, {ctx}); });
    };
    auto check = [&](llvm::Value *rc) {
      b_.CreateStore(rc, field(ctx, kError));
      fail_with(b_.CreateICmpNE(rc, b_.getInt32(0)), b_.getInt32(kGpuError));
    };
    if (api_.runtime == GpuRuntime::cuda) {
      check(b_.CreateCall(rt("cuDevicePrimaryCtxRetain", i32, {ptr, i32}), {field(ctx, kDeviceContext), b_.CreateLoad(i32, device)}));
      check(b_.CreateCall(rt("cuCtxSetCurrent", i32, {ptr}), {b_.CreateLoad(ptr, field(ctx, kDeviceContext))}));
    }
    llvm::Value *any_match = emit_load_module(ctx, device);
    llvm::Value *loaded = b_.CreateLoad(ptr, field(ctx, kModule));
    fail_with(b_.CreateICmpEQ(loaded, null()),
              b_.CreateSelect(any_match, b_.getInt32(kGpuError), b_.getInt32(kNoArch)));
    for (size_t k = 0; k < kernel_names_.size(); ++k) {
      llvm::Value *slot = b_.CreateGEP(context_type_, ctx, {b_.getInt32(0), b_.getInt32(kFunctions), b_.getInt32(static_cast<unsigned>(k))});
      llvm::Value *name = string(kernel_names_[k], "kernel_name." + std::to_string(k));
      check(b_.CreateCall(rt(api_.module_get_function, i32, {ptr, ptr, ptr}), {slot, loaded, name}));
    }
    if (weights_size_ > 0) {
      llvm::Value *dst = field(ctx, kWeights);
      llvm::Value *rc = b_.CreateCall(rt(api_.malloc, i32, {ptr, i64}), {dst, b_.getInt64(static_cast<int64_t>(weights_size_))});
      b_.CreateStore(rc, field(ctx, kError));
      fail_with(b_.CreateICmpNE(rc, b_.getInt32(0)), b_.getInt32(kOutOfMemory));
      check(b_.CreateCall(rt(api_.memcpy_htod, i32, {ptr, ptr, i64}),
                          {b_.CreateLoad(ptr, dst), weights_, b_.getInt64(static_cast<int64_t>(weights_size_))}));
    }
    b_.CreateStore(b_.getInt32(0), field(ctx, kError));
    b_.CreateStore(ctx, out);
    b_.CreateRet(b_.getInt32(kOk));
  }

  /// Tries the code images in turn until one loads into ctx->module; returns
  /// i1: some image was meant for this device (a failure then is a GPU
  /// error, not a missing architecture).
  llvm::Value *emit_load_module(llvm::Value *ctx, llvm::Value *device) {
    llvm::Type *ptr = b_.getPtrTy(), *i32 = b_.getInt32Ty();
    llvm::Value *handle = b_.CreateAlloca(ptr);
    auto try_load = [&](llvm::Value *image, llvm::Value *cond) {
      llvm::Value *pending = b_.CreateAnd(b_.CreateICmpEQ(b_.CreateLoad(ptr, field(ctx, kModule)), null()), cond);
      when(pending, [&] {
        b_.CreateStore(null(), handle);
        llvm::Value *rc = b_.CreateCall(rt(api_.module_load, i32, {ptr, ptr}), {handle, image});
        b_.CreateStore(rc, field(ctx, kError));
        when(b_.CreateICmpEQ(rc, b_.getInt32(0)), [&] { b_.CreateStore(b_.CreateLoad(ptr, handle), field(ctx, kModule)); });
      });
    };
    if (api_.runtime == GpuRuntime::cuda) {
      for (const auto &[target, gv] : images_)
        try_load(gv, b_.getTrue());
      return b_.getFalse();
    }
    if (bundle_)
      try_load(bundle_, b_.getTrue());
    // The runtime could not pick from the bundle (an old runtime, a code
    // object version it predates): the object for the device's arch, then
    // every object in turn.
    llvm::Value *any = b_.getFalse();
    auto *props = b_.CreateAlloca(b_.getInt8Ty(), b_.getInt64(kHipPropsBufferBytes));
    props->setAlignment(llvm::Align(16));
    b_.CreateMemSet(props, b_.getInt8(0), b_.getInt64(kHipPropsBufferBytes), llvm::MaybeAlign(16));
    when(b_.CreateICmpEQ(b_.CreateLoad(ptr, field(ctx, kModule)), null()), [&] {
      b_.CreateCall(rt("hipGetDeviceProperties", i32, {ptr, i32}), {props, b_.CreateLoad(i32, device)});
    });
    int64_t at = static_cast<int64_t>(kHipGcnArchNameOffsetR0000);
    b_.CreateStore(b_.getInt8(0), b_.CreateConstGEP1_64(b_.getInt8Ty(), props, static_cast<uint64_t>(at + kGcnArchNameBytes - 1)));
    llvm::Value *arch = b_.CreateConstGEP1_64(b_.getInt8Ty(), props, static_cast<uint64_t>(at));
    llvm::Value *len = b_.CreateCall(rt("strcspn", b_.getInt64Ty(), {ptr, ptr}), {arch, string(":", "colon")});
    for (const auto &[target, gv] : images_) {
      llvm::Value *match = arch_matches(arch, len, target);
      any = b_.CreateOr(any, match);
      try_load(gv, match);
    }
    for (const auto &[target, gv] : images_)
      try_load(gv, b_.getTrue());
    return any;
  }

  /// NAME_destroy(ctx): frees the weights, unloads the module, releases the
  /// device context (NULL: nothing).
  void emit_destroy() {
    llvm::Type *ptr = b_.getPtrTy(), *i32 = b_.getInt32Ty();
    llvm::Function *fn = function("_destroy", b_.getVoidTy(), {ptr});
    llvm::Value *ctx = fn->getArg(0);
    auto *done = llvm::BasicBlock::Create(c_, "done", fn);
    auto *work = llvm::BasicBlock::Create(c_, "work", fn);
    b_.CreateCondBr(b_.CreateICmpEQ(ctx, null()), done, work);
    b_.SetInsertPoint(work);
    llvm::Value *device_ctx = b_.CreateLoad(ptr, field(ctx, kDeviceContext));
    if (api_.runtime == GpuRuntime::cuda)
      when(b_.CreateICmpNE(device_ctx, null()), [&] { b_.CreateCall(rt("cuCtxSetCurrent", i32, {ptr}), {device_ctx}); });
    llvm::Value *weights = b_.CreateLoad(ptr, field(ctx, kWeights));
    when(b_.CreateICmpNE(weights, null()), [&] { b_.CreateCall(rt(api_.free, i32, {ptr}), {weights}); });
    llvm::Value *module = b_.CreateLoad(ptr, field(ctx, kModule));
    when(b_.CreateICmpNE(module, null()), [&] { b_.CreateCall(rt(api_.module_unload, i32, {ptr}), {module}); });
    if (api_.runtime == GpuRuntime::cuda)
      when(b_.CreateICmpNE(device_ctx, null()), [&] {
        b_.CreateCall(rt("cuDevicePrimaryCtxRelease_v2", i32, {i32}), {b_.CreateLoad(i32, field(ctx, kDevice))});
      });
    b_.CreateCall(rt("free", b_.getVoidTy(), {ptr}), {ctx});
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
    b_.CreateRetVoid();
  }

  /// NAME_run_packed(ctx, buffers, dims, workspace, stream) and NAME_run(...).
  void emit_run() {
    llvm::Type *ptr = b_.getPtrTy(), *i32 = b_.getInt32Ty(), *i64 = b_.getInt64Ty();
    size_t nbuf = iface_.inputs.size() + iface_.outputs.size(), ndims = iface_.symbols.size();
    llvm::Function *packed = function("_run_packed", i32, {ptr, ptr, ptr, ptr, ptr});
    {
      llvm::Value *ctx = packed->getArg(0), *buffers = packed->getArg(1), *dims = packed->getArg(2),
                  *ws = packed->getArg(3), *stream = packed->getArg(4);
      fail_if(b_.CreateOr(b_.CreateICmpEQ(ctx, null()), b_.CreateICmpEQ(buffers, null())), b_.getInt32(kNullPointer));
      for (size_t i = 0; i < nbuf; ++i)
        fail_if(b_.CreateICmpEQ(b_.CreateLoad(ptr, b_.CreateConstGEP1_64(ptr, buffers, i)), null()),
                b_.getInt32(kNullPointer));
      if (ndims) {
        fail_if(b_.CreateICmpEQ(dims, null()), b_.getInt32(kNullPointer));
        fail_if(dims_invalid(b_, dims, iface_.symbols, iface_.workspace_bound), b_.getInt32(kInvalidDim));
        if (iface_.state) // the appended rows must fit the buffers
          fail_if(state_overflows(b_, dims, iface_.symbols, *iface_.state), b_.getInt32(kStateFull));
      }
      // The graph functions' dims: a slot more per symbol a node defines.
      llvm::Value *caller_dims = dims;
      dims = graph_dims_array(b_, dims, ndims, iface_.internal_dims());
      // The defined symbols an output's size names, back to the caller
      // (the host code fails the run itself when one is out of bound).
      auto report = [&] {
        if (reports_defined_symbols(iface_))
          (void)defined_symbols_failed(b_, dims, caller_dims, ndims, iface_.internal_dims(),
                                       iface_.defined_symbols.size(), true);
      };
      if (api_.runtime == GpuRuntime::cuda) // the calling thread may have another context current
        b_.CreateCall(rt("cuCtxSetCurrent", i32, {ptr}), {b_.CreateLoad(ptr, field(ctx, kDeviceContext))});
      b_.CreateStore(stream, field(ctx, kStream));
      auto *own = llvm::BasicBlock::Create(c_, "own_workspace", packed);
      auto *given = llvm::BasicBlock::Create(c_, "given_workspace", packed);
      b_.CreateCondBr(b_.CreateICmpEQ(ws, null()), own, given);
      b_.SetInsertPoint(given);
      llvm::Value *given_status = b_.CreateCall(root_.run, {buffers, dims, ws, ctx});
      report();
      b_.CreateRet(given_status);
      // No workspace given: a device allocation for this run (synchronizes).
      b_.SetInsertPoint(own);
      llvm::Value *mem = b_.CreateAlloca(ptr);
      b_.CreateStore(null(), mem);
      llvm::Value *size = b_.CreateCall(root_.workspace_size, {dims});
      llvm::Value *rc = b_.CreateCall(rt(api_.malloc, i32, {ptr, i64}), {mem, b_.CreateAdd(size, b_.getInt64(64))});
      b_.CreateStore(rc, field(ctx, kError));
      fail_if(b_.CreateICmpNE(rc, b_.getInt32(0)), b_.getInt32(kOutOfMemory));
      llvm::Value *status = b_.CreateCall(root_.run, {buffers, dims, b_.CreateLoad(ptr, mem), ctx});
      b_.CreateCall(rt(api_.stream_synchronize, i32, {ptr}), {stream});
      b_.CreateCall(rt(api_.free, i32, {ptr}), {b_.CreateLoad(ptr, mem)});
      report();
      b_.CreateRet(status);
    }
    std::vector<llvm::Type *> params = {ptr};
    params.insert(params.end(), nbuf, ptr);
    params.insert(params.end(), ndims, i64);
    params.push_back(ptr);
    params.push_back(ptr);
    llvm::Function *run = function("_run", i32, params);
    llvm::Value *buffers = b_.CreateAlloca(ptr, b_.getInt64(static_cast<int64_t>(std::max<size_t>(nbuf, 1))));
    size_t reported = reports_defined_symbols(iface_) ? iface_.defined_symbols.size() : 0; // written back, unread
    llvm::Value *dims = b_.CreateAlloca(i64, b_.getInt64(static_cast<int64_t>(std::max<size_t>(ndims + reported, 1))));
    for (size_t i = 0; i < nbuf; ++i)
      b_.CreateStore(run->getArg(static_cast<unsigned>(1 + i)), b_.CreateConstGEP1_64(ptr, buffers, i));
    for (size_t i = 0; i < ndims; ++i)
      b_.CreateStore(run->getArg(static_cast<unsigned>(1 + nbuf + i)), b_.CreateConstGEP1_64(i64, dims, i));
    b_.CreateRet(b_.CreateCall(packed, {run->getArg(0), buffers, dims, run->getArg(static_cast<unsigned>(1 + nbuf + ndims)),
                                        run->getArg(static_cast<unsigned>(2 + nbuf + ndims))}));
  }

  void emit_workspace_size() {
    llvm::Type *i64 = b_.getInt64Ty();
    size_t ndims = iface_.symbols.size();
    llvm::Function *fn = function("_workspace_size", i64, std::vector<llvm::Type *>(ndims, i64));
    llvm::Value *dims = b_.CreateAlloca(i64, b_.getInt64(static_cast<int64_t>(std::max<size_t>(ndims, 1))));
    for (size_t i = 0; i < ndims; ++i)
      b_.CreateStore(fn->getArg(static_cast<unsigned>(i)), b_.CreateConstGEP1_64(i64, dims, i));
    // -1 for the dims NAME_run rejects with INVALID_DIM.
    fail_if(dims_invalid(b_, dims, iface_.symbols, iface_.workspace_bound), b_.getInt64(-1));
    // The graph functions' whole array (calls copy it: per-call dims).
    b_.CreateRet(b_.CreateCall(root_.workspace_size, {graph_dims_array(b_, dims, ndims, iface_.internal_dims())}));
  }

  void emit_small_functions() {
    llvm::Type *ptr = b_.getPtrTy(), *i32 = b_.getInt32Ty();
    {
      llvm::Function *fn = function(api_.error_suffix, i32, {ptr});
      llvm::Value *ctx = fn->getArg(0);
      auto *some = llvm::BasicBlock::Create(c_, "context", fn);
      auto *none = llvm::BasicBlock::Create(c_, "none", fn);
      b_.CreateCondBr(b_.CreateICmpEQ(ctx, null()), none, some);
      b_.SetInsertPoint(none);
      b_.CreateRet(b_.getInt32(0));
      b_.SetInsertPoint(some);
      b_.CreateRet(b_.CreateLoad(i32, field(ctx, kError)));
    }
    llvm::Function *fn = function("_status_string", ptr, {i32});
    auto *unknown = llvm::BasicBlock::Create(c_, "unknown", fn);
    std::vector<StatusInfo> codes = status_codes(true, iface_.state.has_value());
    auto *sw = b_.CreateSwitch(fn->getArg(0), unknown, static_cast<unsigned>(codes.size()));
    for (const StatusInfo &info : codes) {
      int32_t s = static_cast<int32_t>(info.status);
      // The table speaks of HIP; the CUDA artifact says CUDA.
      std::string message = replace_all(replace_all(info.message, "_hip_error", api_.error_suffix), "HIP", api_.display_name);
      message = replace_all(message, "%s", iface_.name);
      auto *bb = llvm::BasicBlock::Create(c_, "status", fn);
      sw->addCase(b_.getInt32(s), bb);
      b_.SetInsertPoint(bb);
      b_.CreateRet(string(message, "status." + std::to_string(s)));
    }
    b_.SetInsertPoint(unknown);
    b_.CreateRet(string("unknown status", "status.unknown"));
  }

  /// NAME_run_packed(buffers, dims, workspace) on host buffers; the device
  /// one becomes NAME_device_run_packed.
  void emit_host_copy_run() {
    llvm::Type *ptr = b_.getPtrTy(), *i32 = b_.getInt32Ty(), *i64 = b_.getInt64Ty();
    size_t nin = iface_.inputs.size(), nbuf = nin + iface_.outputs.size();
    llvm::Function *device_run = m_.getFunction(iface_.name + "_run_packed");
    device_run->setName(iface_.name + "_device_run_packed");
    llvm::Function *fn = function("_run_packed", i32, {ptr, ptr, ptr});
    llvm::Value *host = fn->getArg(0), *dims = fn->getArg(1);
    llvm::Value *status = b_.CreateAlloca(i32);
    llvm::Value *ctx_slot = b_.CreateAlloca(ptr);
    llvm::Value *device = b_.CreateAlloca(ptr, b_.getInt64(static_cast<int64_t>(std::max<size_t>(nbuf, 1))));
    std::vector<llvm::Value *> sizes;
    {
      llvm::IRBuilder<> entry(b_.GetInsertBlock());
      DimValues values(entry, dims, iface_.symbols);
      for (size_t i = 0; i < nbuf; ++i) {
        const TensorType &t = (i < nin ? iface_.inputs[i] : iface_.outputs[i - nin]).type;
        llvm::Value *bytes = entry.getInt64(static_cast<int64_t>(dtype_size(t.dtype)));
        for (const Dim &d : t.shape)
          bytes = entry.CreateMul(bytes, d.is_static() ? entry.getInt64(d.value()) : values.get(d));
        sizes.push_back(bytes);
      }
    }
    llvm::Value *rc = b_.CreateCall(m_.getFunction(iface_.name + "_init"), {ctx_slot});
    fail_if(b_.CreateICmpNE(rc, b_.getInt32(0)), rc);
    llvm::Value *ctx = b_.CreateLoad(ptr, ctx_slot);
    b_.CreateStore(b_.getInt32(0), status);
    auto fail_status = [&](llvm::Value *rc, int32_t code) {
      llvm::Value *first = b_.CreateAnd(b_.CreateICmpNE(rc, b_.getInt32(0)), b_.CreateICmpEQ(b_.CreateLoad(i32, status), b_.getInt32(0)));
      b_.CreateStore(b_.CreateSelect(first, b_.getInt32(code), b_.CreateLoad(i32, status)), status);
    };
    auto slot = [&](size_t i) { return b_.CreateConstGEP1_64(ptr, device, i); };
    auto host_buffer = [&](size_t i) { return b_.CreateLoad(ptr, b_.CreateConstGEP1_64(ptr, host, i)); };
    for (size_t i = 0; i < nbuf; ++i) {
      b_.CreateStore(null(), slot(i));
      llvm::Value *bytes = b_.CreateSelect(b_.CreateICmpEQ(sizes[i], b_.getInt64(0)), b_.getInt64(1), sizes[i]);
      fail_status(b_.CreateCall(rt(api_.malloc, i32, {ptr, i64}), {slot(i), bytes}), kOutOfMemory);
    }
    llvm::Value *ok = b_.CreateICmpEQ(b_.CreateLoad(i32, status), b_.getInt32(0));
    when(ok, [&] {
      for (size_t i = 0; i < nin; ++i)
        fail_status(b_.CreateCall(rt(api_.memcpy_htod, i32, {ptr, ptr, i64}), {b_.CreateLoad(ptr, slot(i)), host_buffer(i), sizes[i]}),
                    kGpuError);
      when(b_.CreateICmpEQ(b_.CreateLoad(i32, status), b_.getInt32(0)), [&] {
        b_.CreateStore(b_.CreateCall(device_run, {ctx, device, dims, null(), null()}), status);
        fail_status(b_.CreateCall(rt(api_.device_synchronize, i32, {}), {}), kGpuError);
        for (size_t i = 0; i < nbuf; ++i) // the outputs, and the state buffers (written in place)
          if (i >= nin || iface_.inputs[i].state)
            fail_status(b_.CreateCall(rt(api_.memcpy_dtoh, i32, {ptr, ptr, i64}), {host_buffer(i), b_.CreateLoad(ptr, slot(i)), sizes[i]}),
                        kGpuError);
      });
    });
    for (size_t i = 0; i < nbuf; ++i) {
      llvm::Value *p = b_.CreateLoad(ptr, slot(i));
      when(b_.CreateICmpNE(p, null()), [&] { b_.CreateCall(rt(api_.free, i32, {ptr}), {p}); });
    }
    b_.CreateCall(m_.getFunction(iface_.name + "_destroy"), {ctx});
    b_.CreateRet(b_.CreateLoad(i32, status));
  }

  llvm::Module &m_;
  llvm::LLVMContext &c_;
  llvm::IRBuilder<> b_;
  const ModelInterface &iface_;
  std::vector<std::string> dims_array_; // the graph functions' dims: iface_.symbols, then the defined ones
  const GpuRuntimeApi &api_;
  llvm::StructType *context_type_ = nullptr;
  GpuHostGraph root_;
  llvm::GlobalVariable *weights_ = nullptr, *bundle_ = nullptr;
  uint64_t weights_size_ = 0;
  std::vector<std::pair<std::string, llvm::GlobalVariable *>> images_;
  std::vector<std::string> kernel_names_;
};

} // namespace

const GpuRuntimeApi &hip_runtime_api() {
  static const GpuRuntimeApi api = {GpuRuntime::hip,      "HIP",
                                    "_hip_error",         "hipMalloc",
                                    "hipFree",            "hipMemcpyHtoD",
                                    "hipMemcpyDtoH",      "hipModuleLoadData",
                                    "hipModuleGetFunction", "hipModuleUnload",
                                    "hipModuleLaunchKernel", "hipStreamSynchronize",
                                    "hipDeviceSynchronize", "hipMemset", "hipMemcpyDtoD", false};
  return api;
}

const GpuRuntimeApi &cuda_runtime_api() {
  static const GpuRuntimeApi api = {GpuRuntime::cuda,     "CUDA",
                                    "_cuda_error",        "cuMemAlloc_v2",
                                    "cuMemFree_v2",       "cuMemcpyHtoD_v2",
                                    "cuMemcpyDtoH_v2",    "cuModuleLoadData",
                                    "cuModuleGetFunction", "cuModuleUnload",
                                    "cuLaunchKernel",     "cuStreamSynchronize",
                                    "cuCtxSynchronize",   "cuMemsetD8_v2", "cuMemcpyDtoD_v2", true};
  return api;
}

void build_gpu_runtime_host(llvm::Module &module, const ModelInterface &iface, const Graph &lowered,
                            const std::vector<GpuGraphProgram> &programs, const GpuImages &images,
                            const GpuRuntimeApi &api, bool host_copy_entry, ByteChunks *streamed_weights) {
  HostModuleBuilder(module, iface, api).build(lowered, programs, images, host_copy_entry, streamed_weights);
  verify_module(module, "GPU host");
}

ByteChunks emit_gpu_runtime_host_object(const ModelInterface &iface, const Graph &lowered,
                                        const std::vector<GpuGraphProgram> &programs, const GpuImages &images,
                                        const GpuRuntimeApi &api, const CpuTarget &host, PassTimer &timer,
                                        const ByteChunks *weights_head) {
  llvm::LLVMContext context;
  ByteChunks weights;
  auto module = timer.run("host codegen", [&] {
    auto m = std::make_unique<llvm::Module>(iface.name, context);
    build_gpu_runtime_host(*m, iface, lowered, programs, images, api, false, &weights);
    return m;
  });
  timer.run("optimize", [&] { optimize_module(*module, host); });
  return timer.run("emit obj", [&] {
    return append_weights_section(emit_module(*module, host, OutputKind::object), weights_symbol(iface), weights,
                                  ".rodata.maxc.weights", 64, weights_head);
  });
}

void check_gpu_model(const Graph &lowered, const std::string &name) {
  if (!is_c_identifier(name))
    throw Error(ErrorCode::InvalidArgument, "model name '" + name + "' is not a C identifier (use --name)");
  std::vector<std::string> unsupported = gpu_unsupported_nodes(lowered);
  if (unsupported.empty())
    return;
  std::string list;
  for (const std::string &u : unsupported)
    list += (list.empty() ? "" : "; ") + u;
  throw Error(ErrorCode::InvalidArgument, "the GPU backend has no device libm for f64 transcendentals and pow yet: " + list);
}

void keep_launch_sequence(std::vector<GpuGraphProgram> &programs, std::vector<GpuKernelSummary> &summaries) {
  for (auto &p : programs)
    for (auto &k : p.kernels) {
      k.steps.clear(); // their functions die with the device module's context
      summaries.push_back({k.name, k.kind, k.grid_text(), k.workgroup_size, k.lds_bytes, k.constant_inputs});
    }
}

EarlyHostWeights::EarlyHostWeights(EarlyWrites *early, const Graph &lowered, const std::string &host_triple) {
  if (!early)
    return;
  ConstantOffsets offsets;
  head_ = weights_section_head(host_triple, weights_blob(lowered, offsets));
  write_ = early->start("obj", head_, {});
}

void EarlyHostWeights::wait(PassTimer &timer) {
  if (!write_)
    return;
  double ms = timer.run("wait for weights", [&] { return write_->wait(); });
  timer.record("weights (overlapped)", ms);
}

} // namespace maxc::codegen

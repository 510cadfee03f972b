#include "maxc/Codegen/GpuModelCompiler.h"

#include "EntryPointUtil.h"
#include "Gpu/GpuHostEmitter.h"
#include "Gpu/GpuKernelEmitter.h"
#include "Gpu/GpuLowering.h"
#include "AmdGpu/HipAbi.h"
#include "maxc/IR/GraphSymbols.h"
#include "maxc/Codegen/GpuTarget.h"
#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Codegen/ObjectEmitter.h"
#include "maxc/Codegen/WeightsSection.h"
#include "maxc/Support/Error.h"
#include "maxc/Transforms/Decompose.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

namespace maxc {

namespace {

constexpr int32_t kOk = 0;
constexpr int32_t kNullPointer = static_cast<int32_t>(RunStatus::null_pointer);
constexpr int32_t kInvalidDim = static_cast<int32_t>(RunStatus::invalid_dim);
constexpr int32_t kOutOfMemory = static_cast<int32_t>(RunStatus::out_of_memory);
constexpr int32_t kNoDevice = static_cast<int32_t>(RunStatus::no_device);
constexpr int32_t kNoArch = static_cast<int32_t>(RunStatus::no_matching_arch);
constexpr int32_t kGpuError = static_cast<int32_t>(RunStatus::gpu_error);

// The context the host code keeps: field 0 must be the weights' device
// address (GpuHostEmitter reads it there).
enum ContextField : unsigned { kWeights = 0, kStream = 1, kHipError = 2, kModule = 3, kFunctions = 4 };

class HipLauncher : public codegen::KernelLauncher {
public:
  HipLauncher(llvm::Module &m, llvm::StructType *context_type, size_t num_symbols)
      : m_(m), context_type_(context_type), num_symbols_(num_symbols) {}

  llvm::Value *launch(llvm::IRBuilder<> &b, const codegen::GpuKernel &k, size_t index, llvm::Value *grid,
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
    llvm::FunctionCallee launch = m_.getOrInsertFunction(
        "hipModuleLaunchKernel", llvm::FunctionType::get(i32, {ptr, i32, i32, i32, i32, i32, i32, i32, ptr, ptr, ptr}, false));
    llvm::Value *too_big = b.CreateICmpUGT(grid, b.getInt64(0x7fffffff));
    llvm::Value *rc = b.CreateCall(launch, {function, b.CreateTrunc(grid, i32), b.getInt32(1), b.getInt32(1),
                                      b.getInt32(k.workgroup_size), b.getInt32(1), b.getInt32(1), b.getInt32(0), stream,
                                      params, llvm::ConstantPointerNull::get(b.getPtrTy())});
    b.CreateStore(rc, b.CreateStructGEP(context_type_, context, kHipError));
    llvm::Value *status = b.CreateSelect(b.CreateICmpEQ(rc, b.getInt32(0)), b.getInt32(kOk), b.getInt32(kGpuError));
    return b.CreateSelect(too_big, b.getInt32(kInvalidDim), status);
  }

private:
  llvm::Module &m_;
  llvm::StructType *context_type_;
  size_t num_symbols_;
};

/// Builds the host module: code objects and weights as constants, the
/// launch sequences, and the C entry points.
class HostModuleBuilder {
public:
  HostModuleBuilder(llvm::Module &m, const ModelInterface &iface) : m_(m), c_(m.getContext()), b_(c_), iface_(iface) {}

  void build(const Graph &lowered, const std::vector<codegen::GpuGraphProgram> &programs,
             const std::vector<std::pair<std::string, std::string>> &code_objects) {
    codegen::ConstantOffsets offsets;
    weights_blob_ = codegen::weights_blob(lowered, offsets);
    size_t total_kernels = 0;
    for (const auto &p : programs)
      total_kernels += p.kernels.size();
    llvm::Type *ptr = b_.getPtrTy();
    context_type_ = llvm::StructType::create(
        c_, {ptr, ptr, b_.getInt32Ty(), ptr, llvm::ArrayType::get(ptr, total_kernels)}, iface_.name + ".context");
    HipLauncher launcher(m_, context_type_, iface_.symbols.size());
    root_ = codegen::emit_gpu_host(m_, programs, iface_.name, iface_.symbols, offsets, launcher);
    // Only a symbol: append_weights_section defines it in the object.
    weights_ = new llvm::GlobalVariable(m_, llvm::ArrayType::get(b_.getInt8Ty(), weights_blob_.size()), true,
                                        llvm::GlobalValue::ExternalLinkage, nullptr, weights_symbol());
    weights_->setVisibility(llvm::GlobalValue::HiddenVisibility);
    weights_->setDSOLocal(true);
    weights_->setAlignment(llvm::Align(64));
    weights_size_ = weights_blob_.size();
    for (const auto &[arch, image] : code_objects)
      images_.push_back({arch, bytes_global(image, iface_.name + ".hsaco." + arch)});
    for (const auto &p : programs)
      for (const auto &k : p.kernels)
        kernel_names_.push_back(k.name);
    emit_destroy(); // before init, which calls it on failure
    emit_init();
    emit_run();
    emit_workspace_size();
    emit_small_functions();
  }

  const ByteChunks &weights() const { return weights_blob_; }
  std::string weights_symbol() const { return iface_.name + ".weights"; }

private:
  llvm::GlobalVariable *bytes_global(const std::string &bytes, const std::string &name) {
    auto *data = llvm::ConstantDataArray::getRaw(bytes, bytes.size(), b_.getInt8Ty());
    auto *gv = new llvm::GlobalVariable(m_, data->getType(), true, llvm::GlobalValue::InternalLinkage, data, name);
    gv->setAlignment(llvm::Align(64));
    return gv;
  }

  llvm::FunctionCallee hip(const char *name, llvm::Type *ret, std::vector<llvm::Type *> args) {
    return m_.getOrInsertFunction(name, llvm::FunctionType::get(ret, args, false));
  }

  void fail_if(llvm::Value *cond, llvm::Value *status, const std::function<void()> &cleanup = {}) {
    codegen::return_if(b_, cond, status, cleanup);
  }

  llvm::Function *function(const std::string &suffix, llvm::Type *ret, std::vector<llvm::Type *> args) {
    auto *fn = llvm::Function::Create(llvm::FunctionType::get(ret, args, false), llvm::GlobalValue::ExternalLinkage,
                                      iface_.name + suffix, m_);
    b_.SetInsertPoint(llvm::BasicBlock::Create(c_, "entry", fn));
    return fn;
  }

  llvm::Value *null() { return llvm::ConstantPointerNull::get(b_.getPtrTy()); }

  // NAME_init(NAME_context **out): device, arch, code object, kernels, weights.
  void emit_init() {
    llvm::Type *ptr = b_.getPtrTy(), *i32 = b_.getInt32Ty(), *i64 = b_.getInt64Ty();
    llvm::Function *fn = function("_init", i32, {ptr});
    llvm::Value *out = fn->getArg(0);
    fail_if(b_.CreateICmpEQ(out, null()), b_.getInt32(kNullPointer));
    b_.CreateStore(null(), out);
    llvm::Value *count = b_.CreateAlloca(i32);
    b_.CreateStore(b_.getInt32(0), count);
    llvm::Value *rc = b_.CreateCall(hip("hipGetDeviceCount", i32, {ptr}), {count});
    fail_if(b_.CreateOr(b_.CreateICmpNE(rc, b_.getInt32(0)), b_.CreateICmpSLE(b_.CreateLoad(i32, count), b_.getInt32(0))),
            b_.getInt32(kNoDevice));
    llvm::Value *device = b_.CreateAlloca(i32);
    rc = b_.CreateCall(hip("hipGetDevice", i32, {ptr}), {device});
    fail_if(b_.CreateICmpNE(rc, b_.getInt32(0)), b_.getInt32(kGpuError));
    auto *props = b_.CreateAlloca(b_.getInt8Ty(), b_.getInt64(static_cast<int64_t>(codegen::hip_device_prop_size())));
    props->setAlignment(llvm::Align(16));
    rc = b_.CreateCall(hip("hipGetDeviceProperties", i32, {ptr, i32}), {props, b_.CreateLoad(i32, device)});
    fail_if(b_.CreateICmpNE(rc, b_.getInt32(0)), b_.getInt32(kGpuError));
    // gcnArchName is "gfx90a:sramecc+:xnack-": compare the part before ':'.
    llvm::Value *arch = b_.CreateGEP(b_.getInt8Ty(), props, b_.getInt64(static_cast<int64_t>(codegen::hip_gcn_arch_name_offset())));
    llvm::Value *len = b_.CreateCall(hip("strcspn", i64, {ptr, ptr}), {arch, b_.CreateGlobalStringPtr(":", iface_.name + ".colon", 0, &m_)});
    llvm::Value *image = null();
    for (const auto &[name, gv] : images_) {
      llvm::Value *same_len = b_.CreateICmpEQ(len, b_.getInt64(static_cast<int64_t>(name.size())));
      llvm::Value *cmp = b_.CreateCall(hip("strncmp", i32, {ptr, ptr, i64}),
                                 {arch, b_.CreateGlobalStringPtr(name, iface_.name + ".arch." + name, 0, &m_), len});
      image = b_.CreateSelect(b_.CreateAnd(same_len, b_.CreateICmpEQ(cmp, b_.getInt32(0))), gv, image);
    }
    fail_if(b_.CreateICmpEQ(image, null()), b_.getInt32(kNoArch));
    uint64_t ctx_size = m_.getDataLayout().getTypeAllocSize(context_type_);
    llvm::Value *ctx = b_.CreateCall(hip("calloc", ptr, {i64, i64}), {b_.getInt64(1), b_.getInt64(static_cast<int64_t>(ctx_size))});
    fail_if(b_.CreateICmpEQ(ctx, null()), b_.getInt32(kOutOfMemory));
    llvm::Function *destroy = m_.getFunction(iface_.name + "_destroy");
    auto check = [&](llvm::Value *rc) {
      b_.CreateStore(rc, b_.CreateStructGEP(context_type_, ctx, kHipError));
      fail_if(b_.CreateICmpNE(rc, b_.getInt32(0)), b_.getInt32(kGpuError), [&] { b_.CreateCall(destroy, {ctx}); });
    };
    llvm::Value *module_slot = b_.CreateStructGEP(context_type_, ctx, kModule);
    check(b_.CreateCall(hip("hipModuleLoadData", i32, {ptr, ptr}), {module_slot, image}));
    llvm::Value *module = b_.CreateLoad(ptr, module_slot);
    for (size_t k = 0; k < kernel_names_.size(); ++k) {
      llvm::Value *slot = b_.CreateGEP(context_type_, ctx, {b_.getInt32(0), b_.getInt32(kFunctions), b_.getInt32(static_cast<unsigned>(k))});
      llvm::Value *name = b_.CreateGlobalStringPtr(kernel_names_[k], iface_.name + ".kernel_name." + std::to_string(k), 0, &m_);
      check(b_.CreateCall(hip("hipModuleGetFunction", i32, {ptr, ptr, ptr}), {slot, module, name}));
    }
    if (weights_size_ > 0) {
      llvm::Value *dst = b_.CreateStructGEP(context_type_, ctx, kWeights);
      check(b_.CreateCall(hip("hipMalloc", i32, {ptr, i64}), {dst, b_.getInt64(static_cast<int64_t>(weights_size_))}));
      check(b_.CreateCall(hip("hipMemcpyHtoD", i32, {ptr, ptr, i64}),
                          {b_.CreateLoad(ptr, dst), weights_, b_.getInt64(static_cast<int64_t>(weights_size_))}));
    }
    b_.CreateStore(ctx, out);
    b_.CreateRet(b_.getInt32(kOk));
  }

  // NAME_destroy(ctx): frees the weights, unloads the module (NULL: nothing).
  void emit_destroy() {
    llvm::Type *ptr = b_.getPtrTy(), *i32 = b_.getInt32Ty();
    llvm::Function *fn = function("_destroy", b_.getVoidTy(), {ptr});
    llvm::Value *ctx = fn->getArg(0);
    auto *work = llvm::BasicBlock::Create(c_, "work", fn);
    auto *done = llvm::BasicBlock::Create(c_, "done", fn);
    b_.CreateCondBr(b_.CreateICmpEQ(ctx, null()), done, work);
    b_.SetInsertPoint(work);
    llvm::Value *weights = b_.CreateLoad(ptr, b_.CreateStructGEP(context_type_, ctx, kWeights));
    b_.CreateCall(hip("hipFree", i32, {ptr}), {weights}); // hipFree(NULL) is a no-op
    llvm::Value *module = b_.CreateLoad(ptr, b_.CreateStructGEP(context_type_, ctx, kModule));
    auto *unload = llvm::BasicBlock::Create(c_, "unload", fn);
    auto *release = llvm::BasicBlock::Create(c_, "release", fn);
    b_.CreateCondBr(b_.CreateICmpEQ(module, null()), release, unload);
    b_.SetInsertPoint(unload);
    b_.CreateCall(hip("hipModuleUnload", i32, {ptr}), {module});
    b_.CreateBr(release);
    b_.SetInsertPoint(release);
    b_.CreateCall(hip("free", b_.getVoidTy(), {ptr}), {ctx});
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
    b_.CreateRetVoid();
  }

  // NAME_run_packed(ctx, buffers, dims, workspace, stream) and NAME_run(...).
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
        fail_if(codegen::dims_invalid(b_, dims, iface_.symbols, iface_.workspace_bound), b_.getInt32(kInvalidDim));
      }
      b_.CreateStore(stream, b_.CreateStructGEP(context_type_, ctx, kStream));
      auto *own = llvm::BasicBlock::Create(c_, "own_workspace", packed);
      auto *given = llvm::BasicBlock::Create(c_, "given_workspace", packed);
      b_.CreateCondBr(b_.CreateICmpEQ(ws, null()), own, given);
      b_.SetInsertPoint(given);
      b_.CreateRet(b_.CreateCall(root_.run, {buffers, dims, ws, ctx}));
      // No workspace given: a device allocation for this run (synchronizes).
      b_.SetInsertPoint(own);
      llvm::Value *mem = b_.CreateAlloca(ptr);
      b_.CreateStore(null(), mem);
      llvm::Value *size = b_.CreateCall(root_.workspace_size, {dims});
      llvm::Value *rc = b_.CreateCall(hip("hipMalloc", i32, {ptr, i64}), {mem, b_.CreateAdd(size, b_.getInt64(64))});
      b_.CreateStore(rc, b_.CreateStructGEP(context_type_, ctx, kHipError));
      fail_if(b_.CreateICmpNE(rc, b_.getInt32(0)), b_.getInt32(kOutOfMemory));
      llvm::Value *status = b_.CreateCall(root_.run, {buffers, dims, b_.CreateLoad(ptr, mem), ctx});
      b_.CreateCall(hip("hipStreamSynchronize", i32, {ptr}), {stream});
      b_.CreateCall(hip("hipFree", i32, {ptr}), {b_.CreateLoad(ptr, mem)});
      b_.CreateRet(status);
    }
    std::vector<llvm::Type *> params = {ptr};
    params.insert(params.end(), nbuf, ptr);
    params.insert(params.end(), ndims, i64);
    params.push_back(ptr);
    params.push_back(ptr);
    llvm::Function *run = function("_run", i32, params);
    llvm::Value *buffers = b_.CreateAlloca(ptr, b_.getInt64(static_cast<int64_t>(std::max<size_t>(nbuf, 1))));
    llvm::Value *dims = b_.CreateAlloca(i64, b_.getInt64(static_cast<int64_t>(std::max<size_t>(ndims, 1))));
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
    fail_if(codegen::dims_invalid(b_, dims, iface_.symbols, iface_.workspace_bound), b_.getInt64(-1));
    b_.CreateRet(b_.CreateCall(root_.workspace_size, {dims}));
  }

  void emit_small_functions() {
    llvm::Type *ptr = b_.getPtrTy(), *i32 = b_.getInt32Ty();
    {
      llvm::Function *fn = function("_hip_error", i32, {ptr});
      llvm::Value *ctx = fn->getArg(0);
      auto *some = llvm::BasicBlock::Create(c_, "context", fn);
      auto *none = llvm::BasicBlock::Create(c_, "none", fn);
      b_.CreateCondBr(b_.CreateICmpEQ(ctx, null()), none, some);
      b_.SetInsertPoint(none);
      b_.CreateRet(b_.getInt32(0));
      b_.SetInsertPoint(some);
      b_.CreateRet(b_.CreateLoad(i32, b_.CreateStructGEP(context_type_, ctx, kHipError)));
    }
    llvm::Function *fn = function("_status_string", ptr, {i32});
    auto *unknown = llvm::BasicBlock::Create(c_, "unknown", fn);
    std::vector<StatusInfo> codes = status_codes(true);
    auto *sw = b_.CreateSwitch(fn->getArg(0), unknown, static_cast<unsigned>(codes.size()));
    for (const StatusInfo &info : codes) {
      int32_t s = static_cast<int32_t>(info.status);
      std::string message = info.message;
      if (size_t at = message.find("%s"); at != std::string::npos)
        message.replace(at, 2, iface_.name);
      auto *bb = llvm::BasicBlock::Create(c_, "status", fn);
      sw->addCase(b_.getInt32(s), bb);
      b_.SetInsertPoint(bb);
      b_.CreateRet(b_.CreateGlobalStringPtr(message, iface_.name + ".status." + std::to_string(s), 0, &m_));
    }
    b_.SetInsertPoint(unknown);
    b_.CreateRet(b_.CreateGlobalStringPtr("unknown status", iface_.name + ".status.unknown", 0, &m_));
  }

  llvm::Module &m_;
  llvm::LLVMContext &c_;
  llvm::IRBuilder<> b_;
  const ModelInterface &iface_;
  llvm::StructType *context_type_ = nullptr;
  codegen::GpuHostGraph root_;
  llvm::GlobalVariable *weights_ = nullptr;
  uint64_t weights_size_ = 0;
  ByteChunks weights_blob_; // views of the constants
  std::vector<std::pair<std::string, llvm::GlobalVariable *>> images_;
  std::vector<std::string> kernel_names_;
};

} // namespace

GpuCodegenResult compile_amdgpu(const Graph &lowered, const ModelInterface &abi, const CpuTarget &host,
                                const GpuCompileOptions &options, PassTimer &timer) {
  GpuCodegenResult out;
  const std::string &name = abi.name;
  if (!is_c_identifier(name))
    throw Error(ErrorCode::InvalidArgument, "model name '" + name + "' is not a C identifier (use --name)");
  if (options.arches.empty())
    throw Error(ErrorCode::InvalidArgument, "no AMD GPU architecture given (--gpu gfx90a,...)");
  resolve_code_object_version(options.code_object_version);
  std::vector<std::string> unsupported = codegen::gpu_unsupported_nodes(lowered);
  if (!unsupported.empty()) {
    std::string list;
    for (const std::string &u : unsupported)
      list += (list.empty() ? "" : "; ") + u;
    throw Error(ErrorCode::InvalidArgument,
                "the GPU backend has no device libm for f64 transcendentals and pow yet: " + list);
  }
  const std::vector<std::string> &symbols = abi.symbols;

  // The launch sequences the host module describes: the kernels' names,
  // grids and buffers are the same in every device module (emit_gpu_kernels
  // is deterministic), so the first arch's are kept, without their bodies.
  std::vector<codegen::GpuGraphProgram> programs;
  for (const std::string &arch : options.arches) {
    llvm::LLVMContext context;
    llvm::Module device(name + "." + arch, context);
    device.setTargetTriple("amdgcn-amd-amdhsa");
    device.setDataLayout(amdgpu_data_layout(arch));
    auto device_programs = timer.run("kernels " + arch, [&] {
      auto p = codegen::emit_gpu_kernels(device, lowered, name, symbols, arch);
      codegen::lower_gpu_kernels(device, p, codegen::GpuLoweringTarget::amdgpu, symbols.size());
      codegen::verify_module(device, "AMDGPU kernel");
      return p;
    });
    std::string hsaco = timer.run("hsaco " + arch, [&] {
      return emit_amdgpu_code_object(device, arch, options.code_object_version);
    });
    out.resources.push_back(amdgpu_kernel_resources(hsaco));
    out.code_objects.emplace_back(arch, std::move(hsaco));
    if (options.gpu_assembly)
      out.gpu_assembly.emplace_back(arch, timer.run("gpu-asm " + arch, [&] {
        return emit_amdgpu_assembly(device, arch, options.code_object_version);
      }));
    if (programs.empty()) {
      out.launches = codegen::gpu_launch_count(device_programs);
      programs = std::move(device_programs);
      for (auto &p : programs)
        for (auto &k : p.kernels) {
          k.steps.clear(); // their functions die with this context
          out.kernels.push_back({k.name, k.kind, k.grid_text(), k.workgroup_size, k.lds_bytes});
        }
    }
  }

  llvm::LLVMContext context;
  ByteChunks weights;
  std::string weights_symbol;
  auto module = timer.run("host codegen", [&] {
    auto host_module = std::make_unique<llvm::Module>(name, context);
    HostModuleBuilder builder(*host_module, abi);
    builder.build(lowered, programs, out.code_objects);
    weights = builder.weights();
    weights_symbol = builder.weights_symbol();
    codegen::verify_module(*host_module, "GPU host");
    return host_module;
  });
  timer.run("optimize", [&] { optimize_module(*module, host); });
  out.host_object = timer.run("emit obj", [&] {
    return codegen::append_weights_section(emit_module(*module, host, OutputKind::object), weights_symbol, weights);
  });
  return out;
}

std::string compile_gpu_kernels_ptx(const Graph &graph, const std::string &name, const std::string &sm) {
  if (!is_c_identifier(name))
    throw Error(ErrorCode::InvalidArgument, "model name '" + name + "' is not a C identifier (use --name)");
  std::unique_ptr<Graph> lowered = decompose(graph);
  std::vector<std::string> symbols = dim_symbols(*lowered);
  llvm::LLVMContext context;
  llvm::Module device(name + ".ptx", context);
  device.setTargetTriple("nvptx64-nvidia-cuda");
  device.setDataLayout(nvptx_data_layout(sm));
  auto programs = codegen::emit_gpu_kernels(device, *lowered, name, symbols);
  codegen::lower_gpu_kernels(device, programs, codegen::GpuLoweringTarget::nvptx, symbols.size());
  codegen::verify_module(device, "NVPTX kernel");
  return emit_nvptx_assembly(device, sm);
}

} // namespace maxc

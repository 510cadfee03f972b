// AMD GPU groundwork: architecture names and aliases, code object versions,
// and a tiny vadd kernel compiled to a HSACO for several architectures. No
// GPU is needed: only LLVM and ld.lld.
#include "TestUtil.h"

#include "maxc/Codegen/GpuTarget.h"

#include <llvm/IR/BasicBlock.h>
#include <llvm/IR/CallingConv.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsAMDGPU.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Metadata.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/Program.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

using maxc::ErrorCode;

namespace {

bool contains(const std::vector<std::string> &names, const std::string &name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

/// void @vadd(ptr addrspace(1) a, b, c, i32 n): c[i] = a[i] + b[i] for
/// i = workgroup.id.x * 256 + workitem.id.x < n (workgroup size fixed at 256).
std::unique_ptr<llvm::Module> make_vadd_module(llvm::LLVMContext &ctx) {
  auto module = std::make_unique<llvm::Module>("vadd", ctx);
  llvm::Type *i32 = llvm::Type::getInt32Ty(ctx);
  llvm::Type *f32 = llvm::Type::getFloatTy(ctx);
  llvm::PointerType *global_ptr = llvm::PointerType::get(ctx, 1);
  llvm::FunctionType *type =
      llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {global_ptr, global_ptr, global_ptr, i32}, false);
  llvm::Function *fn = llvm::Function::Create(type, llvm::Function::ExternalLinkage, "vadd", module.get());
  fn->setCallingConv(llvm::CallingConv::AMDGPU_KERNEL);
  fn->addFnAttr("amdgpu-flat-work-group-size", "256,256");
  llvm::Metadata *wg_size[] = {
      llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(i32, 256)),
      llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(i32, 1)),
      llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(i32, 1))};
  fn->setMetadata("reqd_work_group_size", llvm::MDNode::get(ctx, wg_size));
  const char *names[] = {"a", "b", "c", "n"};
  for (unsigned i = 0; i < 4; ++i)
    fn->getArg(i)->setName(names[i]);
  for (unsigned i = 0; i < 3; ++i)
    fn->addParamAttr(i, llvm::Attribute::NoAlias);

  llvm::BasicBlock *entry = llvm::BasicBlock::Create(ctx, "entry", fn);
  llvm::BasicBlock *body = llvm::BasicBlock::Create(ctx, "body", fn);
  llvm::BasicBlock *exit = llvm::BasicBlock::Create(ctx, "exit", fn);
  llvm::IRBuilder<> b(entry);
  llvm::Value *tid = b.CreateIntrinsic(llvm::Intrinsic::amdgcn_workitem_id_x, {}, {}, nullptr, "tid");
  llvm::Value *gid = b.CreateIntrinsic(llvm::Intrinsic::amdgcn_workgroup_id_x, {}, {}, nullptr, "gid");
  llvm::Value *index = b.CreateAdd(b.CreateMul(gid, b.getInt32(256)), tid, "i");
  b.CreateCondBr(b.CreateICmpSLT(index, fn->getArg(3)), body, exit);

  b.SetInsertPoint(body);
  llvm::Value *wide = b.CreateSExt(index, b.getInt64Ty());
  llvm::Value *x = b.CreateLoad(f32, b.CreateInBoundsGEP(f32, fn->getArg(0), wide), "x");
  llvm::Value *y = b.CreateLoad(f32, b.CreateInBoundsGEP(f32, fn->getArg(1), wide), "y");
  b.CreateStore(b.CreateFAdd(x, y, "sum"), b.CreateInBoundsGEP(f32, fn->getArg(2), wide));
  b.CreateBr(exit);

  b.SetInsertPoint(exit);
  b.CreateRetVoid();
  return module;
}

template <typename T> T read_le(const std::string &bytes, size_t offset) {
  T value{};
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value; // the test machines are little-endian, as is AMDGPU ELF
}

/// Runs `command` and returns its stdout (the test only uses fixed commands).
std::string capture(const std::string &command) {
  std::string out;
  FILE *pipe = ::popen(command.c_str(), "r");
  if (!pipe)
    return out;
  std::array<char, 4096> chunk;
  size_t n;
  while ((n = std::fread(chunk.data(), 1, chunk.size(), pipe)) > 0)
    out.append(chunk.data(), n);
  ::pclose(pipe);
  return out;
}

} // namespace

TEST_CASE("known AMD GPU architectures come from LLVM", "[codegen][gpu]") {
  std::vector<std::string> arches = maxc::known_amdgpu_arches();
  CHECK(contains(arches, "gfx90a"));
  CHECK(contains(arches, "gfx942"));
  CHECK(contains(arches, "gfx1100"));
  CHECK(contains(arches, "gfx1030"));
  CHECK(std::is_sorted(arches.begin(), arches.end()));
  CHECK(std::adjacent_find(arches.begin(), arches.end()) == arches.end());
  for (const std::string &arch : arches)
    CHECK(arch.rfind("gfx", 0) == 0);
}

TEST_CASE("GPU architecture lists resolve names and aliases", "[codegen][gpu]") {
  using V = std::vector<std::string>;
  CHECK(maxc::resolve_gpu_arches("gfx942") == V{"gfx942"});
  CHECK(maxc::resolve_gpu_arches("gfx90a,gfx942,gfx1100") == V{"gfx90a", "gfx942", "gfx1100"});
  CHECK(maxc::resolve_gpu_arches("mi250x") == V{"gfx90a"});
  CHECK(maxc::resolve_gpu_arches("mi250,mi300x,mi300a,rx7900xtx,w7900,rx6900xt") ==
        V{"gfx90a", "gfx942", "gfx1100", "gfx1030"});
  // Duplicates, direct or through an alias, keep the first position.
  CHECK(maxc::resolve_gpu_arches("gfx1100,mi300x,gfx942,w7900,gfx1100") == V{"gfx1100", "gfx942"});
  CHECK(maxc::resolve_gpu_arches(" gfx90a , mi250x ") == V{"gfx90a"});

  MAXC_REQUIRE_ERROR(maxc::resolve_gpu_arches("gfx9999"), ErrorCode::InvalidArgument, "gfx9999");
  MAXC_REQUIRE_ERROR(maxc::resolve_gpu_arches("gfx90a,h100"), ErrorCode::InvalidArgument, "'h100'");
  MAXC_REQUIRE_ERROR(maxc::resolve_gpu_arches("h100"), ErrorCode::InvalidArgument, "gfx942");
  MAXC_REQUIRE_ERROR(maxc::resolve_gpu_arches("h100"), ErrorCode::InvalidArgument, "mi300x");
  MAXC_REQUIRE_ERROR(maxc::resolve_gpu_arches(""), ErrorCode::InvalidArgument, "no AMD GPU architecture");
  MAXC_REQUIRE_ERROR(maxc::resolve_gpu_arches(" , "), ErrorCode::InvalidArgument, "no AMD GPU architecture");
}

TEST_CASE("AMD GPU code object versions are validated", "[codegen][gpu]") {
  CHECK(maxc::resolve_code_object_version(4) == 400);
  CHECK(maxc::resolve_code_object_version(5) == 500);
  CHECK(maxc::resolve_code_object_version(6) == 600);
  for (int bad : {0, 3, 7, 500, -5})
    MAXC_REQUIRE_ERROR(maxc::resolve_code_object_version(bad), ErrorCode::InvalidArgument, "valid versions: 4, 5, 6");
}

TEST_CASE("bad AMD GPU emission requests fail before LLVM sees them", "[codegen][gpu]") {
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> module = make_vadd_module(ctx);
  MAXC_REQUIRE_ERROR(maxc::emit_amdgpu_code_object(*module, "gfx9999", 5), ErrorCode::InvalidArgument, "gfx942");
  MAXC_REQUIRE_ERROR(maxc::emit_amdgpu_code_object(*module, "mi300x", 5), ErrorCode::InvalidArgument, "mi300x");
  MAXC_REQUIRE_ERROR(maxc::emit_amdgpu_code_object(*module, "gfx942", 3), ErrorCode::InvalidArgument, "version 3");
  // Generic processors need code object v6 (LLVM would refuse them later).
  std::vector<std::string> arches = maxc::known_amdgpu_arches();
  if (contains(arches, "gfx11-generic"))
    MAXC_REQUIRE_ERROR(maxc::emit_amdgpu_code_object(*module, "gfx11-generic", 5), ErrorCode::InvalidArgument,
                       "code object version 6");
  module->setTargetTriple("x86_64-unknown-linux-gnu");
  MAXC_REQUIRE_ERROR(maxc::emit_amdgpu_code_object(*module, "gfx942", 5), ErrorCode::InvalidArgument, "x86_64");
}

TEST_CASE("invalid IR is reported, not passed to the AMDGPU backend", "[codegen][gpu]") {
  llvm::LLVMContext ctx;
  llvm::Module module("broken", ctx);
  llvm::FunctionType *type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {}, false);
  llvm::Function *fn = llvm::Function::Create(type, llvm::Function::ExternalLinkage, "k", &module);
  fn->setCallingConv(llvm::CallingConv::AMDGPU_KERNEL);
  llvm::BasicBlock::Create(ctx, "entry", fn); // no terminator
  MAXC_REQUIRE_ERROR(maxc::emit_amdgpu_code_object(module, "gfx942", 5), ErrorCode::Internal, "invalid LLVM IR");
}

TEST_CASE("a vadd kernel compiles to a HSACO for several AMD GPUs", "[codegen][gpu]") {
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> module = make_vadd_module(ctx);
  const bool have_readelf = static_cast<bool>(llvm::sys::findProgramByName("llvm-readelf-19"));
  if (!have_readelf)
    WARN("llvm-readelf-19 is not on the PATH: the HSACO notes are not checked");

  for (const std::string arch : {"gfx90a", "gfx942", "gfx1100"}) {
    INFO("arch " << arch);
    std::string hsaco = maxc::emit_amdgpu_code_object(*module, arch, 5);
    REQUIRE(hsaco.size() > 64);
    CHECK(hsaco.compare(0, 4, "\x7f" "ELF") == 0);
    CHECK(hsaco[4] == 2); // ELFCLASS64
    CHECK(hsaco[5] == 1); // little-endian
    CHECK(read_le<uint16_t>(hsaco, 16) == 3);   // ET_DYN
    CHECK(read_le<uint16_t>(hsaco, 18) == 224); // EM_AMDGPU
    // Deterministic: a second emission gives the same bytes, and the input
    // module is left untouched (still without a triple).
    CHECK(maxc::emit_amdgpu_code_object(*module, arch, 5) == hsaco);
    CHECK(module->getTargetTriple().empty());

    if (have_readelf) {
      char path[] = "/tmp/maxc-gpu-test-XXXXXX";
      int fd = ::mkstemp(path);
      REQUIRE(fd >= 0);
      REQUIRE(::write(fd, hsaco.data(), hsaco.size()) == ssize_t(hsaco.size()));
      ::close(fd);
      std::string notes = capture(std::string("llvm-readelf-19 --notes ") + path + " 2>&1");
      ::unlink(path);
      INFO(notes);
      CHECK_THAT(notes, Catch::Matchers::Contains("amdhsa.kernels"));
      CHECK_THAT(notes, Catch::Matchers::Contains(".name:           vadd"));
      CHECK_THAT(notes, Catch::Matchers::Contains("vadd.kd"));
      CHECK_THAT(notes, Catch::Matchers::Contains("amdhsa.target"));
      CHECK_THAT(notes, Catch::Matchers::Contains("amdgcn-amd-amdhsa--" + arch));
      CHECK_THAT(notes, Catch::Matchers::Contains(".reqd_workgroup_size"));
    }
  }
}

TEST_CASE("AMD GPU code object versions 4 and 6 emit too", "[codegen][gpu]") {
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> module = make_vadd_module(ctx);
  std::string v4 = maxc::emit_amdgpu_code_object(*module, "gfx942", 4);
  std::string v6 = maxc::emit_amdgpu_code_object(*module, "gfx942", 6);
  CHECK(read_le<uint16_t>(v4, 18) == 224);
  CHECK(read_le<uint16_t>(v6, 18) == 224);
  CHECK(v4 != v6); // the ELF ABI version byte differs at least
  CHECK(static_cast<unsigned char>(v4[8]) == 2); // ELFABIVERSION_AMDGPU_HSA_V4
  CHECK(static_cast<unsigned char>(v6[8]) == 4); // ELFABIVERSION_AMDGPU_HSA_V6
}

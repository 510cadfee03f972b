// The one translation unit that includes LLVM's PassBuilder (~10 s to
// compile): the optimization pipeline and object/assembly/IR emission.
#include "maxc/Codegen/ObjectEmitter.h"

#include "EntryPointUtil.h"
#include "maxc/Support/Error.h"

#include <llvm/ADT/SmallVector.h>
#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Linker/Linker.h>
#include <llvm/Passes/OptimizationLevel.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CodeGen.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Triple.h>
#include <llvm/Transforms/Utils/Cloning.h>

namespace maxc {

namespace {


/// Sets the module's triple and data layout to the target's, or checks that
/// they already are (a module optimized for one target must not be emitted
/// for another).
void bind_to_target(llvm::Module &module, const llvm::TargetMachine &tm) {
  const std::string triple = tm.getTargetTriple().str();
  const std::string &current = module.getTargetTriple();
  if (!current.empty() && llvm::Triple::normalize(current) != triple)
    throw Error(ErrorCode::InvalidArgument,
                "module '" + module.getName().str() + "' was built for " + current + ", not " + triple);
  module.setTargetTriple(triple);
  module.setDataLayout(tm.createDataLayout());
}

llvm::OptimizationLevel optimization_level(int opt_level) {
  switch (opt_level) {
  case 0:
    return llvm::OptimizationLevel::O0;
  case 1:
    return llvm::OptimizationLevel::O1;
  case 2:
    return llvm::OptimizationLevel::O2;
  default:
    return llvm::OptimizationLevel::O3;
  }
}

} // namespace

void optimize_module(llvm::Module &module, const CpuTarget &target) {
  std::unique_ptr<llvm::TargetMachine> tm = make_target_machine(target);
  bind_to_target(module, *tm);
  codegen::verify_module(module, "before optimization");

  llvm::PipelineTuningOptions pto;
  pto.LoopUnrolling = target.opt_level >= 1;
  pto.LoopInterleaving = target.opt_level >= 2;
  pto.LoopVectorization = target.opt_level >= 2;
  pto.SLPVectorization = target.opt_level >= 2;

  // Analysis managers must be destroyed in this order (loop first), so
  // declare them in the reverse.
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;

  // The TargetMachine gives the vectorizer the target's costs and widths.
  llvm::PassBuilder pb(tm.get(), pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);

  llvm::OptimizationLevel level = optimization_level(target.opt_level);
  llvm::ModulePassManager mpm =
      target.opt_level == 0 ? pb.buildO0DefaultPipeline(level) : pb.buildPerModuleDefaultPipeline(level);
  mpm.run(module, mam);
}

std::string emit_module(const llvm::Module &module, const CpuTarget &target, OutputKind kind) {
  std::unique_ptr<llvm::TargetMachine> tm = make_target_machine(target);
  // Codegen mutates the module: work on a copy so `module` stays usable.
  std::unique_ptr<llvm::Module> clone = llvm::CloneModule(module);
  bind_to_target(*clone, *tm);
  codegen::verify_module(*clone, "before emission");

  if (kind == OutputKind::llvm_ir) {
    std::string text;
    llvm::raw_string_ostream os(text);
    clone->print(os, nullptr);
    os.flush();
    return text;
  }

  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  llvm::CodeGenFileType file_type =
      kind == OutputKind::object ? llvm::CodeGenFileType::ObjectFile : llvm::CodeGenFileType::AssemblyFile;
  if (tm->addPassesToEmitFile(pm, os, nullptr, file_type))
    throw Error(ErrorCode::Internal, "LLVM cannot emit " +
                                         std::string(kind == OutputKind::object ? "objects" : "assembly") +
                                         " for " + target.triple);
  pm.run(*clone);
  return std::string(buffer.begin(), buffer.end());
}

std::string bitcode_of(const llvm::Module &module) {
  std::string bytes;
  llvm::raw_string_ostream os(bytes);
  llvm::WriteBitcodeToFile(module, os);
  os.flush();
  return bytes;
}

std::unique_ptr<llvm::Module> join_bitcode(const std::vector<std::string> &bitcode, llvm::LLVMContext &context) {
  std::unique_ptr<llvm::Module> joined;
  for (const std::string &bytes : bitcode) {
    auto parsed = llvm::parseBitcodeFile(llvm::MemoryBufferRef(bytes, "partition"), context);
    if (!parsed)
      throw Error(ErrorCode::Internal, "cannot read a partition's bitcode: " + llvm::toString(parsed.takeError()));
    if (!joined)
      joined = std::move(*parsed);
    else if (llvm::Linker::linkModules(*joined, std::move(*parsed)))
      throw Error(ErrorCode::Internal, "cannot link the partitions of '" + joined->getName().str() + "'");
  }
  return joined;
}

} // namespace maxc

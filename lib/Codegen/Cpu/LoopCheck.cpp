#include "maxc/Codegen/LoopCheck.h"

#include <llvm/Analysis/AssumptionCache.h>
#include <llvm/Analysis/LoopInfo.h>
#include <llvm/Analysis/ScalarEvolution.h>
#include <llvm/Analysis/ScalarEvolutionExpressions.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/IR/Dominators.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/Module.h>
#include <llvm/TargetParser/Triple.h>

#include <algorithm>
#include <cstdlib>

namespace maxc {

void tag_kernel_task(llvm::Function &task, const std::string &node_name) {
  task.addFnAttr(kKernelAttr, node_name);
}

namespace {

bool has_vector(const llvm::Instruction &inst) {
  if (inst.getType()->isVectorTy())
    return true;
  return std::any_of(inst.op_begin(), inst.op_end(), [](const llvm::Use &u) { return u.get()->getType()->isVectorTy(); });
}

} // namespace

std::vector<ScalarStridedLoop> scalar_strided_loops(llvm::Module &module) {
  std::vector<ScalarStridedLoop> out;
  llvm::TargetLibraryInfoImpl tlii{llvm::Triple(module.getTargetTriple())};
  for (llvm::Function &f : module) {
    if (f.isDeclaration() || !f.hasFnAttribute(kKernelAttr))
      continue;
    llvm::DominatorTree dt(f);
    llvm::LoopInfo li(dt);
    if (li.empty())
      continue;
    llvm::TargetLibraryInfo tli(tlii, &f);
    llvm::AssumptionCache ac(f);
    llvm::ScalarEvolution se(f, tli, ac, dt, li);
    for (llvm::Loop *loop : li.getLoopsInPreorder()) {
      if (!loop->isInnermost())
        continue;
      bool vector = false, floats = false;
      ScalarStridedLoop worst{f.getName().str(), f.getFnAttribute(kKernelAttr).getValueAsString().str(), 0, false,
                              !llvm::getBooleanLoopAttribute(loop, "llvm.loop.isvectorized")};
      for (llvm::BasicBlock *bb : loop->blocks())
        for (llvm::Instruction &inst : *bb) {
          vector = vector || has_vector(inst);
          llvm::Value *ptr = nullptr;
          llvm::Type *type = nullptr;
          bool store = false;
          if (auto *load = llvm::dyn_cast<llvm::LoadInst>(&inst))
            ptr = load->getPointerOperand(), type = load->getType();
          else if (auto *st = llvm::dyn_cast<llvm::StoreInst>(&inst))
            ptr = st->getPointerOperand(), type = st->getValueOperand()->getType(), store = true;
          if (!ptr || !type->isFloatingPointTy())
            continue;
          floats = true;
          const auto *rec = llvm::dyn_cast<llvm::SCEVAddRecExpr>(se.getSCEV(ptr));
          if (!rec || rec->getLoop() != loop)
            continue;
          const auto *step = llvm::dyn_cast<llvm::SCEVConstant>(rec->getStepRecurrence(se));
          if (!step)
            continue;
          int64_t bytes = std::llabs(step->getAPInt().getSExtValue());
          if (bytes > worst.stride_bytes)
            worst.stride_bytes = bytes, worst.store = store;
        }
      // Scalar: past a cache line per element, or declined by the vectorizer
      // (its own scalar remainder loops carry llvm.loop.isvectorized).
      if (!vector && floats && (worst.stride_bytes > kCliffStrideBytes || worst.declined))
        out.push_back(worst);
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const ScalarStridedLoop &a, const ScalarStridedLoop &b) { return a.function < b.function; });
  return out;
}

} // namespace maxc

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
#include <map>
#include <set>
#include <tuple>

namespace maxc {

void tag_kernel_task(llvm::Function &task, const std::string &node_name, bool dedicated) {
  task.addFnAttr(kKernelAttr, node_name);
  if (dedicated)
    task.addFnAttr(kDedicatedKernelAttr);
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
      // At most a vector's worth of iterations (the remainder loops that
      // runtime unrolling splits off a vectorized loop's scalar tail):
      // never a cliff on its own.
      if (!loop->isInnermost())
        continue;
      if (unsigned trips = se.getSmallConstantMaxTripCount(loop); trips != 0 && trips <= kShortLoopTrips)
        continue;
      bool vector = false, floats = false;
      ScalarStridedLoop worst{f.getName().str(), f.getFnAttribute(kKernelAttr).getValueAsString().str(), 0, false,
                              !llvm::getBooleanLoopAttribute(loop, "llvm.loop.isvectorized")};
      // Accesses by (base pointer, step, store): the distinct starts of
      // each. An unrolled loop steps k elements per iteration through k
      // accesses of one stream: k * 4 bytes apart, but dense; the stride
      // per element is the step over the starts.
      std::map<std::tuple<const llvm::SCEV *, int64_t, bool>, std::set<const llvm::SCEV *>> streams;
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
          streams[{se.getPointerBase(rec->getStart()), bytes, store}].insert(rec->getStart());
        }
      for (const auto &[key, starts] : streams) {
        int64_t per_element = std::get<1>(key) / static_cast<int64_t>(starts.size());
        if (per_element > worst.stride_bytes)
          worst.stride_bytes = per_element, worst.store = std::get<2>(key);
      }
      // Scalar: past a cache line per element, or declined by the vectorizer
      // (its own scalar remainder loops carry llvm.loop.isvectorized).
      if (!vector && floats &&
          (worst.stride_bytes > kCliffStrideBytes || (worst.declined && !f.hasFnAttribute(kDedicatedKernelAttr))))
        out.push_back(worst);
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const ScalarStridedLoop &a, const ScalarStridedLoop &b) { return a.function < b.function; });
  return out;
}

} // namespace maxc

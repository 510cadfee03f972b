#include "maxc/Codegen/ModuleSplit.h"

#include "EntryPointUtil.h"
#include "maxc/Codegen/ObjectEmitter.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/DataLayout.h>
#include <llvm/IR/Module.h>
#include <llvm/Transforms/Utils/Cloning.h>
#include <llvm/Transforms/Utils/ValueMapper.h>

#include <algorithm>
#include <map>
#include <set>

namespace maxc::codegen {

namespace {

/// An internal function bigger than this is placed once, not copied into
/// every piece that calls it (the inliner would not inline it anyway).
constexpr size_t kMaxCopiedHelper = 2000;
/// An internal constant up to this size is copied into every piece that
/// reads it (so loads from it still fold).
constexpr uint64_t kMaxCopiedConstantBytes = 4096;

bool splittable(const llvm::Module &module) {
  if (!module.alias_empty() || !module.ifunc_empty() || !module.getComdatSymbolTable().empty() ||
      !module.getModuleInlineAsm().empty())
    return false;
  for (const llvm::GlobalVariable &gv : module.globals())
    if (gv.hasAppendingLinkage() || gv.getName().starts_with("llvm."))
      return false;
  return true;
}

/// A function that stays internal and is copied wherever it is called.
bool is_helper(const llvm::Function &f) {
  return f.hasLocalLinkage() && !f.hasAddressTaken() && !f.hasFnAttribute(llvm::Attribute::NoInline) &&
         f.getInstructionCount() <= kMaxCopiedHelper;
}

/// A global variable that stays internal and is copied wherever it is read.
bool is_copied_constant(const llvm::GlobalVariable &gv) {
  if (!gv.hasLocalLinkage() || !gv.isConstant() || !gv.hasInitializer() || gv.isThreadLocal() ||
      gv.getInitializer()->needsRelocation())
    return false;
  const llvm::DataLayout &layout = gv.getParent()->getDataLayout();
  return layout.getTypeAllocSize(gv.getValueType()) <= kMaxCopiedConstantBytes;
}

/// The copied helpers and constants that what `piece` defines reaches.
class Reach {
public:
  std::set<const llvm::GlobalValue *> copies;

  void function(const llvm::Function &f) {
    for (const llvm::BasicBlock &block : f)
      for (const llvm::Instruction &inst : block)
        for (const llvm::Value *operand : inst.operands())
          value(operand);
  }
  void value(const llvm::Value *v) {
    if (const auto *f = llvm::dyn_cast<llvm::Function>(v)) {
      if (!f->isDeclaration() && is_helper(*f) && copies.insert(f).second)
        function(*f);
    } else if (const auto *gv = llvm::dyn_cast<llvm::GlobalVariable>(v)) {
      if (!gv->isDeclaration() && is_copied_constant(*gv))
        copies.insert(gv);
    } else if (const auto *c = llvm::dyn_cast<llvm::Constant>(v)) {
      if (!llvm::isa<llvm::GlobalValue>(c) && c->getNumOperands() > 0 && seen_.insert(c).second)
        for (const llvm::Value *operand : c->operands())
          value(operand);
    }
  }

private:
  std::set<const llvm::Constant *> seen_;
};

void externalize(llvm::GlobalValue &gv, const std::string &prefix, size_t &unnamed) {
  if (!gv.hasLocalLinkage())
    return;
  gv.setLinkage(llvm::GlobalValue::ExternalLinkage);
  gv.setVisibility(llvm::GlobalValue::HiddenVisibility);
  gv.setDSOLocal(true);
  gv.setName(prefix + (gv.hasName() ? gv.getName().str() : "unnamed." + std::to_string(unnamed++)));
}

} // namespace

size_t instruction_count(const llvm::Module &module) {
  size_t n = 0;
  for (const llvm::Function &f : module)
    n += f.getInstructionCount();
  return n;
}

unsigned split_piece_count(const llvm::Module &module) {
  size_t n = instruction_count(module) / kSplitInstructions;
  return static_cast<unsigned>(std::clamp<size_t>(n, 1, kMaxSplitPieces));
}

std::vector<std::string> split_module(llvm::Module &module, unsigned pieces, const std::string &prefix) {
  if (pieces < 2 || !splittable(module))
    return {};
  // The functions placed in one piece each, largest first (ties: module
  // order), each to the piece with the fewest instructions so far.
  std::vector<llvm::Function *> placed;
  for (llvm::Function &f : module)
    if (!f.isDeclaration() && !is_helper(f))
      placed.push_back(&f);
  if (placed.size() < 2)
    return {};
  pieces = std::min<unsigned>(pieces, static_cast<unsigned>(placed.size()));
  std::stable_sort(placed.begin(), placed.end(), [](const llvm::Function *a, const llvm::Function *b) {
    return a->getInstructionCount() > b->getInstructionCount();
  });
  std::map<const llvm::GlobalValue *, unsigned> home;
  std::vector<size_t> load(pieces, 0);
  for (llvm::Function *f : placed) {
    unsigned lightest = static_cast<unsigned>(std::min_element(load.begin(), load.end()) - load.begin());
    home[f] = lightest;
    load[lightest] += std::max<size_t>(f->getInstructionCount(), 1);
  }
  for (llvm::GlobalVariable &gv : module.globals())
    if (!gv.isDeclaration() && !is_copied_constant(gv))
      home[&gv] = 0;

  // What each piece copies, found before any symbol changes linkage (the
  // helper and constant tests read it).
  std::vector<Reach> reach(pieces);
  for (const auto &[gv, piece] : home) {
    if (const auto *f = llvm::dyn_cast<llvm::Function>(gv))
      reach[piece].function(*f);
    else if (const auto *var = llvm::dyn_cast<llvm::GlobalVariable>(gv))
      reach[piece].value(var->getInitializer());
  }
  // In module order (not the map's pointer order): an unnamed symbol's
  // new name must not depend on where it was allocated.
  size_t unnamed = 0;
  for (llvm::Function &f : module)
    if (home.count(&f))
      externalize(f, prefix, unnamed);
  for (llvm::GlobalVariable &gv : module.globals())
    if (home.count(&gv))
      externalize(gv, prefix, unnamed);

  std::vector<std::string> out;
  for (unsigned k = 0; k < pieces; ++k) {
    llvm::ValueToValueMapTy map;
    std::unique_ptr<llvm::Module> piece = llvm::CloneModule(module, map, [&](const llvm::GlobalValue *gv) {
      auto it = home.find(gv);
      return it != home.end() ? it->second == k : reach[k].copies.count(gv) > 0;
    });
    piece->setModuleIdentifier(module.getModuleIdentifier() + ".piece" + std::to_string(k));
    verify_module(*piece, "piece " + std::to_string(k) + " of " + module.getName().str());
    out.push_back(bitcode_of(*piece));
  }
  return out;
}

} // namespace maxc::codegen

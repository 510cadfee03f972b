#include "Cpu/KernelEmitter.h"

#include "ElementalEmitter.h"
#include "EntryPointUtil.h"
#include "Cpu/AttentionEmitter.h"
#include "Cpu/ConvEmitter.h"
#include "Cpu/WinogradEmitter.h"
#include "Cpu/GemmEmitter.h"
#include "Cpu/GemmPanels.h"
#include "maxc/Codegen/LoopCheck.h"
#include "Cpu/NbitsGemvEmitter.h"
#include "Cpu/NormEmitter.h"
#include "Cpu/RecurrenceEmitter.h"
#include "Cpu/Runtime.h"
#include "maxc/Ops/TopK.h"
#include "MathEmitter.h"
#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/IR/GraphSymbols.h"
#include "maxc/Ops/OpRegistry.h"
#include "maxc/Support/Error.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

namespace maxc::codegen {

using llvm::Value;

namespace {

// ---------------------------------------------------------------------------
// Types: values are computed in a "compute type" (f16/bf16 as float, bool as
// i1) and stored in a "memory type" (f16 as half, bf16 as i16, bool as i8).


struct Module {
  llvm::Module &m;
  llvm::LLVMContext &ctx;
  std::string prefix;
  std::vector<std::string> symbols;
  unsigned lanes; // f32 vector width for the GEMM microkernel
  unsigned int8_dot; // the integer GEMM's dot product (Codegen/Target.h: cpu_int8_dot)
  const ExternalWeights *external; // null: constants are embedded globals
  const LoweringPlans *plans;      // the driver's; null: plan here
  std::map<const Graph *, EmittedGraph> functions;
  std::map<std::pair<const Graph *, std::string>, llvm::GlobalVariable *> constants;
  /// Per subgraph: the inputs that also arrive as Winograd weights, from
  /// each call site (winograd_call_site_inputs); buffer table entries after
  /// the outputs, in this order.
  std::map<std::string, std::vector<size_t>> winograd_inputs;
  /// The GEMM weights packed in panel order (Cpu/GemmPanels.h); null: none.
  const PackedWeights *packed = nullptr;
  /// Profile builds: each kernel's counter; null: none.
  const KernelCounters *profile = nullptr;
};

// ---------------------------------------------------------------------------

class FunctionEmitter : public ElementalEmitter {
public:
  FunctionEmitter(Module &mod, const Graph &g, EmittedGraph fns)
      : ElementalEmitter(mod.m, g, mod.plans ? mod.plans->at(&g) : plan_lowering(g, cpu_plan_options()), mod.symbols), mod_(mod),
        fns_(fns) {}

  void emit() {
    WorkspaceLayout::emit_size_function(fns_.workspace_size, g_, plan_, symbols_,
                                        [&](const Graph *callee) { return mod_.functions.at(callee).workspace_size; });
    llvm::Function *fn = fns_.run;
    auto *entry = llvm::BasicBlock::Create(mod_.ctx, "entry", fn);
    auto *body = llvm::BasicBlock::Create(mod_.ctx, "body", fn);
    entry_b_.SetInsertPoint(entry);
    entry_br_ = entry_b_.CreateBr(body);
    entry_b_.SetInsertPoint(entry_br_);
    b_.SetInsertPoint(body);
    begin_function(fn->getArg(1));
    begin_pointers(fn->getArg(0), fn->getArg(2));
    for (size_t n : plan_.kernels) {
      const Node &node = g_.nodes()[n];
      kernel_node_ = node.name.empty() ? node.op : node.name;
      llvm::Function *last = mod_.m.empty() ? nullptr : &mod_.m.getFunctionList().back();
      profiled(n, [&] { emit_kernel(n); });
      tag_new_tasks(last);
    }
    for (const auto &[out, v] : plan_.output_copies) {
      kernel_node_ = "output " + std::to_string(out) + " (copy)";
      profiled(g_.nodes().size() + out, [&] { emit_copy(v, out); });
    }
    b_.CreateRetVoid();
  }

private:
  /// Tags the functions the kernel just emitted created after `last` (its
  /// GEMM, conv, attention and integer tasks, made by the emitters of other
  /// files) with the kernel's node, as dedicated tasks, for the cliff check
  /// (LoopCheck.h; emit_parallel_rows tags its own). A task shared by later
  /// kernels (a GEMM panel without epilogue) keeps the first one's node.
  void tag_new_tasks(llvm::Function *last) {
    auto it = last ? std::next(last->getIterator()) : mod_.m.begin();
    for (; it != mod_.m.end(); ++it)
      if (!it->isDeclaration() && it->hasInternalLinkage() && !it->hasFnAttribute(kKernelAttr))
        tag_kernel_task(*it, kernel_node_, /*dedicated=*/true);
  }

  /// Workspace slots never overlap (WorkspaceLayout: one after another),
  /// so an elemental load or store through a slot's pointer gets that
  /// slot's alias scope and `noalias` for every other slot's: LLVM may then
  /// keep a value read from one slot in a register across the stores to
  /// another (per-channel parameters in a loop that writes the result) and
  /// vectorize loops whose offsets are symbolic. Values sharing a slot (in
  /// place, or placed inside another's) share its scope. The caller's
  /// buffers (the function's inputs and outputs, which may alias each
  /// other; a body's are its caller's slots or buffers, never the body's
  /// own workspace, which starts past its caller's slots) share one more
  /// scope, `noalias` with every slot: a copy of a model input into the
  /// workspace vectorizes. Constants or scratch carry nothing: may alias.
  void annotate_access(llvm::Instruction *access, Value *base) override {
    auto it = slot_of_pointer_.find(base);
    if (it == slot_of_pointer_.end())
      return;
    if (slot_scopes_.empty()) {
      llvm::MDBuilder md(mod_.ctx);
      llvm::MDNode *domain = md.createAnonymousAliasScopeDomain("maxc.workspace");
      for (size_t i = 0; i < plan_.slots.size(); ++i)
        slot_scopes_.push_back(md.createAnonymousAliasScope(domain, "slot " + std::to_string(i)));
      slot_scopes_.push_back(md.createAnonymousAliasScope(domain, "caller buffers")); // index caller_scope()
      for (size_t i = 0; i < slot_scopes_.size(); ++i) {
        std::vector<llvm::Metadata *> others;
        for (size_t j = 0; j < slot_scopes_.size(); ++j)
          if (j != i)
            others.push_back(slot_scopes_[j]);
        slot_scope_lists_.push_back(llvm::MDNode::get(mod_.ctx, {slot_scopes_[i]}));
        slot_noalias_lists_.push_back(llvm::MDNode::get(mod_.ctx, others));
      }
    }
    if (it->second >= slot_scopes_.size())
      return;
    access->setMetadata(llvm::LLVMContext::MD_alias_scope, slot_scope_lists_[it->second]);
    access->setMetadata(llvm::LLVMContext::MD_noalias, slot_noalias_lists_[it->second]);
  }
  /// The alias scope index of the caller's buffers (after the slots').
  size_t caller_scope() const { return plan_.slots.size(); }
  std::map<Value *, size_t> slot_of_pointer_;
  std::vector<llvm::MDNode *> slot_scopes_, slot_scope_lists_, slot_noalias_lists_;

  /// The model node whose kernel is being emitted (its task functions are
  /// tagged with it: Cpu/LoopCheck.h).
  std::string kernel_node_;

  /// Emits a kernel (`key`: its node, or nodes + i for output copy i),
  /// in a profile build between the runtime's profile calls on its counter.
  void profiled(size_t key, const std::function<void()> &emit_it) {
    if (!mod_.profile)
      return emit_it();
    auto it = mod_.profile->index.find({&g_, key});
    if (it == mod_.profile->index.end())
      return emit_it();
    Value *t0 = emit_profile_begin(b_, mod_.prefix);
    emit_it();
    auto *counter = b_.CreateConstInBoundsGEP2_64(mod_.profile->table->getValueType(), mod_.profile->table, 0, it->second);
    emit_profile_end(b_, mod_.prefix, counter, t0);
  }

  /// Where the current function's buffers are: its arguments, the pointers
  /// loaded from them, its workspace layout.
  struct Pointers {
    Value *buffers = nullptr, *workspace = nullptr;
    std::map<size_t, Value *> buffer_args;
    std::map<ValueId, Value *> temp_pointers;
    std::map<std::pair<const Graph *, std::string>, Value *> external_pointers;
    std::unique_ptr<WorkspaceLayout> layout;
  };

  void begin_pointers(Value *buffers, Value *workspace) {
    fn_ = Pointers{};
    fn_.buffers = buffers;
    fn_.workspace = workspace;
    fn_.layout = std::make_unique<WorkspaceLayout>(plan_, *dim_values_, entry_b_);
  }

  Value *buffer_arg(size_t index) {
    if (auto it = fn_.buffer_args.find(index); it != fn_.buffer_args.end())
      return it->second;
    Value *ptr = entry_b_.CreateConstGEP1_64(entry_b_.getPtrTy(), fn_.buffers, index);
    Value *arg = entry_b_.CreateLoad(entry_b_.getPtrTy(), ptr);
    slot_of_pointer_[arg] = caller_scope();
    return fn_.buffer_args[index] = arg;
  }

  Value *output_pointer(size_t out) { return buffer_arg(g_.input_ids().size() + out); }

  llvm::GlobalVariable *constant_global(const std::string &name) {
    auto key = std::make_pair(&g_, name);
    if (auto it = mod_.constants.find(key); it != mod_.constants.end())
      return it->second;
    const HostTensor &data = g_.constant(name);
    // A GEMM weight packed in panel order (Cpu/GemmPanels.h) holds only that.
    bool packed = mod_.packed && mod_.packed->packed_constant(g_, name);
    bool int8 = data.dtype() == DType::u8 || data.dtype() == DType::i8;
    bool conv_int8 = packed && mod_.packed->conv_int8.count({&g_, name});
    bool conv_transposed = packed && mod_.packed->conv_transposed.count({&g_, name});
    DType narrow = packed ? mod_.packed->constant_dtype(g_, name) : DType::f32;
    llvm::Constant *bytes =
        conv_int8 ? llvm::ConstantDataArray::get(mod_.ctx, llvm::ArrayRef<uint8_t>(pack_conv_int8_weight(data)))
        : conv_transposed && narrow != DType::f32
            ? llvm::ConstantDataArray::get(
                  mod_.ctx, llvm::ArrayRef<uint16_t>(narrow_panels(pack_conv_transposed_weight(data, mod_.packed->nr), narrow)))
        : conv_transposed
            ? llvm::ConstantDataArray::get(mod_.ctx,
                                           llvm::ArrayRef<float>(pack_conv_transposed_weight(data, mod_.packed->nr)))
        : packed && int8 ? llvm::ConstantDataArray::get(mod_.ctx, llvm::ArrayRef<uint8_t>(pack_int8_panels(data, mod_.packed->nr)))
        : packed && narrow != DType::f32
            ? llvm::ConstantDataArray::get(
                  mod_.ctx, llvm::ArrayRef<uint16_t>(narrow_panels(pack_gemm_panels(data, mod_.packed->nr), narrow)))
        : packed
            ? llvm::ConstantDataArray::get(mod_.ctx, llvm::ArrayRef<float>(pack_gemm_panels(data, mod_.packed->nr)))
            : llvm::ConstantDataArray::getRaw(
                  llvm::StringRef(reinterpret_cast<const char *>(data.data()), data.nbytes()), data.nbytes(),
                  llvm::Type::getInt8Ty(mod_.ctx));
    std::string global_name = mod_.prefix + ".const." + (&g_ == g_.root() ? "" : g_.name() + ".") + name;
    auto *gv = new llvm::GlobalVariable(mod_.m, bytes->getType(), true, llvm::GlobalValue::InternalLinkage, bytes,
                                        global_name);
    gv->setAlignment(llvm::Align(64));
    return mod_.constants[key] = gv;
  }

  bool run_time_weights() const { return mod_.external && !mod_.external->symbol; }

  /// A constant inside the run-time weights blob: base + offset.
  Value *external_constant(const std::string &name) {
    auto key = std::make_pair(&g_, name);
    if (auto it = fn_.external_pointers.find(key); it != fn_.external_pointers.end())
      return it->second;
    Value *base = entry_b_.CreateLoad(entry_b_.getPtrTy(), mod_.external->base);
    Value *p = entry_b_.CreateGEP(entry_b_.getInt8Ty(), base,
                                  entry_b_.getInt64(static_cast<int64_t>(mod_.external->offsets.at(key))));
    return fn_.external_pointers[key] = p;
  }

  /// Where a stored value lives.
  Value *pointer_of(ValueId v) override {
    const ValuePlan &p = plan_.values[v];
    switch (p.storage) {
    case Storage::input: return buffer_arg(p.index);
    case Storage::output: return output_pointer(p.index);
    case Storage::temp: {
      if (auto it = fn_.temp_pointers.find(v); it != fn_.temp_pointers.end())
        return it->second;
      Value *ptr = entry_b_.CreateGEP(entry_b_.getInt8Ty(), fn_.workspace, fn_.layout->slot_offset(p.index));
      // Placed inside another value's slot (an in-place concat or split).
      if (auto it = plan_.slot_offsets.find(v); it != plan_.slot_offsets.end() && it->second != 0)
        ptr = entry_b_.CreateGEP(entry_b_.getInt8Ty(), ptr, entry_b_.getInt64(it->second));
      slot_of_pointer_[ptr] = p.index;
      return fn_.temp_pointers[v] = ptr;
    }
    case Storage::constant: {
      const Node &n = g_.nodes()[g_.value_info(v).producer];
      if (mod_.external && mod_.external->symbol)
        return llvm::ConstantExpr::getGetElementPtr(
            entry_b_.getInt8Ty(), mod_.external->symbol,
            entry_b_.getInt64(static_cast<int64_t>(mod_.external->offsets.at({&g_, n.attrs.get_string("name")}))));
      if (mod_.external)
        return external_constant(n.attrs.get_string("name"));
      return constant_global(n.attrs.get_string("name"));
    }
    case Storage::fused: break;
    }
    throw Error(ErrorCode::Internal, "codegen: value %" + std::to_string(v) + " has no storage");
  }


  // ---- kernels ----

  void emit_kernel(size_t n) {
    const Node &node = g_.nodes()[n];
    if (is_call(node))
      return emit_call(node);
    if (is_branch(node))
      return emit_branch(node);
    if (is_loop(node))
      return emit_loop(node);
    if (defines_symbol(node))
      return emit_define_symbol(node);
    std::string lowering = cpu_lowering(node.op);
    if (lowering == "state")
      return emit_buffer_write(node);
    if (lowering == "collective")
      return emit_collective(node);
    if (lowering == kTopKOp)
      return emit_top_k(node);
    if (lowering == "matmul")
      return emit_matmul(node);
    if (lowering == "rows")
      return emit_rows(node);
    if (lowering == "attention")
      return emit_attention(node);
    if (lowering == "recurrence")
      return emit_recurrence(node);
    if (lowering == "matmul_nbits")
      return emit_matmul_nbits(node);
    if (lowering == "conv2d" && conv_uses_int8_gemm(g_, plan_, node) && emit_conv_int8(node))
      return;
    if (lowering == "conv2d" && node_uses_gemm(g_, plan_, node))
      return emit_conv_gemm(node);
    if (lowering == "conv2d" && emit_conv_depthwise_dynamic(node))
      return;
    if (node.op == "max_pool2d" && emit_max_pool(node))
      return;
    if ((node.op == "min" || node.op == "max") && emit_full_min_max(node))
      return;
    if (emit_column_reduction(node))
      return;
    if (lowering != "conv2d" && lowering != "elemental")
      throw Error(ErrorCode::Internal, "codegen: no lowering for op '" + node.op + "'");
    if (emit_reshape_by_operand(node))
      return;
    if (emit_concat_by_operands(node))
      return;
    if (emit_transpose_tiles(node))
      return;
    for (size_t r = 0; r < node.results.size(); ++r) {
      ValueId v = node.results[r];
      if (plan_.values[v].storage == Storage::fused)
        continue;
      DType dtype = g_.type_of(v).dtype;
      const Shape &shape = g_.type_of(v).shape;
      // Trailing dims every value of the expression reads alike run as one
      // loop: index (0, ..., j, ..., 0) of them, j at the last dim not of
      // size 1 (the dims after it are 1: a broadcast operand's index there
      // passes through), is element j of the run.
      size_t merged = merged_trailing_dims(node, v);
      size_t at = shape.size() - 1; // used when merged < shape.size()
      while (merged < shape.size() && at > merged && shape[at].is_static() && shape[at].value() == 1)
        --at;
      Shape loop_shape(shape.begin(), shape.begin() + static_cast<std::ptrdiff_t>(merged));
      if (merged < shape.size()) {
        Dim run = shape[merged];
        for (size_t d = merged + 1; d < shape.size(); ++d)
          run = run * shape[d];
        loop_shape.push_back(run);
      }
      parallel_loop_nest(
          loop_shape, element_cost(node, v),
          [&](const Index &loop_idx) {
            Index idx(loop_idx.begin(), loop_idx.end());
            if (merged < shape.size()) {
              idx.pop_back();
              idx.resize(shape.size(), b_.getInt64(0));
              idx[at] = loop_idx.back();
            }
            store_element(dtype, pointer_of(v), linear_index(idx, dims_of(v)), node_element(node, r, idx));
          },
          stored_scalars_read(node), merged < shape.size() ? 1 : split_factor(node, shape));
    }
  }

  /// A stored transpose that moves its operand's last axis (NHWC <-> NCHW,
  /// a key's K^T in attention written as MatMul(q, Transpose(k))). The
  /// generic loop runs along the result's last axis, which reads the
  /// operand a whole row apart per element: Whisper's decoder spent 10 % of
  /// a step in four such K^T copies, one element at a time. Here the unit
  /// is a kTile x kTile tile of (result axis `a`, the one reading the
  /// operand's last axis; the result's last axis): kTile rows built along
  /// `a` (consecutive elements of the operand, which LLVM loads as vectors),
  /// transposed in registers by three rounds of shuffles, stored as kTile
  /// contiguous vectors. Tiles cut by an edge run element by element. Each
  /// element is computed once, by the same expression as the generic loop
  /// (node_element), so the values are the same bits.
  bool emit_transpose_tiles(const Node &node) {
    constexpr int64_t kTile = kTransposeTile;
    std::optional<size_t> axis = transpose_tile_axis(g_, node);
    if (!axis || plan_.values[node.results[0]].storage == Storage::fused)
      return false;
    const ValueId v = node.results[0];
    const DType dtype = g_.type_of(v).dtype;
    const Shape &shape = g_.type_of(v).shape;
    const size_t last = shape.size() - 1, a = *axis;
    Shape tiles = shape;
    tiles[a] = Dim::ceil_div(shape[a], Dim(kTile));
    tiles[last] = Dim::ceil_div(shape[last], Dim(kTile));
    parallel_loop_nest(
        tiles, b_.getInt64(kTile * kTile),
        [&](const Index &t) {
          std::vector<Value *> dims = dims_of(v);
          Value *tile = b_.getInt64(kTile);
          Value *i0 = b_.CreateMul(t[a], tile), *j0 = b_.CreateMul(t[last], tile);
          Value *ni = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateSub(dims[a], i0), tile);
          Value *nj = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateSub(dims[last], j0), tile);
          auto at = [&](Value *i, Value *j) {
            Index idx(t.begin(), t.end());
            idx[a] = i;
            idx[last] = j;
            return idx;
          };
          llvm::Function *f = b_.GetInsertBlock()->getParent();
          auto *whole = llvm::BasicBlock::Create(mod_.ctx, "tile.whole", f);
          auto *edge = llvm::BasicBlock::Create(mod_.ctx, "tile.edge", f);
          auto *done = llvm::BasicBlock::Create(mod_.ctx, "tile.done", f);
          b_.CreateCondBr(b_.CreateAnd(b_.CreateICmpEQ(ni, tile), b_.CreateICmpEQ(nj, tile)), whole, edge);
          b_.SetInsertPoint(whole);
          {
            // rows[r][c]: the element at (i0 + c, j0 + r).
            std::vector<Value *> rows;
            for (int64_t r = 0; r < kTile; ++r) {
              Value *row = nullptr;
              for (int64_t c = 0; c < kTile; ++c) {
                Value *e = node_element(node, 0, at(b_.CreateAdd(i0, b_.getInt64(c)), b_.CreateAdd(j0, b_.getInt64(r))));
                if (!row)
                  row = llvm::PoisonValue::get(llvm::FixedVectorType::get(e->getType(), kTile));
                row = b_.CreateInsertElement(row, e, b_.getInt64(c));
              }
              rows.push_back(row);
            }
            std::vector<Value *> columns = transpose_8x8(rows);
            llvm::Type *mt = memory_type(mod_.ctx, dtype);
            for (int64_t c = 0; c < kTile; ++c) {
              Value *linear = linear_index(at(b_.CreateAdd(i0, b_.getInt64(c)), j0), dims);
              annotate_access(b_.CreateAlignedStore(columns[static_cast<size_t>(c)], b_.CreateGEP(mt, pointer_of(v), linear),
                                                    llvm::Align(mt->getScalarSizeInBits() / 8)),
                              pointer_of(v));
            }
            b_.CreateBr(done);
          }
          // An edge tile: kTile x kTile iterations (a trip count LLVM
          // and the cliff check see), those inside the result computed.
          b_.SetInsertPoint(edge);
          loop(tile, [&](Value *i) {
            loop(tile, [&](Value *j) {
              auto *in = llvm::BasicBlock::Create(mod_.ctx, "tile.in", f);
              auto *next = llvm::BasicBlock::Create(mod_.ctx, "tile.next", f);
              b_.CreateCondBr(b_.CreateAnd(b_.CreateICmpSLT(i, ni), b_.CreateICmpSLT(j, nj)), in, next);
              b_.SetInsertPoint(in);
              Index idx = at(b_.CreateAdd(i0, i), b_.CreateAdd(j0, j));
              store_element(dtype, pointer_of(v), linear_index(idx, dims), node_element(node, 0, idx));
              b_.CreateBr(next);
              b_.SetInsertPoint(next);
            });
          });
          b_.CreateBr(done);
          b_.SetInsertPoint(done);
        },
        stored_scalars_read(node));
    return true;
  }

  /// The transpose of 8 vectors of 8 elements (out[c][r] = rows[r][c]):
  /// pairs interleaved within 128-bit halves, then pairs of pairs, then the
  /// halves exchanged (x86: unpck, shufps, vperm2f128).
  std::vector<Value *> transpose_8x8(const std::vector<Value *> &rows) {
    auto shuffle = [&](Value *x, Value *y, std::array<int, 8> mask) { return b_.CreateShuffleVector(x, y, mask); };
    std::vector<Value *> t(8), u(8), out(8);
    for (size_t k = 0; k < 4; ++k) {
      t[2 * k] = shuffle(rows[2 * k], rows[2 * k + 1], {0, 8, 1, 9, 4, 12, 5, 13});
      t[2 * k + 1] = shuffle(rows[2 * k], rows[2 * k + 1], {2, 10, 3, 11, 6, 14, 7, 15});
    }
    for (size_t k = 0; k < 8; k += 4) {
      u[k] = shuffle(t[k], t[k + 2], {0, 1, 8, 9, 4, 5, 12, 13});
      u[k + 1] = shuffle(t[k], t[k + 2], {2, 3, 10, 11, 6, 7, 14, 15});
      u[k + 2] = shuffle(t[k + 1], t[k + 3], {0, 1, 8, 9, 4, 5, 12, 13});
      u[k + 3] = shuffle(t[k + 1], t[k + 3], {2, 3, 10, 11, 6, 7, 14, 15});
    }
    for (size_t c = 0; c < 4; ++c) {
      out[c] = shuffle(u[c], u[c + 4], {0, 1, 2, 3, 8, 9, 10, 11});
      out[c + 4] = shuffle(u[c], u[c + 4], {4, 5, 6, 7, 12, 13, 14, 15});
    }
    return out;
  }

  /// The first of the trailing dims of `v` (the result of elementwise
  /// `node`) that its loop nest may run as one flat loop: every value of
  /// the expression it computes (the fused elementwise ops and `full`s
  /// down to the stored values) either spans all of them, equal to v's, or
  /// is broadcast along all of them (dims of size 1 in v are either).
  /// Element (0, ..., j, ..., 0) of such dims (j at the last one not of
  /// size 1) is then the run's element j in every operand, row-major: a
  /// squeeze-excite scale x[n, c, h, w] * s[n, c, 1, 1] loops over h*w
  /// rather than over h with a short w inside, which LLVM unrolls. v.rank()
  /// (none) for any other op in the expression (a view, a generator that
  /// reads its index) or fewer than two such dims.
  size_t merged_trailing_dims(const Node &node, ValueId v) const {
    const Shape &out = g_.type_of(v).shape;
    const size_t rank = out.size();
    if (rank < 2 || !op_traits(node.op).has(OpTrait::elementwise))
      return rank;
    // Per value, per dim of v: 0 where v's dim is 1, 1 where the value
    // spans it, 2 where it is broadcast along it (or has no such dim).
    std::vector<std::vector<int>> kinds;
    bool mergeable = visit_expression(node, [&](ValueId u, const Node *producer) {
      const Shape &s = g_.type_of(u).shape;
      if (s.size() > rank)
        return false;
      std::vector<int> k(rank, 2);
      for (size_t d = 0; d < rank; ++d) {
        if (out[d].is_static() && out[d].value() == 1)
          k[d] = 0;
        else if (d + s.size() >= rank) {
          const Dim &sd = s[d + s.size() - rank];
          k[d] = sd.is_static() && sd.value() == 1 ? 2 : 1;
        }
      }
      kinds.push_back(std::move(k));
      return !producer || producer->op == "full" || op_traits(producer->op).has(OpTrait::elementwise);
    });
    if (!mergeable)
      return rank;
    size_t first = rank;
    std::vector<int> run(kinds.size(), 0); // each value's kind across dims [first, rank)
    while (first > 0) {
      size_t d = first - 1;
      bool ok = true;
      for (size_t i = 0; i < kinds.size() && ok; ++i)
        ok = kinds[i][d] == 0 || run[i] == 0 || run[i] == kinds[i][d];
      if (!ok)
        break;
      for (size_t i = 0; i < kinds.size(); ++i)
        if (kinds[i][d] != 0)
          run[i] = kinds[i][d];
      first = d;
    }
    return rank - first >= 2 ? first : rank;
  }

  /// Calls visit(u, producer) for each value u of the expression `node`
  /// computes (its operands, then their fused producers' operands...), once
  /// each; producer is u's node when u is fused (computed in place), null
  /// for a stored value (a leaf). False as soon as visit returns false, or
  /// past 4096 values.
  bool visit_expression(const Node &node, const std::function<bool(ValueId, const Node *)> &visit) const {
    std::vector<ValueId> work(node.operands.begin(), node.operands.end());
    std::set<ValueId> seen;
    while (!work.empty()) {
      ValueId u = work.back();
      work.pop_back();
      if (!seen.insert(u).second)
        continue;
      if (seen.size() > 4096)
        return false;
      const Node *producer = nullptr;
      if (plan_.values[u].storage == Storage::fused && !element_overrides_.count(u)) {
        const ValueInfo &info = g_.value_info(u);
        if (info.producer < 0)
          return false;
        producer = &g_.nodes()[static_cast<size_t>(info.producer)];
      }
      if (!visit(u, producer))
        return false;
      if (producer)
        work.insert(work.end(), producer->operands.begin(), producer->operands.end());
    }
    return true;
  }

  /// The factor split_loop should cut the innermost loop of a nest over
  /// `out` computing `node` by (1: none): the last dim f of a fused
  /// reshape's operand (2 to 8) that the reshape merges into its last dim,
  /// which is out's last (a multiple of f at every size, symbolic or not)
  /// (a depth-to-space [.., W, f] -> [.., W*f], a nearest upsampling).
  /// Without the split each element divides its index by f.
  int64_t split_factor(const Node &node, const Shape &out) const {
    if (out.size() < 2)
      return 1;
    const Dim &extent = out.back();
    int64_t factor = 1;
    visit_expression(node, [&](ValueId u, const Node *producer) {
      if (!producer || producer->op != "reshape")
        return true;
      const Shape &os = g_.type_of(u).shape, &xs = g_.type_of(producer->operands[0]).shape;
      if (os.empty() || xs.empty() || os.back() != extent || !xs.back().is_static())
        return true;
      const int64_t f = xs.back().value();
      if (f >= 2 && f <= 8 && extent != Dim(f) && extent.exact_div(Dim(f))) {
        factor = f;
        return false;
      }
      return true;
    });
    return factor;
  }

  /// The stored one-element values the fused expression of `node` reads (a
  /// scale or zero point computed by an earlier kernel: DynamicQuantize-
  /// Linear's). parallel_loop_nest loads them once per task: loaded in the
  /// loop, each store of the result (the same workspace) may alias them,
  /// which kept the loop scalar (a quantization of Whisper's encoder states
  /// took 30x a vector loop's time).
  std::vector<ValueId> stored_scalars_read(const Node &node) const {
    std::vector<ValueId> out;
    visit_expression(node, [&](ValueId v, const Node *producer) {
      const Shape &shape = g_.type_of(v).shape;
      if (!producer && !element_overrides_.count(v) &&
          std::all_of(shape.begin(), shape.end(), [](const Dim &d) { return d.is_static() && d.value() == 1; }))
        out.push_back(v);
      return true;
    });
    return out;
  }

  /// A float sum / mean / max / min over axes that keep the operand's last
  /// dim (YOLOv8's DFL softmax over 16 bins at axis 1, a mean over rows).
  /// The generic loop computes one output element at a time, reading its
  /// reduced elements a whole row apart (16 such streams at once for the
  /// DFL, which the prefetchers do not follow: 4x slower than a contiguous
  /// pass). Here the units are (output row, block of kColumnBlock columns):
  /// the block's accumulators live in a stack array and, for each reduced
  /// index in row-major order, the block's columns are read contiguously in
  /// the innermost loop, which vectorizes. Each output element combines its
  /// elements in the same order as reduction() (max/min start from the
  /// first element, as its `first` flag does).
  bool emit_column_reduction(const Node &node) {
    constexpr int64_t kColumnBlock = 256;
    const std::string &op = node.op;
    if ((op != "sum" && op != "mean" && op != "max" && op != "min") || node.operands.size() != 1)
      return false;
    ValueId x = node.operands[0], out = node.results[0];
    const Shape &xs = g_.type_of(x).shape;
    DType d = g_.type_of(x).dtype;
    std::vector<int64_t> axes = node.attrs.get_ints("axes");
    if (plan_.values[out].storage == Storage::fused || (d != DType::f32 && d != DType::f64) ||
        g_.type_of(out).dtype != d || xs.size() < 2 || axes.empty())
      return false;
    size_t rank = xs.size();
    for (const Dim &e : xs)
      if (!e.is_static() || e.value() <= 0)
        return false;
    std::vector<bool> reduced(rank, false);
    for (int64_t a : axes)
      reduced[static_cast<size_t>(a < 0 ? a + static_cast<int64_t>(rank) : a)] = true;
    int64_t cols = xs.back().value();
    if (reduced[rank - 1] || cols < 16)
      return false;
    std::vector<Value *> kept, red; // the kept dims before the last; the reduced dims
    int64_t rows = 1, count = 1;
    for (size_t k = 0; k + 1 < rank; ++k) {
      (reduced[k] ? red : kept).push_back(b_.getInt64(xs[k].value()));
      (reduced[k] ? count : rows) *= xs[k].value();
    }
    int64_t blocks = (cols + kColumnBlock - 1) / kColumnBlock, width = std::min(cols, kColumnBlock);
    bool extremum = op == "max" || op == "min", max = op == "max";
    emit_parallel_rows(b_.getInt64(rows * blocks), b_.getInt64(count * width), [&](Value *begin, Value *end) {
      llvm::Type *t = compute_type(ctx_, d), *acc_t = extremum ? t : b_.getDoubleTy();
      Value *acc = local(llvm::ArrayType::get(acc_t, static_cast<uint64_t>(kColumnBlock)));
      Value *ptr = pointer_of(out);
      loop(b_.CreateSub(end, begin), [&](Value *i) {
        Value *unit = b_.CreateAdd(begin, i);
        Value *row = b_.CreateUDiv(unit, b_.getInt64(blocks));
        Value *col0 = b_.CreateMul(b_.CreateURem(unit, b_.getInt64(blocks)), b_.getInt64(kColumnBlock));
        Value *n = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.getInt64(kColumnBlock),
                                            b_.CreateSub(b_.getInt64(cols), col0));
        Index outer = kept.empty() ? Index{} : unflatten(row, kept);
        auto at = [&](const Index &k, Value *c) {
          Index idx;
          size_t o = 0, r = 0;
          for (size_t dd = 0; dd + 1 < rank; ++dd)
            idx.push_back(reduced[dd] ? k[r++] : outer[o++]);
          idx.push_back(b_.CreateAdd(col0, c));
          return element(x, idx);
        };
        auto slot = [&](Value *c) { return b_.CreateGEP(acc_t, acc, c); };
        loop(n, [&](Value *c) {
          Value *init = extremum ? at(Index(red.size(), b_.getInt64(0)), c) : llvm::ConstantFP::get(acc_t, 0.0);
          b_.CreateStore(init, slot(c));
        });
        loop_nest(red, [&](const Index &k) {
          loop(n, [&](Value *c) {
            Value *v = at(k, c), *a = b_.CreateLoad(acc_t, slot(c)), *r;
            if (extremum) {
              // reduction()'s rule: the first NaN wins and stays.
              Value *take = b_.CreateAnd(b_.CreateNot(b_.CreateFCmpUNO(a, a)),
                                         b_.CreateOr(b_.CreateFCmpUNO(v, v),
                                                     max ? b_.CreateFCmpOGT(v, a) : b_.CreateFCmpOLT(v, a)));
              r = b_.CreateSelect(take, v, a);
            } else {
              r = b_.CreateFAdd(a, b_.CreateFPExt(v, acc_t));
            }
            b_.CreateStore(r, slot(c));
          });
        });
        Value *base = b_.CreateAdd(b_.CreateMul(row, b_.getInt64(cols)), col0);
        loop(n, [&](Value *c) {
          Value *r = b_.CreateLoad(acc_t, slot(c));
          if (op == "mean")
            r = b_.CreateFDiv(r, llvm::ConstantFP::get(acc_t, static_cast<double>(count)));
          if (!extremum)
            r = b_.CreateFPTrunc(r, t);
          store_element(d, ptr, b_.CreateAdd(base, c), r);
        });
      });
    });
    return true;
  }

  /// A stored concat (one not in place: LoweringPlan::in_place) as one
  /// loop nest per operand over that operand's shape, each element stored
  /// at its place in the result: every operand is read once, in order (the
  /// elemental concat reads every operand at a clamped index for each
  /// element and selects one).
  bool emit_concat_by_operands(const Node &node) {
    if (node.op != "concat" || node.results.size() != 1 || plan_.values[node.results[0]].storage == Storage::fused)
      return false;
    ValueId out = node.results[0];
    const Shape &os = g_.type_of(out).shape;
    int64_t axis = node.attrs.get_int("axis");
    if (axis < 0)
      axis += static_cast<int64_t>(os.size());
    DType dtype = g_.type_of(out).dtype;
    for (size_t k = 0; k < node.operands.size(); ++k) {
      ValueId x = node.operands[k];
      parallel_loop_nest(g_.type_of(x).shape, element_cost(node, out), [&](const Index &idx) {
        Value *offset = b_.getInt64(0); // the operands before x along the axis (in this function)
        for (size_t j = 0; j < k; ++j)
          offset = b_.CreateAdd(offset, dim(g_.type_of(node.operands[j]).shape[static_cast<size_t>(axis)]));
        Index at = idx;
        at[static_cast<size_t>(axis)] = b_.CreateAdd(idx[static_cast<size_t>(axis)], offset);
        store_element(dtype, pointer_of(out), linear_index(at, dims_of(out)), element(x, idx));
      });
    }
    return true;
  }

  /// Whether each of vs's dims is the product of a run of xs's consecutive
  /// dims, vs having fewer (a pure merge; size-1 dims of xs join any run).
  static bool merges_runs(const Shape &xs, const Shape &vs) {
    if (vs.size() >= xs.size())
      return false;
    size_t i = 0;
    for (const Dim &d : vs) {
      if (i == xs.size())
        return false;
      Dim p = xs[i++];
      while (p != d && i < xs.size() && (!p.is_static() || !d.is_static() || p.value() < d.value()))
        p = p * xs[i++];
      if (p != d)
        return false;
    }
    for (; i < xs.size(); ++i)
      if (xs[i] != Dim(1))
        return false;
    return true;
  }

  /// A kernel that ends in a reshape of a fused value whose innermost dim is
  /// a small constant the reshape merges away (a depth-to-space transpose
  /// [..., W, 2] -> [..., 2W]), or that merges runs of dims above a wider
  /// innermost dim ([.., H, W] -> [.., H*W]): the loop runs over the operand's shape
  /// instead (the same row-major positions), so the small dim's loop unrolls
  /// and the one above it reads its sources contiguously.
  bool emit_reshape_by_operand(const Node &node) {
    if (node.op != "reshape")
      return false;
    ValueId x = node.operands[0], v = node.results[0];
    const Shape &xs = g_.type_of(x).shape, &vs = g_.type_of(v).shape;
    if (plan_.values[x].storage != Storage::fused || plan_.values[v].storage == Storage::fused || xs.size() < 2 ||
        vs.empty() || xs.back() == vs.back())
      return false;
    bool small = xs.back().is_static() && xs.back().value() <= 4 && xs.back().value() >= 2;
    // Or a merge of runs of x's dims ([.., H, W] -> [.., H*W]) above an
    // innermost dim of a vector or more: x's loops need no division, the
    // result's would unravel H*W per element (and stay scalar).
    bool merge = (!xs.back().is_static() || xs.back().value() >= 8) && merges_runs(xs, vs);
    if (!small && !merge)
      return false;
    DType dtype = g_.type_of(v).dtype;
    parallel_loop_nest(
        xs, element_cost(node, v),
        [&](const Index &idx) { store_element(dtype, pointer_of(v), linear_index(idx, dims_of(x)), element(x, idx)); },
        {}, split_factor(node, xs));
    return true;
  }

  // all_reduce / all_gather: a call of the runtime's communicator
  // (RuntimePool.c, NAME_set_communicator), on the calling thread.
  void emit_collective(const Node &node) {
    ValueId x = node.operands[0], out = node.results[0];
    DType dtype = g_.type_of(x).dtype;
    Value *world = b_.getInt32(static_cast<int32_t>(node.attrs.get_int("world")));
    std::vector<Value *> dims = dims_of(x);
    Value *count = b_.getInt64(1);
    for (Value *d : dims)
      count = b_.CreateMul(count, d);
    auto *ptr = b_.getPtrTy();
    llvm::Module &m = *b_.GetInsertBlock()->getModule();
    if (node.op == "all_reduce") {
      if (dtype != DType::f32)
        throw Error(ErrorCode::InvalidGraph, "all_reduce of " + g_.type_of(x).to_string() +
                                                 ": the CPU backend sums f32 only");
      Value *dst = pointer_of(out);
      b_.CreateMemCpy(dst, llvm::MaybeAlign(4), pointer_of(x), llvm::MaybeAlign(4), b_.CreateMul(count, b_.getInt64(4)));
      auto fn = m.getOrInsertFunction(mod_.prefix + ".rt.all_reduce_f32",
                                      llvm::FunctionType::get(b_.getVoidTy(), {ptr, b_.getInt64Ty(), b_.getInt32Ty()}, false));
      b_.CreateCall(fn, {dst, count, world});
      return;
    }
    int64_t axis = node.attrs.get_int("axis");
    Value *outer = b_.getInt64(1), *chunk = b_.getInt64(static_cast<int64_t>(dtype_size(dtype)));
    for (size_t a = 0; a < dims.size(); ++a)
      if (static_cast<int64_t>(a) < axis)
        outer = b_.CreateMul(outer, dims[a]);
      else
        chunk = b_.CreateMul(chunk, dims[a]);
    auto fn = m.getOrInsertFunction(
        mod_.prefix + ".rt.all_gather",
        llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr, b_.getInt64Ty(), b_.getInt64Ty(), b_.getInt32Ty()}, false));
    b_.CreateCall(fn, {pointer_of(x), pointer_of(out), outer, chunk, world});
  }

  // top_k (kept whole, f32): the runtime's selection per row (RuntimePool.c).
  void emit_top_k(const Node &node) {
    ValueId x = node.operands[0];
    std::vector<Value *> dims = dims_of(x);
    Value *rows = b_.getInt64(1);
    for (size_t a = 0; a + 1 < dims.size(); ++a)
      rows = b_.CreateMul(rows, dims[a]);
    auto *ptr = b_.getPtrTy();
    auto stored = [&](ValueId v) -> Value * {
      return plan_.values[v].storage == Storage::fused ? static_cast<Value *>(llvm::ConstantPointerNull::get(ptr))
                                                       : pointer_of(v);
    };
    llvm::Module &m = *b_.GetInsertBlock()->getModule();
    auto fn = m.getOrInsertFunction(mod_.prefix + ".rt.top_k_f32", b_.getVoidTy(), ptr, b_.getInt64Ty(), b_.getInt64Ty(),
                                    b_.getInt64Ty(), b_.getInt32Ty(), ptr, ptr);
    b_.CreateCall(fn, {pointer_of(x), rows, dims.back(), dim(node.attrs.get_shape("k")[0]),
                       b_.getInt32(node.attrs.get_bool("largest", true) ? 1 : 0), stored(node.results[0]),
                       stored(node.results[1])});
  }

  // buffer_append: the new rows stored at rows [offset, offset + n) of the
  // state buffer, which is the result's storage (aliases_operand);
  // buffer_prefix moves nothing.
  void emit_buffer_write(const Node &node) {
    if (!writes_buffer(node))
      return;
    ValueId x = node.operands[1], out = node.results[0];
    DType dtype = g_.type_of(x).dtype;
    parallel_loop_nest(g_.type_of(x).shape, b_.getInt64(1), [&](const Index &idx) {
      Index at = idx;
      at[0] = b_.CreateAdd(idx[0], dim(node.attrs.get_shape("offset")[0]));
      store_element(dtype, pointer_of(out), linear_index(at, dims_of(out)), element(x, idx));
    });
  }

  // softmax / log_softmax (last axis), layer_norm / rms_norm (trailing
  // weight.rank() axes): one row kernel (Cpu/NormEmitter.h) per outer index,
  // the rows split into tasks (emit_parallel_rows; a row is never split, so
  // every row's statistics are summed in the same order at any thread count).
  void emit_rows(const Node &node) {
    ValueId x = node.operands[0], out = node.results[0];
    size_t inner = node.attrs.has("axis") ? 1 : static_cast<size_t>(g_.type_of(node.operands[1]).rank());
    const Shape &shape = g_.type_of(out).shape;
    auto product = [&](size_t from, size_t to) {
      Value *p = b_.getInt64(1);
      for (size_t d = from; d < to; ++d)
        p = b_.CreateMul(p, dim(shape[d]));
      return p;
    };
    size_t lead = shape.size() - inner;
    // Two or three reads and one write per element, an exp for softmax.
    Value *row_cost = b_.CreateMul(product(lead, shape.size()), b_.getInt64(4));
    emit_parallel_rows(product(0, lead), row_cost, [&](Value *begin, Value *end) {
      std::vector<Value *> dims = dims_of(out);
      std::vector<Value *> outer(dims.begin(), dims.begin() + lead), tail(dims.begin() + lead, dims.end());
      Value *cols = b_.getInt64(1);
      for (Value *d : tail)
        cols = b_.CreateMul(cols, d);
      auto trailing = [&](Value *col) { return unflatten(col, tail); }; // col -> the index in the trailing dims
      Value *ptr = pointer_of(out);
      loop(b_.CreateSub(end, begin), [&](Value *i) {
        Value *flat = b_.CreateAdd(begin, i);
        Index row = unflatten(flat, outer);
        Value *base = b_.CreateMul(flat, cols);
        RowKernel r;
        r.op = node.op;
        r.cols = cols;
        r.eps = node.attrs.has("eps") ? node.attrs.get_real("eps") : 0.0;
        r.x = [&](Value *col) {
          Index idx = row, t = trailing(col);
          idx.insert(idx.end(), t.begin(), t.end());
          return element(x, idx);
        };
        if (node.operands.size() > 1)
          r.weight = [&](Value *col) { return element(node.operands[1], trailing(col)); };
        if (node.operands.size() > 2)
          r.bias = [&](Value *col) { return element(node.operands[2], trailing(col)); };
        r.store = [&](Value *col, Value *y) { store_element(DType::f32, ptr, b_.CreateAdd(base, col), y); };
        r.stored = [&](Value *col) { return load_element(DType::f32, ptr, b_.CreateAdd(base, col)); };
        r.loop = [&](Value *n, const std::function<void(Value *)> &body) { loop(n, body); };
        r.local = [&](llvm::Type *t) { return local(t); };
        emit_row_kernel(b_, r);
      });
    });
  }

  // matmul_nbits (f32, kept whole by DecomposeOptions::keep_matmul_nbits):
  // Cpu/NbitsGemvEmitter on the stored operands, a's leading dims as rows.
  void emit_matmul_nbits(const Node &node) {
    for (ValueId v : node.operands)
      if (plan_.values[v].storage == Storage::fused)
        throw Error(ErrorCode::Internal, "codegen: a matmul_nbits operand is not stored");
    ValueId out = node.results[0];
    std::vector<Value *> cdims = dims_of(out);
    Value *rows = b_.getInt64(1);
    for (size_t d = 0; d + 1 < cdims.size(); ++d)
      rows = b_.CreateMul(rows, cdims[d]);
    NbitsGemvArgs args{pointer_of(node.operands[0]), pointer_of(node.operands[1]), pointer_of(node.operands[2]),
                       node.operands.size() > 3 ? pointer_of(node.operands[3]) : nullptr, pointer_of(out), rows};
    args.k = node.attrs.get_int("K");
    args.n = node.attrs.get_int("N");
    args.bits = node.attrs.get_int("bits");
    args.block = node.attrs.get_int("block_size");
    args.lanes = mod_.lanes;
    args.prefix = mod_.prefix;
    emit_matmul_nbits_kernel(b_, args);
  }

  // recurrence (f32, kept whole by DecomposeOptions::keep_recurrence): the
  // state (Y_h, Y_c) initialized from h0/c0, then Cpu/RecurrenceEmitter's
  // loop over the steps. proj and r are stored (the planner fuses nothing
  // into this node); the small operands are read through element().
  void emit_recurrence(const Node &node) {
    using namespace recurrence;
    const Attrs &a = node.attrs;
    RecurrenceKernel k;
    k.cell = parse_cell(a.get_string("cell"));
    k.acts = node_activations(a, k.cell);
    k.reverse = a.get_bool("reverse");
    k.input_forget = a.get_bool("input_forget");
    k.lbr = k.cell == Cell::gru && a.get_bool("linear_before_reset");
    k.clip = a.get_real("clip");
    const Shape &rs = g_.type_of(node.operands[1]).shape;
    k.hidden = rs[1].value();
    k.block = rs[2].value();
    k.lanes = mod_.lanes;
    const int64_t H = k.hidden, GH = gates_of(k.cell) * H;
    std::vector<Value *> pd = dims_of(node.operands[0]);
    k.seq = pd[0];
    k.batch = pd[1];
    for (size_t i : {size_t(0), size_t(1)})
      if (plan_.values[node.operands[i]].storage == Storage::fused)
        throw Error(ErrorCode::Internal, "codegen: recurrence operand " + std::to_string(i) + " is not stored");
    for (ValueId v : node.results)
      if (plan_.values[v].storage == Storage::fused)
        throw Error(ErrorCode::Internal, "codegen: a recurrence result is not stored");
    k.proj = pointer_of(node.operands[0]);
    k.r = pointer_of(node.operands[1]);
    k.y = pointer_of(node.results[0]);
    k.h = pointer_of(node.results[1]);
    k.c = k.cell == Cell::lstm ? pointer_of(node.results[2]) : nullptr;
    size_t next = 3;
    ValueId c0 = k.cell == Cell::lstm ? node.operands[next++] : ValueId(-1);
    llvm::Type *f32 = b_.getFloatTy();
    // A small operand copied into an entry-block array of n floats.
    auto local_copy = [&](ValueId v, int64_t n) {
      Value *buf = entry_b_.CreateAlloca(llvm::ArrayType::get(f32, static_cast<uint64_t>(n)));
      loop(b_.getInt64(n), [&](Value *i) { b_.CreateStore(element(v, {i}), b_.CreateGEP(f32, buf, i)); });
      return buf;
    };
    if (k.cell == Cell::lstm && a.get_bool("peephole"))
      k.p = local_copy(node.operands[next++], 3 * H);
    if (k.lbr)
      k.rbh = local_copy(node.operands[next++], H);
    if (a.get_bool("masked")) {
      ValueId lens = node.operands[next++];
      DType ld = g_.type_of(lens).dtype;
      k.length = [this, lens, ld](Value *row) { return cast(element(lens, {row}), ld, DType::i64); };
    }
    // The state: h0 (and c0) into Y_h (and Y_c).
    loop_nest({k.batch, b_.getInt64(H)}, [&](const Index &idx) {
      Value *at = b_.CreateAdd(b_.CreateMul(idx[0], b_.getInt64(H)), idx[1]);
      b_.CreateStore(element(node.operands[2], idx), b_.CreateGEP(f32, k.h, at));
      if (k.c)
        b_.CreateStore(element(c0, idx), b_.CreateGEP(f32, k.c, at));
    });
    k.g = entry_b_.CreateAlloca(llvm::ArrayType::get(f32, static_cast<uint64_t>(GH)));
    k.tmp = entry_b_.CreateAlloca(llvm::ArrayType::get(f32, static_cast<uint64_t>(H)));
    k.local = [&](llvm::Type *t) { return local(t); };
    emit_recurrence_kernel(b_, k);
  }

  // attention (f32, static head dims): with q, k, v (and the mask) stored,
  // the query-block kernel function of Cpu/AttentionEmitter.h, one call per
  // (batch entry, block of `lanes` queries), those split into tasks;
  // otherwise (a fused generator operand, head dims past kMaxBlockHeadDim)
  // one flash-style loop per batch entry reading q, k, v, mask through the
  // elemental emitter.
  void emit_attention(const Node &node) {
    auto read = node.operands.begin() + (causal_mask(node) ? 3 : static_cast<std::ptrdiff_t>(node.operands.size()));
    // q, k, v: stored, or fused views of a stored buffer whose rows are
    // contiguous (PlanOptions::strided_attention_operands).
    bool readable = true;
    for (auto it = node.operands.begin(); it != read; ++it)
      readable = readable && (plan_.values[*it].storage != Storage::fused ||
                              (it - node.operands.begin() < 3 && row_view(*it).has_value()));
    if (readable &&
        g_.type_of(node.operands[0]).shape.back().value() <= kMaxBlockHeadDim &&
        g_.type_of(node.operands[2]).shape.back().value() <= kMaxBlockHeadDim)
      return emit_attention_blocks(node);
    ValueId out = node.results[0];
    const Shape &qs = g_.type_of(node.operands[0]).shape, &ks = g_.type_of(node.operands[1]).shape;
    size_t r = qs.size();
    std::vector<Value *> od = dims_of(out);
    std::vector<Value *> batch(od.begin(), od.end() - 2);
    Shape scores(qs.begin(), qs.end() - 1);
    scores.push_back(ks[r - 2]);
    Value *ptr = pointer_of(out);
    loop_nest(batch, [&](const Index &bidx) {
      auto at = [&](Value *row, Value *col) {
        Index idx = bidx;
        idx.push_back(row);
        idx.push_back(col);
        return idx;
      };
      AttentionKernel a;
      a.sq = od[r - 2];
      a.sk = dim(ks[r - 2]);
      a.d = qs[r - 1].value();
      a.dv = g_.type_of(out).shape[r - 1].value();
      a.scale = node.attrs.get_real("scale");
      a.fill = node.attrs.get_real("fill");
      // k and v of grouped-query attention: query head h reads kv head h / kv_groups.
      auto kv_at = [&](Value *row, Value *col) {
        Index idx = at(row, col);
        if (int64_t g = node.attrs.get_int("kv_groups"); g > 1)
          idx[r - 3] = b_.CreateUDiv(idx[r - 3], b_.getInt64(g));
        return idx;
      };
      a.q = [&](Value *i, Value *e) { return element(node.operands[0], at(i, e)); };
      a.k = [&](Value *j, Value *e) { return element(node.operands[1], kv_at(j, e)); };
      a.v = [&](Value *j, Value *e) { return element(node.operands[2], kv_at(j, e)); };
      if (node.operands.size() > 3)
        a.mask = [&](Value *i, Value *j) { return element(node.operands[3], broadcast(node.operands[3], scores, at(i, j))); };
      a.store = [&](Value *i, Value *e, Value *y) { store_element(DType::f32, ptr, linear_index(at(i, e), od), y); };
      a.loop = [&](Value *n, const std::function<void(Value *)> &body) { loop(n, body); };
      a.local = [&](llvm::Type *t) { return local(t); };
      emit_attention_kernel(b_, a);
    });
  }

  /// A fused q, k or v of the attention kernel: its view of a stored buffer
  /// with contiguous rows.
  std::optional<StridedView> row_view(ValueId v) const {
    std::optional<StridedView> view = strided_view(g_, plan_, v);
    if (!view || view->strides.back() != 1)
      return std::nullopt;
    return view;
  }

  bool causal_mask(const Node &node) const {
    return node.operands.size() > 3 && is_causal_mask(g_, node.operands[3], g_.type_of(node.operands[0]).shape,
                                                      g_.type_of(node.operands[1]).shape);
  }

  void emit_attention_blocks(const Node &node) {
    ValueId out = node.results[0];
    const Shape &qs = g_.type_of(node.operands[0]).shape, &ks = g_.type_of(node.operands[1]).shape;
    size_t r = qs.size();
    AttentionFunction a;
    a.d = qs[r - 1].value();
    a.dv = g_.type_of(out).shape[r - 1].value();
    a.lanes = mod_.lanes;
    a.scale = node.attrs.get_real("scale");
    a.fill = node.attrs.get_real("fill");
    Shape ms;
    if (node.operands.size() > 3) {
      ms = g_.type_of(node.operands[3]).shape;
      bool boolean = g_.type_of(node.operands[3]).dtype == DType::boolean;
      a.mask = causal_mask(node) ? AttentionFunction::Mask::causal
               : boolean        ? AttentionFunction::Mask::boolean
                                : AttentionFunction::Mask::additive;
      a.mask_per_row = ms.size() >= 2 && ms[ms.size() - 2] != Dim(1);
    }
    // Fused q, k, v: views (row_view) read in place, through their row strides.
    std::array<std::optional<StridedView>, 3> views;
    for (size_t i = 0; i < 3; ++i)
      if (plan_.values[node.operands[i]].storage == Storage::fused)
        views[i] = row_view(node.operands[i]);
    a.q_row_stride = views[0] ? views[0]->strides[r - 2] : a.d;
    a.k_row_stride = views[1] ? views[1]->strides[r - 2] : a.d;
    a.v_row_stride = views[2] ? views[2]->strides[r - 2] : a.dv;
    llvm::Function *kernel = emit_attention_function(mod_.m, mod_.prefix + ".attention", a);
    // A block of a quarter of the lanes or fewer rows (a decode step's one
    // row) runs row by row: the block kernel would leave most lanes idle.
    llvm::Function *rows_kernel = emit_attention_rows_function(mod_.m, mod_.prefix + ".attention_rows", a);
    Shape scores(qs.begin(), qs.end() - 1);
    scores.push_back(ks[r - 2]);
    int64_t w = a.lanes;
    auto extents = [&] { // batch dims, sq, sk, query blocks, batch entries (in the current function)
      std::vector<Value *> od = dims_of(out);
      std::vector<Value *> batch(od.begin(), od.end() - 2);
      Value *sq = od[r - 2], *sk = dim(ks[r - 2]);
      Value *blocks = b_.CreateUDiv(b_.CreateAdd(sq, b_.getInt64(w - 1)), b_.getInt64(w));
      Value *entries = b_.getInt64(1);
      for (Value *d : batch)
        entries = b_.CreateMul(entries, d);
      return std::make_tuple(batch, sq, sk, blocks, entries);
    };
    auto [batch0, sq0, sk0, blocks0, entries0] = extents();
    Value *cost = b_.CreateMul(b_.CreateMul(b_.getInt64(w), sk0), b_.getInt64(a.d + a.dv));
    emit_parallel_rows(b_.CreateMul(entries0, blocks0), cost, [&](Value *begin, Value *end) {
      std::vector<Value *> batch;
      Value *sq, *sk, *blocks, *entries;
      std::tie(batch, sq, sk, blocks, entries) = extents();
      (void)entries;
      loop(b_.CreateSub(end, begin), [&](Value *t) {
        Value *row = b_.CreateAdd(begin, t);
        Value *entry = b_.CreateUDiv(row, blocks), *i0 = b_.CreateMul(b_.CreateURem(row, blocks), b_.getInt64(w));
        // k and v's entry of grouped-query attention: query head h reads kv
        // head h / kv_groups, and q's batch entries run heads last.
        int64_t groups = node.attrs.get_int("kv_groups");
        auto at = [&](ValueId v, Value *rows, Value *e = nullptr) {
          return b_.CreateInBoundsGEP(b_.getFloatTy(), pointer_of(v),
                                      b_.CreateMul(e ? e : entry, b_.CreateMul(rows, b_.getInt64(g_.type_of(v).shape[r - 1].value()))));
        };
        auto batch_index = [&] {
          Index bidx(batch.size());
          Value *e = entry;
          for (size_t i = batch.size(); i-- > 0;) {
            bidx[i] = i == 0 ? e : b_.CreateURem(e, batch[i]);
            e = i == 0 ? e : b_.CreateUDiv(e, batch[i]);
          }
          return bidx;
        };
        // Operand i's rows for this batch entry.
        auto operand = [&](size_t i, Value *rows) {
          bool kv = i > 0 && groups > 1;
          if (!views[i])
            return at(node.operands[i], rows, kv ? b_.CreateUDiv(entry, b_.getInt64(groups)) : nullptr);
          Index bidx = batch_index();
          if (kv)
            bidx.back() = b_.CreateUDiv(bidx.back(), b_.getInt64(groups));
          Value *offset = b_.getInt64(views[i]->offset);
          for (size_t d = 0; d < bidx.size(); ++d)
            offset = b_.CreateAdd(offset, b_.CreateMul(bidx[d], b_.getInt64(views[i]->strides[d])));
          return b_.CreateInBoundsGEP(b_.getFloatTy(), pointer_of(views[i]->base), offset);
        };
        Value *mask = llvm::ConstantPointerNull::get(b_.getPtrTy()), *mrs = b_.getInt64(0), *mcs = b_.getInt64(0);
        if (a.mask == AttentionFunction::Mask::boolean || a.mask == AttentionFunction::Mask::additive) {
          ValueId m = node.operands[3];
          Index bidx = batch_index();
          Index idx = bidx;
          idx.push_back(b_.getInt64(0));
          idx.push_back(b_.getInt64(0));
          std::vector<Value *> mdims = dims_of(m);
          llvm::Type *et = a.mask == AttentionFunction::Mask::boolean ? b_.getInt8Ty() : b_.getFloatTy();
          mask = b_.CreateInBoundsGEP(et, pointer_of(m), linear_index(broadcast(m, scores, idx), mdims));
          size_t mr = ms.size();
          mcs = ms[mr - 1] == Dim(1) ? b_.getInt64(0) : b_.getInt64(1);
          if (a.mask_per_row)
            mrs = ms[mr - 1] == Dim(1) ? b_.getInt64(1) : mdims[mr - 1];
        }
        Value *i1 = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateAdd(i0, b_.getInt64(w)), sq);
        Value *few = b_.CreateICmpSLE(b_.CreateSub(i1, i0), b_.getInt64(std::max<int64_t>(w / 4, 1)));
        b_.CreateCall(kernel->getFunctionType(), b_.CreateSelect(few, rows_kernel, kernel),
                      {operand(0, sq), operand(1, sk), operand(2, sk), mask, at(out, sq), sq, sk, i0, i1, mrs, mcs});
      });
    });
  }

  void emit_copy(ValueId v, size_t out) {
    DType dtype = g_.type_of(v).dtype;
    parallel_loop_nest(g_.type_of(v).shape, b_.getInt64(1), [&](const Index &idx) {
      store_element(dtype, output_pointer(out), linear_index(idx, dims_of(v)), element(v, idx));
    });
  }

  // ---- splitting loops into tasks (Cpu/Runtime.h) ----

  /// Work units (about one element's load, compute and store) a task gets:
  /// less work than this in all runs as one task on the calling thread.
  static constexpr int64_t kTaskWork = 16384;

  /// Independent rows [0, rows), `row_cost` work units each (both values of
  /// the current function): body(begin, end) emits rows [begin, end) inside
  /// a task function of its own (`void NAME.rows(ptr, i64)`), where
  /// pointer_of, dims_of, element... give that function's values: the body
  /// must compute what it uses there, not capture the caller's values. Tasks
  /// of about kTaskWork units go through the runtime's parallel_for. The
  /// split depends on the shapes only, so results are the same bits at any
  /// thread count (rows must not share a reduction). Kernels in other files
  /// reach it through the FunctionEmitter they are emitted by.
  void emit_parallel_rows(Value *rows, Value *row_cost, const std::function<void(Value *, Value *)> &body) {
    llvm::LLVMContext &c = mod_.ctx;
    Value *cost = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, row_cost, b_.getInt64(1));
    Value *per = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, b_.CreateSDiv(b_.getInt64(kTaskWork), cost),
                                          b_.getInt64(1));
    Value *tasks = b_.CreateSDiv(b_.CreateAdd(rows, b_.CreateSub(per, b_.getInt64(1))), per);
    auto *ptr = b_.getPtrTy();
    auto *st = llvm::StructType::get(c, {ptr, ptr, ptr, b_.getInt64Ty(), b_.getInt64Ty()});
    Value *args = entry_b_.CreateAlloca(st);
    Value *fields[] = {fn_.buffers, dims_, fn_.workspace, rows, per};
    for (unsigned i = 0; i < 5; ++i)
      b_.CreateStore(fields[i], b_.CreateStructGEP(st, args, i));
    auto *task = llvm::Function::Create(task_function_type(c), llvm::GlobalValue::InternalLinkage,
                                        mod_.prefix + ".rows", mod_.m);
    task->addFnAttr(llvm::Attribute::NoUnwind);
    tag_kernel_task(*task, kernel_node_);
    {
      auto *entry = llvm::BasicBlock::Create(c, "entry", task);
      auto *body_block = llvm::BasicBlock::Create(c, "body", task);
      llvm::IRBuilder<> at(entry);
      auto field = [&](unsigned i, llvm::Type *t) { return at.CreateLoad(t, at.CreateStructGEP(st, task->getArg(0), i)); };
      std::vector<Value *> captured = {field(0, ptr), field(1, ptr), field(2, ptr)};
      Value *n = field(3, at.getInt64Ty()), *step = field(4, at.getInt64Ty());
      Value *begin = at.CreateMul(task->getArg(1), step);
      Value *end = at.CreateBinaryIntrinsic(llvm::Intrinsic::smin, at.CreateAdd(begin, step), n);
      at.SetInsertPoint(at.CreateBr(body_block));
      TaskScope scope(*this, at, captured);
      b_.SetInsertPoint(body_block);
      body(begin, end);
      b_.CreateRetVoid();
    }
    emit_parallel_for(b_, mod_.prefix, args, tasks, task, b_.CreateMul(rows, cost));
  }

  /// The index of row-major position `flat` in `extents` (the first
  /// extent is not needed: flat is below the product).
  Index unflatten(Value *flat, const std::vector<Value *> &extents) {
    Index idx(extents.size());
    for (size_t k = extents.size(); k-- > 0;) {
      idx[k] = k == 0 ? flat : b_.CreateURem(flat, extents[k]);
      flat = k == 0 ? flat : b_.CreateUDiv(flat, extents[k]);
    }
    return idx;
  }

  /// body(idx) for every index of `shape`, as emit_parallel_rows' rows: the
  /// leading dims are the rows (all but the last, or but the last two when
  /// the last is a small constant), `element_cost` units per element.
  void parallel_loop_nest(const Shape &shape, Value *element_cost, const std::function<void(const Index &)> &body,
                          const std::vector<ValueId> &hoisted = {}, int64_t split = 1) {
    if (shape.empty()) {
      body({});
      return;
    }
    size_t lead = shape.size() == 1 ? 1 : shape.size() - 1;
    if (shape.size() >= 3 && shape.back().is_static() && shape.back().value() < 32)
      lead = shape.size() - 2;
    auto product = [&](size_t from, size_t to) {
      Value *p = b_.getInt64(1);
      for (size_t d = from; d < to; ++d)
        p = b_.CreateMul(p, dim(shape[d]));
      return p;
    };
    if (lead == shape.size() || !shape.back().exact_div(Dim(split)))
      split = 1; // split_loop's extent must be a multiple of it, at every size
    Value *rows = product(0, lead), *row_cost = b_.CreateMul(product(lead, shape.size()), element_cost);
    emit_parallel_rows(rows, row_cost, [&](Value *begin, Value *end) {
      std::vector<Value *> extents;
      for (const Dim &d : shape)
        extents.push_back(dim(d));
      for (ValueId h : hoisted) // one-element values read by every element: loaded once
        element_overrides_[h] = load_element(g_.type_of(h).dtype, pointer_of(h), b_.getInt64(0));
      Value *first = b_.CreateSub(end, begin);
      loop(first, [&](Value *i) {
        Index idx = unflatten(b_.CreateAdd(begin, i), std::vector<Value *>(extents.begin(), extents.begin() + lead));
        loop_nest(std::vector<Value *>(extents.begin(), extents.end()), body, idx, split);
      });
      for (ValueId h : hoisted)
        element_overrides_.erase(h);
    });
  }

  /// Work units per element of `v`, the result of `node`: the elements of
  /// a reduction's (or pooling's) operand per result element, a direct
  /// convolution's multiply-adds; 1 for elementwise ops.
  Value *element_cost(const Node &node, ValueId v) {
    auto elements = [&](ValueId x) {
      Value *p = b_.getInt64(1);
      for (const Dim &d : g_.type_of(x).shape)
        p = b_.CreateMul(p, dim(d));
      return p;
    };
    if (node.op == "conv2d" && node.operands.size() > 1) {
      const Shape &ws = g_.type_of(node.operands[1]).shape;
      Value *p = b_.getInt64(1);
      for (size_t d = 1; d < ws.size(); ++d)
        p = b_.CreateMul(p, dim(ws[d]));
      return p;
    }
    if (node.operands.empty())
      return b_.getInt64(1);
    Value *out = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, elements(v), b_.getInt64(1));
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, b_.CreateSDiv(elements(node.operands[0]), out),
                                    b_.getInt64(1));
  }

  void emit_call(const Node &node) {
    const std::vector<size_t> *wino = nullptr;
    if (auto it = mod_.winograd_inputs.find(*call_body_name(node)); it != mod_.winograd_inputs.end())
      wino = &it->second;
    // A call binding the body's own dims runs it on a per-call dims array.
    Value *dims = call_dims_array(b_, entry_b_, dims_, g_, node, mod_.symbols, [&](const Dim &d) { return dim(d); });
    emit_body_call(call_body(g_, node), node.operands, node.results, wino, dims);
    merge_call_dims_flag(b_, dims_, dims, mod_.symbols.size());
  }

  /// A branch: loads the predicate and calls the taken body's function with
  /// the captures and results as its buffers (each body its own table).
  void emit_branch(const Node &node) {
    std::array<const Graph *, 2> bodies = branch_bodies(g_, node);
    if (!bodies[0] || !bodies[1])
      throw Error(ErrorCode::Internal, "codegen: a branch names no subgraph");
    Value *pred = element(node.operands[0], {});
    Value *taken = b_.CreateICmpNE(pred, llvm::Constant::getNullValue(pred->getType()));
    llvm::Function *fn = b_.GetInsertBlock()->getParent();
    auto *then_bb = llvm::BasicBlock::Create(mod_.ctx, "if.then", fn);
    auto *else_bb = llvm::BasicBlock::Create(mod_.ctx, "if.else", fn);
    auto *done = llvm::BasicBlock::Create(mod_.ctx, "if.done", fn);
    b_.CreateCondBr(taken, then_bb, else_bb);
    std::vector<ValueId> captures(node.operands.begin() + kBranchFirstInput, node.operands.end());
    for (int i = 0; i < 2; ++i) {
      b_.SetInsertPoint(i == 0 ? then_bb : else_bb);
      emit_body_call(bodies[i], captures, node.results, nullptr, dims_);
      b_.CreateBr(done);
    }
    b_.SetInsertPoint(done);
  }

  /// A loop: the carried values start in the results' buffers R and a
  /// second set S in the plan's scratch (loop_scratch_bytes), with the
  /// iteration number and the conditions; iteration i calls the body with
  /// R as its input and S as its output when i is even, the other way round
  /// when odd (a body may read its inputs after writing an output), so the
  /// last values end in S after an odd number of iterations and are copied
  /// back. The trip count and the condition are read at run time.
  void emit_loop(const Node &node) {
    const Graph *body = loop_body(g_, node);
    if (!body)
      throw Error(ErrorCode::Internal, "codegen: a loop names no subgraph");
    llvm::Type *i8 = b_.getInt8Ty();
    const size_t carried = node.results.size();
    Value *scratch = b_.CreateGEP(i8, fn_.workspace, fn_.layout->slot_offset(plan_.scratch_slot));
    LoopCells cells = loop_cells(b_, g_, node, scratch, [&](const Dim &d) { return dim(d); });
    Value *iter_cell = cells.iter, *cond_in = cells.cond_in, *cond_out = cells.cond_out;
    const std::vector<Value *> &spare = cells.spare, &bytes = cells.bytes;
    std::vector<Value *> results;
    for (size_t k = 0; k < carried; ++k) {
      results.push_back(pointer_of(node.results[k]));
      // The initial values (an input, a constant, a temporary: never the
      // result's own buffer, which is allocated after its operands' last use).
      b_.CreateMemMove(results[k], llvm::MaybeAlign(1), pointer_of(node.operands[kLoopFirstCarried + k]),
                       llvm::MaybeAlign(1), bytes[k]);
    }
    auto truth = [&](DType dtype, Value *ptr) {
      auto width = static_cast<unsigned>(dtype_size(dtype) * 8);
      Value *x = b_.CreateLoad(b_.getIntNTy(width), ptr);
      return b_.CreateICmpNE(x, llvm::ConstantInt::get(x->getType(), 0));
    };
    ValueId trip_v = node.operands[0];
    Value *trip = b_.CreateLoad(b_.getIntNTy(static_cast<unsigned>(dtype_size(g_.type_of(trip_v).dtype) * 8)),
                                pointer_of(trip_v));
    trip = is_signed(g_.type_of(trip_v).dtype) ? b_.CreateSExt(trip, b_.getInt64Ty()) : b_.CreateZExt(trip, b_.getInt64Ty());
    b_.CreateStore(b_.CreateZExt(truth(g_.type_of(node.operands[1]).dtype, pointer_of(node.operands[1])), i8), cond_in);

    llvm::Function *fn = b_.GetInsertBlock()->getParent();
    llvm::BasicBlock *pre = b_.GetInsertBlock();
    auto *head = llvm::BasicBlock::Create(mod_.ctx, "loop.head", fn);
    auto *step = llvm::BasicBlock::Create(mod_.ctx, "loop.body", fn);
    auto *done = llvm::BasicBlock::Create(mod_.ctx, "loop.done", fn);
    b_.CreateBr(head);
    b_.SetInsertPoint(head);
    llvm::PHINode *i = b_.CreatePHI(b_.getInt64Ty(), 2, "iter");
    i->addIncoming(b_.getInt64(0), pre);
    Value *go = b_.CreateAnd(b_.CreateICmpSLT(i, trip),
                             b_.CreateICmpNE(b_.CreateLoad(i8, cond_in), b_.getInt8(0)));
    b_.CreateCondBr(go, step, done);

    b_.SetInsertPoint(step);
    b_.CreateStore(i, iter_cell);
    std::vector<Value *> captures;
    for (size_t c = kLoopFirstCarried + carried; c < node.operands.size(); ++c)
      captures.push_back(stored_pointer(node.operands[c]));
    Value *table = entry_b_.CreateAlloca(b_.getPtrTy(), entry_b_.getInt64(static_cast<int64_t>(LoopCells::table_size(node))));
    cells.store_table(b_, table, b_.CreateTrunc(i, b_.getInt1Ty()), results, captures);
    Value *callee_ws = b_.CreateGEP(i8, fn_.workspace, fn_.layout->slots_end());
    b_.CreateCall(mod_.functions.at(body).run, {table, dims_, callee_ws});
    b_.CreateStore(b_.CreateZExt(truth(body->type_of(body->output_ids()[0]).dtype, cond_out), i8), cond_in);
    i->addIncoming(b_.CreateAdd(i, b_.getInt64(1)), b_.GetInsertBlock());
    b_.CreateBr(head);

    // After an odd number of iterations the last values are in the spare set.
    b_.SetInsertPoint(done);
    auto *back = llvm::BasicBlock::Create(mod_.ctx, "loop.copy_back", fn);
    auto *out = llvm::BasicBlock::Create(mod_.ctx, "loop.out", fn);
    b_.CreateCondBr(b_.CreateTrunc(i, b_.getInt1Ty()), back, out);
    b_.SetInsertPoint(back);
    for (size_t k = 0; k < carried; ++k)
      b_.CreateMemCpy(results[k], llvm::MaybeAlign(1), spare[k], llvm::MaybeAlign(1), bytes[k]);
    b_.CreateBr(out);
    b_.SetInsertPoint(out);
  }

  /// A node defining a symbol: its operand's value, clamped to [0, its
  /// bound] (the buffers are sized by the bound; the reference interpreter
  /// rejects such a value instead), stored into the symbol's slot of the
  /// dims array, where the kernels after this one load it, and into its
  /// result.
  void emit_define_symbol(const Node &node) {
    ValueId x = node.operands[0], r = node.results[0];
    if (dim_values_->symbols_fixed()) // a task function loaded its dims once, in its entry
      throw Error(ErrorCode::Internal, "codegen: '" + node.name + "' defines a symbol inside a task function");
    Value *out_of_bound = nullptr;
    Value *v = clamp_symbol_value(b_, element(x, {}), is_signed(g_.type_of(x).dtype),
                                  g_.root()->symbol_table().upper_bound(defined_symbol(node)).value(), &out_of_bound);
    b_.CreateStore(v, dim_values_->slot(b_, defined_symbol(node)));
    // The flag slot after the symbols (graph_dims_array): the entry point
    // returns INVALID_DIM after the run when a value was out of bound. Every
    // body's function gets the caller's dims array, so a body at any depth
    // flags the same slot (NestedBodiesTest).
    Value *flag = b_.CreateConstGEP1_64(b_.getInt64Ty(), dim_values_->dims(), mod_.symbols.size());
    b_.CreateStore(b_.CreateOr(b_.CreateLoad(b_.getInt64Ty(), flag), b_.CreateZExt(out_of_bound, b_.getInt64Ty())),
                   flag);
    if (plan_.values[r].storage != Storage::fused)
      store_element(DType::i64, pointer_of(r), b_.getInt64(0), v);
  }

  /// Calls `callee`'s function with `args`, then `results`, then the
  /// Winograd weights of the args `wino` lists (null: none) as its buffer
  /// table, on the dims array `dims`, in the workspace after this
  /// function's slots.
  void emit_body_call(const Graph *callee, const std::vector<ValueId> &args, const std::vector<ValueId> &results,
                      const std::vector<size_t> *wino, Value *dims) {
    EmittedGraph fns = mod_.functions.at(callee);
    size_t count = args.size() + results.size() + (wino ? wino->size() : 0);
    // The buffer table lives in the entry block. Weights (constants) are
    // known at link time: they come from a read-only template copied in one
    // memcpy, so each call costs the same few instructions however many
    // weights a layer has — code size stays flat in the number of layers.
    // Only the activations are stored one by one.
    Value *table = entry_b_.CreateAlloca(b_.getPtrTy(), entry_b_.getInt64(static_cast<int64_t>(count)));
    std::vector<ValueId> buffers(args.begin(), args.end());
    buffers.insert(buffers.end(), results.begin(), results.end());
    std::vector<llvm::Constant *> fixed;
    size_t constants = 0;
    for (ValueId v : buffers) {
      bool is_const = plan_.values[v].storage == Storage::constant && !run_time_weights();
      fixed.push_back(is_const ? llvm::cast<llvm::Constant>(pointer_of(v))
                               : llvm::ConstantPointerNull::get(b_.getPtrTy()));
      constants += is_const;
    }
    // The call's Winograd weights (its constants transformed at compile
    // time): in the template, or stored below with run-time weights.
    std::vector<std::string> wino_names;
    std::vector<int64_t> wino_tiles;
    for (size_t i = 0; wino && i < wino->size(); ++i) {
      const Node &c = g_.nodes()[g_.value_info(args[(*wino)[i]]).producer];
      wino_names.push_back(c.attrs.get_string("name"));
      wino_tiles.push_back(winograd_input_tile(*callee, (*wino)[i]));
      fixed.push_back(run_time_weights()
                          ? llvm::ConstantPointerNull::get(b_.getPtrTy())
                          : llvm::cast<llvm::Constant>(winograd_pointer(wino_names.back(), wino_tiles.back())));
      constants += !run_time_weights();
    }
    if (constants > 0) {
      auto *type = llvm::ArrayType::get(b_.getPtrTy(), count);
      auto *tmpl = new llvm::GlobalVariable(mod_.m, type, true, llvm::GlobalValue::InternalLinkage,
                                            llvm::ConstantArray::get(type, fixed),
                                            mod_.prefix + ".call." + std::to_string(call_counter_++));
      b_.CreateMemCpy(table, llvm::MaybeAlign(8), tmpl, llvm::MaybeAlign(8), count * 8);
    }
    for (size_t i = 0; i < buffers.size(); ++i)
      if (plan_.values[buffers[i]].storage != Storage::constant || run_time_weights())
        b_.CreateStore(i < args.size() ? stored_pointer(buffers[i]) : pointer_of(buffers[i]),
                       b_.CreateConstGEP1_64(b_.getPtrTy(), table, i));
    for (size_t i = 0; run_time_weights() && i < wino_names.size(); ++i)
      b_.CreateStore(winograd_pointer(wino_names[i], wino_tiles[i]), b_.CreateConstGEP1_64(b_.getPtrTy(), table, buffers.size() + i));
    Value *callee_ws = b_.CreateGEP(b_.getInt8Ty(), fn_.workspace, fn_.layout->slots_end());
    b_.CreateCall(fns.run, {table, dims, callee_ws});
  }

  /// A pointer to v's elements, materializing a fused value into a scratch
  /// copy if needed (rare: call operands are stored by the plan).
  Value *stored_pointer(ValueId v) {
    if (plan_.values[v].storage != Storage::fused)
      return pointer_of(v);
    throw Error(ErrorCode::Internal, "codegen: call operand %" + std::to_string(v) + " is not stored");
  }

  // matmul: C[b, i, j] = sum_k A[b, i, k] * B[b, k, j] with NumPy batch
  // broadcasting. With B transposed (linear's weights) the inner loop is a
  // contiguous dot product; otherwise the loop order is i, k, j so the inner
  // loop streams rows of B and C.
  void emit_matmul(const Node &node) {
    ValueId out = node.results[0];
    bool ta = node.attrs.get_bool("transpose_a"), tb = node.attrs.get_bool("transpose_b");
    if (matmul_uses_gemm(g_, plan_, node))
      return emit_gemm(node);
    if (matmul_uses_int8_gemm(g_, plan_, node) && emit_int8_gemm(node))
      return;
    const Shape &cs = g_.type_of(out).shape;
    const Shape &as = g_.type_of(node.operands[0]).shape;
    const Shape &bs = g_.type_of(node.operands[1]).shape;
    size_t rank = cs.size();
    // Values of the function being emitted (the task's, set in the body).
    std::vector<Value *> cdims;
    Value *k_extent = nullptr, *cptr = nullptr;
    DType dtype = g_.type_of(out).dtype;
    bool is_fp = is_float(dtype);
    llvm::Type *acc_type = accumulator_type(ctx_, dtype);
    auto a_elem = [&](const Index &bidx, Value *i, Value *k) {
      Index idx = batch_index(as, cs, bidx);
      idx.push_back(ta ? k : i);
      idx.push_back(ta ? i : k);
      return widen(element(node.operands[0], idx), dtype, acc_type);
    };
    auto b_elem = [&](const Index &bidx, Value *k, Value *j) {
      Index idx = batch_index(bs, cs, bidx);
      idx.push_back(tb ? j : k);
      idx.push_back(tb ? k : j);
      return widen(element(node.operands[1], idx), dtype, acc_type);
    };
    auto mul_add = [&](Value *acc, Value *x, Value *y) -> Value * {
      if (!is_fp)
        return b_.CreateAdd(acc, b_.CreateMul(x, y));
      llvm::FastMathFlags fmf;
      fmf.setAllowReassoc();
      fmf.setAllowContract();
      Value *prod = b_.CreateFMul(x, y);
      llvm::cast<llvm::Instruction>(prod)->setFastMathFlags(fmf);
      Value *sum = b_.CreateFAdd(acc, prod);
      llvm::cast<llvm::Instruction>(sum)->setFastMathFlags(fmf);
      return sum;
    };
    Value *zero = is_fp ? llvm::ConstantFP::get(acc_type, 0.0) : static_cast<Value *>(b_.getInt64(0));
    // Rows of C (batch x M) split into tasks, N x K multiply-adds each;
    // every element is summed over k in the same order in any task.
    Value *rows = b_.getInt64(1);
    for (size_t d = 0; d + 1 < rank; ++d)
      rows = b_.CreateMul(rows, dim(cs[d]));
    Value *row_cost = b_.CreateMul(dim(cs[rank - 1]), dim(ta ? as[as.size() - 2] : as.back()));
    emit_parallel_rows(rows, row_cost, [&](Value *begin, Value *end) {
      cdims = dims_of(out);
      k_extent = dim(ta ? as[as.size() - 2] : as.back());
      cptr = pointer_of(out);
      loop(b_.CreateSub(end, begin), [&](Value *r) {
        Index bidx = unflatten(b_.CreateAdd(begin, r), std::vector<Value *>(cdims.begin(), cdims.end() - 1));
        Value *i = bidx.back();
        bidx.pop_back();
        // f16/bf16 results take the dot-product form too: accumulating in C
        // itself would round every partial sum to the storage precision.
        if (tb || dtype == DType::f16 || dtype == DType::bf16) {
          loop(cdims[rank - 1], [&](Value *j) {
            Value *acc = local(acc_type);
            b_.CreateStore(zero, acc);
            loop(k_extent, [&](Value *k) {
              b_.CreateStore(mul_add(b_.CreateLoad(acc_type, acc), a_elem(bidx, i, k), b_elem(bidx, k, j)), acc);
            });
            Index cidx = bidx;
            cidx.push_back(i);
            cidx.push_back(j);
            store_element(dtype, cptr, linear_index(cidx, cdims), narrow(b_.CreateLoad(acc_type, acc), dtype, acc_type));
          });
          return;
        }
        // Accumulate rows of C in a scratch row of acc_type? C itself is in
        // the output dtype; for f32/f64/i64 accumulate in place.
        loop(cdims[rank - 1], [&](Value *j) {
          Index cidx = bidx;
          cidx.push_back(i);
          cidx.push_back(j);
          store_element(dtype, cptr, linear_index(cidx, cdims), narrow(zero, dtype, acc_type));
        });
        loop(k_extent, [&](Value *k) {
          Value *a = a_elem(bidx, i, k);
          loop(cdims[rank - 1], [&](Value *j) {
            Index cidx = bidx;
            cidx.push_back(i);
            cidx.push_back(j);
            Value *lin = linear_index(cidx, cdims);
            Value *c = widen(load_element(dtype, cptr, lin), dtype, acc_type);
            store_element(dtype, cptr, lin, narrow(mul_add(c, a, b_elem(bidx, k, j)), dtype, acc_type));
          });
        });
      });
    });
  }

  // ---- GEMM epilogues ----

  static constexpr ValueId kNoValue = ~ValueId(0);

  /// Emission inside a GEMM panel task (a function of its own) while this
  /// lives: the elemental emitter's FunctionScope (builders, dims) plus this
  /// emitter's pointers, fresh for the task; the caller's come back at the end.
  class TaskScope {
  public:
    TaskScope(FunctionEmitter &e, llvm::IRBuilder<> &entry, const std::vector<Value *> &captured)
        : e_(e), function_(e, entry.GetInsertPoint(), entry.GetInsertBlock(), captured[1]),
          saved_(std::move(e.fn_)) {
      e.begin_pointers(captured[0], captured[2]);
    }
    ~TaskScope() { e_.fn_ = std::move(saved_); }

  private:
    FunctionEmitter &e_;
    FunctionScope function_;
    Pointers saved_;
  };

  /// The epilogue of GEMM node `node` (bias: conv2d's per-row bias operand,
  /// added first; then the plan's chain, if any). `index(prefix, row, col)`
  /// maps a C element to the result's full index, `prefix` being the batch
  /// index values where the code runs (the caller's `batch`, or their
  /// copies inside the panel task). Null when there is nothing to do.
  struct Epilogue {
    GemmEpilogue gemm;
    std::optional<TaskScope> task;
    Index batch, batch_here;
  };
  std::unique_ptr<Epilogue> make_epilogue(const Node &node, size_t n, const Index &batch, ValueId bias,
                                          std::function<Index(const Index &, Value *, Value *)> index) {
    auto it = plan_.epilogues.find(n);
    if (it == plan_.epilogues.end() && bias == kNoValue)
      return nullptr;
    ValueId m = node.results[0];
    ValueId r = it == plan_.epilogues.end() ? kNoValue : it->second;
    auto e = std::make_unique<Epilogue>();
    Epilogue *ep = e.get();
    ep->batch = ep->batch_here = batch;
    ep->gemm.captures = {fn_.buffers, dims_, fn_.workspace};
    ep->gemm.captures.insert(ep->gemm.captures.end(), batch.begin(), batch.end());
    ep->gemm.enter = [this, ep](llvm::IRBuilder<> &entry, const std::vector<Value *> &captured) {
      ep->task.emplace(*this, entry, captured);
      ep->batch_here = Index(captured.begin() + 3, captured.end());
    };
    ep->gemm.leave = [ep] {
      ep->task.reset();
      ep->batch_here = ep->batch;
    };
    ep->gemm.apply = [this, ep, m, r, bias, index](llvm::IRBuilder<> &at, Value *acc, Value *row, Value *col) {
      b_.SetInsertPoint(at.GetInsertBlock());
      Value *v = acc;
      if (bias != kNoValue)
        v = b_.CreateFAdd(v, element(bias, {row}));
      if (r != kNoValue) {
        element_overrides_[m] = v;
        const ValueInfo &info = g_.value_info(r);
        v = node_element(g_.nodes()[info.producer], info.index, index(ep->batch_here, row, col));
        element_overrides_.erase(m);
      }
      at.SetInsertPoint(b_.GetInsertBlock());
      return v;
    };
    return e;
  }

  /// Where a GEMM node's C lives: its epilogue's stored value, if any.
  Value *gemm_output(size_t n, ValueId out) {
    auto it = plan_.epilogues.find(n);
    return pointer_of(it == plan_.epilogues.end() ? out : it->second);
  }

  size_t node_index(const Node &node) const { return static_cast<size_t>(&node - g_.nodes().data()); }

  // f32, row-major operands in memory: the register-blocked GEMM, once per
  // batch (broadcast batch dims reuse the same operand matrix). With an
  // epilogue, C is the buffer of the chain's stored value (same shape, f32).
  void emit_gemm(const Node &node) {
    ValueId out = node.results[0], a = node.operands[0], bm = node.operands[1];
    const Shape &cs = g_.type_of(out).shape, &as = g_.type_of(a).shape, &bs = g_.type_of(bm).shape;
    std::vector<Value *> cdims = dims_of(out), adims = dims_of(a), bdims = dims_of(bm);
    size_t rank = cs.size();
    Value *m = cdims[rank - 2], *n = cdims[rank - 1], *k = adims.back();
    std::vector<Value *> cbatch(cdims.begin(), cdims.end() - 2), abatch(adims.begin(), adims.end() - 2),
        bbatch(bdims.begin(), bdims.end() - 2);
    size_t n_index = node_index(node);
    Value *aptr = pointer_of(a), *bptr = pointer_of(bm), *cptr = gemm_output(n_index, out);
    // B without batch dims and A with all of C's (no broadcast): the batch
    // entries' rows are consecutive rows of A and C, so the batch folds
    // into M — one GEMM of batch x M rows, not a GEMM (a GEMV at M = 1:
    // torch's [seq, 1, d] @ [d, n] projections) per entry.
    bool fold = bs.size() == 2 && as.size() == cs.size() && !cbatch.empty();
    Dim entries(1);
    for (size_t i = 0; fold && i + 2 < rank; ++i) {
      fold = as[i] == cs[i];
      entries = entries * cs[i];
    }
    if (fold && !(entries.is_static() && entries.value() == 1)) {
      Value *rows = m;
      for (Value *d : cbatch)
        rows = b_.CreateMul(rows, d);
      auto epi = make_epilogue(node, n_index, {}, kNoValue, [this, out](const Index &, Value *row, Value *col) {
        std::vector<Value *> outer = dims_of(out);
        outer.pop_back();
        Index idx = unflatten(row, outer);
        idx.push_back(col);
        return idx;
      });
      GemmArgs args{aptr, bptr, cptr, rows, n, k, k, n, n, mod_.lanes, mod_.prefix, epi ? &epi->gemm : nullptr};
      args.packed_b = mod_.packed && mod_.packed->packed_value(g_, bm);
      if (args.packed_b)
        args.b_dtype = mod_.packed->packed_dtype(g_, bm);
      emit_gemm_f32(b_, args);
      return;
    }
    loop_nest(cbatch, [&](const Index &bidx) {
      auto epi = make_epilogue(node, n_index, bidx, kNoValue, [](const Index &prefix, Value *row, Value *col) {
        Index idx = prefix;
        idx.push_back(row);
        idx.push_back(col);
        return idx;
      });
      Value *a_off = b_.CreateMul(linear_index(batch_index(as, cs, bidx), abatch), b_.CreateMul(m, k));
      Value *b_off = b_.CreateMul(linear_index(batch_index(bs, cs, bidx), bbatch), b_.CreateMul(k, n));
      Value *c_off = b_.CreateMul(linear_index(bidx, cbatch), b_.CreateMul(m, n));
      GemmArgs args{b_.CreateGEP(b_.getFloatTy(), aptr, a_off), b_.CreateGEP(b_.getFloatTy(), bptr, b_off),
                    b_.CreateGEP(b_.getFloatTy(), cptr, c_off), m, n, k, k, n, n, mod_.lanes, mod_.prefix,
                    epi ? &epi->gemm : nullptr};
      args.packed_b = mod_.packed && mod_.packed->packed_value(g_, bm);
      if (args.packed_b)
        args.b_dtype = mod_.packed->packed_dtype(g_, bm);
      emit_gemm_f32(b_, args);
    });
  }

  // An i32 matmul of widened 8-bit values (matmul_uses_int8_gemm) with B
  // packed: the integer GEMM on the 8-bit values, A's leading dims as rows
  // (B has none). False where B is not packed (read by something else):
  // the loop nest then, through the fused casts.
  bool emit_int8_gemm(const Node &node) {
    auto [a, bm] = *int8_gemm_operands(g_, node);
    if (!mod_.packed || !mod_.packed->packed_value(g_, bm))
      return false;
    ValueId out = node.results[0];
    const Shape &bs = g_.type_of(bm).shape;
    std::vector<Value *> cdims = dims_of(out);
    Value *rows = b_.getInt64(1);
    for (size_t d = 0; d + 1 < cdims.size(); ++d)
      rows = b_.CreateMul(rows, cdims[d]);
    Int8GemmArgs args{pointer_of(a), pointer_of(bm), pointer_of(out), rows};
    args.k = bs[0].value();
    args.n = bs[1].value();
    args.a_signed = g_.type_of(a).dtype == DType::i8;
    args.b_signed = g_.type_of(bm).dtype == DType::i8;
    args.lanes = mod_.lanes;
    args.dot = mod_.int8_dot;
    args.prefix = mod_.prefix;
    emit_gemm_i8(b_, args);
    return true;
  }

  // An integer conv (conv_uses_int8_gemm) with its weight packed, per
  // image: Cpu/ConvEmitter.h, emit_conv_i8, with the plan's epilogue (the
  // dequantization after a ConvInteger). False where the weight is not
  // packed (read by something else): the loop nest then, through the fused
  // sub and casts.
  bool emit_conv_int8(const Node &node) {
    ConvInt8Operands ops = *conv_int8_operands(g_, node);
    if (!mod_.packed || !mod_.packed->packed_value(g_, ops.weight))
      return false;
    ValueId out = node.results[0];
    ConvShape s = conv_shape(node);
    Value *scratch = b_.CreateGEP(b_.getInt8Ty(), fn_.workspace, fn_.layout->slot_offset(plan_.scratch_slot));
    size_t n_index = node_index(node);
    Value *xptr = pointer_of(ops.x), *optr = gemm_output(n_index, out), *wptr = pointer_of(ops.weight);
    // The stored value written: the conv's f32 result, or its epilogue's
    // (an 8-bit requantized value: LoweringPlan's epilogues).
    auto epi_it = plan_.epilogues.find(n_index);
    DType out_dtype = g_.type_of(epi_it == plan_.epilogues.end() ? out : epi_it->second).dtype;
    llvm::Type *out_type = out_dtype == DType::f32 ? b_.getFloatTy() : b_.getInt8Ty();
    Value *zptr = ops.has_zero_point ? pointer_of(ops.zero_point) : nullptr;
    int64_t image = g_.type_of(ops.x).shape[1].value() * s.H * s.W; // all channels (a chunk reads some)
    // The columns' sums are needed unless the weight is a constant here
    // whose packed rows need no offset (a subgraph parameter: unknown).
    const ValueInfo &winfo = g_.value_info(ops.weight);
    const Node *wnode = winfo.producer < 0 ? nullptr : &g_.nodes()[static_cast<size_t>(winfo.producer)];
    bool col_sums = !wnode || wnode->op != "constant" ||
                    conv_int8_weight_offsets(g_.constant(wnode->attrs.get_string("name")));
    // |sum| <= 255 * max_o sum_k |W[o, k]| (|x - zp| <= 255).
    int64_t sum_bound = -1;
    if (wnode && wnode->op == "constant") {
      const HostTensor &w = g_.constant(wnode->attrs.get_string("name"));
      int64_t per = w.numel() / std::max<int64_t>(s.O, 1), worst = 0;
      for (int64_t o = 0; o < s.O && per * s.O == w.numel(); ++o) {
        double row = 0;
        for (int64_t k = 0; k < per; ++k)
          row += std::fabs(w.get_f64(o * per + k));
        worst = std::max(worst, static_cast<int64_t>(row));
      }
      if (per * s.O == w.numel())
        sum_bound = 255 * worst;
    }
    xptr = b_.CreateGEP(b_.getInt8Ty(), xptr, b_.getInt64(ops.channel_offset * s.H * s.W));
    loop(dim(g_.type_of(ops.x).shape[0]), [&](Value *n) {
      // The plan's epilogue chain at (n, o, oy, ox), applied as the sums are
      // finished.
      auto epi = make_epilogue(node, n_index, {n}, kNoValue, [this, s](const Index &prefix, Value *row, Value *col) {
        Value *ow = b_.getInt64(s.OW);
        return Index{prefix[0], row, b_.CreateUDiv(col, ow), b_.CreateURem(col, ow)};
      });
      ConvInt8Args args{s,
                        b_.CreateGEP(b_.getInt8Ty(), xptr, b_.CreateMul(n, b_.getInt64(image))),
                        zptr,
                        wptr,
                        b_.CreateGEP(out_type, optr, b_.CreateMul(n, b_.getInt64(s.O * s.OH * s.OW))),
                        scratch};
      args.out_type = out_type;
      args.x_signed = g_.type_of(ops.x).dtype == DType::i8;
      args.lanes = mod_.lanes;
      args.dot = mod_.int8_dot;
      args.prefix = mod_.prefix;
      args.epilogue = epi ? &epi->gemm : nullptr;
      args.col_sums = col_sums;
      args.sum_bound = sum_bound;
      emit_conv_i8(b_, args);
    });
    return true;
  }

  // conv2d (f32, one group) as im2col + GEMM, per image: the transposed
  // column matrix colsT[c*KH*KW + ky*KW + kx, oy*OW + ox] (zeros where the
  // window hangs over the padding) goes to the scratch slot; then
  // out[n] [O, OH*OW] = W [O, C*KH*KW] @ colsT — already NCHW — with bias
  // and the plan's epilogue chain applied per finished tile (a pointwise
  // conv multiplies x[n] [C, H*W] in place, no colsT). A conv that
  // conv_block_plan takes (row blocks filling whole GEMM panels: ResNet's
  // stem) runs both steps in one job, each task on its own rows' slice of
  // colsT (emit_conv_blocks_f32). Grouped and depthwise convs: the direct
  // kernel (Cpu/ConvEmitter.cpp).
  void emit_conv_gemm(const Node &node) {
    if (conv_is_symbolic_gemm(g_, node))
      return emit_conv_gemm_symbolic(node);
    ValueId x = node.operands[0], w = node.operands[1], out = node.results[0];
    ConvShape s = conv_shape(node);
    bool direct = conv_uses_direct(g_, node);
    bool pointwise = !direct && conv_is_pointwise(g_, node);
    if (pointwise && pointwise_block_rows(s) > 0)
      return emit_conv_pointwise_blocks(node, s);
    if (conv_uses_transposed_gemm(g_, node) && mod_.packed && mod_.packed->packed_value(g_, w))
      return emit_conv_transposed_gemm(node, s);
    if (int64_t G = image_group_size(node, s, direct, pointwise); G > 0)
      return emit_conv_images(node, s, pointwise, G);
    Value *scratch = pointwise || direct ? nullptr
                                         : b_.CreateGEP(b_.getInt8Ty(), fn_.workspace, fn_.layout->slot_offset(plan_.scratch_slot));
    size_t n_index = node_index(node);
    Value *xptr = pointer_of(x), *wptr = pointer_of(w), *optr = gemm_output(n_index, out);
    int64_t K = s.C / s.groups * s.KH * s.KW, P = s.OH * s.OW;
    ValueId bias = node.operands.size() > 2 ? node.operands[2] : kNoValue;
    loop(dim(g_.type_of(x).shape[0]), [&](Value *n) {
      Value *x_n = b_.CreateGEP(b_.getFloatTy(), xptr, b_.CreateMul(n, b_.getInt64(s.C * s.H * s.W)));
      Value *out_n = b_.CreateGEP(b_.getFloatTy(), optr, b_.CreateMul(n, b_.getInt64(s.O * P)));
      // The epilogue: bias (one per output channel, a row of C), then the
      // plan's chain at (n, o, oy, ox). The direct kernel adds the bias itself.
      auto epi = make_epilogue(node, n_index, {n}, direct ? kNoValue : bias,
                               [this, s](const Index &prefix, Value *row, Value *col) {
                                 Value *ow = b_.getInt64(s.OW);
                                 return Index{prefix[0], row, b_.CreateUDiv(col, ow), b_.CreateURem(col, ow)};
                               });
      if (direct) {
        emit_conv_direct_f32(b_, {s, x_n, wptr, bias == kNoValue ? nullptr : pointer_of(bias), out_n,
                                  conv_direct_split(g_, node), mod_.lanes, mod_.prefix, epi ? &epi->gemm : nullptr});
        return;
      }
      if (Value *u = winograd_weights(node)) {
        emit_winograd(b_, {s, winograd_plan(g_, node), x_n, u, out_n, scratch, mod_.lanes, mod_.prefix,
                           epi ? &epi->gemm : nullptr});
        return;
      }
      if (ConvBlockPlan bp = conv_block_plan(g_, node); bp.blocks > 0) {
        emit_conv_blocks_f32(b_, {s, bp, x_n, wptr, out_n, scratch, mod_.lanes, mod_.prefix, epi ? &epi->gemm : nullptr});
        return;
      }
      if (!pointwise)
        emit_im2col_f32(b_, s, x_n, scratch, mod_.prefix);
      GemmArgs args{wptr, pointwise ? x_n : scratch, out_n, b_.getInt64(s.O), b_.getInt64(P), b_.getInt64(K),
                    b_.getInt64(K), b_.getInt64(P), b_.getInt64(P), mod_.lanes, mod_.prefix,
                    epi ? &epi->gemm : nullptr};
      emit_gemm_f32(b_, args);
    });
  }

  /// A conv's operands as its write-back loops read them: the bias (or
  /// kNoValue), the plan's chain value (r, or kNoValue) and the value stored
  /// (r, or the conv's result).
  struct ConvOperands {
    ValueId x, w, out, bias, r, stored;
  };
  ConvOperands conv_operands(const Node &node) {
    ConvOperands c;
    c.x = node.operands[0], c.w = node.operands[1], c.out = node.results[0];
    c.bias = node.operands.size() > 2 ? node.operands[2] : kNoValue;
    auto it = plan_.epilogues.find(node_index(node));
    c.r = it == plan_.epilogues.end() ? kNoValue : it->second;
    c.stored = c.r == kNoValue ? c.out : c.r;
    return c;
  }

  /// conv_uses_transposed_gemm, per image: colsᵀ [P, K] (row p the patch
  /// of output position p, zeros where it reads padding) into the scratch,
  /// the GEMM colsᵀ × Wᵀ [K, O] (the weight packed at compile time) into
  /// the scratch's [P, O] product, then each output channel's row written
  /// back through the bias and the plan's chain. Every output sums its K
  /// products in the GEMM's order, as the [O, K] × [K, P] GEMM does.
  void emit_conv_transposed_gemm(const Node &node, const ConvShape &s) {
    const ConvOperands co = conv_operands(node); // (no structured binding: the lambdas capture these)
    const ValueId x = co.x, w = co.w, out = co.out, bias = co.bias, r = co.r, stored = co.stored;
    const int64_t K = s.C * s.KH * s.KW, P = s.OH * s.OW;
    llvm::Type *f32 = b_.getFloatTy();
    auto i64 = [&](int64_t v) { return b_.getInt64(v); };
    Value *scratch = b_.CreateGEP(b_.getInt8Ty(), fn_.workspace, fn_.layout->slot_offset(plan_.scratch_slot));
    Value *cols = scratch, *prod = b_.CreateGEP(f32, scratch, i64(P * K));
    Value *xptr = pointer_of(x), *wptr = pointer_of(w), *optr = pointer_of(stored);
    Value *zero = llvm::ConstantFP::get(f32, 0.0);
    loop(dim(g_.type_of(x).shape[0]), [&](Value *n) {
      Value *x_n = b_.CreateGEP(f32, xptr, b_.CreateMul(n, i64(s.C * s.H * s.W)));
      loop(i64(P), [&](Value *p) {
        Value *oy = b_.CreateUDiv(p, i64(s.OW)), *ox = b_.CreateURem(p, i64(s.OW));
        Value *row = b_.CreateGEP(f32, cols, b_.CreateMul(p, i64(K)));
        Value *iy0 = b_.CreateSub(b_.CreateMul(oy, i64(s.stride[0])), i64(s.pad[0]));
        Value *ix0 = b_.CreateSub(b_.CreateMul(ox, i64(s.stride[1])), i64(s.pad[1]));
        loop(i64(s.C * s.KH), [&](Value *cky) {
          Value *c = b_.CreateUDiv(cky, i64(s.KH)), *ky = b_.CreateURem(cky, i64(s.KH));
          Value *iy = b_.CreateAdd(iy0, b_.CreateMul(ky, i64(s.dilation[0])));
          Value *y_ok = b_.CreateICmpULT(iy, i64(s.H)); // (a negative iy wraps past H)
          Value *src = b_.CreateGEP(f32, x_n, b_.CreateAdd(b_.CreateMul(c, i64(s.H * s.W)),
                                                           b_.CreateMul(b_.CreateSelect(y_ok, iy, i64(0)), i64(s.W))));
          Value *dst = b_.CreateGEP(f32, row, b_.CreateMul(cky, i64(s.KW)));
          loop(i64(s.KW), [&](Value *kx) {
            Value *ix = b_.CreateAdd(ix0, b_.CreateMul(kx, i64(s.dilation[1])));
            Value *ok = b_.CreateAnd(y_ok, b_.CreateICmpULT(ix, i64(s.W)));
            Value *v = b_.CreateAlignedLoad(f32, b_.CreateGEP(f32, src, b_.CreateSelect(ok, ix, i64(0))), llvm::Align(4));
            b_.CreateAlignedStore(b_.CreateSelect(ok, v, zero), b_.CreateGEP(f32, dst, kx), llvm::Align(4));
          });
        });
      });
      GemmArgs args{cols, wptr, prod, i64(P), i64(s.O), i64(K), i64(K), i64(s.O), i64(s.O), mod_.lanes, mod_.prefix,
                    nullptr};
      args.packed_b = true;
      args.b_dtype = mod_.packed->packed_dtype(g_, w);
      emit_gemm_f32(b_, args);
      // The bias and the plan's chain, one output channel's row at a time.
      loop(i64(s.O), [&](Value *o) {
        Value *bias_o = bias == kNoValue ? nullptr : element(bias, {o});
        Value *orow = b_.CreateMul(b_.CreateAdd(b_.CreateMul(n, i64(s.O)), o), i64(P));
        loop(i64(P), [&](Value *p) {
          Value *v = b_.CreateAlignedLoad(f32, b_.CreateGEP(f32, prod, b_.CreateAdd(b_.CreateMul(p, i64(s.O)), o)),
                                          llvm::Align(4));
          Value *oy = b_.CreateUDiv(p, i64(s.OW)), *ox = b_.CreateURem(p, i64(s.OW));
          v = pointwise_write_back(v, bias_o, out, r, Index{n, o, oy, ox});
          store_element(g_.type_of(stored).dtype, optr, b_.CreateAdd(orow, p), v);
        });
      });
    });
  }

  /// A pointwise conv (1x1, stride 1, no padding) with few channels whose
  /// planes are a multiple of 4 KiB (BlazeFace's 24 channels at 128x128: 64
  /// KiB planes). The GEMM [O, C] x [C, P] reads B's rows, writes C's and its
  /// epilogue reads a residual's all a plane apart, so each 32-column panel
  /// touches 3 x 24 lines that map to the same L1 and L2 sets: they evict
  /// each other and the prefetchers' lines (2.3x the time of a 120x120
  /// plane per pixel). Here tasks of whole output rows (about
  /// kPointwiseBlock pixels) copy the block's
  /// C input rows into a contiguous buffer (one row at a time: sequential
  /// streams), run the GEMM into a second one (B read in place, serial),
  /// then apply the bias and the plan's epilogue one output row at a time.
  /// The same GEMM sums per output element at any thread count.
  /// Multiply-adds of one image below which emit_conv_gemm runs a
  /// pointwise conv's images as tasks (RuntimePool.c's MAXC_RT_MIN_WORK:
  /// a smaller job never leaves the calling thread).
  static constexpr int64_t kImageTaskWork = int64_t(1) << 21;
  static constexpr int64_t kPointwiseMaxChannels = 64;
  static constexpr int64_t kPointwiseAliasBytes = 4096;
  static constexpr int64_t kPointwiseBlock = 256; // pixels per task, at least one output row
  static constexpr int64_t kPointwiseBufferBytes = 64 * 1024;
  static constexpr int64_t kImageBufferBytes = 2 * kPointwiseBufferBytes; // each of an image group's two

  /// Output rows per task of emit_conv_pointwise_blocks, or 0 when it does
  /// not apply.
  static int64_t pointwise_block_rows(const ConvShape &s) {
    if (s.groups != 1 || s.C > kPointwiseMaxChannels || s.O > kPointwiseMaxChannels ||
        (s.OH * s.OW * 4) % kPointwiseAliasBytes != 0)
      return 0;
    int64_t rows = std::max<int64_t>(1, kPointwiseBlock / s.OW);
    while (s.OH % rows != 0)
      --rows;
    // The task's two stack buffers, C and O rows of the block: 64 KiB each at most.
    if (std::max(s.C, s.O) * rows * s.OW * 4 > kPointwiseBufferBytes)
      return 0;
    return rows;
  }

  /// A pointwise conv's sum `v` (of result `out`) at result index `idx`,
  /// plus its bias (`bias_o`, or null), through the plan's chain (`r`: the
  /// chain's stored value, or kNoValue).
  Value *pointwise_write_back(Value *v, Value *bias_o, ValueId out, ValueId r, const Index &idx) {
    if (bias_o)
      v = b_.CreateFAdd(v, bias_o);
    if (r != kNoValue) {
      element_overrides_[out] = v;
      const ValueInfo &info = g_.value_info(r);
      v = node_element(g_.nodes()[info.producer], info.index, idx);
      element_overrides_.erase(out);
    }
    return v;
  }

  void emit_conv_pointwise_blocks(const Node &node, const ConvShape &s) {
    const ConvOperands co = conv_operands(node); // (no structured binding: the lambdas capture these)
    const ValueId x = co.x, w = co.w, out = co.out, bias = co.bias, r = co.r, stored = co.stored;
    const int64_t P = s.OH * s.OW, R = pointwise_block_rows(s), W = R * s.OW, blocks = s.OH / R;
    Value *rows = b_.CreateMul(dim(g_.type_of(x).shape[0]), b_.getInt64(blocks));
    Value *row_cost = b_.getInt64(std::max<int64_t>(1, W * s.O * s.C / 4));
    emit_parallel_rows(rows, row_cost, [&](Value *begin, Value *end) {
      llvm::Type *f32 = b_.getFloatTy();
      auto *xbuf = llvm::cast<llvm::AllocaInst>(local(llvm::ArrayType::get(f32, static_cast<uint64_t>(s.C * W))));
      auto *cbuf = llvm::cast<llvm::AllocaInst>(local(llvm::ArrayType::get(f32, static_cast<uint64_t>(s.O * W))));
      xbuf->setAlignment(llvm::Align(64));
      cbuf->setAlignment(llvm::Align(64));
      Value *xptr = pointer_of(x), *wptr = pointer_of(w), *optr = pointer_of(stored);
      auto i64 = [&](int64_t v) { return b_.getInt64(v); };
      loop(b_.CreateSub(end, begin), [&](Value *i) {
        Value *t = b_.CreateAdd(begin, i);
        Value *n = b_.CreateUDiv(t, i64(blocks));
        Value *y0 = b_.CreateMul(b_.CreateURem(t, i64(blocks)), i64(R));
        Value *x_n = b_.CreateGEP(f32, xptr, b_.CreateMul(n, i64(s.C * P)));
        loop(i64(s.C), [&](Value *c) { // the block's input rows, one at a time
          Value *src = b_.CreateGEP(f32, x_n, b_.CreateAdd(b_.CreateMul(c, i64(P)), b_.CreateMul(y0, i64(s.OW))));
          b_.CreateMemCpy(b_.CreateGEP(f32, xbuf, b_.CreateMul(c, i64(W))), llvm::MaybeAlign(4), src, llvm::MaybeAlign(4),
                          i64(W * 4));
        });
        GemmArgs args{wptr, xbuf, cbuf, i64(s.O), i64(W), i64(s.C), i64(s.C), i64(W), i64(W), mod_.lanes, mod_.prefix,
                      nullptr};
        args.serial = true;
        emit_gemm_f32(b_, args);
        // The bias and the plan's chain, one output row at a time.
        loop(i64(s.O), [&](Value *o) {
          Value *bias_o = bias == kNoValue ? nullptr : element(bias, {o});
          loop(i64(R), [&](Value *dy) {
            Value *oy = b_.CreateAdd(y0, dy);
            Value *crow = b_.CreateGEP(f32, cbuf, b_.CreateAdd(b_.CreateMul(o, i64(W)), b_.CreateMul(dy, i64(s.OW))));
            Value *orow = b_.CreateMul(b_.CreateAdd(b_.CreateMul(b_.CreateAdd(b_.CreateMul(n, i64(s.O)), o), i64(s.OH)), oy),
                                       i64(s.OW));
            loop(i64(s.OW), [&](Value *ox) {
              Value *v = b_.CreateAlignedLoad(f32, b_.CreateGEP(f32, crow, ox), llvm::Align(4));
              v = pointwise_write_back(v, bias_o, out, r, Index{n, o, oy, ox});
              store_element(g_.type_of(stored).dtype, optr, b_.CreateAdd(orow, ox), v);
            });
          });
        });
      });
    });
  }

  /// A conv over a batch of small images (each image's GEMM below
  /// RuntimePool.c's pool threshold: kImageTaskWork), pointwise or im2col
  /// + GEMM (one group, no Winograd, no row blocks). Per image, the GEMM
  /// [O, K] x [K, P] ran on the calling thread whatever the thread count,
  /// and its last 32-column panel was mostly padding (P = 49: 64 columns
  /// computed): an MRZ character classifier's 88 images of 7x7 spent 5 ms
  /// of 9.8 in such 1x1 convs. Here a task takes G consecutive images
  /// (G * P about kPointwiseBlock columns), copies (pointwise) or im2cols
  /// their K rows side by side into one [K, G * P] buffer, runs one serial
  /// GEMM into a second, and applies the bias and the plan's chain while it
  /// writes each image's rows back. Every output element sums over k in
  /// the same order as the per-image GEMM. Returns G, or 0 where this does
  /// not apply (one image; the buffers past kImageBufferBytes at G = 1).
  int64_t image_group_size(const Node &node, const ConvShape &s, bool direct, bool pointwise) {
    const Dim &images = g_.type_of(node.operands[0]).shape[0];
    if (direct || (images.is_static() && images.value() == 1) || conv_block_plan(g_, node).blocks != 0 ||
        (!pointwise && (s.groups != 1 || winograd_weights(node))))
      return 0;
    const int64_t K = s.C * s.KH * s.KW, P = s.OH * s.OW;
    if (s.O * P * K >= kImageTaskWork || std::max(K, s.O) * P * 4 > kImageBufferBytes)
      return 0;
    int64_t G = std::max<int64_t>(1, kPointwiseBlock / P);
    while (G > 1 && std::max(K, s.O) * G * P * 4 > kImageBufferBytes)
      --G;
    return G;
  }

  void emit_conv_images(const Node &node, const ConvShape &s, bool pointwise, int64_t G) {
    const ConvOperands co = conv_operands(node); // (no structured binding: the lambdas capture these)
    const ValueId x = co.x, w = co.w, out = co.out, bias = co.bias, r = co.r, stored = co.stored;
    const int64_t P = s.OH * s.OW, K = s.C * s.KH * s.KW;
    Value *images = dim(g_.type_of(x).shape[0]);
    Value *groups = b_.CreateUDiv(b_.CreateAdd(images, b_.getInt64(G - 1)), b_.getInt64(G));
    emit_parallel_rows(groups, b_.getInt64(std::max<int64_t>(1, G * P * s.O * K)), [&](Value *begin, Value *end) {
      llvm::Type *f32 = b_.getFloatTy();
      auto i64 = [&](int64_t v) { return b_.getInt64(v); };
      auto *xbuf = llvm::cast<llvm::AllocaInst>(local(llvm::ArrayType::get(f32, static_cast<uint64_t>(K * G * P))));
      auto *cbuf = llvm::cast<llvm::AllocaInst>(local(llvm::ArrayType::get(f32, static_cast<uint64_t>(s.O * G * P))));
      xbuf->setAlignment(llvm::Align(64));
      cbuf->setAlignment(llvm::Align(64));
      Value *xptr = pointer_of(x), *wptr = pointer_of(w), *optr = pointer_of(stored);
      Value *count = dim(g_.type_of(x).shape[0]);
      loop(b_.CreateSub(end, begin), [&](Value *i) {
        Value *n0 = b_.CreateMul(b_.CreateAdd(begin, i), i64(G));
        Value *here = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, i64(G), b_.CreateSub(count, n0)); // images
        Value *cols = b_.CreateMul(here, i64(P));
        loop(here, [&](Value *g) { // image n0 + g's K rows, side by side
          Value *x_n = b_.CreateGEP(f32, xptr, b_.CreateMul(b_.CreateAdd(n0, g), i64(s.C * s.H * s.W)));
          if (!pointwise) {
            emit_im2col_serial_f32(b_, s, x_n, b_.CreateGEP(f32, xbuf, b_.CreateMul(g, i64(P))), cols);
            return;
          }
          loop(i64(s.C), [&](Value *c) {
            b_.CreateMemCpy(b_.CreateGEP(f32, xbuf, b_.CreateAdd(b_.CreateMul(c, cols), b_.CreateMul(g, i64(P)))),
                            llvm::MaybeAlign(4), b_.CreateGEP(f32, x_n, b_.CreateMul(c, i64(P))), llvm::MaybeAlign(4),
                            i64(P * 4));
          });
        });
        GemmArgs args{wptr, xbuf, cbuf, i64(s.O), cols, i64(K), i64(K), cols, cols, mod_.lanes, mod_.prefix,
                      nullptr};
        args.serial = true;
        emit_gemm_f32(b_, args);
        // The bias and the plan's chain, one output row of one image at a time.
        loop(here, [&](Value *g) {
          Value *n = b_.CreateAdd(n0, g);
          loop(i64(s.O), [&](Value *o) {
            Value *bias_o = bias == kNoValue ? nullptr : element(bias, {o});
            Value *crow = b_.CreateGEP(f32, cbuf, b_.CreateAdd(b_.CreateMul(o, cols), b_.CreateMul(g, i64(P))));
            Value *orow = b_.CreateMul(b_.CreateAdd(b_.CreateMul(n, i64(s.O)), o), i64(P));
            loop(i64(P), [&](Value *p) {
              Value *v = b_.CreateAlignedLoad(f32, b_.CreateGEP(f32, crow, p), llvm::Align(4));
              v = pointwise_write_back(v, bias_o, out, r,
                                       Index{n, o, b_.CreateUDiv(p, i64(s.OW)), b_.CreateURem(p, i64(s.OW))});
              store_element(g_.type_of(stored).dtype, optr, b_.CreateAdd(orow, p), v);
            });
          });
        });
      });
    });
  }

  /// A conv_is_symbolic_gemm conv: per image, a run-time im2col (none for
  /// a pointwise conv) and the GEMM [O, K] x [K, OH*OW] with N read from
  /// the dims, then the epilogue (bias and the plan's chain).
  void emit_conv_gemm_symbolic(const Node &node) {
    ValueId x = node.operands[0], w = node.operands[1], out = node.results[0];
    const Shape &xs = g_.type_of(x).shape, &ws = g_.type_of(w).shape, &os = g_.type_of(out).shape;
    std::vector<int64_t> stride = node.attrs.get_ints("stride"), dil = node.attrs.get_ints("dilation");
    std::array<int64_t, 4> pad = padding4(node.attrs);
    // The static part of the geometry; H, W, OH, OW come from the dims.
    ConvShape s{xs[1].value(), 0, 0, ws[0].value(), ws[2].value(), ws[3].value(), 0, 0, 1,
                {stride[0], stride[1]}, {dil[0], dil[1]}, pad};
    ConvRunTimeSize rt{dim(xs[2]), dim(xs[3]), dim(os[2]), dim(os[3])};
    bool pointwise = conv_is_pointwise(g_, node);
    Value *scratch = pointwise ? nullptr
                               : b_.CreateGEP(b_.getInt8Ty(), fn_.workspace, fn_.layout->slot_offset(plan_.scratch_slot));
    size_t n_index = node_index(node);
    Value *xptr = pointer_of(x), *wptr = pointer_of(w), *optr = gemm_output(n_index, out);
    int64_t K = s.C * s.KH * s.KW;
    Value *P = dim(os[2] * os[3]), *in_plane = dim(xs[2] * xs[3]);
    ValueId bias = node.operands.size() > 2 ? node.operands[2] : kNoValue;
    loop(dim(xs[0]), [&](Value *n) {
      Value *x_n = b_.CreateGEP(b_.getFloatTy(), xptr, b_.CreateMul(n, b_.CreateMul(b_.getInt64(s.C), in_plane)));
      Value *out_n = b_.CreateGEP(b_.getFloatTy(), optr, b_.CreateMul(n, b_.CreateMul(b_.getInt64(s.O), P)));
      // OW read in the function the epilogue runs in (a GEMM task's scope).
      auto epi = make_epilogue(node, n_index, {n}, bias, [this, ow_dim = os[3]](const Index &prefix, Value *row,
                                                                                 Value *col) {
        Value *ow = dim(ow_dim);
        return Index{prefix[0], row, b_.CreateUDiv(col, ow), b_.CreateURem(col, ow)};
      });
      if (!pointwise)
        emit_im2col_dynamic_f32(b_, s, rt, x_n, scratch, mod_.prefix);
      GemmArgs args{wptr, pointwise ? x_n : scratch, out_n, b_.getInt64(s.O), P, b_.getInt64(K), b_.getInt64(K), P, P,
                    mod_.lanes, mod_.prefix, epi ? &epi->gemm : nullptr};
      emit_gemm_f32(b_, args);
    });
  }

  /// An f32 depthwise conv2d (groups == C == O > 1, a weight [C, 1, KH, KW],
  /// a column stride of at most 4) with a symbolic height or width, stored
  /// input and output and no
  /// epilogue: the direct kernel with run-time lane masks (Cpu/ConvEmitter.h,
  /// emit_conv_depthwise_dynamic_f32). False (nothing emitted) otherwise:
  /// the elemental window loop, which the vectorizer declines.
  bool emit_conv_depthwise_dynamic(const Node &node) {
    if (node.op != "conv2d")
      return false;
    ValueId x = node.operands[0], w = node.operands[1], out = node.results[0];
    const TensorType &xt = g_.type_of(x), &wt = g_.type_of(w);
    const Shape &xs = xt.shape, &ws = wt.shape, &os = g_.type_of(out).shape;
    if (xt.dtype != DType::f32 || wt.dtype != DType::f32 || xs.size() != 4 || !shape_is_static(ws) ||
        !xs[1].is_static() || shape_is_static({xs[2], xs[3]}))
      return false;
    int64_t C = xs[1].value(), groups = node.attrs.get_int("groups");
    ValueId bias = node.operands.size() > 2 ? node.operands[2] : kNoValue;
    std::vector<int64_t> stride = node.attrs.get_ints("stride"), dil = node.attrs.get_ints("dilation");
    // A wide load spans lanes * stride columns: strides past 4 (an STFT as
    // a conv, stride 160) would make vectors of thousands of lanes.
    if (C < 2 || groups != C || ws[0].value() != C || ws[1].value() != 1 || ws[2].value() * ws[3].value() > 64 ||
        stride.size() != 2 || stride[1] < 1 || stride[1] > 4 || stride[0] < 1 ||
        plan_.values[x].storage == Storage::fused || plan_.values[out].storage == Storage::fused ||
        plan_.values[w].storage == Storage::fused ||
        (bias != kNoValue && (plan_.values[bias].storage == Storage::fused || g_.type_of(bias).dtype != DType::f32)) ||
        plan_.epilogues.count(node_index(node)))
      return false;
    ConvShape s{C, 0, 0, C, ws[2].value(), ws[3].value(), 0, 0, C, {stride[0], stride[1]}, {dil[0], dil[1]},
                padding4(node.attrs)};
    ConvRunTimeSize rt{dim(xs[2]), dim(xs[3]), dim(os[2]), dim(os[3])};
    Value *xptr = pointer_of(x), *optr = pointer_of(out), *wptr = pointer_of(w);
    Value *bptr = bias == kNoValue ? nullptr : pointer_of(bias);
    Value *in_image = b_.CreateMul(b_.getInt64(C), b_.CreateMul(rt.H, rt.W));
    Value *out_image = b_.CreateMul(b_.getInt64(C), b_.CreateMul(rt.OH, rt.OW));
    loop(dim(xs[0]), [&](Value *n) {
      DepthwiseDynamicArgs a{s,
                             rt,
                             b_.CreateGEP(b_.getFloatTy(), xptr, b_.CreateMul(n, in_image)),
                             wptr,
                             bptr,
                             b_.CreateGEP(b_.getFloatTy(), optr, b_.CreateMul(n, out_image)),
                             mod_.lanes,
                             mod_.prefix};
      emit_conv_depthwise_dynamic_f32(b_, a);
    });
    return true;
  }

  /// min / max of a whole stored f32 tensor (its size static and non-empty,
  /// or symbolic: an empty one gives the identity, +-inf) into a stored
  /// scalar (DynamicQuantizeLinear's range): vectors of the target's
  /// lanes, four accumulators, then the reference's result bit for bit
  /// (Ops/Reduction.cpp: the last NaN, ties keeping the first): a NaN seen
  /// anywhere gives the last NaN, a zero result the first zero (+0 or -0),
  /// found by a second scan that stops there; any other result has only one
  /// bit pattern. False (nothing emitted) otherwise.
  bool emit_full_min_max(const Node &node) {
    ValueId x = node.operands[0], out = node.results[0];
    const TensorType &xt = g_.type_of(x);
    Dim numel = shape_numel(xt.shape);
    if (xt.dtype != DType::f32 || (numel.is_static() && numel.value() < 1) ||
        shape_numel(g_.type_of(out).shape) != Dim(1) || plan_.values[x].storage == Storage::fused ||
        plan_.values[out].storage == Storage::fused)
      return false;
    bool is_min = node.op == "min";
    int64_t lanes = mod_.lanes, block = 4 * lanes;
    Value *n = dim(numel), *whole = b_.CreateMul(b_.CreateUDiv(n, b_.getInt64(block)), b_.getInt64(block));
    llvm::Type *f32 = b_.getFloatTy();
    auto *vec = llvm::FixedVectorType::get(f32, static_cast<unsigned>(lanes));
    Value *src = pointer_of(x), *dst = pointer_of(out);
    float init = is_min ? INFINITY : -INFINITY;
    llvm::Function *host = b_.GetInsertBlock()->getParent();
    llvm::IRBuilder<> entry(&host->getEntryBlock(), host->getEntryBlock().begin());
    std::vector<llvm::AllocaInst *> acc(4), nan(4);
    for (int j = 0; j < 4; ++j) {
      acc[j] = entry.CreateAlloca(vec);
      nan[j] = entry.CreateAlloca(llvm::FixedVectorType::get(b_.getInt1Ty(), static_cast<unsigned>(lanes)));
      b_.CreateStore(llvm::ConstantFP::get(vec, init), acc[j]);
      b_.CreateStore(llvm::Constant::getNullValue(nan[j]->getAllocatedType()), nan[j]);
    }
    auto better = [&](Value *v, Value *a) { return is_min ? b_.CreateFCmpOLT(v, a) : b_.CreateFCmpOGT(v, a); };
    auto step = [&](int j, Value *v) {
      Value *a = b_.CreateLoad(acc[j]->getAllocatedType(), acc[j]);
      b_.CreateStore(b_.CreateSelect(better(v, a), v, a), acc[j]);
      Value *u = b_.CreateLoad(nan[j]->getAllocatedType(), nan[j]);
      b_.CreateStore(b_.CreateOr(u, b_.CreateFCmpUNO(v, v)), nan[j]);
    };
    emit_counted_loop(b_, b_.CreateUDiv(n, b_.getInt64(block)), [&](Value *i) {
      for (int j = 0; j < 4; ++j) {
        Value *at = b_.CreateGEP(f32, src, b_.CreateAdd(b_.CreateMul(i, b_.getInt64(block)), b_.getInt64(j * lanes)));
        step(j, b_.CreateAlignedLoad(vec, at, llvm::Align(4)));
      }
    }, "minmax.v.");
    // The tail, one element at a time (in lane 0 of accumulator 0).
    emit_counted_loop(b_, b_.CreateSub(n, whole), [&](Value *i) {
      Value *e = b_.CreateLoad(f32, b_.CreateGEP(f32, src, b_.CreateAdd(i, whole)));
      Value *v = b_.CreateInsertElement(llvm::ConstantFP::get(vec, init), e, b_.getInt64(0));
      step(0, v);
    }, "minmax.t.");
    Value *m = llvm::ConstantFP::get(f32, init), *any_nan = b_.getFalse();
    for (int j = 0; j < 4; ++j) {
      Value *a = b_.CreateLoad(vec, acc[j]);
      Value *u = b_.CreateLoad(nan[j]->getAllocatedType(), nan[j]);
      any_nan = b_.CreateOr(any_nan, b_.CreateOrReduce(u));
      for (int64_t l = 0; l < lanes; ++l) {
        Value *e = b_.CreateExtractElement(a, b_.getInt64(l));
        m = b_.CreateSelect(better(e, m), e, m);
      }
    }
    b_.CreateStore(m, dst);
    // A NaN seen: the last NaN (the reference's `a = v` on every NaN); else a
    // zero result: the first element == 0. Scans that stop at the element.
    auto scan = [&](Value *cond, bool backward, const std::function<Value *(Value *)> &hit) {
      emit_if(b_, cond, [&] {
        llvm::Function *fn = b_.GetInsertBlock()->getParent();
        auto *head = llvm::BasicBlock::Create(mod_.ctx, "minmax.scan", fn);
        auto *body = llvm::BasicBlock::Create(mod_.ctx, "minmax.scan.body", fn);
        auto *found = llvm::BasicBlock::Create(mod_.ctx, "minmax.found", fn);
        auto *done = llvm::BasicBlock::Create(mod_.ctx, "minmax.done", fn);
        llvm::BasicBlock *pre = b_.GetInsertBlock();
        b_.CreateBr(head);
        b_.SetInsertPoint(head);
        llvm::PHINode *i = b_.CreatePHI(b_.getInt64Ty(), 2);
        i->addIncoming(b_.getInt64(0), pre);
        b_.CreateCondBr(b_.CreateICmpSLT(i, n), body, done);
        b_.SetInsertPoint(body);
        Value *at = backward ? b_.CreateSub(b_.CreateSub(n, b_.getInt64(1)), i) : static_cast<Value *>(i);
        Value *e = b_.CreateLoad(f32, b_.CreateGEP(f32, src, at));
        i->addIncoming(b_.CreateAdd(i, b_.getInt64(1)), body);
        b_.CreateCondBr(hit(e), found, head);
        b_.SetInsertPoint(found);
        b_.CreateStore(e, dst);
        b_.CreateBr(done);
        b_.SetInsertPoint(done);
      });
    };
    scan(any_nan, true, [&](Value *e) { return b_.CreateFCmpUNO(e, e); });
    scan(b_.CreateAnd(b_.CreateNot(any_nan), b_.CreateFCmpOEQ(m, llvm::ConstantFP::get(f32, 0.0))), false,
         [&](Value *e) { return b_.CreateFCmpOEQ(e, llvm::ConstantFP::get(f32, 0.0)); });
    return true;
  }

  /// f32 max_pool2d with static C, H, W, stored input (or a fused cast of a
  /// stored u8/i8 value: max_pool_int8_source) and output: the vectorized
  /// kernel (Cpu/ConvEmitter.h); false (nothing emitted) otherwise.
  bool emit_max_pool(const Node &node) {
    ValueId x = node.operands[0], out = node.results[0];
    const Shape &xs = g_.type_of(x).shape, &os = g_.type_of(out).shape;
    PoolInput input = PoolInput::f32;
    ValueId src = x;
    if (std::optional<ValueId> x8 = max_pool_int8_source(g_, node);
        x8 && plan_.values[x].storage == Storage::fused && plan_.values[*x8].storage != Storage::fused) {
      src = *x8;
      input = g_.type_of(*x8).dtype == DType::i8 ? PoolInput::i8 : PoolInput::u8;
    }
    auto pair = [](std::vector<int64_t> v) -> std::array<int64_t, 2> {
      return v.size() == 1 ? std::array<int64_t, 2>{v[0], v[0]} : std::array<int64_t, 2>{v[0], v[1]};
    };
    std::vector<int64_t> kernel = node.attrs.get_ints("kernel"), stride = node.attrs.get_ints("stride");
    std::vector<int64_t> pad = node.attrs.has("padding") ? node.attrs.get_ints("padding") : std::vector<int64_t>{};
    if (g_.type_of(x).dtype != DType::f32 || !shape_is_static({xs[1], xs[2], xs[3]}) ||
        plan_.values[src].storage == Storage::fused || plan_.values[out].storage == Storage::fused ||
        kernel.empty() || kernel.size() > 2 || stride.size() > 2 || (pad.size() != 0 && pad.size() != 2 && pad.size() != 4))
      return false;
    PoolShape s{xs[1].value(), xs[2].value(), xs[3].value(), os[2].value(), os[3].value(), 0, 0, {}, {}};
    auto k = pair(kernel);
    s.KH = k[0];
    s.KW = k[1];
    s.stride = stride.empty() ? k : pair(stride);
    s.pad = pad.empty() ? std::array<int64_t, 2>{0, 0} : std::array<int64_t, 2>{pad[0], pad[1]};
    // The row kernel unrolls over a row's vectors and the window's taps:
    // past a few thousand vector ops (a 1-D pool over a long signal, a huge
    // window) LLVM's time explodes, and the elemental loop nest is used.
    int64_t chunks = (s.W + mod_.lanes - 1) / mod_.lanes + (s.OW + mod_.lanes - 1) / mod_.lanes;
    if (chunks * std::max(s.KH, s.KW) > 4096)
      return false;
    Value *xptr = pointer_of(src), *optr = pointer_of(out);
    emit_max_pool_f32(b_, s, dim(xs[0]), xptr, optr, mod_.lanes, mod_.prefix, input);
    return true;
  }

  /// The Winograd F(m,3) weights of a 3x3 stride-1 conv (Cpu/WinogradEmitter.h),
  /// transformed at compile time; null when the conv takes im2col + GEMM.
  /// A constant of this graph: one global per constant.
  /// A subgraph's weight that every call binds to a constant arrives
  /// transformed from each call site (an extra buffer table entry).
  Value *winograd_weights(const Node &node) {
    const ValueInfo &w = g_.value_info(node.operands[1]);
    if (!conv_winograd_shape(g_, node))
      return nullptr;
    int64_t m = winograd_plan(g_, node).m;
    if (w.producer >= 0)
      return g_.nodes()[w.producer].op == "constant"
                 ? winograd_pointer(g_.nodes()[w.producer].attrs.get_string("name"), m)
                 : nullptr;
    auto it = mod_.winograd_inputs.find(g_.name());
    if (&g_ == g_.root() || it == mod_.winograd_inputs.end())
      return nullptr;
    auto at = std::find(it->second.begin(), it->second.end(), w.index);
    if (at == it->second.end() || winograd_input_tile(g_, w.index) != m)
      return nullptr;
    return buffer_arg(g_.input_ids().size() + g_.output_ids().size() + (at - it->second.begin()));
  }

  /// The Winograd weights of this graph's constant `constant`: in the
  /// weights section or the run-time blob (append_winograd_weights), or,
  /// with weights as IR constants (the JIT), one global each.
  Value *winograd_pointer(const std::string &constant, int64_t m) {
    std::string key = winograd_key(constant, m);
    if (mod_.external && mod_.external->symbol)
      return llvm::ConstantExpr::getGetElementPtr(
          entry_b_.getInt8Ty(), mod_.external->symbol,
          entry_b_.getInt64(static_cast<int64_t>(mod_.external->offsets.at({&g_, key}))));
    if (mod_.external)
      return external_constant(key);
    return winograd_global(constant, m);
  }

  /// The Winograd weights of this graph's constant `constant` (one global each).
  llvm::GlobalVariable *winograd_global(const std::string &constant, int64_t m) {
    std::string name = winograd_key(constant, m);
    auto key = std::make_pair(&g_, name);
    if (auto it = mod_.constants.find(key); it != mod_.constants.end())
      return it->second;
    std::vector<float> u = codegen::winograd_weights(g_.constant(constant), m);
    auto *data = llvm::ConstantDataArray::get(mod_.ctx, llvm::ArrayRef<float>(u));
    std::string global_name = mod_.prefix + ".const." + (&g_ == g_.root() ? "" : g_.name() + ".") + name;
    auto *gv = new llvm::GlobalVariable(mod_.m, data->getType(), true, llvm::GlobalValue::InternalLinkage, data,
                                        global_name);
    gv->setAlignment(llvm::Align(64));
    return mod_.constants[key] = gv;
  }

  ConvShape conv_shape(const Node &node) { return conv_shape_of(g_, node); }

  Module &mod_;
  EmittedGraph fns_;
  llvm::Instruction *entry_br_ = nullptr;
  Pointers fn_;
  size_t call_counter_ = 0;
};

} // namespace

std::string cpu_lowering(const std::string &op) {
  if (op_traits(op).has(OpTrait::call))
    return "call"; // a call of the subgraph's function
  if (op_traits(op).has(OpTrait::branch))
    return "branch"; // the predicate loaded, then a call of the taken body's function
  if (op_traits(op).has(OpTrait::loop))
    return "loop"; // a loop calling the body's function, the carried values in two buffer sets
  if (op_traits(op).has(OpTrait::defines_symbol))
    return "symbol"; // the value stored into the dims array, read by the kernels after it
  if (op_traits(op).has(OpTrait::aliases_operand))
    return "state"; // a view of a state buffer: buffer_append stores its rows, buffer_prefix nothing
  if (op_traits(op).has(OpTrait::communicates))
    return "collective"; // all_reduce, all_gather: a call of the runtime's communicator (NAME_set_communicator)
  if (op == "constant")
    return op; // a global (or the weights blob)
  if (op == "matmul")
    return op; // the register-blocked GEMM (f32) or dot-product loops
  if (op == "conv2d")
    return op; // im2col + GEMM (f32, one group), the direct kernel (f32, groups), or the elemental window loop
  if (op == "attention")
    return op; // kept whole for f32 (DecomposeOptions::fuse_attention): Cpu/AttentionEmitter
  if (op == "recurrence")
    return op; // kept whole for f32 (DecomposeOptions::keep_recurrence): Cpu/RecurrenceEmitter
  if (op == "matmul_nbits")
    return op; // kept whole for f32 (DecomposeOptions::keep_matmul_nbits): Cpu/NbitsGemvEmitter
  if (op == kTopKOp)
    return op; // kept whole for f32 (DecomposeOptions::keep_top_k): the runtime's selection per row
  if (op_traits(op).has(OpTrait::rowwise))
    return "rows"; // softmax, norms kept whole (f32): one row kernel (NormEmitter)
  if (has_elemental_lowering(op))
    return "elemental"; // a loop nest over the output, one element at a time
  return "";
}

EmittedGraph emit_graph_functions(llvm::Module &module, const Graph &root, const std::string &prefix,
                                  const std::vector<std::string> &symbols, unsigned vector_lanes,
                                  unsigned int8_dot, const ExternalWeights *external, const LoweringPlans *plans,
                                  const PackedWeights *packed, const Graph *only, const KernelCounters *profile) {
  Module mod{module, module.getContext(), prefix, symbols, vector_lanes, int8_dot, external, plans, {}, {}, {}, packed, profile};
  llvm::LLVMContext &c = mod.ctx;
  auto *ptr = llvm::PointerType::getUnqual(c);
  auto *run_type = llvm::FunctionType::get(llvm::Type::getVoidTy(c), {ptr, ptr, ptr}, false);
  auto *size_type = llvm::FunctionType::get(llvm::Type::getInt64Ty(c), {ptr}, false);
  // One partition of a model compiled in pieces (`only`): every graph's
  // functions are hidden globals, defined in their own graph's partition.
  auto linkage = only ? llvm::GlobalValue::ExternalLinkage : llvm::GlobalValue::InternalLinkage;
  auto declare = [&](const Graph &g, const std::string &tag) {
    EmittedGraph fns;
    fns.run = llvm::Function::Create(run_type, linkage, prefix + ".graph." + tag, module);
    fns.workspace_size = llvm::Function::Create(size_type, linkage, prefix + ".workspace." + tag, module);
    for (llvm::Function *f : {fns.run, fns.workspace_size})
      if (only) {
        f->setVisibility(llvm::GlobalValue::HiddenVisibility);
        f->setDSOLocal(true);
      }
    for (unsigned i = 0; i < 3; ++i)
      fns.run->addParamAttr(i, llvm::Attribute::NoUndef);
    fns.run->addFnAttr(llvm::Attribute::NoUnwind);
    fns.workspace_size->addFnAttr(llvm::Attribute::NoUnwind);
    mod.functions[&g] = fns;
  };
  for (const auto &[name, sub] : root.subgraphs())
    declare(*sub, "sub." + name);
  declare(root, "main");
  mod.winograd_inputs = winograd_call_site_inputs(root);
  // Subgraphs first (sorted by name), so output is deterministic.
  for (const auto &[name, sub] : root.subgraphs())
    if (!only || only == sub.get())
      FunctionEmitter(mod, *sub, mod.functions.at(sub.get())).emit();
  if (!only || only == &root)
    FunctionEmitter(mod, root, mod.functions.at(&root)).emit();
  // The loops the vectorizer widens (elementwise tasks, row kernels, GEMM
  // epilogues, their exp/erf/tanh polynomials) use the GEMM's 512-bit
  // vectors on AVX-512 CPUs: LLVM's prefer-256-bit tuning of the Intel
  // ones (skylake-avx512 ... sapphirerapids) would halve them, though the
  // GEMM's zmm code already runs. No effect where 512 bits are not legal
  // (AVX2: 256) or on other architectures.
  for (llvm::Function &f : module)
    if (!f.isDeclaration() && !f.hasFnAttribute("prefer-vector-width"))
      f.addFnAttr("prefer-vector-width", "512");
  return mod.functions.at(&root);
}

} // namespace maxc::codegen

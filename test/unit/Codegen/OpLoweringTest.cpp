// The op registry against the code generators: every op's traits are
// consistent, every op has a lowering on every backend (or is decomposed
// first), and every unary and binary elementwise op of the registry —
// found through its traits, not a list here — compiles on the CPU and in
// the GPU kernel emulation to what the reference interpreter computes. So an
// op added in its own file (OpDef + traits) plus its element formula is
// tested on every path without touching this file.
#include "CompiledRunner.h"

#include "maxc/Codegen/CompiledRun.h"
#include "maxc/Codegen/LoweringPlan.h"
#include "maxc/Ops/OpRegistry.h"
#include "maxc/Transforms/Decompose.h"

using namespace maxc;
using namespace maxc::test;

TEST_CASE("every op's traits are consistent", "[codegen][ops][traits]") {
  for (const OpDef *def : OpRegistry::instance().all()) {
    INFO(def->name << ": " << op_traits_text(def->traits));
    CHECK(def->traits.bits() != 0); // every op says what it is
    CHECK(op_traits(def->name) == def->traits);
    if (def->has(OpTrait::unary))
      CHECK((def->has(OpTrait::elementwise) && def->min_operands == 1 && def->max_operands == 1));
    if (def->has(OpTrait::binary))
      CHECK((def->has(OpTrait::elementwise) && def->min_operands == 2 && def->max_operands == 2));
    CHECK_FALSE((def->has(OpTrait::unary) && def->has(OpTrait::binary)));
    if (def->has(OpTrait::epilogue_safe) || def->traits.any(OpTrait::device_libm | OpTrait::device_libm_f64))
      CHECK(def->has(OpTrait::elementwise));
    if (def->has(OpTrait::device_libm))
      CHECK(def->has(OpTrait::device_libm_f64));
    if (def->has(OpTrait::index_result))
      CHECK(def->has(OpTrait::reduction));
    if (def->has(OpTrait::indirect))
      CHECK(def->has(OpTrait::shape));
    if (def->has(OpTrait::generator))
      CHECK(def->min_operands == 0);
    if (def->has(OpTrait::branch)) // a conditional: never a call, two bodies
      CHECK((def->has(OpTrait::structural) && !def->has(OpTrait::call) && def->body_attrs.size() == 2));
    // Decompose and the traits agree on what is rewritten before codegen.
    CHECK(def->has(OpTrait::composite) == is_composite_op(def->name));
    // A composite op is nothing else: it never reaches a code generator,
    // except a rowwise one kept whole for a backend with a row kernel.
    if (def->has(OpTrait::composite))
      CHECK((def->traits == OpTraits(OpTrait::composite) ||
             def->traits == (OpTrait::composite | OpTrait::rowwise)));
    if (def->has(OpTrait::rowwise))
      CHECK(def->has(OpTrait::composite));
  }
}

TEST_CASE("every op has a lowering on every backend", "[codegen][ops][traits]") {
  for (const OpDef *def : OpRegistry::instance().all()) {
    INFO(def->name << ": " << op_traits_text(def->traits));
    std::string cpu = codegen::cpu_lowering(def->name), gpu = codegen::gpu_kernel_kind(def->name);
    if (def->has(OpTrait::composite)) {
      // The CPU lowers rowwise composites as one row kernel (Cpu/NormEmitter).
      // ...and attention as one flash-style kernel (Cpu/AttentionEmitter;
      // on the GPU Gpu/GpuAttention), and recurrence as one loop over the
      // steps (Cpu/RecurrenceEmitter; the GPU backends get it unrolled),
      // and matmul_nbits as one kernel on the packed codes (Cpu/NbitsGemvEmitter).
      CHECK(cpu == (def->has(OpTrait::rowwise)                                        ? "rows"
                    : def->name == "attention" || def->name == "recurrence" || def->name == "matmul_nbits" ||
                            def->name == "top_k"
                        ? def->name
                                                                                      : ""));
      CHECK(gpu == (def->name == "attention" ? "attention" : ""));
      continue;
    }
    if (def->has(OpTrait::aliases_operand)) {
      // Model state: the views live in the buffer; buffer_append's rows are
      // written in place (the CPU's loop nest, a GPU kernel).
      CHECK(cpu == "state");
      CHECK(gpu == "state");
      continue;
    }
    if (def->has(OpTrait::communicates)) {
      // A tensor-parallel rank's collectives: the CPU calls the runtime's
      // communicator, the GPU emulator too (host code between launches);
      // the device backends refuse rank programs for now
      // (docs/tensor-parallel.md).
      CHECK(cpu == "collective");
      CHECK(gpu == "collective");
      continue;
    }
    CHECK_FALSE(cpu.empty());
    CHECK_FALSE(gpu.empty());
    // Element formulas exactly for the ops computed from operand elements.
    CHECK(codegen::has_element_formula(def->name) ==
          def->traits.any(OpTrait::elementwise | OpTrait::generator | OpTrait::collective));
    if (def->is_elemental() || def->has(OpTrait::reduction) || def->has(OpTrait::window)) {
      CHECK(codegen::has_elemental_lowering(def->name));
      CHECK((cpu == "elemental" || cpu == def->name));
    }
    if (def->has(OpTrait::reduction))
      CHECK(gpu == (def->has(OpTrait::index_result) ? "elementwise" : "reduction"));
    if (def->is_elemental())
      CHECK(gpu == "elementwise");
    if (def->has_bodies())
      CHECK(cpu == gpu); // "call", "branch": host code around the bodies' functions
  }
}

namespace {

/// x → op(x) (or op(x, y)) for the first dtype the op accepts, with
/// `shapes` as the operand shapes (a broadcast for binary ops).
std::unique_ptr<Graph> single_op_graph(const OpDef &def, DType dtype, const std::vector<std::vector<int64_t>> &shapes) {
  std::vector<TensorType> types;
  for (size_t i = 0; i < static_cast<size_t>(def.min_operands); ++i)
    types.emplace_back(dtype, make_shape(shapes[i]));
  auto g = std::make_unique<Graph>("g", types);
  std::vector<ValueId> results = g->add_node(def.name, g->input_ids());
  g->set_outputs(results);
  return g;
}

void check_op_everywhere(const OpDef &def, const std::vector<std::vector<int64_t>> &shapes) {
  int tried = 0;
  for (DType d : {DType::f32, DType::f64, DType::i32, DType::boolean}) {
    std::unique_ptr<Graph> g;
    try {
      g = single_op_graph(def, d, shapes);
    } catch (const Error &) {
      continue; // the op does not take this dtype
    }
    ++tried;
    INFO(def.name << " on " << dtype_name(d));
    std::vector<HostTensor> inputs;
    for (size_t i = 0; i < static_cast<size_t>(def.min_operands); ++i)
      inputs.push_back(d == DType::boolean ? random_tensor(d, shapes[i], 0, 1.99)
                                           : random_tensor(d, shapes[i], i == 0 ? -3 : 0.5, 3));
    std::vector<HostTensor> expected = Interpreter::run(*g, inputs);
    double rtol = is_float(d) ? 1e-5 : 0, atol = is_float(d) ? 1e-6 : 0;
    {
      INFO("CPU");
      MAXC_REQUIRE_CLOSE(run_compiled(*g, inputs)[0], expected[0], rtol, atol);
    }
    {
      INFO("GPU kernels, emulated");
      MAXC_REQUIRE_CLOSE(run_gpu_emulated(*g, inputs)[0], expected[0], rtol, atol);
    }
  }
  CHECK(tried > 0);
}

} // namespace

TEST_CASE("every unary and binary op of the registry compiles like the interpreter", "[codegen][ops][traits]") {
  for (const OpDef *def : OpRegistry::instance().all()) {
    if (def->has(OpTrait::unary))
      check_op_everywhere(*def, {{3, 17}});
    else if (def->has(OpTrait::binary))
      check_op_everywhere(*def, {{3, 17}, {17}});
  }
}

TEST_CASE("a kernel ending in a reshape that merges dims loops over its operand", "[codegen][ops][reshape]") {
  // [n, 6, 5, 9] -> transpose -> [n, 5, 6*9]: looped over the transpose's
  // shape (no division per element); size-1 dims in a run; an innermost dim
  // below a vector (the result's loop); a symbolic leading dim.
  HostTensor x = random_tensor(DType::f32, {3, 6, 5, 9}), y = random_tensor(DType::f32, {3, 1, 7, 16});
  check_compiled({x, y}, [](auto &in) {
    auto t = [&] { return ops::transpose(ops::exp(in[0]) + in[0], {0, 2, 1, 3}); }; // read once each
    Tensor u = ops::transpose(ops::sigmoid(in[1]) * in[1], {0, 2, 1, 3});
    return std::vector<Tensor>{ops::reshape(t(), {3, 5, 54}), ops::reshape(u, {3, 112}), ops::reshape(t(), {3, 30, 9}),
                               ops::reshape(ops::transpose(ops::exp(in[0]), {0, 1, 3, 2}), {3, 54, 5})};
  });
  Dim n("n");
  auto graph = trace_graph({TensorType(DType::f32, {n, 6, 5, 9})}, [&](auto &in) {
    return std::vector<Tensor>{ops::reshape(ops::transpose(ops::exp(in[0]), {0, 2, 1, 3}), {n, 5, 54})};
  });
  auto actual = run_compiled(*graph, {x});
  MAXC_REQUIRE_CLOSE(actual[0], cpu_reference(*graph, {x})[0], 1e-5, 1e-6);
}

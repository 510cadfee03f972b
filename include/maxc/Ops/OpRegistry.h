// The op registry: every op is defined once, in one place, with its operand
// count, attributes, verifier + type inference, and reference kernel.
//
// Adding an op: write an OpDef in the lib/Ops/<Family>.cpp that fits it, add
// it in that file's register_*_ops function with its traits, add a functional
// wrapper in include/maxc/Ops/Ops.h, and tests in test/unit/Ops/. What an op
// *is* (elementwise, reduction, a view...) is declared once, as traits on its
// OpDef; the planner and every code generator read the traits, never lists of
// op names. docs/adding-an-op.md names every file.
#pragma once

#include "maxc/IR/Attribute.h"
#include "maxc/IR/HostTensor.h"
#include "maxc/IR/TensorType.h"

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace maxc {

class Graph;
struct Node;

struct AttrSpec {
  std::string name;
  AttrKind kind;
  /// Value used when the attribute is absent; nullopt means required.
  std::optional<AttrValue> default_value;
  std::string doc;
};

/// What an op's verifier/inference sees.
struct InferContext {
  const std::vector<TensorType> &operands;
  const Attrs &attrs;
  /// The graph the node is being added to (for `constant` and `call`).
  const Graph *graph = nullptr;
};

/// What an op's reference kernel sees. Shapes here are concrete.
struct ReferenceContext {
  const std::vector<HostTensor> &operands;
  const Attrs &attrs;
  /// Result types as inferred in the graph (may be symbolic)...
  const std::vector<TensorType> &result_types;
  /// ...and their concrete sizes under the current dim bindings.
  const std::vector<std::vector<int64_t>> &result_shapes;
  const DimBindings &dims;
  const Graph &graph;
  /// Runs a graph (a subgraph body) on inputs; used by `call`.
  std::function<std::vector<HostTensor>(const Graph &, const std::vector<HostTensor> &)> run_graph;

  /// Allocates result i with its concrete shape and inferred dtype.
  HostTensor make_result(size_t i = 0) const {
    return HostTensor(result_types.at(i).dtype, result_shapes.at(i));
  }
};

/// Op classes (after tinygrad's GroupOp), declared once on each OpDef and read
/// by the lowering planner and the code generators.
enum class OpTrait : uint32_t {
  /// out[i] = f(operand elements at i, NumPy-broadcast): no inner loops.
  elementwise = 1u << 0,
  /// elementwise with one operand: an element formula of one value.
  unary = 1u << 1,
  /// elementwise with two operands of one dtype.
  binary = 1u << 2,
  /// Folds operand 0 over axes; its producers fuse into it (each operand
  /// element is read once).
  reduction = 1u << 3,
  /// A view: reads its operands at a remapped index (reshape, slice, pad...).
  shape = 1u << 4,
  /// No operands; each element follows from its index: free to recompute.
  generator = 1u << 5,
  /// A contraction that may run as a GEMM kernel with a fused epilogue.
  gemm_like = 1u << 6,
  /// Reads every operand at the output's own index (up to broadcasting), so
  /// it may be part of a GEMM epilogue chain.
  epilogue_safe = 1u << 7,
  /// Needs transcendental math (libm) on the device for f64 operands.
  device_libm_f64 = 1u << 8,
  /// Needs libm on the device for every float dtype (pow).
  device_libm = 1u << 9,
  /// Reads an operand at indices taken from another operand's values (gather):
  /// a producer does not fuse into it.
  indirect = 1u << 10,
  /// A sliding window (convolution, pooling): inner loops per element.
  window = 1u << 11,
  /// Rewritten into primitive ops before code generation (Transforms/Decompose).
  composite = 1u << 12,
  /// Combines shards of one value (allreduce_sum).
  collective = 1u << 13,
  /// Graph structure, no arithmetic: constants, subgraph calls.
  structural = 1u << 14,
  /// A reduction whose result is the index of the element it picks
  /// (argmax/argmin), not a value.
  index_result = 1u << 15,
  /// A composite that computes each row (its trailing axes) from that row
  /// alone (softmax, log_softmax, layer_norm, rms_norm): a backend that lowers
  /// it as one row kernel keeps it whole (DecomposeOptions::keep_rowwise);
  /// every other backend gets it decomposed.
  rowwise = 1u << 16,
  /// A view that moves no data: each element is its first operand's at an
  /// affine index (an offset plus a stride per axis): reshape, squeeze,
  /// unsqueeze, transpose, split, slice. The CPU's attention kernel reads
  /// such views of a stored buffer in place (codegen::strided_view).
  strided = 1u << 17,
  /// A subgraph call: invokes its one body (OpDef::body_attrs) with operand i
  /// as the body's input i, and its results are the body's outputs. Code
  /// that relies on that binding (call-site constants, the emitted call)
  /// asks is_call / call_body; code that only needs "this node runs a body"
  /// asks node_bodies (IR/Graph.h).
  call = 1u << 18,
  /// A conditional (`if`): operand 0 is a scalar predicate (bool or
  /// integer, nonzero = true); runs its first body when it holds, else its
  /// second (OpDef::body_attrs, two), each with operands 1.. as the body's
  /// inputs (the explicit captures); its results are the taken body's
  /// outputs. Code that binds operands to body inputs asks is_branch /
  /// branch_bodies; a call's rules (is_call) never apply to it.
  branch = 1u << 19,
  /// Defines a symbolic dim from its operand's value at run time
  /// (`bind_dim`: the string attribute kBindDimSymbolAttr names the symbol,
  /// declared in the root's table as a node result with an upper bound).
  /// The node is always live (the symbol is read through types, not through
  /// its result), its operand is stored, and the code generators load the
  /// symbol after its kernel; buffers are sized by the bound.
  defines_symbol = 1u << 20,
  /// Result 0 is a view of the first rows of operand 0's storage, which is
  /// a model-state buffer (a graph input, ModelState): no copy is made, the
  /// planner gives the result operand 0's storage (buffer_prefix,
  /// buffer_append; Ops/State.cpp).
  aliases_operand = 1u << 21,
  /// Writes into operand 0's storage in place (buffer_append): an effect, so
  /// the node is live whether or not its result is read, and so is a call
  /// whose body holds one (has_effects).
  writes_buffer = 1u << 22,
  /// A loop (`loop`): operand 0 is the trip count (an integer scalar),
  /// operand 1 the initial condition (a scalar, nonzero = true), then the
  /// loop-carried values, then the captures. While the iteration number is
  /// below the trip count and the condition holds, runs its one body
  /// (OpDef::body_attrs) with (iteration number as an i64 scalar, the
  /// condition, the carried values, the captures) as its inputs; the body
  /// returns the next condition and the next carried values, of the same
  /// types. Its results are the last carried values. Code that binds
  /// operands to body inputs asks is_loop / loop_body.
  loop = 1u << 23,
  /// Exchanges data with the other ranks of a tensor-parallel program
  /// through the communicator (Support/Communicator.h): `all_reduce`,
  /// `all_gather`. Every rank runs it at the same point, so it is never
  /// fused, folded at compile time or moved past another such node.
  communicates = 1u << 24,
};

/// A set of OpTraits.
class OpTraits {
public:
  constexpr OpTraits() = default;
  constexpr OpTraits(OpTrait t) : bits_(static_cast<uint32_t>(t)) {}
  constexpr OpTraits operator|(OpTraits o) const { return from_bits(bits_ | o.bits_); }
  constexpr OpTraits &operator|=(OpTraits o) { bits_ |= o.bits_; return *this; }
  /// True when every trait of `t` is set.
  constexpr bool has(OpTraits t) const { return (bits_ & t.bits_) == t.bits_ && t.bits_ != 0; }
  /// True when any trait of `t` is set.
  constexpr bool any(OpTraits t) const { return (bits_ & t.bits_) != 0; }
  constexpr uint32_t bits() const { return bits_; }
  constexpr bool operator==(OpTraits o) const { return bits_ == o.bits_; }

private:
  static constexpr OpTraits from_bits(uint32_t b) { OpTraits t; t.bits_ = b; return t; }
  uint32_t bits_ = 0;
};
constexpr OpTraits operator|(OpTrait a, OpTrait b) { return OpTraits(a) | OpTraits(b); }

/// Ops that compute one output element without loops over other elements:
/// they fuse into their consumers (elementwise, views, generators, collectives).
constexpr OpTraits kElementalTraits =
    OpTrait::elementwise | OpTrait::shape | OpTrait::generator | OpTrait::collective;

/// Names of the traits in `t`, in declaration order ("elementwise unary ...").
std::string op_traits_text(OpTraits t);

using InferFn = std::function<std::vector<TensorType>(const InferContext &)>;
using ReferenceFn = std::function<std::vector<HostTensor>(const ReferenceContext &)>;

struct OpDef {
  std::string name;
  std::string summary;
  int min_operands = 1;
  /// -1: any number from min_operands up.
  int max_operands = 1;
  std::vector<AttrSpec> attrs;
  /// Verifies operands/attributes and returns the result types. Throws
  /// maxc::Error (ShapeMismatch, DTypeMismatch, InvalidAttribute) on bad input.
  InferFn infer;
  ReferenceFn reference;
  /// What the op is; see OpTrait.
  OpTraits traits;
  /// Names of the op's string attributes that each name a subgraph body the
  /// node invokes (a subgraph of the root graph); `call` declares {"callee"}.
  /// IR code reaches them through body_attributes()/node_bodies()
  /// (IR/Graph.h), which the registry installs; docs/adding-an-op.md.
  std::vector<std::string> body_attrs;

  bool has(OpTraits t) const { return traits.has(t); }
  /// Invokes subgraph bodies (declares body attributes).
  bool has_bodies() const { return !body_attrs.empty(); }
  /// Fuses into its consumers (any of kElementalTraits).
  bool is_elemental() const { return traits.any(kElementalTraits); }
};

/// The traits of op `name`; none for an unknown op.
OpTraits op_traits(const std::string &name);

/// True when op `name` invokes subgraph bodies (OpDef::body_attrs).
bool has_bodies(const std::string &name);
/// True for a subgraph call (OpTrait::call).
bool is_call(const Node &node);
/// The name of the body a call invokes; null when `node` is not a call.
const std::string *call_body_name(const Node &node);
/// The body a call (a node of `graph`) invokes, from the root graph's
/// subgraph table; null when `node` is not a call or names no subgraph.
const Graph *call_body(const Graph &graph, const Node &node);
/// True for a conditional (OpTrait::branch).
bool is_branch(const Node &node);
/// The then- and else-bodies of a conditional (a node of `graph`), from the
/// root graph's subgraph table; {null, null} when `node` is not a branch
/// (either is null when its name has no subgraph).
std::array<const Graph *, 2> branch_bodies(const Graph &graph, const Node &node);
/// True for a loop (OpTrait::loop).
bool is_loop(const Node &node);
/// The body of a loop (a node of `graph`), from the root graph's subgraph
/// table; null when `node` is not a loop or names no subgraph.
const Graph *loop_body(const Graph &graph, const Node &node);
/// A loop's operand i + kLoopFirstCarried is its i-th loop-carried value
/// (operand 0 is the trip count, 1 the condition); the captures follow the
/// carried values (their count is the node's result count).
inline constexpr size_t kLoopFirstCarried = 2;
/// True for a node that defines a symbol (OpTrait::defines_symbol); the
/// symbol it defines is defined_symbol(node).
bool defines_symbol(const Node &node);
/// True for a node that writes a state buffer in place (OpTrait::writes_buffer).
bool writes_buffer(const Node &node);
/// True when running `node` has an effect besides its results: it writes a
/// state buffer, or it runs a body (a call, a branch) that has one. Such a
/// node is live whether or not its results are read.
bool has_effects(const Graph &graph, const Node &node);
/// The symbol a defines_symbol node defines; throws for any other node.
const std::string &defined_symbol(const Node &node);
/// A branch's operand i + kBranchFirstInput is its bodies' input i
/// (operand 0 is the predicate).
inline constexpr size_t kBranchFirstInput = 1;

class OpRegistry {
public:
  /// The process-wide registry holding every built-in op.
  static const OpRegistry &instance();

  /// nullptr for an unknown op.
  const OpDef *find(const std::string &name) const;
  /// Throws maxc::Error (UnknownOp) with close matches for an unknown op.
  const OpDef &get(const std::string &name) const;
  /// Every op, sorted by name.
  std::vector<const OpDef *> all() const;

  void add(OpDef def);

private:
  std::map<std::string, OpDef> ops_;
};

/// Fills in defaults, coerces kinds (int → float, string → dtype, ...) and
/// rejects unknown or ill-typed attributes. Throws maxc::Error.
Attrs normalize_attrs(const OpDef &def, const Attrs &attrs);

/// Graph's NodeInference (IR/Graph.h) through this registry: normalises
/// `attrs` and infers the result types. lib/Ops/InstallOps.cpp installs it.
std::vector<TensorType> infer_node(const std::string &op, const std::vector<TensorType> &operands, Attrs &attrs,
                                   const Graph *graph);

/// Runs the op's operand-count check, attribute normalisation and inference.
std::vector<TensorType> infer_result_types(const OpDef &def, const std::vector<TensorType> &operands,
                                           const Attrs &normalized_attrs, const Graph *graph);

} // namespace maxc

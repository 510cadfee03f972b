// The op registry: every op is defined once, in one place, with its operand
// count, attributes, verifier + type inference, and reference kernel.
//
// Adding an op: write an OpDef in the lib/Ops/<Family>.cpp that fits it, add
// it in that file's register_*_ops function, add a functional wrapper in
// include/maxc/Ops/Ops.h, and tests in test/unit/Ops/. Later backends look up
// their lowering by op name.
#pragma once

#include "maxc/IR/Attribute.h"
#include "maxc/IR/HostTensor.h"
#include "maxc/IR/TensorType.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace maxc {

class Graph;

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
};

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

/// Runs the op's operand-count check, attribute normalisation and inference.
std::vector<TensorType> infer_result_types(const OpDef &def, const std::vector<TensorType> &operands,
                                           const Attrs &normalized_attrs, const Graph *graph);

} // namespace maxc

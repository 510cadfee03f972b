// The symbols of a model's dims: where each comes from and how large it
// may be.
//
// Every symbolic Dim (Dim.h) names symbols; the table says, per symbol, its
// origin — bound by an input's shape (an input dim), passed explicitly to
// NAME_run though no input shape binds it (a dim argument), or computed by a
// node's result (defined by a node) — and an optional upper bound. The root
// Graph owns the model's table (Graph::symbol_table): Graph::add_input
// declares the bare-symbol dims of each input as input dims, a frontend or
// pass declares the others and gives bounds, and `model_symbols`
// (GraphSymbols.h) completes it with every symbol the graph uses, so it
// agrees with `dim_symbols`.
//
// Symbols are sizes: a symbol's value is never negative (NAME_run rejects
// negative dims), so its lower bound is 0.
#pragma once

#include "maxc/IR/Dim.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace maxc {

enum class SymbolOrigin {
  InputDim,    // bound by the shape of a graph input
  DimArgument, // passed explicitly (no input shape binds it)
  NodeResult,  // computed by a node's result at run time
};

/// "input dim", "dim argument", "node result".
const char *symbol_origin_name(SymbolOrigin origin);

struct SymbolInfo {
  std::string name;
  SymbolOrigin origin = SymbolOrigin::InputDim;
  /// NodeResult: the defining node (index in its graph's nodes()) and which
  /// of its results holds the value; -1 otherwise.
  int64_t node = -1;
  int64_t result = -1;
  /// The largest value the symbol may take; nullopt when unbounded.
  std::optional<int64_t> upper_bound;
};

/// Model state (a KV cache): graph inputs that are buffers the model updates
/// in place (buffer_append, Ops/State.cpp), kept between runs by the caller
/// (NAME_run) or by the artifact's state object (NAME_state_create /
/// NAME_step). Every buffer's leading dim is the symbol `capacity`; before
/// a run its first `length` rows hold the state, and a run appends `advance`
/// rows (length + advance <= capacity, checked by NAME_run).
struct ModelState {
  std::vector<std::string> buffers; // the graph inputs' names, in input order
  std::string length;               // a dim argument: rows filled ("past")
  std::string capacity;             // an input dim: rows allocated ("max_context")
  Dim advance;                      // rows a run appends ("seq")
  bool operator==(const ModelState &o) const {
    return buffers == o.buffers && length == o.length && capacity == o.capacity && advance == o.advance;
  }
};

class SymbolTable {
public:
  /// Declares `name` (an identifier) with its origin. Declaring a symbol
  /// again with the same origin (and node) keeps the first entry; a
  /// different origin throws maxc::Error (a symbol has one source).
  const SymbolInfo &declare(const std::string &name, SymbolOrigin origin, int64_t node = -1, int64_t result = -1);
  /// Bounds a declared symbol: value <= `bound` (>= 0). A second bound keeps
  /// the tighter one. Throws for an undeclared symbol or a negative bound.
  void set_upper_bound(const std::string &name, int64_t bound);

  /// The entry of `name`, or null.
  const SymbolInfo *find(const std::string &name) const;
  bool contains(const std::string &name) const { return find(name) != nullptr; }
  /// The bound of `name`; nullopt when unbounded or undeclared.
  std::optional<int64_t> upper_bound(const std::string &name) const;
  /// Every symbol, sorted (the order of dim_symbols and the C dims).
  std::vector<std::string> names() const;
  const std::map<std::string, SymbolInfo> &entries() const { return symbols_; }
  size_t size() const { return symbols_.size(); }
  bool empty() const { return symbols_.empty(); }

  /// The model's state, when it has some (root graph only).
  const std::optional<ModelState> &model_state() const { return state_; }
  void set_model_state(ModelState state) { state_ = std::move(state); }

private:
  std::map<std::string, SymbolInfo> symbols_;
  std::optional<ModelState> state_;
};

/// An upper bound of `d` in which every symbol that `table` says a node
/// defines (SymbolOrigin::NodeResult) is replaced by its upper bound, the
/// other symbols kept: what a buffer whose size is `d` is allocated with
/// before the node runs. Replacing is exact where each such symbol appears
/// only in terms with a positive coefficient, outside min/max/floordiv;
/// otherwise the whole of `d` must have a finite bound (Dim::upper_bound).
/// Throws maxc::Error (InvalidArgument) naming `what` when neither holds or
/// a node-defined symbol has no bound. `d` itself when it names none.
Dim bound_node_symbols(const Dim &d, const SymbolTable &table, const std::string &what);

} // namespace maxc

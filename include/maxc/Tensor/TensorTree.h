// A tree of tensors (leaf, list or string-keyed dict): what a subgraph body
// returns. Its structure (TreeDef) is recorded per keyed subgraph so a cached
// call can rebuild results without tracing the body again.
#pragma once

#include "maxc/Tensor/Tensor.h"

#include <map>
#include <string>
#include <vector>

namespace maxc {

/// The shape of a TensorTree without its tensors.
struct TreeDef {
  enum class Kind { leaf, list, dict } kind = Kind::leaf;
  std::vector<TreeDef> children;
  std::vector<std::string> keys; // dict keys, sorted, parallel to children

  size_t num_leaves() const;
  std::string to_string() const; // "(*, [*, *], {a: *})"
  bool operator==(const TreeDef &o) const {
    return kind == o.kind && children == o.children && keys == o.keys;
  }
};

class TensorTree {
public:
  TensorTree() : def_{TreeDef::Kind::list, {}, {}} {}
  TensorTree(Tensor leaf); // NOLINT: a tensor is a one-leaf tree
  static TensorTree list(std::vector<TensorTree> items);
  static TensorTree dict(std::map<std::string, TensorTree> items);

  const TreeDef &structure() const { return def_; }
  bool is_leaf() const { return def_.kind == TreeDef::Kind::leaf; }
  /// The leaf tensor; throws for lists and dicts.
  const Tensor &tensor() const;
  const std::vector<TensorTree> &items() const { return items_; }
  /// Dict lookup; throws maxc::Error for a missing key.
  const TensorTree &at(const std::string &key) const;
  /// List index; throws maxc::Error when out of range.
  const TensorTree &at(size_t index) const;

  /// Leaves in order (lists by index, dicts by sorted key).
  std::vector<Tensor> flatten() const;
  /// Inverse of flatten; throws if `leaves` does not match `def`.
  static TensorTree unflatten(const TreeDef &def, const std::vector<Tensor> &leaves);

private:
  TreeDef def_;
  Tensor leaf_;
  std::vector<TensorTree> items_;
};

} // namespace maxc

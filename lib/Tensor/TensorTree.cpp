#include "maxc/Tensor/TensorTree.h"

#include "maxc/Support/Error.h"

namespace maxc {

size_t TreeDef::num_leaves() const {
  if (kind == Kind::leaf)
    return 1;
  size_t n = 0;
  for (const TreeDef &c : children)
    n += c.num_leaves();
  return n;
}

std::string TreeDef::to_string() const {
  switch (kind) {
  case Kind::leaf: return "*";
  case Kind::list: {
    std::string s = "[";
    for (size_t i = 0; i < children.size(); ++i)
      s += (i ? ", " : "") + children[i].to_string();
    return s + "]";
  }
  case Kind::dict: {
    std::string s = "{";
    for (size_t i = 0; i < children.size(); ++i)
      s += (i ? ", " : "") + keys[i] + ": " + children[i].to_string();
    return s + "}";
  }
  }
  return "?";
}

TensorTree::TensorTree(Tensor leaf) : def_{TreeDef::Kind::leaf, {}, {}}, leaf_(std::move(leaf)) {}

TensorTree TensorTree::list(std::vector<TensorTree> items) {
  TensorTree t;
  t.def_.kind = TreeDef::Kind::list;
  for (const TensorTree &item : items)
    t.def_.children.push_back(item.def_);
  t.items_ = std::move(items);
  return t;
}

TensorTree TensorTree::dict(std::map<std::string, TensorTree> items) {
  TensorTree t;
  t.def_.kind = TreeDef::Kind::dict;
  for (auto &[key, item] : items) {
    t.def_.keys.push_back(key);
    t.def_.children.push_back(item.def_);
    t.items_.push_back(std::move(item));
  }
  return t;
}

const Tensor &TensorTree::tensor() const {
  if (!is_leaf())
    throw Error(ErrorCode::InvalidArgument, "tensor tree " + def_.to_string() + " is not a single tensor");
  return leaf_;
}

const TensorTree &TensorTree::at(const std::string &key) const {
  for (size_t i = 0; i < def_.keys.size(); ++i)
    if (def_.keys[i] == key)
      return items_[i];
  throw Error(ErrorCode::InvalidArgument, "tensor tree " + def_.to_string() + " has no key '" + key + "'");
}

const TensorTree &TensorTree::at(size_t index) const {
  if (def_.kind != TreeDef::Kind::list || index >= items_.size())
    throw Error(ErrorCode::InvalidArgument,
                "tensor tree " + def_.to_string() + " has no item " + std::to_string(index));
  return items_[index];
}

std::vector<Tensor> TensorTree::flatten() const {
  if (is_leaf())
    return {leaf_};
  std::vector<Tensor> out;
  for (const TensorTree &item : items_) {
    auto sub = item.flatten();
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

static TensorTree unflatten_at(const TreeDef &def, const std::vector<Tensor> &leaves, size_t &pos) {
  switch (def.kind) {
  case TreeDef::Kind::leaf: return TensorTree(leaves.at(pos++));
  case TreeDef::Kind::list: {
    std::vector<TensorTree> items;
    for (const TreeDef &c : def.children)
      items.push_back(unflatten_at(c, leaves, pos));
    return TensorTree::list(std::move(items));
  }
  case TreeDef::Kind::dict: {
    std::map<std::string, TensorTree> items;
    for (size_t i = 0; i < def.children.size(); ++i)
      items.emplace(def.keys[i], unflatten_at(def.children[i], leaves, pos));
    return TensorTree::dict(std::move(items));
  }
  }
  return {};
}

TensorTree TensorTree::unflatten(const TreeDef &def, const std::vector<Tensor> &leaves) {
  if (def.num_leaves() != leaves.size())
    throw Error(ErrorCode::InvalidArgument, "tree " + def.to_string() + " has " + std::to_string(def.num_leaves()) +
                                                " leaves, got " + std::to_string(leaves.size()) + " tensors");
  size_t pos = 0;
  return unflatten_at(def, leaves, pos);
}

} // namespace maxc

#include "maxc/IR/Graph.h"

#include <functional>

#include "maxc/IR/Printer.h"
#include "maxc/Support/BulkMemory.h"
#include "maxc/Support/Error.h"
#include "maxc/Support/FileSystem.h"

#include <algorithm>
#include <functional>
#include <mutex>
#include <set>
#include <utility>

namespace maxc {

const TensorType &Value::type() const {
  if (!graph_)
    throw Error(ErrorCode::InvalidArgument, "use of a null graph value");
  return graph_->type_of(id_);
}

Graph::Graph(std::string name, const std::vector<TensorType> &input_types) : name_(std::move(name)) {
  for (const TensorType &t : input_types)
    add_input(t);
}

ValueId Graph::new_value(TensorType type, int64_t producer, uint32_t index, std::string name) {
  values_.push_back(ValueInfo{std::move(type), producer, index, std::move(name)});
  return static_cast<ValueId>(values_.size() - 1);
}

ValueId Graph::add_input(const TensorType &type, std::string name) {
  if (!nodes_.empty())
    throw Error(ErrorCode::InvalidGraph, "graph '" + name_ + "': inputs must be added before any node");
  ValueId id = new_value(type, -1, static_cast<uint32_t>(inputs_.size()), std::move(name));
  inputs_.push_back(id);
  for (const Dim &d : type.shape)
    if (d.is_symbol() && !symbol_table_.contains(d.symbol()))
      symbol_table_.declare(d.symbol(), SymbolOrigin::InputDim);
  return id;
}

std::vector<Value> Graph::inputs() const {
  std::vector<Value> out;
  for (ValueId id : inputs_)
    out.emplace_back(this, id);
  return out;
}

const ValueInfo &Graph::value_info(ValueId id) const {
  if (id >= values_.size())
    throw Error(ErrorCode::InvalidGraph, "graph '" + name_ + "': value %" + std::to_string(id) + " does not exist");
  return values_[id];
}

void Graph::set_value_name(ValueId id, std::string name) {
  value_info(id);
  values_[id].name = std::move(name);
}

namespace {
NodeInference node_inference = nullptr;

std::vector<TensorType> infer_node(const std::string &op, const std::vector<TensorType> &operands, Attrs &attrs,
                                   const Graph *graph) {
  if (!node_inference)
    throw Error(ErrorCode::Internal, "no op registry to check node '" + op + "' (link maxc's Ops component)");
  return node_inference(op, operands, attrs, graph);
}
} // namespace

void set_node_inference(NodeInference fn) { node_inference = fn; }

namespace {
BodyAttributes body_attributes_of = nullptr;
} // namespace

BodyAttributes set_body_attributes(BodyAttributes fn) { return std::exchange(body_attributes_of, fn); }

const std::vector<std::string> &body_attributes(const std::string &op) {
  static const std::vector<std::string> none;
  const std::vector<std::string> *attrs = body_attributes_of ? body_attributes_of(op) : nullptr;
  return attrs ? *attrs : none;
}

std::vector<std::string> body_names(const Node &node) {
  std::vector<std::string> out;
  for (const std::string &attr : body_attributes(node.op))
    if (node.attrs.has(attr))
      out.push_back(node.attrs.get_string(attr));
  return out;
}

std::vector<const Graph *> node_bodies(const Graph &graph, const Node &node) {
  std::vector<const Graph *> out;
  for (const std::string &name : body_names(node))
    if (const Graph *body = graph.find_subgraph(name))
      out.push_back(body);
  return out;
}

std::vector<const Graph *> subgraphs_bodies_first(const Graph &root) {
  std::vector<const Graph *> out;
  std::map<const Graph *, int> state; // 1: being visited, 2: done
  std::function<void(const Graph &)> visit = [&](const Graph &g) {
    int &s = state[&g];
    if (s != 0)
      return; // done, or a cycle (a malformed graph: verify reports it)
    s = 1;
    for (const Node &n : g.nodes())
      for (const Graph *body : node_bodies(g, n))
        visit(*body);
    state[&g] = 2;
    out.push_back(&g);
  };
  for (const auto &[name, sub] : root.subgraphs())
    visit(*sub);
  return out;
}

std::vector<ValueId> Graph::add_node(const std::string &op, const std::vector<ValueId> &operands, Attrs attrs,
                                     std::string name) {
  std::vector<TensorType> operand_types;
  for (ValueId id : operands)
    operand_types.push_back(value_info(id).type);
  std::vector<TensorType> result_types = infer_node(op, operand_types, attrs, this);
  return append_node_unchecked(Node{op, operands, {}, std::move(attrs), std::move(name)}, result_types);
}

std::vector<ValueId> Graph::append_node_unchecked(Node node, const std::vector<TensorType> &result_types) {
  int64_t index = static_cast<int64_t>(nodes_.size());
  node.results.clear();
  for (size_t i = 0; i < result_types.size(); ++i)
    node.results.push_back(new_value(result_types[i], index, static_cast<uint32_t>(i), {}));
  nodes_.push_back(std::move(node));
  return nodes_.back().results;
}

void Graph::output(const std::vector<Value> &values) {
  std::vector<ValueId> ids;
  for (const Value &v : values) {
    if (v.graph() != this)
      throw Error(ErrorCode::ForeignValue, "graph '" + name_ + "': an output belongs to another graph");
    ids.push_back(v.id());
  }
  set_outputs(ids);
}

void Graph::set_outputs(const std::vector<ValueId> &ids, const std::vector<std::string> &names) {
  for (ValueId id : ids)
    value_info(id);
  if (!names.empty() && names.size() != ids.size())
    throw Error(ErrorCode::InvalidArgument, "graph '" + name_ + "': " + std::to_string(names.size()) +
                                                " output names for " + std::to_string(ids.size()) + " outputs");
  outputs_ = ids;
  output_names_ = names;
}

std::vector<Value> Graph::outputs() const {
  std::vector<Value> out;
  for (ValueId id : outputs_)
    out.emplace_back(this, id);
  return out;
}

namespace {
/// `w` with its last two dimensions swapped. Bulk storage, left
/// uninitialized (every byte is written): zero-filling, then 4 KiB page
/// faults, were most of the time on a GPT's weights (Support/BulkMemory.h).
HostTensor transposed_copy(const HostTensor &w) {
  std::vector<int64_t> shape = w.shape();
  int64_t r = w.rank(), rows = shape[r - 2], cols = shape[r - 1];
  std::swap(shape[r - 1], shape[r - 2]);
  HostTensor t(w.dtype(), shape, allocate_bulk(w.nbytes()));
  transpose_matrices(w.data(), t.data(), w.numel() / std::max<int64_t>(rows * cols, 1), rows, cols,
                     dtype_size(w.dtype()));
  return t;
}
} // namespace

struct Graph::TransposedConstants {
  std::mutex mutex;
  std::map<std::string, HostTensor> sources;
  std::set<std::string> pending; // bytes not made yet
};

void Graph::make_transposed(const std::string *name) const {
  if (!transposed_)
    return;
  std::lock_guard<std::mutex> lock(transposed_->mutex);
  auto &pending = transposed_->pending;
  for (auto it = name ? pending.find(*name) : pending.begin(); it != pending.end();) {
    const HostTensor &w = transposed_->sources.at(*it);
    constants_.at(*it) = transposed_copy(w);
    // The source (when it views a mapped weights file) is not read again
    // unless another use needs it: its pages need not stay resident.
    release_file_pages(w.data(), w.nbytes());
    it = pending.erase(it);
    if (name)
      break;
  }
}

std::string Graph::add_transposed_constant(const std::string &name, const HostTensor &source) {
  if (source.rank() < 2)
    throw Error(ErrorCode::InvalidArgument, "add_transposed_constant: '" + name + "' has rank < 2");
  std::vector<int64_t> shape = source.shape();
  std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
  std::string candidate = name.empty() ? "const" : name;
  if (constants_.count(candidate)) // taken (rare): stored made, as add_constant compares bytes
    return add_constant(name, transposed_copy(source));
  if (!transposed_)
    transposed_ = std::make_shared<TransposedConstants>();
  // A placeholder with the type and no storage until made.
  constants_.emplace(candidate, HostTensor(source.dtype(), shape, std::shared_ptr<std::byte>()));
  std::lock_guard<std::mutex> lock(transposed_->mutex);
  transposed_->sources.emplace(candidate, source);
  transposed_->pending.insert(candidate);
  return candidate;
}

const HostTensor *Graph::transposed_source(const std::string &name) const {
  if (!transposed_)
    return nullptr;
  auto it = transposed_->sources.find(name);
  return it == transposed_->sources.end() ? nullptr : &it->second;
}

const std::map<std::string, HostTensor> &Graph::constants() const {
  make_transposed(nullptr);
  return constants_;
}

std::string Graph::add_constant(const std::string &name, const HostTensor &data) {
  std::string candidate = name.empty() ? "const" : name;
  for (int suffix = 1;; ++suffix) {
    auto it = constants_.find(candidate);
    if (it != constants_.end())
      make_transposed(&candidate); // compared below
    if (it == constants_.end()) {
      constants_.emplace(candidate, data);
      return candidate;
    }
    if (it->second.storage() == data.storage() ? it->second.dtype() == data.dtype() &&
                                                     it->second.shape() == data.shape()
                                               : it->second.identical(data))
      return candidate; // stored once
    candidate = (name.empty() ? "const" : name) + "." + std::to_string(suffix);
  }
}

const HostTensor &Graph::constant(const std::string &name) const {
  auto it = constants_.find(name);
  if (it == constants_.end())
    throw Error(ErrorCode::InvalidGraph, "graph '" + name_ + "': no constant named '" + name + "'");
  make_transposed(&name);
  return it->second;
}

void Graph::add_subgraph(std::shared_ptr<Graph> subgraph) {
  if (!subgraph)
    throw Error(ErrorCode::InvalidArgument, "add_subgraph: null subgraph");
  const std::string &sub_name = subgraph->name();
  if (subgraphs_.count(sub_name))
    throw Error(ErrorCode::InvalidGraph, "graph '" + name_ + "': subgraph '" + sub_name + "' already exists");
  subgraph->root_ = root();
  subgraphs_.emplace(sub_name, std::move(subgraph));
}

const Graph *Graph::find_subgraph(const std::string &name) const {
  const Graph *r = root();
  auto it = r->subgraphs_.find(name);
  return it == r->subgraphs_.end() ? nullptr : it->second.get();
}

std::string describe_node(const Graph &graph, size_t node_index) {
  const Node &node = graph.nodes().at(node_index);
  std::string s = "graph '" + graph.name() + "': node ";
  s += node.results.empty() ? "#" + std::to_string(node_index) : "%" + std::to_string(node.results.front());
  s += " (" + node.op + (node.name.empty() ? "" : " '" + node.name + "'") + ")";
  return s;
}

void Graph::verify() const {
  std::vector<bool> defined(values_.size(), false);
  for (ValueId id : inputs_)
    defined[id] = true;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node &node = nodes_[i];
    std::vector<TensorType> operand_types;
    for (ValueId id : node.operands) {
      if (id >= values_.size() || !defined[id])
        throw Error(ErrorCode::InvalidGraph, "operand %" + std::to_string(id) + " is used before it is defined",
                    describe_node(*this, i));
      operand_types.push_back(values_[id].type);
    }
    std::vector<TensorType> inferred;
    try {
      Attrs attrs = node.attrs;
      inferred = infer_node(node.op, operand_types, attrs, this);
    } catch (const Error &e) {
      throw Error(e.code(), e.message(), describe_node(*this, i));
    }
    if (inferred.size() != node.results.size())
      throw Error(ErrorCode::InvalidGraph, "node has " + std::to_string(node.results.size()) +
                                               " results, the op defines " + std::to_string(inferred.size()),
                  describe_node(*this, i));
    for (size_t r = 0; r < inferred.size(); ++r) {
      ValueId id = node.results[r];
      if (values_[id].type != inferred[r])
        throw Error(ErrorCode::InvalidGraph, "result " + std::to_string(r) + " is typed " +
                                                 values_[id].type.to_string() + " but the op infers " +
                                                 inferred[r].to_string(),
                    describe_node(*this, i));
      defined[id] = true;
    }
  }
  for (ValueId id : outputs_)
    if (id >= values_.size() || !defined[id])
      throw Error(ErrorCode::InvalidGraph, "graph '" + name_ + "': output %" + std::to_string(id) + " is undefined");
  for (const auto &[name, sub] : subgraphs_)
    sub->verify();
}

bool Graph::equals(const Graph &o) const {
  if (name_ != o.name_ || output_names_ != o.output_names_)
    return false;
  if (values_.size() != o.values_.size())
    return false;
  for (size_t i = 0; i < values_.size(); ++i)
    if (values_[i].name != o.values_[i].name)
      return false;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].name != o.nodes_[i].name)
      return false;
  if (structural_key() != o.structural_key())
    return false;
  if (subgraphs_.size() != o.subgraphs_.size())
    return false;
  for (const auto &[name, sub] : subgraphs_) {
    auto it = o.subgraphs_.find(name);
    if (it == o.subgraphs_.end() || !sub->equals(*it->second))
      return false;
  }
  return true;
}

std::string Graph::structural_key() const {
  // The printer's body text without names carries types, ops, attributes and
  // wiring; constant bytes are appended since the printer shows only names.
  std::string key = print_graph_body(*this, PrintOptions{/*debug_names=*/false});
  for (const auto &[name, data] : constants()) {
    key += "\nconst " + name + " " + describe(data) + " ";
    key.append(reinterpret_cast<const char *>(data.data()), data.nbytes());
  }
  return key;
}

} // namespace maxc

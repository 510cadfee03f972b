// Tensor parallelism: one rank's program (Shard.h has the rules).
#include "maxc/Transforms/Shard.h"

#include "maxc/Ops/OpRegistry.h"
#include "maxc/Support/Error.h"
#include "maxc/Transforms/Canonicalize.h"
#include "maxc/Transforms/Rewrite.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <fnmatch.h>

namespace maxc {

namespace {

constexpr ValueId kNone = ~ValueId(0);

/// How a value is held: replicated (axis -1), or split along `axis`: each of
/// its pieces (full sizes along the axis, in order; one piece for a plain
/// split) is cut into `world` equal slices and rank r holds the r-th slice
/// of every piece, side by side. A fused QKV projection's output is three
/// pieces, so that splitting it into q, k and v keeps each split.
struct Layout {
  int64_t axis = -1;
  std::vector<int64_t> pieces;
  std::string why; // how a weight got it ("column", "row"); not part of equality
  /// >= 0: the whole value, held by this rank only (a part of a split
  /// value cut along its split axis: torch's repeat_interleave of grouped
  /// k/v heads splits the heads one by one); the other ranks skip the ops
  /// on it, and a concat of such parts in rank order is split again.
  int64_t owner = -1;
  bool split() const { return axis >= 0; }
  bool owned() const { return owner >= 0; }
  bool same(const Layout &o) const { return axis == o.axis && pieces == o.pieces && owner == o.owner; }
  std::string key() const {
    std::string k = std::to_string(axis) + "@" + std::to_string(owner);
    for (int64_t p : pieces)
      k += ":" + std::to_string(p);
    return k;
  }
};

Layout along(int64_t axis, std::vector<int64_t> pieces, std::string why = {}) {
  return Layout{axis, std::move(pieces), std::move(why)};
}

int64_t norm_axis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

std::vector<int64_t> static_shape(const TensorType &t) {
  std::vector<int64_t> out;
  for (const Dim &d : t.shape)
    out.push_back(d.is_static() ? d.value() : -1);
  return out;
}

/// Rank r's slice of every piece of `t` along layout.axis (Layout), copied.
HostTensor slice_pieces(const HostTensor &t, const Layout &layout, int rank, int world) {
  std::vector<int64_t> shape = t.shape();
  int64_t axis = layout.axis, outer = 1, inner = 1;
  for (int64_t a = 0; a < axis; ++a)
    outer *= shape[a];
  for (int64_t a = axis + 1; a < t.rank(); ++a)
    inner *= shape[a];
  size_t esize = dtype_size(t.dtype());
  int64_t local = 0;
  for (int64_t p : layout.pieces)
    local += p / world;
  std::vector<int64_t> out_shape = shape;
  out_shape[axis] = local;
  HostTensor out(t.dtype(), out_shape);
  std::byte *dst = out.data();
  for (int64_t o = 0; o < outer; ++o) {
    int64_t offset = 0;
    for (int64_t p : layout.pieces) {
      int64_t s = p / world;
      size_t bytes = static_cast<size_t>(s * inner) * esize;
      const std::byte *src = t.data() + static_cast<size_t>((o * shape[axis] + offset + rank * s) * inner) * esize;
      if (bytes)
        std::memcpy(dst, src, bytes);
      dst += bytes;
      offset += p;
    }
  }
  return out;
}

/// A body's interface as its calls see it.
struct BodyPlan {
  std::vector<Layout> inputs; // its outputs are always whole
};

struct Shared {
  const Graph &root;
  ShardOptions options;
  ShardReport *report;
  std::map<std::string, BodyPlan> bodies;
};

/// Builds one graph's rank program into `to`.
class Sharder {
public:
  Sharder(Shared &s, const Graph &from, Graph &to, std::vector<bool> free_inputs, std::vector<Layout> input_layouts,
          bool is_root)
      : s_(s), from_(from), to_(to), readers_(from), free_inputs_(std::move(free_inputs)),
        input_layouts_(std::move(input_layouts)), is_root_(is_root),
        world_(s.options.world), rank_(s.options.rank), vals_(from.num_values()) {}

  /// Input index → the layout a reader wanted for a free input this build
  /// declared replicated (the next build declares it so).
  std::map<size_t, Layout> demands;
  bool report = false; // record weights in the report (the final root build)
  /// Column-parallel products (node indices) to run replicated instead,
  /// and those this build found gathered before an op that could not keep
  /// their split (the next build runs them replicated: a gather right after
  /// a split product only costs).
  std::set<int64_t> keep_whole, retry_whole;

  void run() {
    carry_symbols(from_, to_);
    for (size_t i = 0; i < from_.input_ids().size(); ++i) {
      ValueId in = from_.input_ids()[i];
      const ValueInfo &info = from_.value_info(in);
      const Layout &l = input_layouts_[i];
      TensorType type = info.type;
      if (l.split())
        type.shape[l.axis] = Dim(local_size(l));
      Val &v = vals_[in];
      v.id = to_.add_input(type, info.name);
      v.layout = l;
      v.free_input = free_inputs_[i] ? static_cast<int64_t>(i) : -1;
    }
    // Constants are added as their nodes are made, whole or sliced.
    for (const Node &node : from_.nodes()) {
      name_ = node.name;
      if (node.op == "constant") {
        Val &v = vals_[node.results[0]];
        v.constant = node.attrs.get_string("name");
        continue;
      }
      node_ = static_cast<int64_t>(&node - from_.nodes().data());
      column_ = false;
      int64_t inherited = -1;
      for (ValueId o : node.operands)
        if ((vals_[o].layout.split() || vals_[o].layout.owned()) && vals_[o].origin >= 0) {
          inherited = vals_[o].origin;
          break;
        }
      std::vector<std::pair<ValueId, Layout>> out = rebuild(node);
      for (size_t r = 0; r < out.size(); ++r) {
        Val &v = vals_[node.results[r]];
        v.id = out[r].first;
        v.layout = out[r].second;
        v.origin = column_ ? node_ : inherited;
      }
    }
    // Outputs are whole. The root's may end a split product (a
    // vocabulary-parallel head, gathered); a body's that would needs a
    // gather per call, so that product runs replicated instead (retry).
    outputs_ = is_root_;
    std::vector<ValueId> outputs;
    for (size_t i = 0; i < from_.output_ids().size(); ++i) {
      ValueId o = from_.output_ids()[i];
      name_ = i < from_.output_names().size() && !from_.output_names()[i].empty() ? "output " + from_.output_names()[i]
                                                                                 : "output " + std::to_string(i);
      outputs.push_back(full(o));
    }
    to_.set_outputs(outputs, from_.output_names());
  }

private:
  struct Val {
    ValueId id = kNone; // the local value (all of it when replicated)
    Layout layout;
    std::string constant;     // a `constant` node's name: made on demand, full or sliced
    int64_t free_input = -1;  // a graph input a reader may want split (its index)
    ValueId full_id = kNone;  // the whole value, made or gathered once
    std::map<std::string, ValueId> slices;
    int64_t origin = -1;      // the column-parallel product (node index) its split comes from
  };

  int64_t local_size(const Layout &l) const {
    int64_t n = 0;
    for (int64_t p : l.pieces)
      n += p / world_;
    return n;
  }

  bool divisible(const std::vector<int64_t> &pieces) const {
    return !pieces.empty() && std::all_of(pieces.begin(), pieces.end(), [&](int64_t p) { return p > 0 && p % world_ == 0; });
  }

  const TensorType &type(ValueId v) const { return from_.type_of(v); }
  int64_t rank_of(ValueId v) const { return type(v).rank(); }
  /// v's static size along axis (-1 when symbolic or out of range).
  int64_t dim(ValueId v, int64_t axis) const {
    const Shape &s = type(v).shape;
    if (axis < 0 || axis >= static_cast<int64_t>(s.size()) || !s[axis].is_static())
      return -1;
    return s[axis].value();
  }
  const Layout &layout(ValueId v) const { return vals_[v].layout; }
  /// A weight: a constant (or a graph input calls bind to constants) whose
  /// slices cost nothing at run time.
  bool is_free(ValueId v) const {
    const Val &x = vals_[v];
    if (!x.constant.empty())
      return !kept_whole(x.constant);
    return x.free_input >= 0 && !kept_whole(from_.value_info(from_.input_ids()[x.free_input]).name);
  }
  bool kept_whole(const std::string &name) const {
    for (const std::string &p : s_.options.replicated)
      if (::fnmatch(p.c_str(), name.c_str(), 0) == 0)
        return true;
    return false;
  }

  ValueId add(const std::string &op, const std::vector<ValueId> &operands, Attrs attrs) {
    return to_.add_node(op, operands, std::move(attrs), name_).at(0);
  }

  ValueId add_constant(const std::string &name, const HostTensor &data) {
    std::string used = to_.add_constant(name, data);
    return to_.add_node("constant", {}, {{"name", used}}, name).at(0);
  }

  void record_weight(const std::string &name, const HostTensor &full, const HostTensor &local, const Layout &l) {
    if (!report || !s_.report)
      return;
    ShardReport::Weight w;
    w.name = name;
    w.split = !l.split() ? (kept_whole(name) ? "replicated (--shard)" : "replicated")
                         : !l.why.empty() ? l.why : "axis " + std::to_string(l.axis);
    w.full = full.shape();
    w.local = local.shape();
    w.pieces = l.split() ? l.pieces.size() : 1;
    w.full_bytes = full.nbytes();
    w.local_bytes = local.nbytes();
    s_.report->weights.push_back(w);
  }

  /// v with a value made: a constant node is made whole on first use.
  Val &materialized(ValueId v) {
    Val &x = vals_[v];
    if (x.id == kNone && !x.constant.empty()) {
      const HostTensor &data = from_.constant(x.constant);
      x.id = x.full_id = add_constant(x.constant, data);
      x.layout = Layout{};
      record_weight(x.constant, data, data, Layout{});
    }
    return x;
  }

  /// The whole of v (gathered when it is split).
  ValueId full(ValueId v) {
    Val &x = vals_[v];
    if (x.full_id != kNone)
      return x.full_id;
    if (x.layout.owned()) {
      // Every rank would need a part only one holds: the split it comes
      // from is undone instead (on every rank alike: the decision must not
      // depend on the rank). This build is a draft: a placeholder here.
      if (x.origin < 0)
        throw Error(ErrorCode::Internal, "shard: a part held by one rank has no split product to undo");
      retry_whole.insert(x.origin);
      if (x.layout.owner == rank_)
        return x.id;
      const TensorType &t = type(v);
      return add("full", {}, {{"value", 0.0}, {"dtype", t.dtype}, {"shape", t.shape}});
    }
    if (x.id == kNone)
      return materialized(v).id;
    if (!x.layout.split())
      return x.full_id = x.id;
    if (!outputs_ && !asking_ && x.origin >= 0)
      retry_whole.insert(x.origin);
    ValueId g = gather(x.id, x.layout);
    vals_[v].full_id = g;
    return g;
  }

  ValueId gather(ValueId local, const Layout &l) {
    if (s_.report && report)
      s_.report->gathers.push_back((name_.empty() ? std::string("(unnamed)") : name_));
    if (l.pieces.size() == 1)
      return add("all_gather", {local}, {{"world", int64_t(world_)}, {"axis", l.axis}});
    std::vector<int64_t> sizes;
    for (int64_t p : l.pieces)
      sizes.push_back(p / world_);
    std::vector<ValueId> parts = to_.add_node("split", {local}, {{"axis", l.axis}, {"sizes", sizes}}, name_), whole;
    for (ValueId p : parts)
      whole.push_back(add("all_gather", {p}, {{"world", int64_t(world_)}, {"axis", l.axis}}));
    return add("concat", whole, {{"axis", l.axis}});
  }

  /// This rank's slice of the whole value `whole` (a node of `to`).
  ValueId runtime_slice(ValueId whole, const Layout &l) {
    std::vector<ValueId> parts;
    int64_t offset = 0;
    for (int64_t p : l.pieces) {
      int64_t s = p / world_;
      parts.push_back(add("slice", {whole},
                          {{"starts", std::vector<int64_t>{offset + rank_ * s}},
                           {"ends", std::vector<int64_t>{offset + (rank_ + 1) * s}},
                           {"axes", std::vector<int64_t>{l.axis}}}));
      offset += p;
    }
    return parts.size() == 1 ? parts[0] : add("concat", parts, {{"axis", l.axis}});
  }

  /// v held as `l` on this rank: a constant sliced at compile time, a free
  /// input asked for (the next build declares it split), anything else
  /// sliced at run time from its whole.
  ValueId local(ValueId v, const Layout &l) {
    Val &x = vals_[v];
    if (x.id != kNone && x.layout.same(l))
      return x.id;
    if (auto it = x.slices.find(l.key()); it != x.slices.end())
      return it->second;
    ValueId id;
    if (x.id == kNone && !x.constant.empty()) {
      const HostTensor &data = from_.constant(x.constant);
      HostTensor piece = slice_pieces(data, l, rank_, world_);
      id = add_constant(x.constant, piece);
      record_weight(x.constant, data, piece, l);
    } else {
      if (x.free_input >= 0 && !x.layout.split() && !demands.count(static_cast<size_t>(x.free_input)))
        demands[static_cast<size_t>(x.free_input)] = l;
      id = runtime_slice(full(v), l);
    }
    vals_[v].slices[l.key()] = id;
    return id;
  }

  /// The local value of an operand that keeps its own layout.
  ValueId own(ValueId v) { return materialized(v).id; }

  using Results = std::vector<std::pair<ValueId, Layout>>;

  Results replicated_copy(const Node &node) {
    std::vector<ValueId> ops;
    for (ValueId v : node.operands)
      ops.push_back(full(v));
    Results out;
    for (ValueId r : to_.add_node(node.op, ops, node.attrs, node.name))
      out.push_back({r, Layout{}});
    return out;
  }

  Results one(ValueId id, Layout l) { return Results{{id, std::move(l)}}; }

  bool any_split(const Node &node) const {
    for (ValueId v : node.operands)
      if (layout(v).split())
        return true;
    return false;
  }

  /// The pieces a column-parallel product's output should be cut in: the
  /// sizes of a split along its last axis that is its only reader, or is
  /// reached through a few single-reader elementwise ops of its shape (a
  /// fused QKV, its bias added first: ONNX exports), else the whole axis.
  std::vector<int64_t> column_pieces(ValueId result, int64_t size) const {
    ValueId v = result;
    for (int step = 0; step < 4; ++step) {
      const auto &rd = readers_.of(v);
      if (rd.size() != 1 || rd[0] < 0)
        break;
      const Node &r = from_.nodes()[rd[0]];
      if (r.op == "split" && norm_axis(r.attrs.get_int("axis"), rank_of(v)) == rank_of(v) - 1) {
        std::vector<int64_t> sizes = r.attrs.get_ints("sizes");
        if (divisible(sizes))
          return sizes;
        break;
      }
      if (!op_traits(r.op).has(OpTrait::elementwise) || r.results.size() != 1 ||
          type(r.results[0]).shape != type(result).shape)
        break;
      v = r.results[0];
    }
    return {size};
  }

  Results rebuild(const Node &node) {
    OpTraits traits = op_traits(node.op);
    if (is_call(node))
      return call(node);
    for (ValueId v : node.operands)
      if (layout(v).owned())
        return node.op == "concat" ? concat_owned(node) : owned(node);
    if (!any_split(node) && !(node.op == "linear" || node.op == "matmul"))
      return replicated_copy(node);
    if (traits.has(OpTrait::elementwise))
      return elementwise(node);
    if (node.op == "linear")
      return linear(node);
    if (node.op == "matmul")
      return matmul(node);
    if (node.op == "reshape")
      return reshape(node);
    if (node.op == "transpose")
      return transpose(node);
    if (node.op == "split")
      return split(node);
    if (node.op == "slice")
      return slice(node);
    if (node.op == "concat")
      return concat(node);
    if (traits.has(OpTrait::rowwise))
      return rowwise(node);
    if (node.op == "attention")
      return attention(node);
    if (node.op == "buffer_append" || node.op == "buffer_prefix")
      return buffer(node);
    return replicated_copy(node);
  }

  Results elementwise(const Node &node) {
    ValueId result = node.results[0];
    int64_t ro = rank_of(result), t = -1;
    std::vector<int64_t> pieces;
    for (ValueId v : node.operands)
      if (layout(v).split()) {
        t = layout(v).axis + ro - rank_of(v);
        pieces = layout(v).pieces;
        break;
      }
    std::vector<ValueId> ops;
    for (ValueId v : node.operands) {
      int64_t a = t - (ro - rank_of(v));
      if (a < 0 || dim(v, a) == 1)
        ops.push_back(full(v));
      else
        ops.push_back(local(v, along(a, pieces)));
    }
    return one(to_.add_node(node.op, ops, node.attrs, node.name).at(0), along(t, pieces));
  }

  Results linear(const Node &node) {
    ValueId x = node.operands[0], w = node.operands[1];
    std::optional<ValueId> b;
    if (node.operands.size() > 2)
      b = node.operands[2];
    const Layout &lx = layout(x);
    int64_t rx = rank_of(x), out = dim(w, 0);
    if (is_free(w) && rank_of(w) == 2 && !lx.split() && out > 0 && out % world_ == 0 && !keep_whole.count(node_)) {
      column_ = true;
      Layout l = along(0, column_pieces(node.results[0], out), "column");
      std::vector<ValueId> ops = {full(x), local(w, l)};
      if (b)
        ops.push_back(local(*b, along(0, l.pieces, "column")));
      return one(add("linear", ops, node.attrs), along(rx - 1, l.pieces));
    }
    if (is_free(w) && rank_of(w) == 2 && lx.split() && lx.axis == rx - 1) {
      ValueId y = add("linear", {own(x), local(w, along(1, lx.pieces, "row"))}, node.attrs);
      y = add("all_reduce", {y}, {{"world", int64_t(world_)}});
      if (b)
        y = add("add", {y, full(*b)}, {});
      return one(y, Layout{});
    }
    if (lx.split() && lx.axis < rx - 1) { // split rows: every rank multiplies its own
      std::vector<ValueId> ops = {own(x), full(w)};
      if (b)
        ops.push_back(full(*b));
      return one(add("linear", ops, node.attrs), lx);
    }
    return replicated_copy(node);
  }

  Results matmul(const Node &node) {
    ValueId a = node.operands[0], b = node.operands[1];
    bool ta = node.attrs.get_bool("transpose_a", false), tb = node.attrs.get_bool("transpose_b", false);
    int64_t ra = rank_of(a), rb = rank_of(b), ro = rank_of(node.results[0]);
    int64_t aK = ta ? ra - 2 : ra - 1, aM = ta ? ra - 1 : ra - 2;
    int64_t bK = tb ? rb - 1 : rb - 2, bN = tb ? rb - 2 : rb - 1;
    const Layout &la = layout(a), &lb = layout(b);
    auto product = [&](ValueId x, ValueId y) { return add("matmul", {x, y}, node.attrs); };
    auto reduced = [&](ValueId y) { return one(add("all_reduce", {y}, {{"world", int64_t(world_)}}), Layout{}); };
    if (is_free(b) && rb == 2 && !lb.split()) {
      int64_t n = dim(b, bN);
      if (!la.split() && n > 0 && n % world_ == 0 && !keep_whole.count(node_)) {
        column_ = true;
        Layout l = along(bN, column_pieces(node.results[0], n), "column");
        return one(product(full(a), local(b, l)), along(ro - 1, l.pieces));
      }
      if (la.split() && la.axis == aK)
        return reduced(product(own(a), local(b, along(bK, la.pieces, "row"))));
      if (la.split() && ra >= 2)
        return one(product(own(a), full(b)), along(la.axis == aM ? ro - 2 : la.axis + ro - ra, la.pieces));
      return replicated_copy(node);
    }
    if (la.split() && lb.split() && la.axis == aK && lb.axis == bK && la.pieces == lb.pieces)
      return reduced(product(own(a), own(b)));
    // A split batch axis: the other operand split alike, or broadcast there.
    for (int side = 0; side < 2; ++side) {
      ValueId x = side == 0 ? a : b, y = side == 0 ? b : a;
      int64_t rxs = side == 0 ? ra : rb, rys = side == 0 ? rb : ra;
      const Layout &lxs = layout(x);
      if (!lxs.split() || lxs.axis >= rxs - 2)
        continue;
      int64_t t = lxs.axis + ro - rxs, yi = t - (ro - rys);
      ValueId yl = (yi < 0 || yi >= rys - 2 || dim(y, yi) == 1) ? full(y) : local(y, along(yi, lxs.pieces));
      ValueId xl = own(x);
      return one(side == 0 ? product(xl, yl) : product(yl, xl), along(t, lxs.pieces));
    }
    if (la.split() && la.axis == aM && !lb.split())
      return one(product(own(a), full(b)), along(ro - 2, la.pieces));
    if (lb.split() && lb.axis == bN && !la.split())
      return one(product(full(a), own(b)), along(ro - 1, lb.pieces));
    return replicated_copy(node);
  }

  Results reshape(const Node &node) {
    ValueId x = node.operands[0], result = node.results[0];
    const Layout &l = layout(x);
    if (l.pieces.size() != 1)
      return replicated_copy(node);
    const Shape &in = type(x).shape, &out = type(result).shape;
    int64_t a = l.axis, d_in = l.pieces[0];
    Dim pre(1), pre_out(1);
    for (int64_t i = 0; i < a; ++i)
      pre = pre * in[i];
    size_t b = 0;
    while (b < out.size() && pre_out != pre)
      pre_out = pre_out * out[b++];
    while (b < out.size() && out[b] == Dim(1) && d_in != 1)
      ++b;
    if (pre_out != pre || b >= out.size() || !out[b].is_static())
      return replicated_copy(node);
    int64_t d = out[b].value();
    auto product_reaches = [](const Shape &s, size_t from, int64_t target) {
      int64_t p = 1;
      for (size_t i = from; i < s.size() && p < target; ++i) {
        if (!s[i].is_static())
          return false;
        p *= s[i].value();
      }
      return p == target;
    };
    bool ok = d == d_in || (d_in % d == 0 && product_reaches(out, b, d_in)) ||
              (d % d_in == 0 && product_reaches(in, static_cast<size_t>(a), d));
    if (!ok || d % world_ != 0)
      return replicated_copy(node);
    Shape local_shape = out;
    local_shape[b] = Dim(d / world_);
    Attrs attrs = node.attrs;
    attrs.set("shape", local_shape);
    return one(add("reshape", {own(x)}, attrs), along(static_cast<int64_t>(b), {d}));
  }

  Results transpose(const Node &node) {
    ValueId x = node.operands[0];
    const Layout &l = layout(x);
    std::vector<int64_t> perm = node.attrs.get_ints("perm");
    int64_t r = rank_of(x);
    if (perm.empty())
      for (int64_t i = r - 1; i >= 0; --i)
        perm.push_back(i);
    for (size_t j = 0; j < perm.size(); ++j)
      if (norm_axis(perm[j], r) == l.axis)
        return one(add("transpose", {own(x)}, node.attrs), along(static_cast<int64_t>(j), l.pieces));
    return replicated_copy(node);
  }

  Results split(const Node &node) {
    ValueId x = node.operands[0];
    const Layout &l = layout(x);
    int64_t axis = norm_axis(node.attrs.get_int("axis", 0), rank_of(x));
    std::vector<int64_t> sizes = node.attrs.get_ints("sizes");
    Attrs attrs = node.attrs;
    std::vector<Layout> outs;
    if (l.axis != axis) {
      outs.assign(sizes.size(), l);
    } else if (l.pieces == sizes) {
      std::vector<int64_t> local_sizes;
      for (int64_t s : sizes) {
        local_sizes.push_back(s / world_);
        outs.push_back(along(axis, {s}));
      }
      attrs.set("sizes", local_sizes);
    } else if (l.pieces.size() == 1 && !sizes.empty() && sizes.size() % world_ == 0 &&
               std::all_of(sizes.begin(), sizes.end(), [&](int64_t s) { return s == sizes[0] && s > 0; })) {
      // Equal parts along the split axis, a whole number per rank: rank r
      // holds parts [r c, (r + 1) c) whole (Layout::owner).
      int64_t c = static_cast<int64_t>(sizes.size()) / world_;
      attrs.set("sizes", std::vector<int64_t>(static_cast<size_t>(c), sizes[0]));
      std::vector<ValueId> ids = to_.add_node("split", {own(x)}, attrs, node.name);
      Results out;
      for (size_t i = 0; i < sizes.size(); ++i) {
        Layout held;
        held.owner = static_cast<int64_t>(i) / c;
        out.push_back({held.owner == rank_ ? ids[i - static_cast<size_t>(rank_ * c)] : kNone, held});
      }
      return out;
    } else {
      return replicated_copy(node);
    }
    std::vector<ValueId> ids = to_.add_node("split", {own(x)}, attrs, node.name);
    Results out;
    for (size_t i = 0; i < ids.size(); ++i)
      out.push_back({ids[i], outs[i]});
    return out;
  }

  /// An op on a part one rank holds (the other operands whole): that rank
  /// computes it, the others skip it.
  Results owned(const Node &node) {
    int64_t owner = -1;
    for (ValueId v : node.operands) {
      const Layout &l = layout(v);
      if (l.split() || (l.owned() && owner >= 0 && l.owner != owner))
        return replicated_copy(node); // full() undoes the parts' split (a retry)
      if (l.owned())
        owner = l.owner;
    }
    Layout held;
    held.owner = owner;
    Results out;
    if (owner != rank_) {
      for (size_t r = 0; r < node.results.size(); ++r)
        out.push_back({kNone, held});
      return out;
    }
    std::vector<ValueId> ops;
    for (ValueId v : node.operands)
      ops.push_back(layout(v).owned() ? vals_[v].id : full(v));
    for (ValueId r : to_.add_node(node.op, ops, node.attrs, node.name))
      out.push_back({r, held});
    return out;
  }

  /// A concat of parts held by one rank each, in rank order and an equal
  /// share per rank, along `axis`: split along it again (each rank
  /// concatenates its own parts).
  Results concat_owned(const Node &node) {
    int64_t r = rank_of(node.results[0]), axis = norm_axis(node.attrs.get_int("axis", 0), r), total = dim(node.results[0], axis);
    std::vector<int64_t> share(static_cast<size_t>(world_), 0);
    int64_t last = 0;
    bool ok = total > 0 && total % world_ == 0;
    for (ValueId v : node.operands) {
      const Layout &l = layout(v);
      ok = ok && l.owned() && l.owner >= last && dim(v, axis) > 0;
      if (!ok)
        break;
      last = l.owner;
      share[static_cast<size_t>(l.owner)] += dim(v, axis);
    }
    for (int64_t s : share)
      ok = ok && s == total / world_;
    if (!ok)
      return replicated_copy(node);
    std::vector<ValueId> mine;
    for (ValueId v : node.operands)
      if (layout(v).owner == rank_)
        mine.push_back(vals_[v].id);
    ValueId id = mine.size() == 1 ? mine[0] : add("concat", mine, node.attrs);
    return one(id, along(axis, {total}));
  }

  Results slice(const Node &node) {
    ValueId x = node.operands[0];
    const Layout &l = layout(x);
    std::vector<int64_t> axes = node.attrs.get_ints("axes");
    if (axes.empty())
      for (size_t i = 0; i < node.attrs.get_ints("starts").size(); ++i)
        axes.push_back(static_cast<int64_t>(i));
    for (int64_t a : axes)
      if (norm_axis(a, rank_of(x)) == l.axis)
        return replicated_copy(node);
    return one(add("slice", {own(x)}, node.attrs), l);
  }

  Results concat(const Node &node) {
    int64_t r = rank_of(node.results[0]), axis = norm_axis(node.attrs.get_int("axis", 0), r);
    Layout l;
    for (ValueId v : node.operands)
      if (layout(v).split()) {
        l = layout(v);
        break;
      }
    if (l.axis == axis)
      return replicated_copy(node);
    std::vector<ValueId> ops;
    for (ValueId v : node.operands)
      ops.push_back(local(v, along(l.axis, l.pieces)));
    return one(add("concat", ops, node.attrs), along(l.axis, l.pieces));
  }

  Results rowwise(const Node &node) {
    ValueId x = node.operands[0];
    const Layout &l = layout(x);
    int64_t r = rank_of(x);
    bool reduced;
    if (node.attrs.has("axis"))
      reduced = norm_axis(node.attrs.get_int("axis"), r) == l.axis;
    else // the norms: over the weight's trailing dims
      reduced = node.operands.size() < 2 || l.axis >= r - rank_of(node.operands[1]);
    if (!l.split() || reduced)
      return replicated_copy(node);
    std::vector<ValueId> ops = {own(x)};
    for (size_t i = 1; i < node.operands.size(); ++i)
      ops.push_back(full(node.operands[i]));
    return one(add(node.op, ops, node.attrs), l);
  }

  Results attention(const Node &node) {
    ValueId q = node.operands[0], k = node.operands[1], v = node.operands[2];
    const Layout &lq = layout(q);
    int64_t r = rank_of(q), a = lq.axis;
    int64_t groups = node.attrs.get_int("kv_groups", 1);
    if (!lq.split() || a >= r - 2 || lq.pieces.size() != 1 || (groups > 1 && a != r - 3))
      return replicated_copy(node);
    int64_t heads = lq.pieces[0], local_heads = heads / world_, kv_heads = heads / groups;
    ValueId kl, vl;
    Attrs attrs = node.attrs;
    Layout lkv = along(a, {kv_heads});
    if (layout(k).same(lkv) && layout(v).same(lkv)) {
      kl = own(k);
      vl = own(v);
    } else if (kv_heads % world_ == 0) {
      kl = local(k, lkv);
      vl = local(v, lkv);
    } else if (groups > 1 && groups % local_heads == 0) {
      // Fewer k/v heads than ranks: this rank's query heads share one.
      int64_t head = rank_ * local_heads / groups;
      auto one_head = [&](ValueId x) {
        return add("slice", {full(x)},
                   {{"starts", std::vector<int64_t>{head}}, {"ends", std::vector<int64_t>{head + 1}},
                    {"axes", std::vector<int64_t>{a}}});
      };
      kl = one_head(k);
      vl = one_head(v);
      attrs.set("kv_groups", local_heads);
    } else {
      return replicated_copy(node);
    }
    std::vector<ValueId> ops = {own(q), kl, vl};
    if (node.operands.size() > 3) {
      ValueId m = node.operands[3];
      int64_t am = a - (r - rank_of(m));
      ops.push_back(am < 0 || dim(m, am) == 1 ? full(m) : local(m, along(am, {heads})));
    }
    return one(add("attention", ops, attrs), lq);
  }

  Results buffer(const Node &node) {
    ValueId buf = node.operands[0];
    Layout want = node.operands.size() > 1 ? layout(node.operands[1]) : layout(buf);
    if (!want.split() || want.axis < 1)
      return replicated_copy(node);
    Val &vb = vals_[buf];
    if (!vb.layout.same(want)) {
      // A state buffer is the caller's storage: it is split only where the
      // graph input is (the next build declares it so), never sliced here.
      if (vb.free_input >= 0 && !vb.layout.split() && !demands.count(static_cast<size_t>(vb.free_input))) {
        demands[static_cast<size_t>(vb.free_input)] = want;
        asking_ = true; // this build is a draft: its gather here says nothing about the product
        Results out = replicated_copy(node);
        asking_ = false;
        return out;
      }
      return replicated_copy(node);
    }
    std::vector<ValueId> ops = {vb.id};
    for (size_t i = 1; i < node.operands.size(); ++i)
      ops.push_back(local(node.operands[i], want));
    return one(add(node.op, ops, node.attrs), want);
  }

  Results call(const Node &node) {
    const std::string *callee = call_body_name(node);
    auto it = callee ? s_.bodies.find(*callee) : s_.bodies.end();
    if (it == s_.bodies.end())
      return replicated_copy(node);
    const BodyPlan &plan = it->second;
    std::vector<ValueId> ops;
    for (size_t i = 0; i < node.operands.size(); ++i)
      ops.push_back(plan.inputs[i].split() ? local(node.operands[i], plan.inputs[i]) : full(node.operands[i]));
    std::vector<ValueId> ids = to_.add_node(node.op, ops, node.attrs, node.name);
    Results out;
    for (size_t i = 0; i < ids.size(); ++i)
      out.push_back({ids[i], Layout{}});
    return out;
  }

  Shared &s_;
  const Graph &from_;
  Graph &to_;
  Readers readers_;
  std::vector<bool> free_inputs_;
  std::vector<Layout> input_layouts_;
  bool is_root_;
  int world_, rank_;
  std::vector<Val> vals_;
  std::string name_;
  int64_t node_ = -1;   // the node being rebuilt
  bool column_ = false; // it became a column-parallel product
  bool outputs_ = false; // gathering the graph's outputs (a vocabulary-parallel head)
  bool asking_ = false;  // replicated while a free input is asked for split
};

/// Builds `from` into a fresh graph (`prepare` gives it its bodies) until
/// no reader asks for a free input split that the build declared whole and
/// no column-parallel product is gathered before an op (at most 8 builds).
std::unique_ptr<Graph> build(Shared &s, const Graph &from, const std::function<void(Graph &)> &prepare,
                             const std::vector<bool> &free_inputs, bool is_root, bool report,
                             std::vector<Layout> &input_layouts) {
  input_layouts.assign(from.input_ids().size(), Layout{});
  std::set<int64_t> keep_whole;
  for (int attempt = 0;; ++attempt) {
    auto to = std::make_unique<Graph>(from.name());
    prepare(*to);
    Sharder sharder(s, from, *to, free_inputs, input_layouts, is_root);
    sharder.report = report;
    sharder.keep_whole = keep_whole;
    size_t weights_before = s.report ? s.report->weights.size() : 0;
    size_t gathers_before = s.report ? s.report->gathers.size() : 0;
    sharder.run();
    size_t whole_before = keep_whole.size();
    keep_whole.insert(sharder.retry_whole.begin(), sharder.retry_whole.end());
    bool done = (sharder.demands.empty() && keep_whole.size() == whole_before) || attempt == 7;
    if (done) {
      return to;
    }
    if (s.report) { // this build is discarded: so is what it reported
      s.report->weights.resize(weights_before);
      s.report->gathers.resize(gathers_before);
    }
    if (keep_whole.size() != whole_before) { // the inputs' splits are asked for again
      input_layouts.assign(from.input_ids().size(), Layout{});
      continue;
    }
    for (const auto &[i, l] : sharder.demands)
      input_layouts[i] = l;
  }
}

size_t count_op(const Graph &g, const char *op) {
  return static_cast<size_t>(std::count_if(g.nodes().begin(), g.nodes().end(), [&](const Node &n) { return n.op == op; }));
}

} // namespace

uint64_t ShardReport::local_weight_bytes() const {
  uint64_t n = 0;
  for (const Weight &w : weights)
    n += w.local_bytes;
  return n;
}

uint64_t ShardReport::full_weight_bytes() const {
  uint64_t n = 0;
  for (const Weight &w : weights)
    n += w.full_bytes;
  return n;
}

std::string ShardReport::text() const {
  auto shape = [](const std::vector<int64_t> &s) {
    std::string t = "[";
    for (size_t i = 0; i < s.size(); ++i)
      t += (i ? "," : "") + std::to_string(s[i]);
    return t + "]";
  };
  std::ostringstream os;
  os << "tensor-parallel: " << world << " ranks\n";
  for (const Weight &w : weights) {
    os << "  " << w.name << " " << shape(w.full) << ": " << w.split;
    if (w.split.rfind("replicated", 0) != 0)
      os << " -> " << shape(w.local) << " per rank" << (w.pieces > 1 ? " (" + std::to_string(w.pieces) + " pieces)" : "");
    os << "\n";
  }
  for (const Input &in : inputs)
    os << "  input " << in.name << " " << shape(in.full) << ": axis " << in.axis << " -> " << shape(in.local)
       << " per rank (each rank passes its own)\n";
  os << "weights per rank: " << local_weight_bytes() << " of " << full_weight_bytes() << " bytes\n";
  os << "collectives per run: " << all_reduce_runs << " all_reduce, " << all_gather_runs << " all_gather ("
     << all_reduce_nodes << " and " << all_gather_nodes << " nodes)\n";
  for (const std::string &g : gathers)
    os << "  gathered before " << g << "\n";
  return os.str();
}

std::unique_ptr<Graph> shard_graph(const Graph &original, const ShardOptions &options, ShardReport *report) {
  if (options.world < 1 || options.world > 4096)
    throw Error(ErrorCode::InvalidArgument,
                "--tensor-parallel " + std::to_string(options.world) + ": the number of ranks must be in [1, 4096]");
  if (options.rank < 0 || options.rank >= options.world)
    throw Error(ErrorCode::InvalidArgument, "rank " + std::to_string(options.rank) + " is outside [0, " +
                                                std::to_string(options.world) + ")");
  if (report) {
    *report = ShardReport{};
    report->world = options.world;
  }
  // The canonical forms first (Canonicalize.h): a spelled-out norm, GELU or
  // attention (grouped k/v heads repeated by Expand/Reshape or Tile) is one
  // op then, whose split the rules know.
  std::unique_ptr<Graph> canonical = canonicalize(original);
  const Graph &graph = canonical ? *canonical : original;
  Shared s{graph, options, report, {}};

  // Which body inputs every root call binds to a constant or a graph input
  // (a weight, a state buffer): those may be split per call site. A body
  // run by anything but root calls (a branch, a loop, a nested call) gets
  // whole inputs and gives whole outputs.
  std::map<std::string, std::vector<bool>> free_body_inputs;
  std::set<std::string> whole_bodies;
  std::map<std::string, size_t> root_calls;
  auto note_bodies = [&](const Graph &g, bool is_root) {
    for (const Node &n : g.nodes()) {
      if (!has_bodies(n.op))
        continue;
      const std::string *callee = call_body_name(n);
      if (!is_root || !callee) {
        for (const std::string &b : body_names(n))
          whole_bodies.insert(b);
        continue;
      }
      ++root_calls[*callee];
      std::vector<bool> free(n.operands.size());
      for (size_t i = 0; i < n.operands.size(); ++i) {
        const ValueInfo &info = g.value_info(n.operands[i]);
        free[i] = info.producer < 0 || g.nodes()[info.producer].op == "constant";
      }
      auto [it, fresh] = free_body_inputs.emplace(*callee, free);
      if (!fresh)
        for (size_t i = 0; i < free.size(); ++i)
          it->second[i] = it->second[i] && free[i];
    }
  };
  note_bodies(graph, true);
  for (const auto &[name, sub] : graph.subgraphs())
    note_bodies(*sub, false);

  // The bodies, built first (a call's inference looks its callee up): each
  // sees those built before it through `holder`.
  Graph holder(graph.name());
  std::vector<std::shared_ptr<Graph>> bodies;
  for (const Graph *sub : subgraphs_bodies_first(graph)) {
    bool whole = whole_bodies.count(sub->name()) || !free_body_inputs.count(sub->name());
    std::vector<bool> free(sub->input_ids().size(), false);
    if (!whole)
      free = free_body_inputs.at(sub->name());
    BodyPlan plan;
    std::shared_ptr<Graph> body = build(
        s, *sub, [&](Graph &g) { g.attach_root(holder); }, free, false, false, plan.inputs);
    if (whole)
      plan.inputs.assign(sub->input_ids().size(), Layout{});
    s.bodies[sub->name()] = plan;
    holder.add_subgraph(body);
    bodies.push_back(body);
  }

  // A root input is split only for readers that keep their own storage of
  // it: body inputs that are free, state buffers.
  std::vector<bool> free_root(graph.input_ids().size(), false);
  Readers readers(graph);
  for (size_t i = 0; i < graph.input_ids().size(); ++i) {
    ValueId in = graph.input_ids()[i];
    bool ok = !readers.of(in).empty();
    for (int64_t r : readers.of(in)) {
      if (r < 0) {
        ok = false;
        break;
      }
      const Node &n = graph.nodes()[r];
      const std::string *callee = call_body_name(n);
      bool reads_as_buffer = op_traits(n.op).has(OpTrait::aliases_operand) && n.operands[0] == in &&
                             std::count(n.operands.begin(), n.operands.end(), in) == 1;
      bool free_slot = false;
      if (callee && free_body_inputs.count(*callee) && !whole_bodies.count(*callee))
        for (size_t k = 0; k < n.operands.size(); ++k)
          if (n.operands[k] == in)
            free_slot = free_body_inputs.at(*callee)[k];
      ok = ok && (reads_as_buffer || free_slot);
    }
    free_root[i] = ok;
  }
  std::vector<Layout> root_inputs;
  std::unique_ptr<Graph> root = build(
      s, graph,
      [&](Graph &g) {
        for (const auto &body : bodies)
          g.add_subgraph(body);
      },
      free_root, true, true, root_inputs);

  if (report) {
    for (size_t i = 0; i < root_inputs.size(); ++i)
      if (root_inputs[i].split()) {
        ShardReport::Input in;
        in.name = graph.value_info(graph.input_ids()[i]).name;
        in.axis = root_inputs[i].axis;
        in.full = static_shape(graph.type_of(graph.input_ids()[i]));
        in.local = static_shape(root->type_of(root->input_ids()[i]));
        report->inputs.push_back(in);
      }
    report->all_reduce_nodes = count_op(*root, "all_reduce");
    report->all_gather_nodes = count_op(*root, "all_gather");
    report->all_reduce_runs = report->all_reduce_nodes;
    report->all_gather_runs = report->all_gather_nodes;
    for (const auto &[name, sub] : root->subgraphs()) {
      size_t calls = root_calls.count(name) ? root_calls.at(name) : 0;
      report->all_reduce_nodes += count_op(*sub, "all_reduce");
      report->all_gather_nodes += count_op(*sub, "all_gather");
      report->all_reduce_runs += calls * count_op(*sub, "all_reduce");
      report->all_gather_runs += calls * count_op(*sub, "all_gather");
    }
  }
  root->verify();
  return root;
}

std::vector<std::unique_ptr<Graph>> shard_graph_ranks(const Graph &graph, int world, ShardReport *report,
                                                      const std::vector<std::string> &replicated) {
  std::vector<std::unique_ptr<Graph>> out;
  for (int r = 0; r < world; ++r)
    out.push_back(shard_graph(graph, ShardOptions{world, r, replicated}, r == 0 ? report : nullptr));
  return out;
}

HostTensor rank_slice(const HostTensor &whole, int64_t axis, int rank, int world) {
  if (axis < 0 || axis >= whole.rank() || whole.shape()[axis] % world != 0)
    throw Error(ErrorCode::InputMismatch, "cannot split axis " + std::to_string(axis) + " of a tensor of shape rank " +
                                              std::to_string(whole.rank()) + " among " + std::to_string(world) + " ranks");
  return slice_pieces(whole, along(axis, {whole.shape()[axis]}), rank, world);
}

std::vector<std::vector<HostTensor>> rank_inputs(const Graph &whole, const std::vector<std::unique_ptr<Graph>> &ranks,
                                                 const std::vector<HostTensor> &inputs) {
  std::vector<std::vector<HostTensor>> out(ranks.size());
  int world = static_cast<int>(ranks.size());
  for (size_t i = 0; i < inputs.size() && i < whole.input_ids().size(); ++i) {
    const Shape &full = whole.type_of(whole.input_ids()[i]).shape;
    int64_t axis = -1;
    for (size_t a = 0; a < full.size(); ++a)
      if (ranks[0]->type_of(ranks[0]->input_ids()[i]).shape[a] != full[a])
        axis = static_cast<int64_t>(a);
    for (int r = 0; r < world; ++r) {
      if (axis < 0) {
        out[r].push_back(inputs[i]);
        continue;
      }
      try {
        out[r].push_back(rank_slice(inputs[i], axis, r, world));
      } catch (const Error &) {
        throw Error(ErrorCode::InputMismatch, "input '" + whole.value_info(whole.input_ids()[i]).name +
                                                  "': its axis " + std::to_string(axis) +
                                                  " is split among the ranks, and " + std::to_string(world) +
                                                  " does not divide its size");
      }
    }
  }
  return out;
}

} // namespace maxc

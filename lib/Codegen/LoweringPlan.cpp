#include "maxc/Codegen/LoweringPlan.h"

#include "maxc/Ops/CallBinding.h"
#include "maxc/Ops/OpRegistry.h"
#include "maxc/Ops/Ops.h"
#include "maxc/Support/Error.h"
#include "maxc/Transforms/FuseAttention.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace maxc {

bool is_elemental_op(const std::string &op) { return op_traits(op).any(kElementalTraits); }

bool is_reduction_op(const std::string &op) { return op_traits(op).has(OpTrait::reduction); }

namespace {

bool is_view_op(const std::string &op) { return op_traits(op).has(OpTrait::strided); }

bool pad_only_grows(const Graph &g, const Node &node) {
  if (node.op != "pad")
    return false;
  std::vector<int64_t> pads = node.attrs.get_ints("pads");
  const Dim in = shape_numel(g.type_of(node.operands[0]).shape), out = shape_numel(g.type_of(node.results[0]).shape);
  return std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p >= 0; }) && in.is_static() &&
         out.is_static() && out.value() <= 2 * in.value();
}

/// Row-major strides of `s` (in elements) when its dims past the first are
/// static.
std::optional<std::vector<int64_t>> row_major_strides(const Shape &s) {
  std::vector<int64_t> strides(s.size());
  int64_t n = 1;
  for (size_t d = s.size(); d-- > 0;) {
    strides[d] = n;
    if (d > 0) {
      if (!s[d].is_static())
        return std::nullopt;
      n *= s[d].value();
    }
  }
  return strides;
}

/// The strides of a reshape of x (shape xs, strides xst) to `os` without a
/// copy, as numpy's: the dims split into groups of equal element counts;
/// a group of x's dims must be one run of memory (each dim's stride its
/// successor's times that one's extent), and its output dims take strides
/// from the group's innermost one. The leading dim may be symbolic when
/// both shapes share it; every other dim is static.
std::optional<std::vector<int64_t>> reshaped_strides(const Shape &xs, const std::vector<int64_t> &xst, const Shape &os) {
  std::vector<int64_t> out(os.size(), 1);
  size_t i = 0, k = 0;
  if (!xs.empty() && !os.empty() && !xs[0].is_static()) {
    if (!(xs[0] == os[0]))
      return std::nullopt;
    out[0] = xst[0];
    i = k = 1;
  }
  auto extent = [](const Shape &s, size_t d) { return s[d].is_static() ? s[d].value() : int64_t(-1); };
  for (size_t d = i; d < xs.size(); ++d)
    if (extent(xs, d) <= 0)
      return std::nullopt;
  for (size_t d = k; d < os.size(); ++d)
    if (extent(os, d) <= 0)
      return std::nullopt;
  while (i < xs.size() && k < os.size()) {
    size_t ni = i + 1, nk = k + 1;
    int64_t pi = extent(xs, i), pk = extent(os, k);
    while (pi != pk) {
      if (pi < pk) {
        if (ni == xs.size())
          return std::nullopt;
        pi *= extent(xs, ni++);
      } else {
        if (nk == os.size())
          return std::nullopt;
        pk *= extent(os, nk++);
      }
    }
    // x's dims [i, ni) must be one run: skip extent-1 dims (any stride).
    int64_t inner = -1; // the stride the next outer dim must have
    for (size_t d = ni; d-- > i;) {
      if (extent(xs, d) == 1)
        continue;
      if (inner >= 0 && xst[d] != inner)
        return std::nullopt;
      inner = xst[d] * extent(xs, d);
    }
    int64_t stride = 1;
    for (size_t d = ni; d-- > i;)
      if (extent(xs, d) != 1) {
        stride = xst[d];
        break;
      }
    for (size_t d = nk; d-- > k;) {
      out[d] = stride;
      stride *= extent(os, d);
    }
    i = ni;
    k = nk;
  }
  // Whatever is left on either side is extent-1 dims.
  for (; i < xs.size(); ++i)
    if (extent(xs, i) != 1)
      return std::nullopt;
  for (; k < os.size(); ++k)
    if (extent(os, k) != 1)
      return std::nullopt;
  return out;
}


/// Byte extents of a contiguous slice along `axis` of a value of shape `s`:
/// the bytes of one index along the axis, when s is static and every dim
/// before the axis is 1 (so each slice along the axis is one run of memory).
std::optional<int64_t> slice_unit_bytes(const Shape &s, int64_t axis, DType dtype) {
  if (axis < 0)
    axis += static_cast<int64_t>(s.size());
  if (axis < 0 || axis >= static_cast<int64_t>(s.size()))
    return std::nullopt;
  int64_t unit = static_cast<int64_t>(dtype_size(dtype));
  for (size_t d = 0; d < s.size(); ++d) {
    if (!s[d].is_static())
      return std::nullopt;
    if (static_cast<int64_t>(d) < axis && s[d].value() != 1)
      return std::nullopt;
    if (static_cast<int64_t>(d) > axis)
      unit *= s[d].value();
  }
  return unit;
}

/// The byte offset in its operand of each result of a split or slice whose
/// results are contiguous runs of it (static shapes; one axis cut, with
/// step 1, every dim before it 1); empty otherwise.
std::vector<int64_t> slice_offsets(const Graph &g, const Node &node) {
  const TensorType &xt = g.type_of(node.operands[0]);
  const Shape &xs = xt.shape;
  if (node.op == "split") {
    std::optional<int64_t> unit = slice_unit_bytes(xs, node.attrs.get_int("axis"), xt.dtype);
    if (!unit)
      return {};
    std::vector<int64_t> sizes = node.attrs.get_ints("sizes"), offsets;
    int64_t start = 0;
    for (size_t i = 0; i < node.results.size(); ++i) {
      offsets.push_back(start * *unit);
      start += sizes[i];
    }
    return offsets;
  }
  // slice: the first axis whose extent changes is the cut; every listed
  // axis steps by 1 (a full axis stepped by -1 is reversed).
  const Shape &rs = g.type_of(node.results[0]).shape;
  std::vector<int64_t> starts = node.attrs.get_ints("starts"), axes = node.attrs.get_ints("axes"),
                       steps = node.attrs.get_ints("steps");
  if (rs.size() != xs.size())
    return {};
  for (size_t d = 0; d < xs.size(); ++d)
    if (!xs[d].is_static() || !rs[d].is_static())
      return {};
  for (int64_t step : steps)
    if (step != 1)
      return {};
  int64_t cut = -1;
  for (size_t d = 0; d < xs.size(); ++d)
    if (rs[d].value() != xs[d].value()) {
      if (cut >= 0)
        return {};
      cut = static_cast<int64_t>(d);
    }
  if (cut < 0)
    return {0};
  std::optional<int64_t> unit = slice_unit_bytes(xs, cut, xt.dtype);
  if (!unit)
    return {};
  for (size_t k = 0; k < starts.size(); ++k) {
    int64_t axis = axes.empty() ? static_cast<int64_t>(k) : axes[k];
    if (axis < 0)
      axis += static_cast<int64_t>(xs.size());
    if (axis != cut)
      continue;
    int64_t extent = xs[static_cast<size_t>(axis)].value(), st = starts[k];
    if (st < 0)
      st += extent;
    return {std::clamp<int64_t>(st, 0, extent) * *unit};
  }
  return {};
}

/// In-place concat and split (PlanOptions::in_place_concat). `parent[v]`
/// and `at[v]`: temporary v lives at byte `at[v]` of parent[v]'s storage
/// (kNoParent: its own). A split's (or a contiguous slice's) stored results
/// are placed in its stored operand; then a concat's stored operands in its stored result, each at
/// its slice — an operand that is already a split's slice moves its whole
/// split operand there, when every concat operand over that range is the
/// matching slice of it (C2f: x = conv(...); a, b = split(x); concat(a, b,
/// m(b), ...) puts x at the concat's start). All or nothing per node: a
/// node that is placed has no kernel (plan.in_place).
constexpr ValueId kNoParent = ~ValueId(0);
/// The value v lives in (following parent links) and v's byte offset there.
std::pair<ValueId, int64_t> placement_root(const std::vector<ValueId> &parent, const std::vector<int64_t> &at,
                                           ValueId v) {
  int64_t off = 0;
  for (; parent[v] != kNoParent; v = parent[v])
    off += at[v];
  return {v, off};
}

void plan_in_place(const Graph &g, LoweringPlan &plan, std::vector<ValueId> &parent, std::vector<int64_t> &at) {
  const auto &nodes = g.nodes();
  auto bytes_of = [&](ValueId v) {
    const TensorType &t = g.type_of(v);
    return shape_numel(t.shape).value() * static_cast<int64_t>(dtype_size(t.dtype));
  };
  auto root_of = [&](ValueId v) { return placement_root(parent, at, v); };
  auto temp = [&](ValueId v) { return plan.values[v].storage == Storage::temp; };
  for (size_t n = 0; n < nodes.size(); ++n) {
    const Node &node = nodes[n];
    if ((node.op != "split" && node.op != "slice") || node.operands.empty() || !temp(node.operands[0]))
      continue;
    ValueId x = node.operands[0];
    bool ok = true, any = false;
    for (ValueId r : node.results) {
      ok = ok && (temp(r) || plan.values[r].storage == Storage::fused);
      any = any || temp(r);
    }
    std::vector<int64_t> offsets = ok && any ? slice_offsets(g, node) : std::vector<int64_t>{};
    if (offsets.empty())
      continue;
    for (size_t i = 0; i < node.results.size(); ++i)
      if (temp(node.results[i])) {
        parent[node.results[i]] = x;
        at[node.results[i]] = offsets[i];
      }
    plan.in_place.insert(n);
  }
  for (size_t n = 0; n < nodes.size(); ++n) {
    const Node &node = nodes[n];
    if (node.op != "concat" || node.results.size() != 1 || !temp(node.results[0]))
      continue;
    ValueId r = node.results[0];
    const TensorType &rt = g.type_of(r);
    std::optional<int64_t> unit = slice_unit_bytes(rt.shape, node.attrs.get_int("axis"), rt.dtype);
    std::set<ValueId> distinct(node.operands.begin(), node.operands.end());
    if (!unit || distinct.size() != node.operands.size())
      continue;
    int64_t axis = node.attrs.get_int("axis");
    if (axis < 0)
      axis += static_cast<int64_t>(rt.shape.size());
    // Each operand's byte range in r.
    std::vector<int64_t> begin;
    int64_t offset = 0;
    bool ok = true;
    for (ValueId x : node.operands) {
      ok = ok && temp(x) && g.type_of(x).dtype == rt.dtype;
      begin.push_back(offset);
      offset += g.type_of(x).shape[static_cast<size_t>(axis)].value() * *unit;
    }
    std::map<ValueId, int64_t> moves; // a root to place in r -> its offset
    for (size_t i = 0; ok && i < node.operands.size(); ++i) {
      auto [root, off] = root_of(node.operands[i]);
      int64_t base = begin[i] - off;
      if (root == r || base < 0 || base + bytes_of(root) > offset) {
        ok = false;
        break;
      }
      if (auto it = moves.find(root); it != moves.end()) {
        ok = it->second == base;
        continue;
      }
      // Every operand over the root's range must be its slice there.
      for (size_t j = 0; ok && j < node.operands.size(); ++j) {
        int64_t end_j = begin[j] + bytes_of(node.operands[j]);
        if (end_j <= base || begin[j] >= base + bytes_of(root))
          continue;
        auto [rj, oj] = root_of(node.operands[j]);
        ok = rj == root && oj == begin[j] - base;
      }
      moves[root] = base;
    }
    if (!ok)
      continue;
    for (auto [v, base] : moves) {
      parent[v] = r;
      at[v] = base;
    }
    plan.in_place.insert(n);
  }
}
} // namespace

std::optional<StridedView> strided_view(const Graph &g, const LoweringPlan &plan, ValueId v) {
  const Shape &os = g.type_of(v).shape;
  if (plan.values[v].storage != Storage::fused) {
    std::optional<std::vector<int64_t>> strides = row_major_strides(os);
    if (!strides)
      return std::nullopt;
    return StridedView{v, 0, *strides};
  }
  const ValueInfo &info = g.value_info(v);
  if (info.producer < 0)
    return std::nullopt;
  const Node &node = g.nodes()[static_cast<size_t>(info.producer)];
  if (!is_view_op(node.op) || node.operands.empty())
    return std::nullopt;
  ValueId x = node.operands[0];
  // Recursion through fused values only: a fused chain is at most
  // kMaxFusedChain (plan_lowering) long, so the depth is bounded.
  std::optional<StridedView> in = strided_view(g, plan, x);
  if (!in)
    return std::nullopt;
  const Shape &xs = g.type_of(x).shape;
  if (node.op == "reshape" || node.op == "squeeze" || node.op == "unsqueeze") {
    std::optional<std::vector<int64_t>> strides = reshaped_strides(xs, in->strides, os);
    if (!strides)
      return std::nullopt;
    in->strides = *strides;
    return in;
  }
  if (node.op == "transpose") {
    std::vector<int64_t> perm = node.attrs.get_ints("perm");
    size_t rank = os.size();
    if (perm.empty())
      for (size_t d = 0; d < rank; ++d)
        perm.push_back(static_cast<int64_t>(rank - 1 - d));
    std::vector<int64_t> strides(rank);
    for (size_t d = 0; d < rank; ++d)
      strides[d] = in->strides[static_cast<size_t>(perm[d] < 0 ? perm[d] + static_cast<int64_t>(rank) : perm[d])];
    in->strides = strides;
    return in;
  }
  if (node.op == "split") {
    int64_t axis = node.attrs.get_int("axis");
    if (axis < 0)
      axis += static_cast<int64_t>(os.size());
    std::vector<int64_t> sizes = node.attrs.get_ints("sizes");
    size_t result = static_cast<size_t>(std::find(node.results.begin(), node.results.end(), v) - node.results.begin());
    for (size_t r = 0; r < result; ++r)
      in->offset += sizes[r] * in->strides[static_cast<size_t>(axis)];
    return in;
  }
  if (node.op != "slice")
    return std::nullopt; // a strided op this function has no formula for: copied
  // slice: as ElementalEmitter::slice_element.
  std::vector<int64_t> starts = node.attrs.get_ints("starts"), axes = node.attrs.get_ints("axes"),
                       steps = node.attrs.get_ints("steps");
  for (size_t k = 0; k < starts.size(); ++k) {
    int64_t axis = axes.empty() ? static_cast<int64_t>(k) : axes[k];
    if (axis < 0)
      axis += static_cast<int64_t>(xs.size());
    int64_t step = steps.empty() ? 1 : steps[k];
    if (!xs[static_cast<size_t>(axis)].is_static())
      continue; // only the full range is allowed on symbolic dims
    int64_t n = xs[static_cast<size_t>(axis)].value(), st = starts[k];
    if (st < 0)
      st += n;
    st = step > 0 ? std::clamp<int64_t>(st, 0, n) : std::clamp<int64_t>(st, -1, n - 1);
    int64_t &stride = in->strides[static_cast<size_t>(axis)];
    in->offset += st * stride;
    stride *= step;
  }
  return in;
}

std::optional<size_t> transpose_tile_axis(const Graph &g, const Node &node) {
  if (node.op != "transpose" || node.results.size() != 1)
    return std::nullopt;
  const TensorType &t = g.type_of(node.results[0]);
  if (t.dtype == DType::f16 || t.dtype == DType::bf16 || t.dtype == DType::boolean)
    return std::nullopt;
  const size_t rank = t.shape.size();
  if (rank < 2)
    return std::nullopt;
  std::vector<int64_t> perm = ops::normalize_perm(node.attrs.get_ints("perm"), static_cast<int64_t>(rank));
  const size_t last = rank - 1;
  if (perm[last] == static_cast<int64_t>(last))
    return std::nullopt;
  const size_t a = static_cast<size_t>(std::find(perm.begin(), perm.end(), static_cast<int64_t>(last)) - perm.begin());
  for (size_t d : {a, last})
    if (t.shape[d].is_static() && t.shape[d].value() < kTransposeTile)
      return std::nullopt;
  return a;
}

// The common plan of one graph (options.refine is the callers').
static LoweringPlan plan_graph(const Graph &g, const PlanOptions &options) {
  LoweringPlan plan;
  const auto &nodes = g.nodes();
  plan.values.resize(g.num_values());
  std::vector<std::vector<size_t>> consumers(g.num_values());
  for (size_t n = 0; n < nodes.size(); ++n)
    for (ValueId v : nodes[n].operands)
      consumers[v].push_back(n);

  for (size_t i = 0; i < g.input_ids().size(); ++i)
    plan.values[g.input_ids()[i]] = {Storage::input, i};
  std::vector<bool> is_output(g.num_values(), false);
  for (size_t o = 0; o < g.output_ids().size(); ++o) {
    ValueId v = g.output_ids()[o];
    const ValueInfo &info = g.value_info(v);
    // A view of a state buffer (aliases_operand) is copied out of it.
    bool elsewhere = info.producer < 0 || nodes[info.producer].op == "constant" || is_output[v] ||
                     op_traits(nodes[info.producer].op).has(OpTrait::aliases_operand);
    if (elsewhere)
      plan.output_copies.emplace_back(o, v);
    else
      plan.values[v] = {Storage::output, o};
    is_output[v] = true;
  }

  // Fusion decisions, node by node. `chain[v]` counts the fused non-
  // elementwise values (views: reshape, transpose, slice, ...) an element of v
  // is computed through; past kMaxFusedChain v is stored, so the emitters'
  // per-element recursion stays bounded however long a model's chain of views
  // is (a stored value every 256 views costs nothing measurable).
  constexpr int kMaxFusedChain = 256;
  std::vector<int> chain(plan.values.size(), 0);
  // A fused value that only moves stored elements: a view of stored
  // values or of such views (PlanOptions::fuse_broadcast_views).
  std::vector<bool> moves_only(plan.values.size(), false);
  for (size_t n = 0; n < nodes.size(); ++n) {
    const Node &node = nodes[n];
    for (ValueId v : node.results) {
      ValuePlan &p = plan.values[v];
      if (p.storage == Storage::output)
        continue;
      if (node.op == "constant") {
        p = {Storage::constant, 0};
        continue;
      }
      OpTraits traits = op_traits(node.op);
      if (traits.has(OpTrait::aliases_operand)) {
        // A view of a state buffer's rows: the buffer's own storage.
        const ValuePlan &buffer = plan.values[node.operands[0]];
        if (buffer.storage != Storage::input)
          throw Error(ErrorCode::InvalidGraph, node.op + ": operand 0 (value %" + std::to_string(node.operands[0]) +
                                                   ") must be a state buffer (an input of the graph), not a "
                                                   "computed value");
        p = buffer;
        continue;
      }
      bool fuse = false;
      if (traits.any(kElementalTraits)) {
        if (traits.has(OpTrait::generator)) {
          // ...except into a call (its operands are passed as buffers) or
          // a node defining a symbol (the symbol is loaded from memory).
          fuse = std::none_of(consumers[v].begin(), consumers[v].end(),
                              [&](size_t c) {
                                return has_bodies(nodes[c].op) || defines_symbol(nodes[c]) ||
                                       nodes[c].op == "recurrence" || // reads its operands as buffers
                                       nodes[c].op == "matmul_nbits";
                              });
        } else if (consumers[v].size() == 1) {
          const Node &c = nodes[consumers[v][0]];
          // Fuse where every element is still computed once: into an
          // elemental consumer of the same size, or into a reduction.
          OpTraits ct = op_traits(c.op);
          // A row kernel (a rowwise composite kept whole) reads its input
          // twice, statistics then normalize: cheap to recompute.
          // A pad that only grows (no negative pad) reads each operand
          // element at most once, too; its padding evaluates the operand
          // at a clamped index, so it may at most double the elements.
          bool view_of_stored = options.fuse_broadcast_views && traits.has(OpTrait::shape) &&
                                !traits.has(OpTrait::indirect) &&
                                std::all_of(node.operands.begin(), node.operands.end(), [&](ValueId o) {
                                  return plan.values[o].storage != Storage::fused || moves_only[o];
                                });
          bool rereads = view_of_stored && (ct.has(OpTrait::elementwise) || c.op == "broadcast_to");
          fuse = (ct.any(kElementalTraits) && !ct.has(OpTrait::indirect) &&
                  (rereads || shape_numel(g.type_of(c.results[0]).shape) == shape_numel(g.type_of(v).shape))) ||
                 (pad_only_grows(g, c) && c.operands[0] == v) ||
                 (ct.any(OpTrait::reduction | OpTrait::rowwise) && c.operands[0] == v);
          moves_only[v] = fuse && view_of_stored;
          // A computed value read through a transpose of its last axis is
          // stored, and the tiled transpose moves it
          // (PlanOptions::store_before_tiled_transposes).
          if (fuse && options.store_before_tiled_transposes && !moves_only[v] && transpose_tile_axis(g, c))
            fuse = false;
        }
      }
      if (fuse) {
        int depth = 0;
        for (ValueId o : node.operands)
          if (plan.values[o].storage == Storage::fused)
            depth = std::max(depth, chain[o]);
        // Elementwise steps are walked iteratively (fused_element); every
        // other fused op (views, generators) is one level of recursion.
        chain[v] = depth + (traits.has(OpTrait::elementwise) ? 0 : 1);
        fuse = chain[v] < kMaxFusedChain;
      }
      p = {fuse ? Storage::fused : Storage::temp, 0};
    }
  }

  // Integer GEMMs (PlanOptions::int8_gemm): the widening casts, read by
  // nothing else, are fused (the kernel reads the 8-bit values); A's 8-bit
  // value is stored (a DynamicQuantizeLinear's cast would be fused into the
  // widening cast).
  if (options.int8_gemm)
    for (const Node &node : nodes) {
      auto operands = int8_gemm_operands(g, node);
      if (!operands)
        continue;
      auto only_here = [&](ValueId c) {
        return consumers[c].size() == 1 && plan.values[c].storage == Storage::temp;
      };
      if (!only_here(node.operands[0]) || !only_here(node.operands[1]))
        continue;
      plan.values[node.operands[0]] = plan.values[node.operands[1]] = {Storage::fused, 0};
      if (plan.values[operands->first].storage == Storage::fused)
        plan.values[operands->first] = {Storage::temp, 0};
    }

  // Integer convs (conv_int8_operands): the activation's sub (and its
  // casts), read by nothing else, are fused (the kernel reads the 8-bit
  // values); the 8-bit activation and its zero point are stored.
  if (options.int8_gemm)
    for (const Node &node : nodes) {
      auto ops = conv_int8_operands(g, node);
      if (!ops)
        continue;
      ValueId a = node.operands[0];
      if (consumers[a].size() != 1 ||
          (plan.values[a].storage != Storage::temp && plan.values[a].storage != Storage::fused))
        continue;
      plan.values[a] = {Storage::fused, 0};
      // A chunk's slice: the sliced value too, where every use is such a
      // slice (the other chunks').
      if (const ValueInfo &info = g.value_info(a); info.producer >= 0 && nodes[info.producer].op == "slice") {
        ValueId whole = nodes[info.producer].operands[0];
        bool chunks_only = std::all_of(consumers[whole].begin(), consumers[whole].end(), [&](size_t c) {
          const Node &s = nodes[c];
          return s.op == "slice" && consumers[s.results[0]].size() == 1 &&
                 conv_int8_operands(g, nodes[consumers[s.results[0]][0]]).has_value();
        });
        if (chunks_only && plan.values[whole].storage == Storage::temp)
          plan.values[whole] = {Storage::fused, 0};
      }
      for (ValueId v : {ops->x, ops->zero_point})
        if (plan.values[v].storage == Storage::fused && (v == ops->x || ops->has_zero_point))
          plan.values[v] = {Storage::temp, 0};
    }

  // Max pools of widened 8-bit values (max_pool_int8_source): the cast, read
  // by nothing else, is fused; the 8-bit value is stored.
  if (options.int8_gemm)
    for (const Node &node : nodes) {
      std::optional<ValueId> x8 = max_pool_int8_source(g, node);
      ValueId a = node.operands.empty() ? 0 : node.operands[0];
      if (!x8 || consumers[a].size() != 1 || plan.values[a].storage != Storage::temp)
        continue;
      plan.values[a] = {Storage::fused, 0};
      if (plan.values[*x8].storage == Storage::fused)
        plan.values[*x8] = {Storage::temp, 0};
    }

  // A causal mask (is_causal_mask) read only as the mask of attention nodes
  // is not computed: the attention kernel masks by index.
  for (size_t n = 0; n < nodes.size(); ++n) {
    const Node &node = nodes[n];
    if (node.op != "attention" || node.operands.size() < 4)
      continue;
    ValueId mask = node.operands[3];
    bool unread = plan.values[mask].storage == Storage::temp &&
                  std::all_of(consumers[mask].begin(), consumers[mask].end(), [&](size_t c) {
                    const Node &a = nodes[c];
                    return a.op == "attention" && a.operands.size() > 3 && a.operands[3] == mask &&
                           std::count(a.operands.begin(), a.operands.end(), mask) == 1 &&
                           is_causal_mask(g, mask, g.type_of(a.operands[0]).shape, g.type_of(a.operands[1]).shape);
                  });
    if (unread)
      plan.values[mask] = {Storage::fused, 0};
  }

  // Attention operands that are views of a stored buffer (the head split:
  // reshape + transpose of a projection, or of a split of a fused one) stay
  // fused: the CPU's attention kernel reads them through row strides. A
  // fused elementwise value at the chain's root (the projection's bias add)
  // is stored instead, where the GEMM epilogues below usually take it.
  if (options.strided_attention_operands)
    for (size_t n = 0; n < nodes.size(); ++n) {
      const Node &node = nodes[n];
      if (node.op != "attention")
        continue;
      for (size_t i = 0; i < 3 && i < node.operands.size(); ++i) {
        ValueId v = node.operands[i];
        const ValueInfo &info = g.value_info(v);
        if (plan.values[v].storage != Storage::temp || info.producer < 0 ||
            !is_view_op(nodes[static_cast<size_t>(info.producer)].op))
          continue;
        bool only_qkv = std::all_of(consumers[v].begin(), consumers[v].end(), [&](size_t c) {
          const Node &a = nodes[c];
          return a.op == "attention" && std::find(a.operands.begin() + std::min<std::ptrdiff_t>(3, static_cast<std::ptrdiff_t>(a.operands.size())),
                                                  a.operands.end(), v) == a.operands.end();
        });
        if (!only_qkv)
          continue;
        // The chain's root: the first value below the fused views.
        ValueId root = nodes[static_cast<size_t>(info.producer)].operands[0];
        while (plan.values[root].storage == Storage::fused && g.value_info(root).producer >= 0 &&
               is_view_op(nodes[static_cast<size_t>(g.value_info(root).producer)].op))
          root = nodes[static_cast<size_t>(g.value_info(root).producer)].operands[0];
        const ValueInfo &ri = g.value_info(root);
        bool store_root = false;
        if (plan.values[root].storage == Storage::fused) {
          // Only a value computed once per element (one reader, not a
          // generator) moves: storing it costs what the view's copy did.
          if (ri.producer < 0 || consumers[root].size() != 1 ||
              op_traits(nodes[static_cast<size_t>(ri.producer)].op).has(OpTrait::generator) ||
              !op_traits(nodes[static_cast<size_t>(ri.producer)].op).has(OpTrait::elementwise))
            continue;
          store_root = true;
          plan.values[root] = {Storage::temp, 0};
        }
        plan.values[v] = {Storage::fused, 0};
        std::optional<StridedView> view = strided_view(g, plan, v);
        if (!view || view->strides.back() != 1) {
          plan.values[v] = {Storage::temp, 0};
          if (store_root)
            plan.values[root] = {Storage::fused, 0};
        }
      }
    }

  // GEMM epilogues: a GEMM result m read by one node c of the elementwise
  // chain ops, at c's own index (same shape), then c's result the same way
  // while it is fused, up to the first stored value r. The GEMM kernel then
  // evaluates the chain on each finished tile and writes r (f32, the same
  // shape: the GEMM accumulates in r's buffer); m is never stored.
  std::map<size_t, size_t> epilogue_at; // the node computing r -> its GEMM node
  for (size_t n = 0; n < nodes.size(); ++n) {
    const Node &node = nodes[n];
    if (!node_uses_gemm(g, plan, node) && !(options.int8_gemm && conv_uses_int8_gemm(g, plan, node)))
      continue;
    ValueId m = node.results[0];
    if (plan.values[m].storage != Storage::temp)
      continue; // a graph output stays stored
    const Shape &shape = g.type_of(m).shape;
    ValueId v = m;
    bool ok = true;
    // A value of the chain read by several nodes that all lead, through
    // fused values, to one stored value r of the same shape (GELU: h = x@w
    // + b, r = h * 0.5 * (1 + erf(h / sqrt 2))): the chain continues at r
    // with v fused (each use recomputes it at the same index, which LLVM
    // merges); see diamond_sink.
    auto safe = [&](const Node &c, ValueId in) {
      return op_traits(c.op).has(OpTrait::epilogue_safe) && c.results.size() == 1 &&
             g.type_of(c.results[0]).shape == shape && g.type_of(in).shape == shape;
    };
    constexpr ValueId kNoSink = ~ValueId(0);
    auto diamond_sink = [&](ValueId x) -> ValueId {
      ValueId sink = kNoSink;
      if (plan.values[x].storage != Storage::temp)
        return kNoSink;
      for (size_t c : consumers[x]) {
        if (!safe(nodes[c], x))
          return kNoSink;
        ValueId w = nodes[c].results[0];
        while (plan.values[w].storage == Storage::fused) {
          const std::vector<size_t> &uses = consumers[w];
          if (uses.empty() || !std::all_of(uses.begin(), uses.end(), [&](size_t u) { return u == uses[0]; }) ||
              !safe(nodes[uses[0]], w))
            return kNoSink;
          w = nodes[uses[0]].results[0];
        }
        if (sink != kNoSink && w != sink)
          return kNoSink;
        sink = w;
      }
      return sink;
    };
    while (ok) {
      // Every use of v is by one node (x * x reads x twice, at one index).
      const std::vector<size_t> &uses = consumers[v];
      ok = !uses.empty() && std::all_of(uses.begin(), uses.end(), [&](size_t c) { return c == uses[0]; });
      if (!ok)
        break;
      const Node &c = nodes[uses[0]];
      ok = op_traits(c.op).has(OpTrait::epilogue_safe) && c.results.size() == 1 && g.type_of(c.results[0]).shape == shape &&
           g.type_of(v).shape == shape;
      if (!ok)
        break;
      v = c.results[0];
      if (plan.values[v].storage != Storage::fused)
        break;
    }
    // The first stored value of the chain (or the GEMM's result itself),
    // read by several nodes meeting again in one stored value r: r instead.
    if (ValueId r = consumers[v].size() > 1 ? diamond_sink(v) : kNoSink;
        r != kNoSink && g.type_of(r).dtype == DType::f32 && !epilogue_at.count(static_cast<size_t>(g.value_info(r).producer))) {
      plan.values[v] = {Storage::fused, 0};
      v = r;
      ok = true;
    }
    Storage rs = plan.values[v].storage;
    // An integer conv writes its epilogue's value itself (not accumulating in
    // r's buffer), so r may also be the 8-bit result of a requantization
    // (QLinearConv: ... round, clamp, cast to u8/i8).
    DType rd = g.type_of(v).dtype;
    bool int8_conv = options.int8_gemm && conv_uses_int8_gemm(g, plan, node);
    if (!ok || v == m || (rs != Storage::temp && rs != Storage::output) ||
        !(rd == DType::f32 || (int8_conv && (rd == DType::u8 || rd == DType::i8))))
      continue;
    // Two GEMM results meeting in one chain (x@w1 + y@w2): the first GEMM
    // takes the chain, the second stays stored and is read by it.
    if (epilogue_at.count(static_cast<size_t>(g.value_info(v).producer)))
      continue;
    plan.values[m] = {Storage::fused, 0};
    plan.epilogues[n] = v;
    epilogue_at[static_cast<size_t>(g.value_info(v).producer)] = n;
  }

  std::vector<ValueId> parent(g.num_values(), kNoParent);
  std::vector<int64_t> at(g.num_values(), 0);
  if (options.in_place_concat)
    plan_in_place(g, plan, parent, at);

  // When each node's work happens (a kernel position, a node index): its own
  // if any result is stored, else its latest consumer's; a GEMM with an
  // epilogue runs where its epilogue's stored value is computed.
  std::vector<size_t> kernel_of(nodes.size());
  std::vector<bool> stored(nodes.size());
  for (size_t n = nodes.size(); n-- > 0;) {
    const Node &node = nodes[n];
    stored[n] = node.results.empty();
    size_t k = n;
    for (ValueId v : node.results) {
      if (plan.values[v].storage != Storage::fused)
        stored[n] = true;
      else
        for (size_t c : consumers[v])
          k = std::max(k, kernel_of[c]);
    }
    if (auto it = plan.epilogues.find(n); it != plan.epilogues.end())
      k = static_cast<size_t>(g.value_info(it->second).producer);
    kernel_of[n] = stored[n] ? n : k;
  }
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (auto it = epilogue_at.find(n); it != epilogue_at.end())
      plan.kernels.push_back(it->second);
    else if (stored[n] && nodes[n].op != "constant" && !plan.in_place.count(n))
      plan.kernels.push_back(n);
  }

  // Liveness: a stored value is read until the last kernel that reads it.
  std::vector<size_t> last_use(g.num_values(), 0);
  for (size_t n = 0; n < nodes.size(); ++n)
    for (ValueId v : nodes[n].operands)
      last_use[v] = std::max(last_use[v], kernel_of[n]);

  // Slots: a temporary takes a free slot of the same size, else a new one.
  // A value placed inside another (in_place_concat) has no slot of its own:
  // its root's slot is taken at the first node of any of them and held
  // until the last read of any of them.
  auto root_of = [&](ValueId v) { return placement_root(parent, at, v); };
  std::vector<std::vector<ValueId>> starts(nodes.size());
  std::vector<size_t> until(g.num_values(), 0);
  std::vector<bool> started(g.num_values(), false);
  for (size_t n = 0; n < nodes.size(); ++n)
    for (ValueId v : nodes[n].results) {
      if (plan.values[v].storage != Storage::temp)
        continue;
      ValueId root = root_of(v).first;
      if (!started[root]) {
        started[root] = true;
        starts[n].push_back(root);
      }
      until[root] = std::max(until[root], std::max(last_use[v], n));
    }
  struct Live {
    size_t slot;
    size_t until;
  };
  std::vector<Live> live;
  std::vector<bool> slot_free;
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (auto it = live.begin(); it != live.end();) {
      if (it->until < n) {
        slot_free[it->slot] = true;
        it = live.erase(it);
      } else {
        ++it;
      }
    }
    for (ValueId v : starts[n]) {
      ValuePlan &p = plan.values[v];
      const TensorType &t = g.type_of(v);
      // A size naming a symbol a node defines is allocated by its bound.
      Dim bytes = bound_node_symbols(shape_numel(t.shape) * Dim(static_cast<int64_t>(dtype_size(t.dtype))),
                                     g.root()->symbol_table(), "value %" + std::to_string(v));
      size_t slot = plan.slots.size();
      for (size_t s = 0; s < plan.slots.size(); ++s)
        if (slot_free[s] && plan.slots[s].bytes == bytes) {
          slot = s;
          break;
        }
      if (slot == plan.slots.size()) {
        plan.slots.push_back({bytes});
        slot_free.push_back(false);
      }
      slot_free[slot] = false;
      p.index = slot;
      live.push_back({slot, until[v]});
    }
  }
  for (ValueId v = 0; v < g.num_values(); ++v)
    if (parent[v] != kNoParent) {
      auto [root, off] = root_of(v);
      plan.values[v].index = plan.values[root].index;
      plan.slot_offsets[v] = off;
    }
  // Scratch for convolutions lowered to GEMM: one slot of the largest need
  // (the max with the run-time needs of symbolic-size convs, if any).
  // A need naming a symbol a node defines is allocated by its bound, as
  // the values are.
  int64_t scratch = 0;
  std::vector<Dim> symbolic_scratch;
  auto bounded = [&](const Dim &need, size_t n) {
    return bound_node_symbols(need, g.root()->symbol_table(), "the scratch of node " + std::to_string(n));
  };
  for (size_t n : plan.kernels) {
    int64_t bytes = 0;
    if (is_loop(nodes[n])) {
      Dim need = bounded(loop_scratch_bytes(g, nodes[n]), n);
      if (need.is_static())
        scratch = std::max(scratch, need.value());
      else
        symbolic_scratch.push_back(need);
    } else if (conv_is_symbolic_gemm(g, nodes[n])) {
      if (!conv_is_pointwise(g, nodes[n]))
        symbolic_scratch.push_back(bounded(conv_symbolic_scratch(g, nodes[n]), n));
    } else if (conv_uses_gemm(g, nodes[n], &bytes) || conv_uses_direct(g, nodes[n], &bytes)) {
      scratch = std::max(scratch, bytes);
      if (options.int8_gemm && conv_uses_int8_gemm(g, plan, nodes[n]))
        scratch = std::max(scratch, conv_int8_scratch_bytes(g, nodes[n]));
    }
  }
  if (!symbolic_scratch.empty()) {
    if (scratch > 0)
      symbolic_scratch.push_back(Dim(scratch));
    plan.scratch_slot = plan.slots.size();
    plan.slots.push_back({Dim::max(symbolic_scratch)});
  } else if (scratch > 0) {
    plan.scratch_slot = plan.slots.size();
    plan.slots.push_back({Dim(scratch)});
  }
  return plan;
}

bool matmul_uses_gemm(const Graph &g, const LoweringPlan &plan, const Node &node) {
  return node.op == "matmul" && !node.attrs.get_bool("transpose_a") && !node.attrs.get_bool("transpose_b") &&
         g.type_of(node.results[0]).dtype == DType::f32 &&
         plan.values[node.operands[0]].storage != Storage::fused &&
         plan.values[node.operands[1]].storage != Storage::fused;
}

/// X8 where v = cast(X8) of a u8 or i8 X8.
static std::optional<ValueId> widened_8bit(const Graph &g, ValueId v) {
  const ValueInfo &info = g.value_info(v);
  if (info.producer < 0)
    return std::nullopt;
  const Node &cast = g.nodes()[static_cast<size_t>(info.producer)];
  if (cast.op != "cast" || cast.operands.size() != 1)
    return std::nullopt;
  DType from = g.type_of(cast.operands[0]).dtype;
  if (from != DType::u8 && from != DType::i8)
    return std::nullopt;
  return cast.operands[0];
}

std::optional<std::pair<ValueId, ValueId>> int8_gemm_operands(const Graph &g, const Node &node) {
  if (node.op != "matmul" || node.operands.size() != 2 || node.operands[0] == node.operands[1] ||
      node.attrs.get_bool("transpose_a") || node.attrs.get_bool("transpose_b") ||
      g.type_of(node.results[0]).dtype != DType::i32)
    return std::nullopt;
  // The 8-bit values the casts to i32 widen.
  std::optional<ValueId> a = widened_8bit(g, node.operands[0]), b = widened_8bit(g, node.operands[1]);
  if (!a || !b)
    return std::nullopt;
  const TensorType &at = g.type_of(*a), &bt = g.type_of(*b);
  const ValueInfo &binfo = g.value_info(*b);
  if (at.rank() < 2 || bt.rank() != 2 || !shape_is_static(bt.shape) || bt.shape[0].value() <= 0 ||
      bt.shape[1].value() <= 0 ||
      (binfo.producer >= 0 && g.nodes()[static_cast<size_t>(binfo.producer)].op != "constant") ||
      at.shape.back() != bt.shape[0])
    return std::nullopt;
  return std::make_pair(*a, *b);
}

bool matmul_uses_int8_gemm(const Graph &g, const LoweringPlan &plan, const Node &node) {
  auto operands = int8_gemm_operands(g, node);
  return operands && plan.values[node.operands[0]].storage == Storage::fused &&
         plan.values[node.operands[1]].storage == Storage::fused &&
         plan.values[operands->first].storage != Storage::fused;
}

bool conv_int8_weight_ok(const HostTensor &w) {
  if (w.dtype() != DType::f32 || w.shape().size() != 4 || w.numel() == 0)
    return false;
  int64_t O = w.shape()[0], K = w.numel() / O;
  const float *v = w.data_as<float>();
  for (int64_t o = 0; o < O; ++o) {
    float lo = v[o * K], hi = v[o * K];
    for (int64_t k = 0; k < K; ++k) {
      float e = v[o * K + k];
      if (!(std::abs(e) <= 255.0f) || e != std::nearbyint(e))
        return false;
      lo = std::min(lo, e), hi = std::max(hi, e);
    }
    if (hi - lo > 255.0f)
      return false;
  }
  return true;
}

std::optional<ConvInt8Operands> conv_int8_operands(const Graph &g, const Node &node) {
  if (node.op != "conv2d" || node.operands.size() != 2 || node.attrs.get_int("groups") != 1 ||
      !node.attrs.get_bool("exact") || g.type_of(node.results[0]).dtype != DType::f32)
    return std::nullopt;
  const TensorType &x = g.type_of(node.operands[0]), &w = g.type_of(node.operands[1]);
  const TensorType &out = g.type_of(node.results[0]);
  if (!shape_is_static(x.shape) || !shape_is_static(w.shape) || !shape_is_static(out.shape))
    return std::nullopt;
  auto producer = [&](ValueId v) -> const Node * {
    const ValueInfo &info = g.value_info(v);
    return info.producer < 0 ? nullptr : &g.nodes()[static_cast<size_t>(info.producer)];
  };
  // The 8-bit value a cast to f32 widens.
  auto widened = [&](ValueId v) -> std::optional<ValueId> {
    const Node *cast = producer(v);
    if (!cast || cast->op != "cast" || cast->operands.size() != 1)
      return std::nullopt;
    DType from = g.type_of(cast->operands[0]).dtype;
    if (from != DType::u8 && from != DType::i8)
      return std::nullopt;
    return cast->operands[0];
  };
  ConvInt8Operands ops;
  ValueId a = node.operands[0];
  // A slice of input channels (step 1, from a non-negative start).
  if (const Node *slice = producer(a); slice && slice->op == "slice" && slice->operands.size() == 1) {
    std::vector<int64_t> axes = slice->attrs.get_ints("axes"), starts = slice->attrs.get_ints("starts"),
                         steps = slice->attrs.get_ints("steps");
    const TensorType &whole = g.type_of(slice->operands[0]);
    if (axes != std::vector<int64_t>{1} || starts.size() != 1 || starts[0] < 0 ||
        !(steps.empty() || steps == std::vector<int64_t>{1}) || whole.rank() != 4 || !shape_is_static(whole.shape) ||
        whole.shape[0] != x.shape[0] || whole.shape[2] != x.shape[2] || whole.shape[3] != x.shape[3])
      return std::nullopt;
    ops.channel_offset = starts[0];
    a = slice->operands[0];
  }
  const TensorType &xa = g.type_of(a);
  const Node *sub = producer(a);
  if (std::optional<ValueId> x8 = widened(a)) {
    ops.x = *x8;
  } else if (sub && sub->op == "sub" && sub->operands.size() == 2 && g.type_of(sub->results[0]) == xa) {
    std::optional<ValueId> x8 = widened(sub->operands[0]), z8 = widened(sub->operands[1]);
    if (!x8 || !z8 || g.type_of(*z8).dtype != g.type_of(*x8).dtype || g.type_of(*x8).shape != xa.shape)
      return std::nullopt;
    const TensorType &zt = g.type_of(*z8);
    if (!shape_is_static(zt.shape) || shape_numel(zt.shape) != Dim(1))
      return std::nullopt;
    ops.x = *x8, ops.zero_point = *z8, ops.has_zero_point = true;
  } else {
    return std::nullopt;
  }
  const Node *wc = producer(node.operands[1]);
  if (!wc || wc->op != "constant" || !conv_int8_weight_ok(g.constant(wc->attrs.get_string("name"))))
    return std::nullopt;
  ops.weight = node.operands[1];
  return ops;
}

bool conv_uses_int8_gemm(const Graph &g, const LoweringPlan &plan, const Node &node) {
  auto ops = conv_int8_operands(g, node);
  return ops && plan.values[node.operands[0]].storage == Storage::fused &&
         plan.values[ops->x].storage != Storage::fused &&
         (!ops->has_zero_point || plan.values[ops->zero_point].storage != Storage::fused);
}

std::optional<ValueId> max_pool_int8_source(const Graph &g, const Node &node) {
  if (node.op != "max_pool2d" || node.operands.size() != 1 || g.type_of(node.operands[0]).dtype != DType::f32)
    return std::nullopt;
  return widened_8bit(g, node.operands[0]);
}

int64_t conv_int8_block_rows(int64_t kp, int64_t oh, int64_t ow) {
  auto padded = [](int64_t p) { return (p + kConvInt8Panel - 1) / kConvInt8Panel * kConvInt8Panel; };
  if (kp * padded(oh * ow) <= kConvInt8BlockBytes)
    return 0;
  // Every block computes its padded columns (the last one too): the fewest
  // columns in all, then the most rows; blocks only where that is at most
  // 1/8 more than the whole image's. A block spans two panels at least: a
  // narrower one runs (mostly) as the GEMM's transposed last panel, which
  // reads the weights once per few columns (a QDQ ResNet-18's layer3, 14
  // wide, ran in blocks of 28 columns). Among the fewest columns, an even
  // number of blocks (two threads share them evenly: the stem and layer1 of
  // a QDQ ResNet-18 ran as 7 blocks, 4 + 3 at 2 threads), then the most rows.
  int64_t best = 0, best_cols = 0;
  auto even = [&](int64_t r) { return (oh + r - 1) / r % 2 == 0; };
  for (int64_t r = 1; r < oh && kp * padded(r * ow) <= kConvInt8BlockBytes; ++r) {
    if (r * ow < 2 * kConvInt8Panel)
      continue;
    int64_t cols = (oh + r - 1) / r * padded(r * ow);
    if (best == 0 || cols < best_cols || (cols == best_cols && (even(r) || !even(best))))
      best = r, best_cols = cols;
  }
  return best != 0 && best_cols * 8 <= padded(oh * ow) * 9 ? best : 0;
}

int64_t conv_int8_scratch_bytes(const Graph &g, const Node &node) {
  const Shape &w = g.type_of(node.operands[1]).shape, &out = g.type_of(node.results[0]).shape;
  int64_t K = w[1].value() * w[2].value() * w[3].value(), K4 = (K + 3) / 4 * 4;
  int64_t OH = out[2].value(), OW = out[3].value();
  auto padded = [](int64_t p) { return (p + kConvInt8Panel - 1) / kConvInt8Panel * kConvInt8Panel; };
  // colsT, its packed copy, the columns' sums (i32): of the whole image, or
  // of each block of rows.
  int64_t rows = conv_int8_block_rows(K4, OH, OW);
  if (rows == 0)
    return 2 * K4 * padded(OH * OW) + padded(OH * OW) * 4;
  int64_t blocks = (OH + rows - 1) / rows, Pt = padded(rows * OW);
  return blocks * (2 * K4 * Pt + Pt * 4);
}

bool node_uses_gemm(const Graph &g, const LoweringPlan &plan, const Node &node) {
  if (node.op == "matmul")
    return matmul_uses_gemm(g, plan, node);
  return (conv_uses_gemm(g, node) || conv_uses_direct(g, node)) &&
         plan.values[node.operands[0]].storage != Storage::fused &&
         plan.values[node.operands[1]].storage != Storage::fused;
}

static bool conv_is_static_f32(const Graph &g, const Node &node) {
  if (node.op != "conv2d")
    return false;
  const TensorType &x = g.type_of(node.operands[0]), &w = g.type_of(node.operands[1]);
  const TensorType &out = g.type_of(node.results[0]);
  return x.dtype == DType::f32 && shape_is_static({x.shape[1], x.shape[2], x.shape[3]}) && shape_is_static(w.shape) &&
         shape_is_static({out.shape[2], out.shape[3]});
}

Dim loop_scratch_bytes(const Graph &g, const Node &node) {
  Dim bytes(3 * kLoopScalarBytes);
  for (ValueId r : node.results) {
    const TensorType &t = g.type_of(r);
    bytes = bytes + bound_node_symbols(shape_numel(t.shape) * Dim(static_cast<int64_t>(dtype_size(t.dtype))),
                                       g.root()->symbol_table(), "value %" + std::to_string(r)) +
            Dim(64);
  }
  return bytes;
}

bool conv_is_symbolic_gemm(const Graph &g, const Node &node) {
  if (node.op != "conv2d" || node.attrs.get_int("groups") != 1)
    return false;
  const TensorType &x = g.type_of(node.operands[0]), &w = g.type_of(node.operands[1]);
  const TensorType &out = g.type_of(node.results[0]);
  return x.dtype == DType::f32 && x.shape[1].is_static() && shape_is_static(w.shape) &&
         !shape_is_static({x.shape[2], x.shape[3], out.shape[2], out.shape[3]});
}

Dim conv_symbolic_scratch(const Graph &g, const Node &node) {
  const Shape &x = g.type_of(node.operands[0]).shape, &w = g.type_of(node.operands[1]).shape;
  const Shape &out = g.type_of(node.results[0]).shape;
  return Dim(x[1].value() * w[2].value() * w[3].value() * 4) * out[2] * out[3];
}

bool conv_uses_gemm(const Graph &g, const Node &node, int64_t *bytes) {
  if (conv_is_symbolic_gemm(g, node)) {
    if (bytes)
      *bytes = 0; // run-time: conv_symbolic_scratch
    return true;
  }
  if (!conv_is_static_f32(g, node) || node.attrs.get_int("groups") != 1)
    return false;
  const TensorType &x = g.type_of(node.operands[0]), &w = g.type_of(node.operands[1]);
  const TensorType &out = g.type_of(node.results[0]);
  // colsT: [C*KH*KW, OH*OW] f32 (none for a pointwise conv: x is colsT);
  // a 3x3 stride-1 conv may take Winograd F(m,3) (Cpu/WinogradEmitter.h):
  // its V, M and padded planes (winograd_plan).
  if (bytes) {
    int64_t C = x.shape[1].value(), OH = out.shape[2].value(), OW = out.shape[3].value();
    int64_t K = C * w.shape[2].value() * w.shape[3].value();
    *bytes = conv_is_pointwise(g, node) ? 0 : K * OH * OW * 4;
    if (ConvBlockPlan bp = conv_block_plan(g, node); bp.blocks > 0) // (blocks * rows >= OH)
      *bytes = std::max(*bytes, bp.blocks * bp.rows * OW * K * 4);
    if (conv_winograd_shape(g, node))
      *bytes = std::max(*bytes, winograd_plan(g, node).scratch_floats * 4);
    if (conv_uses_transposed_gemm(g, node))
      *bytes = std::max(*bytes, (K + out.shape[1].value()) * OH * OW * 4);
  }
  return true;
}

bool conv_uses_transposed_gemm(const Graph &g, const Node &node) {
  if (!conv_is_static_f32(g, node) || node.attrs.get_int("groups") != 1 || conv_is_pointwise(g, node) ||
      conv_winograd_shape(g, node) || conv_block_plan(g, node).blocks > 0)
    return false;
  const ValueInfo &w = g.value_info(node.operands[1]);
  if (w.producer < 0 || g.nodes()[static_cast<size_t>(w.producer)].op != "constant")
    return false;
  const Shape &out = g.type_of(node.results[0]).shape;
  int64_t O = out[1].value(), P = out[2].value() * out[3].value();
  return P <= kConvTransposedMaxPositions && P % kConvBlockPanel != 0 && O % kConvBlockPanel == 0 &&
         O >= kConvTransposedMinChannels;
}

ConvBlockPlan conv_block_plan(const Graph &g, const Node &node) {
  if (!conv_is_static_f32(g, node) || node.attrs.get_int("groups") != 1 || conv_is_pointwise(g, node) ||
      (g.type_of(node.operands[1]).shape[2] == Dim(1) && g.type_of(node.operands[1]).shape[3] == Dim(1)))
    return {};
  const Shape &x = g.type_of(node.operands[0]).shape, &w = g.type_of(node.operands[1]).shape;
  const Shape &out = g.type_of(node.results[0]).shape;
  int64_t K = x[1].value() * w[2].value() * w[3].value(), OH = out[2].value(), OW = out[3].value();
  int64_t fit = std::max<int64_t>(1, kConvBlockBytes / (K * OW * 4));
  // The most rows that fit and leave enough tasks, whose columns fill whole
  // GEMM panels (2 * kConvDirectMaxLanes: AVX-512's, a multiple of AVX2's
  // and NEON's).
  for (int64_t rows = std::min(fit, (OH + kConvBlockMinTasks - 1) / kConvBlockMinTasks); rows >= 1; --rows)
    if (rows * OW % kConvBlockPanel == 0) {
      int64_t blocks = (OH + rows - 1) / rows;
      if (blocks < kConvBlockMinTasks - 1)
        return {};
      return {rows, blocks};
    }
  return {};
}

bool conv_winograd_shape(const Graph &g, const Node &node) {
  // An exact conv (integer-valued operands, e.g. a ConvInteger run in f32)
  // must not round: Winograd's transforms do.
  if (!conv_is_static_f32(g, node) || node.attrs.get_int("groups") != 1 || node.attrs.get_int("exact", 0) != 0)
    return false;
  const Shape &w = g.type_of(node.operands[1]).shape, &out = g.type_of(node.results[0]).shape;
  const int64_t O = w[0].value(), C = w[1].value();
  return w[2] == Dim(3) && w[3] == Dim(3) && node.attrs.get_ints("stride") == std::vector<int64_t>{1, 1} &&
         node.attrs.get_ints("dilation") == std::vector<int64_t>{1, 1} && O >= kWinogradMinChannels &&
         C >= kWinogradMinChannels && C * O >= kWinogradChannelRatio * (C + O) &&
         winograd_tile(out[2].value(), out[3].value()) != 0;
}

int64_t winograd_tile(int64_t OH, int64_t OW) {
  // Measured on ResNet-18 (PERFORMANCE.md, "Convolution" and session 10):
  // F(4,3) pays at 56x56, 28x28 and 14x14 (16 tiles: full one-vector GEMM
  // panels, where F(2,3)'s 49 tiles fill 49 of 64 lanes; its 2.25x larger
  // weights cost less than that: 5-7 % on the whole model at 1 and 2
  // threads, once its blocks of V stopped sharing L1 sets); at 7x7 (GEMMs
  // of 4 columns) F(2,3) wins, and F(4,3) loses even to im2col.
  return std::min(OH, OW) >= kWinogradF4MinSize ? 4 : 2;
}

WinogradPlan winograd_plan(const Graph &g, const Node &node) {
  const Shape &x = g.type_of(node.operands[0]).shape, &w = g.type_of(node.operands[1]).shape;
  const Shape &out = g.type_of(node.results[0]).shape;
  int64_t C = x[1].value(), O = w[0].value(), OH = out[2].value(), OW = out[3].value();
  WinogradPlan p{};
  p.m = winograd_tile(OH, OW);
  p.a = p.m + 2;
  p.th = (OH + p.m - 1) / p.m;
  p.tw = (OW + p.m - 1) / p.m;
  int64_t T = p.th * p.tw;
  auto [tasks, per] = conv_task_split(C, p.a * p.a * T);
  p.in_tasks = tasks;
  p.in_per = per;
  // Fused blocks: tile rows of about two vectors of tiles (a GEMM panel of
  // 2 * kConvDirectMaxLanes columns; at least one row).
  p.rows_per_task = std::max<int64_t>(1, 2 * kConvDirectMaxLanes / p.tw);
  int64_t blocks = (p.th + p.rows_per_task - 1) / p.rows_per_task;
  p.row_tasks = blocks >= kWinogradFusedMinTasks ? blocks : 0;
  int64_t slots = p.row_tasks ? p.row_tasks * p.rows_per_task * p.tw : T;
  // Rows: every patch row (tile row * m + a - 1) of all tile rows, or of a
  // fused block's; columns: vector loads of up to kConvDirectMaxLanes tiles'
  // m columns, from a chunk's start and m further.
  p.plane_h = (p.row_tasks ? p.rows_per_task : p.th) * p.m + 2;
  p.plane_w = (p.tw + kConvDirectMaxLanes - 1) / kConvDirectMaxLanes * kConvDirectMaxLanes * p.m + p.m;
  // Phased: V[e] [C, T] and M[e] [O, T] one after another, 64 bytes more
  // apart when C * T or O * T floats are a multiple of 4 KB: at 7x7 (T = 16)
  // and 512 channels the a*a = 16 blocks were 32 KB apart, so one channel's
  // 16 stores (input transform) or loads (output) fell in one L1 set of 12
  // ways (layer 4's input transform: 120 us at 1 and at 2 threads).
  auto skew = [](int64_t floats) { return floats % 1024 == 0 ? floats + 16 : floats; };
  p.v_estride = skew(C * T);
  p.m_estride = skew(O * T);
  p.scratch_floats = (p.row_tasks ? p.a * p.a * (C + O) * slots : p.a * p.a * (p.v_estride + p.m_estride)) +
                     (p.row_tasks ? p.row_tasks : p.in_tasks) * p.plane_h * p.plane_w;
  return p;
}

bool conv_is_pointwise(const Graph &g, const Node &node) {
  const Shape &w = g.type_of(node.operands[1]).shape;
  std::vector<int64_t> stride = node.attrs.get_ints("stride"), pad = node.attrs.get_ints("padding");
  return w[2] == Dim(1) && w[3] == Dim(1) && stride == std::vector<int64_t>{1, 1} &&
         std::all_of(pad.begin(), pad.end(), [](int64_t p) { return p == 0; });
}

bool conv_uses_direct(const Graph &g, const Node &node, int64_t *bytes) {
  if (!conv_is_static_f32(g, node) || node.attrs.get_int("groups") == 1)
    return false;
  if (bytes) // the taps read the input in place: no scratch
    *bytes = 0;
  return true;
}

std::array<int64_t, 2> conv_task_split(int64_t units, int64_t unit_work) {
  int64_t tasks = std::clamp<int64_t>(units * std::max<int64_t>(unit_work, 1) / kConvTaskWork, 1,
                                      std::min(std::max<int64_t>(units, 1), kConvMaxTasks));
  int64_t per = (units + tasks - 1) / tasks;
  return {(units + per - 1) / per, per};
}

std::array<int64_t, 2> conv_direct_split(const Graph &g, const Node &node) {
  const Shape &w = g.type_of(node.operands[1]).shape, &out = g.type_of(node.results[0]).shape;
  int64_t groups = node.attrs.get_int("groups");
  // Multiply-adds per group: O/groups output planes of C/groups * KH * KW taps.
  int64_t work = w[0].value() / groups * w[1].value() * w[2].value() * w[3].value() * out[2].value() * out[3].value();
  return conv_task_split(groups, work);
}

LoweringPlan plan_lowering(const Graph &g, const PlanOptions &options) {
  if (!options.refine)
    return plan_graph(g, options);
  LoweringPlans one;
  one.emplace(&g, plan_graph(g, options));
  options.refine(g, one);
  return std::move(one.at(&g));
}

LoweringPlans plan_lowering_all(const Graph &root, const PlanOptions &options) {
  LoweringPlans plans;
  plans.emplace(&root, plan_graph(root, options));
  for (const auto &[name, sub] : root.subgraphs())
    plans.emplace(sub.get(), plan_graph(*sub, options));
  if (options.refine)
    options.refine(root, plans);
  return plans;
}

static Dim own_slots_bound(const Graph &g, const LoweringPlans *plans) {
  Dim total(0);
  for (const WorkspaceSlot &s : (plans ? plans->at(&g) : plan_lowering(g)).slots)
    total = total + s.bytes + Dim(63);
  return total;
}

// Callees run one at a time in the caller's workspace (after its own
// slots), so the bound is the caller's slots plus the largest callee need,
// as NAME_workspace_size computes at run time: Dim::max, a constant when
// all needs are static, the need itself for one callee, else a max atom.
// A body with dims of its own (Ops/CallBinding.h) needs its slots at each
// call's binding: the need with the caller's dims substituted, per call.
Dim workspace_bound(const Graph &graph, const LoweringPlans *plans) {
  std::map<const Graph *, std::vector<DimBinding>> bound; // body -> the bindings of its calls
  auto visit = [&](const Graph &g) {
    for (const Node &n : g.nodes())
      if (const Graph *body = call_body(g, n))
        bound[body].push_back(call_dim_binding(g, n)); // empty: the identity
  };
  visit(graph);
  for (const auto &[name, sub] : graph.subgraphs())
    visit(*sub);
  std::vector<Dim> needs;
  for (const auto &[name, sub] : graph.subgraphs()) {
    Dim need = own_slots_bound(*sub, plans);
    auto it = bound.find(sub.get());
    if (it == bound.end()) {
      needs.push_back(need);
      continue;
    }
    for (const DimBinding &b : it->second)
      needs.push_back(b.empty() ? need : need.substitute(b));
  }
  return own_slots_bound(graph, plans) + (needs.empty() ? Dim(0) : Dim::max(needs));
}

std::string describe_plan(const Graph &g, const LoweringPlan &plan) {
  static const char *names[] = {"input", "output", "constant", "temp", "fused"};
  std::string out;
  for (size_t n = 0; n < g.nodes().size(); ++n)
    for (ValueId v : g.nodes()[n].results) {
      const ValuePlan &p = plan.values[v];
      out += "%" + std::to_string(v) + " " + g.nodes()[n].op + ": " + names[static_cast<int>(p.storage)];
      if (p.storage == Storage::temp)
        out += " slot " + std::to_string(p.index) + " (" + plan.slots[p.index].bytes.to_string() + " bytes)";
      if (auto it = plan.slot_offsets.find(v); it != plan.slot_offsets.end())
        out += " at +" + std::to_string(it->second);
      if (plan.in_place.count(n) && plan.values[v].storage != Storage::fused)
        out += " (in place)";
      if (p.storage == Storage::output || p.storage == Storage::input)
        out += " " + std::to_string(p.index);
      if (auto it = plan.epilogues.find(n); it != plan.epilogues.end() && v == g.nodes()[n].results[0])
        out += " (GEMM epilogue -> %" + std::to_string(it->second) + ")";
      if (auto it = plan.stored_through.find(n); it != plan.stored_through.end() && v == g.nodes()[n].results[0])
        out += " (stored through views -> %" + std::to_string(g.nodes()[it->second.back()].results[0]) + ")";
      out += "\n";
    }
  return out;
}

} // namespace maxc

#include "Cpu/GemmPanels.h"

#include "maxc/Ops/OpRegistry.h"
#include "maxc/Support/BulkMemory.h"
#include "maxc/Support/FileSystem.h"
#include "maxc/Support/Float16.h"
#include "maxc/Transforms/CallSites.h"

#include <algorithm>
#include <functional>
#include <cstring>
#include <memory>
#include <vector>

namespace maxc::codegen {

namespace {

// Whether value `v` of `g` can be read as a packed GEMM B: [K, N] f32, static.
bool packable_type(const Graph &g, ValueId v) {
  const TensorType &t = g.type_of(v);
  return t.dtype == DType::f32 && t.rank() == 2 && shape_is_static(t.shape) && t.shape[0].value() > 0 &&
         t.shape[1].value() > 0;
}

bool is_int8(DType d) { return d == DType::u8 || d == DType::i8; }

// Per value of `g`: the (node, operand slot) pairs that read it.
std::vector<std::vector<std::pair<size_t, size_t>>> uses_of(const Graph &g) {
  std::vector<std::vector<std::pair<size_t, size_t>>> uses(g.num_values());
  for (size_t n = 0; n < g.nodes().size(); ++n)
    for (size_t s = 0; s < g.nodes()[n].operands.size(); ++s)
      uses[g.nodes()[n].operands[s]].push_back({n, s});
  return uses;
}

} // namespace

bool PackedWeights::packed_value(const Graph &g, ValueId v) const {
  const ValueInfo &info = g.value_info(v);
  if (info.producer < 0)
    return inputs.count({&g, info.index}) != 0;
  const Node &n = g.nodes()[static_cast<size_t>(info.producer)];
  return n.op == "constant" && packed_constant(g, n.attrs.get_string("name"));
}

DType PackedWeights::packed_dtype(const Graph &g, ValueId v) const {
  const ValueInfo &info = g.value_info(v);
  if (info.producer < 0) {
    auto it = narrow_inputs.find({&g, info.index});
    return it == narrow_inputs.end() ? DType::f32 : it->second;
  }
  const Node &n = g.nodes()[static_cast<size_t>(info.producer)];
  return n.op == "constant" ? constant_dtype(g, n.attrs.get_string("name")) : DType::f32;
}

DType PackedWeights::constant_dtype(const Graph &g, const std::string &name) const {
  auto it = narrow.find({&g, name});
  return it == narrow.end() ? DType::f32 : it->second;
}

DType exact_narrow_type(const HostTensor &t, bool f16) {
  if (t.dtype() != DType::f32)
    return DType::f32;
  const auto *bits = reinterpret_cast<const uint32_t *>(t.data());
  const float *v = t.data_as<float>();
  int64_t n = t.numel();
  auto all = [&](auto exact) {
    for (int64_t i = 0; i < n; ++i)
      if (v[i] != v[i] || !exact(i)) // (a NaN: neither)
        return false;
    return true;
  };
  if (f16 && all([&](int64_t i) {
        float back = half_bits_to_float(float_to_half_bits(v[i]));
        uint32_t back_bits;
        std::memcpy(&back_bits, &back, 4);
        return back_bits == bits[i];
      }))
    return DType::f16;
  if (all([&](int64_t i) { return (bits[i] & 0xffffu) == 0; }))
    return DType::bf16;
  return DType::f32;
}

std::vector<uint16_t> narrow_panels(const std::vector<float> &panels, DType dtype) {
  std::vector<uint16_t> out(panels.size());
  for (size_t i = 0; i < panels.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &panels[i], 4);
    out[i] = dtype == DType::f16 ? float_to_half_bits(panels[i]) : static_cast<uint16_t>(bits >> 16);
  }
  return out;
}

namespace {

// Passes over every argument of every call in `graphs` — fn(graph, call,
// operand index, callee, the argument's constant node or null) — until a
// whole pass changes nothing (fn returns whether it changed something).
void until_stable(const Graph &root, const std::vector<const Graph *> &graphs,
                  const std::function<bool(const Graph &, const Node &, size_t, const Graph *, const Node *)> &fn) {
  for (bool changed = true; changed;) {
    changed = false;
    for (const Graph *g : graphs)
      for (const Node &n : g->nodes()) {
        if (!is_call(n))
          continue;
        const Graph *callee = call_body(root, n);
        for (size_t i = 0; i < n.operands.size(); ++i) {
          const ValueInfo &info = g->value_info(n.operands[i]);
          const Node *producer = info.producer >= 0 ? &g->nodes()[static_cast<size_t>(info.producer)] : nullptr;
          changed = fn(*g, n, i, callee, producer && producer->op == "constant" ? producer : nullptr) || changed;
        }
      }
  }
}

// The 16-bit panels of PackedWeights (GemmPanels.h): which packed f32
// constants are exact in 16 bits, then the parameters whose every call
// passes such a constant of one type (a call whose constant and parameter
// disagree makes both f32, until nothing changes).
void plan_narrow_panels(const Graph &root, const std::vector<const Graph *> &graphs, bool f16, PackedWeights &out) {
  for (const auto &key : out.constants) {
    const auto &[g, name] = key;
    if (out.conv_int8.count(key) || g->constant_types().at(name).dtype() != DType::f32)
      continue;
    const HostTensor *source = g->transposed_source(name); // (never made: its values are the source's)
    DType d = exact_narrow_type(source ? *source : g->constant(name), f16);
    if (d != DType::f32)
      out.narrow[key] = d;
  }
  std::map<std::pair<const Graph *, size_t>, DType> params;
  until_stable(root, graphs, [&](const Graph &g, const Node &, size_t i, const Graph *callee, const Node *constant) {
    if (!constant || !callee || !out.inputs.count({callee, i}))
      return false;
    std::pair<const Graph *, std::string> c = {&g, constant->attrs.get_string("name")};
    DType dc = out.constant_dtype(g, c.second);
    auto [it, fresh] = params.insert({{callee, i}, dc});
    bool changed = fresh;
    if (!fresh && it->second != dc) {
      if (it->second != DType::f32)
        it->second = DType::f32, changed = true;
      if (dc != DType::f32)
        out.narrow.erase(c), changed = true;
    }
    return changed;
  });
  for (const auto &[param, d] : params)
    if (d != DType::f32)
      out.narrow_inputs[param] = d;
}

} // namespace

PackedWeights plan_packed_weights(const Graph &root, const LoweringPlans &plans, unsigned lanes, bool f16) {
  PackedWeights out;
  out.nr = 2 * static_cast<int64_t>(lanes);
  std::map<std::string, std::vector<bool>> bound = constant_bound_inputs(root);
  std::vector<const Graph *> graphs = {&root};
  for (const auto &[name, sub] : root.subgraphs())
    graphs.push_back(sub.get());
  // Candidates: every use a GEMM's B, or (constants) a call's argument,
  // checked against the callee's parameter below.
  for (const Graph *g : graphs) {
    const LoweringPlan &plan = plans.at(g);
    auto uses = uses_of(*g);
    std::vector<bool> output(g->num_values(), false);
    for (ValueId v : g->output_ids())
      output[v] = true;
    auto only_gemm_b = [&](ValueId v, bool calls) {
      if (output[v] || uses[v].empty() || !packable_type(*g, v))
        return false;
      for (auto [n, s] : uses[v]) {
        const Node &node = g->nodes()[n];
        bool gemm_b = s == 1 && node.operands[0] != v && matmul_uses_gemm(*g, plan, node);
        if (!gemm_b && !(calls && is_call(node)))
          return false;
      }
      return true;
    };
    // An 8-bit [K, N] constant that only calls read (an integer GEMM's B
    // in the callee, checked below).
    auto int8_argument = [&](ValueId v) {
      const TensorType &t = g->type_of(v);
      if (output[v] || uses[v].empty() || !is_int8(t.dtype) || t.rank() != 2 || !shape_is_static(t.shape))
        return false;
      return std::all_of(uses[v].begin(), uses[v].end(), [&](auto use) { return is_call(g->nodes()[use.first]); });
    };
    for (const Node &n : g->nodes())
      if (n.op == "constant" && (only_gemm_b(n.results[0], true) || int8_argument(n.results[0])))
        out.constants.insert({g, n.attrs.get_string("name")});
    std::vector<bool> bound_here; // the inputs every call binds to a constant
    if (auto it = bound.find(g->name()); g != &root && it != bound.end())
      bound_here = it->second;
    // Constant nodes per name: packing is keyed by the name, so a name that
    // several constant nodes share (identical bytes) is packed only through
    // the f32 GEMM rule above, which checks every reader.
    std::map<std::string, int> nodes_of_name;
    for (const Node &n : g->nodes())
      if (n.op == "constant")
        ++nodes_of_name[n.attrs.get_string("name")];
    // An integer GEMM's B, read only by the widening cast: a constant, or
    // a parameter every call binds to a constant.
    for (const Node &n : g->nodes()) {
      if (!matmul_uses_int8_gemm(*g, plan, n))
        continue;
      ValueId b = int8_gemm_operands(*g, n)->second;
      if (output[b] || uses[b].size() != 1)
        continue;
      const ValueInfo &info = g->value_info(b);
      if (info.producer >= 0) {
        const std::string &name = g->nodes()[static_cast<size_t>(info.producer)].attrs.get_string("name");
        if (nodes_of_name[name] == 1)
          out.constants.insert({g, name});
      } else if (info.index < bound_here.size() && bound_here[info.index]) {
        out.inputs.insert({g, info.index});
      }
    }
    // A transposed-GEMM conv's weight, read by the conv alone (which the
    // emitter runs as that GEMM: node_uses_gemm, as emit_conv_gemm's caller).
    for (const Node &n : g->nodes()) {
      if (n.op != "conv2d" || conv_uses_int8_gemm(*g, plan, n) || !node_uses_gemm(*g, plan, n) ||
          !conv_uses_transposed_gemm(*g, n))
        continue;
      ValueId w = n.operands[1];
      const Node &constant = g->nodes()[static_cast<size_t>(g->value_info(w).producer)];
      if (!output[w] && uses[w].size() == 1 && nodes_of_name[constant.attrs.get_string("name")] == 1) {
        out.constants.insert({g, constant.attrs.get_string("name")});
        out.conv_transposed.insert({g, constant.attrs.get_string("name")});
      }
    }
    // An integer conv's weight, read by the conv alone.
    for (const Node &n : g->nodes()) {
      if (!conv_uses_int8_gemm(*g, plan, n))
        continue;
      ValueId w = n.operands[1];
      const Node &constant = g->nodes()[static_cast<size_t>(g->value_info(w).producer)];
      if (!output[w] && uses[w].size() == 1) {
        out.constants.insert({g, constant.attrs.get_string("name")});
        out.conv_int8.insert({g, constant.attrs.get_string("name")});
      }
    }
    for (size_t i = 0; i < bound_here.size() && i < g->input_ids().size(); ++i)
      if (bound_here[i] && only_gemm_b(g->input_ids()[i], false))
        out.inputs.insert({g, i});
  }
  // A call's constant argument and the callee's parameter are packed
  // together or not at all (same type, too).
  until_stable(root, graphs, [&](const Graph &g, const Node &n, size_t i, const Graph *callee, const Node *constant) {
    std::pair<const Graph *, std::string> c;
    if (constant)
      c = {&g, constant->attrs.get_string("name")};
    bool arg = constant && out.constants.count(c);
    bool param = callee && i < callee->input_ids().size() && out.inputs.count({callee, i});
    if (arg && param && g.type_of(n.operands[i]) == callee->type_of(callee->input_ids()[i]))
      return false;
    if (arg)
      out.constants.erase(c);
    if (param)
      out.inputs.erase({callee, i});
    return arg || param;
  });
  plan_narrow_panels(root, graphs, f16, out);
  return out;
}

namespace {

// Bytes [offset, offset + n) of B [K, N] (f32) in panel order (multiples of
// 4 bytes), at dst.
void write_panels(const HostTensor &b, int64_t nr, uint64_t offset, size_t n, char *dst) {
  int64_t k = b.shape()[0], cols = b.shape()[1];
  const auto *src = reinterpret_cast<const float *>(b.data());
  auto *out = reinterpret_cast<float *>(dst);
  int64_t e0 = static_cast<int64_t>(offset / 4), end = static_cast<int64_t>((offset + n) / 4);
  // Float e of the packed layout: panel p, its row r, lane c.
  int64_t c = e0 % nr, p = e0 / nr / k, r = e0 / nr % k;
  for (int64_t e = e0; e < end;) {
    int64_t col = p * nr + c, len = std::min(nr - c, end - e), valid = std::clamp<int64_t>(cols - col, 0, len);
    if (valid > 0)
      std::memcpy(out + (e - e0), src + r * cols + col, static_cast<size_t>(valid) * sizeof(float));
    std::fill(out + (e - e0) + valid, out + (e - e0) + len, 0.0f);
    e += len;
    if ((c += len) == nr) {
      c = 0;
      if (++r == k)
        r = 0, ++p;
    }
  }
}

// Panel p of B = Wᵀ, B [K, N], from W [N, K] itself (f32): out[r][c] =
// W[p·nr + c][r], zero past N: the transpose of the panel's nr source rows
// (contiguous), blocked as Support/BulkMemory transposes.
void pack_panel_from_source(const float *w, int64_t n, int64_t k, int64_t nr, int64_t p, float *out,
                            std::vector<float> &scratch) {
  int64_t valid = std::clamp<int64_t>(n - p * nr, 0, nr);
  const auto *src = reinterpret_cast<const std::byte *>(w + p * nr * k);
  if (valid == nr) {
    transpose_matrix_rows(src, reinterpret_cast<std::byte *>(out), nr, k, sizeof(float), 0, k);
    return;
  }
  scratch.resize(static_cast<size_t>(valid * k));
  transpose_matrix_rows(src, reinterpret_cast<std::byte *>(scratch.data()), valid, k, sizeof(float), 0, k);
  for (int64_t r = 0; r < k; ++r) {
    std::copy(scratch.data() + r * valid, scratch.data() + (r + 1) * valid, out + r * nr);
    std::fill(out + r * nr + valid, out + (r + 1) * nr, 0.0f);
  }
}

// Bytes [offset, offset + n) of the packed Wᵀ (multiples of 4 bytes), at
// dst: the same bytes as write_panels of the transposed copy, which is never
// made.
void write_panels_from_source(const HostTensor &w, int64_t nr, uint64_t offset, size_t n, char *dst) {
  int64_t cols = w.shape()[0], k = w.shape()[1], panel = nr * k;
  const auto *src = reinterpret_cast<const float *>(w.data());
  auto *out = reinterpret_cast<float *>(dst);
  int64_t e0 = static_cast<int64_t>(offset / 4), end = static_cast<int64_t>((offset + n) / 4);
  std::vector<float> part, scratch; // a panel only partly in [e0, end); a last panel's valid columns
  for (int64_t p = e0 / panel; p * panel < end; ++p) {
    int64_t a = std::max(e0, p * panel), b = std::min(end, (p + 1) * panel);
    if (a == p * panel && b == (p + 1) * panel) {
      pack_panel_from_source(src, cols, k, nr, p, out + (a - e0), scratch);
      continue;
    }
    part.resize(static_cast<size_t>(panel));
    pack_panel_from_source(src, cols, k, nr, p, part.data(), scratch);
    std::copy(part.data() + (a - p * panel), part.data() + (b - p * panel), out + (a - e0));
  }
}

size_t panel_bytes(const HostTensor &b, int64_t nr) {
  int64_t k = b.shape()[0], n = b.shape()[1];
  return static_cast<size_t>((n + nr - 1) / nr * nr * k) * sizeof(float);
}

} // namespace

size_t int8_panel_bytes(int64_t k, int64_t n, int64_t nr) {
  int64_t panels = (n + nr - 1) / nr, k4 = (k + 3) / 4;
  return static_cast<size_t>(panels * k4 * nr * 4 + panels * nr * 4);
}

namespace {

// Bytes [offset, offset + size) of B [K, N] (u8/i8) in the integer GEMM's
// layout (GemmPanels.h), at dst.
void write_int8_panels(const HostTensor &b, int64_t nr, uint64_t offset, size_t size, char *dst) {
  int64_t k = b.shape()[0], n = b.shape()[1], panels = (n + nr - 1) / nr, k4 = (k + 3) / 4;
  int64_t body = panels * k4 * nr * 4, panel = k4 * nr * 4;
  const auto *src = reinterpret_cast<const uint8_t *>(b.data());
  auto *out = reinterpret_cast<uint8_t *>(dst);
  int64_t e0 = static_cast<int64_t>(offset), end = e0 + static_cast<int64_t>(size);
  for (int64_t e = e0; e < std::min(end, body); ++e) {
    int64_t p = e / panel, rem = e % panel, r = rem / (nr * 4) * 4 + rem % 4, col = p * nr + rem / 4 % nr;
    out[e - e0] = r < k && col < n ? src[r * n + col] : 0;
  }
  if (end <= body)
    return;
  std::vector<int32_t> sums(static_cast<size_t>(panels * nr), 0);
  for (int64_t r = 0; r < k; ++r)
    for (int64_t col = 0; col < n; ++col) {
      uint8_t v = src[r * n + col];
      sums[static_cast<size_t>(col)] += b.dtype() == DType::i8 ? static_cast<int8_t>(v) : v;
    }
  const auto *footer = reinterpret_cast<const uint8_t *>(sums.data());
  for (int64_t e = std::max(e0, body); e < end; ++e)
    out[e - e0] = footer[e - body];
}

} // namespace

std::vector<float> pack_conv_transposed_weight(const HostTensor &w, int64_t nr) {
  int64_t o = w.shape()[0], k = w.numel() / std::max<int64_t>(o, 1);
  std::vector<float> out(static_cast<size_t>((o + nr - 1) / nr * nr * k));
  write_panels_from_source(w.reshaped({o, k}), nr, 0, out.size() * sizeof(float), reinterpret_cast<char *>(out.data()));
  return out;
}

std::vector<uint8_t> pack_int8_panels(const HostTensor &b, int64_t nr) {
  std::vector<uint8_t> out(int8_panel_bytes(b.shape()[0], b.shape()[1], nr));
  write_int8_panels(b, nr, 0, out.size(), reinterpret_cast<char *>(out.data()));
  return out;
}

std::vector<float> pack_gemm_panels(const HostTensor &b, int64_t nr) {
  std::vector<float> out(panel_bytes(b, nr) / sizeof(float));
  write_panels(b, nr, 0, out.size() * sizeof(float), reinterpret_cast<char *>(out.data()));
  return out;
}

size_t conv_int8_weight_tail(int64_t o, int64_t k) {
  return static_cast<size_t>((o + kConvInt8RowGroup - 1) / kConvInt8RowGroup * kConvInt8RowGroup * ((k + 3) / 4) * 4);
}

size_t conv_int8_weight_bytes(int64_t o, int64_t k) { return conv_int8_weight_tail(o, k) + static_cast<size_t>(8 * o); }

// The offset z that brings the integers row[0..k) into [-128, 127].
static int32_t conv_int8_row_offset(const float *row, int64_t k) {
  auto [lo, hi] = std::minmax_element(row, row + k);
  int32_t l = static_cast<int32_t>(*lo), h = static_cast<int32_t>(*hi);
  return h > 127 ? h - 127 : l < -128 ? l + 128 : 0;
}

bool conv_int8_weight_offsets(const HostTensor &w) {
  int64_t O = w.shape()[0], K = w.numel() / O;
  for (int64_t o = 0; o < O; ++o)
    if (conv_int8_row_offset(w.data_as<float>() + o * K, K) != 0)
      return true;
  return false;
}

std::vector<uint8_t> pack_conv_int8_weight(const HostTensor &w) {
  int64_t O = w.shape()[0], K = w.numel() / O;
  std::vector<uint8_t> out(conv_int8_weight_bytes(O, K), 0);
  const float *v = w.data_as<float>();
  std::vector<int32_t> sums(static_cast<size_t>(O)), offsets(static_cast<size_t>(O));
  const int64_t G = kConvInt8RowGroup, K4 = (K + 3) / 4;
  for (int64_t o = 0; o < O; ++o) {
    const float *row = v + o * K;
    int32_t z = conv_int8_row_offset(row, K), s = 0;
    for (int64_t k = 0; k < K; ++k) {
      int32_t e = static_cast<int32_t>(row[k]);
      s += e;
      size_t at = static_cast<size_t>(((o / G * K4 + k / 4) * G + o % G) * 4 + k % 4);
      out[at] = static_cast<uint8_t>(static_cast<int8_t>(e - z));
    }
    sums[static_cast<size_t>(o)] = s, offsets[static_cast<size_t>(o)] = z;
  }
  size_t tail = conv_int8_weight_tail(O, K);
  std::memcpy(out.data() + tail, sums.data(), sums.size() * 4);
  std::memcpy(out.data() + tail + sums.size() * 4, offsets.data(), offsets.size() * 4);
  return out;
}

namespace {

// The bytes of 16-bit panels (`dtype`) from the generator of the same f32
// panels: element e's 2 bytes from f32 element e's 4.
ByteChunks::Generator narrowed(ByteChunks::Generator f32, DType dtype) {
  return [f32, dtype](uint64_t offset, size_t n, char *dst) {
    uint64_t e0 = offset / 2, e1 = (offset + n + 1) / 2;
    std::vector<float> wide(static_cast<size_t>(e1 - e0));
    f32(e0 * 4, wide.size() * 4, reinterpret_cast<char *>(wide.data()));
    std::vector<uint16_t> bits = narrow_panels(wide, dtype);
    std::memcpy(dst, reinterpret_cast<const char *>(bits.data()) + (offset - e0 * 2), n);
  };
}

} // namespace

ConstantRewrite packed_weights_rewrite(const PackedWeights &packed) {
  return [&packed](const Graph &g, const std::string &name) -> std::pair<size_t, ByteChunks::Generator> {
    if (!packed.packed_constant(g, name))
      return {0, nullptr};
    int64_t nr = packed.nr;
    if (packed.conv_int8.count({&g, name})) {
      auto bytes = std::make_shared<std::vector<uint8_t>>(pack_conv_int8_weight(g.constant(name)));
      return {bytes->size(), [bytes](uint64_t offset, size_t n, char *dst) {
                std::memcpy(dst, bytes->data() + offset, n);
              }};
    }
    DType narrow = packed.constant_dtype(g, name);
    if (packed.conv_transposed.count({&g, name})) { // W [O, ...] as the [N, K] source of Wᵀ
      const HostTensor &t = g.constant_types().at(name);
      int64_t o = t.shape()[0], k = t.numel() / std::max<int64_t>(o, 1);
      HostTensor w = g.constant(name).reshaped({o, k});
      size_t size = static_cast<size_t>((o + nr - 1) / nr * nr * k) * sizeof(float);
      if (narrow != DType::f32)
        return {size / 2, narrowed([w, nr](uint64_t offset, size_t n, char *dst) {
                  write_panels_from_source(w, nr, offset, n, dst);
                }, narrow)};
      return {size, [w, nr](uint64_t offset, size_t n, char *dst) { write_panels_from_source(w, nr, offset, n, dst); }};
    }
    if (const HostTensor &t = g.constant_types().at(name); is_int8(t.dtype())) {
      HostTensor b = g.constant(name);
      return {int8_panel_bytes(t.shape()[0], t.shape()[1], nr),
              [b, nr](uint64_t offset, size_t n, char *dst) { write_int8_panels(b, nr, offset, n, dst); }};
    }
    // A pre-transposed weight whose transposed bytes were never made
    // (Graph::add_transposed_constant): packed from the original [N, K].
    if (const HostTensor *source = g.transposed_source(name); source && source->rank() == 2) {
      HostTensor w = *source;
      size_t size = panel_bytes(g.constant_types().at(name), nr);
      ByteChunks::Generator f32 = [w, nr, size](uint64_t offset, size_t n, char *dst) {
        write_panels_from_source(w, nr, offset, n, dst);
        if (offset + n == size) // (a mapped weights file's pages: not needed resident)
          release_file_pages(w.data(), w.nbytes());
      };
      if (narrow != DType::f32)
        return {size / 2, narrowed(f32, narrow)};
      return {size, f32};
    }
    // Made while the blob is written (a block at a time), from the constant,
    // which the generator keeps alive.
    HostTensor b = g.constant(name);
    ByteChunks::Generator f32 = [b, nr](uint64_t offset, size_t n, char *dst) { write_panels(b, nr, offset, n, dst); };
    if (narrow != DType::f32)
      return {panel_bytes(b, nr) / 2, narrowed(f32, narrow)};
    return {panel_bytes(b, nr), f32};
  };
}

} // namespace maxc::codegen

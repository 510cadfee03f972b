// The model ABI shared by every backend: interface, C names (through the one
// mangler, Support/CNames.h),
// status table, C types, and the weights blob layout.
#include "maxc/Codegen/ModelAbi.h"

#include "maxc/Codegen/WeightsSection.h"
#include "maxc/IR/GraphSymbols.h"
#include "maxc/Ops/CallBinding.h"
#include "maxc/Ops/OpRegistry.h"
#include "maxc/Support/CNames.h"
#include "maxc/Support/Error.h"

#include <algorithm>


namespace maxc {

const std::vector<StatusInfo> &status_table() {
  static const std::vector<StatusInfo> table = {
      {RunStatus::ok, "OK", "ok", "ok", true, true},
      {RunStatus::null_pointer, "ERROR_NULL_POINTER", "null pointer", "a buffer pointer is null", true, true},
      {RunStatus::invalid_dim, "ERROR_INVALID_DIM", "invalid dim", "a dim value is negative or too large", true,
       true},
      {RunStatus::out_of_memory, "ERROR_OUT_OF_MEMORY", "out of memory", "out of memory for the workspace", true,
       true},
      {RunStatus::weights_not_set, "ERROR_WEIGHTS_NOT_SET", "weights not set",
       "weights are not set (call the model's _set_weights first)", true, false},
      {RunStatus::weights_mismatch, "ERROR_WEIGHTS_MISMATCH", "weights mismatch",
       "the weights do not match this build (size, alignment or hash)", true, false},
      {RunStatus::no_device, "ERROR_NO_DEVICE", "no device", "no GPU device is visible to the HIP runtime", false,
       true},
      {RunStatus::no_matching_arch, "ERROR_NO_MATCHING_ARCH", "no matching arch",
       "the GPU's architecture has no code object in this build (recompile with --gpu ARCH)", false, true},
      {RunStatus::gpu_error, "ERROR_GPU", "gpu error", "a HIP call failed (%s_hip_error() gives its code)", false,
       true},
      {RunStatus::unsupported_cpu, "ERROR_UNSUPPORTED_CPU", "unsupported cpu",
       "this CPU lacks instructions the code was compiled for", true, false},
      {RunStatus::state_full, "ERROR_STATE_FULL", "state full",
       "the state has no room for the rows this run appends (length + advance > capacity)", true, true, true},
      {RunStatus::collective, "ERROR_COLLECTIVE", "collective failed",
       "a collective could not run: no communicator set (%s_set_communicator), one of another world size, or it "
       "returned an error",
       true, false, false, true},
  };
  return table;
}

std::vector<StatusInfo> status_codes(bool gpu, bool state, bool collectives) {
  std::vector<StatusInfo> out;
  for (const StatusInfo &s : status_table())
    if ((gpu ? s.gpu : s.cpu) && (state || !s.state_only) && (collectives || !s.collective_only))
      out.push_back(s);
  return out;
}

const std::vector<std::string> &state_entry_point_suffixes() {
  static const std::vector<std::string> suffixes = {"_state_create", "_state_destroy",  "_state_reset",
                                                    "_state_length", "_state_capacity", "_step"};
  return suffixes;
}

const char *c_type_name(DType d) { return dtype_info(d).c_type.data(); }

bool reports_defined_symbols(const ModelInterface &m) {
  for (const ModelInterface::Tensor &t : m.outputs)
    for (const Dim &d : t.type.shape)
      for (const std::string &s : d.symbols())
        if (std::find(m.defined_symbols.begin(), m.defined_symbols.end(), s) != m.defined_symbols.end())
          return true;
  return false;
}

ModelInterface describe_interface(const Graph &graph, const std::string &name) {
  ModelInterface m;
  m.name = name;
  CNameMangler names;
  for (size_t i = 0; i < graph.input_ids().size(); ++i) {
    ValueId id = graph.input_ids()[i];
    const std::string &source = graph.value_info(id).name;
    m.inputs.push_back({names.mangle(source, "input" + std::to_string(i)), graph.type_of(id), source});
  }
  for (size_t i = 0; i < graph.output_ids().size(); ++i) {
    std::string source = i < graph.output_names().size() ? graph.output_names()[i] : "";
    m.outputs.push_back({names.mangle(source, "output" + std::to_string(i)), graph.type_of(graph.output_ids()[i]),
                         source});
  }
  const SymbolTable &table = graph.symbol_table();
  const std::vector<std::string> per_call = call_bound_symbols(graph);
  for (const std::string &s : dim_symbols(graph)) {
    const SymbolInfo *info = table.find(s);
    if (std::binary_search(per_call.begin(), per_call.end(), s) && !table.contains(s)) {
      m.call_symbols.push_back(s);
      continue;
    }
    (info && info->origin == SymbolOrigin::NodeResult ? m.defined_symbols : m.symbols).push_back(s);
    if (info && info->origin == SymbolOrigin::NodeResult)
      m.defined_bounds.push_back(info->upper_bound.value_or(-1));
  }
  // An output whose size names a symbol defined at run time (a Reshape to
  // a shape read from an input) is sized by the symbol's bound; the run
  // writes the symbol's value into the caller's dims array, after the C
  // dims (reports_defined_symbols).
  for (size_t i = 0; i < graph.output_ids().size(); ++i) {
    Shape bound;
    for (const Dim &d : graph.type_of(graph.output_ids()[i]).shape)
      bound.push_back(bound_node_symbols(d, table, "output " + std::to_string(i) + " (" + m.outputs[i].source_name + ")"));
    if (bound != m.outputs[i].type.shape)
      m.outputs[i].bound = std::move(bound);
  }
  if (!table.model_state()) { // a buffer write needs buffers the caller knows are state
    auto writes = [](const Graph &g) {
      return std::any_of(g.nodes().begin(), g.nodes().end(), [](const Node &n) { return writes_buffer(n); });
    };
    bool any = writes(graph);
    for (const auto &[sname, sub] : graph.subgraphs())
      any = any || writes(*sub);
    if (any)
      throw Error(ErrorCode::InvalidGraph, "the model writes a state buffer (buffer_append) but declares no model "
                                           "state: its buffers must be inputs named in the root's ModelState");
  }
  if (const std::optional<ModelState> &state = table.model_state()) {
    m.state = *state;
    for (const std::string &buffer : state->buffers) {
      auto it = std::find_if(m.inputs.begin(), m.inputs.end(),
                             [&](const ModelInterface::Tensor &t) { return t.source_name == buffer; });
      if (it == m.inputs.end())
        throw Error(ErrorCode::InvalidGraph, "state buffer '" + buffer + "' is no input of the model");
      const Shape &shape = it->type.shape;
      Dim row_bytes(static_cast<int64_t>(dtype_size(it->type.dtype)));
      for (size_t d = 1; d < shape.size(); ++d)
        row_bytes = row_bytes * shape[d];
      if (shape.empty() || shape[0] != Dim(state->capacity) || !row_bytes.is_static())
        throw Error(ErrorCode::InvalidGraph, "state buffer '" + buffer + "' is " + it->type.to_string() +
                                                 ": expected [" + state->capacity + ", static dims...]");
      it->state = true;
      m.state_row_bytes.push_back(row_bytes.value());
    }
    auto is_param = [&](const std::string &s) { return std::find(m.symbols.begin(), m.symbols.end(), s) != m.symbols.end(); };
    if (!is_param(state->length) || !is_param(state->capacity))
      throw Error(ErrorCode::InvalidGraph, "the state's length '" + state->length + "' and capacity '" +
                                               state->capacity + "' must be dims of the model");
    for (const std::string &s : state->advance.symbols())
      if (!is_param(s))
        throw Error(ErrorCode::InvalidGraph, "the state's advance " + state->advance.to_string() + " names '" + s +
                                                 "', which is no dim of the model");
  }
  for (size_t i = 0; i < m.symbols.size(); ++i)
    m.symbol_params.push_back(names.mangle(m.symbols[i], "dim" + std::to_string(i)));
  for (const auto &[cname, data] : graph.constant_types())
    m.constant_bytes += data.nbytes();
  for (const auto &[sname, sub] : graph.subgraphs())
    for (const auto &[cname, data] : sub->constant_types())
      m.constant_bytes += data.nbytes();
  m.subgraph_definitions = graph.subgraphs().size();
  for (const Node &n : graph.nodes())
    m.subgraph_calls += is_call(n);
  auto note_world = [&](const Graph &g) {
    for (const Node &n : g.nodes())
      if (op_traits(n.op).has(OpTrait::communicates))
        m.world = n.attrs.get_int("world");
  };
  note_world(graph);
  for (const auto &[sname, sub] : graph.subgraphs())
    note_world(*sub);
  return m;
}

namespace codegen {

std::string layout_constants(const Graph &lowered, std::map<std::pair<const Graph *, std::string>, uint64_t> &offsets) {
  return weights_blob(lowered, offsets).str();
}

} // namespace codegen

} // namespace maxc

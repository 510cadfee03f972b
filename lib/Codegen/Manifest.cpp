#include "maxc/Codegen/Manifest.h"

#include "maxc/Support/Version.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>

namespace maxc {

using json = nlohmann::ordered_json;

std::string base_name(const std::string &path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

static json tensor_json(const ModelInterface::Tensor &t) {
  json shape = json::array();
  for (const Dim &d : t.type.shape) {
    if (d.is_static())
      shape.push_back(d.value());
    else
      shape.push_back(d.to_string());
  }
  json out{{"name", t.name}, {"dtype", std::string(dtype_name(t.type.dtype))}, {"shape", shape}};
  if (!t.source_name.empty() && t.source_name != t.name)
    out["model_name"] = t.source_name; // the model's own name, before C mangling
  return out;
}

static json files_json(const std::vector<ManifestFile> &files) {
  json out = json::array();
  for (const ManifestFile &f : files)
    out.push_back({{"role", f.role}, {"path", f.path}, {"bytes", f.bytes}, {"sha256", f.sha256}});
  return out;
}

std::string emit_manifest(const ModelInterface &m, const ManifestInputs &info) {
  const ManifestSection &s = info.section;
  json inputs = json::array(), outputs = json::array();
  for (const auto &t : m.inputs)
    inputs.push_back(tensor_json(t));
  for (const auto &t : m.outputs)
    outputs.push_back(tensor_json(t));
  json status = json::object();
  for (const StatusInfo &row : status_codes(s.gpu_status_codes, m.state.has_value(), m.world > 0))
    status[std::to_string(static_cast<int32_t>(row.status))] = row.summary;
  json out;
  out["manifest_version"] = kManifestVersion;
  out["name"] = m.name;
  out["backend"] = s.backend;
  out["maxc_version"] = maxc_version();
  out["llvm_version"] = llvm_version();
  out["target"] = json::parse(s.target_json);
  out["link"] = s.link;
  out["interface"] = {{"inputs", inputs}, {"outputs", outputs}, {"dims", m.symbols}};
  if (m.symbol_params != m.symbols)
    out["interface"]["dim_params"] = m.symbol_params;
  out["interface"]["entry_points"] = s.entry_points;
  if (reports_defined_symbols(m)) { // outputs sized at run time: the dims the run writes after "dims"
    json run_time = json::array();
    for (size_t k = 0; k < m.defined_symbols.size(); ++k)
      run_time.push_back({{"name", m.defined_symbols[k]}, {"bound", m.defined_bounds[k]}});
    out["interface"]["run_time_dims"] = run_time;
  }
  if (m.state) {
    json buffers = json::array();
    for (size_t i = 0, k = 0; i < m.inputs.size(); ++i)
      if (m.inputs[i].state)
        buffers.push_back({{"name", m.inputs[i].name}, {"row_bytes", m.state_row_bytes[k++]}});
    out["interface"]["state"] = {{"length", m.state->length},
                                 {"capacity", m.state->capacity},
                                 {"advance", m.state->advance.to_string()},
                                 {"buffers", buffers}};
  }
  out["interface"]["status_codes"] = status;
  if (m.world > 0) // one rank's program of a tensor-parallel model (docs/tensor-parallel.md)
    out["interface"]["tensor_parallel"] = {{"world", m.world}, {"rank", m.rank}};
  out["memory"] = {{"workspace_bytes_max", info.workspace_bytes}, {"weights_bytes", m.constant_bytes},
                   {"weights_mode", m.external_weights ? "external" : "embed"}};
  if (m.external_weights) {
    char checksum[32];
    std::snprintf(checksum, sizeof checksum, "%016llx", static_cast<unsigned long long>(m.weights_blob_checksum));
    out["memory"]["weights_blob_bytes"] = m.weights_blob_bytes;
    out["memory"]["weights_blob_checksum"] = checksum;
  }
  out["subgraphs"] = {{"definitions", m.subgraph_definitions}, {"calls", m.subgraph_calls}};
  out["kernels"] = info.kernels;
  if (!s.extra_key.empty())
    out[s.extra_key] = json::parse(s.extra_json);
  if (!info.stage_ms.empty()) {
    json stages = json::object();
    for (const auto &[stage, ms] : info.stage_ms)
      stages[stage] = std::round(ms * 10) / 10;
    out["compile_time_ms"] = stages;
  }
  out["inputs"] = files_json(info.inputs);
  out["outputs"] = files_json(info.outputs);
  return out.dump(2) + "\n";
}

} // namespace maxc

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
  return json{{"name", t.name}, {"dtype", std::string(dtype_name(t.type.dtype))}, {"shape", shape}};
}

static json files_json(const std::vector<ManifestFile> &files) {
  json out = json::array();
  for (const ManifestFile &f : files)
    out.push_back({{"role", f.role}, {"path", f.path}, {"bytes", f.bytes}, {"sha256", f.sha256}});
  return out;
}

std::string emit_manifest(const CompiledModel &model, const ManifestInputs &info) {
  const ModelInterface &m = model.interface;
  json inputs = json::array(), outputs = json::array();
  for (const auto &t : m.inputs)
    inputs.push_back(tensor_json(t));
  for (const auto &t : m.outputs)
    outputs.push_back(tensor_json(t));
  json out;
  out["manifest_version"] = 1;
  out["name"] = m.name;
  out["maxc_version"] = maxc_version();
  out["llvm_version"] = llvm_version();
  out["target"] = {{"kind", "cpu"},
                   {"triple", model.target.triple},
                   {"cpu", model.target.cpu},
                   {"cpu_requested", info.options.cpu},
                   {"features", model.target.features},
                   {"opt_level", model.target.opt_level}};
  out["interface"] = {{"inputs", inputs},
                      {"outputs", outputs},
                      {"dims", m.symbols},
                      {"entry_points",
                       {m.name + "_run", m.name + "_run_packed", m.name + "_workspace_size", m.name + "_status_string",
                        m.name + "_set_parallel_for"}},
                      {"status_codes", {{"0", "ok"}, {"1", "null pointer"}, {"2", "invalid dim"}, {"3", "out of memory"}}}};
  out["memory"] = {{"workspace_bytes_max", info.workspace_bytes}, {"weights_bytes", m.constant_bytes},
                   {"weights_mode", m.external_weights ? "external" : "embed"}};
  if (m.external_weights) {
    char fnv[32];
    std::snprintf(fnv, sizeof fnv, "%016llx", static_cast<unsigned long long>(m.weights_blob_fnv1a));
    out["memory"]["weights_blob_bytes"] = m.weights_blob_bytes;
    out["memory"]["weights_blob_fnv1a"] = fnv;
    out["interface"]["entry_points"].push_back(m.name + "_set_weights");
  }
  out["subgraphs"] = {{"definitions", m.subgraph_definitions}, {"calls", m.subgraph_calls}};
  out["kernels"] = info.kernels;
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

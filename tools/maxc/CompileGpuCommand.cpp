// `maxc compile --gpu ARCH,...`: the AMD GPU artifact — a host object with
// one HSACO per architecture embedded, its C header and a manifest; on
// request the raw code objects (--emit hsaco) and AMDGPU assembly
// (--emit gpu-asm), one file per architecture.
#include "Diagnose.h"

#include "maxc/Codegen/GpuModelCompiler.h"
#include "maxc/Codegen/GpuTarget.h"
#include "maxc/Codegen/Manifest.h"
#include "maxc/Frontend/ModelLoader.h"
#include "maxc/Support/FileSystem.h"
#include "maxc/Support/Sha256.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <iostream>
#include <map>
#include <set>
#include <unistd.h>

namespace maxc::cli {

namespace {

const char *const kGpuEmitKinds[] = {"obj", "header", "manifest", "hsaco", "gpu-asm"};

std::string directory_of(const std::string &path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

} // namespace

int run_compile_gpu(const GlobalOptions &global, const CompileCommandOptions &options) {
  DiagnosticEngine diagnostics;
  diagnostics.set_warnings_as_errors(global.warnings_as_errors);
  std::set<std::string> emit(options.emit.begin(), options.emit.end());
  if (emit.empty())
    emit = {"obj", "header", "manifest"};
  for (const std::string &e : emit)
    if (std::find(std::begin(kGpuEmitKinds), std::end(kGpuEmitKinds), e) == std::end(kGpuEmitKinds))
      diagnostics.error(ErrorCode::InvalidArgument, "", "--emit",
                        "unknown artifact '" + e + "' with --gpu (expected obj, header, manifest, hsaco, gpu-asm)");
  if (options.weights_mode != "embed")
    diagnostics.error(ErrorCode::InvalidArgument, "", "--weights-mode",
                      "--gpu embeds the weights in the host object (uploaded by NAME_init); use --weights-mode embed");
  if (options.opt_level < 0 || options.opt_level > 3)
    diagnostics.error(ErrorCode::InvalidArgument, "", "-O", "optimization level must be 0 to 3");
  if (!options.name.empty() && !is_c_identifier(options.name))
    diagnostics.error(ErrorCode::InvalidArgument, "", "--name", "'" + options.name + "' is not a C identifier");
  GpuCompileOptions gpu;
  try {
    gpu.arches = resolve_gpu_arches(options.gpu);
  } catch (const Error &e) {
    diagnostics.error(e, "", "--gpu");
  }
  try {
    resolve_code_object_version(options.code_object_version);
  } catch (const Error &e) {
    diagnostics.error(e, "", "--code-object-version");
  }
  if (diagnostics.has_errors())
    return finish(global, diagnostics);

  LoadOptions load;
  load.dims = global.onnx_dims; // ONNX: --dim pins, --no-dedup
  load.dedup = !global.no_dedup;
  load.weights_path = options.weights;
  LoadedModel model = load_model(options.model, load, diagnostics);
  if (!model.graph)
    return finish(global, diagnostics);
  std::string name = options.name.empty() ? model.graph->name() : options.name;
  std::string object_path = options.output.empty() ? name + ".o" : options.output;
  std::string stem = directory_of(object_path) + name;

  gpu.name = name;
  gpu.code_object_version = options.code_object_version;
  gpu.triple = options.target;
  gpu.cpu = options.cpu;
  gpu.opt_level = options.opt_level;
  gpu.gpu_assembly = emit.count("gpu-asm") != 0;
  bool tty = !global.quiet && ::isatty(2) != 0;
  if (tty)
    std::fprintf(stderr, "\r\033[Kmaxc: generating kernels for %zu GPU architecture(s)", gpu.arches.size());
  GpuCompiledModel compiled;
  try {
    compiled = compile_gpu_model(*model.graph, gpu);
  } catch (const Error &e) {
    if (tty)
      std::fprintf(stderr, "\r\033[K");
    diagnostics.error(e, options.model, "");
    return finish(global, diagnostics);
  }
  if (tty)
    std::fprintf(stderr, "\r\033[K");
  for (const auto &k : compiled.kernels)
    spdlog::debug("compile: kernel {} ({}, {} work-items, {} LDS bytes, grid {})", k.name, k.kind, k.workgroup_size,
                  k.lds_bytes, k.grid);

  std::map<std::string, std::string> contents, paths;
  auto add = [&](const std::string &key, const std::string &path, std::string text) {
    paths[key] = path;
    contents[key] = std::move(text);
  };
  if (emit.count("obj"))
    add("obj", object_path, compiled.host_object);
  if (emit.count("header"))
    add("header", stem + ".h", compiled.header);
  if (emit.count("hsaco"))
    for (const auto &[arch, bytes] : compiled.code_objects)
      add("hsaco." + arch, stem + "." + arch + ".hsaco", bytes);
  for (const auto &[arch, text] : compiled.gpu_assembly)
    add("gpu-asm." + arch, stem + "." + arch + ".s", text);
  if (emit.count("manifest")) {
    nlohmann::ordered_json m;
    m["maxc_manifest"] = 1;
    m["name"] = name;
    m["backend"] = "amdgpu";
    m["link"] = {"-lamdhip64"};
    m["host"] = {{"triple", compiled.host.triple}, {"cpu", compiled.host.cpu}, {"opt_level", compiled.host.opt_level}};
    m["code_object_version"] = options.code_object_version;
    m["workspace_bytes_bound"] = compiled.workspace_bound;
    m["symbols"] = compiled.interface.symbols;
    auto tensors = [](const std::vector<ModelInterface::Tensor> &ts) {
      nlohmann::ordered_json out = nlohmann::ordered_json::array();
      for (const auto &t : ts) {
        std::vector<std::string> shape;
        for (const Dim &d : t.type.shape)
          shape.push_back(d.to_string());
        out.push_back({{"name", t.name}, {"dtype", std::string(dtype_name(t.type.dtype))}, {"shape", shape}});
      }
      return out;
    };
    m["inputs"] = tensors(compiled.interface.inputs);
    m["outputs"] = tensors(compiled.interface.outputs);
    m["weights_bytes"] = compiled.interface.constant_bytes;
    m["subgraphs"] = {{"definitions", compiled.interface.subgraph_definitions},
                      {"calls", compiled.interface.subgraph_calls}};
    nlohmann::ordered_json arches = nlohmann::ordered_json::array();
    for (size_t a = 0; a < compiled.code_objects.size(); ++a) {
      const auto &[arch, bytes] = compiled.code_objects[a];
      std::map<std::string, GpuKernelResources> used;
      for (const GpuKernelResources &r : compiled.resources[a])
        used[r.name] = r;
      nlohmann::ordered_json kernels = nlohmann::ordered_json::array();
      for (const auto &k : compiled.kernels) {
        nlohmann::ordered_json entry = {{"name", k.name}, {"kind", k.kind}, {"workgroup_size", k.workgroup_size},
                                        {"grid", k.grid}, {"lds_bytes", k.lds_bytes}};
        if (auto it = used.find(k.name); it != used.end())
          entry.update({{"sgpr_count", it->second.sgpr_count}, {"vgpr_count", it->second.vgpr_count},
                        {"scratch_bytes", it->second.private_segment_bytes}});
        kernels.push_back(entry);
      }
      arches.push_back({{"arch", arch}, {"hsaco_bytes", bytes.size()}, {"hsaco_sha256", sha256_hex(bytes)},
                        {"kernels", kernels}});
    }
    m["gpu"] = arches;
    nlohmann::ordered_json outputs = nlohmann::ordered_json::array();
    for (const auto &[kind, text] : contents)
      outputs.push_back({{"kind", kind}, {"file", base_name(paths[kind])}, {"sha256", sha256_hex(text)}, {"bytes", text.size()}});
    m["outputs"] = outputs;
    nlohmann::ordered_json inputs = nlohmann::ordered_json::array();
    for (size_t i = 0; i < model.files_read.size(); ++i) {
      std::string bytes;
      try {
        bytes = read_file(model.files_read[i]);
      } catch (const Error &) {
      }
      inputs.push_back({{"kind", i == 0 ? "model" : "weights"}, {"file", base_name(model.files_read[i])},
                        {"sha256", sha256_hex(bytes)}, {"bytes", bytes.size()}});
    }
    m["input_files"] = inputs;
    add("manifest", stem + ".manifest.json", m.dump(2) + "\n");
  }
  if (options.depfile || !options.depfile_path.empty()) {
    std::string dep = object_path + ":";
    for (const std::string &f : model.files_read)
      dep += " \\\n  " + f;
    add("depfile", options.depfile_path.empty() ? object_path + ".d" : options.depfile_path, dep + "\n");
  }
  for (const auto &[kind, text] : contents) {
    try {
      write_file_atomically(paths[kind], text);
    } catch (const Error &e) {
      diagnostics.error(e, paths[kind], "");
    }
  }
  if (diagnostics.has_errors())
    for (const auto &[kind, text] : contents)
      ::unlink(paths[kind].c_str());
  if (!global.quiet && !diagnostics.has_errors() && global.diagnostics == DiagnosticsFormat::text) {
    std::cerr << "maxc: wrote " << object_path << " (HIP host " << compiled.host.triple << "; GPU";
    for (const auto &[arch, bytes] : compiled.code_objects)
      std::cerr << " " << arch;
    std::cerr << ")\n";
  }
  return finish(global, diagnostics);
}

} // namespace maxc::cli

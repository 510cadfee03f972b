// maxc inspect FILE: what a maxc artifact contains and how to call it.
//   NAME.manifest.json  the manifest: target, interface, sizes, files
//   NAME.h              the generated header: tensors, dims, prototypes
//   NAME.o              the object (ELF, through LLVM's Object library):
//                       exported entry points, target, section sizes
// Anything else is an input error (exit 1) saying what was expected.
#include "Diagnose.h"

#include "maxc/Codegen/HarnessEmitter.h"
#include "maxc/Codegen/Manifest.h"
#include "maxc/Support/FileSystem.h"
#include "maxc/Support/Sha256.h"

#include <llvm/BinaryFormat/Magic.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/TargetParser/Triple.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sys/stat.h>

namespace maxc::cli {

using json = nlohmann::ordered_json;

namespace {

const char *const kEntrySuffixes[] = {"_init",          "_run",          "_run_packed",       "_workspace_size",
                                      "_status_string", "_set_parallel_for", "_set_num_threads", "_set_weights", "_hip_error",
                                      "_cuda_error",    "_destroy",
                                      // model state (NAME_state_create...; docs/ONNX.md "Model state")
                                      "_state_create",  "_state_destroy", "_state_reset",    "_state_length",
                                      "_state_capacity", "_step"};

std::string human_bytes(uint64_t bytes) {
  char buf[64];
  if (bytes >= (1ull << 20))
    std::snprintf(buf, sizeof buf, "%llu bytes (%.2f MiB)", static_cast<unsigned long long>(bytes),
                  bytes / 1048576.0);
  else if (bytes >= 1024)
    std::snprintf(buf, sizeof buf, "%llu bytes (%.1f KiB)", static_cast<unsigned long long>(bytes), bytes / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  return buf;
}

std::string pad(const std::string &s, size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

json tensor_json(const ModelInterface::Tensor &t) {
  json shape = json::array();
  for (const Dim &d : t.type.shape)
    if (d.is_static())
      shape.push_back(d.value());
    else
      shape.push_back(d.to_string());
  return json{{"name", t.name}, {"dtype", std::string(dtype_name(t.type.dtype))}, {"shape", shape},
              {"type", t.type.to_string()}};
}

// The parts every kind of artifact reports the same way.
json interface_json(const ModelInterface &m) {
  json inputs = json::array(), outputs = json::array();
  for (const auto &t : m.inputs)
    inputs.push_back(tensor_json(t));
  for (const auto &t : m.outputs)
    outputs.push_back(tensor_json(t));
  return json{{"inputs", inputs}, {"outputs", outputs}, {"dims", m.symbols}};
}

void print_tensors(const char *title, const std::vector<ModelInterface::Tensor> &ts) {
  std::cout << "  " << title << ":\n";
  if (ts.empty())
    std::cout << "    (none)\n";
  size_t width = 0;
  for (const auto &t : ts)
    width = std::max(width, t.name.size());
  for (const auto &t : ts)
    std::cout << "    " << pad(t.name, width + 2) << t.type.to_string() << "  (" << c_type_name(t.type.dtype)
              << " *)\n";
}

// `cuda`: a CUDA artifact (link -lcuda), else HIP when `gpu`.
void print_call(const ModelInterface &m, bool gpu, bool cuda = false) {
  if (gpu)
    std::cout << "  call:\n    int32_t " << m.name << "_init(" << m.name << "_context **ctx);\n    "
              << c_run_prototype(m, true) << ";\n";
  else
    std::cout << "  call:\n    " << c_run_prototype(m) << ";\n";
  std::cout << "    (a NULL workspace makes the run allocate its own; " << m.name << "_workspace_size(";
  for (size_t i = 0; i < m.symbols.size(); ++i)
    std::cout << (i ? ", " : "") << m.symbols[i];
  std::cout << ") bytes avoid that)\n";
  std::cout << "  link:      cc app.c " << m.name << ".o " << (cuda ? "-lcuda" : gpu ? "-lamdhip64" : "-lm") << "   (#include \""
            << m.name << ".h\")\n";
}

// ---------------------------------------------------------------------------
// Manifests

// Field access with diagnostics: each getter reports a missing or ill-typed
// field at its JSON pointer.
struct ManifestReader {
  const std::string &file;
  DiagnosticEngine &diagnostics;
  bool ok = true;

  const json *get(const json &parent, const std::string &pointer, const char *key, json::value_t kind,
                  const char *what, bool required = true) {
    if (!parent.is_object())
      return nullptr;
    auto it = parent.find(key);
    std::string where = pointer + "/" + key;
    if (it == parent.end()) {
      if (required)
        fail(where, std::string("missing field '") + key + "' (" + what + ")");
      return nullptr;
    }
    bool good = it->type() == kind || (kind == json::value_t::number_unsigned && it->is_number_integer() &&
                                       it->get<int64_t>() >= 0);
    if (!good) {
      fail(where, std::string("'") + key + "' should be " + what);
      return nullptr;
    }
    return &*it;
  }

  void fail(const std::string &pointer, const std::string &message) {
    diagnostics.error(ErrorCode::ModelSchema, file, pointer, message);
    ok = false;
  }

  std::vector<ModelInterface::Tensor> tensors(const json &list, const std::string &pointer) {
    std::vector<ModelInterface::Tensor> out;
    for (size_t i = 0; i < list.size(); ++i) {
      std::string at = pointer + "/" + std::to_string(i);
      const json &t = list[i];
      if (!t.is_object()) {
        fail(at, "a tensor should be an object with name, dtype and shape");
        continue;
      }
      const json *name = get(t, at, "name", json::value_t::string, "a string");
      const json *dtype = get(t, at, "dtype", json::value_t::string, "a dtype name");
      const json *shape = get(t, at, "shape", json::value_t::array, "an array of dims");
      if (!name || !dtype || !shape)
        continue;
      std::optional<DType> d = parse_dtype(dtype->get<std::string>());
      if (!d) {
        fail(at + "/dtype", "unknown dtype '" + dtype->get<std::string>() + "'");
        continue;
      }
      Shape dims;
      bool good = true;
      for (size_t k = 0; k < shape->size(); ++k) {
        const json &dim = (*shape)[k];
        try {
          if (dim.is_number_integer())
            dims.push_back(Dim(dim.get<int64_t>()));
          else if (dim.is_string())
            dims.push_back(Dim::parse(dim.get<std::string>()));
          else
            throw Error(ErrorCode::ModelSchema, "a dim should be an integer or a symbolic expression");
        } catch (const Error &e) {
          fail(at + "/shape/" + std::to_string(k), e.message());
          good = false;
        }
      }
      if (good)
        out.push_back({name->get<std::string>(), TensorType(*d, dims), {}});
    }
    return out;
  }
};

bool is_cuda_manifest(const json &doc) { return doc.value("backend", std::string("cpu")) == "cuda"; }
bool is_gpu_manifest(const json &doc) {
  return doc.value("backend", std::string("cpu")) == "amdgpu" || is_cuda_manifest(doc);
}

std::string target_text(const json &doc) {
  const json &t = doc.value("target", json::object());
  std::string out;
  if (is_gpu_manifest(doc) && t.contains("arches") && t["arches"].is_array()) {
    out = "AMD GPU";
    for (const json &a : t["arches"])
      if (a.is_string())
        out += " " + a.get<std::string>();
    out += " (code object v" + std::to_string(t.value("code_object_version", 0)) + "); host ";
  }
  out += t.value("triple", std::string("?")) + ", cpu " + t.value("cpu", std::string("?"));
  std::string requested = t.value("cpu_requested", std::string());
  if (!requested.empty() && requested != t.value("cpu", std::string()))
    out += " (requested " + requested + ")";
  if (t.contains("opt_level") && t["opt_level"].is_number_integer())
    out += ", -O" + std::to_string(t["opt_level"].get<int>());
  return out;
}

int inspect_manifest(const GlobalOptions &global, const InspectOptions &options, const std::string &text,
                     DiagnosticEngine &diagnostics) {
  json doc;
  ModelInterface m;
  if (!parse_manifest(text, options.file, doc, m, diagnostics))
    return finish(global, diagnostics);
  const json memory = doc.value("memory", json::object());
  const json subgraphs = doc.value("subgraphs", json::object());
  const json interface = doc.value("interface", json::object());
  std::vector<std::string> entry_points = interface.value("entry_points", std::vector<std::string>{});
  if (options.json) {
    json out{{"file", options.file}, {"kind", "manifest"}, {"name", m.name},
             {"backend", doc.value("backend", std::string("cpu"))}};
    out["maxc_version"] = doc.value("maxc_version", std::string());
    out["llvm_version"] = doc.value("llvm_version", std::string());
    out["target"] = doc.value("target", json::object());
    json parts = interface_json(m);
    for (auto &[k, v] : parts.items())
      out[k] = v;
    out["entry_points"] = entry_points;
    out["run_prototype"] = c_run_prototype(m, is_gpu_manifest(doc));
    out["weights_bytes"] = m.constant_bytes;
    if (doc.contains("gpu"))
      out["gpu"] = doc["gpu"];
    out["workspace_bytes_max"] = memory.value("workspace_bytes_max", std::string());
    out["subgraphs"] = subgraphs;
    out["kernels"] = doc.value("kernels", json::array());
    out["files_read"] = doc.value("inputs", json::array());
    out["files_written"] = doc.value("outputs", json::array());
    std::cout << out.dump(2) << "\n";
    return kSuccess;
  }
  std::cout << options.file << ": maxc manifest (version " << doc["manifest_version"].get<int64_t>()
            << ") of model '" << m.name << "'\n";
  std::cout << "  built by:  maxc " << doc.value("maxc_version", std::string("?")) << ", LLVM "
            << doc.value("llvm_version", std::string("?")) << "\n";
  std::cout << "  target:    " << target_text(doc) << "\n";
  print_tensors("inputs", m.inputs);
  print_tensors("outputs", m.outputs);
  std::cout << "  dims:      ";
  for (const std::string &s : m.symbols)
    std::cout << s << " ";
  std::cout << (m.symbols.empty() ? "none (every shape is static)\n" : "(int64_t arguments, after the outputs)\n");
  std::cout << "  entry points:";
  for (const std::string &e : entry_points)
    std::cout << " " << e;
  std::cout << "\n";
  print_call(m, is_gpu_manifest(doc), is_cuda_manifest(doc));
  if (is_gpu_manifest(doc) && doc.contains("gpu") && doc["gpu"].is_array())
    for (const json &g : doc["gpu"])
      if (g.is_object())
        std::cout << "  code object: " << g.value("arch", std::string("?")) << ", "
                  << g.value(is_cuda_manifest(doc) ? "ptx_bytes" : "hsaco_bytes", 0)
                  << " bytes, " << (g.contains("kernels") && g["kernels"].is_array() ? g["kernels"].size() : 0)
                  << " kernels\n";
  std::string mode = memory.value("weights_mode", std::string("embed"));
  std::cout << "  weights:   " << human_bytes(m.constant_bytes) << ", "
            << (mode == "embed" ? std::string("embedded in the object") : "weights mode " + mode) << "\n";
  std::cout << "  workspace: at most " << memory.value("workspace_bytes_max", std::string("?")) << " bytes\n";
  std::cout << "  subgraphs: " << subgraphs.value("definitions", 0) << " definitions, " << subgraphs.value("calls", 0)
            << " calls\n";
  std::vector<std::string> kernels;
  if (doc.contains("kernels") && doc["kernels"].is_array())
    for (const json &k : doc["kernels"])
      if (k.is_string())
        kernels.push_back(k.get<std::string>());
  std::cout << "  kernels:  ";
  for (size_t i = 0; i < kernels.size(); ++i)
    std::cout << (i ? "; " : " ") << kernels[i];
  std::cout << "\n";
  for (const char *section : {"inputs", "outputs"}) {
    if (!doc.contains(section) || !doc[section].is_array())
      continue;
    std::cout << "  files " << (std::string(section) == "inputs" ? "read" : "written") << ":\n";
    for (const json &f : doc[section]) {
      if (!f.is_object())
        continue;
      std::string sha = f.value("sha256", std::string());
      std::cout << "    " << pad(f.value("role", std::string("?")), 14) << pad(f.value("path", std::string("?")), 20)
                << pad(std::to_string(f.value("bytes", uint64_t{0})) + " bytes", 16) << "sha256 "
                << sha.substr(0, 16) << (sha.size() > 16 ? "…" : "") << "\n";
    }
  }
  return kSuccess;
}

// ---------------------------------------------------------------------------
// Headers

bool is_maxc_header(const std::string &text) {
  return text.rfind("/* ", 0) == 0 && text.find(": generated by maxc ") != std::string::npos &&
         text.find("_run(") != std::string::npos;
}

int inspect_header(const GlobalOptions &global, const InspectOptions &options, const std::string &text,
                   DiagnosticEngine &diagnostics) {
  static const std::regex first_line(R"(^/\* (\S+)\.h: generated by maxc (\S+)\. Do not edit\. \*/)");
  static const std::regex tensor_line(R"(^ \*   ([A-Za-z_][A-Za-z0-9_]*): (\S+)  \()");
  static const std::regex dims_line(R"(^ \* Symbolic dims, passed at run time:(.*)$)");
  static const std::regex define_line(R"(^#define ([A-Za-z0-9_]+) (.*)$)");
  static const std::regex workspace_comment(R"(^/\* Workspace bytes, at most: (\S+) \(see)");
  ModelInterface m;
  std::string version;
  std::smatch match;
  std::vector<std::string> lines;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos)
      end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  if (!lines.empty() && std::regex_search(lines[0], match, first_line)) {
    m.name = match[1];
    version = match[2];
  }
  enum { none, inputs, outputs } section = none;
  std::map<std::string, std::string> defines;
  std::vector<std::string> prototypes;
  std::string workspace, abi_hash;
  for (const std::string &line : lines) {
    if (line == " * Inputs:") {
      section = inputs;
      continue;
    }
    if (line == " * Outputs:") {
      section = outputs;
      continue;
    }
    if (section != none && std::regex_search(line, match, tensor_line)) {
      try {
        ModelInterface::Tensor t{match[1], TensorType::parse(match[2]), {}};
        (section == inputs ? m.inputs : m.outputs).push_back(t);
      } catch (const Error &e) {
        diagnostics.error(ErrorCode::InvalidArgument, options.file, "",
                          "unreadable tensor line '" + line + "': " + e.message());
      }
      continue;
    }
    section = none;
    if (std::regex_search(line, match, dims_line)) {
      std::string rest = match[1];
      for (size_t i = 0; i < rest.size();) {
        size_t j = rest.find(' ', i);
        if (j == std::string::npos)
          j = rest.size();
        if (j > i)
          m.symbols.push_back(rest.substr(i, j - i));
        i = j + 1;
      }
    } else if (std::regex_search(line, match, define_line)) {
      defines[match[1]] = match[2];
    } else if (std::regex_search(line, match, workspace_comment)) {
      workspace = match[1];
    } else if (!m.name.empty() && !line.empty()) {
      for (const char *suffix : kEntrySuffixes) {
        std::string fn = m.name + suffix + "(";
        auto at = line.find(fn);
        bool declaration = line[0] != ' ' && line[0] != '*' && line[0] != '/' && line[0] != '#';
        if (declaration && at != std::string::npos && line.find(' ') < at && line.back() == ';')
          prototypes.push_back(line.substr(0, line.size() - 1));
      }
    }
  }
  if (m.name.empty() || prototypes.empty()) {
    diagnostics.error(ErrorCode::InvalidArgument, options.file, "",
                      "not a header generated by maxc (no '/* NAME.h: generated by maxc' line or no NAME_run "
                      "prototype)");
    return finish(global, diagnostics);
  }
  if (diagnostics.has_errors())
    return finish(global, diagnostics);
  bool gpu = text.find("typedef struct " + m.name + "_context ") != std::string::npos;
  std::string upper;
  for (char c : m.name)
    upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  auto define = [&](const std::string &suffix) {
    auto it = defines.find(upper + "_" + suffix);
    return it == defines.end() ? std::string() : it->second;
  };
  abi_hash = define("ABI_HASH");
  std::string constant_bytes = define("CONSTANT_BYTES");
  if (workspace.empty())
    workspace = define("WORKSPACE_BYTES_MAX");
  auto strip_ull = [](std::string s) {
    if (s.size() > 3 && s.compare(s.size() - 3, 3, "ull") == 0)
      s.resize(s.size() - 3);
    return s;
  };
  if (options.json) {
    json out{{"file", options.file}, {"kind", "header"}, {"name", m.name}, {"maxc_version", version}};
    json parts = interface_json(m);
    for (auto &[k, v] : parts.items())
      out[k] = v;
    json entries = json::array();
    for (const std::string &p : prototypes) {
      size_t open = p.find('('), start = p.rfind(' ', open);
      std::string fn = p.substr(start + 1, open - start - 1);
      if (!fn.empty() && fn[0] == '*')
        fn.erase(0, 1);
      entries.push_back(fn);
    }
    out["entry_points"] = entries;
    out["backend"] = gpu ? "amdgpu" : "cpu";
    out["prototypes"] = prototypes;
    out["run_prototype"] = c_run_prototype(m, gpu);
    out["abi_hash"] = strip_ull(abi_hash);
    out["weights_bytes"] = strip_ull(constant_bytes);
    out["workspace_bytes_max"] = strip_ull(workspace);
    std::cout << out.dump(2) << "\n";
    return kSuccess;
  }
  std::cout << options.file << ": C header generated by maxc " << version << " for model '" << m.name << "'\n";
  print_tensors("inputs", m.inputs);
  print_tensors("outputs", m.outputs);
  std::cout << "  dims:      ";
  for (const std::string &s : m.symbols)
    std::cout << s << " ";
  std::cout << (m.symbols.empty() ? "none (every shape is static)\n" : "(int64_t arguments, after the outputs)\n");
  std::cout << "  entry points:\n";
  for (const std::string &p : prototypes)
    std::cout << "    " << p << ";\n";
  if (!abi_hash.empty())
    std::cout << "  ABI hash:  " << strip_ull(abi_hash) << " (" << upper << "_ABI_HASH)\n";
  if (!constant_bytes.empty())
    std::cout << "  weights:   " << strip_ull(constant_bytes) << " bytes\n";
  if (!workspace.empty())
    std::cout << "  workspace: at most " << strip_ull(workspace) << " bytes\n";
  print_call(m, gpu, text.find("_cuda_error(") != std::string::npos);
  return kSuccess;
}

// ---------------------------------------------------------------------------
// Object files

std::string section_group(llvm::StringRef name) {
  for (const char *prefix : {".text", ".rodata", ".lrodata", ".data", ".ldata", ".bss", ".lbss"})
    if (name == prefix || name.starts_with(std::string(prefix) + "."))
      return prefix[1] == 'l' ? std::string(".") + (prefix + 2) : prefix;
  return "";
}

int inspect_object(const GlobalOptions &global, const InspectOptions &options, const std::string &bytes,
                   DiagnosticEngine &diagnostics) {
  std::unique_ptr<llvm::MemoryBuffer> buffer =
      llvm::MemoryBuffer::getMemBuffer(llvm::StringRef(bytes.data(), bytes.size()), options.file, false);
  llvm::Expected<std::unique_ptr<llvm::object::ObjectFile>> parsed =
      llvm::object::ObjectFile::createObjectFile(buffer->getMemBufferRef());
  if (!parsed) {
    diagnostics.error(ErrorCode::InvalidArgument, options.file, "",
                      "not a readable object file: " + llvm::toString(parsed.takeError()));
    return finish(global, diagnostics);
  }
  const llvm::object::ObjectFile &obj = **parsed;
  const bool elf = llvm::isa<llvm::object::ELFObjectFileBase>(&obj);
  std::set<std::string> exported, undefined;
  std::map<std::string, std::pair<size_t, uint64_t>> constants; // model prefix → (count, bytes)
  for (const llvm::object::SymbolRef &sym : obj.symbols()) {
    llvm::Expected<llvm::StringRef> name = sym.getName();
    llvm::Expected<uint32_t> flags = sym.getFlags();
    if (!name || !flags) {
      if (!name)
        llvm::consumeError(name.takeError());
      if (!flags)
        llvm::consumeError(flags.takeError());
      continue;
    }
    if (name->empty())
      continue;
    if (*flags & llvm::object::SymbolRef::SF_Undefined) {
      undefined.insert(name->str());
      continue;
    }
    // Hidden globals (the weights symbol, the partitions' graph functions)
    // join the object's parts; they are not exported from a program.
    if ((*flags & llvm::object::SymbolRef::SF_Global) && !(*flags & llvm::object::SymbolRef::SF_Hidden))
      exported.insert(name->str());
    auto dot = name->find(".const.");
    if (elf && dot != llvm::StringRef::npos) {
      auto &[count, size] = constants[name->substr(0, dot).str()];
      ++count;
      size += llvm::object::ELFSymbolRef(sym).getSize();
    }
  }
  // Models: prefixes with a NAME_run and the other entry points.
  std::map<std::string, std::vector<std::string>> models;
  for (const std::string &s : exported)
    if (s.size() > 4 && s.compare(s.size() - 4, 4, "_run") == 0)
      models[s.substr(0, s.size() - 4)];
  std::set<std::string> claimed;
  for (auto &[prefix, entries] : models)
    for (const char *suffix : kEntrySuffixes)
      if (exported.count(prefix + suffix)) {
        entries.push_back(prefix + suffix);
        claimed.insert(prefix + suffix);
      }
  if (models.empty()) {
    diagnostics.error(ErrorCode::InvalidArgument, options.file, "",
                      "not an object compiled by maxc: none of its " + std::to_string(exported.size()) +
                          " exported symbols is a NAME_run entry point");
    return finish(global, diagnostics);
  }
  std::vector<std::string> others;
  for (const std::string &s : exported)
    if (!claimed.count(s))
      others.push_back(s);
  // Sections, and totals per kind.
  std::vector<std::pair<std::string, uint64_t>> sections;
  std::map<std::string, uint64_t> totals = {{".text", 0}, {".rodata", 0}, {".data", 0}, {".bss", 0}};
  for (const llvm::object::SectionRef &sec : obj.sections()) {
    llvm::Expected<llvm::StringRef> name = sec.getName();
    if (!name) {
      llvm::consumeError(name.takeError());
      continue;
    }
    std::string group = section_group(*name);
    if (group.empty() || sec.getSize() == 0)
      continue;
    sections.emplace_back(name->str(), sec.getSize());
    totals[group] += sec.getSize();
  }
  // ELF records the architecture, not the OS or CPU: those come from the
  // manifest next to the object, when there is one that lists this object.
  std::string arch = llvm::Triple::getArchTypeName(obj.getArch()).str();
  std::string triple = llvm::Triple::normalize(obj.makeTriple().str());
  std::string directory = options.file.find('/') == std::string::npos
                              ? std::string()
                              : options.file.substr(0, options.file.find_last_of('/') + 1);
  struct Sibling {
    std::string path, triple, cpu;
    bool matches = false; // the manifest lists this very object (sha256)
  };
  std::map<std::string, Sibling> siblings;
  std::string object_sha = sha256_hex(bytes);
  for (const auto &[prefix, entries] : models) {
    Sibling sib;
    sib.path = directory + prefix + ".manifest.json";
    std::string text;
    try {
      text = read_file(sib.path);
    } catch (const Error &) {
      continue;
    }
    json doc = json::parse(text, nullptr, false);
    if (!doc.is_object() || !doc.contains("manifest_version"))
      continue;
    const json target = doc.value("target", json::object());
    sib.triple = target.value("triple", std::string());
    sib.cpu = target.value("cpu", std::string());
    if (doc.contains("outputs") && doc["outputs"].is_array())
      for (const json &f : doc["outputs"])
        if (f.is_object() && f.value("sha256", std::string()) == object_sha)
          sib.matches = true;
    siblings[prefix] = sib;
  }

  if (options.json) {
    json list = json::array();
    for (const auto &[prefix, entries] : models) {
      bool cuda = exported.count(prefix + "_init") && exported.count(prefix + "_cuda_error");
      bool gpu = exported.count(prefix + "_init") && exported.count(prefix + "_hip_error");
      json model{{"name", prefix}, {"entry_points", entries}, {"backend", cuda ? "cuda" : gpu ? "amdgpu" : "cpu"}};
      auto it = constants.find(prefix);
      if (it != constants.end())
        model["constants"] = {{"count", it->second.first}, {"bytes", it->second.second}};
      auto sib = siblings.find(prefix);
      if (sib != siblings.end())
        model["manifest"] = {{"path", sib->second.path},
                             {"lists_this_object", sib->second.matches},
                             {"triple", sib->second.triple},
                             {"cpu", sib->second.cpu}};
      list.push_back(model);
    }
    json secs = json::array();
    for (const auto &[name, size] : sections)
      secs.push_back({{"name", name}, {"bytes", size}});
    json out{{"file", options.file},
             {"kind", "object"},
             {"format", obj.getFileFormatName().str()},
             {"triple", triple},
             {"arch", arch},
             {"models", list},
             {"other_exported", others},
             {"undefined", std::vector<std::string>(undefined.begin(), undefined.end())},
             {"sections", secs},
             {"sizes", {{"text", totals[".text"]}, {"rodata", totals[".rodata"]}, {"data", totals[".data"]},
                        {"bss", totals[".bss"]}}}};
    std::cout << out.dump(2) << "\n";
    return kSuccess;
  }
  std::cout << options.file << ": object file (" << obj.getFileFormatName().str() << "), arch " << arch << "\n";
  for (const auto &[prefix, entries] : models) {
    std::cout << "  model '" << prefix << "', entry points:\n   ";
    for (const std::string &e : entries)
      std::cout << " " << e;
    std::cout << "\n";
    auto it = constants.find(prefix);
    if (it != constants.end())
      std::cout << "  constants: " << it->second.first << " tensors, " << human_bytes(it->second.second) << "\n";
    auto sib = siblings.find(prefix);
    if (sib != siblings.end() && sib->second.matches)
      std::cout << "  target:    " << sib->second.triple << ", cpu " << sib->second.cpu << " (from "
                << sib->second.path << ", which lists this object)\n";
    else if (sib != siblings.end())
      std::cout << "  target:    " << triple << " (" << sib->second.path
                << " is from another build: its sha256 of the object differs)\n";
    else
      std::cout << "  target:    " << triple << " (an object records no OS or CPU; the manifest has them)\n";
    struct stat st;
    std::string header = directory + prefix + ".h";
    std::cout << "  call:      see the prototypes in " << prefix << ".h";
    if (::stat(header.c_str(), &st) == 0)
      std::cout << " (maxc inspect " << header << ")";
    std::cout << "\n";
    bool cuda = exported.count(prefix + "_init") && exported.count(prefix + "_cuda_error");
    bool gpu = exported.count(prefix + "_init") && exported.count(prefix + "_hip_error");
    std::cout << "  backend:   "
              << (cuda  ? "cuda (CUDA driver API host object, PTX/cubins embedded)"
                  : gpu ? "amdgpu (HIP host object, code objects embedded)"
                        : "cpu")
              << "\n";
    std::cout << "  link:      cc app.c " << base_name(options.file) << (cuda ? " -lcuda\n" : gpu ? " -lamdhip64\n" : " -lm\n");
  }
  if (!others.empty()) {
    std::cout << "  other exported symbols:";
    for (const std::string &s : others)
      std::cout << " " << s;
    std::cout << "\n";
  }
  std::cout << "  undefined (from the libraries it links with):";
  for (const std::string &s : undefined)
    std::cout << " " << s;
  std::cout << (undefined.empty() ? " none\n" : "\n");
  std::cout << "  sizes:     text " << totals[".text"] << ", rodata " << totals[".rodata"] << ", data "
            << totals[".data"] << ", bss " << totals[".bss"] << " bytes\n";
  std::cout << "  sections:\n";
  for (const auto &[name, size] : sections)
    std::cout << "    " << pad(name, 18) << size << " bytes\n";
  return kSuccess;
}

} // namespace

bool parse_manifest(const std::string &text, const std::string &file, json &doc, ModelInterface &m,
                    DiagnosticEngine &diagnostics) {
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || text[first] != '{') {
    diagnostics.error(ErrorCode::ModelSyntax, file, "",
                      "not a maxc manifest (NAME.manifest.json): the file is not a JSON object");
    return false;
  }
  try {
    doc = json::parse(text);
  } catch (const json::parse_error &e) {
    // The byte, not nlohmann's message: that quotes the input, bytes and all.
    size_t line = 1, column = 1;
    for (size_t i = 0; i + 1 < e.byte && i < text.size(); ++i, ++column)
      if (text[i] == '\n')
        line += 1, column = 0;
    diagnostics.error(ErrorCode::ModelSyntax, file, "",
                      "not a maxc manifest: malformed JSON at line " + std::to_string(line) + ", column " +
                          std::to_string(column));
    return false;
  } catch (const json::exception &e) {
    diagnostics.error(ErrorCode::ModelSyntax, file, "", std::string("not a maxc manifest: ") + e.what());
    return false;
  }
  ManifestReader r{file, diagnostics};
  if (!doc.is_object()) {
    r.fail("", "not a maxc manifest: the top level should be an object");
    return false;
  }
  if (!doc.contains("manifest_version")) {
    r.fail("", "not a maxc manifest: no 'manifest_version' field");
    return false;
  }
  const json *version = r.get(doc, "", "manifest_version", json::value_t::number_unsigned, "an integer");
  if (!version)
    return false;
  if (version->get<int64_t>() != 1 && version->get<int64_t>() != kManifestVersion) {
    r.fail("/manifest_version", "manifest_version " + std::to_string(version->get<int64_t>()) +
                                    " is not one this maxc reads (1, 2)");
    return false;
  }
  const json *name = r.get(doc, "", "name", json::value_t::string, "the model's C name");
  const json *interface = r.get(doc, "", "interface", json::value_t::object, "an object");
  if (name)
    m.name = name->get<std::string>();
  if (interface) {
    const json *inputs = r.get(*interface, "/interface", "inputs", json::value_t::array, "an array of tensors");
    const json *outputs = r.get(*interface, "/interface", "outputs", json::value_t::array, "an array of tensors");
    const json *dims = r.get(*interface, "/interface", "dims", json::value_t::array, "an array of dim names");
    r.get(*interface, "/interface", "entry_points", json::value_t::array, "an array of symbol names", false);
    if (inputs)
      m.inputs = r.tensors(*inputs, "/interface/inputs");
    if (outputs)
      m.outputs = r.tensors(*outputs, "/interface/outputs");
    if (dims)
      for (size_t i = 0; i < dims->size(); ++i) {
        if ((*dims)[i].is_string())
          m.symbols.push_back((*dims)[i].get<std::string>());
        else
          r.fail("/interface/dims/" + std::to_string(i), "a dim name should be a string");
      }
  }
  r.get(doc, "", "target", json::value_t::object, "an object", false);
  if (const json *memory = r.get(doc, "", "memory", json::value_t::object, "an object", false))
    if (const json *weights = r.get(*memory, "/memory", "weights_bytes", json::value_t::number_unsigned,
                                    "a byte count", false))
      m.constant_bytes = weights->get<uint64_t>();
  if (const json *subgraphs = r.get(doc, "", "subgraphs", json::value_t::object, "an object", false)) {
    m.subgraph_definitions = subgraphs->value("definitions", 0);
    m.subgraph_calls = subgraphs->value("calls", 0);
  }
  for (const char *list : {"inputs", "outputs", "kernels"})
    r.get(doc, "", list, json::value_t::array, "an array", false);
  return r.ok;
}

int run_inspect(const GlobalOptions &global, const InspectOptions &options) {
  DiagnosticEngine diagnostics;
  std::string bytes;
  try {
    bytes = read_file(options.file);
  } catch (const Error &e) {
    diagnostics.error(e, options.file, "");
    return finish(global, diagnostics);
  }
  llvm::file_magic magic = llvm::identify_magic(bytes);
  if (bytes.rfind("\x7f" "ELF", 0) == 0) // LLVM says why a damaged ELF file is unreadable
    return inspect_object(global, options, bytes, diagnostics);
  switch (magic) {
  case llvm::file_magic::elf_relocatable:
  case llvm::file_magic::elf_shared_object:
  case llvm::file_magic::elf_executable:
  case llvm::file_magic::macho_object:
  case llvm::file_magic::coff_object:
    return inspect_object(global, options, bytes, diagnostics);
  case llvm::file_magic::archive:
    diagnostics.error(ErrorCode::InvalidArgument, options.file, "",
                      "a static library (ar archive); inspect the object file maxc wrote (NAME.o) instead");
    return finish(global, diagnostics);
  default:
    break;
  }
  size_t first = bytes.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && bytes[first] == '{')
    return inspect_manifest(global, options, bytes, diagnostics);
  if (is_maxc_header(bytes))
    return inspect_header(global, options, bytes, diagnostics);
  diagnostics.error(ErrorCode::InvalidArgument, options.file, "",
                    bytes.empty() ? "empty file; expected a maxc object (NAME.o), header (NAME.h) or manifest "
                                    "(NAME.manifest.json)"
                                  : "not a maxc artifact; expected an object file (NAME.o), a header generated by "
                                    "maxc (NAME.h) or a manifest (NAME.manifest.json)");
  return finish(global, diagnostics);
}

} // namespace maxc::cli

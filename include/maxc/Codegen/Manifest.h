// NAME.manifest.json: what an artifact contains, for people and pipelines.
// One schema for every backend (docs/manifest.md, docs/manifest.schema.json),
// manifest_version 2. Deterministic: no timestamps (unless
// --manifest-timings), no absolute paths (files by base name).
#pragma once

#include "maxc/Codegen/ModelAbi.h"

#include <string>
#include <utility>
#include <vector>

namespace maxc {

constexpr int kManifestVersion = 2;

struct ManifestFile {
  std::string role; // "model", "weights", "obj", "header", ...
  std::string path; // base name
  std::string sha256;
  uint64_t bytes = 0;
};

/// What a backend contributes to the manifest.
struct ManifestSection {
  std::string backend;                   // "cpu", "amdgpu"
  std::string target_json;               // the "target" object (JSON text); kind, triple, cpu, opt_level, ...
  std::vector<std::string> entry_points; // exported C symbols
  std::vector<std::string> link;         // what a program links with ("-lm", "-lamdhip64")
  bool gpu_status_codes = false;         // the status table's GPU rows instead of the CPU ones
  std::string extra_key, extra_json;     // a backend-specific top-level section ("gpu": per-arch code objects)
};

struct ManifestInputs {
  ManifestSection section;
  std::string workspace_bytes;       // Dim text: an upper bound, polynomial in the dims
  std::vector<ManifestFile> inputs;  // files read
  std::vector<ManifestFile> outputs; // artifacts written (except the manifest)
  std::vector<std::string> kernels;  // per graph function: "main: 12 kernels", ...
  /// Compile time per step in ms, only with --manifest-timings: times make
  /// the manifest differ between otherwise identical compiles.
  std::vector<std::pair<std::string, double>> stage_ms;
};

std::string emit_manifest(const ModelInterface &interface, const ManifestInputs &info);

/// The base name of a path ("a/b/c.o" → "c.o").
std::string base_name(const std::string &path);

} // namespace maxc

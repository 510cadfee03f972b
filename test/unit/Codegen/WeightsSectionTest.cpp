// Weights outside LLVM: ByteChunks, the ELF weights section the object
// writer appends (defined symbol, the weights' bytes), byte-identical
// objects, and manifest hashes that match the files written.
#include "TestUtil.h"

#include "maxc/Codegen/WeightsSection.h"
#include "maxc/Driver/Compile.h"
#include "maxc/Frontend/Safetensors.h"
#include "maxc/Support/FileSystem.h"
#include "maxc/Support/Sha256.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstring>
#include <elf.h>

using namespace maxc;

namespace {

const char *kModel = R"({
  "maxc": 1, "name": "wsec", "weights": "w.safetensors",
  "inputs": [{"name": "x", "dtype": "f32", "shape": ["n", 8]}],
  "outputs": ["y"],
  "modules": {"Linear": {"args": ["x"], "options": {"in": 8, "out": 4},
                         "params": {"weight": ["$out", "$in"], "bias": ["$out"]},
                         "body": [{"y": ["linear", "x", "@weight", "@bias"]}], "return": "y"}},
  "main": [{"h": ["call", "Linear", "x", {"instance": "fc"}]}, {"y": ["tanh", "h"]}]
})";

HostTensor ramp(std::vector<int64_t> shape, float start) {
  HostTensor t(DType::f32, shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data_as<float>()[i] = start + 0.25f * static_cast<float>(i);
  return t;
}

struct Section {
  std::string name, bytes;
  uint64_t flags = 0, align = 0;
};

/// The sections of an ELF64 object, and where `symbol` is defined (section index, size).
std::vector<Section> sections_of(const std::string &elf, const std::string &symbol, int *symbol_section,
                                 uint64_t *symbol_size) {
  Elf64_Ehdr eh;
  std::memcpy(&eh, elf.data(), sizeof eh);
  // Extended numbering (a weights-first object): the count and the names'
  // index in section 0.
  Elf64_Shdr first;
  std::memcpy(&first, elf.data() + eh.e_shoff, sizeof first);
  size_t count = eh.e_shnum ? eh.e_shnum : first.sh_size;
  size_t names = eh.e_shstrndx == SHN_XINDEX ? first.sh_link : eh.e_shstrndx;
  std::vector<Elf64_Shdr> sh(count);
  std::memcpy(sh.data(), elf.data() + eh.e_shoff, sh.size() * sizeof(Elf64_Shdr));
  std::vector<Section> out;
  for (const Elf64_Shdr &s : sh)
    out.push_back({elf.data() + sh[names].sh_offset + s.sh_name,
                   s.sh_type == SHT_NOBITS ? "" : elf.substr(s.sh_offset, s.sh_size), s.sh_flags, s.sh_addralign});
  *symbol_section = -1;
  for (const Elf64_Shdr &s : sh)
    if (s.sh_type == SHT_SYMTAB)
      for (uint64_t off = s.sh_offset; off < s.sh_offset + s.sh_size; off += sizeof(Elf64_Sym)) {
        Elf64_Sym sym;
        std::memcpy(&sym, elf.data() + off, sizeof sym);
        if (symbol == elf.data() + sh[s.sh_link].sh_offset + sym.st_name) {
          *symbol_section = sym.st_shndx;
          *symbol_size = sym.st_size;
        }
      }
  return out;
}

driver::CompileRequest request_for(const test::TempDir &dir, const std::string &model, const std::string &out) {
  driver::CompileRequest r;
  r.model = model;
  r.options.cpu = "";
  r.output = dir.file(out);
  r.output_given = true;
  return r;
}

} // namespace

TEST_CASE("ByteChunks joins owned pieces, views and zeros", "[codegen][weights]") {
  auto storage = std::make_shared<std::string>("weights!");
  ByteChunks a("head");
  a.append_zeros(3);
  a.append_view(storage->data(), storage->size(), storage);
  a.append(std::string("tail"));
  std::string flat = std::string("head") + std::string(3, '\0') + "weights!tail";
  CHECK(a.size() == flat.size());
  CHECK(a.str() == flat);
  CHECK(lanes64(a) == lanes64(std::string_view(flat)));
  ByteChunks b(flat.substr(0, 5));
  b.append(flat.substr(5));
  CHECK(a == b);
  b = ByteChunks(flat.substr(0, flat.size() - 1) + "!");
  CHECK(a != b);
}

TEST_CASE("embedded weights are a section the object writer appends, byte-identical", "[codegen][weights]") {
  test::TempDir dir;
  HostTensor weight = ramp({4, 8}, 1), bias = ramp({4}, 100);
  write_safetensors(dir.file("w.safetensors"), {{"fc.weight", weight}, {"fc.bias", bias}});
  std::string model = dir.write("wsec.json", kModel);
  std::string objects[2];
  for (int i = 0; i < 2; ++i) {
    driver::CompileRequest r = request_for(dir, model, "wsec" + std::to_string(i) + ".o");
    DiagnosticEngine diagnostics;
    driver::CompileResult result;
    REQUIRE(driver::compile(r, diagnostics, result));
    objects[i] = read_file(r.output);
    // The weights were written while LLVM generated the code.
    bool overlapped = false;
    for (const auto &[step, ms] : result.timer.passes())
      overlapped |= step == "weights (overlapped)";
    CHECK(overlapped);
  }
  CHECK(objects[0] == objects[1]);

  int symbol_section = -1;
  uint64_t symbol_size = 0;
  std::vector<Section> sections = sections_of(objects[0], "wsec.weights.data", &symbol_section, &symbol_size);
  REQUIRE(symbol_section > 0);
  REQUIRE(symbol_section < static_cast<int>(sections.size()));
  const Section &s = sections[symbol_section];
  CHECK(s.name == ".rodata.maxc.weights");
  CHECK(s.flags == SHF_ALLOC);
  CHECK(s.align == 64);
  CHECK(symbol_size == s.bytes.size());
  // The bias as it was in the safetensors file (the weight may be stored transposed).
  CHECK(s.bytes.find(std::string(reinterpret_cast<const char *>(bias.data()), bias.nbytes())) != std::string::npos);
  for (const Section &other : sections) // no other copy of the weights
    if (&other != &s)
      CHECK(other.bytes.find(std::string(reinterpret_cast<const char *>(bias.data()), bias.nbytes())) ==
            std::string::npos);

  // Weights-first: the weights right after the ELF header, which is the one
  // predicted before any code existed (weights_section_head), so the
  // driver wrote them during code generation.
  CHECK(objects[0].compare(64, s.bytes.size(), s.bytes) == 0);
  CHECK(codegen::weights_section_head("x86_64-unknown-linux-gnu", ByteChunks(s.bytes)).prefix(64) ==
        objects[0].substr(0, 64));
  Elf64_Ehdr eh;
  std::memcpy(&eh, objects[0].data(), sizeof eh);
  CHECK(eh.e_shnum == 0);
  CHECK(eh.e_shstrndx == SHN_XINDEX);

  // The manifest's hashes are those of the files written.
  auto manifest = nlohmann::json::parse(read_file(dir.file("wsec.manifest.json")));
  for (const auto &o : manifest["outputs"])
    CHECK(o["sha256"] == sha256_hex(read_file(dir.file(o["path"].get<std::string>()))));
}

TEST_CASE("external weights: the blob streamed from the weights, hashed as written", "[codegen][weights]") {
  test::TempDir dir;
  HostTensor weight = ramp({4, 8}, 1), bias = ramp({4}, 100);
  write_safetensors(dir.file("w.safetensors"), {{"fc.weight", weight}, {"fc.bias", bias}});
  driver::CompileRequest r = request_for(dir, dir.write("wsec.json", kModel), "wsec.o");
  r.options.external_weights = true;
  DiagnosticEngine diagnostics;
  driver::CompileResult result;
  REQUIRE(driver::compile(r, diagnostics, result));
  bool overlapped = false;
  for (const auto &[step, ms] : result.timer.passes())
    overlapped |= step == "weights (overlapped)";
  CHECK(overlapped);
  std::string blob = read_file(dir.file("wsec.weights.bin"));
  CHECK(blob.find(std::string(reinterpret_cast<const char *>(bias.data()), bias.nbytes())) != std::string::npos);
  auto manifest = nlohmann::json::parse(read_file(dir.file("wsec.manifest.json")));
  // The checksum the interface records, taken while the blob was written.
  char checksum[17];
  std::snprintf(checksum, sizeof checksum, "%016llx", static_cast<unsigned long long>(lanes64(std::string_view(blob))));
  CHECK(manifest["memory"]["weights_blob_checksum"] == checksum);
  CHECK(manifest["memory"]["weights_blob_bytes"] == blob.size());
  bool listed = false;
  for (const auto &o : manifest["outputs"])
    if (o["role"] == "weights") {
      listed = true;
      CHECK(o["sha256"] == sha256_hex(blob));
    }
  CHECK(listed);
  int symbol_section = -1;
  uint64_t symbol_size = 0;
  sections_of(read_file(r.output), "wsec.weights.data", &symbol_section, &symbol_size);
  CHECK(symbol_section == -1); // no weights section
}

// A pre-transposed weight whose bytes were never made
// (Graph::add_transposed_constant) is made while the blob is written, in
// blocks of ByteChunks::kGeneratedBlock that cut its rows (4000-byte rows,
// three matrices): the same bytes as from the transposed copy, and the
// graph's copy is still not made.
TEST_CASE("weights blob: lazily transposed constants made as they are written", "[codegen][weights]") {
  HostTensor w = test::random_tensor(DType::f32, {3, 700, 1000}, -1, 1), h = test::random_tensor(DType::f16, {5, 3});
  REQUIRE(w.nbytes() > 2 * ByteChunks::kGeneratedBlock);
  auto transposed = [](const HostTensor &x) { // the copy decompose used to make
    std::vector<int64_t> shape = x.shape();
    std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
    HostTensor t(x.dtype(), shape);
    int64_t rows = x.shape()[x.rank() - 2], cols = x.shape()[x.rank() - 1];
    for (int64_t b = 0; b < x.numel() / (rows * cols); ++b)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          std::memcpy(t.data() + ((b * cols + j) * rows + i) * dtype_size(x.dtype()),
                      x.data() + ((b * rows + i) * cols + j) * dtype_size(x.dtype()), dtype_size(x.dtype()));
    return t;
  };
  Graph lazy("g"), made("g");
  for (Graph *g : {&lazy, &made}) {
    GraphRealizationContext ctx(*g);
    std::vector<Tensor> outs;
    for (const auto &[name, src] : {std::pair<std::string, HostTensor>{"w.T", w}, {"h.T", h}})
      outs.push_back(g == &lazy ? ctx.add_transposed_source(src, name)
                                : ctx.add_source(Tensor::from_host(transposed(src)), name));
    g->set_outputs({outs[0].value().id(), outs[1].value().id()});
  }
  codegen::ConstantOffsets lazy_offsets, made_offsets;
  ByteChunks a = codegen::weights_blob(lazy, lazy_offsets), b = codegen::weights_blob(made, made_offsets);
  CHECK(lazy.constant_types().at("w.T").storage() == nullptr);
  CHECK(a.size() == b.size());
  CHECK(a == b);
  CHECK(a.str() == b.str());
}

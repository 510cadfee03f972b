// Weights without copies (WeightsSection.h): ByteChunks, the weights blob as
// views, and the ELF64 writer that appends the weights section to an object.
#include "maxc/Codegen/WeightsSection.h"

#include "maxc/Support/Error.h"

#include <algorithm>
#include <cstring>
#include <elf.h>
#include <set>

namespace maxc {

namespace {

constexpr size_t kZeroBlock = 1 << 16;
const char *zero_block() {
  static const std::string zeros(kZeroBlock, '\0');
  return zeros.data();
}

} // namespace

void ByteChunks::append(std::string bytes) {
  if (bytes.empty())
    return;
  auto owned = std::make_shared<const std::string>(std::move(bytes));
  const char *data = owned->data();
  size_t size = owned->size();
  pieces_.push_back({std::move(owned), data, size});
  size_ += size;
}

void ByteChunks::append_view(const void *data, size_t size, std::shared_ptr<const void> keep) {
  if (size == 0)
    return;
  pieces_.push_back({std::move(keep), static_cast<const char *>(data), size});
  size_ += size;
}

void ByteChunks::append_zeros(size_t size) {
  if (size == 0)
    return;
  pieces_.push_back({nullptr, nullptr, size});
  size_ += size;
}

void ByteChunks::append(const ByteChunks &other) {
  pieces_.insert(pieces_.end(), other.pieces_.begin(), other.pieces_.end());
  size_ += other.size_;
}

void ByteChunks::for_each(const std::function<void(const char *, size_t)> &f) const {
  for (const Piece &p : pieces_) {
    if (p.data) {
      f(p.data, p.size);
      continue;
    }
    for (size_t done = 0; done < p.size; done += kZeroBlock)
      f(zero_block(), std::min(kZeroBlock, p.size - done));
  }
}

std::string ByteChunks::str() const {
  std::string out;
  out.reserve(size_);
  for_each([&](const char *data, size_t size) { out.append(data, size); });
  return out;
}

bool ByteChunks::operator==(const ByteChunks &other) const {
  if (size_ != other.size_)
    return false;
  std::vector<std::pair<const char *, size_t>> a, b;
  for_each([&](const char *d, size_t n) { a.emplace_back(d, n); });
  other.for_each([&](const char *d, size_t n) { b.emplace_back(d, n); });
  size_t i = 0, j = 0, oi = 0, oj = 0;
  while (i < a.size() && j < b.size()) {
    size_t n = std::min(a[i].second - oi, b[j].second - oj);
    if (a[i].first + oi != b[j].first + oj && std::memcmp(a[i].first + oi, b[j].first + oj, n) != 0)
      return false;
    oi += n;
    oj += n;
    if (oi == a[i].second)
      ++i, oi = 0;
    if (oj == b[j].second)
      ++j, oj = 0;
  }
  return true;
}

uint64_t fnv1a64(const ByteChunks &bytes) {
  uint64_t h = 1469598103934665603ull;
  bytes.for_each([&](const char *data, size_t size) {
    for (size_t i = 0; i < size; ++i)
      h = (h ^ static_cast<unsigned char>(data[i])) * 1099511628211ull;
  });
  return h;
}

namespace codegen {

// Constants actually read by some node of `g` (decompose may leave the
// originals of pre-transposed weights unread).
static std::set<std::string> read_constants(const Graph &g) {
  std::vector<bool> used(g.num_values(), false);
  for (const Node &n : g.nodes())
    for (ValueId v : n.operands)
      used[v] = true;
  for (ValueId v : g.output_ids())
    used[v] = true;
  std::set<std::string> names;
  for (const Node &n : g.nodes())
    if (n.op == "constant" && used[n.results[0]])
      names.insert(n.attrs.get_string("name"));
  return names;
}

ByteChunks weights_blob(const Graph &lowered, ConstantOffsets &offsets, const ConstantRewrite &rewrite) {
  ByteChunks blob;
  auto add = [&](const Graph &g) {
    for (const std::string &name : read_constants(g)) {
      blob.append_zeros(((blob.size() + 63) & ~uint64_t(63)) - blob.size());
      offsets[{&g, name}] = blob.size();
      if (auto bytes = rewrite ? rewrite(g, name) : nullptr) {
        blob.append_view(bytes->data(), bytes->size() * sizeof(float), bytes);
        continue;
      }
      const HostTensor &data = g.constant(name);
      blob.append_view(data.data(), data.nbytes(), data.storage());
    }
  };
  add(lowered);
  for (const auto &[name, sub] : lowered.subgraphs())
    add(*sub);
  return blob;
}

namespace {

template <typename T> T read_at(const std::string &bytes, uint64_t offset) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T))
    throw Error(ErrorCode::Internal, "weights section: the object is truncated");
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

template <typename T> void write_at(std::string &bytes, uint64_t offset, const T &value) {
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

void pad_to(std::string &bytes, uint64_t base, uint64_t align) {
  uint64_t end = base + bytes.size();
  bytes.append(((end + align - 1) & ~(align - 1)) - end, '\0');
}

} // namespace

ByteChunks append_weights_section(std::string object, const std::string &symbol, const ByteChunks &weights,
                                  const std::string &section, uint64_t align) {
  auto fail = [](const std::string &what) { throw Error(ErrorCode::Internal, "weights section: " + what); };
  auto eh = read_at<Elf64_Ehdr>(object, 0);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_type != ET_REL)
    fail("not a little-endian ELF64 relocatable object");
  if (eh.e_machine != EM_X86_64 && eh.e_machine != EM_AARCH64)
    fail("unsupported machine " + std::to_string(eh.e_machine));
  if (eh.e_shnum == 0 || eh.e_shnum + 1 >= SHN_LORESERVE || eh.e_shstrndx >= eh.e_shnum ||
      eh.e_shentsize != sizeof(Elf64_Shdr))
    fail("unsupported section table");
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  for (size_t i = 0; i < sections.size(); ++i)
    sections[i] = read_at<Elf64_Shdr>(object, eh.e_shoff + i * sizeof(Elf64_Shdr));

  // The undefined symbol the code refers to.
  uint64_t symbol_at = 0;
  for (const Elf64_Shdr &s : sections) {
    if (s.sh_type == SHT_SYMTAB_SHNDX)
      fail("extended section indices are not supported");
    if (s.sh_type != SHT_SYMTAB || s.sh_entsize != sizeof(Elf64_Sym) || s.sh_link >= sections.size())
      continue;
    const Elf64_Shdr &strtab = sections[s.sh_link];
    for (uint64_t off = s.sh_offset; off + sizeof(Elf64_Sym) <= s.sh_offset + s.sh_size; off += sizeof(Elf64_Sym)) {
      auto sym = read_at<Elf64_Sym>(object, off);
      if (sym.st_shndx != SHN_UNDEF || sym.st_name >= strtab.sh_size)
        continue;
      const char *name = object.data() + strtab.sh_offset + sym.st_name;
      if (symbol.compare(0, std::string::npos, name, strnlen(name, strtab.sh_size - sym.st_name)) == 0)
        symbol_at = off;
    }
  }
  if (symbol_at == 0)
    return ByteChunks(std::move(object)); // nothing reads a weight
  // The code reaches the weights PC-relative (x86-64 small code model: ±2 GiB;
  // aarch64 adrp: ±4 GiB).
  if (weights.size() > (uint64_t(1) << 31) - (uint64_t(1) << 26))
    throw Error(ErrorCode::InvalidArgument,
                "the weights (" + std::to_string(weights.size()) +
                    " bytes) are too large to embed in an object (2 GiB at most); use --weights-mode external");

  const uint16_t index = eh.e_shnum;
  auto sym = read_at<Elf64_Sym>(object, symbol_at);
  sym.st_shndx = index;
  sym.st_value = 0;
  sym.st_size = weights.size();
  sym.st_info = ELF64_ST_INFO(ELF64_ST_BIND(sym.st_info), STT_OBJECT);
  write_at(object, symbol_at, sym);

  // The file: the object without its section table (when last), the section
  // names plus the new one, the weights (64-aligned), the new section table.
  if (eh.e_shoff + eh.e_shnum * sizeof(Elf64_Shdr) == object.size())
    object.resize(eh.e_shoff);
  Elf64_Shdr &names = sections[eh.e_shstrndx];
  std::string shstrtab = object.substr(names.sh_offset, names.sh_size);
  Elf64_Shdr added{};
  added.sh_name = static_cast<Elf64_Word>(shstrtab.size());
  shstrtab.append(section.c_str(), section.size() + 1);
  names.sh_offset = object.size();
  names.sh_size = shstrtab.size();
  object += shstrtab;
  pad_to(object, 0, align);
  added.sh_type = SHT_PROGBITS;
  added.sh_flags = SHF_ALLOC;
  added.sh_offset = object.size();
  added.sh_size = weights.size();
  added.sh_addralign = align;
  sections.push_back(added);

  std::string tail;
  pad_to(tail, object.size() + weights.size(), 8);
  uint64_t table = object.size() + weights.size() + tail.size();
  for (const Elf64_Shdr &s : sections)
    tail.append(reinterpret_cast<const char *>(&s), sizeof s);
  eh.e_shoff = table;
  eh.e_shnum = static_cast<Elf64_Half>(sections.size());
  write_at(object, 0, eh);

  ByteChunks out(std::move(object));
  out.append(weights);
  out.append(std::move(tail));
  return out;
}

} // namespace codegen

} // namespace maxc

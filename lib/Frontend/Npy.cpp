#include "maxc/Frontend/Npy.h"

#include "maxc/Support/Error.h"
#include "maxc/Support/FileSystem.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

// .npy data is little-endian here; maxc's hosts (x86-64, aarch64) are too.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the .npy reader assumes a little-endian host");

namespace maxc {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kAlign = 64;             // NumPy's ARRAY_ALIGN
constexpr size_t kGrowthAxisMaxDigits = 21; // NumPy's GROWTH_AXIS_MAX_DIGITS

std::string supported_descrs() {
  std::string s;
  for (const DTypeInfo &d : kDTypeInfo)
    if (!d.npy_descr.empty())
      s += (s.empty() ? "" : ", ") + std::string(d.npy_descr);
  return s;
}

Error npy_error(const std::string &msg, const std::string &file) {
  return Error(ErrorCode::NpyFormat, msg, file);
}

// Maps a descr string to a dtype. The byte-order mark may be '<', '=' or
// '|' (native is little-endian here) or absent; '>' is refused unless the
// type is a single byte, where order does not matter.
DType parse_descr(const std::string &descr, const std::string &file) {
  std::string base = descr;
  char order = '=';
  if (!base.empty() && std::strchr("<>|=", base[0])) {
    order = base[0];
    base = base.substr(1);
  }
  if (std::optional<DType> d = dtype_from_npy_descr(base)) {
    if (order == '>' && dtype_size(*d) > 1)
      throw npy_error("big-endian dtype '" + descr + "' is not supported; convert with a.astype('" +
                          std::string(dtype_info(*d).npy_descr) + "')",
                      file);
    return *d;
  }
  throw npy_error("unsupported dtype '" + descr + "' (maxc reads " + supported_descrs() + ")", file);
}

struct Header {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  bool fortran_order = false;
};

// A parser for the header: a Python dict literal with the keys 'descr',
// 'fortran_order' and 'shape' in any order, any whitespace and trailing commas.
class HeaderParser {
public:
  HeaderParser(const std::string &text, const std::string &file) : s_(text), file_(file) {}

  Header parse() {
    Header h;
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{', "a '{' opening the header dict");
    while (true) {
      skip_ws();
      if (peek() == '}') {
        ++i_;
        break;
      }
      if (peek() != '\'' && peek() != '"')
        fail("expected a quoted key or '}'");
      std::string key = string_literal();
      expect(':', "':' after key '" + key + "'");
      auto once = [&](bool &seen) {
        if (seen)
          fail("key '" + key + "' appears more than once");
        seen = true;
      };
      if (key == "descr") {
        once(have_descr);
        skip_ws();
        if (peek() == '[')
          fail("structured dtypes (a list as 'descr') are not supported");
        if (peek() != '\'' && peek() != '"')
          fail("'descr' must be a string");
        h.dtype = parse_descr(string_literal(), file_);
      } else if (key == "fortran_order") {
        once(have_order);
        skip_ws();
        if (s_.compare(i_, 4, "True") == 0) {
          h.fortran_order = true;
          i_ += 4;
        } else if (s_.compare(i_, 5, "False") == 0) {
          h.fortran_order = false;
          i_ += 5;
        } else {
          fail("'fortran_order' must be True or False");
        }
      } else if (key == "shape") {
        once(have_shape);
        h.shape = shape_tuple();
      } else {
        fail("unexpected key '" + key + "' (a .npy header has 'descr', 'fortran_order' and 'shape')");
      }
      skip_ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() != '}')
        fail("expected ',' or '}'");
    }
    skip_ws();
    if (i_ != s_.size())
      fail("unexpected text after the header dict");
    if (!have_descr || !have_order || !have_shape)
      throw npy_error(std::string("header lacks the key '") +
                          (!have_descr ? "descr" : !have_order ? "fortran_order" : "shape") + "'",
                      file_);
    return h;
  }

private:
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_ws() {
    while (i_ < s_.size() && std::strchr(" \t\r\n\f\v", s_[i_]) && s_[i_] != '\0')
      ++i_;
  }
  [[noreturn]] void fail(const std::string &msg) const {
    std::string near = s_.substr(std::min(i_, s_.size()), 20);
    for (char &c : near)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f)
        c = '?';
    throw npy_error("bad header: " + msg + " at offset " + std::to_string(i_) + " (near \"" + near + "\")",
                    file_);
  }
  void expect(char c, const std::string &what) {
    skip_ws();
    if (peek() != c)
      fail("expected " + what);
    ++i_;
  }
  // A '...' or "..." literal; a backslash takes the next character as is.
  std::string string_literal() {
    char quote = s_[i_++];
    std::string out;
    while (true) {
      if (i_ >= s_.size())
        fail("unterminated string");
      char c = s_[i_++];
      if (c == quote)
        return out;
      if (c == '\\') {
        if (i_ >= s_.size())
          fail("unterminated string");
        c = s_[i_++];
      }
      out += c;
    }
  }
  int64_t dimension() {
    skip_ws();
    if (peek() == '-')
      fail("negative dimension in 'shape'");
    if (!(peek() >= '0' && peek() <= '9'))
      fail("'shape' must be a tuple of integers");
    int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, peek() - '0', &v))
        fail("dimension too large in 'shape'");
      ++i_;
    }
    if (peek() == 'L' || peek() == 'l') // Python 2 long
      ++i_;
    return v;
  }
  std::vector<int64_t> shape_tuple() {
    skip_ws();
    if (peek() != '(')
      fail("'shape' must be a tuple such as (2, 3)");
    ++i_;
    std::vector<int64_t> dims;
    bool trailing_comma = false;
    while (true) {
      skip_ws();
      if (peek() == ')') {
        ++i_;
        break;
      }
      dims.push_back(dimension());
      skip_ws();
      trailing_comma = false;
      if (peek() == ',') {
        ++i_;
        trailing_comma = true;
      } else if (peek() != ')') {
        fail("expected ',' or ')' in 'shape'");
      }
    }
    // In Python "(5)" is the int 5, not a tuple; NumPy rejects it too.
    if (dims.size() == 1 && !trailing_comma)
      fail("'shape' (" + std::to_string(dims[0]) + ") is not a tuple; a 1-d shape is written (" +
           std::to_string(dims[0]) + ",)");
    int64_t n = 1;
    for (int64_t d : dims)
      if (__builtin_mul_overflow(n, d, &n))
        fail("element count of 'shape' overflows 64 bits");
    return dims;
  }

  const std::string &s_;
  const std::string &file_;
  size_t i_ = 0;
};

// Magic, version and header length: where the header text lies.
struct Prefix {
  size_t header_begin = 0;
  uint64_t header_len = 0;
};

// `p` holds the first `avail` bytes of a file of `file_size` bytes
// (avail >= min(file_size, 12)).
Prefix parse_prefix(const char *p, size_t avail, uint64_t file_size, const std::string &file) {
  if (file_size < kMagicLen + 4)
    throw npy_error("file is " + std::to_string(file_size) + " bytes long, too short for a .npy header", file);
  if (std::memcmp(p, kMagic, kMagicLen) != 0)
    throw npy_error("not a .npy file (it does not start with \"\\x93NUMPY\")", file);
  int major = static_cast<uint8_t>(p[6]), minor = static_cast<uint8_t>(p[7]);
  Prefix out;
  if (major == 1 && minor == 0) {
    out.header_len = static_cast<uint8_t>(p[8]) | (static_cast<uint64_t>(static_cast<uint8_t>(p[9])) << 8);
    out.header_begin = 10;
  } else if ((major == 2 || major == 3) && minor == 0) {
    if (file_size < 12 || avail < 12)
      throw npy_error("file is " + std::to_string(file_size) + " bytes long, too short for a .npy header", file);
    for (int i = 0; i < 4; ++i)
      out.header_len |= static_cast<uint64_t>(static_cast<uint8_t>(p[8 + i])) << (8 * i);
    out.header_begin = 12;
  } else {
    throw npy_error("unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                        " (maxc reads 1.0, 2.0 and 3.0)",
                    file);
  }
  if (out.header_len > file_size - out.header_begin)
    throw npy_error("header length " + std::to_string(out.header_len) + " goes past the end of the file (" +
                        std::to_string(file_size) + " bytes)",
                    file);
  return out;
}

// Parses the header text and checks `data_size` bytes follow it.
Header parse_header(const std::string &text, uint64_t data_size, const std::string &file) {
  Header h = HeaderParser(text, file).parse();
  if (h.fortran_order) {
    // Column-major equals row-major when at most one dimension exceeds 1.
    auto big = std::count_if(h.shape.begin(), h.shape.end(), [](int64_t d) { return d > 1; });
    if (big > 1)
      throw npy_error("Fortran-ordered arrays are not supported; save np.ascontiguousarray(a) instead", file);
  }
  int64_t numel = 1;
  for (int64_t d : h.shape)
    numel *= d; // overflow already ruled out by the parser
  uint64_t nbytes;
  if (__builtin_mul_overflow(static_cast<uint64_t>(numel), static_cast<uint64_t>(dtype_size(h.dtype)), &nbytes))
    throw npy_error("byte size of the array overflows 64 bits", file);
  if (data_size != nbytes)
    throw npy_error("data is " + std::to_string(data_size) + " bytes but a " + std::string(dtype_name(h.dtype)) +
                        " array of " + std::to_string(numel) + " elements needs " + std::to_string(nbytes),
                    file);
  return h;
}

std::string_view descr_for_write(const HostTensor &t) {
  std::string_view descr = dtype_info(t.dtype()).npy_descr;
  if (!descr.empty())
    return descr;
  throw Error(ErrorCode::InvalidArgument,
              "cannot write " + describe(t) + " as .npy: NumPy has no " + std::string(dtype_name(t.dtype())) +
                  " dtype; cast to f32 first");
}

// The header NumPy's _write_array_header produces for `t` (C order).
std::string npy_header(const HostTensor &t) {
  std::string_view descr = descr_for_write(t);
  if (!t.valid())
    throw Error(ErrorCode::InvalidArgument, "cannot write " + describe(t) + " as .npy: it has no storage");
  std::string shape = "(";
  for (size_t i = 0; i < t.shape().size(); ++i)
    shape += (i ? ", " : "") + std::to_string(t.shape()[i]);
  shape += t.shape().size() == 1 ? ",)" : ")";
  std::string dict = std::string("{'descr': '") + std::string(descr) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // NumPy leaves room to grow the first axis in place.
  if (!t.shape().empty()) {
    size_t digits = std::to_string(t.shape()[0]).size();
    if (digits < kGrowthAxisMaxDigits)
      dict.append(kGrowthAxisMaxDigits - digits, ' ');
  }
  size_t hlen = dict.size() + 1; // + '\n'
  // Version 1.0 has a 16-bit length; NumPy moves to 2.0 only when that overflows.
  size_t prefix_len = kMagicLen + 2 + 2;
  size_t pad = kAlign - (prefix_len + hlen) % kAlign;
  int major = 1;
  if (hlen + pad > 0xffff) {
    major = 2;
    prefix_len = kMagicLen + 2 + 4;
    pad = kAlign - (prefix_len + hlen) % kAlign;
  }
  uint64_t total = hlen + pad;
  std::string out(kMagic, kMagicLen);
  out += static_cast<char>(major);
  out += '\0';
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i)
    out += static_cast<char>((total >> (8 * i)) & 0xff);
  out += dict;
  out.append(pad, ' ');
  out += '\n';
  return out;
}


} // namespace

HostTensor parse_npy(const std::string &bytes, const std::string &name_for_errors) {
  Prefix pre = parse_prefix(bytes.data(), bytes.size(), bytes.size(), name_for_errors);
  uint64_t header_end = pre.header_begin + pre.header_len;
  Header h = parse_header(bytes.substr(pre.header_begin, pre.header_len), bytes.size() - header_end,
                          name_for_errors);
  HostTensor t(h.dtype, h.shape);
  if (t.nbytes())
    std::memcpy(t.data(), bytes.data() + header_end, t.nbytes());
  return t;
}

HostTensor read_npy(const std::string &path) {
  // Reads the header, then the data straight into the tensor (one copy).
  InputFile f = open_for_reading(path, ".npy file");
  uint64_t size = f.size();
  char head[12] = {};
  size_t head_len = static_cast<size_t>(std::min<uint64_t>(size, sizeof head));
  read_exactly(f.fd(), head, head_len, 0, path);
  Prefix pre = parse_prefix(head, head_len, size, path);
  std::string text(static_cast<size_t>(pre.header_len), '\0');
  read_exactly(f.fd(), text.data(), text.size(), pre.header_begin, path);
  uint64_t header_end = pre.header_begin + pre.header_len;
  Header h = parse_header(text, size - header_end, path);
  HostTensor t(h.dtype, h.shape);
  read_exactly(f.fd(), t.data(), t.nbytes(), header_end, path);
  return t;
}

std::string serialize_npy(const HostTensor &t) {
  std::string out = npy_header(t);
  if (t.nbytes())
    out.append(reinterpret_cast<const char *>(t.data()), t.nbytes());
  return out;
}

void write_npy(const std::string &path, const HostTensor &t) {
  std::string header = npy_header(t);
  std::vector<std::pair<const void *, size_t>> chunks{{header.data(), header.size()}};
  if (t.nbytes())
    chunks.emplace_back(t.data(), t.nbytes());
  write_file_atomically(path, chunks);
}

} // namespace maxc

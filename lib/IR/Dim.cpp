#include "maxc/IR/Dim.h"

#include "maxc/Support/Error.h"

#include <algorithm>
#include <cctype>

namespace maxc {

static bool is_identifier(const std::string &s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_'))
    return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

static int64_t add_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    throw Error(ErrorCode::DimOverflow, "dimension arithmetic overflows 64 bits");
  return r;
}
static int64_t mul_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    throw Error(ErrorCode::DimOverflow, "dimension arithmetic overflows 64 bits");
  return r;
}

Dim::Dim(int64_t value) {
  if (value != 0)
    terms_[{}] = value;
}

Dim::Dim(const char *symbol) : Dim(std::string(symbol)) {}

Dim::Dim(const std::string &symbol) {
  if (!is_identifier(symbol))
    throw Error(ErrorCode::InvalidArgument,
                "invalid dim symbol '" + symbol + "' (expected an identifier like 'batch')");
  terms_[{symbol}] = 1;
}

bool Dim::is_static() const { return terms_.empty() || (terms_.size() == 1 && terms_.begin()->first.empty()); }

int64_t Dim::value() const {
  if (!is_static())
    throw Error(ErrorCode::UnboundDim, "dim '" + to_string() + "' is symbolic, a static size was expected");
  return terms_.empty() ? 0 : terms_.begin()->second;
}

bool Dim::is_symbol() const {
  return terms_.size() == 1 && terms_.begin()->first.size() == 1 && terms_.begin()->second == 1;
}

const std::string &Dim::symbol() const {
  if (!is_symbol())
    throw Error(ErrorCode::Internal, "dim '" + to_string() + "' is not a bare symbol");
  return terms_.begin()->first.front();
}

std::vector<std::string> Dim::symbols() const {
  std::vector<std::string> out;
  for (const auto &[mono, coeff] : terms_)
    out.insert(out.end(), mono.begin(), mono.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string Dim::to_string() const {
  if (terms_.empty())
    return "0";
  // Higher-degree terms first, constant last: "batch*seq+2*seq+1".
  std::vector<std::pair<Monomial, int64_t>> ordered(terms_.begin(), terms_.end());
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto &a, const auto &b) { return a.first.size() > b.first.size(); });
  std::string out;
  bool first = true;
  for (const auto &[mono, coeff] : ordered) {
    int64_t c = coeff;
    if (!first)
      out += c < 0 ? "-" : "+";
    else if (c < 0)
      out += "-";
    uint64_t mag = c < 0 ? 0 - static_cast<uint64_t>(c) : static_cast<uint64_t>(c);
    std::string body;
    if (mono.empty() || mag != 1)
      body = std::to_string(mag);
    for (const auto &s : mono)
      body += (body.empty() ? "" : "*") + s;
    out += body;
    first = false;
  }
  return out;
}

int64_t Dim::evaluate(const DimBindings &bindings) const {
  int64_t total = 0;
  for (const auto &[mono, coeff] : terms_) {
    int64_t term = coeff;
    for (const auto &s : mono) {
      auto it = bindings.find(s);
      if (it == bindings.end())
        throw Error(ErrorCode::UnboundDim, "symbolic dim '" + s + "' has no value");
      term = mul_checked(term, it->second);
    }
    total = add_checked(total, term);
  }
  return total;
}

Dim operator+(const Dim &a, const Dim &b) {
  Dim r = a;
  for (const auto &[mono, coeff] : b.terms_) {
    int64_t c = add_checked(r.terms_[mono], coeff);
    if (c == 0)
      r.terms_.erase(mono);
    else
      r.terms_[mono] = c;
  }
  return r;
}

Dim operator-(const Dim &a, const Dim &b) { return a + b * Dim(-1); }

Dim operator*(const Dim &a, const Dim &b) {
  Dim r(0);
  for (const auto &[ma, ca] : a.terms_)
    for (const auto &[mb, cb] : b.terms_) {
      Dim::Monomial m = ma;
      m.insert(m.end(), mb.begin(), mb.end());
      std::sort(m.begin(), m.end());
      int64_t c = add_checked(r.terms_.count(m) ? r.terms_[m] : 0, mul_checked(ca, cb));
      if (c == 0)
        r.terms_.erase(m);
      else
        r.terms_[m] = c;
    }
  return r;
}

std::optional<Dim> Dim::exact_div(const Dim &divisor) const {
  if (divisor.terms_.size() != 1)
    return std::nullopt; // only division by a single term (constant or monomial)
  const auto &[dm, dc] = *divisor.terms_.begin();
  Dim r(0);
  for (const auto &[mono, coeff] : terms_) {
    if (coeff % dc != 0)
      return std::nullopt;
    Monomial rest = mono;
    for (const auto &s : dm) {
      auto it = std::find(rest.begin(), rest.end(), s);
      if (it == rest.end())
        return std::nullopt;
      rest.erase(it);
    }
    r.terms_[rest] = coeff / dc;
  }
  return r;
}

Dim operator/(const Dim &a, const Dim &b) {
  if (auto q = a.exact_div(b))
    return *q;
  throw Error(ErrorCode::ShapeMismatch, "dim '" + a.to_string() + "' is not divisible by '" + b.to_string() + "'");
}

// Grammar: expr := term (('+'|'-') term)* ; term := factor ('*' factor)* ;
// factor := integer | identifier.
Dim Dim::parse(const std::string &text) {
  size_t pos = 0;
  auto fail = [&](const std::string &why) -> Error {
    return Error(ErrorCode::InvalidArgument, "malformed dim '" + text + "': " + why);
  };
  auto skip = [&] {
    while (pos < text.size() && text[pos] == ' ')
      ++pos;
  };
  auto factor = [&]() -> Dim {
    skip();
    if (pos >= text.size())
      throw fail("expected a number or a symbol");
    if (std::isdigit(static_cast<unsigned char>(text[pos]))) {
      int64_t v = 0;
      while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])))
        v = add_checked(mul_checked(v, 10), text[pos++] - '0');
      return Dim(v);
    }
    size_t start = pos;
    while (pos < text.size() && (std::isalnum(static_cast<unsigned char>(text[pos])) || text[pos] == '_'))
      ++pos;
    if (start == pos)
      throw fail("unexpected '" + std::string(1, text[pos]) + "'");
    return Dim(text.substr(start, pos - start));
  };
  auto term = [&]() -> Dim {
    Dim d = factor();
    skip();
    while (pos < text.size() && text[pos] == '*') {
      ++pos;
      d = d * factor();
      skip();
    }
    return d;
  };
  skip();
  bool negate = pos < text.size() && text[pos] == '-';
  if (negate)
    ++pos;
  Dim d = term();
  if (negate)
    d = d * Dim(-1);
  skip();
  while (pos < text.size()) {
    char op = text[pos];
    if (op != '+' && op != '-')
      throw fail("unexpected '" + std::string(1, op) + "'");
    ++pos;
    Dim t = term();
    d = op == '+' ? d + t : d - t;
    skip();
  }
  return d;
}

std::string shape_to_string(const Shape &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + shape[i].to_string();
  return s + "]";
}

Dim shape_numel(const Shape &shape) {
  Dim n(1);
  for (const Dim &d : shape)
    n = n * d;
  return n;
}

bool shape_is_static(const Shape &shape) {
  return std::all_of(shape.begin(), shape.end(), [](const Dim &d) { return d.is_static(); });
}

std::vector<int64_t> static_sizes(const Shape &shape) {
  std::vector<int64_t> out;
  for (const Dim &d : shape)
    out.push_back(d.value());
  return out;
}

std::vector<int64_t> evaluate_shape(const Shape &shape, const DimBindings &bindings) {
  std::vector<int64_t> out;
  for (const Dim &d : shape)
    out.push_back(d.evaluate(bindings));
  return out;
}

Shape make_shape(const std::vector<int64_t> &sizes) { return Shape(sizes.begin(), sizes.end()); }

} // namespace maxc

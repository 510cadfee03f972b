#include "maxc/IR/Dim.h"

#include "maxc/Support/Error.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <numeric>

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

// --- atoms ------------------------------------------------------------

DimAtom::DimAtom(std::string symbol) : kind_(Kind::Symbol), symbol_(std::move(symbol)) {}

DimAtom::DimAtom(Kind kind, std::vector<Dim> args)
    : kind_(kind), args_(std::make_shared<const std::vector<Dim>>(std::move(args))) {
  if (kind == Kind::Symbol)
    throw Error(ErrorCode::Internal, "a symbol atom takes a name, not operands");
}

const std::string &DimAtom::symbol() const {
  if (kind_ != Kind::Symbol)
    throw Error(ErrorCode::Internal, "dim atom '" + to_string() + "' is not a symbol");
  return symbol_;
}

const std::vector<Dim> &DimAtom::args() const {
  static const std::vector<Dim> none;
  return args_ ? *args_ : none;
}

std::string DimAtom::to_string() const {
  if (kind_ == Kind::Symbol)
    return symbol_;
  std::string out = kind_ == Kind::Min ? "min(" : kind_ == Kind::Max ? "max(" : "floordiv(";
  for (size_t i = 0; i < args().size(); ++i)
    out += (i ? "," : "") + args()[i].to_string();
  return out + ")";
}

bool DimAtom::operator==(const DimAtom &o) const {
  if (kind_ != o.kind_)
    return false;
  return kind_ == Kind::Symbol ? symbol_ == o.symbol_ : args() == o.args();
}

bool DimAtom::operator<(const DimAtom &o) const {
  if (kind_ != o.kind_)
    return kind_ < o.kind_;
  return kind_ == Kind::Symbol ? symbol_ < o.symbol_ : args() < o.args();
}

// --- Dim ----------------------------------------------------------------

Dim::Dim(int64_t value) {
  if (value != 0)
    terms_[{}] = value;
}

Dim::Dim(const char *symbol) : Dim(std::string(symbol)) {}

Dim::Dim(const std::string &symbol) {
  if (!is_identifier(symbol))
    throw Error(ErrorCode::InvalidArgument,
                "invalid dim symbol '" + symbol + "' (expected an identifier like 'batch')");
  terms_[{DimAtom(symbol)}] = 1;
}

Dim Dim::atom(DimAtom a) {
  Dim d;
  d.terms_[{std::move(a)}] = 1;
  return d;
}

const DimAtom *Dim::as_atom() const {
  if (terms_.size() == 1 && terms_.begin()->first.size() == 1 && terms_.begin()->second == 1)
    return &terms_.begin()->first.front();
  return nullptr;
}

bool Dim::is_static() const { return terms_.empty() || (terms_.size() == 1 && terms_.begin()->first.empty()); }

int64_t Dim::value() const {
  if (!is_static())
    throw Error(ErrorCode::UnboundDim, "dim '" + to_string() + "' is symbolic, a static size was expected");
  return terms_.empty() ? 0 : terms_.begin()->second;
}

bool Dim::is_symbol() const {
  const DimAtom *a = as_atom();
  return a && a->is_symbol();
}

const std::string &Dim::symbol() const {
  if (!is_symbol())
    throw Error(ErrorCode::Internal, "dim '" + to_string() + "' is not a bare symbol");
  return terms_.begin()->first.front().symbol();
}

static void collect_symbols(const Dim &d, std::vector<std::string> &out) {
  for (const DimTerm &t : d.terms())
    for (const DimAtom &a : t.factors) {
      if (a.is_symbol())
        out.push_back(a.symbol());
      for (const Dim &arg : a.args())
        collect_symbols(arg, out);
    }
}

std::vector<std::string> Dim::symbols() const {
  std::vector<std::string> out;
  collect_symbols(*this, out);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<DimTerm> Dim::terms() const {
  std::vector<DimTerm> out;
  for (const auto &[mono, coeff] : terms_)
    out.push_back({coeff, mono});
  // Higher-degree terms first, constant last: "batch*seq+2*seq+1".
  std::stable_sort(out.begin(), out.end(),
                   [](const DimTerm &a, const DimTerm &b) { return a.factors.size() > b.factors.size(); });
  return out;
}

std::string Dim::to_string() const {
  if (terms_.empty())
    return "0";
  std::string out;
  bool first = true;
  for (const DimTerm &t : terms()) {
    int64_t c = t.coeff;
    if (!first)
      out += c < 0 ? "-" : "+";
    else if (c < 0)
      out += "-";
    uint64_t mag = c < 0 ? 0 - static_cast<uint64_t>(c) : static_cast<uint64_t>(c);
    std::string body;
    if (t.factors.empty() || mag != 1)
      body = std::to_string(mag);
    for (const DimAtom &a : t.factors)
      body += (body.empty() ? "" : "*") + a.to_string();
    out += body;
    first = false;
  }
  return out;
}

static int64_t floor_div_value(int64_t n, int64_t d) {
  int64_t q = n / d;
  if (n % d != 0 && ((n < 0) != (d < 0)))
    --q;
  return q;
}

static int64_t evaluate_atom(const DimAtom &a, const DimBindings &bindings) {
  switch (a.kind()) {
  case DimAtom::Kind::Symbol: {
    auto it = bindings.find(a.symbol());
    if (it == bindings.end())
      throw Error(ErrorCode::UnboundDim, "symbolic dim '" + a.symbol() + "' has no value");
    return it->second;
  }
  case DimAtom::Kind::Min:
  case DimAtom::Kind::Max: {
    int64_t r = a.args().front().evaluate(bindings);
    for (const Dim &d : a.args()) {
      int64_t v = d.evaluate(bindings);
      r = a.kind() == DimAtom::Kind::Min ? std::min(r, v) : std::max(r, v);
    }
    return r;
  }
  case DimAtom::Kind::FloorDiv: {
    int64_t n = a.args()[0].evaluate(bindings), d = a.args()[1].evaluate(bindings);
    if (d <= 0)
      throw Error(ErrorCode::InvalidArgument,
                  "'" + a.to_string() + "' divides by " + std::to_string(d) + " (a divisor must be positive)");
    return floor_div_value(n, d);
  }
  }
  throw Error(ErrorCode::Internal, "unknown dim atom");
}

Dim Dim::substitute(const std::map<std::string, Dim> &values) const {
  Dim total(0);
  for (const auto &[mono, coeff] : terms_) {
    Dim term(coeff);
    for (const DimAtom &a : mono) {
      if (a.is_symbol()) {
        auto it = values.find(a.symbol());
        term = term * (it == values.end() ? Dim(a.symbol()) : it->second);
        continue;
      }
      std::vector<Dim> args;
      for (const Dim &arg : a.args())
        args.push_back(arg.substitute(values));
      term = term * (a.kind() == DimAtom::Kind::FloorDiv ? floor_div(args[0], args[1])
                     : a.kind() == DimAtom::Kind::Min    ? min(args)
                                                         : max(args));
    }
    total = total + term;
  }
  return total;
}

int64_t Dim::evaluate(const DimBindings &bindings) const {
  int64_t total = 0;
  for (const auto &[mono, coeff] : terms_) {
    int64_t term = coeff;
    for (const DimAtom &a : mono)
      term = mul_checked(term, evaluate_atom(a, bindings));
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
    for (const DimAtom &s : dm) {
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

Dim Dim::min_max(DimAtom::Kind kind, const std::vector<Dim> &operands) {
  if (operands.empty())
    throw Error(ErrorCode::InvalidArgument, "min/max of no dims");
  std::vector<Dim> args;
  for (const Dim &d : operands) {
    const DimAtom *a = d.as_atom();
    if (a && a->kind() == kind) // min(min(a,b),c) = min(a,b,c)
      args.insert(args.end(), a->args().begin(), a->args().end());
    else
      args.push_back(d);
  }
  std::sort(args.begin(), args.end());
  args.erase(std::unique(args.begin(), args.end()), args.end());
  // An operand that another exceeds (max) / undercuts (min) by a constant,
  // or by a sum of symbol products with non-negative coefficients (symbols
  // are dims: never negative), never wins, whatever the symbols are:
  // min(20, 600*n+20) is 20. (Two operands cannot each reach the other so:
  // their difference would be 0, and equal operands are one by now.)
  auto never_negative = [](const Dim &d) {
    for (const auto &[mono, coeff] : d.terms_)
      if (coeff < 0 || !std::all_of(mono.begin(), mono.end(), [](const DimAtom &a) { return a.is_symbol(); }))
        return false;
    return true;
  };
  std::vector<Dim> kept;
  for (size_t i = 0; i < args.size(); ++i) {
    bool loses = false;
    for (size_t j = 0; j < args.size() && !loses; ++j) {
      if (i == j)
        continue;
      Dim diff = kind == DimAtom::Kind::Max ? args[j] - args[i] : args[i] - args[j];
      loses = never_negative(diff);
    }
    if (!loses)
      kept.push_back(args[i]);
  }
  if (kept.size() == 1)
    return kept.front();
  return atom(DimAtom(kind, std::move(kept)));
}

Dim Dim::min(const std::vector<Dim> &operands) { return min_max(DimAtom::Kind::Min, operands); }
Dim Dim::max(const std::vector<Dim> &operands) { return min_max(DimAtom::Kind::Max, operands); }
Dim Dim::min(const Dim &a, const Dim &b) { return min(std::vector<Dim>{a, b}); }
Dim Dim::max(const Dim &a, const Dim &b) { return max(std::vector<Dim>{a, b}); }

Dim Dim::floor_div(const Dim &a, const Dim &divisor) {
  if (divisor.is_static() && divisor.value() <= 0)
    throw Error(ErrorCode::InvalidArgument, "floor_div of '" + a.to_string() + "' by " +
                                                std::to_string(divisor.value()) + " (a divisor must be positive)");
  // floor(floor(x/m)/n) = floor(x/(m*n)) for m, n > 0.
  if (const DimAtom *inner = a.as_atom(); inner && inner->kind() == DimAtom::Kind::FloorDiv)
    return floor_div(inner->args()[0], inner->args()[1] * divisor);
  if (!divisor.is_static()) {
    if (a.is_static() && a.value() == 0)
      return Dim(0);
    if (auto q = a.exact_div(divisor))
      return *q;
    return atom(DimAtom(DimAtom::Kind::FloorDiv, {a, divisor}));
  }
  int64_t k = divisor.value();
  if (a.is_static())
    return Dim(floor_div_value(a.value(), k));
  // Each coefficient c = k*q + r with 0 <= r < k: the multiples of k leave
  // the floor unchanged, the remainder stays inside it.
  Dim q, r;
  for (const auto &[mono, coeff] : a.terms_) {
    int64_t qc = floor_div_value(coeff, k), rc = coeff - qc * k;
    if (qc != 0)
      q.terms_[mono] = qc;
    if (rc != 0)
      r.terms_[mono] = rc;
  }
  if (r.is_static()) // 0 <= r < k
    return q;
  int64_t g = k;
  for (const auto &[mono, coeff] : r.terms_)
    g = std::gcd(g, coeff);
  if (g > 1) {
    r = r / Dim(g);
    k /= g;
  }
  if (const DimAtom *inner = r.as_atom(); inner && inner->kind() == DimAtom::Kind::FloorDiv)
    return q + floor_div(inner->args()[0], inner->args()[1] * Dim(k));
  // floor((floor(y/m) + c)/k) = floor((y + c*m)/(m*k)) for m, k > 0 and an
  // integer c: a chain of strided windows, floordiv(floordiv(h+1,2)+1,2),
  // is floordiv(h+3,4), one atom however deep the chain.
  if (r.terms_.size() == 2) {
    const DimAtom *inner = nullptr;
    int64_t c = 0;
    for (const auto &[mono, coeff] : r.terms_) {
      if (mono.empty())
        c = coeff;
      else if (mono.size() == 1 && coeff == 1 && mono[0].kind() == DimAtom::Kind::FloorDiv)
        inner = &mono[0];
    }
    if (inner && c != 0)
      return q + floor_div(inner->args()[0] + Dim(c) * inner->args()[1], inner->args()[1] * Dim(k));
  }
  return q + atom(DimAtom(DimAtom::Kind::FloorDiv, {r, Dim(k)}));
}

Dim Dim::ceil_div(const Dim &a, const Dim &divisor) { return Dim(0) - floor_div(Dim(0) - a, divisor); }

// Grammar: expr := ['-'] term (('+'|'-') term)* ; term := factor ('*' factor)* ;
// factor := integer | identifier | ('min'|'max'|'floordiv') '(' expr (',' expr)* ')' | '(' expr ')'.
Dim Dim::parse(const std::string &text) {
  size_t pos = 0;
  auto fail = [&](const std::string &why) -> Error {
    return Error(ErrorCode::InvalidArgument, "malformed dim '" + text + "': " + why);
  };
  auto skip = [&] {
    while (pos < text.size() && text[pos] == ' ')
      ++pos;
  };
  auto peek = [&](char c) {
    skip();
    return pos < text.size() && text[pos] == c;
  };
  auto expect = [&](char c) {
    if (!peek(c))
      throw fail(std::string("expected '") + c + "'");
    ++pos;
  };
  std::function<Dim()> expr;
  // Parentheses and min/max/floordiv nest by recursion: bounded, so hostile
  // text ("((((...") is an error, never a stack overflow.
  constexpr int kMaxDepth = 64;
  int depth = 0;
  struct Nest {
    int &depth;
    explicit Nest(int &d) : depth(d) { ++depth; }
    ~Nest() { --depth; }
  };
  auto factor = [&]() -> Dim {
    skip();
    if (pos >= text.size())
      throw fail("expected a number or a symbol");
    Nest nest(depth);
    if (depth > kMaxDepth)
      throw fail("nested deeper than " + std::to_string(kMaxDepth) + " levels");
    if (std::isdigit(static_cast<unsigned char>(text[pos]))) {
      int64_t v = 0;
      while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])))
        v = add_checked(mul_checked(v, 10), text[pos++] - '0');
      return Dim(v);
    }
    if (text[pos] == '(') {
      ++pos;
      Dim d = expr();
      expect(')');
      return d;
    }
    size_t start = pos;
    while (pos < text.size() && (std::isalnum(static_cast<unsigned char>(text[pos])) || text[pos] == '_'))
      ++pos;
    if (start == pos)
      throw fail("unexpected '" + std::string(1, text[pos]) + "'");
    std::string name = text.substr(start, pos - start);
    if ((name == "min" || name == "max" || name == "floordiv") && peek('(')) {
      ++pos;
      std::vector<Dim> args{expr()};
      while (peek(',')) {
        ++pos;
        args.push_back(expr());
      }
      expect(')');
      if (name == "floordiv") {
        if (args.size() != 2)
          throw fail("floordiv takes two operands");
        return floor_div(args[0], args[1]);
      }
      if (args.size() < 2)
        throw fail(name + " takes two or more operands");
      return name == "min" ? min(args) : max(args);
    }
    return Dim(name);
  };
  auto term = [&]() -> Dim {
    Dim d = factor();
    while (peek('*')) {
      ++pos;
      d = d * factor();
    }
    return d;
  };
  expr = [&]() -> Dim {
    bool negate = peek('-');
    if (negate)
      ++pos;
    Dim d = term();
    if (negate)
      d = d * Dim(-1);
    while (peek('+') || peek('-')) {
      char op = text[pos++];
      Dim t = term();
      d = op == '+' ? d + t : d - t;
    }
    return d;
  };
  Dim d = expr();
  skip();
  if (pos < text.size())
    throw fail("unexpected '" + std::string(1, text[pos]) + "'");
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

#include "maxc/Support/JsonCheck.h"

#include <nlohmann/json.hpp>

#include <set>

namespace maxc {

std::string json_pointer_escape(const std::string &token) {
  std::string out;
  for (char c : token) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::string JsonIssue::pointer() const {
  std::string out;
  for (const std::string &t : path)
    out += "/" + json_pointer_escape(t);
  return out;
}

namespace {

using json = nlohmann::json;

// nlohmann's SAX parser is iterative, so the scan itself is safe at any
// depth; the stack below is bounded by max_depth.
class StructureScanner : public nlohmann::json_sax<json> {
public:
  explicit StructureScanner(size_t max_depth) : max_depth_(max_depth) {}

  std::vector<JsonIssue> issues;

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t &) override { return value(); }
  bool string(string_t &) override { return value(); }
  bool binary(binary_t &) override { return value(); }
  bool start_object(std::size_t) override { return open(true); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t &k) override {
    Frame &f = stack_.back();
    f.token = k;
    if (!f.keys.insert(k).second) {
      JsonIssue issue;
      issue.kind = JsonIssue::Kind::duplicate_key;
      issue.path = path();
      issue.message = "duplicate key '" + k + "' (JSON readers disagree on which one counts; remove one)";
      issues.push_back(std::move(issue));
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string &, const nlohmann::detail::exception &) override {
    return false; // the DOM parser reports it with a position
  }

private:
  struct Frame {
    bool is_object = false;
    size_t next_index = 0;
    std::string token; // the current key, or the current element's index
    std::set<std::string> keys;
  };

  // A value starts at the current position of the innermost container.
  void element() {
    if (!stack_.empty() && !stack_.back().is_object)
      stack_.back().token = std::to_string(stack_.back().next_index++);
  }
  bool value() {
    element();
    return true;
  }
  bool open(bool is_object) {
    element();
    if (stack_.size() + 1 > max_depth_) {
      JsonIssue issue;
      issue.kind = JsonIssue::Kind::too_deep;
      issue.path = path();
      issue.message = "JSON nested deeper than " + std::to_string(max_depth_) + " levels here (the limit for maxc inputs)";
      issues.push_back(std::move(issue));
      return false;
    }
    stack_.push_back(Frame{is_object, 0, {}, {}});
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }
  std::vector<std::string> path() const {
    std::vector<std::string> out;
    for (const Frame &f : stack_)
      out.push_back(f.token);
    return out;
  }

  size_t max_depth_;
  std::vector<Frame> stack_;
};

} // namespace

std::vector<JsonIssue> check_json_structure(std::string_view text, size_t max_depth) {
  StructureScanner scanner(max_depth);
  json::sax_parse(text.begin(), text.end(), &scanner, nlohmann::detail::input_format_t::json,
                  /*strict=*/true);
  return std::move(scanner.issues);
}

} // namespace maxc

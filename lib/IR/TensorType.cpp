#include "maxc/IR/TensorType.h"

#include "maxc/Support/Error.h"

namespace maxc {

DeviceRef DeviceRef::parse(const std::string &text) {
  if (text == "cpu")
    return cpu();
  if (text.rfind("gpu:", 0) == 0 && text.size() > 4 && text.size() < 8) {
    int id = 0;
    for (size_t i = 4; i < text.size(); ++i) {
      if (text[i] < '0' || text[i] > '9')
        id = -1;
      if (id >= 0)
        id = id * 10 + (text[i] - '0');
    }
    if (id >= 0)
      return gpu(id);
  }
  throw Error(ErrorCode::InvalidArgument, "unknown device '" + text + "' (expected 'cpu' or 'gpu:N')");
}

std::string DeviceRef::to_string() const {
  return kind == Kind::cpu ? "cpu" : "gpu:" + std::to_string(id);
}

std::string TensorType::to_string() const {
  std::string s = std::string(dtype_name(dtype)) + shape_to_string(shape);
  if (device != DeviceRef::cpu())
    s += "@" + device.to_string();
  return s;
}

TensorType TensorType::parse(const std::string &text) {
  auto fail = [&] {
    return Error(ErrorCode::InvalidArgument, "malformed tensor type '" + text + "' (expected e.g. f32[batch,5])");
  };
  size_t open = text.find('[');
  size_t close = text.rfind(']');
  if (open == std::string::npos || close == std::string::npos || close < open)
    throw fail();
  auto dtype = parse_dtype(text.substr(0, open));
  if (!dtype)
    throw fail();
  TensorType t;
  t.dtype = *dtype;
  std::string dims = text.substr(open + 1, close - open - 1);
  size_t start = 0;
  while (!dims.empty() && start <= dims.size()) {
    size_t comma = dims.find(',', start);
    if (comma == std::string::npos)
      comma = dims.size();
    t.shape.push_back(Dim::parse(dims.substr(start, comma - start)));
    start = comma + 1;
  }
  std::string rest = text.substr(close + 1);
  if (!rest.empty()) {
    if (rest[0] != '@')
      throw fail();
    t.device = DeviceRef::parse(rest.substr(1));
  }
  return t;
}

} // namespace maxc

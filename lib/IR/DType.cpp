#include "maxc/IR/DType.h"

#include <iterator>

namespace maxc {

namespace {

constexpr bool table_in_enum_order() {
  if (std::size(kDTypeInfo) != std::size(kAllDTypes))
    return false;
  for (size_t i = 0; i < std::size(kDTypeInfo); ++i)
    if (static_cast<size_t>(kDTypeInfo[i].dtype) != i || kAllDTypes[i] != kDTypeInfo[i].dtype)
      return false;
  return true;
}
static_assert(table_in_enum_order(), "kDTypeInfo and kAllDTypes list every dtype in the enum's order");

template <typename Key, typename Field> std::optional<DType> find_dtype(Key key, Field field) {
  for (const DTypeInfo &info : kDTypeInfo)
    if (field(info) == key)
      return info.dtype;
  return std::nullopt;
}

} // namespace

std::optional<DType> parse_dtype(std::string_view name) {
  return find_dtype(name, [](const DTypeInfo &i) { return i.name; });
}

std::optional<DType> dtype_from_onnx_type(int32_t code) {
  return find_dtype(code, [](const DTypeInfo &i) { return i.onnx_type; });
}

std::optional<DType> dtype_from_npy_descr(std::string_view descr) {
  if (descr.empty())
    return std::nullopt;
  return find_dtype(descr, [](const DTypeInfo &i) { return i.npy_descr.empty() ? i.npy_descr : i.npy_descr.substr(1); });
}

std::optional<DType> dtype_from_safetensors_name(std::string_view name) {
  return find_dtype(name, [](const DTypeInfo &i) { return i.safetensors_name; });
}

std::string dtype_name_list() {
  std::string s;
  for (const DTypeInfo &info : kDTypeInfo)
    s += (s.empty() ? "" : ", ") + std::string(info.name);
  return s;
}

} // namespace maxc

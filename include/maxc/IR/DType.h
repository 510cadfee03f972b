// Element types of maxc tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace maxc {

enum class DType : uint8_t { f16, bf16, f32, f64, i8, i32, i64, boolean };

/// All dtypes in declaration order (for tests and help texts).
inline constexpr DType kAllDTypes[] = {DType::f16, DType::bf16, DType::f32, DType::f64,
                                       DType::i8,  DType::i32,  DType::i64, DType::boolean};

/// "f32", "bf16", "bool", ...
std::string_view dtype_name(DType dtype);
/// Inverse of dtype_name; nullopt for an unknown name.
std::optional<DType> parse_dtype(std::string_view name);
/// Bytes per element.
size_t dtype_size(DType dtype);
bool is_float(DType dtype);
bool is_integer(DType dtype); // i8 i32 i64 (not bool)
inline bool is_bool(DType dtype) { return dtype == DType::boolean; }

} // namespace maxc

// Element types of maxc tensors, and the one table of their properties.
//
// Every property of a dtype that more than one place needs (its name, width,
// class, signedness, accumulator, C type, and its codes in ONNX, .npy and
// safetensors files) is a field of DTypeInfo in kDTypeInfo below. Code reads
// the table (dtype_info(d).field, or a lookup by a file format's code) rather
// than spelling a switch over the dtypes. Adding a dtype: docs/adding-an-op.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace maxc {

enum class DType : uint8_t { f16, bf16, f32, f64, i8, i32, i64, boolean, u8, i16, u16, u32, u64 };

/// What kind of number a dtype holds.
enum class DTypeClass : uint8_t { floating, integer, boolean };

/// The properties of one dtype (a row of kDTypeInfo).
struct DTypeInfo {
  DType dtype;
  std::string_view name; ///< "f32", "bf16", "bool" (the text form of the IR and the model format)
  uint8_t bytes;         ///< bytes per element in memory
  uint8_t bits;          ///< bits of the value: 16 for f16, 1 for bool
  /// Binary digits a value holds exactly, as std::numeric_limits::digits:
  /// a float's significand bits with the implicit one, an integer's value
  /// bits without the sign, 1 for bool.
  uint8_t digits;
  /// A float's std::numeric_limits::max_exponent (its finite values are
  /// below 2^max_exponent); 0 for integers and bool.
  int16_t max_exponent;
  DTypeClass cls;
  bool is_signed;       ///< floats and signed integers; bool is unsigned (0 or 1)
  DType compute;        ///< the dtype elementwise code computes in (f16 and bf16: f32)
  DType accumulator;    ///< the dtype a sum or product of elements accumulates in
  std::string_view c_type;            ///< the C type of an element in the generated ABI (f16/bf16: their bits)
  int32_t onnx_type;                  ///< onnx.TensorProto.DataType code
  std::string_view npy_descr;         ///< NumPy's descr as NumPy writes it ("<f4"); empty: NumPy has no such dtype
  std::string_view safetensors_name;  ///< the safetensors header's dtype ("F32")
  std::string_view harness_tag;       ///< the T_* constant of the generated C harnesses
};

// clang-format off
/// One row per dtype, in the enum's order.
inline constexpr DTypeInfo kDTypeInfo[] = {
  // dtype          name    bytes bits digits maxexp class                  signed compute      accumulator  C type      ONNX npy    safetensors tag
  {DType::f16,     "f16",  2, 16, 11,   16, DTypeClass::floating, true,  DType::f32,  DType::f32, "uint16_t", 10, "<f2", "F16",  "T_F16"},
  {DType::bf16,    "bf16", 2, 16,  8,  128, DTypeClass::floating, true,  DType::f32,  DType::f32, "uint16_t", 16, "",    "BF16", "T_BF16"},
  {DType::f32,     "f32",  4, 32, 24,  128, DTypeClass::floating, true,  DType::f32,  DType::f32, "float",     1, "<f4", "F32",  "T_F32"},
  {DType::f64,     "f64",  8, 64, 53, 1024, DTypeClass::floating, true,  DType::f64,  DType::f64, "double",   11, "<f8", "F64",  "T_F64"},
  {DType::i8,      "i8",   1,  8,  7,    0, DTypeClass::integer,  true,  DType::i8,   DType::i64, "int8_t",    3, "|i1", "I8",   "T_I8"},
  {DType::i32,     "i32",  4, 32, 31,    0, DTypeClass::integer,  true,  DType::i32,  DType::i64, "int32_t",   6, "<i4", "I32",  "T_I32"},
  {DType::i64,     "i64",  8, 64, 63,    0, DTypeClass::integer,  true,  DType::i64,  DType::i64, "int64_t",   7, "<i8", "I64",  "T_I64"},
  {DType::boolean, "bool", 1,  1,  1,    0, DTypeClass::boolean,  false, DType::boolean, DType::i64, "uint8_t", 9, "|b1", "BOOL", "T_BOOL"},
  {DType::u8,      "u8",   1,  8,  8,    0, DTypeClass::integer,  false, DType::u8,   DType::i64, "uint8_t",   2, "|u1", "U8",   "T_U8"},
  {DType::i16,     "i16",  2, 16, 15,    0, DTypeClass::integer,  true,  DType::i16,  DType::i64, "int16_t",   5, "<i2", "I16",  "T_I16"},
  {DType::u16,     "u16",  2, 16, 16,    0, DTypeClass::integer,  false, DType::u16,  DType::i64, "uint16_t",  4, "<u2", "U16",  "T_U16"},
  {DType::u32,     "u32",  4, 32, 32,    0, DTypeClass::integer,  false, DType::u32,  DType::i64, "uint32_t", 12, "<u4", "U32",  "T_U32"},
  {DType::u64,     "u64",  8, 64, 64,    0, DTypeClass::integer,  false, DType::u64,  DType::u64, "uint64_t", 13, "<u8", "U64",  "T_U64"},
};
// clang-format on

/// All dtypes in declaration order (for tests and help texts).
inline constexpr DType kAllDTypes[] = {DType::f16, DType::bf16, DType::f32,     DType::f64, DType::i8,
                                       DType::i32, DType::i64,  DType::boolean, DType::u8,  DType::i16,
                                       DType::u16, DType::u32,  DType::u64};

constexpr const DTypeInfo &dtype_info(DType dtype) { return kDTypeInfo[static_cast<size_t>(dtype)]; }

/// "f32", "bf16", "bool", ...
constexpr std::string_view dtype_name(DType dtype) { return dtype_info(dtype).name; }
/// Inverse of dtype_name; nullopt for an unknown name.
std::optional<DType> parse_dtype(std::string_view name);
/// Bytes per element.
constexpr size_t dtype_size(DType dtype) { return dtype_info(dtype).bytes; }
constexpr bool is_float(DType dtype) { return dtype_info(dtype).cls == DTypeClass::floating; }
constexpr bool is_integer(DType dtype) { return dtype_info(dtype).cls == DTypeClass::integer; } // not bool
constexpr bool is_bool(DType dtype) { return dtype_info(dtype).cls == DTypeClass::boolean; }
/// Floats and signed integers (an integer's sign extends; bool's does not).
constexpr bool is_signed(DType dtype) { return dtype_info(dtype).is_signed; }

/// Whether casting `from` to `to` keeps every value of `from` exactly (so
/// cast(cast(x, to), t) == cast(x, t) for any t): bool casts exactly to
/// everything; nothing else casts exactly to bool; an integer to an integer
/// whose range holds it; an integer to a float whose significand holds its
/// digits (i8 and u8 into bf16, i32 into f64); a float to a float at least
/// as precise with at least its exponent range; never a float to an
/// integer. From the table's digits, max_exponent and signedness.
constexpr bool cast_is_exact(DType from, DType to) {
  const DTypeInfo &f = dtype_info(from), &t = dtype_info(to);
  if (from == to || f.cls == DTypeClass::boolean)
    return true;
  if (t.cls == DTypeClass::boolean)
    return false;
  if (f.cls == DTypeClass::floating)
    return t.cls == DTypeClass::floating && t.digits >= f.digits && t.max_exponent >= f.max_exponent;
  if (t.cls == DTypeClass::floating) // every float's max_exponent exceeds its digits
    return f.digits <= t.digits;
  // Integer to integer: an unsigned target holds no negative value.
  return t.is_signed ? f.digits <= t.digits : !f.is_signed && f.digits <= t.digits;
}

/// The dtype of an onnx.TensorProto.DataType code; nullopt where maxc has none.
std::optional<DType> dtype_from_onnx_type(int32_t code);
/// The dtype of a NumPy descr without its byte-order mark ("f4", "b1").
std::optional<DType> dtype_from_npy_descr(std::string_view descr);
/// The dtype of a safetensors header's dtype ("F32"); nullopt for others.
std::optional<DType> dtype_from_safetensors_name(std::string_view name);
/// The dtypes' names joined with ", " ("f16, bf16, ...") for messages.
std::string dtype_name_list();

} // namespace maxc

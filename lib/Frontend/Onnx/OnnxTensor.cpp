// ONNX TensorProto → HostTensor, including external data through mmap.
#include "OnnxTensor.h"

#include "maxc/Frontend/OnnxLoader.h"
#include "maxc/Support/Error.h"
#include "maxc/Support/FileSystem.h"

#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace maxc::onnx_import {

using onnx::TensorProto;

// The table's ONNX codes are onnx.proto's.
static_assert(dtype_info(DType::f16).onnx_type == TensorProto::FLOAT16 &&
              dtype_info(DType::bf16).onnx_type == TensorProto::BFLOAT16 &&
              dtype_info(DType::f32).onnx_type == TensorProto::FLOAT &&
              dtype_info(DType::f64).onnx_type == TensorProto::DOUBLE &&
              dtype_info(DType::i8).onnx_type == TensorProto::INT8 &&
              dtype_info(DType::i32).onnx_type == TensorProto::INT32 &&
              dtype_info(DType::i64).onnx_type == TensorProto::INT64 &&
              dtype_info(DType::boolean).onnx_type == TensorProto::BOOL &&
              dtype_info(DType::u8).onnx_type == TensorProto::UINT8 &&
              dtype_info(DType::i16).onnx_type == TensorProto::INT16 &&
              dtype_info(DType::u16).onnx_type == TensorProto::UINT16 &&
              dtype_info(DType::u32).onnx_type == TensorProto::UINT32 &&
              dtype_info(DType::u64).onnx_type == TensorProto::UINT64);

std::optional<DType> dtype_from_onnx(int32_t type) { return dtype_from_onnx_type(type); }

std::string onnx_dtype_name(int32_t type) {
  if (TensorProto::DataType_IsValid(type))
    return TensorProto::DataType_Name(static_cast<TensorProto::DataType>(type));
  return "data type " + std::to_string(type);
}

int64_t checked_numel(const std::vector<int64_t> &dims, DType dtype, const std::string &what) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0)
      throw Error(ErrorCode::OnnxTensorData, what + " has a negative dim " + std::to_string(d));
    if (__builtin_mul_overflow(n, d, &n))
      throw Error(ErrorCode::OnnxTensorData, what + ": its dims overflow");
  }
  if (n > (int64_t(1) << 40) / int64_t(dtype_size(dtype)))
    throw Error(ErrorCode::OnnxTensorData, what + " is larger than 2^40 bytes");
  return n;
}

namespace {

/// A read-only mapping of a whole file, shared by the tensors that view it.
std::shared_ptr<std::byte> map_file(const std::string &path, uint64_t &size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw Error(ErrorCode::OnnxExternalData, "cannot open external data file " + path);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(ErrorCode::OnnxExternalData, "external data " + path + " is not a regular file");
  }
  size = static_cast<uint64_t>(st.st_size);
  std::shared_ptr<const std::byte> mapping = size ? map_file_readonly(fd, static_cast<size_t>(size)) : nullptr;
  ::close(fd);
  if (size && !mapping)
    throw Error(ErrorCode::OnnxExternalData, "cannot map external data file " + path);
  if (!size)
    return std::shared_ptr<std::byte>(new std::byte[1], std::default_delete<std::byte[]>());
  return std::const_pointer_cast<std::byte>(mapping);
}

uint64_t parse_u64(const std::string &text, const std::string &what) {
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos)
    throw Error(ErrorCode::OnnxExternalData, what + " '" + text + "' is not a non-negative integer");
  return std::stoull(text);
}

HostTensor external_tensor(const TensorProto &t, DType dtype, const std::vector<int64_t> &shape, uint64_t nbytes,
                           const std::string &model_dir, std::vector<std::string> *files_read) {
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const auto &entry : t.external_data()) {
    if (entry.key() == "location")
      location = entry.value();
    else if (entry.key() == "offset")
      offset = parse_u64(entry.value(), "external data offset");
    else if (entry.key() == "length")
      length = parse_u64(entry.value(), "external data length");
  }
  if (location.empty())
    throw Error(ErrorCode::OnnxExternalData, "tensor '" + t.name() + "' has external data without a location");
  // The location is relative to the model's folder and must stay inside it.
  if (location[0] == '/' || location.find('\\') != std::string::npos || location.find('\0') != std::string::npos)
    throw Error(ErrorCode::OnnxExternalData,
                "external data location '" + location + "' of tensor '" + t.name() + "' is not a relative path");
  std::stringstream parts(location);
  for (std::string part; std::getline(parts, part, '/');)
    if (part == "..")
      throw Error(ErrorCode::OnnxExternalData,
                  "external data location '" + location + "' of tensor '" + t.name() + "' leaves the model's folder");
  std::string path = (model_dir.empty() ? std::string(".") : model_dir) + "/" + location;
  uint64_t size = 0;
  std::shared_ptr<std::byte> file = map_file(path, size);
  if (length && *length != nbytes)
    throw Error(ErrorCode::OnnxExternalData, "tensor '" + t.name() + "': external data length " +
                                                 std::to_string(*length) + " disagrees with its shape (" +
                                                 std::to_string(nbytes) + " bytes)");
  if (offset > size || nbytes > size - offset)
    throw Error(ErrorCode::OnnxExternalData, "tensor '" + t.name() + "': bytes [" + std::to_string(offset) + ", " +
                                                 std::to_string(offset + nbytes) + ") are outside " + path + " (" +
                                                 std::to_string(size) + " bytes)");
  if (files_read && std::find(files_read->begin(), files_read->end(), path) == files_read->end())
    files_read->push_back(path);
  if (offset % 64 != 0) { // aligned views alias the mapping; others are copied
    HostTensor copy(dtype, shape);
    std::memcpy(copy.data(), file.get() + offset, nbytes);
    return copy;
  }
  std::shared_ptr<std::byte> view(file, file.get() + offset);
  return HostTensor(dtype, shape, view);
}

} // namespace

HostTensor tensor_from_proto(const TensorProto &t, const std::string &model_dir, std::vector<std::string> *files_read) {
  std::string what = "tensor '" + t.name() + "'";
  std::optional<DType> dtype = dtype_from_onnx(t.data_type());
  if (!dtype)
    throw Error(ErrorCode::OnnxUnsupportedType, what + " has type " + onnx_dtype_name(t.data_type()) +
                                                    ", which maxc does not support");
  if (t.has_segment())
    throw Error(ErrorCode::OnnxUnsupportedType, what + " is segmented, which maxc does not support");
  std::vector<int64_t> shape(t.dims().begin(), t.dims().end());
  int64_t numel = checked_numel(shape, *dtype, what);
  uint64_t nbytes = static_cast<uint64_t>(numel) * dtype_size(*dtype);
  if (t.data_location() == TensorProto::EXTERNAL)
    return external_tensor(t, *dtype, shape, nbytes, model_dir, files_read);

  auto count_error = [&](size_t got) {
    return Error(ErrorCode::OnnxTensorData, what + " holds " + std::to_string(got) + " element(s) but its shape " +
                                                "needs " + std::to_string(numel));
  };
  HostTensor out(*dtype, shape);
  if (t.has_raw_data()) {
    if (t.raw_data().size() != nbytes)
      throw Error(ErrorCode::OnnxTensorData, what + " holds " + std::to_string(t.raw_data().size()) +
                                                 " raw byte(s) but its shape needs " + std::to_string(nbytes));
    if (nbytes)
      std::memcpy(out.data(), t.raw_data().data(), nbytes);
    return out;
  }
  auto copy_field = [&](const auto &field) { // a typed field of the tensor's own element type
    if (field.size() != numel)
      throw count_error(static_cast<size_t>(field.size()));
    if (numel)
      std::memcpy(out.data(), field.data(), nbytes);
  };
  // Which typed field holds the elements (onnx.proto): float_data, double_data
  // and int64_data their own types; uint64_data uint32 and uint64; int32_data
  // the other integers, bool and the 16-bit floats' bits.
  const DTypeInfo &info = dtype_info(*dtype);
  if (*dtype == DType::f32) {
    copy_field(t.float_data());
  } else if (*dtype == DType::f64) {
    copy_field(t.double_data());
  } else if (info.cls == DTypeClass::integer && info.bytes == 8 && info.is_signed) {
    copy_field(t.int64_data());
  } else if (info.cls == DTypeClass::integer && info.bytes >= 4 && !info.is_signed) {
    if (t.uint64_data_size() != numel)
      throw count_error(t.uint64_data_size());
    for (int64_t i = 0; i < numel; ++i)
      out.set_i64(i, static_cast<int64_t>(t.uint64_data(i)));
  } else {
    if (t.int32_data_size() != numel)
      throw count_error(t.int32_data_size());
    for (int64_t i = 0; i < numel; ++i) {
      if (info.cls == DTypeClass::floating)
        out.data_as<uint16_t>()[i] = static_cast<uint16_t>(t.int32_data(i));
      else
        out.set_i64(i, t.int32_data(i));
    }
  }
  return out;
}

} // namespace maxc::onnx_import

namespace maxc {

HostTensor read_onnx_tensor_file(const std::string &path, std::optional<DType> declared) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(ErrorCode::FileNotReadable, "cannot open " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string bytes = buffer.str();
  onnx::TensorProto t;
  if (!t.ParseFromString(bytes))
    throw Error(ErrorCode::OnnxFormat, path + " is not a serialized ONNX TensorProto");
  if (declared == DType::bf16 && t.data_type() == onnx::TensorProto::UINT16)
    t.set_data_type(onnx::TensorProto::BFLOAT16); // the same 16 bits per element
  std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  return onnx_import::tensor_from_proto(t, dir, nullptr);
}

} // namespace maxc

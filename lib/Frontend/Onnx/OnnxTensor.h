// Internal to the ONNX front end: protobuf TensorProto ↔ HostTensor.
#pragma once

#include "maxc/IR/HostTensor.h"

#include "onnx.pb.h"

#include <optional>
#include <string>
#include <vector>

namespace maxc::onnx_import {

/// The maxc dtype of an ONNX TensorProto.DataType; nullopt when maxc has none
/// (uint8, int16, string, complex, ...).
std::optional<DType> dtype_from_onnx(int32_t type);
/// The ONNX name of a TensorProto.DataType ("UINT8") for messages.
std::string onnx_dtype_name(int32_t type);

/// Element count of `dims`, checked: negative or overflowing dims throw
/// OnnxTensorData, as does a tensor larger than 2^40 bytes.
int64_t checked_numel(const std::vector<int64_t> &dims, DType dtype, const std::string &what);

/// Converts a TensorProto. External data (`data_location = EXTERNAL`) is
/// memory-mapped from `model_dir` (locations escaping it are refused) and
/// the file is appended to `files_read`. Throws maxc::Error.
HostTensor tensor_from_proto(const onnx::TensorProto &t, const std::string &model_dir,
                             std::vector<std::string> *files_read);

} // namespace maxc::onnx_import

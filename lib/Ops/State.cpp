// Model state: buffers a graph updates in place (a KV cache).
//
// A state buffer is a graph input [capacity, *R] named in the root's
// ModelState (IR/SymbolTable.h). Two ops read it, both views of its first
// rows, so neither copies the buffer (OpTrait::aliases_operand: result 0
// lives in operand 0's storage):
//
//   buffer_prefix(buf, length)     -> buf[0 : length]            (reads)
//   buffer_append(buf, x, offset)  -> buf[0 : offset + n] after writing
//                                     x [n, *R] at rows [offset, offset + n)
//
// `length` and `offset` are Dim attributes (symbols: the state's length).
// buffer_append is an effect (OpTrait::writes_buffer): it is live whether or
// not its result is read, and a buffer has at most one writer per run, so a
// buffer_prefix(buf, offset) of the same run never sees the written rows.
// The reference kernels work in place on the operand's storage (HostTensor
// shares it), as the code generators do.
#include "Families.h"
#include "OpHelpers.h"
#include "maxc/Ops/OpRegistry.h"
#include "maxc/Ops/Ops.h"
#include "maxc/Realization/RealizationContext.h"

#include <cstring>

namespace maxc {
using namespace ophelpers;

namespace {

/// rows as a Dim attribute: a one-element shape attribute.
const Dim &rows_attr(const Attrs &attrs, const char *name, const std::string &op) {
  const Shape &s = attrs.get_shape(name);
  if (s.size() != 1)
    fail_attr(op, std::string(name) + " must hold one dim, got " + shape_to_string(s));
  return s[0];
}

void require_buffer(const std::string &op, const TensorType &buf) {
  if (buf.rank() < 1)
    fail_shape(op, "the buffer " + buf.to_string() + " must have a leading rows dim");
}

OpDef buffer_prefix_op() {
  OpDef def;
  def.name = "buffer_prefix";
  def.traits = OpTrait::structural | OpTrait::aliases_operand;
  def.summary = "the first `length` rows of a state buffer (a view: no copy)";
  def.attrs = {{"length", AttrKind::shape, std::nullopt, "rows (one dim, e.g. [past])"}};
  def.infer = [](const InferContext &c) {
    const std::string op = "buffer_prefix";
    const TensorType &buf = c.operands[0];
    require_buffer(op, buf);
    Shape out = buf.shape;
    out[0] = rows_attr(c.attrs, "length", op);
    return std::vector<TensorType>{TensorType(buf.dtype, out, buf.device)};
  };
  def.reference = [](const ReferenceContext &c) {
    const HostTensor &buf = c.operands[0];
    if (c.result_shapes[0][0] > buf.shape()[0])
      throw Error(ErrorCode::InvalidArgument, "buffer_prefix: " + std::to_string(c.result_shapes[0][0]) +
                                                  " rows of a buffer of " + std::to_string(buf.shape()[0]));
    return std::vector<HostTensor>{HostTensor(buf.dtype(), c.result_shapes[0], buf.storage())};
  };
  return def;
}

OpDef buffer_append_op() {
  OpDef def;
  def.name = "buffer_append";
  def.traits = OpTrait::structural | OpTrait::aliases_operand | OpTrait::writes_buffer;
  def.summary = "writes x at rows [offset, offset + n) of a state buffer in place; the result is its first "
                "offset + n rows (a view)";
  def.min_operands = 2;
  def.max_operands = 2;
  def.attrs = {{"offset", AttrKind::shape, std::nullopt, "the first row written (one dim, e.g. [past])"}};
  def.infer = [](const InferContext &c) {
    const std::string op = "buffer_append";
    const TensorType &buf = c.operands[0], &x = c.operands[1];
    require_buffer(op, buf);
    require_same_dtype(op, {buf, x});
    require_same_device(op, c.operands);
    if (x.rank() != buf.rank() || Shape(x.shape.begin() + 1, x.shape.end()) != Shape(buf.shape.begin() + 1, buf.shape.end()))
      fail_shape(op, "rows " + x.to_string() + " must match the buffer " + buf.to_string() + " but for the first dim");
    Shape out = buf.shape;
    out[0] = rows_attr(c.attrs, "offset", op) + x.shape[0];
    return std::vector<TensorType>{TensorType(buf.dtype, out, buf.device)};
  };
  def.reference = [](const ReferenceContext &c) {
    const HostTensor &buf = c.operands[0], &x = c.operands[1];
    int64_t rows = x.shape()[0], end = c.result_shapes[0][0], offset = end - rows;
    if (end > buf.shape()[0])
      throw Error(ErrorCode::InvalidArgument, "buffer_append: rows [" + std::to_string(offset) + ", " +
                                                  std::to_string(end) + ") of a buffer of " +
                                                  std::to_string(buf.shape()[0]));
    size_t row_bytes = x.nbytes() / static_cast<size_t>(rows == 0 ? 1 : rows);
    if (rows > 0) // in place: the buffer's storage is the state's
      std::memcpy(const_cast<std::byte *>(buf.data()) + static_cast<size_t>(offset) * row_bytes, x.data(),
                  x.nbytes());
    return std::vector<HostTensor>{HostTensor(buf.dtype(), c.result_shapes[0], buf.storage())};
  };
  return def;
}

} // namespace

void register_state_ops(OpRegistry &registry) {
  registry.add(buffer_prefix_op());
  registry.add(buffer_append_op());
}

namespace ops {

Tensor buffer_prefix(const Tensor &buffer, const Dim &length) {
  return record_op("buffer_prefix", {buffer}, {{"length", Shape{length}}});
}

Tensor buffer_append(const Tensor &buffer, const Tensor &rows, const Dim &offset) {
  return record_op("buffer_append", {buffer, rows}, {{"offset", Shape{offset}}});
}

} // namespace ops
} // namespace maxc

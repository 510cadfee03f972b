#include "OpHelpers.h"

#include <algorithm>
#include <optional>

namespace maxc::ophelpers {

void fail_shape(const std::string &op, const std::string &message) {
  throw Error(ErrorCode::ShapeMismatch, op + ": " + message);
}
void fail_dtype(const std::string &op, const std::string &message) {
  throw Error(ErrorCode::DTypeMismatch, op + ": " + message);
}
void fail_attr(const std::string &op, const std::string &message) {
  throw Error(ErrorCode::InvalidAttribute, op + ": " + message);
}

void require_same_dtype(const std::string &op, const std::vector<TensorType> &types) {
  for (size_t i = 1; i < types.size(); ++i)
    if (types[i].dtype != types[0].dtype)
      fail_dtype(op, "operands must have the same dtype, got " + types[0].to_string() + " and " +
                         types[i].to_string() + " (insert a cast)");
}

void require_float(const std::string &op, const TensorType &t, const char *what) {
  if (!is_float(t.dtype))
    fail_dtype(op, std::string(what) + " must be a floating-point tensor, got " + t.to_string());
}

void require_dtype(const std::string &op, const TensorType &t, DType dtype, const char *what) {
  if (t.dtype != dtype)
    fail_dtype(op, std::string(what) + " must be " + std::string(dtype_name(dtype)) + ", got " + t.to_string());
}

void require_numeric(const std::string &op, const TensorType &t, const char *what) {
  if (is_bool(t.dtype))
    fail_dtype(op, std::string(what) + " must be numeric, got " + t.to_string());
}

void require_integer(const std::string &op, const TensorType &t, const char *what) {
  if (!is_integer(t.dtype))
    fail_dtype(op, std::string(what) + " must be an integer tensor (i8, i32, i64), got " + t.to_string());
}

void require_rank(const std::string &op, const TensorType &t, int64_t rank, const char *what) {
  if (t.rank() != rank)
    fail_shape(op, std::string(what) + " must have rank " + std::to_string(rank) + ", got " + t.to_string());
}

void require_min_rank(const std::string &op, const TensorType &t, int64_t rank, const char *what) {
  if (t.rank() < rank)
    fail_shape(op, std::string(what) + " must have rank >= " + std::to_string(rank) + ", got " + t.to_string());
}

void require_same_device(const std::string &op, const std::vector<TensorType> &types) {
  for (size_t i = 1; i < types.size(); ++i)
    if (types[i].device != types[0].device)
      throw Error(ErrorCode::InvalidArgument, op + ": operands are on different devices (" +
                                                  types[0].device.to_string() + " and " +
                                                  types[i].device.to_string() + ")");
}

int64_t normalize_axis(const std::string &op, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank || (rank == 0 && axis != 0))
    fail_attr(op, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> normalize_axes(const std::string &op, const std::vector<int64_t> &axes, int64_t rank,
                                    bool empty_means_all) {
  std::vector<int64_t> out;
  if (axes.empty() && empty_means_all) {
    for (int64_t i = 0; i < rank; ++i)
      out.push_back(i);
    return out;
  }
  for (int64_t a : axes)
    out.push_back(normalize_axis(op, a, rank));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    fail_attr(op, "axes contain a duplicate");
  return out;
}

std::string pin_hint(const Dim &d, int64_t want) {
  std::vector<std::string> syms = d.symbols();
  if (syms.empty())
    return "";
  std::string text = "; the model fixes it at " + std::to_string(want);
  if (syms.size() == 1) {
    // The smallest v with d(v) >= want (sizes grow with their symbol), if it
    // gives want exactly.
    auto at = [&](int64_t v) -> std::optional<int64_t> {
      try {
        return d.evaluate({{syms[0], v}});
      } catch (const Error &) {
        return std::nullopt;
      }
    };
    auto first_above = [&](int64_t bar) { // the smallest v with d(v) >= bar
      int64_t lo = 0, hi = int64_t{1} << 40;
      while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        std::optional<int64_t> v = at(mid);
        if (v && *v >= bar)
          hi = mid;
        else
          lo = mid + 1;
      }
      return lo;
    };
    int64_t lo = first_above(want), last = first_above(want + 1) - 1;
    if (std::optional<int64_t> v = at(lo); v && *v == want)
      return text + ": pin it with --dim " + syms[0] + "=" + std::to_string(lo) +
             (last > lo ? " (any value up to " + std::to_string(last) + " gives it too)" : "");
  }
  std::string names;
  for (const std::string &s : syms)
    names += (names.empty() ? "" : ", ") + s;
  return text + ": pin " + names + " with --dim NAME=N";
}

Shape broadcast_shapes(const std::string &op, const Shape &a, const Shape &b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Align from the right.
    const Dim *da = i < rank - a.size() ? nullptr : &a[i - (rank - a.size())];
    const Dim *db = i < rank - b.size() ? nullptr : &b[i - (rank - b.size())];
    if (!da) { out[i] = *db; continue; }
    if (!db) { out[i] = *da; continue; }
    if (*da == *db)
      out[i] = *da;
    else if (da->is_static() && da->value() == 1)
      out[i] = *db;
    else if (db->is_static() && db->value() == 1)
      out[i] = *da;
    else
      fail_shape(op, "cannot broadcast shapes " + shape_to_string(a) + " and " + shape_to_string(b) + " (dim " +
                         std::to_string(i) + ": " + da->to_string() + " vs " + db->to_string() + ")" +
                         (db->is_static() ? pin_hint(*da, db->value()) : pin_hint(*db, da->is_static() ? da->value() : 1)));
  }
  return out;
}

std::vector<int64_t> strides_of(const std::vector<int64_t> &shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    s[i] = s[i + 1] * shape[i + 1];
  return s;
}

int64_t numel_of(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::vector<int64_t> unravel(int64_t i, const std::vector<int64_t> &shape) {
  std::vector<int64_t> idx(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = shape[d] ? i % shape[d] : 0;
    i = shape[d] ? i / shape[d] : 0;
  }
  return idx;
}

std::vector<int64_t> broadcast_index_map(const std::vector<int64_t> &in, const std::vector<int64_t> &out) {
  int64_t n = numel_of(out);
  std::vector<int64_t> map(static_cast<size_t>(n));
  std::vector<int64_t> in_strides = strides_of(in);
  size_t offset = out.size() - in.size();
  std::vector<int64_t> idx(out.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t lin = 0;
    for (size_t d = 0; d < in.size(); ++d)
      lin += (in[d] == 1 ? 0 : idx[d + offset]) * in_strides[d];
    map[i] = lin;
    // increment the multi-index
    for (int64_t d = static_cast<int64_t>(out.size()) - 1; d >= 0; --d) {
      if (++idx[d] < out[d])
        break;
      idx[d] = 0;
    }
  }
  return map;
}

} // namespace maxc::ophelpers

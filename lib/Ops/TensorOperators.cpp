// Tensor's arithmetic operators (declared in Tensor/Tensor.h): each records
// the op through the functional API, so they live with the ops, above Tensor.
#include "maxc/Ops/Ops.h"
#include "maxc/Tensor/Tensor.h"

namespace maxc {

static Tensor scalar_like(const Tensor &t, double v) { return ops::scalar(v, t.dtype()); }

Tensor operator+(const Tensor &a, const Tensor &b) { return ops::add(a, b); }
Tensor operator-(const Tensor &a, const Tensor &b) { return ops::sub(a, b); }
Tensor operator*(const Tensor &a, const Tensor &b) { return ops::mul(a, b); }
Tensor operator/(const Tensor &a, const Tensor &b) { return ops::div(a, b); }
Tensor operator+(const Tensor &a, double b) { return ops::add(a, scalar_like(a, b)); }
Tensor operator-(const Tensor &a, double b) { return ops::sub(a, scalar_like(a, b)); }
Tensor operator*(const Tensor &a, double b) { return ops::mul(a, scalar_like(a, b)); }
Tensor operator/(const Tensor &a, double b) { return ops::div(a, scalar_like(a, b)); }
Tensor operator+(double a, const Tensor &b) { return ops::add(scalar_like(b, a), b); }
Tensor operator-(double a, const Tensor &b) { return ops::sub(scalar_like(b, a), b); }
Tensor operator*(double a, const Tensor &b) { return ops::mul(scalar_like(b, a), b); }
Tensor operator/(double a, const Tensor &b) { return ops::div(scalar_like(b, a), b); }
Tensor operator-(const Tensor &a) { return ops::neg(a); }

} // namespace maxc

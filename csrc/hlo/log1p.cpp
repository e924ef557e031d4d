#include "log1p.h"

#include <limits>

#include "arithmetic.h"
#include "trig.h"

namespace tpu::hlo {

Value log_plus_one(Builder& b, const Value& x) {
  if (!b.for_xla_cpu() || x.element() != ElementType::F32 ||
      x.type.num_elements() < kVectorTrigMinElements) {
    return b.unary("log_plus_one", x);
  }
  // The barrier keeps XLA's simplifier from folding (1 + x) - 1 to x, which is the point.
  Value u = b.optimization_barrier(b.binary("add", splat(b, 1, x), x));
  Value ratio = b.binary("divide", x, b.binary("subtract", u, splat(b, 1, x)));
  Value result = b.binary("multiply", b.unary("log", u), ratio);
  // u == 1: x is below half an ULP of 1 and log1p(x) is x (its sign included); x = +inf gives
  // inf / inf in the ratio. -1, below -1 and NaN come out of the formula as -inf and NaN.
  result = b.select(b.compare(Compare::EQ, u, splat(b, 1, x)), x, result);
  Value infinity = splat(b, std::numeric_limits<double>::infinity(), x);
  return b.select(b.compare(Compare::EQ, x, infinity), x, result);
}

}  // namespace tpu::hlo

#include "arithmetic.h"

#include <stdexcept>

namespace tpu::hlo {

Value splat(Builder& b, double v, const Value& like) {
  return b.broadcast_to(b.constant(v, like.element()), like.dims());
}
Value add(Builder& b, const Value& x, const Value& y) { return b.binary("add", x, y); }
Value sub(Builder& b, const Value& x, const Value& y) { return b.binary("subtract", x, y); }
Value mul(Builder& b, const Value& x, const Value& y) { return b.binary("multiply", x, y); }
Value div(Builder& b, const Value& x, const Value& y) { return b.binary("divide", x, y); }

Value horner(Builder& b, const Value& x, std::initializer_list<double> coefficients) {
  if (coefficients.size() == 0) throw std::invalid_argument("horner: no coefficients");
  Value y = splat(b, *coefficients.begin(), x);
  for (auto c = coefficients.begin() + 1; c != coefficients.end(); ++c) {
    y = add(b, mul(b, y, x), splat(b, *c, x));
  }
  return y;
}

Value sign_bit_set(Builder& b, const Value& x) {
  const size_t bytes = byte_size(x.element());
  const ElementType ints = bytes == 8   ? ElementType::S64
                           : bytes == 4 ? ElementType::S32
                                        : ElementType::S16;
  Value bits = b.bitcast_convert(x, TensorType{ints, x.dims()});
  return b.compare(Compare::LT, bits, splat(b, 0, bits));
}

}  // namespace tpu::hlo

// Random numbers drawn on the device from the device generator (seed, offset):
// uniform_, normal_, random_, bernoulli_. Each call takes a fresh key at run time.
#include <ATen/Dispatch_v2.h>
#include <ATen/native/DistributionTemplates.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/view_as_real.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include "aten/dtype.h"
#include "aten/generator.h"
#include "aten/ops/all.h"
#include "aten/program.h"
#include "hlo/trig.h"

namespace tpu::aten {

namespace {

using hlo::Builder;
using hlo::ElementType;
using hlo::TensorType;
using hlo::Value;

Value splat(Builder& b, double v, ElementType type, const std::vector<int64_t>& dims) {
  return b.broadcast_to(b.constant(v, type), dims);
}

ElementType float_work_type(const at::Tensor& self) {
  return self.scalar_type() == c10::kDouble ? ElementType::F64 : ElementType::F32;
}

}  // namespace

// Uniform floats (declared in generator.h) in [0, 1) of `type` (f32 or f64), built from the top
// mantissa bits.
Value uniform01(Program& p, const std::vector<int64_t>& dims, ElementType type,
                const std::optional<at::Generator>& generator, c10::DeviceIndex device) {
  Builder& b = p.b();
  const bool wide = type == ElementType::F64;
  const ElementType bits_type = wide ? ElementType::U64 : ElementType::U32;
  Value bits = b.rng_bit_generator(p.key(next_random_key(generator, device)),
                                   TensorType{bits_type, dims})[1];
  Value shift = splat(b, wide ? 12 : 9, bits_type, dims);
  Value exponent_of_one = splat(b, wide ? 4607182418800017408.0 : 1065353216.0, bits_type, dims);
  Value in_one_two = b.binary("or", b.binary("shift_right_logical", bits, shift), exponent_of_one);
  Value one_to_two = b.bitcast_convert(in_one_two, TensorType{type, dims});
  return b.binary("subtract", one_to_two, splat(b, 1, type, dims));
}

at::Tensor& uniform_(at::Tensor& self, double from, double to,
                     std::optional<at::Generator> generator) {
  // The CPU's order: a complex tensor draws its real and imaginary parts alike, other
  // dtypes must be floating point, then the range check.
  if (self.is_complex()) {
    at::Tensor parts = at::view_as_real(self);
    uniform_(parts, from, to, generator);
    return self;
  }
  // The CPU's check_uniform_bounds, in its words: a floating dtype (else its
  // NotImplementedError), both ends within the dtype, and a span it can hold.
  AT_DISPATCH_FLOATING_TYPES_AND2(
      c10::kHalf, c10::kBFloat16, self.scalar_type(), "check_uniform_bounds", [&] {
        const auto lowest = static_cast<double>(std::numeric_limits<scalar_t>::lowest());
        const auto max = static_cast<double>(std::numeric_limits<scalar_t>::max());
        TORCH_CHECK(from >= lowest && from <= max, "from is out of bounds for ", self.dtype());
        TORCH_CHECK(to >= lowest && to <= max, "to is out of bounds for ", self.dtype());
        TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=",
                    from, " > to=", to);
        TORCH_CHECK(to - from <= max, "uniform_ expects to-from <= std::numeric_limits<",
                    c10::toString(self.scalar_type()), ">::max(), but found to=", to, " and from=",
                    from, " which result in to-from to exceed the limit");
      });
  if (self.numel() == 0) return self;
  Program p("aten::uniform_");
  Builder& b = p.b();
  std::vector<int64_t> dims = self.sizes().vec();
  ElementType work = float_work_type(self);
  Value u = uniform01(p, dims, work, generator, self.device().index());
  if (self.scalar_type() == c10::kHalf || self.scalar_type() == c10::kBFloat16) {
    // Keep u below 1 after rounding to the narrow type: its largest value under 1.
    double below_one =
        self.scalar_type() == c10::kHalf ? 1.0 - std::ldexp(1.0, -11) : 1.0 - std::ldexp(1.0, -8);
    u = b.binary("minimum", u, splat(b, below_one, work, dims));
  }
  c10::ScalarType scalar = scalar_type(work);
  Value low = b.broadcast_to(p.scalar(from, scalar), dims);
  Value span = b.broadcast_to(p.scalar(to - from, scalar), dims);
  p.write(self, b.binary("add", low, b.binary("multiply", u, span)));
  p.run();
  return self;
}

at::Tensor& normal_(at::Tensor& self, double mean, double std,
                    std::optional<at::Generator> generator) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  // A complex tensor: real and imaginary parts each with variance std^2 / 2, as on the CPU.
  if (self.is_complex()) {
    at::Tensor parts = at::view_as_real(self);
    normal_(parts, mean, std / std::sqrt(2.0), generator);
    return self;
  }
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(self.scalar_type()),
                              "\"normal_kernel_cpu\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  if (self.numel() == 0) return self;
  Program p("aten::normal_");
  Builder& b = p.b();
  std::vector<int64_t> dims = self.sizes().vec();
  ElementType work = float_work_type(self);
  c10::DeviceIndex device = self.device().index();
  // Box-Muller: sqrt(-2 log(1 - u1)) * cos(2 pi u2), with 1 - u1 in (0, 1].
  Value u1 = uniform01(p, dims, work, generator, device);
  Value u2 = uniform01(p, dims, work, generator, device);
  Value radius =
      b.unary("sqrt", b.binary("multiply", splat(b, -2, work, dims),
                               b.unary("log", b.binary("subtract", splat(b, 1, work, dims), u1))));
  Value angle = b.binary("multiply", u2, splat(b, 2 * M_PI, work, dims));
  Value z = b.binary("multiply", radius, hlo::cosine_in_range(b, angle));
  c10::ScalarType scalar = scalar_type(work);
  Value scaled = b.binary("multiply", z, b.broadcast_to(p.scalar(std, scalar), dims));
  p.write(self, b.binary("add", scaled, b.broadcast_to(p.scalar(mean, scalar), dims)));
  p.run();
  return self;
}

namespace {
// The integers random_ draws from: [from, from + range), with range 0 meaning all 2^64.
struct RandomRange {
  int64_t from;
  uint64_t range;
};

// PyTorch's own rules (ATen/native/DistributionTemplates.h, whose checks and float
// rounding helpers this calls), so errors and warnings are the CPU's, word for word.
RandomRange random_range(const at::Tensor& self, int64_t from, std::optional<int64_t> to) {
  namespace templates = at::native::templates;
  c10::ScalarType type = self.scalar_type();
  if (to.has_value()) {
    int64_t end = *to;
    TORCH_CHECK(from < end, "random_ expects 'from' to be less than 'to', but got from=", from,
                " >= to=", end);
    if (c10::isFloatingType(type)) {
      AT_DISPATCH_FLOATING_TYPES_AND2(
          c10::kHalf, c10::kBFloat16, type, "random_update_from_to", [&] {
            from = templates::update_from<scalar_t>(from);
            end = templates::update_to<scalar_t>(end);
            TORCH_CHECK(
                from < end,
                "random_ expects 'from' casted to dtype to be less than 'to' casted to dtype, "
                "but got from=",
                from, " >= to=", end);
          });
    }
    templates::check_from_to_in_range(from, end - 1, self.dtype());
    return {from, static_cast<uint64_t>(end) - static_cast<uint64_t>(from)};
  }
  if (from == std::numeric_limits<int64_t>::lowest()) return {from, 0};
  int64_t to_inc = 0;
  if (c10::isFloatingType(type)) {
    AT_DISPATCH_FLOATING_TYPES_AND2(
        c10::kHalf, c10::kBFloat16, type, "random_from_to_range_calc", [&] {
          to_inc = int64_t{1} << std::numeric_limits<scalar_t>::digits;
          from = templates::update_from<scalar_t>(from);
          TORCH_CHECK(from < to_inc,
                      "random_ expects 'from' casted to dtype to be less than or equal to 'to_inc' "
                      "casted to dtype, but got from=",
                      from, " > to_inc=", to_inc);
        });
  } else if (c10::isIntegralType(type, /*includeBool=*/true)) {
    AT_DISPATCH_V2(
        type, "random_from_to_range_calc", AT_WRAP([&] {
          if constexpr (std::is_same_v<scalar_t, bool>) {
            to_inc = 1;
          } else {
            to_inc = static_cast<int64_t>(std::min<uint64_t>(std::numeric_limits<scalar_t>::max(),
                                                             std::numeric_limits<int64_t>::max()));
          }
        }),
        AT_EXPAND(AT_INTEGRAL_TYPES_V2), c10::kBool);
  } else {
    TORCH_CHECK(false, "random_ handles only integral, floating-point and boolean types, not ",
                type);
  }
  templates::check_from_to_in_range(from, to_inc, self.dtype());
  return {from, static_cast<uint64_t>(to_inc) - static_cast<uint64_t>(from) + 1};
}
}  // namespace

at::Tensor& random_from_(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                         std::optional<at::Generator> generator) {
  RandomRange r = random_range(self, from, to);
  if (self.numel() == 0) return self;
  Program p("aten::random_");
  Builder& b = p.b();
  std::vector<int64_t> dims = self.sizes().vec();
  Value bits = b.rng_bit_generator(p.key(next_random_key(generator, self.device().index())),
                                   TensorType{ElementType::U64, dims})[1];
  // The range travels as int64 bits (a range past 2^63, such as int64's whole span less
  // one, is no int64 Scalar), read back as uint64.
  Value range =
      b.bitcast_convert(b.broadcast_to(p.scalar(static_cast<int64_t>(r.range), c10::kLong), dims),
                        TensorType{ElementType::U64, dims});
  Value offset = r.range == 0 ? bits : b.binary("remainder", bits, range);
  // Wrapping 64-bit addition, as the CPU's `from + (bits % range)` in uint64.
  Value lowest = b.bitcast_convert(b.broadcast_to(p.scalar(r.from, c10::kLong), dims),
                                   TensorType{ElementType::U64, dims});
  Value sum = b.binary("add", offset, lowest);
  p.write(self, b.bitcast_convert(sum, TensorType{ElementType::S64, dims}));
  p.run();
  return self;
}

at::Tensor& random_to_(at::Tensor& self, int64_t to, std::optional<at::Generator> generator) {
  return random_from_(self, 0, to, generator);
}

at::Tensor& random_(at::Tensor& self, std::optional<at::Generator> generator) {
  return random_from_(self, 0, std::nullopt, generator);
}

at::Tensor& bernoulli_float_(at::Tensor& self, double probability,
                             std::optional<at::Generator> generator) {
  TORCH_CHECK(0 <= probability && probability <= 1,
              "bernoulli_ expects p to be in [0, 1], but got p=", probability);
  Program p("aten::bernoulli_.float");
  Builder& b = p.b();
  std::vector<int64_t> dims = self.sizes().vec();
  Value u = uniform01(p, dims, ElementType::F64, generator, self.device().index());
  Value threshold = b.broadcast_to(p.scalar(probability, c10::kDouble), dims);
  p.write(self, b.compare(hlo::Compare::LT, u, threshold));
  p.run();
  return self;
}

at::Tensor& bernoulli_tensor_(at::Tensor& self, const at::Tensor& probability,
                              std::optional<at::Generator> generator) {
  Program p("aten::bernoulli_.Tensor");
  Builder& b = p.b();
  std::vector<int64_t> dims = self.sizes().vec();
  Value u = uniform01(p, dims, ElementType::F64, generator, self.device().index());
  Value threshold = b.broadcast_to(p.read(probability, c10::kDouble), dims);
  p.write(self, b.compare(hlo::Compare::LT, u, threshold));
  p.run();
  return self;
}

at::Tensor bernoulli(const at::Tensor& self, std::optional<at::Generator> generator) {
  at::Tensor out = at::empty(self.sizes(), self.options());
  return bernoulli_tensor_(out, self, generator);
}

std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p,
                                                  std::optional<bool> train) {
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  // Laid out as the CPU's `input * mask` is (a channels_last input, sliced too, gives
  // channels_last results).
  at::Tensor output = new_empty_like(input, input.scalar_type());
  at::Tensor mask = new_empty_like(input, c10::kBool);
  bool training = !train.has_value() || *train;
  Program program("aten::native_dropout");
  Builder& b = program.b();
  std::vector<int64_t> dims = input.sizes().vec();
  c10::ScalarType math = opmath_type(input.scalar_type());
  Value x = program.read(input, math);
  if (!training || p == 0) {
    program.write(output, x);
    program.write(mask, splat(b, 1, ElementType::Pred, dims));
  } else {
    Value u = uniform01(program, dims, ElementType::F64, std::nullopt, input.device().index());
    Value keep =
        b.compare(hlo::Compare::GE, u, b.broadcast_to(program.scalar(p, c10::kDouble), dims));
    // Kept values are scaled by 1 / (1 - p); p == 1 drops everything.
    Value scale = b.broadcast_to(program.scalar(p == 1 ? 0.0 : 1.0 / (1.0 - p), math), dims);
    Value zero = splat(b, 0, element_type(math), dims);
    program.write(output, b.select(keep, b.binary("multiply", x, scale), zero));
    program.write(mask, keep);
  }
  program.run();
  return {output, mask};
}

at::Tensor native_dropout_backward(const at::Tensor& grad_output, const at::Tensor& mask,
                                   double scale) {
  // grad * mask * scale promotes like the CPU's (integer gradients become float).
  c10::ScalarType type = at::result_type(grad_output, c10::Scalar(scale));
  at::Tensor grad_input = new_empty_like(grad_output, type);
  c10::ScalarType math = opmath_type(type);
  Program program("aten::native_dropout_backward");
  Builder& b = program.b();
  std::vector<int64_t> dims = grad_output.sizes().vec();
  Value g = program.read(grad_output, math);
  Value keep = b.broadcast_to(program.read(mask, c10::kBool), dims);
  Value scaled = b.binary("multiply", g, b.broadcast_to(program.scalar(scale, math), dims));
  program.write(grad_input, b.select(keep, scaled, splat(b, 0, element_type(math), dims)));
  program.run();
  return grad_input;
}

}  // namespace tpu::aten

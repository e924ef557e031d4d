// Exponential, log-normal, Cauchy and geometric draws on the device: each transforms uniform
// numbers from the device generator (uniform01), so a seeded tpu generator (vLLM's per-request
// seeds) is used as it is, never handed to a CPU kernel. The argument checks are PyTorch's
// (ATen/native/DistributionTemplates.h), so errors read as on the CPU.
#include <ATen/native/DistributionTemplates.h>

#include <cmath>

#include "aten/dtype.h"
#include "aten/generator.h"
#include "aten/ops/all.h"
#include "aten/program.h"
#include "hlo/trig.h"

namespace tpu::aten {

namespace {

using hlo::Builder;
using hlo::ElementType;
using hlo::Value;

// One transform of u in [0, 1), written into `self` in its dtype.
template <typename Transform>
at::Tensor& draw(at::Tensor& self, const char* name, std::optional<at::Generator> generator,
                 Transform transform) {
  if (self.numel() == 0) return self;
  Program p(name);
  Builder& b = p.b();
  std::vector<int64_t> dims = self.sizes().vec();
  ElementType work = self.scalar_type() == c10::kDouble ? ElementType::F64 : ElementType::F32;
  Value u = uniform01(p, dims, work, generator, self.device().index());
  auto splat = [&](double v) { return b.broadcast_to(b.constant(v, work), dims); };
  // 1 - u lies in (0, 1]: its log is finite.
  Value log_one_minus_u = b.unary("log", b.binary("subtract", splat(1), u));
  Value result = transform(b, u, log_one_minus_u, splat);
  p.write(self, b.convert(result, element_type(self.scalar_type())));
  p.run();
  return self;
}

void check_floating(const at::Tensor& self, const char* distribution) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), distribution,
              " distribution is a continuous probability distribution. dtype must be a floating "
              "point but you specified ",
              c10::toString(self.scalar_type()));
}

}  // namespace

at::Tensor& exponential_(at::Tensor& self, double lambd, std::optional<at::Generator> generator) {
  TORCH_CHECK(lambd > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", lambd);
  check_floating(self, "Exponential");
  return draw(self, "aten::exponential_", generator, [&](Builder& b, Value, Value log1mu, auto s) {
    return b.binary("multiply", log1mu, s(-1.0 / lambd));
  });
}

at::Tensor& log_normal_(at::Tensor& self, double mean, double std,
                        std::optional<at::Generator> generator) {
  TORCH_CHECK(std > 0.0, "log_normal_ expects std > 0.0, but found std=", std);
  check_floating(self, "log_normal");
  if (self.numel() == 0) return self;
  // exp of a normal draw: normal_ writes mean + std * z, then exp in place.
  normal_(self, mean, std, generator);
  return self.exp_();
}

at::Tensor& cauchy_(at::Tensor& self, double median, double sigma,
                    std::optional<at::Generator> generator) {
  TORCH_CHECK(sigma > 0.0, "cauchy_ expects sigma > 0.0, but found sigma=", sigma);
  check_floating(self, "Cauchy");
  return draw(self, "aten::cauchy_", generator, [&](Builder& b, Value u, Value, auto s) {
    // median + sigma * tan(pi (u - 1/2)), the inverse of the Cauchy CDF.
    Value angle = b.binary("multiply", b.binary("subtract", u, s(0.5)), s(M_PI));
    Value tangent = b.binary("divide", b.unary("sine", angle), b.unary("cosine", angle));
    return b.binary("add", s(median), b.binary("multiply", tangent, s(sigma)));
  });
}

at::Tensor& geometric_(at::Tensor& self, double p, std::optional<at::Generator> generator) {
  TORCH_CHECK(0 < p && p < 1, "geometric_ expects p to be in (0, 1), but got p=", p);
  return draw(self, "aten::geometric_", generator, [&](Builder& b, Value, Value log1mu, auto s) {
    // The number of trials to the first success: ceil(log(1 - u) / log(1 - p)), at least 1.
    Value trials = b.unary("ceil", b.binary("divide", log1mu, s(std::log1p(-p))));
    return b.binary("maximum", trials, s(1));
  });
}

}  // namespace tpu::aten

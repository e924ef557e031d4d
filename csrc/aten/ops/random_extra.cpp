// Random permutations and categorical sampling drawn on the device: randperm sorts random
// 64-bit keys (stable, so ties keep a deterministic order) carrying an iota payload;
// multinomial uses the Gumbel trick in its exponential form, argmax / top-k of p / q with
// q ~ Exp(1). Each call takes a fresh key from the device generator at run time.
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>

#include <limits>
#include <string>

#include "aten/dtype.h"
#include "aten/generator.h"
#include "aten/ops/all.h"
#include "aten/program.h"

namespace tpu::aten {

namespace {

using hlo::Builder;
using hlo::Compare;
using hlo::ElementType;
using hlo::TensorType;
using hlo::Value;

Value splat(Builder& b, double v, ElementType type, const std::vector<int64_t>& dims) {
  return b.broadcast_to(b.constant(v, type), dims);
}

// Sorts `keys` along its last axis, stably, carrying the int64 positions along that axis;
// returns the permuted positions. `descending` orders the largest keys first.
Value sorted_positions(Builder& b, const Value& keys, bool descending) {
  const int64_t axis = keys.rank() - 1;
  Value positions = b.iota(TensorType{ElementType::S64, keys.dims()}, axis);
  TensorType key{keys.element(), {}};
  TensorType position{ElementType::S64, {}};
  std::string comparator =
      b.region({key, key, position, position}, [&](Builder& r, const std::vector<Value>& a) {
        return std::vector<Value>{r.compare(descending ? Compare::GT : Compare::LT, a[0], a[1])};
      });
  std::vector<Value> sorted =
      b.op_multi("sort", {keys, positions}, {keys.type, positions.type},
                 "dimension = " + std::to_string(axis) + " : i64, is_stable = true", comparator);
  return sorted[1];
}

// The CPU's limits: every value below n must be exact in a float dtype (bfloat16 is not
// checked there either) and n - 1 must fit an integer dtype.
void check_randperm(int64_t n, const at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  const c10::ScalarType type = out.scalar_type();
  if (type == c10::kHalf || type == c10::kFloat || type == c10::kDouble) {
    const int digits = type == c10::kDouble ? 53 : type == c10::kFloat ? 24 : 11;
    const int64_t limit = (int64_t{1} << digits) + 1;
    TORCH_CHECK(n <= limit, "n cannot be greater than ", limit, " for ", type, " type.");
  } else if (c10::isIntegralType(type, /*includeBool=*/true) && type != c10::kLong) {
    const int bits = type == c10::kBool ? 1
                                        : static_cast<int>(c10::elementSize(type)) * 8 -
                                              (c10::isSignedType(type) ? 1 : 0);
    TORCH_CHECK(bits >= 63 || n <= (int64_t{1} << bits), "n is too large for result tensor type: '",
                out.toString(), "'");
  }
}

void lower_randperm(int64_t n, const std::optional<at::Generator>& generator, at::Tensor& out) {
  check_randperm(n, out);
  at::native::resize_output(out, {n});
  if (n == 0) return;
  Program p("aten::randperm");
  Builder& b = p.b();
  Value keys = b.rng_bit_generator(p.key(next_random_key(generator, out.device().index())),
                                   TensorType{ElementType::U64, {n}})[1];
  p.write(out, sorted_positions(b, keys, /*descending=*/false));
  p.run();
}

void check_multinomial(const at::Tensor& self, int64_t n_sample, bool replacement) {
  TORCH_CHECK(
      c10::isFloatingType(self.scalar_type()),
      "multinomial only supports floating-point dtypes for input, got: ", self.scalar_type());
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(n_sample > 0, "cannot sample n_sample <= 0 samples");
  const int64_t categories = self.size(-1);
  TORCH_CHECK(replacement || n_sample <= categories,
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  TORCH_CHECK(categories <= (int64_t{1} << 24), "number of categories cannot exceed 2^24");
}

// The device cannot raise, so one small program tells whether any probability is negative
// (or NaN), infinite, and whether any row sums to zero; the host reads that back and raises
// the CPU's message for the algorithm the CPU would have used.
void check_distribution(const at::Tensor& self, bool replacement_kernel) {
  const std::vector<int64_t> dims = self.sizes().vec();
  at::Tensor flags = at::empty({3}, self.options().dtype(c10::kBool));
  const c10::ScalarType compute = opmath_type(self.scalar_type());
  const ElementType e = element_type(compute);
  Program p("aten::multinomial(check)");
  Builder& b = p.b();
  Value x = p.read(self, compute);
  std::vector<int64_t> all(x.rank());
  for (int64_t d = 0; d < x.rank(); ++d) all[d] = d;
  const Value no = b.constant(0, ElementType::Pred);
  auto any = [&](const Value& v) {
    return b.reshape(b.reduce(v, no, hlo::Reduction::Or, all), {1});
  };
  Value negative = b.unary("not", b.compare(Compare::GE, x, splat(b, 0, e, dims)));
  Value infinite =
      b.compare(Compare::EQ, x, splat(b, std::numeric_limits<double>::infinity(), e, dims));
  Value sums = b.reduce(x, b.constant(0, e), hlo::Reduction::Add, {x.rank() - 1});
  Value zero_row =
      b.reshape(b.reduce(b.compare(Compare::LE, sums, splat(b, 0, e, sums.dims())), no,
                         hlo::Reduction::Or, std::vector<int64_t>(all.begin(), all.end() - 1)),
                {1});
  p.write(flags, b.concatenate({any(negative), any(infinite), zero_row}, 0));
  p.run();
  check_later(flags, [replacement_kernel](const at::Tensor& host) {
    const bool any_negative = host[0].item<bool>();
    const bool any_infinite = host[1].item<bool>();
    if (replacement_kernel) {
      TORCH_CHECK(!any_negative,
                  "invalid multinomial distribution (encountering probability entry < 0)");
      TORCH_CHECK(
          !any_infinite,
          "invalid multinomial distribution (encountering probability entry = infinity or NaN)");
    } else {
      TORCH_CHECK(!any_negative && !any_infinite,
                  "probability tensor contains either `inf`, `nan` or element < 0");
    }
    TORCH_CHECK(!host[2].item<bool>(),
                "invalid multinomial distribution (sum of probabilities <= 0)");
  });
}

// The int64 position of the largest key along the last axis (the first one on ties).
Value argmax_last(Builder& b, const Value& keys) {
  const int64_t axis = keys.rank() - 1;
  Value positions = b.iota(TensorType{ElementType::S64, keys.dims()}, axis);
  TensorType key{keys.element(), {}};
  TensorType position{ElementType::S64, {}};
  std::string body =
      b.region({key, position, key, position}, [&](Builder& r, const std::vector<Value>& a) {
        Value greater = r.compare(Compare::GT, a[0], a[2]);
        Value tie_first =
            r.binary("and", r.compare(Compare::EQ, a[0], a[2]), r.compare(Compare::LT, a[1], a[3]));
        Value left = r.binary("or", greater, tie_first);
        return std::vector<Value>{r.select(left, a[0], a[2]), r.select(left, a[1], a[3])};
      });
  std::vector<int64_t> kept(keys.dims().begin(), keys.dims().end() - 1);
  return b.op_multi(
      "reduce", {keys, positions, b.constant(-1, keys.element()), b.constant(0, ElementType::S64)},
      {TensorType{keys.element(), kept}, TensorType{ElementType::S64, kept}},
      "dimensions = " + hlo::i64_array({axis}), body)[1];
}

// Gumbel-max in exponential form: the index of max(p / q) with q ~ Exp(1) is distributed as
// p / sum(p); the top-k of the same keys is a draw of k categories without replacement.
// q = -log(u) with u in [0, 1) is in (0, inf], so every key is finite and >= 0.
Value exponential_keys(Program& p, const Value& probabilities,
                       const std::optional<at::Generator>& generator, c10::DeviceIndex device) {
  Builder& b = p.b();
  const std::vector<int64_t>& dims = probabilities.dims();
  Value u = uniform01(p, dims, probabilities.element(), generator, device);
  Value q = b.unary("negate", b.unary("log", u));
  return b.binary("divide", probabilities, q);
}

void lower_multinomial(const at::Tensor& self, int64_t n_sample, bool replacement,
                       const std::optional<at::Generator>& generator, at::Tensor& out) {
  check_multinomial(self, n_sample, replacement);
  std::vector<int64_t> out_shape = self.sizes().vec();
  out_shape.back() = n_sample;
  at::native::resize_output(out, out_shape);
  if (out.numel() == 0) return;
  const bool gumbel_kernel = !replacement || n_sample == 1;
  check_distribution(self, !gumbel_kernel);
  const int64_t rows = self.dim() == 2 ? self.size(0) : 1;
  const int64_t categories = self.size(-1);
  const ElementType work = self.scalar_type() == c10::kDouble ? ElementType::F64 : ElementType::F32;
  Program p("aten::multinomial");
  Builder& b = p.b();
  const c10::DeviceIndex device = self.device().index();
  Value probabilities = b.reshape(p.read(self, scalar_type(work)), {rows, categories});
  Value samples;
  if (!replacement && n_sample > 1) {
    Value order = sorted_positions(b, exponential_keys(p, probabilities, generator, device), true);
    samples = b.slice(order, {0, 0}, {rows, n_sample}, {1, 1});
  } else {
    // Each of the n_sample draws is an independent Gumbel-max over the categories.
    std::vector<int64_t> grid{rows, n_sample, categories};
    Value keys =
        exponential_keys(p, b.broadcast_in_dim(probabilities, grid, {0, 2}), generator, device);
    samples = argmax_last(b, keys);
  }
  p.write(out, b.reshape(samples, out_shape));
  p.run();
}

}  // namespace

at::Tensor& randperm_generator_out(int64_t n, std::optional<at::Generator> generator,
                                   at::Tensor& out) {
  lower_randperm(n, generator, out);
  return out;
}

at::Tensor& randperm_out(int64_t n, at::Tensor& out) {
  lower_randperm(n, std::nullopt, out);
  return out;
}

at::Tensor randperm_generator(int64_t n, std::optional<at::Generator> generator,
                              std::optional<c10::ScalarType> dtype,
                              std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                              std::optional<bool> pin_memory) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  at::Tensor out = at::empty({n}, at::TensorOptions()
                                      .dtype(dtype.value_or(c10::kLong))
                                      .layout(layout)
                                      .device(device)
                                      .pinned_memory(pin_memory));
  lower_randperm(n, generator, out);
  return out;
}

at::Tensor randperm(int64_t n, std::optional<c10::ScalarType> dtype,
                    std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                    std::optional<bool> pin_memory) {
  return randperm_generator(n, std::nullopt, dtype, layout, device, pin_memory);
}

at::Tensor multinomial(const at::Tensor& self, int64_t num_samples, bool replacement,
                       std::optional<at::Generator> generator) {
  at::Tensor out = at::empty({0}, self.options().dtype(c10::kLong));
  lower_multinomial(self, num_samples, replacement, generator, out);
  return out;
}

at::Tensor& multinomial_out(const at::Tensor& self, int64_t num_samples, bool replacement,
                            std::optional<at::Generator> generator, at::Tensor& out) {
  lower_multinomial(self, num_samples, replacement, generator, out);
  return out;
}

}  // namespace tpu::aten

// Ops along one dimension: sort (stable, NaN ordered last as on the CPU), topk, the
// cumulative scans cumsum/cumprod, and set membership (isin). argsort is composite over
// sort.stable.
#include <ATen/MemoryOverlap.h>
#include <ATen/ScalarOps.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/ne.h>

#include <limits>

#include "aten/dtype.h"
#include "aten/ops/all.h"
#include "aten/program.h"

namespace tpu::aten {

namespace {

using hlo::Builder;
using hlo::Compare;
using hlo::ElementType;
using hlo::TensorType;
using hlo::Value;

// ---- sort, topk ---------------------------------------------------------------------------

// Sorts `x` along `dim` with a stable sort, carrying each element's original index: returns
// {sorted values, indices}. NaN sorts above every number, so it comes last ascending and first
// descending; equal elements keep their order, as the CPU's stable sort does.
std::pair<Value, Value> sort_with_indices(Builder& b, const Value& x, int64_t dim,
                                          bool descending) {
  ElementType index_type =
      x.dims()[dim] <= std::numeric_limits<int32_t>::max() ? ElementType::S32 : ElementType::S64;
  Value index = b.iota(TensorType{index_type, x.dims()}, dim);
  TensorType value_scalar{x.element(), {}};
  TensorType index_scalar{index_type, {}};
  const bool is_float = hlo::is_float(x.element());
  std::string comparator =
      b.region({value_scalar, value_scalar, index_scalar, index_scalar},
               [&](Builder& r, const std::vector<Value>& a) {
                 // a = {lhs value, rhs value, lhs index, rhs index}: does lhs go first?
                 Value first = r.compare(descending ? Compare::GT : Compare::LT, a[0], a[1]);
                 if (is_float) {
                   Value lhs_nan = r.compare(Compare::NE, a[0], a[0]);
                   Value rhs_nan = r.compare(Compare::NE, a[1], a[1]);
                   Value nan_first = descending ? r.binary("and", lhs_nan, r.unary("not", rhs_nan))
                                                : r.binary("and", rhs_nan, r.unary("not", lhs_nan));
                   first = r.binary("or", first, nan_first);
                 }
                 return std::vector<Value>{first};
               });
  std::vector<Value> sorted =
      b.op_multi("sort", {x, index}, {x.type, index.type},
                 "dimension = " + std::to_string(dim) + " : i64, is_stable = true", comparator);
  return {sorted[0], sorted[1]};
}

// Sorts along `dim` and writes the first `k` (all when k < 0) values and indices.
void lower_sort(const char* name, const at::Tensor& self, int64_t dim, bool descending, int64_t k,
                const at::Tensor& values, const at::Tensor& indices) {
  if (values.numel() == 0) return;
  Program p(name);
  auto& b = p.b();
  // bool sorts as 0/1; a scalar is a one-element row
  Value x =
      p.read(self, self.scalar_type() == c10::kBool ? std::optional(c10::kByte) : std::nullopt);
  if (x.rank() == 0) x = b.reshape(x, {1});
  auto [sorted, index] = sort_with_indices(b, x, dim, descending);
  if (k >= 0) {
    std::vector<int64_t> start(x.rank(), 0), limit = x.dims(), strides(x.rank(), 1);
    limit[dim] = k;
    sorted = b.slice(sorted, start, limit, strides);
    index = b.slice(index, start, limit, strides);
  }
  p.write(values, b.reshape(sorted, values.sizes().vec()));
  p.write(indices, b.reshape(index, indices.sizes().vec()));
  p.run();
}

void check_sortable(const char* what, const at::Tensor& self) {
  TORCH_CHECK(!self.is_complex(), " ", what, " does not support complex dtypes on CPU");
}

void check_out_dtype(const at::Tensor& out, c10::ScalarType expected) {
  TORCH_CHECK(out.scalar_type() == expected, "Expected out tensor to have dtype ",
              c10::scalarTypeToTypeMeta(expected), ", but got ", out.dtype(), " instead");
}

// A 0-d input gives a 0-d result for k = 0 as well as k = 1, as on the CPU.
std::vector<int64_t> topk_shape(const at::Tensor& self, int64_t k, int64_t dim) {
  const int64_t size = self.dim() == 0 ? 1 : self.size(dim);
  TORCH_CHECK(k >= 0 && k <= size, "selected index k out of range");
  std::vector<int64_t> shape = self.sizes().vec();
  if (!shape.empty()) shape[dim] = k;
  return shape;
}

}  // namespace

std::tuple<at::Tensor&, at::Tensor&> sort_values_stable(const at::Tensor& self,
                                                        std::optional<bool> stable, int64_t dim,
                                                        bool descending, at::Tensor& values,
                                                        at::Tensor& indices) {
  check_sortable("Sort", self);
  dim = at::maybe_wrap_dim(dim, self.dim());
  check_out_dtype(values, self.scalar_type());
  check_out_dtype(indices, c10::kLong);
  at::native::resize_output(values, self.sizes());
  at::native::resize_output(indices, self.sizes());
  // Always stable: an unstable sort may order ties any way, and this way matches the CPU.
  lower_sort("aten::sort.values_stable", self, self.dim() == 0 ? 0 : dim, descending, -1, values,
             indices);
  return {values, indices};
}

std::tuple<at::Tensor, at::Tensor> sort_stable(const at::Tensor& self, std::optional<bool> stable,
                                               int64_t dim, bool descending) {
  check_sortable("Sort", self);
  dim = at::maybe_wrap_dim(dim, self.dim());
  at::Tensor values = at::empty(self.sizes(), self.options());
  at::Tensor indices = at::empty(self.sizes(), self.options().dtype(c10::kLong));
  lower_sort("aten::sort.stable", self, self.dim() == 0 ? 0 : dim, descending, -1, values, indices);
  return {values, indices};
}

std::tuple<at::Tensor, at::Tensor> sort(const at::Tensor& self, int64_t dim, bool descending) {
  return tpu::aten::sort_stable(self, false, dim, descending);
}

std::tuple<at::Tensor&, at::Tensor&> sort_values(const at::Tensor& self, int64_t dim,
                                                 bool descending, at::Tensor& values,
                                                 at::Tensor& indices) {
  return tpu::aten::sort_values_stable(self, false, dim, descending, values, indices);
}

// The k largest (or smallest) along `dim`, sorted; ties come lowest index first (the CPU's
// partial sort may order tied elements differently, with the same values).
std::tuple<at::Tensor&, at::Tensor&> topk_values(const at::Tensor& self, c10::SymInt k, int64_t dim,
                                                 bool largest, bool sorted, at::Tensor& values,
                                                 at::Tensor& indices) {
  check_sortable("topk", self);
  dim = at::maybe_wrap_dim(dim, self.dim());
  const int64_t count = k.guard_int(__FILE__, __LINE__);
  std::vector<int64_t> shape = topk_shape(self, count, dim);
  check_out_dtype(values, self.scalar_type());
  check_out_dtype(indices, c10::kLong);
  at::native::resize_output(values, shape);
  at::native::resize_output(indices, shape);
  lower_sort("aten::topk", self, self.dim() == 0 ? 0 : dim, largest, self.dim() == 0 ? -1 : count,
             values, indices);
  return {values, indices};
}

std::tuple<at::Tensor, at::Tensor> topk(const at::Tensor& self, c10::SymInt k, int64_t dim,
                                        bool largest, bool sorted) {
  at::Tensor values = at::empty({0}, self.options());
  at::Tensor indices = at::empty({0}, self.options().dtype(c10::kLong));
  tpu::aten::topk_values(self, std::move(k), dim, largest, sorted, values, indices);
  return {values, indices};
}

// ---- cumsum, cumprod ----------------------------------------------------------------------

namespace {

// Inclusive scan along `dim` in log2(n) steps (Hillis-Steele): step s combines each element
// with the one s before it. Unlike a reduce_window over a window of n, the work stays
// O(n log n) on every backend.
Value scan(Builder& b, Value x, int64_t dim, bool multiply) {
  const int64_t n = x.dims()[dim];
  Value identity = b.constant(multiply ? 1 : 0, x.element());
  std::vector<int64_t> zeros(x.rank(), 0), ones(x.rank(), 1);
  for (int64_t step = 1; step < n; step *= 2) {
    std::vector<int64_t> limit = x.dims(), low = zeros;
    limit[dim] = n - step;
    low[dim] = step;
    Value shifted = b.pad(b.slice(x, zeros, limit, ones), identity, low, zeros, zeros);
    x = b.binary(multiply ? "multiply" : "add", x, shifted);
  }
  return x;
}

// Scans in the result dtype (half precision in float32, each output rounded once, as the CPU's
// accumulator does).
void lower_scan(const char* name, const at::Tensor& self, int64_t dim, bool multiply,
                const at::Tensor& out) {
  if (out.numel() == 0) return;
  Program p(name);
  auto& b = p.b();
  Value x = p.read(self, opmath_type(out.scalar_type()));
  if (x.rank() == 0) x = b.reshape(x, {1});
  p.write(out, b.reshape(scan(b, x, dim, multiply), out.sizes().vec()));
  p.run();
}

c10::ScalarType scan_type(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  return dtype.value_or(at::isIntegralType(self.scalar_type(), /*includeBool=*/true)
                            ? c10::kLong
                            : self.scalar_type());
}

at::Tensor scan_functional(const char* name, const at::Tensor& self, int64_t dim,
                           std::optional<c10::ScalarType> dtype, bool multiply) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  at::Tensor out = at::empty(self.sizes(), self.options().dtype(scan_type(self, dtype)));
  lower_scan(name, self, self.dim() == 0 ? 0 : dim, multiply, out);
  return out;
}

at::Tensor& scan_out(const char* name, const at::Tensor& self, int64_t dim,
                     std::optional<c10::ScalarType> dtype, bool multiply, at::Tensor& out) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  if (dtype.has_value()) check_out_dtype(out, *dtype);
  at::native::resize_output(out, self.sizes());
  at::assert_no_internal_overlap(out);
  lower_scan(name, self, self.dim() == 0 ? 0 : dim, multiply, out);
  return out;
}

at::Tensor& scan_in_place(const char* name, at::Tensor& self, int64_t dim,
                          std::optional<c10::ScalarType> dtype, bool multiply) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(!dtype.has_value() || *dtype == self.scalar_type(),
              "Bad in-place call: input tensor dtype ", self.dtype(), " and output tensor dtype ",
              c10::scalarTypeToTypeMeta(*dtype), " should match");
  at::assert_no_internal_overlap(self);
  lower_scan(name, self, self.dim() == 0 ? 0 : dim, multiply, self);
  return self;
}

}  // namespace

at::Tensor cumsum(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype) {
  return scan_functional("aten::cumsum", self, dim, dtype, false);
}
at::Tensor& cumsum_out(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype,
                       at::Tensor& out) {
  return scan_out("aten::cumsum.out", self, dim, dtype, false, out);
}
at::Tensor& cumsum_(at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype) {
  return scan_in_place("aten::cumsum_", self, dim, dtype, false);
}
at::Tensor cumprod(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype) {
  return scan_functional("aten::cumprod", self, dim, dtype, true);
}
at::Tensor& cumprod_out(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype,
                        at::Tensor& out) {
  return scan_out("aten::cumprod.out", self, dim, dtype, true, out);
}
at::Tensor& cumprod_(at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype) {
  return scan_in_place("aten::cumprod_", self, dim, dtype, true);
}

// ---- isin ---------------------------------------------------------------------------------

namespace {

void check_isin_type(c10::ScalarType type) {
  TORCH_CHECK(type != c10::kBool && !c10::isComplexType(type),
              "Unsupported input type encountered for isin(): ", type);
}

// Compares every element with every test element (an [n, m] table reduced along m) in the
// two inputs' promoted dtype. Generation's stopping checks test against a handful of token ids,
// so the table stays small; the CPU's sort-based path only pays off for large test sets.
void lower_isin(const char* name, const at::Tensor& elements, const at::Tensor& test_elements,
                bool invert, const at::Tensor& out) {
  if (out.numel() == 0) return;
  c10::ScalarType common = at::result_type(elements, test_elements);
  Program p(name);
  auto& b = p.b();
  Value found = b.constant(0, ElementType::Pred);
  if (test_elements.numel() > 0) {
    Value x = b.reshape(p.read(elements, common), {elements.numel(), 1});
    Value test = b.reshape(p.read(test_elements, common), {1, test_elements.numel()});
    std::vector<int64_t> table{elements.numel(), test_elements.numel()};
    Value equal = b.compare(Compare::EQ, b.broadcast_to(x, table), b.broadcast_to(test, table));
    found = b.reduce(equal, found, hlo::Reduction::Or, {1});
  }
  if (invert) found = b.unary("not", found);
  // a scalar (no test elements) is broadcast by write()
  p.write(out, found.rank() == 0 ? found : b.reshape(found, out.sizes().vec()));
  p.run();
}

}  // namespace

at::Tensor& isin_tensor_tensor_out(const at::Tensor& elements, const at::Tensor& test_elements,
                                   bool assume_unique, bool invert, at::Tensor& out) {
  check_isin_type(elements.scalar_type());
  check_isin_type(test_elements.scalar_type());
  check_out_dtype(out, c10::kBool);
  at::native::resize_output(out, elements.sizes());
  lower_isin("aten::isin.Tensor_Tensor_out", elements, test_elements, invert, out);
  return out;
}

at::Tensor isin_tensor_tensor(const at::Tensor& elements, const at::Tensor& test_elements,
                              bool assume_unique, bool invert) {
  at::Tensor out = at::empty(elements.sizes(), elements.options().dtype(c10::kBool));
  return tpu::aten::isin_tensor_tensor_out(elements, test_elements, assume_unique, invert, out);
}

// One test element: plain (in)equality, as on the CPU.
at::Tensor& isin_tensor_scalar_out(const at::Tensor& elements, const c10::Scalar& test_element,
                                   bool assume_unique, bool invert, at::Tensor& out) {
  check_isin_type(elements.scalar_type());
  check_isin_type(test_element.type());
  return invert ? at::ne_out(out, elements, test_element) : at::eq_out(out, elements, test_element);
}

at::Tensor isin_tensor_scalar(const at::Tensor& elements, const c10::Scalar& test_element,
                              bool assume_unique, bool invert) {
  at::Tensor out = at::empty({0}, elements.options().dtype(c10::kBool));
  return tpu::aten::isin_tensor_scalar_out(elements, test_element, assume_unique, invert, out);
}

// A scalar element is a wrapped-number CPU tensor: a runtime operand, promoted as a Python
// number is.
at::Tensor& isin_scalar_tensor_out(const c10::Scalar& element, const at::Tensor& test_elements,
                                   bool assume_unique, bool invert, at::Tensor& out) {
  return tpu::aten::isin_tensor_tensor_out(at::native::wrapped_scalar_tensor(element),
                                           test_elements, assume_unique, invert, out);
}

at::Tensor isin_scalar_tensor(const c10::Scalar& element, const at::Tensor& test_elements,
                              bool assume_unique, bool invert) {
  at::Tensor out = at::empty({}, test_elements.options().dtype(c10::kBool));
  return tpu::aten::isin_scalar_tensor_out(element, test_elements, assume_unique, invert, out);
}

}  // namespace tpu::aten

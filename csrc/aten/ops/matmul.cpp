// Matrix products: mm, addmm, addmv (and mv), bmm, baddbmm (matmul and linear are composites
// of these).
#include "host_kernels/matmul.h"

#include <ATen/Context.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>

#include <optional>

#include "aten/dtype.h"
#include "aten/ops/all.h"
#include "aten/program.h"

namespace tpu::aten {

namespace {

void check_mm(const at::Tensor& self, const at::Tensor& mat2) {
  TORCH_CHECK(self.dim() == 2, "self must be a matrix");
  TORCH_CHECK(mat2.dim() == 2, "mat2 must be a matrix");
  TORCH_CHECK(self.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (",
              self.size(0), "x", self.size(1), " and ", mat2.size(0), "x", mat2.size(1), ")");
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != c10::kBool,
                              "\"addmm_impl_cpu_\" not implemented for 'Bool'");
  TORCH_CHECK(self.scalar_type() == mat2.scalar_type(),
              "expected mat1 and mat2 to have the same dtype, but got: ", self.dtype(),
              " != ", mat2.dtype());
}

// PyTorch lets mm, addmm, bmm and baddbmm (and their out and in-place forms) past its
// conjugate and negative fallbacks, because its own kernels fold a lazy conj() or neg bit
// into the BLAS call: an operand that is a conjugated view (x.mH) arrives with the bit set,
// and reading its storage reads the values before conj. These products materialize such
// operands, and write through a plain tensor to an out that has a bit (copy_ honours it).
bool has_math_bits(const at::Tensor* t) { return t != nullptr && (t->is_conj() || t->is_neg()); }

at::Tensor resolved(const at::Tensor& t) {
  return has_math_bits(&t) ? t.resolve_conj().resolve_neg() : t;
}

// Calls `lower(self, a, b, out)` with operands free of math bits; see has_math_bits.
template <typename Lower>
bool lowered_without_math_bits(const at::Tensor* self, const at::Tensor& a, const at::Tensor& b,
                               const at::Tensor& out, Lower lower) {
  if (!has_math_bits(self) && !has_math_bits(&a) && !has_math_bits(&b) && !has_math_bits(&out)) {
    return false;
  }
  std::optional<at::Tensor> plain_self;
  if (self != nullptr) plain_self = resolved(*self);
  at::Tensor plain_out = has_math_bits(&out) ? at::empty(out.sizes(), out.options()) : out;
  lower(plain_self ? &*plain_self : nullptr, resolved(a), resolved(b), plain_out);
  if (!plain_out.is_same(out)) out.copy_(plain_out);
  return true;
}

c10::ScalarType accumulate_type(c10::ScalarType type) {
  // Half-precision products accumulate in float32, as on PyTorch's CPU.
  return type == c10::kHalf || type == c10::kBFloat16 ? c10::kFloat : type;
}

// A product's operand. XLA:CPU runs some bfloat16 products with a float32 result through a
// dot kernel that refuses the mix ("Unsupported element type for DotThunk::Execute: BF16 x
// BF16 = F32"), depending on the operands' layouts; read in float32 there, the products are
// the same (a product of two bfloat16 or float16 values is exact in float32) on every path.
// Accelerators keep the mixed-precision dot their matrix units run.
hlo::Value operand(Program& p, const at::Tensor& t) {
  return on_xla_cpu() ? p.read(t, accumulate_type(t.scalar_type())) : p.read(t);
}

// A widened half-precision product (above) carries no precision_config, as the narrow one
// does not: the float32 matmul precision setting is about float32 tensors.
class HalfProductPrecision {
 public:
  HalfProductPrecision(hlo::Builder& b, c10::ScalarType type)
      : b_(b), saved_(b.matmul_precision()) {
    if (accumulate_type(type) != type) b_.set_matmul_precision(hlo::MatmulPrecision::Default);
  }
  ~HalfProductPrecision() { b_.set_matmul_precision(saved_); }
  HalfProductPrecision(const HalfProductPrecision&) = delete;
  HalfProductPrecision& operator=(const HalfProductPrecision&) = delete;

 private:
  hlo::Builder& b_;
  hlo::MatmulPrecision saved_;
};

hlo::Value product(Program& p, const at::Tensor& mat1, const at::Tensor& mat2) {
  HalfProductPrecision precision(p.b(), mat1.scalar_type());
  return p.b().dot_general(operand(p, mat1), operand(p, mat2), {}, {}, {1}, {0},
                           element_type(accumulate_type(mat1.scalar_type())));
}

}  // namespace

int64_t matmul_setting() {
  return static_cast<int64_t>(at::globalContext().float32MatmulPrecision()) * 2 +
         host_kernels::host_matmul_enabled();
}

namespace {

bool is_integer(const c10::Scalar& s, int64_t value) {
  return s.isIntegral(true) && s.to<int64_t>() == value;
}

// beta == 0 of any type (0, 0.0, False, 0j): PyTorch then ignores self, NaNs included.
bool is_zero(const c10::Scalar& s) { return s.toComplexDouble() == c10::complex<double>(0, 0); }

// A product's statics: matmul_setting() and which of alpha and beta the lowering leaves out
// (an integer 1, a zero beta).
std::vector<int64_t> product_statics(const c10::Scalar& beta, const c10::Scalar& alpha) {
  return {matmul_setting(), is_integer(alpha, 1), is_zero(beta), is_integer(beta, 1)};
}

void lower_mm(const at::Tensor& self, const at::Tensor& mat2, const at::Tensor& out) {
  auto plain = [](const at::Tensor*, const at::Tensor& a, const at::Tensor& b,
                  const at::Tensor& o) { lower_mm(a, b, o); };
  if (lowered_without_math_bits(nullptr, self, mat2, out, plain)) return;
  static const char* const kName = "aten::mm";
  PreparedCall call(kName, {&self, &mat2, &out}, {}, {matmul_setting()});
  if (call.run()) return;
  Program p(kName, &call);
  p.write(out, product(p, self, mat2));
  p.run();
}

// alpha * product + beta * self; beta == 0 ignores self (even NaNs), as PyTorch does, and so
// does a null self. Multiplications by 1 are left out.
hlo::Value scale_and_add(Program& p, hlo::Value product, const at::Tensor* self,
                         const c10::Scalar& beta, const c10::Scalar& alpha,
                         c10::ScalarType accumulate, const std::vector<int64_t>& shape) {
  auto& b = p.b();
  if (!is_integer(alpha, 1)) {
    product = b.binary("multiply", product, b.broadcast_to(p.scalar(alpha, accumulate), shape));
  }
  if (self == nullptr || is_zero(beta)) return product;
  hlo::Value bias = b.broadcast_to(p.read(*self, accumulate), shape);
  if (!is_integer(beta, 1)) {
    bias = b.binary("multiply", bias, b.broadcast_to(p.scalar(beta, accumulate), shape));
  }
  return b.binary("add", product, bias);
}

// out = beta * self + alpha * (mat1 @ mat2).
void lower_addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                 const c10::Scalar& beta, const c10::Scalar& alpha, const at::Tensor& out) {
  check_mm(mat1, mat2);
  auto plain = [&](const at::Tensor* s, const at::Tensor& a, const at::Tensor& b,
                   const at::Tensor& o) { lower_addmm(*s, a, b, beta, alpha, o); };
  if (lowered_without_math_bits(&self, mat1, mat2, out, plain)) return;
  TORCH_CHECK(self.scalar_type() == mat1.scalar_type(),
              "self and mat2 must have the same dtype, but got ", self.dtype(), " and ",
              mat1.dtype());
  std::vector<int64_t> shape{mat1.size(0), mat2.size(1)};
  c10::ScalarType accumulate = accumulate_type(mat1.scalar_type());
  static const char* const kName = "aten::addmm";
  PreparedCall call(kName, {&self, &mat1, &mat2, &out}, {&beta, &alpha},
                    product_statics(beta, alpha));
  if (call.run()) return;
  Program p(kName, &call);
  p.write(out, scale_and_add(p, product(p, mat1, mat2), &self, beta, alpha, accumulate, shape));
  p.run();
}

}  // namespace

at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
  check_mm(self, mat2);
  at::Tensor out = at::empty({self.size(0), mat2.size(1)}, self.options());
  lower_mm(self, mat2, out);
  return out;
}

at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  check_mm(self, mat2);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "expected out to have dtype ", self.dtype(),
              " but got ", out.dtype());
  at::native::resize_output(out, {self.size(0), mat2.size(1)});
  lower_mm(self, mat2, out);
  return out;
}

}  // namespace tpu::aten

namespace tpu::aten {

at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                 const c10::Scalar& beta, const c10::Scalar& alpha) {
  check_mm(mat1, mat2);
  at::Tensor out = at::empty({mat1.size(0), mat2.size(1)}, mat1.options());
  lower_addmm(self, mat1, mat2, beta, alpha, out);
  return out;
}

at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                      const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out) {
  check_mm(mat1, mat2);
  at::native::resize_output(out, {mat1.size(0), mat2.size(1)});
  lower_addmm(self, mat1, mat2, beta, alpha, out);
  return out;
}

at::Tensor& addmm_(at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                   const c10::Scalar& beta, const c10::Scalar& alpha) {
  check_mm(mat1, mat2);
  TORCH_CHECK(self.sizes() == c10::IntArrayRef({mat1.size(0), mat2.size(1)}),
              "The input tensor must be a matrix with size ", mat1.size(0), "x", mat2.size(1),
              ", but got a ", self.dim(), "-D tensor with size ", self.sizes());
  lower_addmm(self, mat1, mat2, beta, alpha, self);
  return self;
}

}  // namespace tpu::aten

namespace tpu::aten {

namespace {

void check_bmm(const at::Tensor& self, const at::Tensor& mat2) {
  TORCH_CHECK(self.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(mat2.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(self.size(0) == mat2.size(0),
              "batch1 and batch2 must have same number of batches, got ", self.size(0), " and ",
              mat2.size(0));
  TORCH_CHECK(self.size(2) == mat2.size(1),
              "Expected size for first two dimensions of batch2 tensor to be: [", self.size(0),
              ", ", self.size(2), "] but got: [", mat2.size(0), ", ", mat2.size(1), "].");
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != c10::kBool,
                              "\"bmm\" not implemented for 'Bool'");
  TORCH_CHECK(self.scalar_type() == mat2.scalar_type(), "expected scalar type ", self.scalar_type(),
              " but found ", mat2.scalar_type());
}

// baddbmm's own check on self (its meta function's): batch1's dtype, whatever beta is.
void check_baddbmm_self(const at::Tensor& self, const at::Tensor& batch1,
                        const at::Tensor& batch2) {
  TORCH_CHECK(self.dtype() == batch1.dtype(), "Input dtypes must be the same, got: input ",
              self.dtype(), ", batch1: ", batch1.dtype(), ", batch2: ", batch2.dtype());
}

// out = beta * self + alpha * (batch1 @ batch2); self is ignored when beta == 0.
void lower_baddbmm(const char* name, const at::Tensor* self, const at::Tensor& batch1,
                   const at::Tensor& batch2, const c10::Scalar& beta, const c10::Scalar& alpha,
                   const at::Tensor& out) {
  auto plain = [&](const at::Tensor* s, const at::Tensor& a, const at::Tensor& b,
                   const at::Tensor& o) { lower_baddbmm(name, s, a, b, beta, alpha, o); };
  if (lowered_without_math_bits(self, batch1, batch2, out, plain)) return;
  std::vector<int64_t> shape{batch1.size(0), batch1.size(1), batch2.size(2)};
  c10::ScalarType accumulate = accumulate_type(batch1.scalar_type());
  PreparedCall call(name, {self, &batch1, &batch2, &out}, {&beta, &alpha},
                    product_statics(beta, alpha));
  if (call.run()) return;
  Program p(name, &call);
  HalfProductPrecision precision(p.b(), batch1.scalar_type());
  hlo::Value product = p.b().dot_general(operand(p, batch1), operand(p, batch2), {0}, {0}, {2}, {1},
                                         element_type(accumulate));
  p.write(out, scale_and_add(p, product, self, beta, alpha, accumulate, shape));
  p.run();
}

}  // namespace

at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2) {
  check_bmm(self, mat2);
  at::Tensor out = at::empty({self.size(0), self.size(1), mat2.size(2)}, self.options());
  lower_baddbmm("aten::bmm", nullptr, self, mat2, 0, 1, out);
  return out;
}

at::Tensor& bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  check_bmm(self, mat2);
  at::native::resize_output(out, {self.size(0), self.size(1), mat2.size(2)});
  lower_baddbmm("aten::bmm.out", nullptr, self, mat2, 0, 1, out);
  return out;
}

at::Tensor baddbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                   const c10::Scalar& beta, const c10::Scalar& alpha) {
  check_bmm(batch1, batch2);
  check_baddbmm_self(self, batch1, batch2);
  at::Tensor out = at::empty({batch1.size(0), batch1.size(1), batch2.size(2)}, batch1.options());
  lower_baddbmm("aten::baddbmm", &self, batch1, batch2, beta, alpha, out);
  return out;
}

at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                        const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out) {
  check_bmm(batch1, batch2);
  check_baddbmm_self(self, batch1, batch2);
  at::native::resize_output(out, {batch1.size(0), batch1.size(1), batch2.size(2)});
  lower_baddbmm("aten::baddbmm.out", &self, batch1, batch2, beta, alpha, out);
  return out;
}

at::Tensor& baddbmm_(at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                     const c10::Scalar& beta, const c10::Scalar& alpha) {
  check_bmm(batch1, batch2);
  check_baddbmm_self(self, batch1, batch2);
  lower_baddbmm("aten::baddbmm_", &self, batch1, batch2, beta, alpha, self);
  return self;
}

}  // namespace tpu::aten

namespace tpu::aten {

namespace {

void check_addmv(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec) {
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1 && self.dim() <= 1,
              "vector + matrix @ vector expected, got ", self.dim(), ", ", mat.dim(), ", ",
              vec.dim());
  TORCH_CHECK(mat.size(1) == vec.size(0) &&
                  (self.dim() == 0 || self.size(0) == 1 || self.size(0) == mat.size(0)),
              "size mismatch, got input (", self.dim() == 0 ? 1 : self.size(0), "), mat (",
              mat.size(0), "x", mat.size(1), "), vec (", vec.size(0), ")");
  TORCH_CHECK(self.scalar_type() == mat.scalar_type() && mat.scalar_type() == vec.scalar_type(),
              "addmv input tensors must have the same dtype, but got ",
              c10::toString(self.scalar_type()), ", ", c10::toString(mat.scalar_type()), ", and ",
              c10::toString(vec.scalar_type()));
  TORCH_CHECK_NOT_IMPLEMENTED(mat.scalar_type() != c10::kBool,
                              "\"addmv_impl_cpu\" not implemented for 'Bool'");
}

// out = beta * self + alpha * (mat @ vec).
void lower_addmv(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                 const c10::Scalar& beta, const c10::Scalar& alpha, const at::Tensor& out) {
  c10::ScalarType accumulate = accumulate_type(mat.scalar_type());
  Program p("aten::addmv");
  HalfProductPrecision precision(p.b(), mat.scalar_type());
  hlo::Value product = p.b().dot_general(operand(p, mat), operand(p, vec), {}, {}, {1}, {0},
                                         element_type(accumulate));
  p.write(out, scale_and_add(p, product, &self, beta, alpha, accumulate, {mat.size(0)}));
  p.run();
}

}  // namespace

at::Tensor& addmv_out(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                      const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out) {
  check_addmv(self, mat, vec);
  TORCH_CHECK(out.scalar_type() == mat.scalar_type(), "expected out to have dtype ", mat.dtype(),
              " but got ", out.dtype());
  at::native::resize_output(out, {mat.size(0)});
  lower_addmv(self, mat, vec, beta, alpha, out);
  return out;
}

at::Tensor addmv(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                 const c10::Scalar& beta, const c10::Scalar& alpha) {
  at::Tensor out = at::empty({0}, mat.options());
  return addmv_out(self, mat, vec, beta, alpha, out);
}

at::Tensor& addmv_(at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                   const c10::Scalar& beta, const c10::Scalar& alpha) {
  check_addmv(self, mat, vec);
  TORCH_CHECK(self.dim() == 1 && self.size(0) == mat.size(0), "size mismatch, got input (",
              self.dim() == 0 ? 1 : self.size(0), "), mat (", mat.size(0), "x", mat.size(1),
              "), vec (", vec.size(0), ")");
  return addmv_out(self, mat, vec, beta, alpha, self);
}

}  // namespace tpu::aten

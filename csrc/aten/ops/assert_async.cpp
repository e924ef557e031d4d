// torch._assert_async on tpu: the condition is evaluated on the device and checked
// with check_later(), so in defer_and_fuse it raises at the next sync point instead of
// stalling the host (strict mode reads it at once, as a CPU fallback would, but
// without copying the input through the fallback).
#include <ATen/ATen.h>

#include <string>

#include "aten/ops/all.h"
#include "aten/program.h"

namespace tpu::aten {
namespace {

void assert_nonzero_later(const at::Tensor& self, std::string message) {
  TORCH_CHECK(self.numel() != 0, "Boolean value of Tensor with no values is ambiguous");
  TORCH_CHECK(self.numel() == 1, "Boolean value of Tensor with more than one value is ambiguous");
  at::Tensor nonzero = at::ne(self.reshape({}), 0).contiguous();
  check_later(nonzero, [message = std::move(message)](const at::Tensor& host) {
    TORCH_CHECK(host.item<bool>(), message);
  });
}

}  // namespace

void assert_async(const at::Tensor& self) {
  assert_nonzero_later(self, "Expected Tensor with single nonzero value, but got zero");
}

void assert_async_msg(const at::Tensor& self, c10::string_view assert_msg) {
  // The CPU kernel's words when the caller gave none.
  assert_nonzero_later(self, assert_msg.empty() ? "Assertion is failed" : std::string(assert_msg));
}

}  // namespace tpu::aten

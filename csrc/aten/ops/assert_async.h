#pragma once
// Device-side assertions.
// Implemented in assert_async.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

void assert_async(const at::Tensor& self);
void assert_async_msg(const at::Tensor& self, c10::string_view assert_msg);

}  // namespace tpu::aten

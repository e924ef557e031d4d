#pragma once
// An on/off environment variable (TORCH_TPU_HOST_MATMUL, TORCH_TPU_HOST_HEAP_TUNING...).

namespace tpu::runtime {

// `name`'s value: 1 on, 0 off, `when_unset` if unset or empty. Throws std::invalid_argument
// naming the variable and the value for anything else.
bool env_switch(const char* name, bool when_unset);

}  // namespace tpu::runtime

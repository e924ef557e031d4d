#pragma once
// The C++ API differences between the torch releases torch_tpu builds against (2.11 to 2.13),
// kept in one place so that a GPU image's or TPU VM's own torch builds the same sources.
// Check a change with scripts/check_torch_headers.sh, which compiles against another torch's
// headers without installing it.
#include <torch/csrc/distributed/c10d/Types.hpp>

// Named-dimension types: torch 2.11 has them, and its autocast op lists (ATen/autocast_mode.h)
// name DimnameList unqualified; torch 2.13 has neither. autocast.cpp declares the name where
// this is set.
#if __has_include(<ATen/core/Dimname.h>)
#include <ATen/core/Dimname.h>
#define TPU_TORCH_HAS_DIMNAME 1
#else
#define TPU_TORCH_HAS_DIMNAME 0
#endif

namespace tpu::compat {

// PreMulSum's factor. Torch 2.11 names the struct c10d::NCCLPreMulSumSupplement; 2.13 names it
// c10d::PreMulSumSupplement and keeps the old name as an alias, so the old name serves both.
using PreMulSumSupplement = c10d::NCCLPreMulSumSupplement;

}  // namespace tpu::compat

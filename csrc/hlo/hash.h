#pragma once
// A stable 64-bit structural hash of a program: two programs hash alike exactly when
// their module text (ops, types, attributes, parameter order) is the same. Unlike
// std::hash it is the same in every process and build, so it can name cache files.
#include <cstdint>
#include <string>
#include <string_view>

namespace tpu::hlo {

uint64_t structural_hash(std::string_view module_text);
// The hash as 16 lowercase hex digits.
std::string structural_hash_hex(std::string_view module_text);

}  // namespace tpu::hlo

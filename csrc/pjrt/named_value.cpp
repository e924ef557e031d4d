#include "named_value.h"

#include <cstddef>
#include <cstring>
#include <sstream>
#include <type_traits>

namespace tpu::pjrt {

std::vector<NamedValue> read_named_values(const PJRT_NamedValue* values, size_t count) {
  std::vector<NamedValue> out;
  if (values == nullptr || count == 0) return out;
  // Every field read below lies within PJRT_NamedValue_STRUCT_SIZE.
  const size_t entry_size = values[0].struct_size;
  if (entry_size < PJRT_NamedValue_STRUCT_SIZE) return out;
  constexpr size_t kAlign = alignof(PJRT_NamedValue);
  const size_t stride = (entry_size + kAlign - 1) / kAlign * kAlign;
  const auto* base = reinterpret_cast<const unsigned char*>(values);
  for (size_t i = 0; i < count; ++i) {
    const auto& value = *reinterpret_cast<const PJRT_NamedValue*>(base + i * stride);
    if (value.struct_size != entry_size) break;
    NamedValue copy;
    copy.name.assign(value.name, value.name_size);
    // Read as an integer: a newer plugin may write a type our enum lacks, and loading such
    // a value as the enum is undefined behaviour (UBSan's -fsanitize=enum reports it).
    std::underlying_type_t<PJRT_NamedValue_Type> type;
    static_assert(sizeof type == sizeof value.type);
    std::memcpy(&type, &value.type, sizeof type);
    switch (type) {
      case PJRT_NamedValue_kString:
        copy.value = std::string(value.string_value, value.value_size);
        break;
      case PJRT_NamedValue_kInt64: copy.value = value.int64_value; break;
      case PJRT_NamedValue_kInt64List:
        copy.value = std::vector<int64_t>(value.int64_array_value,
                                          value.int64_array_value + value.value_size);
        break;
      case PJRT_NamedValue_kFloat: copy.value = static_cast<double>(value.float_value); break;
      case PJRT_NamedValue_kBool: copy.value = value.bool_value; break;
      default: continue;  // a type added after our header: we cannot read its value
    }
    out.push_back(std::move(copy));
  }
  return out;
}

std::string to_string(const NamedValueData& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::string>) {
          return v;
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          std::ostringstream out;
          for (size_t i = 0; i < v.size(); ++i) out << (i ? "," : "") << v[i];
          return out.str();
        } else {
          std::ostringstream out;
          out << v;
          return out.str();
        }
      },
      value);
}

std::vector<PJRT_NamedValue> to_pjrt(
    const std::vector<std::pair<std::string, NamedValueData>>& values) {
  std::vector<PJRT_NamedValue> out(values.size());  // value-initialised: every field zero
  for (size_t i = 0; i < values.size(); ++i) {
    PJRT_NamedValue& entry = out[i];
    entry.struct_size = PJRT_NamedValue_STRUCT_SIZE;
    entry.name = values[i].first.data();
    entry.name_size = values[i].first.size();
    entry.value_size = 1;  // scalars; strings and lists set their length
    std::visit(
        [&entry](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, bool>) {
            entry.type = PJRT_NamedValue_kBool;
            entry.bool_value = v;
          } else if constexpr (std::is_same_v<T, int64_t>) {
            entry.type = PJRT_NamedValue_kInt64;
            entry.int64_value = v;
          } else if constexpr (std::is_same_v<T, double>) {
            entry.type = PJRT_NamedValue_kFloat;
            entry.float_value = static_cast<float>(v);
          } else if constexpr (std::is_same_v<T, std::string>) {
            entry.type = PJRT_NamedValue_kString;
            entry.string_value = v.data();
            entry.value_size = v.size();
          } else {
            entry.type = PJRT_NamedValue_kInt64List;
            entry.int64_array_value = v.data();
            entry.value_size = v.size();
          }
        },
        values[i].second);
  }
  return out;
}

}  // namespace tpu::pjrt

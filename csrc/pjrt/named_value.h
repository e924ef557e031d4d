#pragma once
// PJRT_NamedValue both ways: options we hand to the plugin (PJRT_Client_Create) and the
// attribute lists it hands back (plugin and device description attributes).
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "pjrt_c_api.h"

namespace tpu::pjrt {

// The value of one PJRT_NamedValue. bool comes before int64_t so that Python's True binds
// to bool (pybind11 tries the alternatives in order, and a Python bool is also an int); a
// kFloat value is a float in PJRT, held here as a double.
using NamedValueData = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>>;

// One named value copied out of the plugin's memory (its strings and arrays live only as
// long as their owner: the process, a client, a device).
struct NamedValue {
  std::string name;
  NamedValueData value;
};

// Copies the entries of an array the plugin returned. The plugin wrote them with its own
// header's PJRT_NamedValue, which a newer API may have made larger: the array's stride is
// the entries' struct_size (rounded up to the struct's alignment), not our sizeof. An array
// whose entries are smaller than the fields read here, or disagree on their size, is read
// no further (where the next entry starts is unknown); entries of a type newer than our
// header are skipped.
std::vector<NamedValue> read_named_values(const PJRT_NamedValue* values, size_t count);

// "1,2,3" for a list, "true"/"false", the number or the string itself.
std::string to_string(const NamedValueData& value);

// PJRT_NamedValue views of `values` for one call into the plugin: every entry has its
// struct_size set and the rest zeroed; the views point into `values`, which must outlive
// them (and stay unchanged).
std::vector<PJRT_NamedValue> to_pjrt(
    const std::vector<std::pair<std::string, NamedValueData>>& values);

}  // namespace tpu::pjrt

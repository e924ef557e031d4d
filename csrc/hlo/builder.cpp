#include "builder.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string_view>

namespace tpu::hlo {

namespace {

std::string list(const std::vector<int64_t>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

const char* direction_name(Compare direction) {
  switch (direction) {
    case Compare::EQ: return "EQ";
    case Compare::NE: return "NE";
    case Compare::LT: return "LT";
    case Compare::LE: return "LE";
    case Compare::GT: return "GT";
    case Compare::GE: return "GE";
  }
  return "EQ";
}

const char* compare_type(ElementType type) {
  if (is_float(type) || is_complex(type)) return "FLOAT";
  if (is_signed_int(type)) return "SIGNED";
  return "UNSIGNED";
}

const char* reduction_op(Reduction kind, ElementType type) {
  switch (kind) {
    case Reduction::Add: return "add";
    case Reduction::Mul: return "multiply";
    case Reduction::Max: return "maximum";
    case Reduction::Min: return "minimum";
    case Reduction::And: return type == ElementType::Pred ? "and" : "minimum";
    case Reduction::Or: return type == ElementType::Pred ? "or" : "maximum";
  }
  return "add";
}

std::string float_bits(double value, ElementType type) {
  char text[32];
  if (type == ElementType::F64) {
    uint64_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    std::snprintf(text, sizeof text, "0x%016llX", static_cast<unsigned long long>(bits));
  } else {
    float narrowed = static_cast<float>(value);
    uint32_t bits;
    std::memcpy(&bits, &narrowed, sizeof bits);
    std::snprintf(text, sizeof text, "0x%08X", bits);
  }
  return text;
}

}  // namespace

std::string i64_array(const std::vector<int64_t>& values) {
  if (values.empty()) return "array<i64>";
  std::string out = "array<i64: ";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + ">";
}

Value Builder::parameter(const TensorType& type) {
  parameters_.push_back(type);
  parameter_alias_.push_back(-1);
  return Value{-static_cast<int>(parameters_.size()), type};
}

void Builder::alias_parameter(int index, int output) { parameter_alias_.at(index) = output; }

std::string Builder::name(const Value& v) const {
  if (v.id < 0) return "%" + prefix_ + (in_region_ ? "a" : "arg") + std::to_string(-v.id - 1);
  std::string base = "%" + prefix_ + std::to_string(v.id);
  return v.result < 0 ? base : base + "#" + std::to_string(v.result);
}

std::string Builder::op_text(const std::string& op_name, const std::vector<Value>& operands,
                             const std::string& attributes, const std::string& region) const {
  std::string line = "\"stablehlo." + op_name + "\"(";
  std::string types = "(";
  for (size_t i = 0; i < operands.size(); ++i) {
    line += (i ? ", " : "") + name(operands[i]);
    types += (i ? ", " : "") + operands[i].type.str();
  }
  line += ")";
  if (!region.empty()) line += " " + region;
  if (!attributes.empty()) line += " {" + attributes + "}";
  return line + " : " + types + ")";
}

Value Builder::op(const std::string& op_name, const std::vector<Value>& operands,
                  const TensorType& result, const std::string& attributes,
                  const std::string& region) {
  // The same line as op_text() gives, appended in place: every eager op runs this
  // several times, so it avoids the temporaries of string concatenation.
  Value out{next_id_++, result};
  body_ += "    ";
  body_ += name(out);
  body_ += " = \"stablehlo.";
  body_ += op_name;
  body_ += "\"(";
  for (size_t i = 0; i < operands.size(); ++i) {
    if (i) body_ += ", ";
    body_ += name(operands[i]);
  }
  body_ += ')';
  if (!region.empty()) {
    body_ += ' ';
    body_ += region;
  }
  if (!attributes.empty()) {
    body_ += " {";
    body_ += attributes;
    body_ += '}';
  }
  body_ += " : (";
  for (size_t i = 0; i < operands.size(); ++i) {
    if (i) body_ += ", ";
    operands[i].type.append_to(body_);
  }
  body_ += ") -> ";
  result.append_to(body_);
  body_ += '\n';
  return out;
}

std::vector<Value> Builder::op_multi(const std::string& op_name, const std::vector<Value>& operands,
                                     const std::vector<TensorType>& results,
                                     const std::string& attributes, const std::string& region) {
  int id = next_id_++;
  std::string line = "    %" + prefix_ + std::to_string(id) + ":" + std::to_string(results.size()) +
                     " = " + op_text(op_name, operands, attributes, region);
  std::string result_types;
  std::vector<Value> out;
  for (size_t i = 0; i < results.size(); ++i) {
    result_types += (i ? ", " : "") + results[i].str();
    out.push_back(Value{id, results[i], static_cast<int>(i)});
  }
  body_ += line + " -> (" + result_types + ")\n";
  return out;
}

std::string Builder::region(const std::vector<TensorType>& argument_types, const RegionBody& body) {
  Builder nested;
  nested.prefix_ = prefix_ + "r" + std::to_string(next_region_++) + "_";
  nested.in_region_ = true;
  nested.for_xla_cpu_ = for_xla_cpu_;
  nested.nan_propagating_min_max_ = nan_propagating_min_max_;
  nested.matmul_precision_ = matmul_precision_;
  std::vector<Value> arguments;
  for (const TensorType& type : argument_types) arguments.push_back(nested.parameter(type));
  std::vector<Value> yielded = body(nested, arguments);
  std::string text = "({\n  ^bb0(";
  for (size_t i = 0; i < arguments.size(); ++i) {
    text += (i ? ", " : "") + nested.name(arguments[i]) + ": " + argument_types[i].str();
  }
  return text + "):\n" + nested.body_and_return(yielded) + "  })";
}

std::string Builder::body_and_return(const std::vector<Value>& yielded) const {
  std::string names;
  std::string types;
  for (size_t i = 0; i < yielded.size(); ++i) {
    names += (i ? ", " : "") + name(yielded[i]);
    types += (i ? ", " : "") + yielded[i].type.str();
  }
  return body_ + "    \"stablehlo.return\"(" + names + ") : (" + types + ") -> ()\n";
}

Value Builder::constant(double value, ElementType type) {
  TensorType scalar{type, {}};
  std::string literal;
  if (type == ElementType::Pred) {
    literal = value != 0 ? "true" : "false";
  } else if (is_float(type)) {
    // Hex bits keep NaN, infinities and every digit exact; f16/bf16 go through f32.
    ElementType carrier = type == ElementType::F64 ? ElementType::F64 : ElementType::F32;
    Value wide = emit(
        "constant", {}, TensorType{carrier, {}},
        "value = dense<" + float_bits(value, carrier) + "> : " + TensorType{carrier, {}}.str());
    return carrier == type ? wide : convert(wide, type);
  } else if (is_complex(type)) {
    ElementType part = type == ElementType::C64 ? ElementType::F32 : ElementType::F64;
    Value real = constant(value, part);
    return emit("complex", {real, constant(0.0, part)}, scalar);
  } else {
    literal = std::to_string(static_cast<long long>(value));
    if (is_unsigned_int(type) && value < 0) literal = "0";
  }
  return emit("constant", {}, scalar, "value = dense<" + literal + "> : " + scalar.str());
}

Value Builder::constant_i64(const std::vector<int64_t>& values) {
  TensorType type{ElementType::S64, {static_cast<int64_t>(values.size())}};
  return emit("constant", {}, type, "value = dense<" + list(values) + "> : " + type.str());
}

Value Builder::unary(const char* op, const Value& x) { return emit(op, {x}, x.type); }

Value Builder::binary(const char* op, const Value& a, const Value& b) {
  if (a.type != b.type) {
    throw std::invalid_argument(std::string("stablehlo.") + op + ": operand types differ (" +
                                a.type.str() + " vs " + b.type.str() + ")");
  }
  Value result = emit(op, {a, b}, a.type);
  std::string_view name = op;
  if (nan_propagating_min_max_ && !in_region_ && is_float(a.element()) &&
      (name == "maximum" || name == "minimum")) {
    // XLA:CPU's fast min/max returns `a` when `b` is NaN; StableHLO (and PyTorch) propagate
    // a NaN from either side. Reduction bodies (in regions) handle NaN on their own.
    result = select(compare(Compare::NE, b, b), b, result);
    result = select(compare(Compare::NE, a, a), a, result);
  }
  return result;
}

Value Builder::compare(Compare direction, const Value& a, const Value& b) {
  std::string attributes = std::string("comparison_direction = #stablehlo<comparison_direction ") +
                           direction_name(direction) +
                           ">, compare_type = #stablehlo<comparison_type " +
                           compare_type(a.element()) + ">";
  return emit("compare", {a, b}, TensorType{ElementType::Pred, a.dims()}, attributes);
}

Value Builder::select(const Value& pred, const Value& on_true, const Value& on_false) {
  return emit("select", {pred, on_true, on_false}, on_true.type);
}

Value Builder::convert(const Value& x, ElementType to) {
  if (x.element() == to) return x;
  if (is_float8(x.element()) && to != ElementType::F32) {  // exact, and one path for the rest
    return convert(emit("convert", {x}, TensorType{ElementType::F32, x.dims()}), to);
  }
  if (is_float8(to) && !is_complex(x.element()) && to != x.element()) return to_float8(x, to);
  const bool from_complex = is_complex(x.element());
  if (from_complex && to == ElementType::Pred) {  // true when either part is nonzero
    return compare(Compare::NE, x, broadcast_to(constant(0, x.element()), x.dims()));
  }
  if (from_complex && !is_complex(to)) {  // casting drops the imaginary part, as in C++
    ElementType part = x.element() == ElementType::C64 ? ElementType::F32 : ElementType::F64;
    return convert(emit("real", {x}, TensorType{part, x.dims()}), to);
  }
  if (!from_complex && is_complex(to)) {
    ElementType part = to == ElementType::C64 ? ElementType::F32 : ElementType::F64;
    Value real = convert(x, part);
    Value zero = broadcast_to(constant(0, part), x.dims());
    return emit("complex", {real, zero}, TensorType{to, x.dims()});
  }
  if (is_float(x.element()) &&
      (to == ElementType::S8 || to == ElementType::S16 || to == ElementType::S32 ||
       to == ElementType::S64 || to == ElementType::U8)) {
    return float_to_int_as_cpu(x, to);
  }
  return emit("convert", {x}, TensorType{to, x.dims()});
}

Value Builder::float_to_int_as_cpu(const Value& x, ElementType to) {
  Value wide = x.element() == ElementType::F64 ? x : convert(x, ElementType::F32);  // exact
  const ElementType via = to == ElementType::S64 ? ElementType::S64 : ElementType::S32;
  const double limit = via == ElementType::S64 ? 9223372036854775808.0 : 2147483648.0;
  auto splat = [&](double value, ElementType type) {
    return broadcast_to(constant(value, type), x.dims());
  };
  Value in_range =  // false for NaN
      binary("and", compare(Compare::GE, wide, splat(-limit, wide.element())),
             compare(Compare::LT, wide, splat(limit, wide.element())));
  Value truncated =
      select(in_range, emit("convert", {wide}, TensorType{via, x.dims()}), splat(-limit, via));
  return to == via ? truncated : emit("convert", {truncated}, TensorType{to, x.dims()});
}

Value Builder::to_float8(const Value& x, ElementType to) {
  // Mantissa bits and the exponent of the smallest normal number of each 8-bit type.
  const int mantissa = to == ElementType::F8E5M2 || to == ElementType::F8E5M2FNUZ ? 2 : 3;
  const int min_exponent = to == ElementType::F8E4M3FN     ? -6
                           : to == ElementType::F8E5M2     ? -14
                           : to == ElementType::F8E4M3FNUZ ? -7
                                                           : -15;
  const bool fnuz = to == ElementType::F8E4M3FNUZ || to == ElementType::F8E5M2FNUZ;
  const TensorType f32{ElementType::F32, x.dims()};
  const TensorType s32{ElementType::S32, x.dims()};
  auto splat = [&](double value, ElementType type) {
    return broadcast_to(constant(value, type), x.dims());
  };
  Value wide = x.element() == ElementType::F32 ? x : emit("convert", {x}, f32);
  // The spacing of the 8-bit grid around |x|: 2^(max(exponent(x), min_exponent) - mantissa),
  // made from its exponent bits. Dividing by it and multiplying back are exact.
  Value bits = bitcast_convert(emit("abs", {wide}, f32), s32);
  Value biased = binary("shift_right_logical", bits, splat(23, ElementType::S32));
  Value exponent = binary("subtract", biased, splat(127, ElementType::S32));
  exponent = binary("maximum", exponent, splat(min_exponent, ElementType::S32));
  Value spacing = bitcast_convert(
      binary("shift_left", binary("add", exponent, splat(127 - mantissa, ElementType::S32)),
             splat(23, ElementType::S32)),
      f32);
  Value rounded = binary(
      "multiply", emit("round_nearest_even", {binary("divide", wide, spacing)}, f32), spacing);
  // Infinity and NaN pass through the division and rounding unchanged.
  if (to == ElementType::F8E4M3FN) {  // PyTorch saturates (infinity too) at +-448; NaN stays
    Value limit = splat(448, ElementType::F32);
    rounded = select(compare(Compare::GT, emit("abs", {rounded}, f32), limit),
                     binary("multiply", emit("sign", {rounded}, f32), limit), rounded);
  }
  if (fnuz) {  // no negative zero: -0.0001 becomes +0, not 0x80 (NaN)
    rounded = select(compare(Compare::EQ, rounded, splat(0, ElementType::F32)),
                     splat(0, ElementType::F32), rounded);
  }
  Value narrowed = emit("convert", {rounded}, TensorType{to, x.dims()});  // exact, or out of range
  // NaN as PyTorch writes it (XLA keeps the payload's top bits: e5m2 NaN would be 0x7E),
  // chosen among the bytes: XLA:CPU would run a select of 8-bit floats through f16.
  // e4m3fn and e5m2 keep the NaN's sign, as PyTorch does; the fnuz types have one NaN.
  const TensorType bytes{ElementType::U8, x.dims()};
  Value nan = splat(fnuz ? 0x80 : 0x7F, ElementType::U8);
  if (!fnuz) {
    Value sign =
        binary("shift_right_logical", bitcast_convert(wide, TensorType{ElementType::U32, x.dims()}),
               splat(24, ElementType::U32));  // the top byte: sign and 7 exponent bits
    Value sign_bit = binary("and", convert(sign, ElementType::U8), splat(0x80, ElementType::U8));
    nan = binary("or", nan, sign_bit);
  }
  Value chosen = select(compare(Compare::NE, wide, wide), nan, bitcast_convert(narrowed, bytes));
  return bitcast_convert(chosen, TensorType{to, x.dims()});
}

Value Builder::complex_parts(const Value& x, bool imaginary) {
  ElementType part = x.element() == ElementType::C64 ? ElementType::F32 : ElementType::F64;
  return emit(imaginary ? "imag" : "real", {x}, TensorType{part, x.dims()});
}

Value Builder::make_complex(const Value& real, const Value& imaginary) {
  ElementType type = real.element() == ElementType::F32 ? ElementType::C64 : ElementType::C128;
  return emit("complex", {real, imaginary}, TensorType{type, real.dims()});
}

Value Builder::bitcast_convert(const Value& x, const TensorType& to) {
  return emit("bitcast_convert", {x}, to);
}

Value Builder::reshape(const Value& x, const std::vector<int64_t>& dims) {
  if (x.dims() == dims) return x;
  TensorType result{x.element(), dims};
  if (result.num_elements() != x.type.num_elements()) {
    throw std::invalid_argument("stablehlo.reshape: " + x.type.str() + " to " + result.str() +
                                " changes the element count");
  }
  return emit("reshape", {x}, result);
}

Value Builder::transpose(const Value& x, const std::vector<int64_t>& permutation) {
  bool identity = true;
  std::vector<int64_t> dims;
  for (size_t i = 0; i < permutation.size(); ++i) {
    identity = identity && permutation[i] == static_cast<int64_t>(i);
    dims.push_back(x.dims().at(permutation[i]));
  }
  if (identity) return x;
  Value result = emit("transpose", {x}, TensorType{x.element(), dims},
                      "permutation = " + i64_array(permutation));
  if (!host_matmul_) return result;  // only host matmuls read transposes in place
  int64_t rank = x.rank();
  bool swaps_last_two =
      rank >= 2 && permutation[rank - 1] == rank - 2 && permutation[rank - 2] == rank - 1;
  for (int64_t i = 0; swaps_last_two && i < rank - 2; ++i) {
    swaps_last_two = permutation[i] == i;
  }
  if (swaps_last_two) swapped_last_two_[result.id] = x;
  return result;
}

Value Builder::broadcast_in_dim(const Value& x, const std::vector<int64_t>& dims,
                                const std::vector<int64_t>& broadcast_dimensions) {
  return emit("broadcast_in_dim", {x}, TensorType{x.element(), dims},
              "broadcast_dimensions = " + i64_array(broadcast_dimensions));
}

Value Builder::broadcast_to(const Value& x, const std::vector<int64_t>& dims) {
  if (x.dims() == dims) return x;
  int64_t lead = static_cast<int64_t>(dims.size()) - x.rank();
  if (lead < 0) throw std::invalid_argument("broadcast_to: target rank is smaller than operand's");
  std::vector<int64_t> mapping;
  for (int64_t i = 0; i < x.rank(); ++i) mapping.push_back(lead + i);
  return broadcast_in_dim(x, dims, mapping);
}

Value Builder::slice(const Value& x, const std::vector<int64_t>& start,
                     const std::vector<int64_t>& limit, const std::vector<int64_t>& strides) {
  std::vector<int64_t> dims;
  bool identity = true;
  for (size_t i = 0; i < start.size(); ++i) {
    dims.push_back((limit[i] - start[i] + strides[i] - 1) / strides[i]);
    identity = identity && start[i] == 0 && limit[i] == x.dims()[i] && strides[i] == 1;
  }
  if (identity) return x;
  return emit("slice", {x}, TensorType{x.element(), dims},
              "start_indices = " + i64_array(start) + ", limit_indices = " + i64_array(limit) +
                  ", strides = " + i64_array(strides));
}

Value Builder::pad(const Value& x, const Value& padding_value, const std::vector<int64_t>& low,
                   const std::vector<int64_t>& high, const std::vector<int64_t>& interior) {
  std::vector<int64_t> dims;
  for (size_t i = 0; i < low.size(); ++i) {
    int64_t d = x.dims()[i];
    dims.push_back(low[i] + high[i] + d + (d > 0 ? (d - 1) * interior[i] : 0));
  }
  return emit("pad", {x, padding_value}, TensorType{x.element(), dims},
              "edge_padding_low = " + i64_array(low) + ", edge_padding_high = " + i64_array(high) +
                  ", interior_padding = " + i64_array(interior));
}

Value Builder::concatenate(const std::vector<Value>& values, int64_t dimension) {
  if (values.size() == 1) return values[0];
  TensorType result = values.at(0).type;
  result.dims[dimension] = 0;
  for (const Value& v : values) result.dims[dimension] += v.dims()[dimension];
  return emit("concatenate", values, result, "dimension = " + std::to_string(dimension) + " : i64");
}

Value Builder::iota(const TensorType& type, int64_t dimension) {
  return emit("iota", {}, type, "iota_dimension = " + std::to_string(dimension) + " : i64");
}

Value Builder::dot_general(const Value& lhs, const Value& rhs,
                           const std::vector<int64_t>& lhs_batch,
                           const std::vector<int64_t>& rhs_batch,
                           const std::vector<int64_t>& lhs_contract,
                           const std::vector<int64_t>& rhs_contract, ElementType result) {
  if (host_matmul_) {
    if (auto call =
            host_matmul(lhs, rhs, lhs_batch, rhs_batch, lhs_contract, rhs_contract, result)) {
      return *call;
    }
  }
  if (lhs.element() == ElementType::S64 || lhs.element() == ElementType::U64) {
    return dot_as_multiply_and_sum(lhs, rhs, lhs_batch, rhs_batch, lhs_contract, rhs_contract,
                                   result);
  }
  auto contains = [](const std::vector<int64_t>& v, int64_t x) {
    for (int64_t y : v) {
      if (y == x) return true;
    }
    return false;
  };
  std::vector<int64_t> dims;
  for (int64_t d : lhs_batch) dims.push_back(lhs.dims()[d]);
  for (int64_t d = 0; d < lhs.rank(); ++d) {
    if (!contains(lhs_batch, d) && !contains(lhs_contract, d)) dims.push_back(lhs.dims()[d]);
  }
  for (int64_t d = 0; d < rhs.rank(); ++d) {
    if (!contains(rhs_batch, d) && !contains(rhs_contract, d)) dims.push_back(rhs.dims()[d]);
  }
  std::string numbers = "dot_dimension_numbers = #stablehlo.dot<";
  std::string sep;
  auto field = [&](const char* field_name, const std::vector<int64_t>& v) {
    if (v.empty()) return;
    numbers += sep + field_name + " = " + list(v);
    sep = ", ";
  };
  field("lhs_batching_dimensions", lhs_batch);
  field("rhs_batching_dimensions", rhs_batch);
  field("lhs_contracting_dimensions", lhs_contract);
  field("rhs_contracting_dimensions", rhs_contract);
  return emit("dot_general", {lhs, rhs}, TensorType{result, dims},
              numbers + ">" + precision_config(lhs, rhs));
}

Value Builder::dot_as_multiply_and_sum(const Value& lhs, const Value& rhs,
                                       const std::vector<int64_t>& lhs_batch,
                                       const std::vector<int64_t>& rhs_batch,
                                       const std::vector<int64_t>& lhs_contract,
                                       const std::vector<int64_t>& rhs_contract,
                                       ElementType result) {
  // Both operands laid out as [batch, free, contract], broadcast into
  // [batch, lhs free, rhs free, contract], multiplied, and summed over the contracting
  // dimensions (XLA fuses the product into the sum: nothing that size is stored).
  auto free_dims = [](const Value& x, const std::vector<int64_t>& batch,
                      const std::vector<int64_t>& contract) {
    std::vector<int64_t> free;
    for (int64_t d = 0; d < x.rank(); ++d) {
      bool used = false;
      for (int64_t b : batch) used |= b == d;
      for (int64_t c : contract) used |= c == d;
      if (!used) free.push_back(d);
    }
    return free;
  };
  const std::vector<int64_t> lhs_free = free_dims(lhs, lhs_batch, lhs_contract);
  const std::vector<int64_t> rhs_free = free_dims(rhs, rhs_batch, rhs_contract);
  const int64_t nb = static_cast<int64_t>(lhs_batch.size());
  const int64_t nl = static_cast<int64_t>(lhs_free.size());
  const int64_t nr = static_cast<int64_t>(rhs_free.size());
  const int64_t nc = static_cast<int64_t>(lhs_contract.size());
  std::vector<int64_t> full;
  for (int64_t d : lhs_batch) full.push_back(lhs.dims()[d]);
  for (int64_t d : lhs_free) full.push_back(lhs.dims()[d]);
  for (int64_t d : rhs_free) full.push_back(rhs.dims()[d]);
  for (int64_t d : lhs_contract) full.push_back(lhs.dims()[d]);
  auto spread = [&](const Value& x, const std::vector<int64_t>& batch,
                    const std::vector<int64_t>& free, const std::vector<int64_t>& contract,
                    int64_t free_at) {
    std::vector<int64_t> order(batch);
    order.insert(order.end(), free.begin(), free.end());
    order.insert(order.end(), contract.begin(), contract.end());
    std::vector<int64_t> into;
    for (int64_t i = 0; i < nb; ++i) into.push_back(i);
    for (int64_t i = 0; i < static_cast<int64_t>(free.size()); ++i) into.push_back(free_at + i);
    for (int64_t i = 0; i < nc; ++i) into.push_back(nb + nl + nr + i);
    Value cast = x.element() == result ? x : convert(x, result);
    return broadcast_in_dim(transpose(cast, order), full, into);
  };
  Value product = binary("multiply", spread(lhs, lhs_batch, lhs_free, lhs_contract, nb),
                         spread(rhs, rhs_batch, rhs_free, rhs_contract, nb + nl));
  if (nc == 0) return product;
  std::vector<int64_t> summed;
  for (int64_t i = 0; i < nc; ++i) summed.push_back(nb + nl + nr + i);
  return reduce(product, constant(0, result), Reduction::Add, summed);
}

std::string host_matmul_target(bool transpose_lhs, bool transpose_rhs) {
  std::string name = "torch_tpu.host_matmul_";
  name += transpose_lhs ? 't' : 'n';
  name += transpose_rhs ? 't' : 'n';
  return name;
}

std::optional<Value> Builder::host_matmul(const Value& lhs, const Value& rhs,
                                          const std::vector<int64_t>& lhs_batch,
                                          const std::vector<int64_t>& rhs_batch,
                                          const std::vector<int64_t>& lhs_contract,
                                          const std::vector<int64_t>& rhs_contract,
                                          ElementType result) {
  ElementType e = lhs.element();
  if ((e != ElementType::F32 && e != ElementType::F64) || rhs.element() != e || result != e) {
    return std::nullopt;
  }
  // dot_general's default form: [batch,] m x k times [batch,] k x n.
  int64_t rank = lhs.rank();
  std::vector<int64_t> batch = rank == 3 ? std::vector<int64_t>{0} : std::vector<int64_t>{};
  if ((rank != 2 && rank != 3) || rhs.rank() != rank || lhs_batch != batch || rhs_batch != batch ||
      lhs_contract != std::vector<int64_t>{rank - 1} ||
      rhs_contract != std::vector<int64_t>{rank - 2} ||
      lhs.dims()[rank - 1] != rhs.dims()[rank - 2] ||
      (rank == 3 && lhs.dims()[0] != rhs.dims()[0])) {
    return std::nullopt;
  }
  for (const Value* v : {&lhs, &rhs}) {
    for (int64_t d : v->dims()) {
      if (d == 0) return std::nullopt;  // BLAS leading dimensions must be positive
    }
  }
  std::vector<int64_t> dims = lhs.dims();
  dims.back() = rhs.dims().back();
  auto stored = [&](const Value& v, bool* transposed) {
    auto found = swapped_last_two_.find(v.id);
    *transposed = found != swapped_last_two_.end();  // keys are single-result op ids
    return *transposed ? found->second : v;
  };
  bool transpose_lhs = false, transpose_rhs = false;
  Value a = stored(lhs, &transpose_lhs);
  Value b = stored(rhs, &transpose_rhs);
  return host_call(host_matmul_target(transpose_lhs, transpose_rhs), {a, b},
                   {TensorType{e, dims}})[0];
}

std::vector<Value> Builder::host_call(const std::string& target, const std::vector<Value>& operands,
                                      const std::vector<TensorType>& results) {
  const std::string attributes =
      "call_target_name = \"" + target + "\", api_version = 4 : i32, backend_config = {}";
  if (results.size() == 1) return {op("custom_call", operands, results[0], attributes)};
  return op_multi("custom_call", operands, results, attributes);
}

std::string Builder::precision_config(const Value& lhs, const Value& rhs) const {
  auto single = [](ElementType e) { return e == ElementType::F32 || e == ElementType::C64; };
  if (matmul_precision_ == MatmulPrecision::Default || !single(lhs.element()) ||
      !single(rhs.element())) {
    return "";
  }
  const char* name = matmul_precision_ == MatmulPrecision::High ? "HIGH" : "HIGHEST";
  return std::string(", precision_config = [#stablehlo<precision ") + name +
         ">, #stablehlo<precision " + name + ">]";
}

Value Builder::reduce(const Value& x, const Value& init, Reduction kind,
                      const std::vector<int64_t>& dims) {
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < x.rank(); ++d) {
    bool reduced = false;
    for (int64_t r : dims) reduced = reduced || r == d;
    if (!reduced) kept.push_back(x.dims()[d]);
  }
  const char* combine = reduction_op(kind, x.element());
  TensorType scalar{x.element(), {}};
  std::string body = region({scalar, scalar}, [&](Builder& r, const std::vector<Value>& a) {
    return std::vector<Value>{r.op(combine, {a[0], a[1]}, scalar)};
  });
  return emit("reduce", {reduction_input(x, dims), init}, TensorType{x.element(), kept},
              "dimensions = " + i64_array(dims), body);
}

Value Builder::reduction_input(const Value& x, const std::vector<int64_t>& dims) {
  if (!for_xla_cpu_ || dims.empty()) return x;
  int64_t reduced_elements = 1;
  for (int64_t d : dims) reduced_elements *= x.dims()[d];
  const bool keeps_innermost = std::find(dims.begin(), dims.end(), x.rank() - 1) == dims.end();
  return keeps_innermost && reduced_elements > 1 ? optimization_barrier(x) : x;
}

std::string Builder::branch(const std::vector<TensorType>& results, const BranchBody& body) {
  // The branch continues this builder's numbering, so it can name this function's values
  // (stablehlo.if regions capture them) and its own names stay unique.
  Builder nested;
  nested.prefix_ = prefix_;
  nested.in_region_ = in_region_;
  nested.next_id_ = next_id_;
  nested.next_region_ = next_region_;
  nested.for_xla_cpu_ = for_xla_cpu_;
  nested.nan_propagating_min_max_ = nan_propagating_min_max_;
  nested.matmul_precision_ = matmul_precision_;
  nested.callees_ = callees_;
  std::vector<Value> yielded = body(nested);
  next_id_ = nested.next_id_;
  next_region_ = nested.next_region_;
  callees_ = nested.callees_;  // functions a branch calls belong to the module
  if (yielded.size() != results.size()) {
    throw std::invalid_argument("stablehlo.if: a branch returns " + std::to_string(yielded.size()) +
                                " values, expected " + std::to_string(results.size()));
  }
  for (size_t i = 0; i < yielded.size(); ++i) {
    if (!(yielded[i].type == results[i])) {
      throw std::invalid_argument("stablehlo.if: a branch returns " + yielded[i].type.str() +
                                  " where " + results[i].str() + " is expected");
    }
  }
  return "{\n" + nested.body_and_return(yielded) + "  }";
}

std::vector<Value> Builder::if_else(const Value& pred, const std::vector<TensorType>& results,
                                    const BranchBody& on_true, const BranchBody& on_false) {
  if (results.empty()) throw std::invalid_argument("stablehlo.if needs at least one result");
  if (!(pred.type == TensorType{ElementType::Pred, {}})) {
    throw std::invalid_argument("stablehlo.if needs a scalar i1 predicate, got " + pred.type.str());
  }
  std::string regions = "(" + branch(results, on_true) + ", " + branch(results, on_false) + ")";
  return op_multi("if", {pred}, results, "", regions);
}

Value Builder::optimization_barrier(const Value& x) {
  return emit("optimization_barrier", {x}, x.type);
}

Value Builder::gather_1d(const Value& operand, const Value& indices) {
  std::vector<int64_t> index_dims = indices.dims();
  index_dims.push_back(1);
  Value index_vectors = reshape(indices, index_dims);
  std::string attributes =
      "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], start_index_map = [0], "
      "index_vector_dim = " +
      std::to_string(indices.rank()) + ">, slice_sizes = array<i64: 1>, indices_are_sorted = false";
  return emit("gather", {operand, index_vectors}, TensorType{operand.element(), indices.dims()},
              attributes);
}

Value Builder::scatter_1d(const Value& operand, const Value& indices, const Value& updates) {
  std::vector<int64_t> index_dims = indices.dims();
  index_dims.push_back(1);
  Value index_vectors = reshape(indices, index_dims);
  std::string attributes =
      "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], "
      "scatter_dims_to_operand_dims = [0], index_vector_dim = " +
      std::to_string(indices.rank()) + ">, indices_are_sorted = false, unique_indices = false";
  TensorType scalar{operand.element(), {}};
  std::string replace = region({scalar, scalar}, [](Builder&, const std::vector<Value>& a) {
    return std::vector<Value>{a[1]};
  });
  return emit("scatter", {operand, index_vectors, updates}, operand.type, attributes, replace);
}

std::vector<Value> Builder::rng_bit_generator(const Value& state, const TensorType& type) {
  return op_multi("rng_bit_generator", {state}, {state.type, type},
                  "rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>");
}

Value Builder::dynamic_update_slice(const Value& operand, const Value& update,
                                    const std::vector<Value>& start_indices) {
  std::vector<Value> operands{operand, update};
  operands.insert(operands.end(), start_indices.begin(), start_indices.end());
  return emit("dynamic_update_slice", operands, operand.type);
}

Value Builder::dynamic_slice(const Value& operand, const std::vector<Value>& start_indices,
                             const std::vector<int64_t>& sizes) {
  std::vector<Value> operands{operand};
  operands.insert(operands.end(), start_indices.begin(), start_indices.end());
  return emit("dynamic_slice", operands, TensorType{operand.element(), sizes},
              "slice_sizes = " + i64_array(sizes));
}

std::string Builder::module_text(const std::vector<Value>& results) const {
  std::string text = "module @torch_tpu {\n" + function_text("public @main", results);
  for (const Callee& callee : callees_) text += *callee.text;
  return text + "}\n";
}

std::vector<Value> Builder::call(const Callee& callee, const std::vector<Value>& operands,
                                 const std::vector<TensorType>& results) {
  if (in_region_) throw std::logic_error("a region cannot call a function");
  bool known = false;
  for (const Callee& c : callees_) known = known || c.name == callee.name;
  if (!known) callees_.push_back(callee);
  int id = next_id_++;
  std::string line = "    %" + prefix_ + std::to_string(id);
  if (results.size() != 1) line += ":" + std::to_string(results.size());
  line += " = \"func.call\"(";
  std::string types;
  for (size_t i = 0; i < operands.size(); ++i) {
    line += (i ? ", " : "") + name(operands[i]);
    types += (i ? ", " : "") + operands[i].type.str();
  }
  line += ") {callee = @" + callee.name + "} : (" + types + ") -> (";
  std::vector<Value> out;
  for (size_t i = 0; i < results.size(); ++i) {
    line += (i ? ", " : "") + results[i].str();
    out.push_back(Value{id, results[i], results.size() == 1 ? -1 : static_cast<int>(i)});
  }
  body_ += line + ")\n";
  return out;
}

std::string Builder::function_text(const std::string& function_name,
                                   const std::vector<Value>& results) const {
  std::string result_types;
  std::string names;
  for (size_t i = 0; i < results.size(); ++i) {
    if (i) {
      result_types += ", ";
      names += ", ";
    }
    results[i].type.append_to(result_types);
    names += name(results[i]);
  }
  std::string text;
  text.reserve(body_.size() + 64 * (parameters_.size() + 2) + 2 * result_types.size());
  text += "  func.func ";
  text += function_name;
  text += '(';
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (i) text += ", ";
    text += "%arg";
    text += std::to_string(i);
    text += ": ";
    parameters_[i].append_to(text);
    if (parameter_alias_[i] >= 0) {
      text += " {tf.aliasing_output = ";
      text += std::to_string(parameter_alias_[i]);
      text += " : i32}";
    }
  }
  text += ") -> (";
  text += result_types;
  text += ") {\n";
  text += body_;
  text += "    \"func.return\"(";
  text += names;
  text += ") : (";
  text += result_types;
  text += ") -> ()\n  }\n";
  return text;
}

}  // namespace tpu::hlo

#include "hlo/collectives.h"

#include <stdexcept>

namespace tpu::hlo {

namespace {
std::string one_group(int64_t replicas) {
  std::string ids;
  for (int64_t r = 0; r < replicas; ++r) ids += (r ? ", " : "") + std::to_string(r);
  return "replica_groups = dense<[[" + ids + "]]> : tensor<1x" + std::to_string(replicas) + "xi64>";
}

// type = 1: DEVICE_TO_DEVICE.
std::string channel_attribute(int64_t channel) {
  return "channel_handle = #stablehlo.channel_handle<handle = " + std::to_string(channel) +
         ", type = 1>";
}

std::string combiner_region(Builder& b, ElementType element, Combiner combine) {
  TensorType scalar{element, {}};
  return b.region({scalar, scalar}, [&](Builder& r, const std::vector<Value>& a) {
    return std::vector<Value>{r.op(combine, {a[0], a[1]}, scalar)};
  });
}

void check_dim(const Value& x, int64_t dim, int64_t replicas, const char* what) {
  if (dim < 0 || dim >= x.rank()) throw std::invalid_argument(std::string(what) + ": bad dim");
  if (replicas < 1 || x.dims()[dim] % replicas != 0) {
    throw std::invalid_argument(std::string(what) + ": dim " + std::to_string(dim) + " of size " +
                                std::to_string(x.dims()[dim]) + " does not split into " +
                                std::to_string(replicas) + " blocks");
  }
}
}  // namespace

Value all_reduce(Builder& b, const Value& x, Combiner combine, int64_t replicas, int64_t channel) {
  std::string region = combiner_region(b, x.element(), combine);
  return b.op("all_reduce", {x}, x.type, one_group(replicas) + ", " + channel_attribute(channel),
              region);
}

Value all_gather(Builder& b, const Value& x, int64_t dim, int64_t replicas, int64_t channel) {
  if (dim < 0 || dim >= x.rank()) throw std::invalid_argument("all_gather: bad dim");
  TensorType result = x.type;
  result.dims[dim] *= replicas;
  return b.op("all_gather", {x}, result,
              "all_gather_dim = " + std::to_string(dim) + " : i64, " + one_group(replicas) + ", " +
                  channel_attribute(channel));
}

Value reduce_scatter(Builder& b, const Value& x, Combiner combine, int64_t dim, int64_t replicas,
                     int64_t channel) {
  check_dim(x, dim, replicas, "reduce_scatter");
  TensorType result = x.type;
  result.dims[dim] /= replicas;
  std::string region = combiner_region(b, x.element(), combine);
  return b.op("reduce_scatter", {x}, result,
              "scatter_dimension = " + std::to_string(dim) + " : i64, " + one_group(replicas) +
                  ", " + channel_attribute(channel),
              region);
}

Value all_to_all(Builder& b, const Value& x, int64_t dim, int64_t replicas) {
  check_dim(x, dim, replicas, "all_to_all");
  const std::string d = std::to_string(dim) + " : i64, ";
  return b.op("all_to_all", {x}, x.type,
              "split_dimension = " + d + "concat_dimension = " + d +
                  "split_count = " + std::to_string(replicas) + " : i64, " + one_group(replicas));
}

Value collective_permute(Builder& b, const Value& x,
                         const std::vector<std::pair<int64_t, int64_t>>& pairs) {
  std::string list;
  for (size_t i = 0; i < pairs.size(); ++i) {
    list += (i ? ", [" : "[") + std::to_string(pairs[i].first) + ", " +
            std::to_string(pairs[i].second) + "]";
  }
  return b.op("collective_permute", {x}, x.type,
              "source_target_pairs = dense<[" + list + "]> : tensor<" +
                  std::to_string(pairs.size()) + "x2xi64>");
}

}  // namespace tpu::hlo

#pragma once
// StableHLO collectives over the replicas of a replicated program (replica r runs on
// the r-th device of the compile options' device assignment), each over one group of
// all `replicas`. Reductions and all_gather carry a channel (one per collective of a
// program), so XLA matches the ranks' runs by channel id and launch id. all_to_all and
// collective_permute have none: with a channel XLA reads their ids as partitions.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hlo/builder.h"

namespace tpu::hlo {

// The element-wise combiner of a reduction collective: a binary StableHLO op name such
// as "add", "multiply", "maximum", "minimum", "and", "or", "xor".
using Combiner = const char*;

// Every replica's x combined; the same shape on every replica.
Value all_reduce(Builder& b, const Value& x, Combiner combine, int64_t replicas, int64_t channel);
// The replicas' x concatenated along `dim` in replica order.
Value all_gather(Builder& b, const Value& x, int64_t dim, int64_t replicas, int64_t channel);
// x (dims[dim] divisible by replicas) combined across replicas; replica r keeps block r of `dim`.
Value reduce_scatter(Builder& b, const Value& x, Combiner combine, int64_t dim, int64_t replicas,
                     int64_t channel);
// Block j of x's `dim` goes to replica j; the result holds the blocks received, in
// replica order, along the same dim.
Value all_to_all(Builder& b, const Value& x, int64_t dim, int64_t replicas);
// x sent along each (source, target) replica pair; a replica that is no target gets zeros.
Value collective_permute(Builder& b, const Value& x,
                         const std::vector<std::pair<int64_t, int64_t>>& pairs);

}  // namespace tpu::hlo

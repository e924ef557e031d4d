#include "hlo/collective_programs.h"

#include <stdexcept>
#include <utility>
#include <vector>

#include "hlo/builder.h"
#include "hlo/collectives.h"

namespace tpu::hlo {

const char* collective_program_kinds() {
  return "all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, permute";
}

namespace {
// "replica_groups = dense<[[0, 1, 2]]> : tensor<1x3xi64>", as collectives.cpp writes one group.
std::string one_group_attribute(int64_t replicas) {
  std::string ids;
  for (int64_t r = 0; r < replicas; ++r) ids += (r ? ", " : "") + std::to_string(r);
  return "replica_groups = dense<[[" + ids + "]]> : tensor<1x" + std::to_string(replicas) + "xi64>";
}

std::string groups_attribute(const std::vector<std::vector<int64_t>>& groups) {
  std::string rows;
  for (size_t g = 0; g < groups.size(); ++g) {
    rows += g ? ", [" : "[";
    for (size_t i = 0; i < groups[g].size(); ++i) {
      rows += (i ? ", " : "") + std::to_string(groups[g][i]);
    }
    rows += "]";
  }
  return "replica_groups = dense<[" + rows + "]> : tensor<" + std::to_string(groups.size()) + "x" +
         std::to_string(groups.empty() ? 0 : groups[0].size()) + "xi64>";
}

void check_groups(const std::vector<std::vector<int64_t>>& groups, int64_t replicas) {
  std::vector<bool> seen;
  for (const auto& group : groups) {
    if (static_cast<int64_t>(group.size()) != replicas) {
      throw std::invalid_argument("every replica group must have " + std::to_string(replicas) +
                                  " members");
    }
    for (int64_t id : group) {
      if (id < 0) throw std::invalid_argument("a replica id is negative");
      if (static_cast<size_t>(id) >= seen.size()) seen.resize(id + 1, false);
      if (seen[id]) throw std::invalid_argument("replica " + std::to_string(id) + " is twice");
      seen[id] = true;
    }
  }
  if (seen.size() != groups.size() * static_cast<size_t>(replicas)) {
    throw std::invalid_argument("the replica groups must cover replicas 0..N-1 exactly");
  }
}
}  // namespace

std::string collective_program(const std::string& kind, int64_t replicas, int64_t count,
                               ElementType type, const std::vector<std::vector<int64_t>>& groups) {
  if (!groups.empty()) check_groups(groups, replicas);
  if (replicas < 1 || count < 1) {
    throw std::invalid_argument("a collective program needs at least one replica and element");
  }
  const bool blocked = kind == "reduce_scatter" || kind == "all_to_all";
  if (blocked && count % replicas != 0) {
    throw std::invalid_argument(kind + " of " + std::to_string(count) + " elements over " +
                                std::to_string(replicas) + " replicas: the count must divide");
  }
  constexpr int64_t kChannel = 1;
  const int64_t block = count / replicas;
  Builder b;
  // A broadcast is the sum of the root's bytes and everyone else's zeros.
  const ElementType carried = kind == "broadcast" ? ElementType::U8 : type;
  Value v = b.parameter(TensorType{carried, {count}});
  Value result;
  if (kind == "all_reduce" || kind == "broadcast") {
    result = all_reduce(b, v, "add", replicas, kChannel);
  } else if (kind == "all_gather") {
    result = all_gather(b, b.reshape(v, {1, count}), 0, replicas, kChannel);
  } else if (kind == "reduce_scatter") {
    result = reduce_scatter(b, v, "add", 0, replicas, kChannel);  // flat, as the engine does
  } else if (kind == "all_to_all") {
    result = all_to_all(b, b.reshape(v, {replicas, block}), 0, replicas);
  } else if (kind == "permute") {
    std::vector<std::pair<int64_t, int64_t>> ring;
    if (groups.empty()) {
      for (int64_t r = 0; r < replicas; ++r) ring.emplace_back(r, (r + 1) % replicas);
    }
    for (const auto& group : groups) {  // a ring within each group
      for (int64_t r = 0; r < replicas; ++r) ring.emplace_back(group[r], group[(r + 1) % replicas]);
    }
    result = collective_permute(b, v, ring);
  } else {
    throw std::invalid_argument("unknown collective '" + kind + "'; expected one of " +
                                collective_program_kinds());
  }
  std::string text = b.module_text({result});
  if (!groups.empty() && kind != "permute") {
    // The same op with the groups of the whole program in place of the one group.
    const std::string one = one_group_attribute(replicas);
    const size_t at = text.find(one);
    if (at == std::string::npos) throw std::logic_error("collective without its replica group");
    text.replace(at, one.size(), groups_attribute(groups));
  }
  return text;
}

}  // namespace tpu::hlo

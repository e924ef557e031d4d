#pragma once
// This process's place in a multi-process job (torchrun): which process it is, how many
// there are, and the key-value store they share. The PJRT client is created with it, so
// that plugins that span processes (GPU, TPU) see the whole job's devices.
#include <chrono>
#include <memory>
#include <string>

#include "pjrt/key_value_store.h"

namespace tpu::runtime {

struct JobProcess {
  int node_id = 0;
  int num_nodes = 1;
  // Null for a single-process job.
  std::shared_ptr<pjrt::KeyValueStore> key_values;
  // How long a process waits for the others at start-up.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};

  bool is_multi_process() const { return key_values != nullptr && num_nodes > 1; }
};

// Processes that loaded different plugins (or versions) would meet in no collective, or
// fail inside one far from the cause. Each process publishes `platform` under its node
// id and reads everyone's; throws std::runtime_error naming the first process whose
// platform differs, or the first that has not published within the job's timeout (it
// died, has not started, or does not use the multi-process client).
void check_same_platform(const JobProcess& job, const std::string& platform);

}  // namespace tpu::runtime

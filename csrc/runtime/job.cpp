#include "runtime/job.h"

#include <stdexcept>

namespace tpu::runtime {
namespace {

std::string platform_key(int node) { return "torch_tpu/platform/" + std::to_string(node); }

}  // namespace

void check_same_platform(const JobProcess& job, const std::string& platform) {
  if (!job.is_multi_process()) return;
  job.key_values->set(platform_key(job.node_id), platform);
  for (int node = 0; node < job.num_nodes; ++node) {
    if (node == job.node_id) continue;
    std::string theirs;
    try {
      theirs = job.key_values->get(platform_key(node), job.timeout);
    } catch (const pjrt::KeyValueTimeout&) {
      throw std::runtime_error(
          "torch_tpu: process " + std::to_string(node) + " of " + std::to_string(job.num_nodes) +
          " did not create its PJRT client within " + std::to_string(job.timeout.count() / 1000) +
          " s (it died or has not started, or it does not use the multi-process client: "
          "TORCH_TPU_MULTIPROCESS_CLIENT must be the same on every rank; "
          "TORCH_TPU_JOB_TIMEOUT sets the wait in seconds)");
    }
    if (theirs != platform) {
      throw std::runtime_error("torch_tpu: process " + std::to_string(node) + " runs '" + theirs +
                               "' but process " + std::to_string(job.node_id) + " runs '" +
                               platform +
                               "': every process of a job must load the same PJRT plugin");
    }
  }
}

}  // namespace tpu::runtime

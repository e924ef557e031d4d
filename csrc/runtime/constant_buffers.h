#pragma once
// Device buffers for the small constants strict ops upload on every call (a Scalar such
// as `x * 0.5`'s 0.5, alpha, a view's storage offset): one upload per distinct value
// instead of one per call. A host-to-device upload costs about as much host time as the
// small op itself, and a training loop passes the same few values over and over.
//
// Only programs that never donate their operands may read these buffers (strict ops
// don't; defer_and_fuse packs its constants into host groups of its own).
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "pjrt/buffer.h"
#include "pjrt/client.h"

namespace tpu::runtime {

class ConstantBuffers {
 public:
  // Values of at most this many bytes are kept; larger ones are uploaded each time.
  static constexpr size_t kMaxBytes = 16;

  explicit ConstantBuffers(const pjrt::Client& client) : client_(client) {}

  // A buffer holding `bytes` as an array of `type` and `dims` on `device`: a shared one
  // for small values, a fresh upload otherwise.
  pjrt::BufferPtr get(const std::vector<unsigned char>& bytes, PJRT_Buffer_Type type,
                      const std::vector<int64_t>& dims, int device);

  size_t size() const;
  void clear();

 private:
  // A bound without bookkeeping per hit: when full, every entry goes at once.
  static constexpr size_t kMaxEntries = 512;
  const pjrt::Client& client_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, pjrt::BufferPtr> buffers_;
};

}  // namespace tpu::runtime

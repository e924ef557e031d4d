#include "runtime/constant_buffers.h"

namespace tpu::runtime {

pjrt::BufferPtr ConstantBuffers::get(const std::vector<unsigned char>& bytes, PJRT_Buffer_Type type,
                                     const std::vector<int64_t>& dims, int device) {
  if (bytes.size() > kMaxBytes || dims.size() > 1) {
    return client_.buffer_from_host(bytes.data(), type, dims, device);
  }
  std::string key;
  key.reserve(24 + bytes.size());
  key.append(reinterpret_cast<const char*>(&device), sizeof device);
  key.push_back(static_cast<char>(type));
  key.push_back(static_cast<char>(dims.size()));
  if (!dims.empty()) key.append(reinterpret_cast<const char*>(dims.data()), sizeof(int64_t));
  key.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = buffers_.find(key);
    if (found != buffers_.end()) return found->second;
  }
  pjrt::BufferPtr buffer = client_.buffer_from_host(bytes.data(), type, dims, device);
  std::lock_guard<std::mutex> lock(mutex_);
  if (buffers_.size() >= kMaxEntries) buffers_.clear();
  buffers_.emplace(std::move(key), buffer);
  return buffer;
}

size_t ConstantBuffers::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return buffers_.size();
}

void ConstantBuffers::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  buffers_.clear();
}

}  // namespace tpu::runtime

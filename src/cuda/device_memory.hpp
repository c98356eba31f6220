// Device memory owned by the host code, and the check that turns a CUDA error into an Error.
#pragma once
#include <cstddef>

namespace kvsketch::cuda {

// Throws Error("<what>: <CUDA's message>") unless status is cudaSuccess (0).
void check_cuda(int status, const char* what);

// cudaMalloc'd bytes, freed with the buffer.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  void* get() const { return memory_; }
  size_t bytes() const { return bytes_; }

 private:
  void* memory_ = nullptr;
  size_t bytes_ = 0;
};

void copy_to_device(void* device, const void* host, size_t bytes);

}  // namespace kvsketch::cuda

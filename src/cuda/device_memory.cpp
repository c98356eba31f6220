#include "cuda/device_memory.hpp"

#include <cuda_runtime.h>

#include <utility>

#include "core/require.hpp"

namespace kvsketch::cuda {

void check_cuda(int status, const char* what) {
  require(status == cudaSuccess, "{}: {}", what, cudaGetErrorString(static_cast<cudaError_t>(status)));
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes > 0) check_cuda(cudaMalloc(&memory_, bytes), "cuda: allocating device memory");
}

DeviceBuffer::~DeviceBuffer() {
  if (memory_) cudaFree(memory_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : memory_(std::exchange(other.memory_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (memory_) cudaFree(memory_);
    memory_ = std::exchange(other.memory_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void copy_to_device(void* device, const void* host, size_t bytes) {
  if (bytes > 0) check_cuda(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "cuda: copy to the device");
}

}  // namespace kvsketch::cuda

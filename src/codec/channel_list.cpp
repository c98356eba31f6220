#include "codec/channel_list.hpp"

#include <algorithm>
#include <numeric>

#include "core/require.hpp"

namespace kvsketch {

std::vector<uint8_t> channel_list_bytes(const std::vector<size_t>& channels) {
  std::vector<uint8_t> bytes;
  bytes.reserve(2 * channels.size());
  for (size_t c : channels) {
    bytes.push_back(static_cast<uint8_t>(c & 0xFF));
    bytes.push_back(static_cast<uint8_t>(c >> 8));
  }
  return bytes;
}

std::vector<size_t> channel_list_from_bytes(const std::vector<uint8_t>& bytes, size_t count, const std::string& codec) {
  require(bytes.size() == 2 * count, "codec {}: calibration state must hold {} channels ({} bytes), got {} bytes",
          codec, count, 2 * count, bytes.size());
  std::vector<size_t> channels(count);
  for (size_t i = 0; i < count; ++i) channels[i] = bytes[2 * i] | (static_cast<size_t>(bytes[2 * i + 1]) << 8);
  return channels;
}

std::vector<bool> channel_membership(const std::vector<size_t>& channels, size_t dim, const std::string& codec) {
  std::vector<bool> listed(dim, false);
  for (size_t c : channels) {
    require(c < dim, "codec {}: channel {} out of range for dimension {}", codec, c, dim);
    require(!listed[c], "codec {}: channel {} listed twice", codec, c);
    listed[c] = true;
  }
  return listed;
}

std::vector<size_t> channels_by_energy(const float* x, size_t n, size_t dim) {
  std::vector<double> energy(dim, 0.0);
  for (size_t i = 0; i < n; ++i)
    for (size_t c = 0; c < dim; ++c) energy[c] += static_cast<double>(x[i * dim + c]) * x[i * dim + c];
  std::vector<size_t> order(dim);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return energy[a] > energy[b]; });
  return order;
}

}  // namespace kvsketch

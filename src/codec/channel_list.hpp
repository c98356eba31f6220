// Channel lists (outlier channels chosen by calibration) as the bytes a codec's calibration state
// holds: u16 little-endian per channel (dimensions are at most 8192), and the ranking they come from.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvsketch {

std::vector<uint8_t> channel_list_bytes(const std::vector<size_t>& channels);
// Refuses a state of the wrong length; range and duplicates: channel_membership.
std::vector<size_t> channel_list_from_bytes(const std::vector<uint8_t>& bytes, size_t count, const std::string& codec);
// Which of dim channels the list names; refuses channels beyond dim and channels listed twice.
std::vector<bool> channel_membership(const std::vector<size_t>& channels, size_t dim, const std::string& codec);
// Channels ordered by mean square over rows x (n x dim), loudest first; ties keep channel order.
std::vector<size_t> channels_by_energy(const float* x, size_t n, size_t dim);

}  // namespace kvsketch

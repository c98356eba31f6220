// Memory that VectorCodec::attend_segments reuses from call to call: owned by whoever runs the
// call (a decode step's task), so that a warm call allocates nothing whichever thread runs it.
#pragma once
#include <vector>

#include "codec/attention_parts.hpp"
#include "codec/codec_base.hpp"

namespace kvsketch {

class AttentionScratch {
 public:
  std::vector<const CodeSegment*> live;  // segments with rows
  std::vector<size_t> rows;
  std::vector<std::ptrdiff_t> key_shift, value_shift;
  std::vector<simd::AttentionKeyGroup> groups;
  AttentionParts key_view, value_view;
};

}  // namespace kvsketch

// PagedKVCache's state (paged_cache.hpp), shared by the files that implement its members.
#pragma once
#include <map>

#include "attention/step_workspace.hpp"
#include "cache/cache_codecs.hpp"
#include "cache/paged_pages.hpp"
#include "kvsketch/paged_cache.hpp"

namespace kvsketch {

struct PagedKVCache::State {
  explicit State(Calibration calibration);

  CacheShape shape;
  KVPolicy policy;
  uint64_t seed;
  size_t page;  // tokens per page
  Calibration calibration;
  HeadCodecs codecs;
  std::map<SequenceId, Sequence> sequences;
  SequenceId next_id = 0;
  mutable WorkspacePool workspaces;  // decode's memory, reused between calls

  Sequence& sequence(SequenceId id, const char* operation);
  const Sequence& sequence(SequenceId id, const char* operation) const;
  void check_layer(size_t layer, const char* operation) const;
  // Sets the codecs of a head to the calibration's states.
  void apply_calibration(size_t layer, size_t kv_head);
  // Fits a head's calibration on the first tokens of `rows` (its sinks and window) and applies it.
  void fit_from_window(const SequenceLayer& rows, size_t layer, size_t kv_head);
  // Encodes the `count` window tokens after the retained ones of every head into the pages (rows.body
  // and the window counts are the caller's to update).
  void encode_window(SequenceLayer& rows, size_t layer, size_t count);
};

}  // namespace kvsketch

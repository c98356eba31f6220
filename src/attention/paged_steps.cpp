#include "attention/paged_steps.hpp"

#include <algorithm>
#include <numeric>

namespace kvsketch {

GroupStep paged_group_step(const VectorCodec& key_codec, const VectorCodec& value_codec, const SequenceLayer& rows,
                           size_t g, size_t prefix, const float* queries, size_t heads,
                           const AttentionOptions& options) {
  const HeadRows& head = rows.heads[g];
  const size_t d = key_codec.dim();
  const size_t sinks = std::min(prefix, head.sinks), body = std::min(prefix - sinks, rows.body);
  const size_t window = std::min(prefix - sinks - body, head.window);
  // The codes are read in whole row groups (quads, KIVI's groups): a prefix that ends inside one
  // (a prefill's position) reads that group's first rows decoded instead.
  const size_t group = std::lcm(key_codec.row_group(), value_codec.row_group());
  const size_t whole = body / group * group, rest = body - whole;
  std::vector<CodeSegment> pages;
  for (size_t page = 0, left = whole; left > 0; ++page) {
    const size_t take = std::min(left, rows.pages[page]->rows());
    pages.push_back({&rows.pages[page]->keys[g], &rows.pages[page]->values[g], 0, take});
    left -= take;
  }
  const size_t live = head.retained * d;  // the window's tokens not yet encoded start here
  std::vector<ExactPiece> exact = sink_and_window_pieces(head.sink_keys.data(), head.sink_values.data(), sinks,
                                                         head.window_keys.data() + live,
                                                         head.window_values.data() + live, window, d);
  std::vector<std::vector<float>> storage;
  if (rest > 0) {
    const size_t page_rows = rows.pages.front()->rows();  // every page but the last is full
    const Page& page = *rows.pages[whole / page_rows];
    const size_t first = whole % page_rows;
    storage.assign(2, std::vector<float>(group * d));
    key_codec.decode(page.keys[g], first, group, storage[0].data());
    value_codec.decode(page.values[g], first, group, storage[1].data());
    exact.push_back({nullptr, nullptr, rest, storage[0].data(), storage[1].data()});
  }
  return GroupStep(key_codec, value_codec, queries, heads, std::move(exact),
                   body_tasks(pages, options.tokens_per_task, group), options.arithmetic, std::move(storage));
}

void run_paged_steps(std::vector<GroupStep>& steps, const AttentionOptions& options) {
  if (options.executor) return run_steps(steps, *options.executor);
  OpenMPExecutor executor(options.threads);
  run_steps(steps, executor);
}

}  // namespace kvsketch

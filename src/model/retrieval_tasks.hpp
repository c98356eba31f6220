// Long-context retrieval prompts in the formats the reference models are trained on
// (training/tasks.py; change both together):
//   passkey  a five-digit pass key at a chosen depth of a text haystack, asked for at the end
//   needles  2 to 6 seven-digit "magic numbers" keyed by words at random depths; one is asked for
//   mqar     multi-query associative recall (Zoology): word-number pairs, then every word again
// Each prompt is text with the character spans of its answers.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kvsketch::model {

struct RetrievalPrompt {
  std::string text;
  std::vector<std::pair<size_t, size_t>> answers;  // [begin, end) character spans
};

// A deterministic generator: the same seed gives the same numbers on every machine.
class TaskRandom {
 public:
  explicit TaskRandom(uint64_t seed) : state_(seed) {}
  uint64_t next();
  size_t below(size_t n) { return n ? static_cast<size_t>(next() % n) : 0; }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

class RetrievalTasks {
 public:
  // haystack: natural text the fillers are cut from; words: the keys of needles and MQAR.
  RetrievalTasks(std::string haystack, std::vector<std::string> words);
  // `chars` is the prompt's approximate length in characters; depth in [0, 1].
  RetrievalPrompt passkey(TaskRandom& random, size_t chars, double depth) const;
  RetrievalPrompt needles(TaskRandom& random, size_t chars, size_t count) const;
  RetrievalPrompt mqar(TaskRandom& random, size_t pairs) const;

 private:
  std::string filler(TaskRandom& random, size_t chars) const;
  std::string haystack_;
  std::vector<std::string> words_;
};

// Lower-case alphabetic words of 3 to 9 letters in `text`, each once, in sorted order.
std::vector<std::string> words_of(const std::string& text);

}  // namespace kvsketch::model

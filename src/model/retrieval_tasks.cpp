#include "model/retrieval_tasks.hpp"

#include <algorithm>
#include <set>

#include "core/require.hpp"

namespace kvsketch::model {
namespace {

constexpr const char* kPasskeyIntro =
    "There is important information hidden inside a lot of irrelevant text. Find it and memorize it. I will quiz "
    "you about it.\n";

std::string number(TaskRandom& random, uint64_t low, uint64_t high) { return std::to_string(low + random.below(high - low)); }

}  // namespace

uint64_t TaskRandom::next() {  // SplitMix64
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

RetrievalTasks::RetrievalTasks(std::string haystack, std::vector<std::string> words)
    : haystack_(std::move(haystack)), words_(std::move(words)) {
  require(haystack_.size() >= 10000, "retrieval: the haystack text has {} bytes; at least 10000 are needed",
          haystack_.size());
  require(words_.size() >= 64, "retrieval: the haystack text has {} distinct words; at least 64 are needed",
          words_.size());
}

// `chars` characters of the haystack from a random line start, cut back to a whole UTF-8 character.
std::string RetrievalTasks::filler(TaskRandom& random, size_t chars) const {
  if (chars == 0) return "";
  chars = std::min(chars, haystack_.size() / 2);
  size_t start = random.below(haystack_.size() - chars);
  const size_t line = haystack_.find('\n', start);
  if (line != std::string::npos && line < start + 200 && line + 1 + chars <= haystack_.size()) start = line + 1;
  while (start > 0 && (static_cast<unsigned char>(haystack_[start]) & 0xC0) == 0x80) --start;
  size_t end = start + chars;
  while (end < haystack_.size() && (static_cast<unsigned char>(haystack_[end]) & 0xC0) == 0x80) --end;
  return haystack_.substr(start, end - start);
}

RetrievalPrompt RetrievalTasks::passkey(TaskRandom& random, size_t chars, double depth) const {
  const std::string key = number(random, 10000, 100000);
  const std::string needle = "\nThe pass key is " + key + ". Remember it. " + key + " is the pass key.\n";
  const std::string question = "\nWhat is the pass key? The pass key is ";
  const std::string intro = kPasskeyIntro;
  const size_t fixed = intro.size() + 2 * needle.size() + question.size() + 7;
  const size_t body = chars > fixed ? chars - fixed : 0;
  const size_t before = static_cast<size_t>(static_cast<double>(body) * std::clamp(depth, 0.0, 1.0));
  RetrievalPrompt p;
  p.text = intro + filler(random, before) + needle + filler(random, body - before) + question;
  p.answers.emplace_back(p.text.size(), p.text.size() + key.size());
  p.text += key + ".";
  return p;
}

RetrievalPrompt RetrievalTasks::needles(TaskRandom& random, size_t chars, size_t count) const {
  std::vector<std::string> keys;
  std::set<size_t> used;
  while (keys.size() < count) {
    const size_t w = random.below(words_.size());
    if (used.insert(w).second) keys.push_back(words_[w]);
  }
  std::vector<std::string> values;
  for (size_t i = 0; i < count; ++i) values.push_back(number(random, 1000000, 10000000));
  const size_t body = chars > count * 60 + 120 ? chars - count * 60 - 120 : 0;
  std::vector<size_t> cuts;
  for (size_t i = 0; i < count; ++i) cuts.push_back(random.below(std::max<size_t>(1, body)));
  std::sort(cuts.begin(), cuts.end());
  RetrievalPrompt p;
  size_t last = 0;
  for (size_t i = 0; i < count; ++i) {
    p.text += filler(random, cuts[i] - last) + "\nThe special magic number for " + keys[i] + " is " + values[i] + ".\n";
    last = cuts[i];
  }
  p.text += filler(random, body - last);
  const size_t asked = random.below(count);
  p.text += "\nWhat is the special magic number for " + keys[asked] + "? The special magic number for " + keys[asked] +
            " is ";
  p.answers.emplace_back(p.text.size(), p.text.size() + values[asked].size());
  p.text += values[asked] + ".";
  return p;
}

RetrievalPrompt RetrievalTasks::mqar(TaskRandom& random, size_t pairs) const {
  require(pairs >= 1 && pairs <= words_.size(), "mqar: {} pairs asked of {} words", pairs, words_.size());
  std::vector<size_t> chosen;
  std::set<size_t> used;
  while (chosen.size() < pairs) {
    const size_t w = random.below(words_.size());
    if (used.insert(w).second) chosen.push_back(w);
  }
  std::vector<std::string> values;
  for (size_t i = 0; i < pairs; ++i) values.push_back(number(random, 100, 1000));
  RetrievalPrompt p;
  p.text = "Remember these pairs: ";
  for (size_t i = 0; i < pairs; ++i) p.text += (i ? ", " : "") + words_[chosen[i]] + " " + values[i];
  p.text += ".\nRecall:";
  std::vector<size_t> order(pairs);
  for (size_t i = 0; i < pairs; ++i) order[i] = i;
  for (size_t i = pairs; i > 1; --i) std::swap(order[i - 1], order[random.below(i)]);
  for (size_t k = 0; k < pairs; ++k) {
    const size_t i = order[k];
    p.text += " " + words_[chosen[i]] + " ";
    p.answers.emplace_back(p.text.size(), p.text.size() + values[i].size());
    p.text += values[i] + (k + 1 < pairs ? "," : ".");
  }
  return p;
}

std::vector<std::string> words_of(const std::string& text) {
  std::set<std::string> found;
  std::string word;
  auto flush = [&] {
    if (word.size() >= 3 && word.size() <= 9) found.insert(word);
    word.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c >= 'a' && c <= 'z') {
      word += c;
    } else {
      // A word is lower-case letters between non-letters ("Word" and "word2" do not count).
      const bool letter = (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
      if (letter) {
        while (i + 1 < text.size() && std::isalnum(static_cast<unsigned char>(text[i + 1]))) ++i;
        word.clear();
        continue;
      }
      flush();
    }
  }
  flush();
  return {found.begin(), found.end()};
}

}  // namespace kvsketch::model

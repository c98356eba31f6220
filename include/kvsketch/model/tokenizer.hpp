// Tokenizer: a Hugging Face `tokenizer.json` (the `tokenizers` library's format), encoding text to
// the same ids as that library and decoding them back. BPE models over characters with byte
// fallback (Llama 2, TinyLlama, Mistral: "▁" for spaces) and over GPT-2's byte alphabet (GPT-2,
// Llama 3, Qwen2: a pre-tokenizer regex, run with Oniguruma as the library does), with added and
// special tokens, the normalizers, pre-tokenizers, post-processors and decoders these families use.
// A file using anything else is refused naming the part.
//
//   auto tokenizer = kvsketch::model::Tokenizer::load("models/llama-reference");
//   std::vector<int32_t> ids = tokenizer.encode("The pass key is 71432.");   // with BOS, as HF
//   std::string text = tokenizer.decode(ids);                                 // special tokens skipped
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#pragma GCC visibility push(default)
namespace kvsketch::model {

class Tokenizer {
 public:
  // `path` is a tokenizer.json or a folder holding one.
  static Tokenizer load(const std::string& path);
  // The JSON text of a tokenizer.json; `source` names it in errors.
  static Tokenizer parse(std::string_view json_text, const std::string& source);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // The ids of `text` (UTF-8; invalid UTF-8 is refused naming its offset). add_special_tokens runs
  // the post-processor (BOS and the like), as `tokenizers`' encode does by default.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // The text of `ids`; ids outside the vocabulary are refused. Special tokens are left out unless
  // asked for.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = true) const;

  size_t vocab_size() const;  // the largest id + 1
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::string id_to_token(int32_t id) const;

 private:
  struct State;
  explicit Tokenizer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace kvsketch::model
#pragma GCC visibility pop

// Arbitrary bytes through the test tokenizers (SentencePiece-style and byte-level): encode throws
// Error for invalid UTF-8 or gives ids that decode, and a byte-level tokenizer decodes them back to
// the text it was given (its normalizer is NFC: checked on text that NFC leaves alone, ASCII).
#include <cstdlib>
#include <string>

#include "fuzz_input.hpp"
#include "kvsketch/model/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto sentencepiece =
      kvsketch::model::Tokenizer::load(std::string(KVSKETCH_TEST_DATA_DIR) + "/tokenizers/llama2_sentencepiece.json");
  static const auto byte_level =
      kvsketch::model::Tokenizer::load(std::string(KVSKETCH_TEST_DATA_DIR) + "/tokenizers/gpt2_byte_level.json");
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    sentencepiece.decode(sentencepiece.encode(text));
    const std::string back = byte_level.decode(byte_level.encode(text), false);
    bool ascii = true;
    for (unsigned char c : text) ascii = ascii && c < 0x80;
    // (Stripping added tokens, as <|im_start|> with lstrip, drop the whitespace before them.)
    if (ascii && text.find("<|im_start|>") == std::string::npos && back != text) std::abort();
  } catch (const kvsketch::Error&) {
  }
  return 0;
}

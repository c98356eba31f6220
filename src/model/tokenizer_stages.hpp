// The stages of a Hugging Face tokenizer.json, each built from its JSON object. The types each
// stage accepts are the ones the Llama-family tokenizers use; any other is refused naming it.
//   normalizer     Sequence, Prepend, Replace, NFC, NFKC, NFD, NFKD, Lowercase, Strip
//   pre_tokenizer  Sequence, Split, ByteLevel, Metaspace, Digits, Whitespace-free patterns only
//   decoder        Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kvsketch::model {

// Rewrites a segment of text (the text between added tokens).
using Normalizer = std::function<std::string(std::string)>;
// Splits pieces into smaller pieces; `first` says whether the first piece starts the input.
using PreTokenizer = std::function<std::vector<std::string>(std::vector<std::string>, bool first)>;
// Turns the token strings of a decode into the strings that are concatenated into text.
using TokenDecoder = std::function<std::vector<std::string>(std::vector<std::string>)>;

// Null JSON gives an identity stage. `where` names the file in errors.
Normalizer make_normalizer(const nlohmann::json& spec, const std::string& where);
PreTokenizer make_pre_tokenizer(const nlohmann::json& spec, const std::string& where);
TokenDecoder make_decoder(const nlohmann::json& spec, const std::string& where);

// GPT-2's map of the 256 byte values to printable code points (ByteLevel), and its inverse.
char32_t byte_to_char(unsigned char byte);
int char_to_byte(char32_t c);  // -1 where c is not in the map

}  // namespace kvsketch::model

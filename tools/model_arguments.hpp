// Arguments the model commands (perplexity, retrieval, generate, bench decode) parse alike.
#pragma once
#include <string>
#include <vector>

namespace kvsketch::tools {

// "fp16;q4_0;tq_mse:b=3|tq_mse:b=3": policies separated by ';' (a policy spec uses '|' and ',').
std::vector<std::string> split_policies(const std::string& text);
// "512,1k,2k,16k": token counts, with k = 1024.
std::vector<size_t> parse_token_counts(const std::string& text, const char* option);
// "0,0.25,1": numbers in [0, 1].
std::vector<double> parse_fractions(const std::string& text, const char* option);

}  // namespace kvsketch::tools

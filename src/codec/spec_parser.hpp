// Parsing of spec strings "name:key=value,key=value" (codecs, token selectors, synthetic datasets)
// with range-checked accessors whose errors name the kind and name of the spec, the parameter, the
// value and what is valid.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kvsketch {

class SpecParameters {
 public:
  // `allowed` lists the valid keys for this spec; any other key is an error. `kind` names what the
  // spec describes in the errors ("codec 'tq_mse': ...").
  SpecParameters(const std::string& name, const std::map<std::string, std::string>& values,
                 const std::vector<std::string>& allowed, const std::string& kind = "codec");
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  int64_t integer(const std::string& key, int64_t fallback, int64_t min, int64_t max) const;
  // A seed: any 64-bit unsigned integer (canonical specs print the seeds they derive, all 64 bits).
  uint64_t seed(const std::string& key, uint64_t fallback) const;
  double real(const std::string& key, double fallback, double min, double max) const;
  std::string choice(const std::string& key, const std::string& fallback, const std::vector<std::string>& valid) const;

 private:
  std::string label_;  // kind and name, as the errors begin
  std::map<std::string, std::string> values_;
};

struct ParsedSpec {
  std::string name;
  std::map<std::string, std::string> values;
};

ParsedSpec parse_spec(const std::string& spec, const std::string& kind = "codec");

// The spec inside any "center:" and "rotate:" wrappers ("center:tq_mse:b=3" -> "tq_mse:b=3"): its
// bits and dimension rules are the wrapped codec's. Throws Error where a wrapper appears twice.
std::string unwrapped_spec(const std::string& spec);

}  // namespace kvsketch

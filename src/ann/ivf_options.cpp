// IvfIndexOptions::parse and factory():
// "ivf:nlist=N,nprobe=P,metric=M,residual=R,iterations=I,max_train=T,seed=S,fast_scan=F,refine=R,k_factor=K,norm=N|CODEC".
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "core/require.hpp"
#include "ann/refine_store.hpp"
#include "kvsketch/ivf_index.hpp"

namespace kvsketch {
namespace {

uint64_t parse_number(const std::string& text, const std::string& field) {
  require(!text.empty() && text.find_first_not_of("0123456789") == std::string::npos && text.size() <= 19,
          "ivf factory: {}={} is not a non-negative integer", field, text);
  return std::stoull(text);
}

}  // namespace

IvfIndexOptions IvfIndexOptions::parse(const std::string& factory) {
  IvfIndexOptions options;
  const size_t bar = factory.find('|');
  const std::string head = factory.substr(0, bar);
  require(head.rfind("ivf", 0) == 0, "ivf factory '{}': it starts with ivf (ivf:nlist=1024,nprobe=32|CODEC)", factory);
  if (bar != std::string::npos) {
    options.codec = factory.substr(bar + 1);
    require(!options.codec.empty(), "ivf factory '{}': the codec after '|' is empty", factory);
  }
  std::string fields = head.substr(3);
  require(fields.empty() || fields[0] == ':', "ivf factory '{}': fields follow 'ivf:'", factory);
  if (!fields.empty()) fields = fields.substr(1);
  std::vector<std::string> seen;
  for (size_t start = 0; start < fields.size();) {
    const size_t comma = fields.find(',', start);
    const std::string item = fields.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? fields.size() : comma + 1;
    const size_t equals = item.find('=');
    require(equals != std::string::npos, "ivf factory: '{}' is not field=value", item);
    const std::string name = item.substr(0, equals), value = item.substr(equals + 1);
    for (const std::string& before : seen) require(before != name, "ivf factory: {} is given twice", name);
    seen.push_back(name);
    if (name == "nlist") {
      options.nlist = parse_number(value, name);
    } else if (name == "nprobe") {
      options.nprobe = parse_number(value, name);
    } else if (name == "iterations") {
      options.iterations = parse_number(value, name);
    } else if (name == "max_train") {
      options.max_train = parse_number(value, name);
    } else if (name == "seed") {
      options.seed = parse_number(value, name);
    } else if (name == "residual") {
      require(value == "0" || value == "1", "ivf factory: residual={} is not 0 or 1", value);
      options.residual = value == "1";
    } else if (name == "fast_scan") {
      require(value == "0" || value == "1", "ivf factory: fast_scan={} is not 0 or 1", value);
      options.fast_scan = value == "1";
    } else if (name == "k_factor") {
      options.k_factor = parse_number(value, name);
    } else if (name == "norm") {
      require(value == "codec" || value == "log8", "ivf factory: norm={} is not codec or log8", value);
      options.norm = value == "log8" ? ListNorm::kLog8 : ListNorm::kCodec;
    } else if (name == "refine") {
      try {
        options.refine = parse_refine(value);
      } catch (const Error& error) {
        throw Error(fmt::format("ivf factory: {}", error.what()));
      }
    } else if (name == "metric") {
      try {
        options.metric = parse_metric(value);
      } catch (const Error& error) {
        throw Error(fmt::format("ivf factory: {}", error.what()));
      }
    } else {
      require(false, "ivf factory: unknown field '{}' (nlist, nprobe, metric, residual, iterations, max_train, "
              "seed, fast_scan, refine, k_factor, norm)", name);
    }
  }
  require(options.nlist >= 1, "ivf factory: nlist must be >= 1");
  // Not given, nprobe is the default or every list, whichever is fewer; given, at most nlist.
  if (std::find(seen.begin(), seen.end(), "nprobe") == seen.end()) options.nprobe = std::min(options.nprobe, options.nlist);
  require(options.nprobe >= 1 && options.nprobe <= options.nlist, "ivf factory: nprobe must be in 1..nlist = {}, got {}",
          options.nlist, options.nprobe);
  return options;
}

std::string IvfIndexOptions::factory() const {
  return fmt::format("ivf:nlist={},nprobe={},metric={},residual={},iterations={},max_train={},seed={},fast_scan={},refine={},k_factor={},norm={}|{}",
                     nlist, nprobe, metric_name(metric), residual ? 1 : 0, iterations, max_train, seed, fast_scan ? 1 : 0,
                     refine_name(refine), k_factor, norm == ListNorm::kLog8 ? "log8" : "codec", codec);
}

}  // namespace kvsketch

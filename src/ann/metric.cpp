#include "kvsketch/ann.hpp"
#include "core/require.hpp"

namespace kvsketch {

Metric parse_metric(const std::string& name) {
  if (name == "ip" || name == "inner_product" || name == "dot") return Metric::kInnerProduct;
  if (name == "cosine" || name == "angular") return Metric::kCosine;
  if (name == "l2" || name == "euclidean") return Metric::kL2;
  throw Error(fmt::format("unknown metric '{}'; expected ip, cosine or l2", name));
}

std::string metric_name(Metric metric) {
  switch (metric) {
    case Metric::kInnerProduct:
      return "ip";
    case Metric::kCosine:
      return "cosine";
    case Metric::kL2:
      return "l2";
  }
  return "?";
}

}  // namespace kvsketch

#include <algorithm>
#include <cmath>

#include "codec/spec_parser.hpp"
#include "kvsketch/codec.hpp"
#include "core/require.hpp"
#include "sparse/balancekv.hpp"
#include "sparse/baseline_selectors.hpp"
#include "sparse/magicpig.hpp"

namespace kvsketch {

std::unique_ptr<TokenSelector> make_selector(const std::string& spec, size_t dim, uint64_t seed) {
  require(dim >= 2 && dim <= kMaxDim, "selector: dimension must be in 2..{}, got {}", kMaxDim, dim);
  const ParsedSpec parsed = parse_spec(spec, "selector");
  if (auto baseline = make_baseline_selector(parsed, dim, seed)) return baseline;
  if (parsed.name == "magicpig") {
    const SpecParameters p(parsed.name, parsed.values, {"K", "L", "hits", "center", "cap"}, "selector");
    require(p.has("K") && p.has("L"), "selector 'magicpig': parameters K (bits, 1..32) and L (tables) are required, "
                                      "e.g. magicpig:K=10,L=150");
    const int bits = static_cast<int>(p.integer("K", 0, 1, 32));
    int tables = static_cast<int>(p.integer("L", 0, 1, 4096));
    if (p.has("cap")) {
      // cap=F: no more tables than keep the index within F times the fp16 keys and values it indexes.
      const double cap = p.real("cap", 1.0, 0.01, 100.0);
      const int most = magicpig_tables_within(bits, dim, cap);
      require(most >= 1, "selector 'magicpig': cap={} leaves no table at K={} and dimension {} (one table takes "
                         "{:.1f} bytes per token, the fp16 cache {})",
              cap, bits, dim, magicpig_bytes_per_token(bits, 1) - magicpig_bytes_per_token(bits, 0), 4 * dim);
      tables = std::min(tables, most);
    }
    const int hits = static_cast<int>(p.integer("hits", std::min(2, tables), 1, tables));
    const bool center = p.integer("center", 1, 0, 1) != 0;
    return std::make_unique<MagicPig>(dim, bits, tables, hits, center, seed);
  }
  if (parsed.name == "balancekv") {
    const SpecParameters p(parsed.name, parsed.values, {"ratio", "block", "gain", "temp", "mode"}, "selector");
    const double ratio = p.real("ratio", 0.25, 1.0 / 65536, 0.5);
    const int levels = static_cast<int>(std::lround(-std::log2(ratio)));
    require(std::fabs(std::ldexp(1.0, -levels) - ratio) < 1e-12,
            "'balancekv': ratio={} must be 1/2, 1/4, 1/8, ... (one halving per level)", ratio);
    const std::string mode = parsed.values.count("mode") ? parsed.values.at("mode") : "joint";
    require(mode == "joint" || mode == "paper" || mode == "prefill",
            "'balancekv': mode={} is not joint, paper or prefill", mode);
    return std::make_unique<BalanceKV>(dim, levels, static_cast<size_t>(p.integer("block", 256, 2, 65536)),
                                       p.real("gain", kDefaultBalanceGain, 0.0, 1e6), p.real("temp", 1.0, 0.0, 1.0), seed,
                                       mode == "joint" ? BalanceMode::kJoint
                                       : mode == "paper" ? BalanceMode::kPaper
                                                         : BalanceMode::kPrefill);
  }
  throw Error(fmt::format("unknown selector '{}'; expected exact, window, topk:budget=F, uniform:budget=F, "
                          "oracle:budget=F, magicpig:K=..,L=.. or balancekv:ratio=..", parsed.name));
}

}  // namespace kvsketch

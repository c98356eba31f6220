#include <fmt/format.h>

#include "codec/baseline_codecs.hpp"
#include "codec/centered_codec.hpp"
#include "codec/rotated_codec.hpp"
#include "codec/channel_split.hpp"
#include "codec/group_quantizers.hpp"
#include "codec/pca_turboquant.hpp"
#include "codec/qjl.hpp"
#include "codec/spec_parser.hpp"
#include "codec/turboquant.hpp"
#include "kvsketch/codec.hpp"
#include "core/require.hpp"

namespace kvsketch {
namespace {

NormPrecision parse_norm(const SpecParameters& p) {
  return p.choice("norm", "fp16", {"fp16", "fp32"}) == "fp16" ? NormPrecision::kFp16 : NormPrecision::kFp32;
}

std::unique_ptr<VectorCodec> make_turboquant(const std::string& spec, const ParsedSpec& parsed, size_t dim,
                                             uint64_t seed, bool prod) {
  // b = k + 0.5: the outlier-channel split (codec/channel_split.hpp).
  if (parsed.values.count("b") && parsed.values.at("b").find('.') != std::string::npos)
    return make_channel_split(spec, dim, seed);
  std::vector<std::string> keys = {"b", "rotation", "rounds", "codebook", "norm", "seed"};
  if (prod) keys.push_back("sketch");
  else keys.push_back("rescale");
  const SpecParameters p(parsed.name, parsed.values, keys);
  require(p.has("b"), "codec '{}': parameter b (bits per coordinate, 1..8) is required, e.g. {}:b=4", parsed.name,
          parsed.name);
  TurboQuantOptions options;
  options.residual_signs = prod;
  options.bits = static_cast<int>(p.integer("b", 4, 1, 8));
  options.rotation = p.choice("rotation", "hadamard", {"hadamard", "haar"}) == "haar" ? RotationKind::kHaar
                                                                                        : RotationKind::kHadamard;
  options.rounds = static_cast<int>(p.integer("rounds", 2, 1, 16));
  options.law = p.choice("codebook", "beta", {"beta", "gaussian"}) == "beta" ? CoordinateLaw::kBeta
                                                                              : CoordinateLaw::kGaussian;
  options.norm = parse_norm(p);
  options.seed = p.seed("seed", seed);
  if (!prod) options.rescale = p.integer("rescale", 0, 0, 1) == 1;
  if (prod) options.sketch = parse_sketch_kind(p.choice("sketch", "hadamard", {"hadamard", "gaussian", "orthogonal"}));
  require(dim >= 2, "codec '{}': dimension must be >= 2, got {}", parsed.name, dim);
  return std::make_unique<TurboQuant>(dim, options);
}

std::unique_ptr<VectorCodec> make_pca_turboquant(const ParsedSpec& parsed, size_t dim, uint64_t seed) {
  const SpecParameters p(parsed.name, parsed.values, {"b", "pca", "norm", "seed"});
  require(p.has("b"), "codec 'tq_pca': parameter b (bits per coordinate, 1..8) is required, e.g. tq_pca:b=4");
  PcaTurboQuantOptions options;
  options.bits = static_cast<int>(p.integer("b", 4, 1, 8));
  const std::string mode = p.choice("pca", "auto", {"auto", "on", "off"});
  options.mode = mode == "auto" ? PcaMode::kAuto : mode == "on" ? PcaMode::kOn : PcaMode::kOff;
  options.norm = parse_norm(p);
  options.seed = p.seed("seed", seed);
  return std::make_unique<PcaTurboQuant>(dim, options);
}

std::unique_ptr<VectorCodec> make_qjl(const ParsedSpec& parsed, size_t dim, uint64_t seed) {
  const SpecParameters p(parsed.name, parsed.values, {"m", "sketch", "outliers", "m_out", "norm", "rounds", "seed"});
  QjlOptions options;
  options.rows = static_cast<size_t>(p.integer("m", static_cast<int64_t>(dim), 1, 65536));
  options.sketch = parse_sketch_kind(p.choice("sketch", "orthogonal", {"orthogonal", "gaussian", "hadamard"}));
  options.outliers = static_cast<size_t>(p.integer("outliers", 0, 0, static_cast<int64_t>(dim) - 1));
  options.outlier_rows = static_cast<size_t>(p.integer("m_out", 0, 1, 65536));
  require(options.outliers > 0 || !p.has("m_out"), "codec 'qjl': m_out needs outliers > 0");
  options.norm = parse_norm(p);
  options.rounds = static_cast<int>(p.integer("rounds", 2, 1, 16));
  options.seed = p.seed("seed", seed);
  return std::make_unique<Qjl>(dim, options);
}

}  // namespace

std::string codec_spec_help() {
  return "valid codecs:\n"
         "  fp16                      2 bytes per value\n"
         "  int8                      1 byte per value + fp32 scale per vector\n"
         "  tq_mse:b=B                TurboQuant_mse, B = 1..8 bits per coordinate\n"
         "  tq_prod:b=B               TurboQuant_prod (unbiased), B = 1..8 (B=1: pure QJL on the rotated vector)\n"
         "  tq_pca:b=B                tq_mse with rescale=1 after a principal-component basis from calibration,\n"
         "                            bits per component by reverse water-filling (pca=auto: only for\n"
         "                            anisotropic data; pca=on|off), same bytes as tq_mse:b=B\n"
         "  tq_mse:b=2.5, tq_prod:b=3.5 ...  outlier split: the loudest quarter of the channels at B+0.5 bits,\n"
         "                            the rest at B-0.5, each part rotated on its own (channels from calibration)\n"
         "  center:SPEC               SPEC applied to x - mean (per-channel mean from calibration, fp16)\n"
         "  rotate:SPEC               SPEC applied to a randomized Hadamard rotation of x (as llama.cpp\n"
         "                            rotates q4_0 caches): same bytes, outliers spread over the channels\n"
         "  split:SPEC@N+SPEC@N       explicit split into tq_mse/tq_prod parts of N channels (or P%; last: the rest)\n"
         "  qjl:m=M                   QJL sign sketch with M = 1..65536 rows (default M = dim)\n"
         "  kivi_k:b=B,group=G        KIVI keys: per channel over groups of G tokens (default 32), min/step fp16\n"
         "  kivi_v:b=B,group=G        KIVI values: per token in groups of G channels (default 32)\n"
         "  q4_0                      llama.cpp q4_0: 32-channel groups, fp16 scale, 4-bit values\n"
         "  q8_0                      llama.cpp q8_0: 32-channel groups, fp16 scale, 8-bit values\n"
         "  (in a KV policy, kivi:b=B,group=G means kivi_k for keys and kivi_v for values)\n"
         "options: tq_*: rotation=hadamard|haar, rounds=1..16 (default 2), codebook=beta|gaussian,\n"
         "         norm=fp16|fp32, seed=N; tq_mse: rescale=1 (store ||x|| / <u, u~>: unbiased, same bytes);\n"
         "         tq_prod: sketch=hadamard|gaussian|orthogonal (default hadamard)\n"
         "         qjl: sketch=orthogonal|gaussian|hadamard (default orthogonal), outliers=K (< dim),\n"
         "         m_out=M (default 32 K), norm=fp16|fp32, seed=N";
}

std::unique_ptr<VectorCodec> make_codec(const std::string& spec, size_t dim, uint64_t seed) {
  require(dim >= 1 && dim <= kMaxDim, "codec '{}': dimension must be in 1..{}, got {}", spec, kMaxDim, dim);
  if (spec.rfind("split:", 0) == 0) return make_channel_split(spec, dim, seed);
  if (spec.rfind("rotate:", 0) == 0) {
    require(spec.size() > 7, "codec 'rotate': expected rotate:SPEC, e.g. rotate:q4_0");
    unwrapped_spec(spec);  // each wrapper once, checked before any recursion
    return std::make_unique<RotatedCodec>(make_codec(spec.substr(7), dim, seed), seed);
  }
  if (spec.rfind("center:", 0) == 0) {
    require(spec.size() > 7, "codec 'center': expected center:SPEC, e.g. center:tq_mse:b=3");
    unwrapped_spec(spec);
    return std::make_unique<CenteredCodec>(make_codec(spec.substr(7), dim, seed));
  }
  const ParsedSpec parsed = parse_spec(spec);
  if (parsed.name == "tq_mse") return make_turboquant(spec, parsed, dim, seed, false);
  if (parsed.name == "tq_prod") return make_turboquant(spec, parsed, dim, seed, true);
  if (parsed.name == "tq_pca") return make_pca_turboquant(parsed, dim, seed);
  if (parsed.name == "qjl") return make_qjl(parsed, dim, seed);
  if (parsed.name == "kivi_k" || parsed.name == "kivi_v") {
    const SpecParameters p(parsed.name, parsed.values, {"b", "group"});
    require(p.has("b"), "codec '{}': parameter b (bits, 1..8) is required, e.g. {}:b=2,group=32", parsed.name,
            parsed.name);
    return std::make_unique<GroupQuantizer>(dim, parsed.name == "kivi_k" ? GroupScheme::kKiviKeys
                                                                         : GroupScheme::kKiviValues,
                                            static_cast<int>(p.integer("b", 2, 1, 8)),
                                            static_cast<size_t>(p.integer("group", 32, 1, 1024)));
  }
  if (parsed.name == "q4_0" || parsed.name == "q8_0") {
    const SpecParameters p(parsed.name, parsed.values, {});
    if (parsed.name == "q8_0") return std::make_unique<GroupQuantizer>(dim, GroupScheme::kQ8_0, 8, 32);
    return std::make_unique<GroupQuantizer>(dim, GroupScheme::kQ4_0, 4, 32);
  }
  if (parsed.name == "fp16" || parsed.name == "int8") {
    const SpecParameters p(parsed.name, parsed.values, {});
    if (parsed.name == "fp16") return std::make_unique<Fp16Codec>(dim);
    return std::make_unique<Int8Codec>(dim);
  }
  throw Error(fmt::format("unknown codec '{}' in spec '{}'\n{}", parsed.name, spec, codec_spec_help()));
}

}  // namespace kvsketch

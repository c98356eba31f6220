#include "attention_cases.hpp"

#include <tuple>

#include "kvsketch/codec.hpp"
#include "core/require.hpp"
#include "kvsketch/eval/datasets.hpp"
#include "kvsketch/eval/synthetic_cache.hpp"

namespace kvsketch::tools {

std::vector<AttentionCase> load_attention_cases(const CaseArguments& args) {
  std::vector<AttentionCase> cases;
  const bool captured = !args.keys.empty() || !args.values.empty() || !args.queries.empty();
  require(captured != !args.synthetic.empty(),
          "give either --synthetic NAME or all of --keys, --values and --queries");
  if (captured) {
    require(!args.keys.empty() && !args.values.empty() && !args.queries.empty(),
            "--keys, --values and --queries go together");
    const Matrix k = read_matrix(args.keys), v = read_matrix(args.values), q = read_matrix(args.queries);
    require(k.rows == v.rows && k.cols == v.cols, "keys are {} x {} but values are {} x {}", k.rows,
            k.cols, v.rows, v.cols);
    require(q.cols == k.cols, "queries have {} columns, keys {}", q.cols, k.cols);
    require(k.rows >= 1, "'{}' holds no rows; attention needs at least one token", args.keys);
    require(q.rows >= 1, "'{}' holds no rows; attention needs at least one query", args.queries);
    const size_t tokens = std::min(args.tokens, k.rows);
    AttentionCase c{args.keys, tokens, k.cols, q.rows, {}, {}, q.values};
    c.keys.assign(k.values.begin(), k.values.begin() + static_cast<std::ptrdiff_t>(tokens * k.cols));
    c.values.assign(v.values.begin(), v.values.begin() + static_cast<std::ptrdiff_t>(tokens * k.cols));
    // The rows used: NaN, Inf, or norms whose squares overflow (scores and softmax would be NaN).
    for (const auto& [rows, count, path] : {std::tuple{&c.keys, tokens, &args.keys}, {&c.values, tokens, &args.values},
                                            {&c.query_rows, q.rows, &args.queries}})
      require_finite_rows(rows->data(), count, k.cols, path->c_str());
    cases.push_back(std::move(c));
    return cases;
  }
  const SyntheticModel model = parse_synthetic_model(args.model);
  std::vector<std::string> regimes = {args.synthetic};
  if (args.synthetic == "default") regimes = synthetic_regimes();
  for (const std::string& regime : regimes) {
    SyntheticCache s = make_synthetic_cache(regime, args.tokens, args.dim, args.query_count, args.seed, model);
    cases.push_back({regime, s.tokens, s.dim, s.queries, std::move(s.keys), std::move(s.values),
                     std::move(s.query_rows)});
  }
  return cases;
}

}  // namespace kvsketch::tools

// ngram_propose (see ngram_proposer.h). One pass over the possible occurrence ends e (every
// position but the last): m(e) = how many tokens ending at e equal the tokens' last ones,
// capped at max_n. The longest m wins, and of equal ones the first e, which is the earliest
// occurrence (vLLM's KMP over the reversed tokens makes the same choice).
#include "runtime/ngram_proposer.h"

#include <algorithm>

namespace kimi {

void ngram_propose(std::span<const int32_t> tokens, const NgramParams& p, int64_t max_model_len,
                   std::vector<int32_t>& draft) {
    draft.clear();
    const int64_t t = int64_t(tokens.size());
    if (p.min_n < 1 || p.max_n < p.min_n || t < p.min_n) return;
    const int64_t k = std::min<int64_t>(p.k, max_model_len - t);
    if (k <= 0) return;
    const int32_t* x = tokens.data();
    const int32_t last = x[t - 1];
    int64_t best = 0, best_end = -1;
    for (int64_t e = 0; e + 1 < t; ++e) {
        if (x[e] != last) continue;
        int64_t m = 1;
        while (m < p.max_n && m <= e && x[e - m] == x[t - 1 - m]) ++m;
        if (m > best) {
            best = m;
            best_end = e;
            if (best == p.max_n) break;   // nothing longer counts, and later ends are later occurrences
        }
    }
    if (best < p.min_n) return;
    const int64_t start = best_end + 1, n = std::min(k, t - start);
    draft.assign(x + start, x + start + n);
}

}   // namespace kimi

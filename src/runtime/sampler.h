// Sampler: turns one row of logits into the next token of one request — logit bias,
// penalties, temperature, top-k / top-p / min-p, seeded draw — and reports logprobs.
// A draw depends only on (the request's seed, the index of the output token), never on
// other requests, so a request's tokens are the same alone, batched, or after preemption.
// No heap allocation per call (scratch sized at construction).
#pragma once
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "runtime/sampling_params.h"

namespace kimi {

struct SampledToken {
    int32_t token = -1;
    float logprob = 0.0f;   // log-softmax of the raw logits (before any processing, after the mask)
    std::vector<std::pair<int32_t, float>> top;   // top-N (token, raw logprob), best first; N = params.logprobs
};

class Sampler {
public:
    explicit Sampler(int64_t vocab_size);

    // logits: the raw row [vocab] (left unmodified). prompt/output: the request's tokens so far
    // (for the penalties). seed: the request's seed; step: index of the token being drawn.
    // `out.top` is resized to params.logprobs (reserve it at admission to stay allocation-free).
    // mask (structured output; empty: none): bit t of word t/64 set = token t allowed; the
    // others get −inf before anything else, so logprobs are those of the masked distribution.
    // attempt: a second draw for the same step (an independent uniform; 0 is the usual one).
    void sample(std::span<const float> logits, const SamplingParams& params, std::span<const int32_t> prompt,
                std::span<const int32_t> output, uint64_t seed, uint64_t step, SampledToken& out,
                std::span<const uint64_t> mask = {}, uint32_t attempt = 0);
    // The uniform in [0, 1) of a draw: it depends only on (seed, step, attempt).
    static double uniform(uint64_t seed, uint64_t step, uint32_t attempt);

    // Whether a draw without the mask, kept when the mask allows it (else redrawn with the mask
    // and attempt 1), has the masked distribution: greedy, or temperature alone (rejection
    // sampling), with no logprobs to report.
    static bool mask_can_wait(const SamplingParams& p) {
        return p.logprobs < 0 && (p.greedy() || (p.top_k <= 0 && p.top_p >= 1.0f && p.min_p <= 0.0f));
    }

    // The stages of sample(), in order, public for their tests. Each works in the member scratch.
    // 0. The structured-output mask: refused tokens −inf (raw when the mask is empty).
    std::span<const float> mask_logits(std::span<const float> raw, std::span<const uint64_t> mask);
    // 1. Penalties: logit_bias, then the repetition penalty (prompt + output), then the frequency
    //    and presence penalties (output counts): the processed logits, or raw itself when nothing
    //    changes them.
    std::span<const float> penalize(std::span<const float> raw, const SamplingParams& params,
                                    std::span<const int32_t> prompt, std::span<const int32_t> output);
    // What the choice learnt of the raw distribution on the way (so the logprobs need not redo it).
    struct RawStats {
        double lse = 0.0;   // log Σ exp(raw)
        float max = 0.0f;   // max(raw)
        bool have_lse = false, have_max = false;
    };
    // 2–3. Filtering and choice: greedy argmax, or temperature → top-k → top-p → min-p → one
    //      seeded uniform draw from (seed, step, attempt). processed: proc is not raw.
    int64_t choose(std::span<const float> proc, bool processed, const SamplingParams& params, uint64_t seed,
                   uint64_t step, uint32_t attempt, RawStats& rs);
    // 2 with top-k: how many of the n best candidates (ids in order_, probabilities in work_,
    //   p_max = 1) top-p and min-p keep, at least one; kept: their mass.
    int64_t keep_prefix(int64_t n, double top_p, float min_p, double total, double& kept) const;
    // 4. Logprobs of the raw (masked) distribution: the chosen token's and the top-N.
    void report_logprobs(std::span<const float> raw, int64_t chosen, const SamplingParams& params, const RawStats& rs,
                         SampledToken& out);

private:
    // choose()'s probabilities at temperature t (unnormalised, max-subtracted: the best token has
    // p = 1) in work_[id]; with top_k > 0 only the k best, their ids in order_[0, k) best first.
    // m: the largest processed logit. Returns Σ p over the candidates.
    double probabilities(std::span<const float> proc, bool processed, float t, int64_t top_k, float& m, RawStats& rs);

    int64_t vocab_;
    std::vector<float> work_;       // processed logits / probabilities
    std::vector<float> masked_;     // the logits after the structured-output mask (sized on first use)
    std::vector<int32_t> order_;    // candidate ids (sorted when top-k/top-p/min-p need it)
    std::vector<int32_t> counts_;   // per-token occurrences in the output (penalties)
    std::vector<uint8_t> in_prompt_;
};

}   // namespace kimi

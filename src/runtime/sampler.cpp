// Sampler: one logits row → one token, following the vLLM v1 sampler with OpenAI semantics:
// raw logprobs (before any processing) → logit_bias → repetition penalty (vLLM/HF, prompt +
// output) → frequency/presence penalties (OpenAI, output only) → greedy argmax, or
// temperature → softmax → top-k → top-p → min-p → renormalise → one seeded uniform draw.
// Allocation-free: the member scratch is sized at construction and only the entries touched
// for the penalties are reset after use. Nothing is sorted without a filter; top-k selects k
// (heap / nth_element); top-p and min-p without top-k never sort the vocabulary: a histogram
// of the probabilities in 1/16-octave buckets (monotone in p) locates the cut and the drawn
// token, and only the one or two buckets involved are sorted — the same tokens, in the same
// (p desc, id asc) order, as a full sort would give. exp is a portable branch-free polynomial
// (vectorised); sums are in double. Logits are assumed finite or −inf (NaN gets p = 0).
#include "runtime/sampler.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/rng.h"

namespace kimi {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Sort key: NaN behaves as −inf so every comparator stays a strict weak ordering.
inline float key(float v) { return v == v ? v : kNegInf; }

// Index of the largest value, ties (and all-NaN / all −inf) → the lowest id.
int64_t argmax(std::span<const float> v) {
    int64_t best = 0;
    float best_v = key(v[0]);
    for (int64_t i = 1; i < int64_t(v.size()); ++i)
        if (v[size_t(i)] > best_v) {
            best_v = v[size_t(i)];
            best = i;
        }
    return best;
}

// exp(x) for x ≤ 0 as 2^k · e^r, |r| ≤ ln2/2, with the Cephes expf polynomial: relative error
// < 1e-7 down to −87, exactly 1 at 0, and 0 at −88 and below (−inf and NaN → 0). Branch-free
// float/int arithmetic (a float compare would block if-conversion under -ftrapping-math), so
// loops over it vectorise with SSE2, and the results do not depend on the platform's libm.
inline float exp_nonpos(float x) {
    uint32_t mag = std::bit_cast<uint32_t>(x) & 0x7fffffffu;
    mag = mag < 0x42b00000u ? mag : 0x42b00000u;                      // |x| ≤ 88 (NaN → 88)
    x = std::bit_cast<float>(mag | 0x80000000u);                      // −|x|
    const float kf = (x * 1.44269504f - 12582912.0f) + 12582912.0f;   // round(x / ln2) ∈ [−127, 0]
    const float r = (x - kf * 0.693359375f) + kf * 2.12194440e-4f;    // x − k·ln2 (two-part ln2)
    float y = 1.9875691500e-4f;
    y = y * r + 1.3981999507e-3f;
    y = y * r + 8.3334519073e-3f;
    y = y * r + 4.1665795894e-2f;
    y = y * r + 1.6666665459e-1f;
    y = y * r + 5.0000001201e-1f;
    y = (y * r) * r + r + 1.0f;
    const int32_t k = int32_t(kf);   // −127 → a zero scale
    return y * std::bit_cast<float>(uint32_t(k + 127) << 23);
}

// out[i] = exp((in[i] − m) / t) (t = 1 when !kScale); returns Σ out in double, in id order.
// Blocks of 16 through a local buffer so the exp vectorises even when in == out.
template <bool kScale>
double exp_shifted(const float* in, float* out, int64_t n, float m, float t) {
    constexpr int64_t kBlock = 16;
    double s = 0.0;
    float buf[kBlock];
    int64_t i = 0;
    for (; i + kBlock <= n; i += kBlock) {
        for (int64_t j = 0; j < kBlock; ++j) {
            float x = in[i + j] - m;
            if constexpr (kScale) x = x / t;
            buf[j] = exp_nonpos(x);
        }
        for (int64_t j = 0; j < kBlock; ++j) {
            out[i + j] = buf[j];
            s += double(buf[j]);
        }
    }
    for (; i < n; ++i) {
        float x = in[i] - m;
        if constexpr (kScale) x = x / t;
        s += double(out[i] = exp_nonpos(x));
    }
    return s;
}

float max_value(std::span<const float> v) {
    float m = kNegInf;
    for (const float x : v) m = x > m ? x : m;
    return m;
}

// log Σ exp(v) given m = max(v): max-subtracted, accumulated in double; scratch: v.size() floats.
double log_sum_exp(std::span<const float> v, float m, std::span<float> scratch) {
    if (!std::isfinite(m)) return double(m);
    return double(m) + std::log(exp_shifted<false>(v.data(), scratch.data(), int64_t(v.size()), m, 1.0f));
}

// Fills order[0, n) with the ids of the n largest values, best first (ties → lower id).
// Uses order in full as scratch (order.size() == v.size()).
void select_top(std::span<const float> v, std::span<int32_t> order, int64_t n) {
    const auto better = [v](int32_t a, int32_t b) {
        const float ka = key(v[size_t(a)]), kb = key(v[size_t(b)]);
        return ka > kb || (ka == kb && a < b);
    };
    std::iota(order.begin(), order.end(), 0);
    const auto mid = order.begin() + n;
    if (n >= int64_t(order.size())) {
        std::sort(order.begin(), order.end(), better);
    } else if (n <= 1024) {
        std::partial_sort(order.begin(), mid, order.end(), better);   // heap of n: ~1 comparison per id
    } else {
        std::nth_element(order.begin(), mid, order.end(), better);
        std::sort(order.begin(), mid, better);
    }
}

// Probability buckets: the top bits of a non-negative float (exponent + 4 mantissa bits), so
// bucket order is value order; p ∈ [0, 1] → [0, kBuckets).
constexpr uint32_t kBucketShift = 19;
constexpr uint32_t kBuckets = (0x3f800000u >> kBucketShift) + 1;
inline uint32_t bucket_of(float p) { return std::bit_cast<uint32_t>(p) >> kBucketShift; }

// by (p desc, id asc)
struct ByProb {
    const float* p;
    bool operator()(int32_t a, int32_t b) const { return p[a] > p[b] || (p[a] == p[b] && a < b); }
};

// order[0, n) ← the ids in bucket b, sorted by (p desc, id asc); returns n.
int64_t collect_bucket(std::span<const float> p, uint32_t b, int32_t* order) {
    int64_t n = 0;
    for (int64_t i = 0; i < int64_t(p.size()); ++i)
        if (bucket_of(p[size_t(i)]) == b) order[n++] = int32_t(i);
    std::sort(order, order + n, ByProb{p.data()});
    return n;
}

// Draws from the tokens with p > 0 in p (unnormalised; the max is exactly 1) after top-p and
// min-p, without top-k: the kept set is every bucket above `cut`, plus the first n_cut tokens
// (sorted) of bucket `cut`. order: scratch of p.size().
int32_t draw_bucketed(std::span<const float> p, double top_p, float min_p, double u, std::span<int32_t> order) {
    std::array<double, kBuckets> mass{};
    for (const float x : p) mass[bucket_of(x)] += double(x);
    double total = 0.0;
    for (uint32_t b = kBuckets; b-- > 0;) total += mass[b];

    // The cut: top-p — the bucket where the running mass reaches top_p · total; min-p — the
    // bucket of the threshold (p ≥ min_p · p_max, p_max = 1). The higher one wins.
    uint32_t cut = 0;
    const double need = top_p * total;
    if (top_p < 1.0) {
        double cum = 0.0;
        for (uint32_t b = kBuckets; b-- > 0;) {
            if (cum + mass[b] >= need) {
                cut = b;
                break;
            }
            cum += mass[b];
        }
    }
    const uint32_t min_p_bucket = min_p > 0.0f ? bucket_of(min_p) : 0;
    cut = std::max(cut, min_p_bucket);
    double above = 0.0;   // mass of the buckets above the cut
    for (uint32_t b = kBuckets; b-- > cut + 1;) above += mass[b];
    int32_t* const cut_ids = order.data();
    const int64_t n_bucket = collect_bucket(p, cut, cut_ids);
    int64_t n_cut = 0;   // kept tokens of the cut bucket
    double kept = above;
    for (; n_cut < n_bucket; ++n_cut) {
        const float x = p[size_t(cut_ids[n_cut])];
        if (n_cut > 0 || above > 0.0) {   // always keep at least one token (the max)
            if (min_p > 0.0f && x < min_p) break;
            if (top_p < 1.0 && kept >= need) break;   // the prefix already reaches top_p
        }
        kept += double(x);
    }

    // The draw: the first token, in (p desc, id asc) order, whose running mass exceeds u · kept.
    const double target = u * kept;
    double cum = 0.0;
    double cum_last = 0.0;   // the running mass before the last non-empty bucket passed
    uint32_t b = kBuckets - 1, last_nonempty = cut;
    for (; b > cut; --b) {
        if (mass[b] > 0.0) {
            if (cum + mass[b] > target) break;
            last_nonempty = b;
            cum_last = cum;
        }
        cum += mass[b];
    }
    if (b == cut && n_cut == 0 && last_nonempty != cut) {   // rounding: the target is at the very end
        b = last_nonempty;
        cum = cum_last;
    }
    const int32_t* ids = cut_ids;
    int64_t n = n_cut;
    if (b > cut) {
        int32_t* const draw_ids = order.data() + n_bucket;   // buckets are disjoint: room left
        n = collect_bucket(p, b, draw_ids);
        ids = draw_ids;
    }
    int32_t last = -1;
    for (int64_t j = 0; j < n; ++j) {
        const float x = p[size_t(ids[j])];
        if (x > 0.0f) last = ids[j];
        cum += double(x);
        if (cum > target) return ids[j];
    }
    return last;   // rounding: the target lies at the very end (−1 if none: the caller falls back)
}

}   // namespace

Sampler::Sampler(int64_t vocab_size)
    : vocab_(vocab_size),
      work_(size_t(vocab_size)),
      order_(size_t(vocab_size)),
      counts_(size_t(vocab_size), 0),
      in_prompt_(size_t(vocab_size), 0) {}

std::span<const float> Sampler::mask_logits(std::span<const float> raw, std::span<const uint64_t> mask) {
    if (mask.empty()) return raw;
    const int64_t vocab = int64_t(raw.size());
    masked_.resize(size_t(vocab_));
    for (int64_t i = 0; i < vocab; ++i) {
        const bool ok = size_t(i >> 6) < mask.size() && (mask[size_t(i >> 6)] >> (i & 63) & 1);
        masked_[size_t(i)] = ok ? raw[size_t(i)] : kNegInf;
    }
    return std::span<const float>(masked_.data(), size_t(vocab));
}

std::span<const float> Sampler::penalize(std::span<const float> raw, const SamplingParams& params,
                                         std::span<const int32_t> prompt, std::span<const int32_t> output) {
    const int64_t vocab = int64_t(raw.size());
    const std::span<float> work(work_.data(), size_t(vocab));
    const auto in_vocab = [vocab](int32_t t) { return t >= 0 && t < vocab; };
    const float r = params.repetition_penalty;
    const bool rep = r != 1.0f && r > 0.0f;
    const bool freq_pres = (params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f) && !output.empty();
    const bool processed = !params.logit_bias.empty() || (rep && (!prompt.empty() || !output.empty())) || freq_pres;
    if (!processed) return raw;   // a copy only when something changes them
    std::copy(raw.begin(), raw.end(), work.begin());
    for (const auto& [t, b] : params.logit_bias)
        if (in_vocab(t)) work[size_t(t)] += b;
    const auto penalise = [r](float& x) { x = x > 0.0f ? x / r : x * r; };
    if (rep)
        for (const int32_t t : prompt)
            if (in_vocab(t)) in_prompt_[size_t(t)] = 1;
    if (rep || freq_pres)
        for (const int32_t t : output)
            if (in_vocab(t)) ++counts_[size_t(t)];
    if (rep)   // prompt tokens, each once (1 → 2 marks it done; reset below)
        for (const int32_t t : prompt)
            if (in_vocab(t) && in_prompt_[size_t(t)] == 1) {
                penalise(work[size_t(t)]);
                in_prompt_[size_t(t)] = 2;
            }
    for (const int32_t t : output) {   // output tokens, each once (counts_ zeroed on the first visit)
        if (!in_vocab(t) || counts_[size_t(t)] == 0) continue;
        const int32_t c = counts_[size_t(t)];
        counts_[size_t(t)] = 0;
        float& x = work[size_t(t)];
        if (rep && in_prompt_[size_t(t)] == 0) penalise(x);
        x -= params.frequency_penalty * float(c) + params.presence_penalty;
    }
    if (rep)
        for (const int32_t t : prompt)
            if (in_vocab(t)) in_prompt_[size_t(t)] = 0;
    return work;
}

int64_t Sampler::keep_prefix(int64_t n, double top_p, float min_p, double total, double& kept) const {
    // top-p: the smallest prefix with Σ ≥ top_p · total; min-p: stop below min_p · p_max (p_max = 1).
    const double need = top_p * total;
    int64_t keep = n;
    kept = 0.0;
    for (int64_t j = 0; j < n; ++j) {
        const float p = work_[size_t(order_[size_t(j)])];
        if (j > 0 && p < min_p) {
            keep = j;
            break;
        }
        kept += double(p);
        if (top_p < 1.0 && kept >= need) {
            keep = j + 1;
            break;
        }
    }
    return keep;
}

double Sampler::probabilities(std::span<const float> proc, bool processed, float t, int64_t top_k, float& m,
                              RawStats& rs) {
    const int64_t vocab = int64_t(proc.size());
    const std::span<float> work(work_.data(), size_t(vocab));
    const std::span<int32_t> order(order_.data(), size_t(vocab));
    double total = 0.0;
    if (top_k > 0) {
        select_top(proc, order, top_k);   // by processed logit = by probability
        m = key(proc[size_t(order[0])]);
        if (!processed) {
            rs.max = m;
            rs.have_max = true;
        }
        for (int64_t j = 0; j < top_k; ++j) {
            const size_t id = size_t(order[size_t(j)]);
            total += double(work[id] = exp_nonpos((proc[id] - m) / t));
        }
    } else {
        m = max_value(proc);
        total = exp_shifted<true>(proc.data(), work.data(), vocab, m, t);
        if (!processed) {
            rs.max = m;
            rs.have_max = true;
        }
        if (!processed && t == 1.0f && std::isfinite(m)) {   // same sum as the raw log-softmax
            rs.lse = double(m) + std::log(total);
            rs.have_lse = true;
        }
    }
    return total;
}

int64_t Sampler::choose(std::span<const float> proc, bool processed, const SamplingParams& params, uint64_t seed,
                        uint64_t step, uint32_t attempt, RawStats& rs) {
    const int64_t vocab = int64_t(proc.size());
    if (vocab <= 0) return -1;
    const std::span<float> work(work_.data(), size_t(vocab));
    const std::span<int32_t> order(order_.data(), size_t(vocab));
    if (params.greedy()) {
        const int64_t chosen = argmax(proc);
        if (!processed) {
            rs.max = key(proc[size_t(chosen)]);
            rs.have_max = true;
        }
        return chosen;
    }
    const bool top_k_on = params.top_k > 0 && params.top_k < vocab;
    const bool top_p_on = params.top_p < 1.0f;
    const bool min_p_on = params.min_p > 0.0f;
    const double u = uniform(seed, step, attempt);

    // Probabilities (unnormalised, max-subtracted: the best token has p = 1) go in work[id].
    const int64_t n = top_k_on ? params.top_k : vocab;   // candidates in order[0, n), best first (unless no filter)
    float m = 0.0f;
    // Σ p over the candidates (the distribution top-p sees)
    const double total = probabilities(proc, processed, params.temperature, top_k_on ? n : 0, m, rs);
    int64_t chosen = -1;
    if (!std::isfinite(m) || !(total > 0.0)) {   // degenerate row (all −inf / +inf): greedy
        chosen = argmax(proc);
    } else if (!top_k_on && !top_p_on && !min_p_on) {   // no filter: draw in id order, no sort
        const double target = u * total;
        double cum = 0.0;
        for (int64_t i = 0; i < vocab; ++i) {
            const float p = work[size_t(i)];
            if (p > 0.0f) chosen = i;
            cum += double(p);
            if (cum > target) break;
        }
    } else {
        const float min_p_thr = min_p_on ? std::min(params.min_p, 1.0f) : 0.0f;   // · p_max = 1
        if (!top_k_on) {
            chosen = draw_bucketed(work, top_p_on ? double(params.top_p) : 1.0, min_p_thr, u, order);
        } else {
            double kept = 0.0;
            const int64_t keep = keep_prefix(n, top_p_on ? double(params.top_p) : 1.0, min_p_thr, total, kept);
            const double target = u * kept;
            double cum = 0.0;
            chosen = order[size_t(keep - 1)];   // rounding fallback: the last kept token
            for (int64_t j = 0; j < keep; ++j) {
                cum += double(work[size_t(order[size_t(j)])]);
                if (cum > target) {
                    chosen = order[size_t(j)];
                    break;
                }
            }
        }
    }
    return chosen < 0 ? argmax(proc) : chosen;
}

void Sampler::report_logprobs(std::span<const float> raw, int64_t chosen, const SamplingParams& params,
                              const RawStats& rs, SampledToken& out) {
    const int64_t vocab = int64_t(raw.size());
    out.token = int32_t(chosen);
    if (vocab <= 0) {
        out.logprob = 0.0f;
        out.top.clear();
        return;
    }
    const std::span<float> work(work_.data(), size_t(vocab));   // free by now: the scratch of log Σ exp
    const double raw_lse = rs.have_lse ? rs.lse : log_sum_exp(raw, rs.have_max ? rs.max : max_value(raw), work);
    out.logprob = float(double(raw[size_t(chosen)]) - raw_lse);
    if (params.logprobs < 0) {
        out.top.clear();
        return;
    }
    const int64_t n_top = std::min<int64_t>(params.logprobs, vocab);
    out.top.resize(size_t(n_top));
    if (n_top == 0) return;
    const std::span<int32_t> order(order_.data(), size_t(vocab));
    select_top(raw, order, n_top);
    for (int64_t j = 0; j < n_top; ++j) {
        const int32_t id = order[size_t(j)];
        out.top[size_t(j)] = {id, float(double(raw[size_t(id)]) - raw_lse)};
    }
}

double Sampler::uniform(uint64_t seed, uint64_t step, uint32_t attempt) {
    Rng rng(seed * 0x9E3779B97F4A7C15ull ^ (step + 1) * 0xBF58476D1CE4E5B9ull ^
            uint64_t(attempt) * 0x94D049BB133111EBull);
    return rng.uniform();
}

void Sampler::sample(std::span<const float> logits, const SamplingParams& params, std::span<const int32_t> prompt,
                     std::span<const int32_t> output, uint64_t seed, uint64_t step, SampledToken& out,
                     std::span<const uint64_t> mask, uint32_t attempt) {
    const int64_t vocab = std::min<int64_t>(vocab_, int64_t(logits.size()));
    const std::span<const float> raw = mask_logits(logits.first(size_t(vocab)), mask);
    const std::span<const float> proc = penalize(raw, params, prompt, output);
    RawStats rs;
    const int64_t chosen = choose(proc, proc.data() != raw.data(), params, seed, step, attempt, rs);
    report_logprobs(raw, chosen, params, rs, out);
}

}   // namespace kimi

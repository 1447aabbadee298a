// TokenDraw: the token plain decoding draws for a request at one output index — its seeded
// sample (sampler.h) under its sampling parameters and, for structured output, its grammar:
// the unmasked draw when that is exact and the grammar allows it, else the masked one. The
// output processor draws every token through it; a draft model draws its proposals through it
// too, from its own logits but with the target's uniform for that index, so a proposal equals
// the target's own draw wherever the two distributions agree, and verification is plain
// sampling (docs/runtime.md#draft-model). No allocation per call in steady state.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/request.h"
#include "runtime/sampler.h"
#include "runtime/structured_output.h"

namespace kimi {

class TokenDraw {
public:
    // n_sampled: the ids a token may be drawn from; eos: where a grammar may end (with the
    // request's stop_token_ids).
    TokenDraw(int64_t n_sampled, int32_t eos) : sampler_(n_sampled), eos_(eos) {}

    // r's token at output index output.size() from `row`: output is r's output so far (a draft
    // model passes it with its proposals before this one), grammar r's place in its grammar
    // (null: none; advanced past the token). False, and no token, when the grammar lets nothing
    // follow.
    bool draw(std::span<const float> row, const Request& r, std::span<const int32_t> output, GrammarState* grammar,
              SampledToken& tok);

private:
    Sampler sampler_;
    int32_t eos_;
    std::vector<uint64_t> mask_;     // the token mask of the request being drawn for
    std::vector<int32_t> end_ids_;   // its stop_token_ids and EOS (structured output)
};

}   // namespace kimi

// TokenDraw (see token_draw.h).
#include "runtime/token_draw.h"

namespace kimi {

bool TokenDraw::draw(std::span<const float> row, const Request& r, std::span<const int32_t> output,
                     GrammarState* grammar, SampledToken& tok) {
    const uint64_t step = output.size();
    if (!grammar) {
        sampler_.sample(row, r.params, r.prompt, output, r.seed, step, tok);
        return true;
    }
    end_ids_.assign(r.params.stop_token_ids.begin(), r.params.stop_token_ids.end());
    end_ids_.push_back(eos_);
    if (Sampler::mask_can_wait(r.params)) {
        sampler_.sample(row, r.params, r.prompt, output, r.seed, step, tok);
        if (grammar->try_accept(tok.token, end_ids_)) return true;
    }
    if (!grammar->mask(end_ids_, mask_)) return false;
    sampler_.sample(row, r.params, r.prompt, output, r.seed, step, tok, mask_, 1);
    grammar->accept(tok.token);
    return true;
}

}   // namespace kimi

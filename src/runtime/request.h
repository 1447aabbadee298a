// Request: one generation request as the scheduler and runner see it — integers and
// parameters only. vLLM v1 semantics: no prefill/decode phases; a request has
// num_tokens() known tokens (prompt + output so far) and n_computed of them are in the
// cache; each step the scheduler hands it some of the difference.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "image/image_key.h"
#include "runtime/sampling_params.h"

namespace kimi {

enum class RequestStatus : uint8_t { kWaiting, kRunning, kFinished };
enum class FinishReason : uint8_t { kNone, kStop, kLength, kAbort };

inline const char* finish_reason_name(FinishReason r) {   // "stop", "length", "abort", ""
    switch (r) {
        case FinishReason::kStop: return "stop";
        case FinishReason::kLength: return "length";
        case FinishReason::kAbort: return "abort";
        case FinishReason::kNone: return "";
    }
    return "";
}

// An image in the prompt (K3 vision): its n <|media_pad|> tokens at [offset, offset + n) take
// the rows of `embeds` ([n, D], the projector's output) in place of the token embedding, and
// carry the image's key (SHA-256, image_key.h) into the prefix-cache keys (so only the same
// image hits).
struct MediaSpan {
    int64_t offset = 0, n = 0;
    image::ImageKey key;
    std::shared_ptr<const std::vector<float>> embeds;
};

// The prefix-cache key of image token i of the image with key k: 63 bits drawn from the digest
// and i, with the top bit set, so it never equals a token id (docs/vision.md#prefix-cache).
// A forged hit needs every key of the block: 63 bits of SHA-256 output per image token.
inline uint64_t media_cache_key(const image::ImageKey& k, int64_t i) {
    uint64_t x = k.word(0) + 0x9e3779b97f4a7c15ull * uint64_t(i + 1);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (x ^ k.word(1 + int(i % 3))) | (uint64_t(1) << 63);
}

struct Request {
    uint64_t id = 0;
    std::vector<int32_t> prompt;
    std::vector<int32_t> output;
    SamplingParams params;
    uint64_t seed = 0;        // params.seed, or one drawn at submission
    int64_t n_computed = 0;   // tokens whose KV/state is in the cache
    RequestStatus status = RequestStatus::kWaiting;
    FinishReason finish = FinishReason::kNone;
    bool abort_requested = false;
    int32_t n_preemptions = 0;
    int64_t n_cached_tokens = 0;    // prompt tokens served from the prefix cache at admission
    uint64_t tail_checkpoint = 0;   // the KDA checkpoint this request moves forward as it decodes
    uint64_t group = 0;             // the client request it belongs to (its n × prompts share one)
    std::vector<MediaSpan> media;   // the prompt's images, by offset (K3 vision)
    // Speculative decoding: the proposed continuation of a decoding request, run after its last
    // known token and verified by the step's sampling (docs/runtime.md#speculative). Not known
    // tokens: token_at() reads it past num_tokens(), nothing else counts it.
    std::vector<int32_t> draft;
    int32_t draft_skip = 0, draft_backoff = 0;   // steps left without a draft; the next back-off
    // A draft model's proposals (docs/runtime.md#draft-model): how many of the known tokens the
    // draft model has in its cache.
    int64_t draft_n_computed = 0;

    int64_t num_tokens() const { return int64_t(prompt.size() + output.size()); }
    int64_t token_at(int64_t i) const {
        if (i < int64_t(prompt.size())) return prompt[size_t(i)];
        const size_t o = size_t(i - int64_t(prompt.size()));
        return o < output.size() ? output[o] : draft[o - output.size()];
    }
    // What names token i in the prefix cache: its id, or for an image token a key from the
    // image's key.
    uint64_t cache_key_at(int64_t i) const {
        for (const MediaSpan& m : media)
            if (i >= m.offset && i < m.offset + m.n) return media_cache_key(m.key, i - m.offset);
        return uint64_t(uint32_t(token_at(i)));
    }
};

}   // namespace kimi

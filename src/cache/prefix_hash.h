// The hash chain that names a full MLA block for prefix caching (vLLM v1's block hashing):
// hash(parent block's hash, this block's token keys, salt), where the salt folds in whatever
// else changes the cached values (the activation precision, the latent dtype). A token's key is
// its id, or for an image token 63 bits of the image's SHA-256 key (runtime/request.h). Equal
// chains mean equal prefixes up to a 64-bit collision; a hit is also checked against the stored
// keys.
#pragma once
#include <cstdint>
#include <span>

namespace kimi {

inline uint64_t mix64(uint64_t x) {   // splitmix64's finalizer
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// Never 0 (0 means "no hash" in the block pool).
inline uint64_t block_hash(uint64_t parent, std::span<const uint64_t> keys, uint64_t salt) {
    uint64_t h = mix64(parent ^ 0x9e3779b97f4a7c15ull) ^ mix64(salt + 0x632be59bd9b4e019ull);
    for (uint64_t k : keys) h = mix64(h ^ k);
    return h == 0 ? 1 : h;
}

}   // namespace kimi

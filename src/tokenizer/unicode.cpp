// Unicode class lookup (two-stage table built once from the generated runs in
// unicode_data.inc) and UTF-8 validation / lossy conversion helpers.
#include "tokenizer/unicode.h"

#include <string>
#include <unordered_map>
#include <vector>

namespace kimi::tok {
namespace {

struct Run {
    uint32_t first;
    uint8_t bits;
};

const Run kRuns[] = {
#include "tokenizer/unicode_data.inc"
};

constexpr uint32_t kBlockBits = 7;
constexpr uint32_t kBlock = 1u << kBlockBits;
constexpr uint32_t kNumBlocks = 0x110000 >> kBlockBits;

struct Tables {
    std::vector<uint16_t> stage1;   // block number per kBlock code points
    std::vector<uint8_t> stage2;    // deduplicated blocks
    Tables() {
        std::vector<uint8_t> flat(0x110000, 0);
        const size_t n = sizeof(kRuns) / sizeof(kRuns[0]);
        for (size_t i = 0; i < n; ++i) {
            const uint32_t end = i + 1 < n ? kRuns[i + 1].first : 0x110000;
            for (uint32_t c = kRuns[i].first; c < end; ++c) flat[c] = kRuns[i].bits;
        }
        flat[0x0A] |= kCrLf;
        flat[0x0D] |= kCrLf;
        std::unordered_map<std::string, uint16_t> seen;
        stage1.resize(kNumBlocks);
        for (uint32_t b = 0; b < kNumBlocks; ++b) {
            const std::string block(reinterpret_cast<const char*>(flat.data()) + size_t(b) * kBlock, kBlock);
            auto it = seen.find(block);
            if (it == seen.end()) {
                const auto id = static_cast<uint16_t>(seen.size());
                it = seen.emplace(block, id).first;
                stage2.insert(stage2.end(), block.begin(), block.end());
            }
            stage1[b] = it->second;
        }
    }
};

const Tables& tables() {
    static const Tables t;
    return t;
}

// Length of a valid UTF-8 sequence's prefix at p: returns {need, have}: need = full length
// of the sequence the lead byte announces (0 if the lead byte is invalid), have = how many of
// the bytes present are a valid prefix of such a sequence.
struct Prefix {
    int need;
    int have;
};

Prefix valid_prefix(const unsigned char* p, size_t left) {
    const unsigned c = p[0];
    int need;
    unsigned lo = 0x80, hi = 0xBF;   // allowed range of the second byte
    if (c < 0x80) return {1, 1};
    if (c >= 0xC2 && c <= 0xDF)
        need = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else
        return {0, 0};
    int have = 1;
    for (int k = 1; k < need && size_t(k) < left; ++k) {
        const unsigned b = p[k];
        const bool ok = k == 1 ? (b >= lo && b <= hi) : (b & 0xC0) == 0x80;
        if (!ok) break;
        ++have;
    }
    return {need, have};
}

}   // namespace

const char* const kUnicodeVersion = KIMI_TOK_UNICODE_VERSION;

const uint8_t kAsciiClass[128] = {
#define S kSpace
#define L (kLetter | kUpperSet)
#define l (kLetter | kLowerSet)
#define D kNumber
    0, 0, 0, 0, 0, 0, 0, 0, 0, S, S | kCrLf, S, S, S | kCrLf, 0, 0,   // 0x00
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,         0, 0, 0,         0, 0,   // 0x10
    S, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,         0, 0, 0,         0, 0,   // 0x20
    D, D, D, D, D, D, D, D, D, D, 0,         0, 0, 0,         0, 0,   // 0x30
    0, L, L, L, L, L, L, L, L, L, L,         L, L, L,         L, L,   // 0x40
    L, L, L, L, L, L, L, L, L, L, L,         0, 0, 0,         0, 0,   // 0x50
    0, l, l, l, l, l, l, l, l, l, l,         l, l, l,         l, l,   // 0x60
    l, l, l, l, l, l, l, l, l, l, l,         0, 0, 0,         0, 0,   // 0x70
#undef S
#undef L
#undef l
#undef D
};

uint8_t cp_class_slow(uint32_t cp) {
    if (cp >= 0x110000) return 0;
    const Tables& t = tables();
    return t.stage2[size_t(t.stage1[cp >> kBlockBits]) * kBlock + (cp & (kBlock - 1))];
}

bool utf8_valid(std::string_view s) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const auto* end = p + s.size();
    while (p < end) {
        if (*p < 0x80) {
            ++p;
            continue;
        }
        uint32_t cp;
        const int n = utf8_decode(p, end, cp);
        if (cp == kInvalidCp) return false;
        p += n;
    }
    return true;
}

size_t utf8_incomplete_len(std::string_view s, size_t pos) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + pos;
    const size_t left = s.size() - pos;
    const Prefix pr = valid_prefix(p, left);
    if (pr.need > 1 && size_t(pr.have) == left && pr.have < pr.need) return left;
    return 0;
}

void utf8_append_lossy(std::string& out, std::string_view s) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const auto* end = p + s.size();
    while (p < end) {
        const auto* run = p;
        while (p < end && *p < 0x80) ++p;
        out.append(reinterpret_cast<const char*>(run), size_t(p - run));
        if (p == end) break;
        const Prefix pr = valid_prefix(p, size_t(end - p));
        if (pr.need > 0 && pr.have == pr.need) {
            out.append(reinterpret_cast<const char*>(p), size_t(pr.need));
            p += pr.need;
        } else {
            out.append("\xEF\xBF\xBD");
            p += pr.have > 0 ? pr.have : 1;
        }
    }
}

void utf8_append(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out.push_back(char(cp));
    } else if (cp < 0x800) {
        out.push_back(char(0xC0 | (cp >> 6)));
        out.push_back(char(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(char(0xE0 | (cp >> 12)));
        out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(char(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(char(0xF0 | (cp >> 18)));
        out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(char(0x80 | (cp & 0x3F)));
    }
}

}   // namespace kimi::tok

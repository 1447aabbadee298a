// Tokenizer::load: parse tiktoken.model ("base64 rank" lines, as tiktoken/load.py
// load_tiktoken_bpe) and tokenizer_config.json (added_tokens_decoder, bos/eos/pad/unk,
// chat_template), and lay out the special tokens as tokenization_kimi.py does: ids
// n_base .. n_base+257, named from added_tokens_decoder or "<|reserved_token_{id}|>".
#include <algorithm>
#include <array>
#include <charconv>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/base64.h"
#include "tokenizer/tokenizer_impl.h"

namespace kimi::tok {
namespace {

std::string read_file(const std::string& path, bool required, bool& found) {
    check_regular_file(path, /*missing_ok=*/true);
    std::ifstream f(path, std::ios::binary);
    found = bool(f);
    if (!f) {
        if (required) throw Error("cannot open " + path);
        return {};
    }
    std::ostringstream ss;
    ss << f.rdbuf();
    if (f.bad()) throw Error("cannot read " + path);
    return ss.str();
}

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// Base tokens (bytes, rank) → the rank table: ranks exactly 0..n-1, distinct bytes, every
// single byte a token. `path` names the source in errors.
void fill_ranks(const std::vector<std::pair<std::string, uint32_t>>& entries, const std::string& path,
                Tokenizer::Impl& t) {
    if (entries.empty()) throw Error(path + ": no tokens");
    const size_t n = entries.size();
    std::vector<size_t> line_of_rank(n, 0);
    t.ranks.reserve(n);
    for (size_t k = 0; k < n; ++k) {
        const auto& [bytes, rank] = entries[k];
        if (rank >= n)
            throw Error(path + ": ranks are not contiguous: rank " + std::to_string(rank) + " with only " +
                        std::to_string(n) + " tokens (ranks must be exactly 0.." + std::to_string(n - 1) + ")");
        if (t.ranks.has_rank(rank))
            throw Error(path + ": duplicate rank " + std::to_string(rank) + " (lines " +
                        std::to_string(line_of_rank[rank]) + " and " + std::to_string(k + 1) + ")");
        if (!t.ranks.insert(bytes, rank))
            throw Error(path + ": duplicate token bytes (base64 " + base64_encode(bytes) + ") for rank " +
                        std::to_string(rank));
        line_of_rank[rank] = k + 1;
    }
    for (int b = 0; b < 256; ++b) {
        const unsigned char c = static_cast<unsigned char>(b);
        if (t.ranks.find(&c, 1) == kNoRank)
            throw Error(path + ": single byte 0x" + std::string(1, "0123456789abcdef"[b >> 4]) +
                        "0123456789abcdef"[b & 15] + " is not a token (every byte must be, for byte-level BPE)");
    }
    t.n_base = int32_t(n);
}

void load_ranks(const std::string& path, Tokenizer::Impl& t) {
    bool found = false;
    const std::string text = read_file(path, true, found);
    std::vector<std::pair<std::string, uint32_t>> entries;
    entries.reserve(text.size() / 12);
    size_t pos = 0, line_no = 0;
    while (pos < text.size()) {
        size_t eol = text.find('\n', pos);
        if (eol == std::string::npos) eol = text.size();
        std::string_view line(text.data() + pos, eol - pos);
        pos = eol + 1;
        ++line_no;
        auto where = [&] { return path + ":" + std::to_string(line_no) + ": "; };
        std::vector<std::string_view> fields;
        size_t i = 0;
        while (i < line.size()) {
            while (i < line.size() && is_ws(line[i])) ++i;
            size_t j = i;
            while (j < line.size() && !is_ws(line[j])) ++j;
            if (j > i) fields.push_back(line.substr(i, j - i));
            i = j;
        }
        if (fields.empty()) {
            if (line.empty() || line == "\r") continue;
            throw Error(where() + "blank line with spaces (expected '<base64> <rank>')");
        }
        if (fields.size() != 2)
            throw Error(where() + "expected '<base64> <rank>', got " + std::to_string(fields.size()) + " fields");
        auto bytes = base64_decode(fields[0]);
        if (!bytes) throw Error(where() + "invalid base64 '" + std::string(fields[0].substr(0, 64)) + "'");
        if (bytes->empty()) throw Error(where() + "empty token");
        uint64_t rank = 0;
        const auto* b = fields[1].data();
        const auto* e = b + fields[1].size();
        auto [p, ec] = std::from_chars(b, e, rank);
        if (ec != std::errc() || p != e || rank >= uint64_t(INT32_MAX) - kSpecialSlots)
            throw Error(where() + "invalid rank '" + std::string(fields[1]) + "'");
        entries.emplace_back(std::move(*bytes), uint32_t(rank));
    }
    fill_ranks(entries, path, t);
}

// The special slots n_base .. n_base+257: names[k] for id n_base + k, or
// "<|reserved_token_{id}|>" where it is empty (tokenization_kimi.py).
void fill_specials(const std::vector<std::string>& names, const std::string& path, Tokenizer::Impl& t) {
    t.special_text.resize(kSpecialSlots);
    for (int32_t k = 0; k < kSpecialSlots; ++k) {
        const int32_t id = t.n_base + k;
        std::string name =
            names[size_t(k)].empty() ? "<|reserved_token_" + std::to_string(id) + "|>" : names[size_t(k)];
        if (!t.special_ids.emplace(name, id).second)
            throw Error(path + ": special token '" + name + "' is used for two ids (" +
                        std::to_string(t.special_ids[name]) + " and " + std::to_string(id) + ")");
        t.special_text[size_t(k)] = std::move(name);
    }
    for (const auto& s : t.special_text) {
        t.special_first[static_cast<unsigned char>(s[0])] = true;
        if (std::find(t.special_lengths.begin(), t.special_lengths.end(), s.size()) == t.special_lengths.end())
            t.special_lengths.push_back(s.size());
    }
    std::sort(t.special_lengths.rbegin(), t.special_lengths.rend());
}

// A special-token field: "text", {"content": "text", ...} or null.
std::optional<std::string> token_field(const nlohmann::json& cfg, const char* key, const std::string& path) {
    if (!cfg.contains(key) || cfg[key].is_null()) return std::nullopt;
    const auto& v = cfg[key];
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
    throw Error(path + ": '" + key + "' must be a string or an object with a string 'content'");
}

void load_config(const std::string& dir, Tokenizer::Impl& t) {
    const std::string path = dir + "/tokenizer_config.json";
    bool found = false;
    const std::string text = read_file(path, true, found);
    nlohmann::json cfg;
    try {
        cfg = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw Error(path + ": invalid JSON: " + e.what());
    }
    if (!cfg.is_object()) throw Error(path + ": expected a JSON object");

    std::vector<std::string> names(kSpecialSlots);
    if (cfg.contains("added_tokens_decoder")) {
        const auto& dec = cfg["added_tokens_decoder"];
        if (!dec.is_object()) throw Error(path + ": 'added_tokens_decoder' must be an object");
        for (const auto& [key, val] : dec.items()) {
            int64_t id = -1;
            auto [p, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
            if (ec != std::errc() || p != key.data() + key.size())
                throw Error(path + ": added_tokens_decoder key '" + key + "' is not a token id");
            if (id < t.n_base || id >= int64_t(t.n_base) + kSpecialSlots)
                throw Error(path + ": added token id " + key + " is outside the special range [" +
                            std::to_string(t.n_base) + ", " + std::to_string(t.n_base + kSpecialSlots) + ")");
            if (!val.is_object() || !val.contains("content") || !val["content"].is_string())
                throw Error(path + ": added_tokens_decoder[" + key + "] needs a string 'content'");
            const std::string content = val["content"].get<std::string>();
            if (content.empty()) throw Error(path + ": added_tokens_decoder[" + key + "] has empty content");
            names[size_t(id - t.n_base)] = content;
        }
    }
    fill_specials(names, path, t);

    auto resolve = [&](const char* key, const char* fallback) -> int32_t {
        auto name = token_field(cfg, key, path);
        if (!name) {
            if (cfg.contains(key)) return -1;   // explicitly null
            return fallback ? t.find_special(fallback) : -1;
        }
        const int32_t id = t.find_special(*name);
        if (id < 0) throw Error(path + ": " + key + " '" + *name + "' is not one of the special tokens");
        return id;
    };
    t.bos = resolve("bos_token", "[BOS]");
    t.eos = resolve("eos_token", "[EOS]");
    t.pad = resolve("pad_token", nullptr);
    t.unk = resolve("unk_token", nullptr);

    if (cfg.contains("chat_template")) {
        const auto& ct = cfg["chat_template"];
        if (ct.is_string()) {
            t.chat_template = ct.get<std::string>();
        } else if (ct.is_array()) {   // [{"name": ..., "template": ...}]: take "default", else the first
            for (const auto& e : ct)
                // note: a name that is not a string is not "default" (value("name", "") would throw)
                if (e.is_object() && e.contains("template") && e["template"].is_string() &&
                    (t.chat_template.empty() || (e.contains("name") && e["name"] == "default")))
                    t.chat_template = e["template"].get<std::string>();
        } else if (!ct.is_null()) {
            throw Error(path + ": 'chat_template' must be a string");
        }
    }
    if (t.chat_template.empty()) {
        bool have = false;
        t.chat_template = read_file(dir + "/chat_template.jinja", false, have);
    }
}

}   // namespace

Tokenizer Tokenizer::load(const std::string& dir, const LoadOptions& opts) {
    auto impl = std::make_shared<Impl>();
    impl->pattern = opts.pattern;
    load_ranks(dir + "/tiktoken.model", *impl);
    load_config(dir, *impl);
    return Tokenizer(std::move(impl));
}

namespace {
// GPT-2's byte-to-unicode table inverted: code point → byte (-1 for none). Printable bytes
// 33..126, 161..172 and 174..255 stand for themselves; the other 68 bytes, in order, for
// U+0100 onwards.
std::array<int16_t, 512> unicode_to_byte() {
    std::array<int16_t, 512> inv;
    inv.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        inv[size_t(printable ? b : next++)] = int16_t(b);
    }
    return inv;
}

// A base token's bytes from its GPT-2 spelling (UTF-8 of code points below U+0200).
bool gpt2_token_bytes(const std::string& s, const std::array<int16_t, 512>& inv, std::string& out) {
    out.clear();
    for (size_t i = 0; i < s.size();) {
        const auto c0 = static_cast<unsigned char>(s[i]);
        uint32_t cp;
        if (c0 < 0x80) {
            cp = c0;
            i += 1;
        } else if ((c0 & 0xe0) == 0xc0 && i + 1 < s.size() && (static_cast<unsigned char>(s[i + 1]) & 0xc0) == 0x80) {
            cp = (uint32_t(c0 & 0x1f) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3f);
            i += 2;
        } else {
            return false;
        }
        if (cp >= inv.size() || inv[cp] < 0) return false;
        out.push_back(char(inv[cp]));
    }
    return !out.empty();
}
}   // namespace

Tokenizer Tokenizer::from_gguf(const GgufVocab& v) {
    const std::string& src = v.source;
    if (v.model != "gpt2")
        throw Error(src + ": tokenizer.ggml.model '" + v.model + "' is not supported (a Kimi GGUF has 'gpt2')");
    if (v.pre != "kimi-k2")
        throw Error(src + ": tokenizer.ggml.pre '" + v.pre +
                    "' is not supported (Kimi Linear and Kimi-K3 files have 'kimi-k2')");
    if (v.tokens.size() != v.types.size())
        throw Error(src + ": tokenizer.ggml.tokens has " + std::to_string(v.tokens.size()) +
                    " entries but tokenizer.ggml.token_type " + std::to_string(v.types.size()));
    constexpr int32_t kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5;
    size_t n_base = 0;
    while (n_base < v.types.size() && v.types[n_base] == kNormal) ++n_base;
    if (n_base == 0) throw Error(src + ": tokenizer.ggml.tokens holds no normal tokens");
    if (v.tokens.size() > n_base + size_t(kSpecialSlots))
        throw Error(src + ": " + std::to_string(v.tokens.size() - n_base) + " tokens after the " +
                    std::to_string(n_base) + " base tokens; Kimi's layout has at most " +
                    std::to_string(kSpecialSlots) + " special slots");
    auto impl = std::make_shared<Impl>();
    const auto inv = unicode_to_byte();
    std::vector<std::pair<std::string, uint32_t>> entries(n_base);
    for (size_t id = 0; id < n_base; ++id) {
        if (!gpt2_token_bytes(v.tokens[id], inv, entries[id].first))
            throw Error(src + ": token " + std::to_string(id) + " is not in GPT-2's byte-level spelling");
        entries[id].second = uint32_t(id);
    }
    fill_ranks(entries, src + ": tokenizer.ggml.tokens", *impl);
    std::vector<std::string> names(kSpecialSlots);
    for (size_t id = n_base; id < v.tokens.size(); ++id) {
        const int32_t type = v.types[id];
        if (type == kControl || type == kUserDefined) {
            if (v.tokens[id].empty()) throw Error(src + ": special token " + std::to_string(id) + " is empty");
            names[id - n_base] = v.tokens[id];
        } else if (type != kUnused) {
            throw Error(src + ": token " + std::to_string(id) + " of type " + std::to_string(type) +
                        " follows the special tokens (expected control or unused)");
        }
    }
    fill_specials(names, src + ": tokenizer.ggml.tokens", *impl);
    const auto id_of = [&](int64_t id, const char* key) -> int32_t {
        if (id < -1 || id >= impl->n_vocab())
            throw Error(src + ": tokenizer.ggml." + key + " " + std::to_string(id) + " is outside the vocabulary");
        return int32_t(id);
    };
    impl->bos = id_of(v.bos, "bos_token_id");
    impl->eos = id_of(v.eos, "eos_token_id");
    impl->pad = id_of(v.pad, "padding_token_id");
    impl->unk = id_of(v.unk, "unknown_token_id");
    impl->chat_template = v.chat_template;
    return Tokenizer(std::move(impl));
}

std::string_view Tokenizer::Impl::bytes_of(int32_t id) const {
    if (id >= 0 && id < n_base) return ranks.bytes(uint32_t(id));
    if (id >= n_base && id < n_vocab()) return special_text[size_t(id - n_base)];
    throw Error("token id " + std::to_string(id) + " is out of range [0, " + std::to_string(n_vocab()) + ")");
}

int32_t Tokenizer::n_vocab() const { return impl_->n_vocab(); }
int32_t Tokenizer::n_base() const { return impl_->n_base; }
Pattern Tokenizer::pattern() const { return impl_->pattern; }
std::string_view Tokenizer::token_bytes(int32_t id) const { return impl_->bytes_of(id); }
std::optional<int32_t> Tokenizer::special_id(std::string_view text) const {
    const int32_t id = impl_->find_special(text);
    if (id < 0) return std::nullopt;
    return id;
}
bool Tokenizer::is_special(int32_t id) const { return id >= impl_->n_base && id < impl_->n_vocab(); }
int32_t Tokenizer::bos_id() const { return impl_->bos; }
int32_t Tokenizer::eos_id() const { return impl_->eos; }
int32_t Tokenizer::pad_id() const { return impl_->pad; }
int32_t Tokenizer::unk_id() const { return impl_->unk; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }
std::vector<int32_t> Tokenizer::stop_ids() const {
    std::vector<int32_t> ids;
    for (const char* turn_end : {"<|im_end|>", "<|end_of_msg|>"}) {   // Kimi Linear / Kimi-K3 end of turn
        const int32_t id = impl_->find_special(turn_end);
        if (id >= 0) ids.push_back(id);
    }
    if (impl_->eos >= 0 && std::find(ids.begin(), ids.end(), impl_->eos) == ids.end()) ids.push_back(impl_->eos);
    return ids;
}

}   // namespace kimi::tok

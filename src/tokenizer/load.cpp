// Tokenizer::load: parse tiktoken.model ("base64 rank" lines, as tiktoken/load.py
// load_tiktoken_bpe) and tokenizer_config.json (added_tokens_decoder, bos/eos/pad/unk,
// chat_template), and lay out the special tokens as tokenization_kimi.py does: ids
// n_base .. n_base+257, named from added_tokens_decoder or "<|reserved_token_{id}|>".
#include <algorithm>
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

// write_synthetic_tokenizer (see synthetic.h): byte-level BPE training in the style of
// openai/tiktoken tiktoken/_educational.py (bpe_train: most frequent adjacent pair wins,
// pre-split by the same pat_str), then deterministic filler merges, then the Kimi config.
#include "tokenizer/synthetic.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "core/base64.h"
#include "tokenizer/bpe.h"
#include "tokenizer/chat_template_text.h"
#include "tokenizer/kimi_specials.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace kimi::tok {

extern const char* const kSyntheticSeedText;

namespace {

struct Vocab {
    RankTable table;
    std::vector<std::string> bytes;   // by rank

    int32_t size() const { return int32_t(bytes.size()); }
    // Adds t if it is new and tiktoken's merge reaches it: the merge of its bytes with the
    // ranks so far must end in exactly two parts (t, ranked last, then joins them).
    bool add_if_reachable(const std::string& t, std::vector<int32_t>& scratch) {
        if (table.find(t) != kNoRank) return false;
        scratch.clear();
        bpe_merge(t, table, scratch);
        if (scratch.size() != 2) return false;
        const auto r = uint32_t(bytes.size());
        table.insert(t, r);
        bytes.push_back(t);
        return true;
    }
};

struct Word {
    std::vector<int32_t> sym;
    int64_t count;
};

void train(Vocab& v, int32_t target) {
    std::map<std::string, int64_t> counts;
    Splitter sp(kSyntheticSeedText, Pattern::kimi);
    std::string_view piece;
    while (sp.next(piece)) ++counts[std::string(piece)];
    std::vector<Word> words;
    for (const auto& [w, c] : counts) {
        Word word{{}, c};
        for (unsigned char b : w) word.sym.push_back(b);
        if (word.sym.size() > 1) words.push_back(std::move(word));
    }
    std::vector<int32_t> scratch;
    std::vector<uint64_t> banned;
    std::unordered_map<uint64_t, int64_t> pairs;
    while (v.size() < target) {
        pairs.clear();
        for (const Word& w : words)
            for (size_t i = 0; i + 1 < w.sym.size(); ++i)
                pairs[(uint64_t(uint32_t(w.sym[i])) << 32) | uint32_t(w.sym[i + 1])] += w.count;
        uint64_t best = 0;
        int64_t best_count = 1;   // a pair must occur at least twice
        for (const auto& [p, c] : pairs) {
            if (c < best_count || (c == best_count && p > best)) continue;
            if (std::find(banned.begin(), banned.end(), p) != banned.end()) continue;
            best = p;
            best_count = c;
        }
        if (best_count < 2) break;
        const auto a = int32_t(best >> 32), b = int32_t(best & 0xFFFFFFFFu);
        const std::string t = v.bytes[size_t(a)] + v.bytes[size_t(b)];
        uint32_t id = v.table.find(t);
        if (id == kNoRank) {
            if (!v.add_if_reachable(t, scratch)) {
                banned.push_back(best);
                continue;
            }
            id = uint32_t(v.size() - 1);
        }
        for (Word& w : words) {
            std::vector<int32_t> out;
            out.reserve(w.sym.size());
            for (size_t i = 0; i < w.sym.size(); ++i) {
                if (i + 1 < w.sym.size() && w.sym[i] == a && w.sym[i + 1] == b) {
                    out.push_back(int32_t(id));
                    ++i;
                } else {
                    out.push_back(w.sym[i]);
                }
            }
            w.sym.swap(out);
        }
        words.erase(std::remove_if(words.begin(), words.end(), [](const Word& w) { return w.sym.size() < 2; }),
                    words.end());
    }
}

void fill(Vocab& v, int32_t target, uint64_t seed) {
    // Concatenate tokens that are whole UTF-8 strings, so filler tokens are valid text too.
    Rng rng(seed ^ 0x6b696d69746f6bull);
    std::vector<int32_t> scratch, pool;
    for (int32_t id = 0; id < v.size(); ++id)
        if (utf8_valid(v.bytes[size_t(id)]) &&
            (v.bytes[size_t(id)].size() > 1 || uint8_t(v.bytes[size_t(id)][0]) >= 0x20))
            pool.push_back(id);
    const size_t learned = pool.size();
    uint64_t attempts = 0;
    const uint64_t max_attempts = 1000 + uint64_t(target) * 200;
    while (v.size() < target) {
        if (++attempts > max_attempts) throw Error("synthetic tokenizer: could not generate enough reachable tokens");
        // The left part from everything so far (long tokens grow), the right part from the learned ones.
        const int32_t a = pool[size_t(rng.below(rng.below(4) == 0 ? pool.size() : learned))];
        const int32_t b = pool[size_t(rng.below(learned))];
        const std::string t = v.bytes[size_t(a)] + v.bytes[size_t(b)];
        if (t.size() > 24) continue;
        if (v.add_if_reachable(t, scratch)) pool.push_back(v.size() - 1);
    }
}

void write_text(const std::filesystem::path& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary);
    if (!f) throw Error("cannot write " + path.string());
    f << text;
    if (!f) throw Error("cannot write " + path.string());
}

nlohmann::ordered_json config_json(int32_t n_base, SpecialLayout layout) {
    const bool k3 = layout == SpecialLayout::kKimiK3;
    nlohmann::ordered_json dec = nlohmann::ordered_json::object();
    std::vector<const KimiSpecial*> by_offset(kModelVocabExtra, nullptr);
    if (k3)
        for (const KimiSpecial& s : kK3Specials) by_offset[size_t(s.offset)] = &s;
    else
        for (const KimiSpecial& s : kKimiSpecials) by_offset[size_t(s.offset)] = &s;
    for (int32_t k = 0; k < kModelVocabExtra; ++k) {
        const int32_t id = n_base + k;
        const KimiSpecial* s = by_offset[size_t(k)];
        nlohmann::ordered_json e;
        e["content"] = s ? std::string(s->text) : "<|reserved_token_" + std::to_string(id) + "|>";
        e["lstrip"] = false;
        e["normalized"] = false;
        e["rstrip"] = false;
        e["single_word"] = false;
        e["special"] = s ? s->special : true;
        dec[std::to_string(id)] = e;
    }
    nlohmann::ordered_json cfg;
    cfg["added_tokens_decoder"] = dec;
    cfg["additional_special_tokens"] = k3
        ? nlohmann::ordered_json::array({"<|end_of_msg|>", "<|open|>", "<|close|>", "<|sep|>"})
        : nlohmann::ordered_json::array({"<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|start_header_id|>",
                                         "<|end_header_id|>", "[EOT]", "<|im_system|>", "<|im_middle|>"});
    cfg["auto_map"]["AutoTokenizer"] = nlohmann::ordered_json::array({"tokenization_kimi.TikTokenTokenizer", nullptr});
    cfg["bos_token"] = "[BOS]";
    if (!k3) cfg["chat_template"] = kKimiLinearChatTemplate;   // K3 ships its encoder in Python, no Jinja
    cfg["clean_up_tokenization_spaces"] = false;
    cfg["eos_token"] = "[EOS]";
    cfg["extra_special_tokens"] = nlohmann::ordered_json::object();
    cfg["model_max_length"] = 1048576;
    cfg["pad_token"] = "[PAD]";
    cfg["tokenizer_class"] = "TikTokenTokenizer";
    cfg["unk_token"] = "[UNK]";
    return cfg;
}

}   // namespace

void write_synthetic_tokenizer(const std::string& dir, int32_t n_base_tokens, uint64_t seed, SpecialLayout layout) {
    if (n_base_tokens < 256 || n_base_tokens > (1 << 30))
        throw Error("synthetic tokenizer: n_base_tokens must be in [256, 2^30], got " + std::to_string(n_base_tokens));
    Vocab v;
    v.table.reserve(size_t(n_base_tokens));
    v.bytes.reserve(size_t(n_base_tokens));
    for (int b = 0; b < 256; ++b) {
        const std::string s(1, char(b));
        v.table.insert(s, uint32_t(b));
        v.bytes.push_back(s);
    }
    train(v, n_base_tokens);
    fill(v, n_base_tokens, seed);

    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw Error("cannot create " + dir + ": " + ec.message());
    std::string model;
    model.reserve(size_t(n_base_tokens) * 16);
    for (int32_t r = 0; r < v.size(); ++r) {
        model += base64_encode(v.bytes[size_t(r)]);
        model += ' ';
        model += std::to_string(r);
        model += '\n';
    }
    write_text(std::filesystem::path(dir) / "tiktoken.model", model);
    write_text(std::filesystem::path(dir) / "tokenizer_config.json", config_json(n_base_tokens, layout).dump(2) + "\n");
}

int32_t count_base_tokens(const std::string& dir) {
    const std::string path = dir + "/tiktoken.model";
    std::ifstream f(path, std::ios::binary);
    if (!f) throw Error("cannot open " + path);
    int64_t n = 0;
    std::string line;
    while (std::getline(f, line))
        if (!line.empty() && line != "\r") ++n;
    if (n > INT32_MAX) throw Error(path + ": too many lines");
    return int32_t(n);
}

}   // namespace kimi::tok

// kimi::tok::Tokenizer — the public tokenizer API: load a Kimi tokenizer directory
// (tiktoken.model + tokenizer_config.json), encode/decode exactly like Kimi's
// TikTokenTokenizer (tiktoken core + Kimi pat_str + Kimi specials), stream-decode at UTF-8
// boundaries. (The conversation formats built on it live in src/chat/.)
// Reference: moonshotai tokenization_kimi.py, openai/tiktoken (src/lib.rs, tiktoken/core.py).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/pretokenize.h"

namespace kimi::tok {

// Special-token slots after the base ranks (tokenization_kimi.py: num_reserved_special_tokens
// + 2), so n_vocab() == n_base() + kSpecialSlots. The model's vocab_size is n_base + 256.
constexpr int32_t kSpecialSlots = 258;
constexpr int32_t kModelVocabExtra = 256;

struct LoadOptions {
    Pattern pattern = Pattern::kimi;   // o200k only for testing the BPE against o200k_base
};

// A vocabulary as a GGUF file carries it (tokenizer.ggml.*, llama.cpp's converter for
// Kimi): every token by id, base tokens in GPT-2's byte-to-unicode spelling with rank = id,
// then the special tokens (type CONTROL, their text as is) and unused slots (type UNUSED).
struct GgufVocab {
    std::string source;                               // names the file in errors
    std::string model, pre;                           // tokenizer.ggml.model ("gpt2"), .pre ("kimi-k2")
    std::vector<std::string> tokens;                  // tokenizer.ggml.tokens
    std::vector<int32_t> types;                       // tokenizer.ggml.token_type (1 normal, 3 control, 5 unused, ...)
    int64_t bos = -1, eos = -1, pad = -1, unk = -1;   // tokenizer.ggml.*_token_id, -1 when absent
    std::string chat_template;                        // tokenizer.chat_template (shown, never executed)
};

// A rendered prompt (src/chat/ formats): the text and its token ids.
struct ChatPrompt {
    std::string text;
    std::vector<int32_t> ids;
};

class Tokenizer {
public:
    struct Impl;

    // Throws kimi::Error naming the file and line for anything malformed.
    static Tokenizer load(const std::string& dir, const LoadOptions& opts = {});
    // The same tokenizer from a GGUF vocabulary (pre-tokenizer "kimi-k2" only): encodes byte
    // for byte as the tiktoken files of the same vocabulary. Throws kimi::Error naming the
    // source and the token.
    static Tokenizer from_gguf(const GgufVocab& v);

    // allow_special: literal special-token text becomes the control token (Kimi's default,
    // `--special all`); false: it is encoded as plain text (`--special none`).
    std::vector<int32_t> encode(std::string_view text, bool allow_special = true) const;
    void encode_append(std::string_view text, bool allow_special, std::vector<int32_t>& out) const;

    std::string decode(std::span<const int32_t> ids) const;         // exact bytes
    std::string decode_lossy(std::span<const int32_t> ids) const;   // invalid UTF-8 -> U+FFFD
    std::string_view token_bytes(int32_t id) const;                 // throws if out of range

    int32_t n_vocab() const;   // n_base + kSpecialSlots (tiktoken's n_vocab)
    int32_t n_base() const;    // number of ranks in tiktoken.model
    Pattern pattern() const;

    std::optional<int32_t> special_id(std::string_view text) const;
    bool is_special(int32_t id) const;
    int32_t bos_id() const;   // -1 if the config names none
    int32_t eos_id() const;
    int32_t pad_id() const;
    int32_t unk_id() const;
    std::vector<int32_t> stop_ids()
        const;   // end of turn (<|im_end|> or K3's <|end_of_msg|>) then [EOS], those present
    const std::string& chat_template() const;   // the Jinja text shipped in the config (may be empty)

    // Emits text only at UTF-8 boundaries: never splits a multi-byte character across pieces;
    // U+FFFD only for bytes that cannot become valid. concat(push...) + flush() == decode_lossy.
    class StreamDecoder {
    public:
        explicit StreamDecoder(const Tokenizer& tok);
        std::string push(int32_t id);
        std::string flush();
        void push(int32_t id, std::string& out);   // appends to out (no allocation if it has room)
        void flush(std::string& out);

    private:
        std::shared_ptr<const Impl> impl_;
        std::string pending_;
    };

private:
    explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
    std::shared_ptr<const Impl> impl_;
};

}   // namespace kimi::tok

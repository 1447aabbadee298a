// libFuzzer target: the tokenizer (src/tokenizer) on arbitrary bytes, with the synthetic
// Kimi-layout tokenizer (8192 ranks; Kimi's and o200k's split patterns), and its loader.
// Input: byte 0 picks the mode, the rest is text (or token ids, two bytes each, or a file).
//   bit 0     allow_special (literal special-token text becomes the control token)
//   bit 1     the o200k split pattern instead of Kimi's
//   bit 2     decode mode: the rest is token ids (little-endian 16-bit, some out of range)
//   bit 3     load mode: the rest is tokenizer_config.json (bit 4 clear; next to a byte-level
//             tiktoken.model) or tiktoken.model (bit 4 set; next to "{}"), loaded with
//             Tokenizer::load from a scratch folder, then a fixed text encoded with it
// Not here: encode's cuts of texts over 25,000 characters (such an input costs ~10 ms, and
// those the fuzzer kept took over the corpus at ~200 runs/s); tokenizer_tests cover them.
// Checked beyond "no crash": the pre-tokenizer's pieces tile the text; every id is in range
// (no special id unless allowed); decode(encode(text)) == text; encode_append == encode;
// decode_lossy is valid UTF-8; the stream decoder's pieces join to decode_lossy.
// Clean errors: kimi::Error (decoding an out-of-range id, a malformed tokenizer file).
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "fuzz_util.h"
#include "core/base64.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/unicode.h"

namespace {

using kimi::fuzz::Input;
using kimi::tok::Tokenizer;

struct Tokenizers {
    Tokenizer kimi, o200k;
};

// Both written once: the same ranks loaded with each split pattern.
const Tokenizer& tokenizer(bool o200k) {
    static const Tokenizers both = [] {
        const std::string dir = kimi::fuzz::scratch_dir() + "/tok-fuzz";
        kimi::tok::write_synthetic_tokenizer(dir, 8192, 11);
        kimi::tok::LoadOptions o;
        o.pattern = kimi::tok::Pattern::o200k;
        Tokenizers t{Tokenizer::load(dir), Tokenizer::load(dir, o)};
        std::filesystem::remove_all(dir);
        return t;
    }();
    return o200k ? both.o200k : both.kimi;
}

void check_stream(const Tokenizer& tok, const std::vector<int32_t>& ids) {
    const std::string lossy = tok.decode_lossy(ids);
    fuzz_assert(kimi::tok::utf8_valid(lossy), "decode_lossy is not valid UTF-8");
    Tokenizer::StreamDecoder sd(tok);
    std::string streamed;
    for (int32_t id : ids) {
        const std::string piece = sd.push(id);
        fuzz_assert(kimi::tok::utf8_valid(piece), "a stream piece is not valid UTF-8");
        streamed += piece;
    }
    streamed += sd.flush();
    fuzz_assert(streamed == lossy, "stream decoder != decode_lossy");
}

void check_split(std::string_view text, kimi::tok::Pattern p) {
    kimi::tok::Splitter sp(text, p);
    std::string_view piece;
    size_t at = 0;
    while (sp.next(piece)) {
        fuzz_assert(!piece.empty(), "empty pre-token");
        fuzz_assert(piece.data() == text.data() + at, "pre-tokens do not tile the text");
        at += piece.size();
    }
    fuzz_assert(at == text.size(), "pre-tokens do not cover the text");
}

void encode_mode(const Tokenizer& tok, std::string_view text, bool allow_special) {
    check_split(text, tok.pattern());
    const std::vector<int32_t> ids = tok.encode(text, allow_special);
    for (int32_t id : ids) {
        fuzz_assert(id >= 0 && id < tok.n_vocab(), "id out of range: " + std::to_string(id));
        fuzz_assert(allow_special || !tok.is_special(id), "special id without allow_special: " + std::to_string(id));
    }
    fuzz_assert(tok.decode(ids) == text, "decode(encode(text)) != text");
    std::vector<int32_t> appended = {0};
    tok.encode_append(text, allow_special, appended);
    fuzz_assert(appended.size() == ids.size() + 1 && std::equal(ids.begin(), ids.end(), appended.begin() + 1),
                "encode_append != encode");
    check_stream(tok, ids);
}

void decode_mode(const Tokenizer& tok, Input& in) {
    std::vector<int32_t> ids;
    bool out_of_range = false;
    while (in.size() >= 2) {
        const uint32_t v = uint32_t(in.byte()) | uint32_t(in.byte()) << 8;
        // mostly in range; now and then −1 or n_vocab (must be refused cleanly)
        int32_t id = int32_t(v % uint32_t(tok.n_vocab() + 2)) - 1;
        out_of_range |= id < 0 || id >= tok.n_vocab();
        ids.push_back(id);
    }
    try {
        const std::string bytes = tok.decode(ids);
        fuzz_assert(!out_of_range, "decode accepted an out-of-range id");
        for (int32_t id : ids) (void)tok.token_bytes(id);
        check_stream(tok, ids);
        // Valid UTF-8 text re-encodes to text that decodes to the same bytes.
        if (kimi::tok::utf8_valid(bytes))
            fuzz_assert(tok.decode(tok.encode(bytes, true)) == bytes, "decode(encode(decode(ids)))");
    } catch (const kimi::Error&) {
        fuzz_assert(out_of_range, "decode refused in-range ids");
    }
}

void write(const std::string& path, std::string_view text) {
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(text.data(), std::streamsize(text.size()));
}

void load_mode(Input& in, bool model_file) {
    static const std::string dir = kimi::fuzz::scratch_dir() + "/load";
    static const std::string byte_model = [] {
        std::filesystem::create_directories(dir);
        std::string m;
        for (int b = 0; b < 256; ++b)
            m += kimi::base64_encode(std::string(1, char(b))) + " " + std::to_string(b) + "\n";
        return m;
    }();
    const std::string_view file = in.rest();
    write(dir + "/tiktoken.model", model_file ? file : byte_model);
    write(dir + "/tokenizer_config.json", model_file ? "{}" : file);
    try {
        const Tokenizer tok = Tokenizer::load(dir);
        for (bool allow : {true, false})
            encode_mode(tok, "Hi <|im_end|>[EOS] <|reserved_token_300|> 123 \xe4\xbd\xa0\xe5\xa5\xbd!\n", allow);
        for (int32_t id : {tok.bos_id(), tok.eos_id(), tok.pad_id(), tok.unk_id()})
            fuzz_assert(id == -1 || tok.is_special(id), "bos/eos/pad/unk is not a special id");
        (void)tok.stop_ids();
    } catch (const kimi::Error& e) {
        kimi::fuzz::note_refusal(e.what());
    }
}

}   // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    Input in(data, size);
    const uint8_t mode = in.byte();
    if (mode & 8) {
        load_mode(in, mode & 16);
        return 0;
    }
    const Tokenizer& tok = tokenizer(mode & 2);
    if (mode & 4) {
        decode_mode(tok, in);
        return 0;
    }
    encode_mode(tok, in.rest(), mode & 1);
    return 0;
}

// tokenizer_tool: helpers for the tokenizer ctest scripts.
//   tokenizer_tool synth DIR N_BASE SEED        write a synthetic tokenizer (and time it)
//   tokenizer_tool stream-check DIR CORPUS.jsonl
//       for every line: decode(encode(s)) == s (both special modes), the streamed pieces
//       concatenate to decode_lossy(ids) == s, and every piece is valid UTF-8
//   tokenizer_tool pieces-vocab OUT_DIR CORPUS.jsonl...
//       a Kimi-layout tokenizer whose ranks are the 256 bytes plus every distinct pre-token
//       (Kimi pat_str, after the wrapper's 400k/25k cuts) of the corpora, so that encoding
//       yields exactly the pre-tokens: compared with the oracle, any boundary difference shows
//   tokenizer_tool lossy DIR BYTES.hex
//       for every line (hex bytes): encode them (exact round trip required), then print
//       "<hex of decode_lossy(ids)> <hex of the concatenated streamed pieces>"
#include <chrono>
#include <filesystem>
#include <set>
#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/base64.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/synthetic.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

int synth(const std::string& dir, int32_t n, uint64_t seed) {
    const auto t0 = std::chrono::steady_clock::now();
    kimi::tok::write_synthetic_tokenizer(dir, n, seed);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("wrote %s: %d base tokens in %.2f s\n", dir.c_str(), n, s);
    return 0;
}

int stream_check(const std::string& dir, const std::string& corpus) {
    const auto tok = kimi::tok::Tokenizer::load(dir);
    std::ifstream in(corpus, std::ios::binary);
    if (!in) throw kimi::Error("cannot open " + corpus);
    std::string line;
    size_t n = 0, bad = 0, pieces = 0;
    while (std::getline(in, line)) {
        ++n;
        const std::string s = nlohmann::json::parse(line).get<std::string>();
        for (bool special : {true, false}) {
            const auto ids = tok.encode(s, special);
            if (tok.decode(ids) != s) {
                if (++bad < 5) std::printf("line %zu (special=%d): decode(encode(s)) != s\n", n, int(special));
                continue;
            }
            kimi::tok::Tokenizer::StreamDecoder sd(tok);
            std::string joined;
            bool pieces_ok = true;
            for (int32_t id : ids) {
                const std::string p = sd.push(id);
                pieces_ok = pieces_ok && kimi::tok::utf8_valid(p);
                pieces += !p.empty();
                joined += p;
            }
            const std::string tail = sd.flush();
            pieces_ok = pieces_ok && kimi::tok::utf8_valid(tail);
            joined += tail;
            if (!pieces_ok || joined != s || tok.decode_lossy(ids) != s) {
                if (++bad < 5)
                    std::printf("line %zu (special=%d): streamed text differs or a piece is invalid UTF-8\n", n,
                                int(special));
            }
        }
    }
    std::printf("stream-check: %zu lines, %zu non-empty pieces, %zu failures\n", n, pieces, bad);
    return bad == 0 && n > 0 ? 0 : 1;
}

// tokenization_kimi.py's cuts: 400,000-code-point windows, then runs of <= 25,000
// str.isspace() / non-space code points (an independent re-implementation for this tool).
std::vector<std::string> python_chunks(const std::string& text) {
    std::vector<std::string> out;
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    std::vector<size_t> starts;   // byte offset of each code point
    for (size_t i = 0; i < text.size();) {
        starts.push_back(i);
        uint32_t cp;
        i += size_t(kimi::tok::utf8_decode(s + i, s + text.size(), cp));
    }
    starts.push_back(text.size());
    const size_t n = starts.size() - 1;
    for (size_t w = 0; w < n; w += 400000) {
        const size_t we = std::min(n, w + 400000);
        size_t slice = w, run = 0;
        bool cur = false;
        for (size_t i = w; i < we; ++i) {
            uint32_t cp;
            kimi::tok::utf8_decode(s + starts[i], s + text.size(), cp);
            const bool sp = kimi::tok::py_isspace(cp);
            if (i == w) cur = sp;
            if (sp != cur) {
                run = 1;
                cur = sp;
            } else if (++run > 25000) {
                out.push_back(text.substr(starts[slice], starts[i] - starts[slice]));
                slice = i;
                run = 1;
            }
        }
        out.push_back(text.substr(starts[slice], starts[we] - starts[slice]));
    }
    return out;
}

int pieces_vocab(const std::string& dir, const std::vector<std::string>& corpora) {
    std::set<std::string> pieces;
    for (const auto& path : corpora) {
        std::ifstream in(path, std::ios::binary);
        if (!in) throw kimi::Error("cannot open " + path);
        std::string line;
        while (std::getline(in, line)) {
            for (const auto& chunk : python_chunks(nlohmann::json::parse(line).get<std::string>())) {
                kimi::tok::Splitter sp(chunk, kimi::tok::Pattern::kimi);
                std::string_view piece;
                while (sp.next(piece))
                    if (piece.size() > 1) pieces.emplace(piece);
            }
        }
    }
    std::filesystem::create_directories(dir);
    std::string model;
    for (int b = 0; b < 256; ++b)
        model += kimi::base64_encode(std::string(1, char(b))) + " " + std::to_string(b) + "\n";
    int32_t rank = 256;
    for (const auto& p : pieces) model += kimi::base64_encode(p) + " " + std::to_string(rank++) + "\n";
    std::ofstream(dir + "/tiktoken.model", std::ios::binary) << model;
    std::ofstream(dir + "/tokenizer_config.json") << "{}\n";
    std::printf("pieces-vocab: %d ranks in %s\n", rank, dir.c_str());
    return 0;
}

std::string hex(const std::string& s) {
    static const char* d = "0123456789abcdef";
    std::string out;
    for (unsigned char c : s) {
        out += d[c >> 4];
        out += d[c & 15];
    }
    return out;
}

int lossy(const std::string& dir, const std::string& path) {
    const auto tok = kimi::tok::Tokenizer::load(dir);
    std::ifstream in(path);
    if (!in) throw kimi::Error("cannot open " + path);
    std::string line, out;
    while (std::getline(in, line)) {
        std::string bytes;
        for (size_t i = 0; i + 1 < line.size(); i += 2) bytes += char(std::stoi(line.substr(i, 2), nullptr, 16));
        const auto ids = tok.encode(bytes, false);
        if (tok.decode(ids) != bytes) throw kimi::Error("round trip failed for " + line);
        kimi::tok::Tokenizer::StreamDecoder sd(tok);
        std::string streamed;
        for (int32_t id : ids) streamed += sd.push(id);
        streamed += sd.flush();
        out += hex(tok.decode_lossy(ids)) + " " + hex(streamed) + "\n";
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
}

}   // namespace

int main(int argc, char** argv) {
    try {
        const std::string cmd = argc > 1 ? argv[1] : "";
        if (cmd == "synth" && argc == 5) return synth(argv[2], int32_t(std::stol(argv[3])), std::stoull(argv[4]));
        if (cmd == "stream-check" && argc == 4) return stream_check(argv[2], argv[3]);
        if (cmd == "lossy" && argc == 4) return lossy(argv[2], argv[3]);
        if (cmd == "pieces-vocab" && argc >= 4)
            return pieces_vocab(argv[2], std::vector<std::string>(argv + 3, argv + argc));
        std::fprintf(stderr,
                     "usage: tokenizer_tool synth DIR N_BASE SEED | stream-check DIR CORPUS.jsonl | lossy DIR "
                     "BYTES.hex | pieces-vocab OUT_DIR CORPUS.jsonl...\n");
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tokenizer_tool: %s\n", e.what());
        return 1;
    }
}

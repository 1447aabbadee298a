// tokenizer_tool: helpers for the tokenizer ctest scripts.
//   tokenizer_tool synth DIR N_BASE SEED        write a synthetic tokenizer (and time it)
//   tokenizer_tool stream-check DIR CORPUS.jsonl
//       for every line: decode(encode(s)) == s (both special modes), the streamed pieces
//       concatenate to decode_lossy(ids) == s, and every piece is valid UTF-8
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
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
                if (++bad < 5) std::printf("line %zu (special=%d): streamed text differs or a piece is invalid UTF-8\n", n, int(special));
            }
        }
    }
    std::printf("stream-check: %zu lines, %zu non-empty pieces, %zu failures\n", n, pieces, bad);
    return bad == 0 && n > 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const std::string cmd = argc > 1 ? argv[1] : "";
        if (cmd == "synth" && argc == 5) return synth(argv[2], int32_t(std::stol(argv[3])), std::stoull(argv[4]));
        if (cmd == "stream-check" && argc == 4) return stream_check(argv[2], argv[3]);
        std::fprintf(stderr, "usage: tokenizer_tool synth DIR N_BASE SEED | stream-check DIR CORPUS.jsonl\n");
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tokenizer_tool: %s\n", e.what());
        return 1;
    }
}

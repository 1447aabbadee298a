// llama_logits: the logits llama.cpp computes for one token sequence, for the GGUF accuracy
// test (gguf_accuracy_test.py). Test tooling only: built by tools/llama_cpp/build.sh
// against the libllama it builds from the bundled sources; the engine never links llama.cpp.
//
//   llama_logits MODEL.gguf 1,5,9,... OUT.f32 [threads]
//
// OUT gets little-endian float32 [T, n_vocab]: the logits of every position, from one
// llama_decode of the whole sequence (CPU only).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "llama.h"

namespace {

std::vector<llama_token> parse_tokens(const std::string& s) {
    std::vector<llama_token> out;
    size_t pos = 0;
    while (pos < s.size()) {
        size_t end = s.find(',', pos);
        if (end == std::string::npos) end = s.size();
        out.push_back(static_cast<llama_token>(std::stol(s.substr(pos, end - pos))));
        pos = end + 1;
    }
    return out;
}

void quiet_log(ggml_log_level level, const char* text, void*) {
    if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

}   // namespace

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: llama_logits MODEL.gguf TOKENS OUT.f32 [threads]\n");
        return 2;
    }
    const std::vector<llama_token> tokens = parse_tokens(argv[2]);
    const int threads = argc > 4 ? std::atoi(argv[4]) : 2;
    llama_log_set(quiet_log, nullptr);
    llama_backend_init();

    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model* model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        std::fprintf(stderr, "llama_logits: cannot load %s\n", argv[1]);
        return 1;
    }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = static_cast<uint32_t>(tokens.size() + 16);
    cp.n_batch = static_cast<uint32_t>(tokens.size());
    cp.n_ubatch = static_cast<uint32_t>(tokens.size());
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        std::fprintf(stderr, "llama_logits: cannot create a context\n");
        return 1;
    }
    llama_batch batch = llama_batch_init(static_cast<int32_t>(tokens.size()), 0, 1);
    for (size_t i = 0; i < tokens.size(); ++i) {
        batch.token[i] = tokens[i];
        batch.pos[i] = static_cast<llama_pos>(i);
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = static_cast<int32_t>(tokens.size());
    if (llama_decode(ctx, batch) != 0) {
        std::fprintf(stderr, "llama_logits: llama_decode failed\n");
        return 1;
    }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    FILE* out = std::fopen(argv[3], "wb");
    if (!out) {
        std::fprintf(stderr, "llama_logits: cannot write %s\n", argv[3]);
        return 1;
    }
    for (size_t i = 0; i < tokens.size(); ++i) {
        const float* row = llama_get_logits_ith(ctx, static_cast<int32_t>(i));
        if (!row || std::fwrite(row, sizeof(float), n_vocab, out) != static_cast<size_t>(n_vocab)) {
            std::fprintf(stderr, "llama_logits: no logits for position %zu\n", i);
            return 1;
        }
    }
    std::fclose(out);
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}

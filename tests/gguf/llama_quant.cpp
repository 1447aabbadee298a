// llama_quant: llama.cpp's quantizer (llama_model_quantize, the function its llama-quantize tool
// runs) on a GGUF, for the GGUF accuracy test (gguf_accuracy_test.py). Test tooling only: built by
// tools/llama_cpp/build.sh against the libllama it builds from the bundled sources, without
// llama.cpp's `common` library that the llama-quantize command line pulls in.
//
//   llama_quant IN.gguf OUT.gguf TYPE [--imatrix FILE.dat] [--threads N]
//
// TYPE as llama-quantize spells it (Q8_0, Q4_K_M, Q2_K, IQ2_XXS, ...). The importance matrix is
// llama.cpp's legacy .dat format (entries of name, ncall, values), normalized by ncall as
// llama-quantize does; the defaults are llama_model_quantize_default_params(), as there.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "llama.h"

namespace {

struct TypeName {
    const char* name;
    llama_ftype ftype;
};
const TypeName kTypes[] = {
    {"Q4_0", LLAMA_FTYPE_MOSTLY_Q4_0},     {"Q4_1", LLAMA_FTYPE_MOSTLY_Q4_1},
    {"Q5_0", LLAMA_FTYPE_MOSTLY_Q5_0},     {"Q5_1", LLAMA_FTYPE_MOSTLY_Q5_1},
    {"Q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},     {"Q2_K", LLAMA_FTYPE_MOSTLY_Q2_K},
    {"Q2_K_S", LLAMA_FTYPE_MOSTLY_Q2_K_S}, {"Q3_K_S", LLAMA_FTYPE_MOSTLY_Q3_K_S},
    {"Q3_K_M", LLAMA_FTYPE_MOSTLY_Q3_K_M}, {"Q3_K_L", LLAMA_FTYPE_MOSTLY_Q3_K_L},
    {"Q4_K_S", LLAMA_FTYPE_MOSTLY_Q4_K_S}, {"Q4_K_M", LLAMA_FTYPE_MOSTLY_Q4_K_M},
    {"Q5_K_S", LLAMA_FTYPE_MOSTLY_Q5_K_S}, {"Q5_K_M", LLAMA_FTYPE_MOSTLY_Q5_K_M},
    {"Q6_K", LLAMA_FTYPE_MOSTLY_Q6_K},     {"IQ2_XXS", LLAMA_FTYPE_MOSTLY_IQ2_XXS},
    {"IQ2_XS", LLAMA_FTYPE_MOSTLY_IQ2_XS}, {"IQ2_S", LLAMA_FTYPE_MOSTLY_IQ2_S},
    {"IQ2_M", LLAMA_FTYPE_MOSTLY_IQ2_M},   {"IQ3_XXS", LLAMA_FTYPE_MOSTLY_IQ3_XXS},
    {"IQ3_S", LLAMA_FTYPE_MOSTLY_IQ3_S},   {"IQ3_M", LLAMA_FTYPE_MOSTLY_IQ3_M},
    {"IQ1_S", LLAMA_FTYPE_MOSTLY_IQ1_S},   {"IQ1_M", LLAMA_FTYPE_MOSTLY_IQ1_M},
    {"IQ4_NL", LLAMA_FTYPE_MOSTLY_IQ4_NL}, {"IQ4_XS", LLAMA_FTYPE_MOSTLY_IQ4_XS},
    {"TQ1_0", LLAMA_FTYPE_MOSTLY_TQ1_0},   {"TQ2_0", LLAMA_FTYPE_MOSTLY_TQ2_0},
};

struct Entry {
    std::string name;
    std::vector<float> values;
};

bool read_imatrix(const char* path, std::vector<Entry>& out) {
    std::ifstream in(path, std::ios::binary);
    int32_t n = 0;
    if (!in.read(reinterpret_cast<char*>(&n), 4) || n < 1) return false;
    for (int32_t i = 0; i < n; ++i) {
        int32_t len = 0, ncall = 0, nval = 0;
        if (!in.read(reinterpret_cast<char*>(&len), 4) || len < 1 || len > 4096) return false;
        Entry e;
        e.name.resize(size_t(len));
        if (!in.read(e.name.data(), len) || !in.read(reinterpret_cast<char*>(&ncall), 4) ||
            !in.read(reinterpret_cast<char*>(&nval), 4) || nval < 1)
            return false;
        e.values.resize(size_t(nval));
        if (!in.read(reinterpret_cast<char*>(e.values.data()), std::streamsize(nval) * 4)) return false;
        if (ncall > 0)
            for (float& v : e.values) v /= float(ncall);
        out.push_back(std::move(e));
    }
    return true;
}

void quiet_log(ggml_log_level level, const char* text, void*) {
    if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

}   // namespace

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: llama_quant IN.gguf OUT.gguf TYPE [--imatrix FILE.dat] [--threads N]\n");
        return 2;
    }
    llama_model_quantize_params params = llama_model_quantize_default_params();
    const TypeName* type = nullptr;
    for (const TypeName& t : kTypes)
        if (std::strcmp(t.name, argv[3]) == 0) type = &t;
    if (!type) {
        std::fprintf(stderr, "llama_quant: unknown type %s\n", argv[3]);
        return 2;
    }
    params.ftype = type->ftype;
    std::vector<Entry> entries;
    for (int i = 4; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--imatrix") == 0) {
            if (!read_imatrix(argv[i + 1], entries)) {
                std::fprintf(stderr, "llama_quant: cannot read the importance matrix %s\n", argv[i + 1]);
                return 1;
            }
        } else if (std::strcmp(argv[i], "--threads") == 0) {
            params.nthread = std::atoi(argv[i + 1]);
        } else {
            std::fprintf(stderr, "llama_quant: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    std::vector<llama_model_imatrix_data> imatrix;
    for (const Entry& e : entries) imatrix.push_back({e.name.c_str(), e.values.data(), e.values.size()});
    if (!imatrix.empty()) {
        imatrix.push_back({nullptr, nullptr, 0});
        params.imatrix = imatrix.data();
    }
    llama_log_set(quiet_log, nullptr);
    llama_backend_init();
    const uint32_t rc = llama_model_quantize(argv[1], argv[2], &params);
    llama_backend_free();
    if (rc != 0) {
        std::fprintf(stderr, "llama_quant: quantizing %s to %s failed\n", argv[1], argv[3]);
        return 1;
    }
    return 0;
}

// gguf_dequant_dump TYPE_NAME IN.bin OUT.f32: decodes the raw ggml blocks of IN.bin (type
// TYPE_NAME as dtype_name spells it: Q4_K, IQ2_XXS, MXFP4_GGML, ...) with dequantize_blocks and
// writes the values as little-endian f32. Used by dequant_oracle_test.py, which compares them
// with gguf-py's dequantizers.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/quant_blocks.h"

namespace {

std::vector<char> read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw kimi::Error("cannot open " + path);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw kimi::Error("cannot read " + path);
    return bytes;
}

void write_f32_le(const std::string& path, const std::vector<float>& values) {
    std::vector<unsigned char> bytes(values.size() * 4);
    for (size_t i = 0; i < values.size(); ++i) {
        uint32_t u;
        std::memcpy(&u, &values[i], 4);
        for (int k = 0; k < 4; ++k) bytes[4 * i + size_t(k)] = static_cast<unsigned char>(u >> (8 * k));
    }
    std::ofstream out(path, std::ios::binary);
    if (!out) throw kimi::Error("cannot create " + path);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    if (!out) throw kimi::Error("cannot write " + path);
}

int run(int argc, char** argv) {
    if (argc != 4) throw kimi::Error("usage: gguf_dequant_dump TYPE_NAME IN.bin OUT.f32");
    kimi::DType t;
    if (!kimi::dtype_from_name(argv[1], t) || !kimi::is_block_quant(t))
        throw kimi::Error(std::string("unknown block type '") + argv[1] + "' (expected a ggml name such as Q4_K)");
    const std::vector<char> raw = read_all(argv[2]);
    const kimi::BlockShape block = kimi::dtype_block(t);
    if (raw.size() % size_t(block.bytes) != 0)
        throw kimi::Error(std::string(argv[2]) + ": " + std::to_string(raw.size()) +
                          " bytes is not a whole number of " + std::to_string(block.bytes) + "-byte " + argv[1] +
                          " blocks");
    const int64_t n = int64_t(raw.size()) / block.bytes * block.elems;
    std::vector<float> values(static_cast<size_t>(n));
    kimi::dequantize_blocks(t, raw.data(), values.data(), n);
    write_f32_le(argv[3], values);
    return 0;
}

}   // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "gguf_dequant_dump: %s\n", e.what());
        return 1;
    }
}

// libFuzzer target: the GGUF container reader (src/checkpoint/gguf_file.cpp).
// Input: the whole file image, parsed from memory (parse_gguf, what GgufFile runs on the mapped
// bytes); the bytes are copied to a buffer of exactly their size, so a read past the end is an
// ASan report.
// Checked beyond "no crash": the alignment is a nonzero power of two and the data section
// starts on it inside the file; every tensor has 1..4 dims, a known ggml type whose block divides
// ne[0], nbytes = the blocks × the block's bytes, an aligned offset, data inside the data
// section, no overlap with another tensor, and (a type kimi.cpp reads) a Tensor view of the same
// bytes with the reversed shape; numeric metadata arrays lie inside the file.
// Clean errors: kimi::Error, on one line.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "checkpoint/gguf_file.h"
#include "core/error.h"
#include "fuzz_util.h"

namespace {

uint64_t elem_size(kimi::GgufType t) {
    switch (t) {
        case kimi::GgufType::kU8:
        case kimi::GgufType::kI8:
        case kimi::GgufType::kBool: return 1;
        case kimi::GgufType::kU16:
        case kimi::GgufType::kI16: return 2;
        case kimi::GgufType::kU32:
        case kimi::GgufType::kI32:
        case kimi::GgufType::kF32: return 4;
        default: return 8;
    }
}

void check(const kimi::GgufContents& c, const unsigned char* file, size_t size) {
    fuzz_assert(c.version == 2 || c.version == 3, "version");
    fuzz_assert(c.alignment && !(c.alignment & (c.alignment - 1)), "alignment");
    fuzz_assert(c.data_offset <= size, "data offset");
    fuzz_assert(c.tensors.empty() || c.data_offset % c.alignment == 0, "data section alignment");
    for (const auto& [key, v] : c.metadata) {
        fuzz_assert(!key.empty(), "empty key");
        if (v.type == kimi::GgufType::kArray && v.elem != kimi::GgufType::kString) {
            fuzz_assert(v.elem != kimi::GgufType::kArray, "nested array");
            fuzz_assert(v.raw >= file && uint64_t(v.raw - file) + v.count * elem_size(v.elem) <= size,
                        "array '" + key + "' outside the file");
        }
        if (v.type == kimi::GgufType::kArray && v.elem == kimi::GgufType::kString)
            fuzz_assert(v.strings.size() == v.count, "string array count");
    }
    std::vector<std::pair<const unsigned char*, const unsigned char*>> spans;
    for (const auto& t : c.tensors) {
        fuzz_assert(!t.name.empty() && t.name.size() < 64, "name length");
        fuzz_assert(t.ne.size() >= 1 && t.ne.size() <= 4, "n_dims");
        kimi::BlockShape b{};
        fuzz_assert(kimi::ggml_type_block(t.ggml_type, b), "unknown type accepted");
        fuzz_assert(t.ne[0] % b.elems == 0, "ne[0] not whole blocks");
        uint64_t numel = 1;
        for (int64_t n : t.ne) {
            fuzz_assert(n >= 0, "negative dim");
            numel *= uint64_t(n);
        }
        fuzz_assert(t.nbytes == numel / uint64_t(b.elems) * uint64_t(b.bytes), "nbytes");
        fuzz_assert(t.offset % c.alignment == 0, "offset alignment");
        fuzz_assert(t.data == file + c.data_offset + t.offset, "data pointer");
        fuzz_assert(t.offset <= size - c.data_offset && t.nbytes <= size - c.data_offset - t.offset,
                    "tensor '" + t.name + "' outside the file");
        if (t.nbytes) spans.push_back({t.data, t.data + t.nbytes});
        kimi::DType d;
        fuzz_assert(kimi::ggml_type_dtype(t.ggml_type, d) == t.supported, "supported flag");
        if (t.supported) {
            const kimi::Tensor x = t.tensor();
            fuzz_assert(x.rank == int(t.ne.size()) && x.dim(-1) == t.ne[0] && x.dim(0) == t.ne.back(), "shape");
            fuzz_assert(x.nbytes() == t.nbytes, "Tensor::nbytes");
        } else {
            try {
                (void)t.tensor();
                fuzz_assert(false, "unsupported type gave a Tensor");
            } catch (const kimi::Error&) {}
        }
    }
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i) fuzz_assert(spans[i].first >= spans[i - 1].second, "tensors overlap");
}

}   // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::vector<unsigned char> buf(data, data + size);   // exactly `size` bytes
    try {
        check(kimi::parse_gguf(buf.data(), buf.size(), "fuzz.gguf"), buf.data(), buf.size());
    } catch (const kimi::Error& e) {
        fuzz_assert(std::strchr(e.what(), '\n') == nullptr, e.what());   // one line
        kimi::fuzz::note_refusal(e.what());
    }
    return 0;
}

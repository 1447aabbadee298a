// Tensor: a cheap, copyable, non-owning view of contiguous row-major memory, shapes in
// PyTorch order (outermost first, rank ≤ 4). Who owns memory: WeightStore (mmaps, model
// lifetime), CacheStorage (engine lifetime), Arena (one forward step).
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/dtype.h"
#include "core/error.h"

namespace kimi {

struct Tensor {
    void* data = nullptr;
    DType dtype = DType::kF32;
    int rank = 0;
    std::array<int64_t, 4> shape{};
    const uint8_t* scale = nullptr;   // kMXFP4 only: [rows, cols / 32] E8M0 scale bytes

    Tensor() = default;
    Tensor(void* d, DType t, std::initializer_list<int64_t> dims) : data(d), dtype(t) {
        KIMI_CHECK(dims.size() <= 4, "rank > 4");
        for (int64_t v : dims) shape[rank++] = v;
    }

    bool defined() const { return data != nullptr; }
    int64_t dim(int i) const { return shape[i < 0 ? rank + i : i]; }
    int64_t numel() const {
        int64_t n = 1;
        for (int i = 0; i < rank; ++i) n *= shape[i];
        return n;
    }
    // Bytes of `data` (kMXFP4: the packed values, half a byte each; the scales are extra; a
    // block type: whole blocks, the innermost dimension a multiple of the block).
    size_t nbytes() const {
        const BlockShape b = dtype_block(dtype);
        return size_t(numel() / b.elems * b.bytes);
    }

    float* f32() const {
        KIMI_CHECK(dtype == DType::kF32, "tensor is not F32");
        return static_cast<float*>(data);
    }
    int32_t* i32() const {
        KIMI_CHECK(dtype == DType::kI32, "tensor is not I32");
        return static_cast<int32_t*>(data);
    }
    const uint16_t* u16() const {
        KIMI_CHECK(dtype == DType::kBF16 || dtype == DType::kF16, "tensor is not 16-bit");
        return static_cast<const uint16_t*>(data);
    }

    // Reshape (same element count).
    Tensor view(std::initializer_list<int64_t> dims) const {
        Tensor t(data, dtype, dims);
        KIMI_CHECK(t.numel() == numel(), "view: element count differs");
        return t;
    }
    // Rows [begin, end) of dimension 0.
    Tensor rows(int64_t begin, int64_t end) const {
        KIMI_CHECK(rank >= 1 && 0 <= begin && begin <= end && end <= shape[0], "rows: out of range");
        Tensor t = *this;
        t.shape[0] = end - begin;
        t.data = static_cast<char*>(data) + size_t(begin) * (nbytes() / size_t(shape[0] ? shape[0] : 1));
        if (scale) t.scale = scale + size_t(begin) * size_t(numel() / (shape[0] ? shape[0] : 1) / kMxfp4Group);
        return t;
    }
    Tensor row(int64_t i) const {   // drops dimension 0
        Tensor t = rows(i, i + 1);
        for (int d = 1; d < rank; ++d) t.shape[d - 1] = t.shape[d];
        t.rank = rank - 1;
        t.shape[t.rank] = 0;
        return t;
    }
};

std::string shape_str(const Tensor& t);   // "[4096, 2304]"

// Reads element i of a float-class tensor (F32/BF16/F16, MXFP4, a block type) as f32 — for
// load-time work and tests (a block type decodes the whole block each time).
float element_f32(const Tensor& t, int64_t i);
// Every element of t as f32, exactly, into out[numel] (block types decoded a block at a time).
void decode_f32(const Tensor& t, float* out);
// Row `row` of a matrix (rank ≥ 2: the innermost dimension is the row) as f32, into out[dim(-1)].
void decode_row_f32(const Tensor& t, int64_t row, float* out);

}   // namespace kimi

// Weight slices for tensor parallelism (see weight_shard.h).
#include "checkpoint/weight_shard.h"

#include <cstring>
#include <string>

#include "core/error.h"

namespace kimi {

dist::Range Shard::units(int64_t n) const {
    const int64_t g = n % kMxfp4Group == 0 && n / kMxfp4Group >= size ? kMxfp4Group : 1;
    const dist::Range r = dist::split(n / g, size, rank);
    return {r.begin * g, r.end * g};
}

Tensor shard_rows(const Tensor& w, int64_t r0, int64_t r1) {
    if (w.rank != 2 || r0 < 0 || r0 > r1 || r1 > w.dim(0))
        throw Error("shard_rows: rows [" + std::to_string(r0) + ", " + std::to_string(r1) + ") of " + shape_str(w));
    return w.rows(r0, r1);
}

Tensor shard_cols(WeightStore& store, const Tensor& w, int64_t c0, int64_t c1) {
    if (w.rank != 2 || c0 < 0 || c0 > c1 || c1 > w.dim(1))
        throw Error("shard_cols: columns [" + std::to_string(c0) + ", " + std::to_string(c1) + ") of " + shape_str(w));
    const int64_t rows = w.dim(0), cols = w.dim(1), n = c1 - c0;
    if (c0 == 0 && c1 == cols) return w;
    if (w.dtype == DType::kMXFP4) {
        if (c0 % kMxfp4Group != 0 || c1 % kMxfp4Group != 0)
            throw Error("shard_cols: an MXFP4 weight splits at multiples of 32 columns, not [" + std::to_string(c0) +
                        ", " + std::to_string(c1) + ")");
        Tensor t = store.new_like(DType::kMXFP4, {rows, n});
        const Tensor s = store.new_like(DType::kU8, {rows, n / kMxfp4Group});
        const auto* src = static_cast<const uint8_t*>(w.data);
        auto* dst = static_cast<uint8_t*>(t.data);
        auto* dscale = static_cast<uint8_t*>(s.data);
        for (int64_t r = 0; r < rows; ++r) {
            std::memcpy(dst + r * (n / 2), src + r * (cols / 2) + c0 / 2, size_t(n / 2));
            std::memcpy(dscale + r * (n / kMxfp4Group), w.scale + r * (cols / kMxfp4Group) + c0 / kMxfp4Group,
                        size_t(n / kMxfp4Group));
        }
        t.scale = dscale;
        return t;
    }
    // plain types: one element a "block"; GGUF block types split at whole blocks only
    const BlockShape b = dtype_block(w.dtype);
    if (c0 % b.elems != 0 || c1 % b.elems != 0)
        throw Error(std::string("shard_cols: a ") + dtype_name(w.dtype) + " weight splits at multiples of " +
                    std::to_string(b.elems) + " columns, not [" + std::to_string(c0) + ", " + std::to_string(c1) + ")");
    Tensor t = store.new_like(w.dtype, {rows, n});
    const size_t row_in = size_t(cols / b.elems * b.bytes), row_out = size_t(n / b.elems * b.bytes),
                 skip = size_t(c0 / b.elems * b.bytes);
    const auto* src = static_cast<const unsigned char*>(w.data);
    auto* dst = static_cast<unsigned char*>(t.data);
    for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + size_t(r) * row_out, src + size_t(r) * row_in + skip, row_out);
    return t;
}

}   // namespace kimi

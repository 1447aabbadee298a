// Helpers of the op tests (op_test*.cpp): tensors with their own storage, random inputs, and
// the kernel-vs-reference comparisons (which fail on any element a kernel did not write).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "backend/ref/ref_ops.h"
#include "core/rng.h"
#include "ops/ops.h"
#include "test_models.h"

namespace kimi::test {

// A denormal f32 as the zero of its sign (what vdpbf16ps and TDPBF16PS make of denormal inputs
// and sums): for the scalar renderings of the kernels' orders.
inline float flush_denormal(float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    if ((u & 0x7f800000u) == 0) u &= 0x80000000u;
    std::memcpy(&v, &u, 4);
    return v;
}

// A tensor with its own storage. With an Rng: normal values × scale (F32, BF16, F16), or for
// MXFP4 random nibbles under scale bytes 2^-9 .. 2^2 (scale unused). Without: F32 is all NaN,
// so an element that no kernel writes fails every comparison; I32 is -1, the rest zeros.
struct Buf {
    std::vector<unsigned char> bytes, scales;
    Tensor t;
    Buf(DType dt, std::initializer_list<int64_t> shape, Rng* r = nullptr, double scale = 1.0) {
        t = Tensor(nullptr, dt, shape);
        bytes.assign(t.nbytes() + 64, 0);
        t.data = bytes.data();
        if (dt == DType::kMXFP4) {
            scales.assign(size_t(t.numel() / kMxfp4Group), 127);
            t.scale = scales.data();
        }
        if (!r) {
            if (dt == DType::kF32) std::fill_n(t.f32(), t.numel(), std::numeric_limits<float>::quiet_NaN());
            if (dt == DType::kI32) std::fill_n(t.i32(), t.numel(), -1);
            return;
        }
        if (dt == DType::kMXFP4) {
            for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = uint8_t(r->below(256));
            for (auto& s : scales) s = uint8_t(118 + r->below(12));
            return;
        }
        for (int64_t i = 0; i < t.numel(); ++i) {
            const float v = float(r->normal() * scale);
            if (dt == DType::kF32)
                t.f32()[i] = v;
            else if (dt == DType::kBF16)
                static_cast<uint16_t*>(t.data)[i] = f32_to_bf16(v);
            else if (dt == DType::kF16)
                static_cast<uint16_t*>(t.data)[i] = f32_to_f16(v);
        }
    }
    // A copy with its own storage (in-place ops: the kernel and the reference each get one).
    Buf(const Buf& o) : bytes(o.bytes), scales(o.scales), t(o.t) {
        t.data = bytes.data();
        if (t.scale) t.scale = scales.data();
    }
    Buf& operator=(const Buf&) = delete;
    float* f() { return t.f32(); }
};

// max |a − b| / max(max |b|, floor): the error relative to the reference's scale; +infinity
// if an element of either is not finite (the inputs are finite, so that is an element never
// written, or a kernel gone wrong).
inline double rel_err(const float* a, const float* b, int64_t n, double floor = 1e-6) {
    double m = 0, d = 0;
    for (int64_t i = 0; i < n; ++i) {
        if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return std::numeric_limits<double>::infinity();
        m = std::max(m, double(std::fabs(b[i])));
        d = std::max(d, std::fabs(double(a[i]) - double(b[i])));
    }
    return d / std::max(m, floor);
}
inline double rel_err(const Tensor& a, const Tensor& b, double floor = 1e-6) {
    if (a.numel() != b.numel()) return std::numeric_limits<double>::infinity();
    return rel_err(a.f32(), b.f32(), a.numel(), floor);
}

// The same bytes (and element count).
inline bool same_bits(const Tensor& a, const Tensor& b) {
    return a.numel() == b.numel() && a.dtype == b.dtype && std::memcmp(a.data, b.data, a.nbytes()) == 0;
}

inline std::string precision_name(Precision p) { return p == Precision::kBF16 ? "bf16" : "f32"; }

// The dtypes of each kind of operand.
inline constexpr DType kMatmulWeightDtypes[] = {DType::kF32, DType::kBF16, DType::kF16, DType::kMXFP4};
inline constexpr DType kFloatDtypes[] = {DType::kF32, DType::kBF16, DType::kF16};
inline constexpr Precision kPrecisions[] = {Precision::kF32, Precision::kBF16};

}   // namespace kimi::test

// The AMX tile matrix product around its plan (amx_matmul_body.h): the activation panel, the
// emulated-tile instance (every machine; KIMI_ISA=amx-emulated runs the engine on it), the
// choice of the tiles (use_amx) with its start-up self-check, and the kernel matmul dispatches to.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "backend/cpu/amx_matmul_body.h"
#include "backend/cpu/amx_support.h"
#include "backend/cpu/amx_tile.h"

namespace kimi::cpu {

void pack_amx_panel(const uint16_t* xb, int64_t n_rows, int64_t in, uint16_t* panel) {
    const int64_t steps = (in + 31) / 32;
    for (int64_t j = 0; 16 * j < n_rows; ++j) {
        const int64_t nt = std::min<int64_t>(16, n_rows - 16 * j);
        uint16_t* blk = panel + j * steps * 512;
        for (int64_t s = 0; s < steps; ++s) {
            uint16_t* out = blk + s * 32 * nt;   // 16 pairs × nt tokens × 2
            for (int64_t k = 0; k < 16; ++k)
                for (int64_t t = 0; t < nt; ++t) {
                    const uint16_t* x = xb + (16 * j + t) * in;
                    const int64_t e = 32 * s + 2 * k;
                    out[(k * nt + t) * 2] = e < in ? x[e] : 0;
                    out[(k * nt + t) * 2 + 1] = e + 1 < in ? x[e + 1] : 0;
                }
        }
    }
}

namespace {

// The tiles emulated (amx_tile.h), with the shapes of the configuration.
struct EmuTiles {
    amx::Tile t[8];
    amx_body::Shape sh;
    int rows(int k) const { return k < 4 ? sh.m[k / 2] : k < 6 ? sh.m[k - 4] : 16; }
    int colsb(int k) const { return k < 4 ? 4 * sh.nt[k % 2] : k < 6 ? 64 : 4 * sh.nt[k - 6]; }
    void begin() {}
    void end() {}
    void configure(const amx_body::Shape& s) { sh = s; }
    template <int T>
    void load(const void* p, int64_t stride) {
        amx::tile_load(t[T], rows(T), colsb(T), p, stride);
    }
    template <int C, int A, int B>
    void dp() {
        amx::tdpbf16ps(t[C], t[A], t[B]);
    }
    void zero(const amx_body::Shape& s) {
        for (int c = 0; c < 4; ++c)
            if (s.m[c / 2] && s.nt[c % 2]) amx::tile_zero(t[c], rows(c), colsb(c));
    }
    void store(int c, float* p) { amx::tile_store(t[c], p, 64); }
    void prefetch_rows(const uint16_t*, int64_t, int) {}
};

// A product run on both instances must give the same bits: bf16 weights with a tail step and
// partial tiles, MXFP4 weights with every scale byte; values spanning the exponents the model
// meets, zeros and denormals included.
bool tiles_match_emulation(std::string& why) {
    std::mt19937 rng(44);
    const auto bf16 = [&] {
        const uint16_t e = uint16_t(rng() % 20 == 0 ? rng() % 3 : 110 + rng() % 30);   // a few denormals
        return uint16_t(((rng() & 1) << 15) | (e << 7) | (rng() & 127));
    };
    for (const DType dt : {DType::kBF16, DType::kMXFP4}) {
        const int64_t n = 37, out = 45, in = dt == DType::kBF16 ? 150 : 256;
        std::vector<uint16_t> xb(size_t(n * in)), panel(size_t(amx_panel_elems(n, in))), wb(size_t(out * in));
        std::vector<uint8_t> packed(size_t(out * in / 2)), scale(size_t(out * in / 32));
        for (auto& v : xb) v = bf16();
        for (auto& v : wb) v = bf16();
        for (auto& v : packed) v = uint8_t(rng());
        // scale bytes 0..139 (0 and 1 through the exact decode) and many near 2^0; none higher, where
        // sums could overflow to NaN, whose payload is no part of the order
        for (size_t i = 0; i < scale.size(); ++i) scale[i] = uint8_t(i % 7 == 0 ? i % 140 : 122 + rng() % 12);
        pack_amx_panel(xb.data(), n, in, panel.data());
        std::vector<float> y_hw(size_t(n * out)), y_emu(size_t(n * out));
        MatmulArgs a{nullptr, n,  in,          dt == DType::kBF16 ? static_cast<const void*>(wb.data()) : packed.data(),
                     dt,      in, y_hw.data(), out};
        a.w_scale = scale.data();
        a.xb = xb.data();
        a.xt = panel.data();
        amx_range_hw(a, 0, out, nullptr);
        a.y = y_emu.data();
        amx_range_emulated(a, 0, out, nullptr);
        if (std::memcmp(y_hw.data(), y_emu.data(), y_hw.size() * 4) != 0) {
            why = std::string("the tiles' TDPBF16PS does not give the documented order's bits (") + dtype_name(dt) +
                " self-check)";
            return false;
        }
    }
    return true;
}

const char* isa_env() {
    const char* e = std::getenv("KIMI_ISA");
    return e && *e ? e : nullptr;
}

}   // namespace

bool amx_tiles_emulated() {
    static const bool on = [] {
        const char* e = isa_env();
        return e && std::strcmp(e, "amx-emulated") == 0;
    }();
    return on;
}

namespace {
struct AmxChoice {
    bool on = false;
    std::string why_off;
};
const AmxChoice& amx_choice() {
    static const AmxChoice c = [] {
        AmxChoice r;
        if (amx_tiles_emulated()) {
            r.on = true;
            return r;
        }
        const char* e = isa_env();
        if (e && std::strcmp(e, "amx") != 0) {
            r.why_off = std::string("KIMI_ISA=") + e;
        } else if (!amx_support().usable) {
            r.why_off = amx_support().why_not;
        } else if (!use_avx512_bf16()) {
            r.why_off = "the AVX-512 BF16 kernels are off";
        } else if (!tiles_match_emulation(r.why_off)) {
            std::fprintf(stderr, "kimi: not using AMX: %s; the AVX-512 BF16 kernels run instead\n", r.why_off.c_str());
            return r;
        } else {
            r.on = true;
        }
        if (!r.on && e && std::strcmp(e, "amx") == 0)   // asked for by name: say why not
            std::fprintf(stderr, "kimi: KIMI_ISA=amx: not using AMX: %s\n", r.why_off.c_str());
        return r;
    }();
    return c;
}
}   // namespace

bool use_amx() { return amx_choice().on; }
const std::string& amx_why_off() { return amx_choice().why_off; }

std::string matmul_units() {
    if (use_amx())
        return amx_tiles_emulated() ? "amx-bf16 tiles, emulated (tile order)" : "amx-bf16 tiles (tile order)";
    switch (matmul_isa()) {
        case Isa::kAvx512: return use_avx512_bf16() ? "avx512-bf16 (lane order)" : "avx512";
        case Isa::kAvx2: return "avx2";
        default: return "scalar";
    }
}

void amx_range_emulated(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float*) {
    EmuTiles tl;
    amx_body::range(tl, a, o_begin, o_end);
}

void matmul_range_amx(const MatmulArgs& a, int64_t o_begin, int64_t o_end, float* scratch) {
    if (a.xt && (a.w_dtype == DType::kBF16 || a.w_dtype == DType::kMXFP4)) {
        if (amx_tiles_emulated()) return amx_range_emulated(a, o_begin, o_end, scratch);
        return amx_range_hw(a, o_begin, o_end, scratch);
    }
    vector_kernel()(a, o_begin, o_end, scratch);
}

}   // namespace kimi::cpu

#!/usr/bin/env python3
"""kimi's decoding of ggml's block-quantized types, bit for bit against gguf-py's.

    dequant_oracle_test.py --dump PATH/TO/gguf_dequant_dump --llama-cpp LLAMA_CPP_DIR

For every block type src/core/quant_blocks.cpp decodes, this writes raw blocks to a file,
decodes them with gguf_dequant_dump (kimi::dequantize_blocks) and compares the f32 values with
gguf.quants.dequantize from LLAMA_CPP_DIR/gguf-py by their bits (so NaN matches NaN of the same
bits, and -0 does not match +0). The blocks of each type:

  * random: a few hundred blocks of random bytes (numpy default_rng, fixed seed), their f16
    scale fields replaced by random finite halves;
  * codes: blocks that sweep, systematically, every quantized code of the type (every 2/3/4/5/6-
    bit code, every int8 of Q8_0, every 6-bit sub-scale and min of the k-quants, every int8
    scale of Q6_K), every E8M0 byte 0..255 of MXFP4 (each with all 16 FP4 codes), every grid
    index, sign index / sign byte and sub-scale of the IQ2/IQ3/IQ1 codebook types (with both
    delta signs for IQ1), every base-3 digit of TQ1_0 (every canonical byte, then every raw byte);
  * scales: the f16 scale fields set to the extremes (+-0, the smallest and largest subnormals,
    the smallest normal, +-65504, +-1, +-Inf, NaN of either sign and a signalling-NaN payload),
    on random payloads; for the types with two f16 fields (d and a min), every pair of them
    except a NaN with a NaN or an Inf. Those pairs meet two different NaNs in one + or - (an
    input NaN and one made by Inf * 0), and x86 then returns one of the two by operand order:
    which one differs between compilers for ggml's C, and even between calls for numpy (its
    SIMD and scalar loops order the operands differently), so no decoder can promise its bits.

gguf-py and ggml's C (ggml-quants.c dequantize_row_*) do the same f32 operations in the same
order (e.g. (d * sc) * q for Q6_K, (db * grid) * sign for the IQ types, dl * (grid + delta) for
IQ1), and gguf-py's hex-packed grids hold ggml's grid values, so gguf-py is the oracle, with one
exception, where ggml's C is the truth:

  * IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S with a NaN scale: ggml writes
    `db * grid[j] * (signs & kmask_iq2xs[j] ? -1.f : 1.f)`. Compiled with optimization (gcc
    -O3, gcc -O2 -march=native, clang -O3; checked on these blocks against ggml-quants.c
    itself) the multiply by -1.f becomes a negation, which flips a NaN's sign bit; numpy's
    multiply (as gcc -O0) keeps it. kimi flips the sign explicitly, as optimized ggml does. For these types the expected
    bits are gguf-py's with the sign bit of each NaN flipped where the value's sign factor is
    -1; the sign factors are read from gguf-py's decoding of the same blocks with the scale set
    to +1 (every grid value is positive, so the sign of that value is the sign factor).

(NaN bits are the compiler's business in ggml's C in one more place: ggml-quants.c built with
clang -O3 also rewrites Q2_K/Q4_K/Q5_K's `dl * q - ml` so that a NaN dmin comes out with its sign
flipped; built with gcc, at any -O level, it keeps it, as numpy and kimi do. Here kimi follows
the gcc build, ggml's usual one, and gguf-py.)
"""

import argparse
import os
import subprocess
import sys
import tempfile

os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
sys.dont_write_bytecode = True

import numpy as np  # noqa: E402

SEED = 20240611
N_RANDOM = 300

# Our name (dtype_name) -> (gguf-py GGMLQuantizationType name, elements per block, bytes per block,
# byte offsets of the block's f16 scale fields).
TYPES = {
    "Q4_0": ("Q4_0", 32, 18, [0]),
    "Q4_1": ("Q4_1", 32, 20, [0, 2]),
    "Q5_0": ("Q5_0", 32, 22, [0]),
    "Q5_1": ("Q5_1", 32, 24, [0, 2]),
    "Q8_0": ("Q8_0", 32, 34, [0]),
    "Q2_K": ("Q2_K", 256, 84, [80, 82]),
    "Q3_K": ("Q3_K", 256, 110, [108]),
    "Q4_K": ("Q4_K", 256, 144, [0, 2]),
    "Q5_K": ("Q5_K", 256, 176, [0, 2]),
    "Q6_K": ("Q6_K", 256, 210, [208]),
    "IQ4_NL": ("IQ4_NL", 32, 18, [0]),
    "IQ4_XS": ("IQ4_XS", 256, 136, [0]),
    "MXFP4_GGML": ("MXFP4", 32, 17, []),  # E8M0 scale byte, swept in full by the code blocks
    "IQ2_XXS": ("IQ2_XXS", 256, 66, [0]),
    "IQ2_XS": ("IQ2_XS", 256, 74, [0]),
    "IQ2_S": ("IQ2_S", 256, 82, [0]),
    "IQ3_XXS": ("IQ3_XXS", 256, 98, [0]),
    "IQ3_S": ("IQ3_S", 256, 110, [0]),
    "IQ1_S": ("IQ1_S", 256, 50, [0]),
    "IQ1_M": ("IQ1_M", 256, 56, []),  # d is split over the top nibbles of the 4 scale words
    "TQ1_0": ("TQ1_0", 256, 54, [52]),
    "TQ2_0": ("TQ2_0", 256, 66, [64]),
}

F16_SPECIAL = [
    0x0000, 0x8000,  # +0, -0
    0x0001, 0x8001,  # smallest subnormal, both signs
    0x03FF,          # largest subnormal
    0x0400,          # smallest normal
    0x7BFF, 0xFBFF,  # +-65504
    0x3C00, 0xBC00,  # +-1
    0x3555,          # 0.33325...
    0x7C00, 0xFC00,  # +-Inf
    0x7E00, 0xFE00,  # quiet NaN, both signs
    0x7C01,          # signalling NaN payload
]


# The codebook types whose signs ggml applies as a multiply by +-1 (see the module docstring).
SIGN_FLIP_TYPES = ("IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S")


def is_nan_f16(h):
    return (h & 0x7C00) == 0x7C00 and (h & 0x03FF) != 0


def is_inf_or_nan_f16(h):
    return (h & 0x7C00) == 0x7C00


def put_u16(blocks, off, values):
    blocks[:, off:off + 2] = np.asarray(values, dtype="<u2").reshape(-1, 1).view(np.uint8)


def put_u32(blocks, off, values):
    blocks[:, off:off + 4] = np.asarray(values, dtype="<u4").reshape(-1, 1).view(np.uint8)


def random_finite_f16(rng, n, lo_exp=0, hi_exp=30):
    exp = rng.integers(lo_exp, hi_exp + 1, n)
    man = rng.integers(0, 1024, n)
    sign = rng.integers(0, 2, n)
    return ((sign << 15) | (exp << 10) | man).astype(np.uint16)


def set_iq1m_d(blocks, d_bits):
    """IQ1_M's f16 d: its 4 nibbles are the top nibbles of the 4 little-endian scale words."""
    sc = blocks[:, 48:56].copy().view("<u2").astype(np.uint32)
    d = np.asarray(d_bits, dtype=np.uint32).reshape(-1)
    for i in range(4):
        sc[:, i] = (sc[:, i] & 0x0FFF) | (((d >> (4 * i)) & 0xF) << 12)
    blocks[:, 48:56] = sc.astype("<u2").view(np.uint8)


def set_scales(name, blocks, values):
    """Every f16 scale field of `blocks` to `values` (one per block)."""
    for off in TYPES[name][3]:
        put_u16(blocks, off, values)
    if name == "IQ1_M":
        set_iq1m_d(blocks, values)


# ---- code sweeps, one per type ---------------------------------------------------------------


def nibble_bytes(rot):
    """16 bytes holding every 4-bit code in both nibbles: byte j = (j + rot) | (15 - j + rot) << 4."""
    j = np.arange(16)
    return (((j + rot) % 16) | (((15 - j + rot) % 16) << 4)).astype(np.uint8)


def pack_q5(blocks, qh_off, qs_off, codes):
    """32 5-bit codes per block: value j's low nibble in byte j % 16 (high nibble for j >= 16),
    its fifth bit in bit j of the u32 qh."""
    codes = codes.astype(np.uint32)
    blocks[:, qs_off:qs_off + 16] = ((codes[:, :16] & 15) | ((codes[:, 16:] & 15) << 4)).astype(np.uint8)
    qh = np.zeros(len(blocks), dtype=np.uint32)
    for j in range(32):
        qh |= ((codes[:, j] >> 4) & 1) << j
    put_u32(blocks, qh_off, qh)


def pack_q3k_scales(scales):
    """16 6-bit values -> Q3_K's 12 bytes (low nibbles in bytes 0..7, high bits in bytes 8..11)."""
    out = np.zeros(12, dtype=np.uint8)
    for i, s in enumerate(scales):
        out[i % 8] |= (s & 15) << (4 * (i // 8))
        out[8 + i % 4] |= ((s >> 4) & 3) << (2 * (i // 4))
    return out


def pack_k4_scales(sc, mn):
    """8 6-bit scales and mins -> the 12 bytes get_scale_min_k4 reads (Q4_K, Q5_K)."""
    out = np.zeros(12, dtype=np.uint8)
    for j in range(8):
        if j < 4:
            out[j] |= sc[j]
            out[j + 4] |= mn[j]
        else:
            out[j + 4] |= (sc[j] & 15) | ((mn[j] & 15) << 4)
            out[j - 4] |= (sc[j] >> 4) << 6
            out[j] |= (mn[j] >> 4) << 6
    return out


def two_nibbles(k, ib):
    """A byte of two 4-bit scales that, over k and ib, take every value in both nibbles."""
    return ((8 * k + ib) % 16) | (((8 * k + ib + 5) % 16) << 4)


def codes_blocks(name, rng):
    size = TYPES[name][2]

    def zeros(nb):
        return np.zeros((nb, size), dtype=np.uint8)

    if name in ("Q4_0", "IQ4_NL", "Q4_1"):
        b = zeros(16)
        off = 4 if name == "Q4_1" else 2
        for r in range(16):
            b[r, off:off + 16] = nibble_bytes(r)
        return b
    if name in ("Q5_0", "Q5_1"):
        b = zeros(32)
        codes = (np.arange(32).reshape(1, 32) + np.arange(32).reshape(32, 1)) % 32
        if name == "Q5_0":
            pack_q5(b, 2, 6, codes)
        else:
            pack_q5(b, 4, 8, codes)
        return b
    if name == "Q8_0":
        b = zeros(8)
        b[:, 2:] = np.arange(256, dtype=np.uint8).reshape(8, 32)
        return b
    if name == "MXFP4_GGML":
        b = zeros(256)
        for e in range(256):
            b[e, 0] = e
            b[e, 1:17] = nibble_bytes(e % 16)
        return b
    if name == "Q2_K":  # scales[16] (nibble scale, nibble min), qs[64]
        b = zeros(16)
        for k in range(16):
            b[k, 0:16] = (16 * k + np.arange(16)) % 256
            b[k, 16:80] = (64 * k + np.arange(64)) % 256
        return b
    if name == "Q3_K":  # hmask[32], qs[64], scales[12]
        b = zeros(8)
        for k in range(8):
            b[k, 0:32] = 0xFF if k % 2 else 0x00
            b[k, 32:96] = (64 * (k // 2) + np.arange(64)) % 256
            b[k, 96:108] = pack_q3k_scales([(16 * k + i) % 64 for i in range(16)])
        return b
    if name in ("Q4_K", "Q5_K"):
        nb = 8 if name == "Q4_K" else 16
        b = zeros(nb)
        for k in range(nb):
            b[k, 4:16] = pack_k4_scales([(8 * k + j) % 64 for j in range(8)], [(8 * k + j + 29) % 64 for j in range(8)])
            if name == "Q4_K":
                b[k, 16:144] = (128 * (k % 2) + np.arange(128)) % 256
            else:
                b[k, 16:48] = [0x00, 0xFF, 0x55, 0xAA][(k // 2) % 4]
                b[k, 48:176] = (128 * (k % 2) + np.arange(128)) % 256
        return b
    if name == "Q6_K":  # ql[128], qh[64], int8 scales[16]: block k holds code k everywhere
        b = zeros(64)
        for k in range(64):
            b[k, 0:128] = (k & 15) * 0x11
            b[k, 128:192] = (k >> 4) * 0x55
            b[k, 192:208] = (16 * k + np.arange(16)) % 256
        return b
    if name == "IQ4_XS":  # scales_h (u16), scales_l[4], qs[128]
        b = zeros(8)
        for k in range(8):
            ls = [(8 * k + ib) % 64 for ib in range(8)]
            put_u16(b[k:k + 1], 2, [sum((ls[ib] >> 4) << (2 * ib) for ib in range(8))])
            b[k, 4:8] = [(ls[2 * i] & 15) | ((ls[2 * i + 1] & 15) << 4) for i in range(4)]
            b[k, 8:136] = (16 * k + np.arange(128)) % 256
        return b
    if name == "TQ1_0":  # qs[48] (5 base-3 digits), qh[4] (4 digits), d
        def enc(v):  # gguf-py's / ggml's packing of the base-3 number v
            return (np.asarray(v) * 256 + 242) // 243
        b = zeros(21 + 6)
        for k in range(21):  # every canonical 5-digit byte (243) and 4-digit byte (81)
            b[k, 0:48] = enc((48 * k + np.arange(48)) % 243)
            b[k, 48:52] = enc(3 * ((4 * k + np.arange(4)) % 81))
        for k in range(6):  # every raw byte, canonical or not
            b[21 + k, 0:52] = (52 * k + np.arange(52)) % 256
        return b
    if name == "TQ2_0":
        b = zeros(4)
        for k in range(4):
            b[k, 0:64] = 64 * k + np.arange(64)
        return b
    if name == "IQ2_XXS":  # per 32 values: 4 grid bytes, u32 (4 x 7-bit sign index, 4-bit scale)
        b = zeros(8)
        for k in range(8):
            for ib in range(8):
                s = 4 * ib + np.arange(4)
                b[k, 2 + 8 * ib:6 + 8 * ib] = (32 * k + s) % 256
                aux = sum(int((32 * k + s[l]) % 128) << (7 * l) for l in range(4)) | (((8 * k + ib) % 16) << 28)
                put_u32(b[k:k + 1], 6 + 8 * ib, [aux])
        return b
    if name == "IQ2_XS":  # qs[32] u16 (9-bit grid index | 7-bit sign index << 9), scales[8]
        b = zeros(16)
        for k in range(16):
            s = np.arange(32)
            q = ((32 * k + s) % 512) | (((32 * k + s) % 128) << 9)
            b[k, 2:66] = q.astype("<u2").view(np.uint8)
            b[k, 66:74] = [two_nibbles(k, ib) for ib in range(8)]
        return b
    if name == "IQ2_S":  # qs[32] low index bytes, signs[32], qh[8] (2 high bits x 4), scales[8]
        b = zeros(32)
        for k in range(32):
            idx = (32 * k + np.arange(32)) % 1024
            b[k, 2:34] = idx & 255
            b[k, 34:66] = (32 * k + np.arange(32)) % 256
            b[k, 66:74] = [sum(int(idx[4 * ib + l] >> 8) << (2 * l) for l in range(4)) for ib in range(8)]
            b[k, 74:82] = [two_nibbles(k, ib) for ib in range(8)]
        return b
    if name == "IQ3_XXS":  # qs[64] grid bytes, 8 x u32 (4 x 7-bit sign index, 4-bit scale)
        b = zeros(4)
        for k in range(4):
            b[k, 2:66] = (64 * k + np.arange(64)) % 256
            for ib in range(8):
                aux = sum(((32 * k + 4 * ib + l) % 128) << (7 * l) for l in range(4)) | (((8 * k + ib) % 16) << 28)
                put_u32(b[k:k + 1], 66 + 4 * ib, [aux])
        return b
    if name == "IQ3_S":  # qs[64] low index bytes, qh[8] (9th bits), signs[32], scales[4]
        b = zeros(8)
        for k in range(8):
            idx = (64 * k + np.arange(64)) % 512
            b[k, 2:66] = idx & 255
            b[k, 66:74] = [sum(int(idx[8 * ib + m] >> 8) << m for m in range(8)) for ib in range(8)]
            b[k, 74:106] = (32 * k + np.arange(32)) % 256
            b[k, 106:110] = [((8 * k + 2 * i) % 16) | (((8 * k + 2 * i + 1) % 16) << 4) for i in range(4)]
        return b
    if name == "IQ1_S":  # qs[32] low index bytes, 8 x u16 (4 x 3 high bits, 3-bit scale, delta sign)
        b = zeros(64)
        for k in range(64):
            idx = (32 * k + np.arange(32)) % 2048
            b[k, 2:34] = idx & 255
            qh = [sum(int(idx[4 * ib + l] >> 8) << (3 * l) for l in range(4)) | (((k + ib) % 8) << 12)
                  | (((ib + k) % 2) << 15) for ib in range(8)]
            b[k, 34:50] = np.asarray(qh, dtype="<u2").view(np.uint8)
        return b
    if name == "IQ1_M":  # qs[32], qh[16] (a nibble per 8 values: 3 high index bits, delta sign), scales
        b = zeros(64)
        for k in range(64):
            idx = (32 * k + np.arange(32)) % 2048
            b[k, 0:32] = idx & 255
            nib = [int(idx[s] >> 8) | (((s + k) % 2) << 3) for s in range(32)]
            b[k, 32:48] = [nib[2 * i] | (nib[2 * i + 1] << 4) for i in range(16)]
            sc = []
            for i in range(4):  # word i: 3-bit scales of groups 4i..4i+3 (two per 32 values)
                sc.append(sum(((k + 4 * i + g) % 8) << (3 * g) for g in range(4)))
            b[k, 48:56] = np.asarray(sc, dtype="<u2").view(np.uint8)
        return b
    raise AssertionError(name)


# ---- the blocks of one type --------------------------------------------------------------------


def make_blocks(name, rng):
    """(all blocks, {part: count})."""
    size = TYPES[name][2]
    parts = {}

    rand = rng.integers(0, 256, (N_RANDOM, size), dtype=np.uint8)
    set_scales(name, rand, random_finite_f16(rng, N_RANDOM))
    parts["random"] = rand

    codes = codes_blocks(name, rng)
    set_scales(name, codes, random_finite_f16(rng, len(codes), 8, 22))
    parts["codes"] = codes

    fields = TYPES[name][3]
    if len(fields) == 2:  # d and a min: every pair of extremes but a NaN with a NaN or an Inf
        pairs = [(a, c) for a in F16_SPECIAL for c in F16_SPECIAL
                 if not ((is_nan_f16(a) and is_inf_or_nan_f16(c)) or (is_nan_f16(c) and is_inf_or_nan_f16(a)))]
        sp = rng.integers(0, 256, (len(pairs), size), dtype=np.uint8)
        put_u16(sp, fields[0], [p[0] for p in pairs])
        put_u16(sp, fields[1], [p[1] for p in pairs])
        parts["scales"] = sp
    elif fields or name == "IQ1_M":
        reps = 4
        sp = rng.integers(0, 256, (len(F16_SPECIAL) * reps, size), dtype=np.uint8)
        set_scales(name, sp, np.repeat(np.asarray(F16_SPECIAL, dtype=np.uint16), reps))
        parts["scales"] = sp
    blocks = np.concatenate(list(parts.values()), axis=0)
    return blocks, {k: len(v) for k, v in parts.items()}


def expected_bits(name, blocks, qtype, dequantize):
    """gguf-py's values as uint32, with the NaN-sign correction of SIGN_FLIP_TYPES."""
    with np.errstate(all="ignore"):
        bits = np.ascontiguousarray(dequantize(blocks, qtype), dtype=np.float32).reshape(-1).view(np.uint32).copy()
    if name in SIGN_FLIP_TYPES:
        nan = (bits & 0x7FFFFFFF) > 0x7F800000
        if nan.any():
            unit = blocks.copy()
            set_scales(name, unit, np.full(len(unit), 0x3C00, dtype=np.uint16))  # d = +1
            signs = np.ascontiguousarray(dequantize(unit, qtype), dtype=np.float32).reshape(-1).view(np.uint32)
            bits[nan] ^= signs[nan] & np.uint32(0x80000000)
    return bits


def f32_hex(bits):
    v = np.asarray([bits], dtype=np.uint32).view(np.float32)[0]
    return f"{v!r} (0x{int(bits):08x})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dump", required=True, help="the gguf_dequant_dump executable")
    ap.add_argument("--llama-cpp", required=True, help="llama.cpp source directory (with gguf-py)")
    args = ap.parse_args()

    sys.path.insert(0, os.path.join(args.llama_cpp, "gguf-py"))
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    from gguf.quants import dequantize

    rng = np.random.default_rng(SEED)
    with tempfile.TemporaryDirectory(prefix="dequant_oracle.") as tmp:
        for name, (gguf_name, elems, size, _) in TYPES.items():
            qtype = GGMLQuantizationType[gguf_name]
            if GGML_QUANT_SIZES[qtype] != (elems, size):
                print(f"FAIL {name}: gguf-py's block is {GGML_QUANT_SIZES[qtype]}, ours ({elems}, {size})")
                return 1
            blocks, parts = make_blocks(name, rng)
            raw_path = os.path.join(tmp, f"{name}.bin")
            out_path = os.path.join(tmp, f"{name}.f32")
            blocks.tofile(raw_path)
            try:
                proc = subprocess.run([args.dump, name, raw_path, out_path], capture_output=True, text=True)
            except OSError as e:
                print(f"FAIL {name}: cannot run {args.dump}: {e}")
                return 1
            if proc.returncode != 0:
                print(f"FAIL {name}: gguf_dequant_dump exited {proc.returncode}: {proc.stderr.strip()}")
                return 1
            ours = np.fromfile(out_path, dtype="<u4")
            theirs = expected_bits(name, blocks, qtype, dequantize)
            if ours.shape != theirs.shape:
                print(f"FAIL {name}: {ours.size} values, gguf-py gives {theirs.size}")
                return 1
            bad = np.nonzero(ours != theirs)[0]
            if bad.size:
                i = int(bad[0])
                print(f"FAIL {name}: block {i // elems} element {i % elems}: ours {f32_hex(ours[i])}, "
                      f"gguf-py {f32_hex(theirs[i])} ({bad.size} values differ)")
                return 1
            detail = ", ".join(f"{k} {v}" for k, v in parts.items())
            print(f"{name:<11} {len(blocks):5d} blocks ({detail}) OK")
    print(f"all {len(TYPES)} block types bit-identical to gguf-py")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Compares image_decode_dump (kimi::image::decode_image) with Pillow 9.4's Image.open, byte for byte.

Generates PNG / JPEG / WebP / GIF / BMP files with Pillow (and, for layouts Pillow does not write,
by hand) into a temporary directory that is always removed, decodes each with the tool and with
Pillow, and checks the mode, the size, the pixels (for P also the 256-entry palette and the
transparency) exactly. JPEGs are compared after PIL.ImageOps.exif_transpose. Truncated and corrupt
files must make the tool exit 1 with a message (never a signal); where it still decodes them, the
result must equal Pillow's. Run: /usr/bin/python3 decode_pillow_test.py --dump PATH/image_decode_dump
"""
import argparse
import io
import json
import os
import struct
import subprocess
import sys
import tempfile
import warnings
import zlib

import numpy as np
from PIL import Image, ImageOps

RNG = np.random.default_rng(1234)


def rand(shape):
    return RNG.integers(0, 256, shape, dtype=np.uint8)


def smooth_rgb(w, h):
    """A smooth image with some noise, so that lossy codecs have something realistic to work on."""
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x + y) * 127 // max(w + h - 2, 1)], -1)
    return np.clip(base + RNG.integers(-20, 20, (h, w, 3)), 0, 255).astype(np.uint8)


def save(im, fmt, **kw):
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    return b.getvalue()


# --- hand-written PNG -------------------------------------------------------------------------

def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def pack_row(samples, depth):
    """One scanline of unsigned samples at `depth` bits (1, 2, 4, 8, 16), big-endian, filter byte 0."""
    samples = np.asarray(samples).ravel()
    if depth == 16:
        return b"\0" + samples.astype(">u2").tobytes()
    if depth == 8:
        return b"\0" + samples.astype(np.uint8).tobytes()
    per = 8 // depth
    out = bytearray()
    for i in range(0, len(samples), per):
        v = 0
        for j in range(per):
            v <<= depth
            if i + j < len(samples):
                v |= int(samples[i + j])
        out.append(v)
    return b"\0" + bytes(out)


def make_png(arr, depth, color_type, extra=b"", interlace=False):
    """arr: [h, w, channels] (or [h, w]) unsigned samples."""
    arr = np.asarray(arr)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    h, w = arr.shape[:2]
    if not interlace:
        raw = b"".join(pack_row(arr[y], depth) for y in range(h))
    else:  # Adam7
        raw = b""
        for x0, y0, dx, dy in [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
                               (0, 1, 1, 2)]:
            sub = arr[y0::dy, x0::dx]
            if sub.shape[0] and sub.shape[1]:
                raw += b"".join(pack_row(sub[y], depth) for y in range(sub.shape[0]))
    ihdr = struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, 1 if interlace else 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + extra + png_chunk(b"IDAT", zlib.compress(raw)) +
            png_chunk(b"IEND", b""))


def png_cases():
    cases = []
    cases.append(("png_rgb_13x200", save(Image.fromarray(rand((200, 13, 3))), "PNG")))
    cases.append(("png_rgb_1x1", save(Image.fromarray(rand((1, 1, 3))), "PNG")))
    cases.append(("png_rgba", save(Image.fromarray(rand((17, 9, 4)), "RGBA"), "PNG")))
    cases.append(("png_l", save(Image.fromarray(rand((31, 7))), "PNG")))
    cases.append(("png_la", save(Image.fromarray(rand((5, 11, 2)), "LA"), "PNG")))
    cases.append(("png_l_trns", save(Image.fromarray(rand((6, 9))), "PNG", transparency=77)))
    p = Image.fromarray(rand((19, 23)), "P")
    p.putpalette(list(rand(256 * 3)))
    cases.append(("png_p", save(p, "PNG")))
    cases.append(("png_p_trns_index", save(p, "PNG", transparency=5)))
    plte = png_chunk(b"PLTE", bytes(rand(3 * 40)))
    idx = RNG.integers(0, 60, (9, 14))   # indices past the 40 PLTE entries: Pillow's ramp
    cases.append(("png_p_short_plte", make_png(idx, 8, 3, plte)))
    cases.append(("png_p_trns_alpha", make_png(idx, 8, 3, plte + png_chunk(b"tRNS", bytes(rand(30))))))
    cases.append(("png_p_trns_ff", make_png(idx, 8, 3, plte + png_chunk(b"tRNS", b"\xff" * 10))))
    plte16 = png_chunk(b"PLTE", bytes(rand(3 * 16)))
    cases.append(("png_p4", make_png(RNG.integers(0, 16, (7, 13)), 4, 3, plte16)))
    cases.append(("png_p2", make_png(RNG.integers(0, 4, (7, 13)), 2, 3, plte16)))
    cases.append(("png_p1", make_png(RNG.integers(0, 2, (7, 13)), 1, 3, plte16)))
    cases.append(("png_1bit", save(Image.fromarray(rand((10, 21)) > 127), "PNG")))
    cases.append(("png_1bit_trns", make_png(RNG.integers(0, 2, (3, 9)), 1, 0, png_chunk(b"tRNS", b"\0\1"))))
    cases.append(("png_grey2", make_png(RNG.integers(0, 4, (5, 11)), 2, 0, png_chunk(b"tRNS", b"\0\2"))))
    cases.append(("png_grey4", make_png(RNG.integers(0, 16, (5, 11)), 4, 0)))
    g16 = RNG.integers(0, 65536, (12, 7))
    cases.append(("png_grey16", make_png(g16, 16, 0)))
    cases.append(("png_grey16_trns", make_png(g16, 16, 0, png_chunk(b"tRNS", struct.pack(">H", 40000)))))
    cases.append(("png_grey16_pillow", save(Image.fromarray(g16.astype(np.uint16)), "PNG")))
    cases.append(("png_rgb16", make_png(RNG.integers(0, 65536, (6, 5, 3)), 16, 2)))
    cases.append(("png_rgba16", make_png(RNG.integers(0, 65536, (6, 5, 4)), 16, 6)))
    cases.append(("png_la16", make_png(RNG.integers(0, 65536, (6, 5, 2)), 16, 4)))
    cases.append(("png_rgb_trns", make_png(rand((4, 4, 3)), 8, 2, png_chunk(b"tRNS", b"\0\1\0\2\0\3"))))
    cases.append(("png_interlaced_rgb", make_png(rand((37, 29, 3)), 8, 2, interlace=True)))
    cases.append(("png_interlaced_p4", make_png(RNG.integers(0, 16, (13, 11)), 4, 3, plte16, interlace=True)))
    cases.append(("png_interlaced_grey16", make_png(g16, 16, 0, interlace=True)))
    cases.append(("png_interlaced_1x1", make_png(rand((1, 1, 4)), 8, 6, interlace=True)))
    return cases


# --- JPEG -------------------------------------------------------------------------------------

def jpeg_cases():
    # Pillow links the same libjpeg62-turbo, with the same default settings (ISLOW, fancy
    # upsampling): all JPEGs here are expected to be byte-identical, not just within ±1.
    cases = []
    img = Image.fromarray(smooth_rgb(53, 37))
    cases.append(("jpeg_rgb", save(img, "JPEG", quality=90)))
    cases.append(("jpeg_rgb_444", save(img, "JPEG", quality=95, subsampling=0)))
    cases.append(("jpeg_rgb_422", save(img, "JPEG", quality=75, subsampling=1)))
    cases.append(("jpeg_rgb_progressive", save(img, "JPEG", quality=80, progressive=True)))
    cases.append(("jpeg_rgb_13x200", save(Image.fromarray(smooth_rgb(13, 200)), "JPEG")))
    cases.append(("jpeg_rgb_1x1", save(Image.fromarray(rand((1, 1, 3))), "JPEG")))
    cases.append(("jpeg_grey", save(img.convert("L"), "JPEG", quality=85)))
    cases.append(("jpeg_cmyk", save(img.convert("CMYK"), "JPEG", quality=90)))
    for k in range(1, 9):
        exif = Image.Exif()
        exif[0x0112] = k
        exif[0x010F] = "kimi"
        cases.append((f"jpeg_orientation_{k}", save(Image.fromarray(smooth_rgb(21, 10)), "JPEG", exif=exif.tobytes())))
    exif = Image.Exif()
    exif[0x0112] = 6
    cases.append(("jpeg_orientation_6_grey", save(img.convert("L"), "JPEG", exif=exif.tobytes())))
    return cases


# --- WebP -------------------------------------------------------------------------------------

def webp_cases():
    rgb = Image.fromarray(smooth_rgb(45, 31))
    rgba = Image.fromarray(np.dstack([smooth_rgb(45, 31), rand((31, 45))]), "RGBA")
    frame2 = Image.fromarray(smooth_rgb(45, 31)[::-1].copy())
    return [
        ("webp_lossless_rgb", save(rgb, "WEBP", lossless=True)),
        ("webp_lossless_rgba", save(rgba, "WEBP", lossless=True)),
        ("webp_lossy_rgb", save(rgb, "WEBP", quality=80)),
        ("webp_lossy_rgba", save(rgba, "WEBP", quality=80)),
        ("webp_1x1", save(Image.fromarray(rand((1, 1, 3))), "WEBP", lossless=True)),
        ("webp_13x200", save(Image.fromarray(smooth_rgb(13, 200)), "WEBP", quality=70)),
        ("webp_animated", save(rgb, "WEBP", save_all=True, append_images=[frame2], duration=100, lossless=True)),
    ]


# --- GIF --------------------------------------------------------------------------------------

def gif_blocks(data):
    """(header+screen+global palette, [(descriptor start, image data end)]) for a simple GIF."""
    flags = data[10]
    pos = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)
    return pos


def gif_with_offset_frame(screen_w, screen_h, left, top, frame, palette, transparency=None):
    """A GIF whose only frame is `frame` (P image) drawn at (left, top) on a screen_w × screen_h screen."""
    frame = frame.copy()
    frame.putpalette(palette)
    data = save(frame, "GIF", interlace=False, optimize=False)
    pos = gif_blocks(data)
    head = bytearray(data[:pos])
    head[6:10] = struct.pack("<HH", screen_w, screen_h)
    while data[pos] == 0x21:   # skip extensions
        pos += 2
        while data[pos]:
            pos += data[pos] + 1
        pos += 1
    assert data[pos] == 0x2C
    desc = bytearray(data[pos:pos + 10])
    desc[1:5] = struct.pack("<HH", left, top)
    gce = b""
    if transparency is not None:
        gce = b"\x21\xf9\x04\x01\x00\x00" + bytes([transparency]) + b"\x00"
    return bytes(head) + gce + bytes(desc) + data[pos + 10:]


def gif_cases():
    p = Image.fromarray(RNG.integers(0, 200, (29, 31)).astype(np.uint8), "P")
    pal = list(rand(256 * 3))
    p.putpalette(pal)
    grey = Image.fromarray(rand((17, 13)))
    small = Image.fromarray(RNG.integers(0, 16, (4, 5)).astype(np.uint8), "P")
    pal16 = list(rand(16 * 3))
    cases = [
        ("gif_p", save(p, "GIF", optimize=False)),
        ("gif_p_noninterlaced", save(p, "GIF", interlace=False, optimize=False)),
        ("gif_p_transparency", save(p, "GIF", transparency=7, optimize=False)),
        ("gif_grey", save(grey, "GIF")),
        ("gif_grey_transparency", save(grey, "GIF", transparency=3)),
        ("gif_1x1", save(Image.fromarray(rand((1, 1, 3))).quantize(4), "GIF")),
        ("gif_13x200", save(Image.fromarray(smooth_rgb(13, 200)).quantize(64), "GIF")),
        ("gif_animated", save(p, "GIF", save_all=True, append_images=[p.transpose(Image.Transpose.FLIP_LEFT_RIGHT)])),
        ("gif_offset_frame", gif_with_offset_frame(20, 10, 3, 2, small, pal16)),
        ("gif_offset_frame_trns", gif_with_offset_frame(20, 10, 3, 2, small, pal16, transparency=2)),
        ("gif_frame_past_screen", gif_with_offset_frame(6, 3, 4, 1, small, pal16)),
    ]
    return cases


# --- BMP --------------------------------------------------------------------------------------

def make_bmp(w, h, bits, rows, palette=b"", header_size=40, compression=0, masks=None, colors=0, top_down=False):
    """rows: list of h raw rows (unpadded) in top-to-bottom order."""
    stride = ((w * bits + 31) >> 3) & ~3
    body = b"".join(r.ljust(stride, b"\0") for r in (rows if top_down else rows[::-1]))
    if header_size == 12:
        info = struct.pack("<IHHHH", 12, w, h, 1, bits)
    else:
        info = struct.pack("<IiiHHIIiiII", header_size, w, -h if top_down else h, 1, bits, compression, len(body),
                           2835, 2835, colors, 0)
        extra = b""
        if masks is not None and header_size == 40:
            extra = struct.pack("<III", *masks[:3])
        elif header_size > 40:
            m = masks if masks is not None else (0, 0, 0, 0)
            info += struct.pack("<IIII", *m)
        info = info.ljust(header_size, b"\0") + extra
    offset = 14 + len(info) + len(palette)
    return b"BM" + struct.pack("<IHHI", offset + len(body), 0, 0, offset) + info + palette + body


def bgrx(pal_rgb):
    return b"".join(bytes([b, g, r, 0]) for r, g, b in pal_rgb)


def bmp_cases():
    cases = []
    cases.append(("bmp_24", save(Image.fromarray(rand((11, 13, 3))), "BMP")))
    cases.append(("bmp_24_1x1", save(Image.fromarray(rand((1, 1, 3))), "BMP")))
    cases.append(("bmp_24_13x200", save(Image.fromarray(rand((200, 13, 3))), "BMP")))
    cases.append(("bmp_32_bi_rgb", save(Image.fromarray(rand((9, 7, 4)), "RGBA"), "BMP")))
    p = Image.fromarray(RNG.integers(0, 256, (10, 15)).astype(np.uint8), "P")
    p.putpalette(list(rand(256 * 3)))
    cases.append(("bmp_8_palette", save(p, "BMP")))
    cases.append(("bmp_8_grey", save(Image.fromarray(rand((10, 15))), "BMP")))
    cases.append(("bmp_1_bw", save(Image.fromarray(rand((10, 21)) > 127), "BMP")))
    pal = [tuple(int(v) for v in rand(3)) for _ in range(16)]
    idx = RNG.integers(0, 16, (7, 9))
    rows4 = [bytes((int(r[i]) << 4) | (int(r[i + 1]) if i + 1 < len(r) else 0) for i in range(0, len(r), 2)) for r in idx]
    cases.append(("bmp_4_palette", make_bmp(9, 7, 4, rows4, bgrx(pal))))
    cases.append(("bmp_4_palette_top_down", make_bmp(9, 7, 4, rows4, bgrx(pal), top_down=True)))
    bits = RNG.integers(0, 2, (5, 19))
    rows1 = [bytes(np.packbits(r.astype(np.uint8))) for r in bits]
    cases.append(("bmp_1_palette", make_bmp(19, 5, 1, rows1, bgrx(pal[:2]), colors=2)))
    idx8 = RNG.integers(0, 40, (6, 5)).astype(np.uint8)
    cases.append(("bmp_8_short_palette", make_bmp(5, 6, 8, [bytes(r) for r in idx8], bgrx(pal), colors=16)))
    cases.append(("bmp_8_os2", make_bmp(5, 6, 8, [bytes(r) for r in idx8],
                                          b"".join(bytes([b, g, r]) for r, g, b in pal * 16), header_size=12)))
    px24 = rand((6, 7, 3))
    cases.append(("bmp_24_top_down", make_bmp(7, 6, 24, [bytes(r) for r in px24], top_down=True)))
    cases.append(("bmp_24_v5", make_bmp(7, 6, 24, [bytes(r) for r in px24], header_size=124)))
    px32 = rand((6, 7, 4))
    rows32 = [bytes(r) for r in px32]
    for name, masks in [("bgrx", (0xFF0000, 0xFF00, 0xFF, 0)), ("xbgr", (0xFF000000, 0xFF0000, 0xFF00, 0)),
                        ("abgr", (0xFF000000, 0xFF0000, 0xFF00, 0xFF)), ("rgba", (0xFF, 0xFF00, 0xFF0000, 0xFF000000)),
                        ("bgra", (0xFF0000, 0xFF00, 0xFF, 0xFF000000)), ("zero", (0, 0, 0, 0))]:
        cases.append((f"bmp_32_bitfields_{name}", make_bmp(7, 6, 32, rows32, header_size=124, compression=3,
                                                           masks=masks)))
    cases.append(("bmp_32_bitfields_v3", make_bmp(7, 6, 32, rows32, compression=3, masks=(0xFF0000, 0xFF00, 0xFF, 0))))
    cases.append(("bmp_32_v5_bi_rgb", make_bmp(7, 6, 32, rows32, header_size=124, top_down=True)))
    px16 = RNG.integers(0, 65536, (5, 6)).astype("<u2")
    rows16 = [r.tobytes() for r in px16]
    cases.append(("bmp_16_555", make_bmp(6, 5, 16, rows16)))
    cases.append(("bmp_16_565", make_bmp(6, 5, 16, rows16, compression=3, masks=(0xF800, 0x7E0, 0x1F, 0))))
    return cases


# --- running and comparing --------------------------------------------------------------------

def run_dump(dump, path, out):
    r = subprocess.run([dump, path, out], capture_output=True, timeout=60)
    meta = json.loads(r.stdout) if r.returncode == 0 else None
    return r, meta


def pillow_decode(path, orient):
    im = Image.open(path)
    if orient:
        im = ImageOps.exif_transpose(im)
    im.load()
    return im


def expected_palette(im):
    pal = im.getpalette() or []
    out = bytearray()
    for i in range(256):
        rgb = pal[3 * i:3 * i + 3] if 3 * i + 3 <= len(pal) else [i, i, i]
        out += bytes(rgb) + b"\xff"
    t = im.info.get("transparency")
    if isinstance(t, int):
        out[4 * t + 3] = 0
    elif isinstance(t, bytes):
        for i, a in enumerate(t[:256]):
            out[4 * i + 3] = a
    return bytes(out)


def compare(name, im, meta, pixels, palette_bytes):
    """Returns a list of mismatch descriptions."""
    errs = []
    w, h = im.size
    if (meta["width"], meta["height"]) != (w, h):
        return [f"size {meta['width']}x{meta['height']} != Pillow {w}x{h}"]
    mode = meta["mode"]
    if im.mode == "I" and mode == "I;16":   # Pillow 9.4 opens 16-bit grey PNGs as 32-bit "I"
        ours = np.frombuffer(pixels, "=u2").astype(np.int64)
        ref = np.frombuffer(im.tobytes(), "<i4").astype(np.int64)
        if not np.array_equal(ours, ref):
            errs.append("I;16 values differ")
    elif mode != im.mode:
        return [f"mode {mode} != Pillow {im.mode}"]
    else:
        ref = im.convert("L").tobytes() if im.mode == "1" else im.tobytes()
        if pixels != ref:
            diff = np.abs(np.frombuffer(pixels, np.uint8).astype(int) - np.frombuffer(ref, np.uint8).astype(int))
            errs.append(f"pixels differ: {np.count_nonzero(diff)} bytes, max diff {diff.max()}")
    t = im.info.get("transparency")
    want_trns = t is not None and im.mode not in ("RGB", "RGBA")
    if meta["has_transparency"] != want_trns:
        errs.append(f"has_transparency {meta['has_transparency']} != Pillow {t!r}")
    want_value = t if (want_trns and isinstance(t, int)) else -1
    if meta["transparent_value"] != want_value:
        errs.append(f"transparent_value {meta['transparent_value']} != Pillow {t!r}")
    if mode == "P":
        if palette_bytes != expected_palette(im):
            errs.append("palette differs")
        # End to end: our indices through our palette == Pillow's own P → RGBA conversion.
        pal = np.frombuffer(palette_bytes, np.uint8).reshape(256, 4)
        ours_rgba = pal[np.frombuffer(pixels, np.uint8)].tobytes()
        if ours_rgba != im.convert("RGBA").tobytes():
            errs.append("P → RGBA through our palette differs from Pillow's convert('RGBA')")
    return errs


def check_valid(dump, tmp, cases, stats):
    failures = []
    for name, data in cases:
        path = os.path.join(tmp, name)
        with open(path, "wb") as f:
            f.write(data)
        out = path + ".bin"
        r, meta = run_dump(dump, path, out)
        if r.returncode != 0:
            failures.append(f"{name}: tool failed rc={r.returncode}: {r.stderr.decode(errors='replace').strip()}")
            continue
        im = pillow_decode(path, orient=name.startswith("jpeg"))
        with open(out, "rb") as f:
            pixels = f.read()
        palette = None
        if meta["mode"] == "P":
            with open(out + ".palette", "rb") as f:
                palette = f.read()
        errs = compare(name, im, meta, pixels, palette)
        failures += [f"{name}: {e}" for e in errs]
        stats["valid"] += 1
    return failures


def check_broken(dump, tmp, cases, stats, verbose):
    """Truncated and corrupted variants: exit 0 or 1 (1 with a message); when 0, equal to Pillow."""
    failures = []
    rng = np.random.default_rng(99)
    for name, data in cases:
        variants = []
        n = len(data)
        cuts = sorted(set([0, 1, 2, 3, 5, 8, 13, 20, 33, 60, n // 4, n // 2, 3 * n // 4, n - 20, n - 12, n - 4, n - 2,
                           n - 1]))
        variants += [(f"cut{c}", data[:c]) for c in cuts if 0 <= c < n]
        for k in range(6):
            b = bytearray(data)
            for _ in range(1 + k):
                b[int(rng.integers(0, n))] = int(rng.integers(0, 256))
            variants.append((f"flip{k}", bytes(b)))
        for vname, vdata in variants:
            path = os.path.join(tmp, f"{name}.{vname}")
            with open(path, "wb") as f:
                f.write(vdata)
            r, meta = run_dump(dump, path, path + ".bin")
            stats["broken"] += 1
            if r.returncode not in (0, 1):
                failures.append(f"{name}.{vname}: rc={r.returncode} (signal?) {r.stderr[-300:]!r}")
                continue
            if r.returncode == 1:
                stats["rejected"] += 1
                if not r.stderr.startswith(b"image_decode_dump: ") or r.stderr.count(b"\n") != 1:
                    failures.append(f"{name}.{vname}: error output is not one 'image_decode_dump: ' line: {r.stderr!r}")
                try:   # Pillow decodes what we reject: tolerated, counted
                    pillow_decode(path, orient=name.startswith("jpeg"))
                    stats["strict"] += 1
                    if verbose:
                        print(f"strict: {name}.{vname}: {r.stderr.decode(errors='replace').strip()}")
                except Exception:
                    pass
                continue
            try:
                im = pillow_decode(path, orient=name.startswith("jpeg"))
            except Exception as e:   # Pillow rejects it, we decode it: tolerated, counted
                stats["lenient"] += 1
                if verbose:
                    print(f"lenient: {name}.{vname}: Pillow: {e}")
                continue
            with open(path + ".bin", "rb") as f:
                pixels = f.read()
            palette = None
            if meta["mode"] == "P":
                with open(path + ".bin.palette", "rb") as f:
                    palette = f.read()
            errs = compare(name, im, meta, pixels, palette)
            failures += [f"{name}.{vname} (decoded by both): {e}" for e in errs]
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dump", required=True, help="path to the image_decode_dump tool")
    ap.add_argument("--verbose", action="store_true", help="list the broken files only Pillow rejects")
    args = ap.parse_args()
    warnings.simplefilter("ignore")   # Pillow warns about the corrupt EXIF data of the broken variants
    cases = png_cases() + jpeg_cases() + webp_cases() + gif_cases() + bmp_cases()
    stats = {"valid": 0, "broken": 0, "rejected": 0, "lenient": 0, "strict": 0}
    with tempfile.TemporaryDirectory(prefix="kimi_decode_pillow_") as tmp:
        failures = check_valid(args.dump, tmp, cases, stats)
        small = [c for c in cases if len(c[1]) < 4000]
        failures += check_broken(args.dump, tmp, small, stats, args.verbose)
    for f in failures:
        print("FAIL", f)
    print(f"decode_pillow_test: {stats['valid']} valid files compared, {stats['broken']} broken variants "
          f"({stats['rejected']} rejected, of which Pillow decodes {stats['strict']}; {stats['lenient']} decoded where "
          f"Pillow fails), {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

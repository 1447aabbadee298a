#!/usr/bin/python3
"""Byte-identity of the K3 image preprocessing against Pillow 9.4 + numpy.

Runs image_prepare_dump (--dump PATH) on images generated here with Pillow and compares its padded
uint8 RGB byte for byte and its float32 patches bit for bit with an independent Python
implementation of the checkpoint's steps (resize budget, image.resize(BICUBIC) in the opened mode,
transparent background in float32, padding, normalisation, patches). Also checks Pillow-mode
resizes directly (up- and downscales the budget never asks for) and, with real decoders, PNG files
end to end. Everything is written to a temporary directory that is always removed.
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import PIL
from PIL import Image

BICUBIC = Image.Resampling.BICUBIC

DEFAULT_CFG = {
    "patch_size": 14,
    "merge_kernel_size": 2,
    "in_patch_limit": 65536,
    "patch_limit_on_one_side": 512,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "transparent_bg_config": {
        "pattern": "chessboard",
        "chessboard_square_size": 8,
        "chessboard_square_on_top_left": True,
        "chessboard_white_value": 255,
        "chessboard_gray_value": 180,
    },
    "transparent_bg_fill_stage": "after_resize",
}


def make_cfg(**over):
    cfg = json.loads(json.dumps(DEFAULT_CFG))
    for k, v in over.items():
        if k == "bg" and v is not None:
            cfg["transparent_bg_config"].update(v)
        elif k == "bg":
            cfg["transparent_bg_config"] = None
        else:
            cfg[k] = v
    return cfg


# ---- the reference pipeline (Python doubles, Pillow, numpy float32) ----

def geometry(w, h, cfg):
    p = cfg["patch_size"]
    merge = cfg["merge_kernel_size"]
    merge = merge[0] if isinstance(merge, list) else merge
    side = cfg["patch_limit_on_one_side"]
    s1 = math.sqrt(cfg["in_patch_limit"] / (max(1.0, w // p) * max(1.0, h // p)))
    s2 = side * p / w
    s3 = side * p / h
    scale = min(1.0, s1, s2, s3)
    nw = min(max(1, int(w * scale)), side * p)
    nh = min(max(1, int(h * scale)), side * p)
    factor = merge * p
    pw = (factor - nw % factor) % factor
    ph = (factor - nh % factor) % factor
    return {"width": w, "height": h, "new_width": nw, "new_height": nh, "pad_width": pw, "pad_height": ph,
            "grid_h": (nh + ph) // p, "grid_w": (nw + pw) // p,
            "n_tokens": ((nh + ph) // factor) * ((nw + pw) // factor)}


def background(h, w, bg):
    pattern = bg["pattern"]
    if pattern in ("white", "black", "gray"):
        return np.full((h, w, 1), {"white": 255, "black": 0, "gray": 128}[pattern], dtype=np.uint8)
    sq = bg["chessboard_square_size"]
    yy, xx = np.mgrid[0:h, 0:w]
    gray = (yy // sq + xx // sq) % 2 == (1 if bg["chessboard_square_on_top_left"] else 0)
    board = np.where(gray, bg["chessboard_gray_value"], bg["chessboard_white_value"]).astype(np.uint8)
    return board[:, :, None]


def to_rgb_array(image, cfg):
    if image.mode == "RGB":
        return np.array(image)
    bg = cfg["transparent_bg_config"]
    if bg is not None and ("A" in image.getbands() or image.info.get("transparency") is not None):
        rgba = np.array(image.convert("RGBA"))
        alpha = rgba[:, :, 3:4].astype(np.float32) / 255.0
        out = alpha * rgba[:, :, :3] + (1 - alpha) * background(rgba.shape[0], rgba.shape[1], bg)
        assert out.dtype == np.float32
        return out.astype(np.uint8)
    return np.array(image.convert("RGB"))


def reference(image, cfg):
    g = geometry(image.width, image.height, cfg)
    size = (g["new_width"], g["new_height"])
    if cfg["transparent_bg_fill_stage"] == "after_resize":
        rgb = to_rgb_array(image.resize(size, BICUBIC), cfg)
    else:
        rgb = np.array(Image.fromarray(to_rgb_array(image, cfg)).resize(size, BICUBIC))
    padded = np.pad(rgb, ((0, g["pad_height"]), (0, g["pad_width"]), (0, 0)))
    x = (padded / 255.0).astype(np.float32)
    x -= np.array(cfg["image_mean"], dtype=np.float32)
    x *= (1.0 / np.array(cfg["image_std"], dtype=np.float64)).astype(np.float32)
    p = cfg["patch_size"]
    gh, gw = g["grid_h"], g["grid_w"]
    patches = x.reshape(gh, p, gw, p, 3).transpose(0, 2, 4, 1, 3).reshape(gh * gw, 3 * p * p)
    return g, padded, patches


# ---- test images ----

def rng_image(rng, mode, w, h, smooth):
    """Noise or smooth gradients (+ hard edges), so that both ringing/clipping and plain
    interpolation show up."""
    bands = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4, "CMYK": 4}[mode]
    if smooth:
        yy, xx = np.mgrid[0:h, 0:w]
        planes = [((xx * (3 + b) + yy * (5 + 2 * b)) * 255 // max(1, w + h)) % 256 for b in range(bands)]
        arr = np.stack(planes, -1).astype(np.uint8)
        arr[(xx // 7 + yy // 5) % 3 == 0] = 255
    else:
        arr = rng.integers(0, 256, (h, w, bands), dtype=np.uint8)
    return Image.frombytes(mode, (w, h), arr.tobytes())


def with_alpha(rng, im, kind):
    """kind: partial (random), binary (0/255), zero (fully transparent), opaque."""
    a = {"partial": lambda s: rng.integers(0, 256, s, dtype=np.uint8),
         "binary": lambda s: (rng.integers(0, 2, s) * 255).astype(np.uint8),
         "zero": lambda s: np.zeros(s, np.uint8),
         "opaque": lambda s: np.full(s, 255, np.uint8)}[kind]((im.height, im.width))
    arr = np.array(im)
    if im.mode == "L":
        return Image.frombytes("LA", im.size, np.stack([arr, a], -1).tobytes())
    return Image.frombytes("RGBA", im.size, np.concatenate([arr, a[:, :, None]], -1).tobytes())


def palette_image(rng, w, h, trns):
    idx = rng.integers(0, 256, (h, w), dtype=np.uint8)
    im = Image.frombytes("P", (w, h), idx.tobytes())
    pal = rng.integers(0, 256, 768, dtype=np.uint8)
    im.putpalette(pal.tobytes())
    alpha = None
    if trns:
        alpha = rng.integers(0, 256, 256, dtype=np.uint8)
        alpha[rng.integers(0, 256, 128)] = 255
        im.info["transparency"] = alpha.tobytes()   # as PNG tRNS
    return im, pal, alpha


class Runner:
    def __init__(self, dump, tmp):
        self.dump, self.tmp, self.n, self.failures = dump, tmp, 0, []

    def write_raw(self, im, name, pal=None, alpha=None):
        path = os.path.join(self.tmp, name)
        with open(path, "wb") as f:
            f.write(im.tobytes())
        if pal is not None:
            with open(path + ".palette", "wb") as f:
                f.write(pal.tobytes() if alpha is None else np.concatenate(
                    [pal.reshape(256, 3), alpha[:, None]], 1).tobytes())
        return path

    def run_dump(self, args):
        r = subprocess.run([self.dump] + args, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
        return json.loads(r.stdout)

    def fail(self, name, msg):
        self.failures.append(f"{name}: {msg}")
        print(f"FAIL {name}: {msg}", flush=True)

    def compare(self, name, ref_image, cfg, dump_args):
        """ref_image: the Pillow image the reference pipeline starts from."""
        self.n += 1
        cfg_path = os.path.join(self.tmp, "config.json")
        with open(cfg_path, "w") as f:
            json.dump({"media_proc_cfg": cfg, "processor_class": "test"}, f)
        out = os.path.join(self.tmp, "out.bin")
        try:
            geom = self.run_dump(dump_args + [out, "--config", cfg_path])
        except RuntimeError as e:
            return self.fail(name, str(e))
        mode = geom.pop("mode")
        opened = {"I": "I;16"}.get(ref_image.mode, ref_image.mode)   # 16-bit grey: kI16 in C++, "I" in Pillow
        if mode != opened:
            return self.fail(name, f"decoded as mode {mode}, Pillow has {ref_image.mode}")
        g, padded, patches = reference(ref_image, cfg)
        if geom != g:
            return self.fail(name, f"geometry {geom} != {g}")
        got = np.fromfile(out, np.uint8)
        if not np.array_equal(got, padded.reshape(-1)):
            diff = np.abs(got.astype(int) - padded.reshape(-1).astype(int)) if got.size == padded.size else None
            return self.fail(name, "rgb differs" + (f" at {np.count_nonzero(diff)} bytes, max {diff.max()}"
                                                    if diff is not None else " in size"))
        got_p = np.fromfile(out + ".patches", np.float32)
        if got_p.size != patches.size or not np.array_equal(got_p.view(np.uint32), patches.reshape(-1).view(np.uint32)):
            return self.fail(name, "patches differ")

    def compare_resize(self, name, im, raw_args, size, expect):
        self.n += 1
        out = os.path.join(self.tmp, "resized.bin")
        try:
            self.run_dump(raw_args + [out, "--resize", str(size[0]), str(size[1])])
        except RuntimeError as e:
            return self.fail(name, str(e))
        got = np.fromfile(out, np.uint8)
        if not np.array_equal(got, expect.reshape(-1)):
            return self.fail(name, f"resize to {size} differs")


def raw_args(path, im, mode=None, trns=None):
    a = ["--raw", str(im.width), str(im.height), mode or im.mode]
    if trns is not None:
        a += ["--trns", str(trns)]
    return a + [path]


def pipeline_cases(r, rng):
    cfgs = {
        "default": make_cfg(),
        "small": make_cfg(in_patch_limit=48, patch_limit_on_one_side=10),
        "p4": make_cfg(patch_size=4, in_patch_limit=90, patch_limit_on_one_side=12, merge_kernel_size=[2, 2]),
        "before": make_cfg(in_patch_limit=48, patch_limit_on_one_side=10, transparent_bg_fill_stage="before_resize"),
        "clip": make_cfg(in_patch_limit=40, image_mean=[0.48145466, 0.4578275, 0.40821073],
                         image_std=[0.26862954, 0.26130258, 0.27577711],
                         bg={"chessboard_square_on_top_left": False, "chessboard_square_size": 3,
                             "chessboard_gray_value": 97, "chessboard_white_value": 240}),
        "white": make_cfg(in_patch_limit=40, bg={"pattern": "white"}, merge_kernel_size=1),
        "black": make_cfg(patch_size=7, in_patch_limit=150, bg={"pattern": "black"}, merge_kernel_size=3),
        "gray": make_cfg(in_patch_limit=30, bg={"pattern": "gray"}, transparent_bg_fill_stage="before_resize"),
        "nobg": make_cfg(in_patch_limit=40, bg=None),
    }
    sizes = [(1, 1), (13, 200), (200, 13), (37, 23), (101, 77), (14, 14), (29, 1), (1, 57), (255, 254), (640, 97)]
    k = 0
    for cname, cfg in cfgs.items():
        for (w, h) in sizes:
            smooth = k % 2 == 0
            k += 1
            rgb = rng_image(rng, "RGB", w, h, smooth)
            grey = rng_image(rng, "L", w, h, smooth)
            cases = [("RGB", rgb, None), ("L", grey, None), ("CMYK", rng_image(rng, "CMYK", w, h, smooth), None)]
            for kind in ("partial", "binary", "zero", "opaque"):
                cases.append((f"RGBA-{kind}", with_alpha(rng, rgb, kind), None))
            cases.append(("LA-partial", with_alpha(rng, grey, "partial"), None))
            cases.append(("LA-binary", with_alpha(rng, grey, "binary"), None))
            for name, im, _ in cases:
                path = r.write_raw(im, "in.raw")
                r.compare(f"{cname} {name} {w}x{h}", im, cfg, raw_args(path, im))
            for trns in (False, True):
                im, pal, alpha = palette_image(rng, w, h, trns)
                path = r.write_raw(im, "in.raw", pal, alpha)
                r.compare(f"{cname} P{'-trns' if trns else ''} {w}x{h}", im, cfg, raw_args(path, im))
            # L with a transparent grey value (PNG tRNS): alpha where the resized value equals it.
            lt = grey.copy()
            lt.info["transparency"] = int(np.array(grey).flat[0])
            path = r.write_raw(lt, "in.raw")
            r.compare(f"{cname} L-trns {w}x{h}", lt, cfg, raw_args(path, lt, trns=lt.info["transparency"]))
            bits = grey.point(lambda v: 255 if v >= 128 else 0).convert("1", dither=Image.Dither.NONE)
            path = r.write_raw(bits, "in.raw")
            r.compare(f"{cname} 1 {w}x{h}", bits, cfg, raw_args(path, bits))
            bits.info["transparency"] = 255
            r.compare(f"{cname} 1-trns {w}x{h}", bits, cfg, raw_args(path, bits, trns=255))
            # 16-bit grey: the reference image is mode "I", as Pillow 9.4 opens a 16-bit PNG.
            a16 = (np.array(grey).astype(np.uint16) * 257) ^ rng.integers(0, 256, (h, w)).astype(np.uint16)
            if k % 3 == 0:
                a16 = np.array(grey).astype(np.uint16)   # values around the 8-bit range: clipping shows
            i16 = Image.frombytes("I;16", (w, h), a16.astype("<u2").tobytes())
            path = r.write_raw(i16, "in.raw")
            r.compare(f"{cname} I;16 {w}x{h}", i16.convert("I"), cfg, raw_args(path, i16))
            t16 = int(a16.flat[-1])
            ii = i16.convert("I")
            ii.info["transparency"] = t16
            r.compare(f"{cname} I;16-trns {w}x{h}", ii, cfg, raw_args(path, i16, trns=t16))


def large_cases(r, rng):
    # 3000×2000 downscaled hard (lowered in_patch_limit keeps it fast), RGBA and P.
    big = rng_image(rng, "RGB", 3000, 2000, True)
    im = with_alpha(rng, big, "partial")
    cfg = make_cfg(in_patch_limit=1024)
    r.compare("large RGBA 3000x2000", im, cfg, raw_args(r.write_raw(im, "in.raw"), im))
    pim, pal, alpha = palette_image(rng, 3000, 2000, True)
    r.compare("large P-trns 3000x2000", pim, cfg, raw_args(r.write_raw(pim, "in.raw", pal, alpha), pim))
    # The real default config: 8000×500 hits the 7168-pixel side limit, 5000×3000 the patch budget.
    im = with_alpha(rng, rng_image(rng, "RGB", 8000, 500, True), "binary")
    r.compare("default RGBA 8000x500", im, make_cfg(), raw_args(r.write_raw(im, "in.raw"), im))
    im = rng_image(rng, "RGB", 5000, 3000, True)
    r.compare("default RGB 5000x3000", im, make_cfg(), raw_args(r.write_raw(im, "in.raw"), im))


def resize_cases(r, rng):
    """Image.resize in the image's own mode, up- and downscales, one axis only, 1-pixel images."""
    random.seed(7)
    dims = [1, 2, 3, 5, 13, 31, 64, 101]
    for i in range(160):
        mode = ["L", "LA", "RGB", "RGBA", "CMYK", "P", "1", "I;16"][i % 8]
        w, h = random.choice(dims), random.choice(dims)
        size = random.choice([(random.randint(1, 240), random.randint(1, 240)), (w, random.randint(1, 150)),
                              (random.randint(1, 150), h), (max(1, w // 3), max(1, h // 2)), (w * 3 + 1, h * 2)])
        smooth = i % 3 == 0
        if mode == "P":
            im, pal, alpha = palette_image(rng, w, h, False)
            path = r.write_raw(im, "in.raw", pal)
            expect = np.array(im.resize(size, BICUBIC))
        elif mode == "1":
            im = rng_image(rng, "L", w, h, smooth).convert("1", dither=Image.Dither.NONE)
            path = r.write_raw(im, "in.raw")
            expect = np.array(im.resize(size, BICUBIC).convert("L"))
        elif mode == "I;16":
            a16 = rng.integers(0, 600 if smooth else 65536, (h, w)).astype("<u2")
            im = Image.frombytes("I;16", (w, h), a16.tobytes())
            path = r.write_raw(im, "in.raw")
            expect = np.clip(np.array(im.convert("I").resize(size, BICUBIC)), 0, 255).astype(np.uint8)
        else:
            base = rng_image(rng, "L" if mode == "LA" else ("RGB" if mode == "RGBA" else mode), w, h, smooth)
            im = with_alpha(rng, base, "partial") if mode in ("LA", "RGBA") else base
            path = r.write_raw(im, "in.raw")
            expect = np.frombuffer(im.resize(size, BICUBIC).tobytes(), np.uint8)
        r.compare_resize(f"resize {mode} {w}x{h}->{size[0]}x{size[1]}", im, raw_args(path, im), size, expect)


def file_cases(r, rng):
    """PNG files through decode_image, the reference starting from Image.open."""
    grey = rng_image(rng, "L", 301, 157, True)
    rgb = rng_image(rng, "RGB", 301, 157, False)
    pim, pal, alpha = palette_image(rng, 301, 157, True)
    a16 = Image.frombytes("I;16", (301, 157), (np.array(grey).astype("<u2") * 3).tobytes())
    lt = grey.copy()
    lt.info["transparency"] = 77
    files = {"rgb": rgb, "rgba": with_alpha(rng, rgb, "partial"), "l": grey, "la": with_alpha(rng, grey, "binary"),
             "p-trns": pim, "i16": a16, "l-trns": lt,
             "bits": grey.convert("1", dither=Image.Dither.NONE)}
    cfg = make_cfg(in_patch_limit=100)
    for name, im in files.items():
        path = os.path.join(r.tmp, name + ".png")
        im.save(path, transparency=im.info["transparency"]) if "transparency" in im.info else im.save(path)
        opened = Image.open(path)
        opened.load()
        r.compare(f"png {name} ({opened.mode})", opened, cfg, [path])


def pillow_facts():
    """The Pillow 9.4 behaviour the C++ side relies on for 16-bit grey."""
    assert PIL.__version__.startswith("9.4"), f"this comparison is pinned to Pillow 9.4, found {PIL.__version__}"
    i16 = Image.frombytes("I;16", (4, 2), bytes(16))
    try:
        i16.resize((3, 1), BICUBIC)
        raise AssertionError("Pillow 9.4 was expected to refuse a BICUBIC resize of I;16")
    except ValueError:
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dump", required=True, help="path to image_prepare_dump")
    ap.add_argument("--no-files", action="store_true", help="skip the PNG end-to-end cases (no decoders)")
    ap.add_argument("--quick", action="store_true", help="skip the large images")
    args = ap.parse_args()
    pillow_facts()
    # convert("RGB") of a P image with tRNS bytes warns; the conversion itself is what we compare.
    warnings.filterwarnings("ignore", message="Palette images with Transparency expressed in bytes")
    rng = np.random.default_rng(20240607)
    with tempfile.TemporaryDirectory(prefix="kimi_prep_") as tmp:
        r = Runner(os.path.abspath(args.dump), tmp)
        pipeline_cases(r, rng)
        resize_cases(r, rng)
        if not args.quick:
            large_cases(r, rng)
        if not args.no_files:
            file_cases(r, rng)
    print(f"{r.n} comparisons, {len(r.failures)} failed")
    return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())

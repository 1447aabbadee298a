#!/usr/bin/python3
"""Golden test of Kimi-K3 with images: kimi-cpp vs the float64 reference (vision_ref.py).

For each config: `kimi-cpp make-model` (a K3 preset with its vision tower; a preprocessor
budget small enough that the test images are downscaled), PNG images drawn with PIL, a chat
request with the images as data: URLs, then
  * `kimi-cpp score --request R.json --out F --tokens-out T.json --embeds-out E.f32` in f32 and
    bf16 against `vision_ref.py` (the tower, merge, projector and the whole K3 forward with the
    image rows in place): f32 image embeddings and logits within 1e-4 (max|diff| / max|ref|);
    bf16 judged as the text golden test judges it (median per-position error, argmax agreement);
  * invariance: the f32 logits bit for bit with the prompt fed in chunks of 7 and 64 tokens,
    beside 3 other sequences, on 2 threads, and with the attention output copied.
Everything runs in a temporary directory that is removed afterwards.
"""

import argparse
import base64
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kimi_ref as R  # noqa: E402
import vision_ref as VR  # noqa: E402

F32_TOL = 1e-4
BF16_MEDIAN_REL = 0.1
BF16_ARGMAX = 0.70

CONFIGS = [
    {
        # k3-tiny's tower (D 32, 2 blocks, an 8x8 position grid): a 200x150 photo-like image
        # downscaled by a lowered in_patch_limit (so the grid is interpolated), text around it
        "name": "tiny_downscale",
        "preset": "k3-tiny",
        "seed": 5,
        "sets": [],
        "in_patch_limit": 64,
        "images": [(200, 150, "RGB")],
    },
    {
        # another tower (D 48, 3 blocks, 4 heads of 12, a 4x6 grid) and two images of different
        # sizes in one message, one of them RGBA over the chessboard
        "name": "two_images",
        "preset": "k3-tiny",
        "seed": 9,
        "sets": ["vision_config.vt_hidden_size=48", "vision_config.qkv_hidden_size=48",
                 "vision_config.mm_hidden_size=48", "vision_config.vt_num_attention_heads=4",
                 "vision_config.vt_num_hidden_layers=3", "vision_config.vt_intermediate_size=80",
                 "vision_config.init_pos_emb_height=4", "vision_config.init_pos_emb_width=6"],
        "in_patch_limit": 256,
        "images": [(61, 90, "RGBA"), (120, 41, "RGB")],
    },
]


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"command failed (rc {r.returncode}): {' '.join(cmd)}\n{r.stderr[-3000:]}")
    return r


def draw_image(w, h, mode, seed):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 255 // max(1, w - 1)), (y * 255 // max(1, h - 1)), ((x + y) * 7) % 256], -1)
    noise = rng.integers(0, 40, (h, w, 3))
    rgb = np.clip(base + noise, 0, 255).astype(np.uint8)
    if mode == "RGBA":
        a = np.clip((x * 255) // max(1, w - 1), 0, 255).astype(np.uint8)[..., None]
        return Image.fromarray(np.concatenate([rgb, a], -1), "RGBA")
    return Image.fromarray(rgb, "RGB")


def png_bytes(img):
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def metrics(got, ref):
    diff = np.abs(got - ref)
    per_pos = diff.max(axis=1) / np.abs(ref).max(axis=1)
    return {"max_rel": float(diff.max() / np.abs(ref).max()), "median_pos_rel": float(np.median(per_pos)),
            "argmax": float((got.argmax(axis=1) == ref.argmax(axis=1)).mean()), "finite": bool(np.isfinite(got).all())}


def check_config(kimi, c, work):
    mdir = os.path.join(work, c["name"])
    cmd = [kimi, "make-model", "--out", mdir, "--preset", c["preset"], "--seed", str(c["seed"]), "--quiet"]
    for s in c["sets"]:
        cmd += ["--set", s]
    run(cmd)
    pp = os.path.join(mdir, "preprocessor_config.json")
    with open(pp) as f:
        pre = json.load(f)
    pre["media_proc_cfg"]["in_patch_limit"] = c["in_patch_limit"]
    with open(pp, "w") as f:
        json.dump(pre, f)

    images = [png_bytes(draw_image(w, h, m, c["seed"] + i)) for i, (w, h, m) in enumerate(c["images"])]
    paths = []
    for i, b in enumerate(images):
        paths.append(os.path.join(work, f"{c['name']}_{i}.png"))
        with open(paths[-1], "wb") as f:
            f.write(b)
    parts = [{"type": "text", "text": "Look at these:"}]
    for b in images:
        parts.append({"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(b).decode()}})
    parts.append({"type": "text", "text": " What differs?"})
    req = {"messages": [{"role": "system", "content": "You see images."}, {"role": "user", "content": parts}]}
    rpath = os.path.join(work, c["name"] + "_req.json")
    with open(rpath, "w") as f:
        json.dump(req, f)

    cfg, W = R.load_model_dir(mdir)
    V = cfg["text_config"]["vocab_size"]
    out = {}
    fails = []
    for dt in ("f32", "bf16"):
        lp, tp, ep = (os.path.join(work, f"{c['name']}_{dt}.{x}") for x in ("f32", "json", "emb"))
        run([kimi, "score", "--model", mdir, "--request", rpath, "--out", lp, "--tokens-out", tp, "--embeds-out", ep,
             "--activation-dtype", dt])
        with open(tp) as f:
            toks = json.load(f)
        out[dt] = (np.fromfile(lp, dtype="<f4").astype(np.float64).reshape(len(toks), V), toks, ep)
    toks = out["f32"][1]
    media = VR.load_media_cfg(mdir)
    emb_ref = VR.image_embeds((cfg, W), images, media)
    pad = cfg["media_placeholder_token_id"]
    n_pad = int(sum(1 for t in toks if t == pad))
    if n_pad != emb_ref.shape[0]:
        fails.append(f"{n_pad} <|media_pad|> tokens, the reference's images have {emb_ref.shape[0]} rows")
        return fails, {}
    emb = np.fromfile(out["f32"][2], dtype="<f4").astype(np.float64).reshape(emb_ref.shape)
    emb_rel = float(np.abs(emb - emb_ref).max() / np.abs(emb_ref).max())
    if not emb_rel <= F32_TOL:
        fails.append(f"f32 image embeddings max_rel {emb_rel:.2e} > {F32_TOL:g}")
    ref = R.forward(cfg, W, toks, input_embeds=(pad, emb_ref))
    f = metrics(out["f32"][0], ref)
    b = metrics(out["bf16"][0], ref)
    if not f["finite"] or not f["max_rel"] <= F32_TOL:
        fails.append(f"f32 logits max_rel {f['max_rel']:.2e} > {F32_TOL:g}")
    if not b["finite"] or b["median_pos_rel"] > BF16_MEDIAN_REL or b["argmax"] < BF16_ARGMAX:
        fails.append(f"bf16 median_pos_rel {b['median_pos_rel']:.2e}, argmax {b['argmax']:.0%}")

    # invariance: bit for bit with other feeding, batching, threads and the copy baseline
    base = np.fromfile(os.path.join(work, f"{c['name']}_f32.f32"), dtype="<u4")
    for label, flags in [("chunk 7", ["--prefill-chunk", "7"]), ("chunk 64", ["--prefill-chunk", "64"]),
                         ("3 fillers", ["--batch-filler", "3", "--prefill-chunk", "11"]),
                         ("2 threads", ["--threads", "2"]), ("copy", ["--attn-output", "copy"])]:
        vp = os.path.join(work, f"{c['name']}_var.f32")
        run([kimi, "score", "--model", mdir, "--request", rpath, "--out", vp, "--activation-dtype", "f32"] + flags)
        if not np.array_equal(np.fromfile(vp, dtype="<u4"), base):
            fails.append(f"invariance: logits differ with {label}")
    grids = [VR.prepare_pixels(b_, media)[1] for b_ in images]
    info = {"T": len(toks), "pads": n_pad, "grids": grids, "emb_rel": emb_rel, "f32": f, "bf16": b}
    return fails, info


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kimi", required=True)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="kimi-vision-golden-")
    failed = 0
    try:
        for c in CONFIGS:
            fails, info = check_config(a.kimi, c, work)
            if info:
                print(f"vision_golden[{c['name']}] T={info['T']} image tokens={info['pads']} grids={info['grids']} | "
                      f"f32 embeds max_rel={info['emb_rel']:.2e} logits max_rel={info['f32']['max_rel']:.2e} | "
                      f"bf16 median_pos_rel={info['bf16']['median_pos_rel']:.2e} argmax={info['bf16']['argmax']:.0%}")
            for m in fails:
                print(f"  FAIL {c['name']}: {m}")
            failed += bool(fails)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("vision golden:", "FAILED" if failed else "OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

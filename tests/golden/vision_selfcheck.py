#!/usr/bin/python3
"""Self-checks of vision_ref.py (Kimi-K3 pixels -> MoonViT tower -> projector, float64 numpy)
that need no C++ engine:

 (a) the numpy tower + projector against a second formulation written here in torch float64
     (F.conv2d patch embedding on the image, F.interpolate for the position grid, RoPE through
     torch.view_as_complex, attention as explicit matmuls, F.pixel_unshuffle for the 2x2 merge,
     F.gelu for both GELUs) on small random configs (D 32, 2 blocks, 4 heads of 8 and of 16,
     I 64, 8x8 position grid, text width 48), for the native 8x8 grid and for 6x10, 12x4
     (interpolated); 1e-12.  Two negative controls show the comparison sees a swapped RoPE axis
     and a transposed merge.
 (b) the bilinear position-grid resize alone against F.interpolate (up, down, mixed).
 (c) prepare_pixels against hand-computed facts: 1x1 -> one 28x28 padded cell (N = 1), 13x200
     geometry, the in_patch_limit and one-side limits, EXIF rotation of a JPEG, a fully
     transparent RGBA image on the chessboard (white at (0,0), gray at (0,8)), a half-transparent
     pixel on white, a palette image with a transparent index.
 (d) kimi_ref.forward(..., input_embeds=...) replaces exactly the <|media_pad|> rows, both forms,
     count mismatch rejected; and the vision_ref.py CLI on a tiny bf16 K3 directory agrees with
     the in-process image_embeds + forward.
Prints OK and exits 0, or prints each failure and exits 1.
"""

import io
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kimi_ref as R  # noqa: E402
import vision_ref as V  # noqa: E402

FAILS = []


def check(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + (f"  ({detail})" if detail else ""))
    if not ok:
        FAILS.append(name)


def maxabs(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return float("inf")
    return float(np.abs(a - b).max()) if a.size else 0.0


# --------------------------------------------------------------------------------------
# random vision model
# --------------------------------------------------------------------------------------

def vision_config(hd=8, p=14, D=32, H=4, layers=2, I=64, G=(8, 8), text=48):
    return {"patch_size": p, "vt_hidden_size": D, "vt_num_hidden_layers": layers,
            "vt_num_attention_heads": H, "qkv_hidden_size": H * hd, "vt_intermediate_size": I,
            "init_pos_emb_height": G[0], "init_pos_emb_width": G[1], "merge_kernel_size": [2, 2],
            "mm_hidden_size": D, "text_hidden_size": text, "projector_ln_eps": 1e-5}


def vision_weights(vc, rng):
    c = V.VisionCfg(vc)
    D, Q, I, p, T = c.D, c.Q, c.I, c.p, c.text_hidden
    W = {V.VT + "patch_embed.proj.weight": rng.standard_normal((D, 3, p, p)) / p,
         V.VT + "patch_embed.pos_emb.weight": rng.standard_normal((c.Gh, c.Gw, D)),
         V.VT + "encoder.final_layernorm.weight": rng.uniform(0.5, 1.5, D),
         V.MP + "proj.0.weight": rng.standard_normal((4 * D, 4 * D)) / math.sqrt(4 * D),
         V.MP + "proj.2.weight": rng.standard_normal((T, 4 * D)) / math.sqrt(4 * D),
         V.MP + "post_norm.weight": rng.uniform(0.5, 1.5, T)}
    for i in range(c.n_layers):
        b = f"{V.VT}encoder.blocks.{i}."
        W[b + "norm0.weight"] = rng.uniform(0.5, 1.5, D)
        W[b + "norm1.weight"] = rng.uniform(0.5, 1.5, D)
        W[b + "wqkv.weight"] = rng.standard_normal((3 * Q, D)) / math.sqrt(D)
        W[b + "wo.weight"] = rng.standard_normal((D, Q)) / math.sqrt(Q)
        W[b + "mlp.fc0.weight"] = rng.standard_normal((I, D)) / math.sqrt(D)
        W[b + "mlp.fc1.weight"] = rng.standard_normal((D, I)) / math.sqrt(I)
    return W


# --------------------------------------------------------------------------------------
# (a) the torch float64 formulation
# --------------------------------------------------------------------------------------

def t_rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def torch_encode(vc, W, img):
    """img: float64 [3, gh*p, gw*p] (normalised pixels) -> [N, text_hidden]."""
    c = V.VisionCfg(vc)
    T = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in W.items()}
    p, D, H, hd, Q = c.p, c.D, c.H, c.hd, c.Q
    x = F.conv2d(torch.from_numpy(img)[None], T[V.VT + "patch_embed.proj.weight"], stride=p)[0]  # [D, gh, gw]
    gh, gw = x.shape[1], x.shape[2]
    pe = T[V.VT + "patch_embed.pos_emb.weight"]
    if (gh, gw) != tuple(pe.shape[:2]):
        pe = F.interpolate(pe.permute(2, 0, 1)[None], size=(gh, gw), mode="bilinear",
                           align_corners=False)[0].permute(1, 2, 0)
    x = (x.permute(1, 2, 0) + pe).reshape(gh * gw, D)
    n = gh * gw
    f = 1.0 / (10000.0 ** (torch.arange(0, hd, 4, dtype=torch.float64)[: hd // 4] / hd))
    ys, xs = torch.meshgrid(torch.arange(gh, dtype=torch.float64), torch.arange(gw, dtype=torch.float64),
                            indexing="ij")
    cis_x = torch.polar(torch.ones(gh, gw, hd // 4, dtype=torch.float64), xs[..., None] * f)
    cis_y = torch.polar(torch.ones(gh, gw, hd // 4, dtype=torch.float64), ys[..., None] * f)
    cis = torch.stack([cis_x, cis_y], dim=-1).reshape(n, hd // 2)  # pair 2k: column, 2k+1: row

    def rot(t):  # [n, H, hd]
        tc = torch.view_as_complex(t.reshape(n, H, hd // 2, 2).contiguous())
        return torch.view_as_real(tc * cis[:, None, :]).reshape(n, H, hd)

    for i in range(c.n_layers):
        b = f"{V.VT}encoder.blocks.{i}."
        qkv = F.linear(t_rms(x, T[b + "norm0.weight"], V.VT_EPS), T[b + "wqkv.weight"]).reshape(n, 3, H, hd)
        q, k, v = rot(qkv[:, 0]), rot(qkv[:, 1]), qkv[:, 2]
        q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)  # [H, n, hd]
        a = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(hd), dim=-1) @ v
        x = x + F.linear(a.transpose(0, 1).reshape(n, Q), T[b + "wo.weight"])
        h = t_rms(x, T[b + "norm1.weight"], V.VT_EPS)
        x = x + F.linear(F.gelu(F.linear(h, T[b + "mlp.fc0.weight"]), approximate="tanh"), T[b + "mlp.fc1.weight"])
    x = t_rms(x, T[V.VT + "encoder.final_layernorm.weight"], V.VT_EPS)
    g = F.pixel_unshuffle(x.reshape(gh, gw, D).permute(2, 0, 1)[None], 2)[0]  # [D*4, gh/2, gw/2], (d, i, j)
    m = g.reshape(D, 4, gh // 2, gw // 2).permute(2, 3, 1, 0).reshape(-1, 4 * D)
    y = F.linear(F.gelu(F.linear(m, T[V.MP + "proj.0.weight"])), T[V.MP + "proj.2.weight"])
    return t_rms(y, T[V.MP + "post_norm.weight"], c.proj_eps).numpy()


def check_tower(rng):
    for hd in (8, 16):
        vc = vision_config(hd=hd)
        W = vision_weights(vc, rng)
        for grid in ((8, 8), (6, 10), (12, 4)):
            gh, gw = grid
            img = rng.standard_normal((3, gh * 14, gw * 14))
            patches, g2 = V.patchify(img, 14)
            got = V.encode_image(vc, W, patches, g2)
            want = torch_encode(vc, W, img)
            d = maxabs(got, want)
            check(f"tower+projector numpy == torch f64, head_dim {hd}, grid {gh}x{gw}",
                  g2 == grid and got.shape == (gh * gw // 4, 48) and d < 1e-12, f"max |diff| {d:.1e}")
    # negative controls: the comparison must notice a swapped RoPE axis and a transposed merge
    vc = vision_config(hd=8)
    W = vision_weights(vc, rng)
    img = rng.standard_normal((3, 6 * 14, 10 * 14))
    patches, grid = V.patchify(img, 14)
    want = torch_encode(vc, W, img)
    keep_rope, keep_merge = V.rope_angles, V.merge_2x2
    try:
        V.rope_angles = lambda gh, gw, hd: keep_rope(gh, gw, hd).reshape(gh * gw, hd // 4, 2)[..., ::-1].reshape(gh * gw, hd // 2)
        d1 = maxabs(V.encode_image(vc, W, patches, grid), want)
        V.rope_angles = keep_rope
        V.merge_2x2 = lambda x, g: keep_merge(x, g).reshape(-1, 2, 2, x.shape[1]).transpose(0, 2, 1, 3).reshape(-1, 4 * x.shape[1])
        d2 = maxabs(V.encode_image(vc, W, patches, grid), want)
    finally:
        V.rope_angles, V.merge_2x2 = keep_rope, keep_merge
    check("negative controls: RoPE row/col swapped and 2x2 cell transposed are both seen",
          d1 > 1e-3 and d2 > 1e-3, f"{d1:.2e}, {d2:.2e}")
    W2 = dict(W)
    W2[V.VT + "patch_embed.proj.bias"] = np.zeros(32)
    try:
        V.encode_image(vc, W2, patches, grid)
        check("a vision tensor the math does not read is rejected", False)
    except ValueError:
        check("a vision tensor the math does not read is rejected", True)


def check_interp(rng):
    pe = rng.standard_normal((8, 8, 5))
    worst = 0.0
    for size in ((6, 10), (12, 4), (3, 5), (13, 17), (8, 3), (1, 1), (64, 2)):
        t = F.interpolate(torch.from_numpy(pe).permute(2, 0, 1)[None], size=size, mode="bilinear",
                          align_corners=False)[0].permute(1, 2, 0).numpy()
        worst = max(worst, maxabs(V.pos_emb_for(pe, *size), t))
    check("bilinear position grid == F.interpolate(bilinear, align_corners=False), 7 sizes",
          worst < 1e-12, f"max |diff| {worst:.1e}")
    check("native grid used as is", V.pos_emb_for(pe, 8, 8) is pe)


# --------------------------------------------------------------------------------------
# (c) pixels
# --------------------------------------------------------------------------------------

def png(img):
    b = io.BytesIO()
    img.save(b, "PNG")
    return b.getvalue()


def px(patches, grid, y, x, c, p=14):
    """Normalised value of padded-image pixel (y, x), channel c, read back out of the patches."""
    gh, gw = grid
    return float(patches[(y // p) * gw + x // p, c * p * p + (y % p) * p + x % p])


def check_pixels():
    media = V.load_media_cfg("/nonexistent")  # the defaults
    one = Image.new("RGB", (1, 1), (255, 0, 51))
    pt, grid, orig = V.prepare_pixels(png(one), media)
    check("1x1 image: padded to 28x28 -> grid 2x2, N = 1, float32 [4, 588]",
          grid == (2, 2) and orig == (1, 1) and pt.shape == (4, 588) and pt.dtype == np.float32
          and (grid[0] // 2) * (grid[1] // 2) == 1)
    vals = [px(pt, grid, 0, 0, c) for c in range(3)]
    want = [1.0, -1.0, float(np.float32(np.float32(51 / 255.0) - np.float32(0.5)) * np.float32(2))]
    check("1x1 image: pixel (255, 0, 51) -> (1, -1, 51/255*2-1); padding -> -1",
          vals == want and px(pt, grid, 0, 1, 0) == -1.0 and px(pt, grid, 27, 27, 2) == -1.0, f"{vals}")
    rng = np.random.default_rng(5)
    arr = rng.integers(0, 256, (200, 13, 3), dtype=np.uint8)
    pt, grid, orig = V.prepare_pixels(png(Image.fromarray(arr, "RGB")), media)
    back = np.array([[[px(pt, grid, y, x, c) for c in range(3)] for x in range(13)] for y in range(200)])
    check("13x200 image: not resized, padded to 28x224 -> grid (16, 2), N = 8, pixels intact",
          orig == (13, 200) and grid == (16, 2) and pt.shape == (32, 588)
          and maxabs(back, (arr / 255.0 - 0.5) / 0.5) < 1e-6 and px(pt, grid, 0, 13, 0) == -1.0
          and px(pt, grid, 200, 0, 0) == -1.0)
    m = dict(media, in_patch_limit=16)
    _, grid, _ = V.prepare_pixels(png(Image.new("RGB", (100, 100))), m)
    # 100//14 = 7 -> s = sqrt(16/49) = 4/7 -> int(57.14) = 57 -> padded 84 -> 6 patches a side
    check("in_patch_limit 16, 100x100 -> 57x57 -> grid 6x6", V.resize_dims(100, 100, m) == (57, 57) and grid == (6, 6))
    m = dict(media, patch_limit_on_one_side=4)
    _, grid, _ = V.prepare_pixels(png(Image.new("RGB", (200, 30))), m)
    # s = 4*14/200 = 0.28 -> 56 x int(8.4) = 8 -> padded 56x28 -> grid (2, 4)
    check("patch_limit_on_one_side 4, 200x30 -> 56x8 -> grid (2, 4)",
          V.resize_dims(200, 30, m) == (56, 8) and grid == (2, 4))
    # JPEG with EXIF orientation 6 (rotate 90): stored 30x10, seen 10x30
    j = Image.new("RGB", (30, 10), (10, 200, 30))
    ex = j.getexif()
    ex[0x0112] = 6
    b = io.BytesIO()
    j.save(b, "JPEG", exif=ex.tobytes())
    _, grid, orig = V.prepare_pixels(b.getvalue(), media)
    check("JPEG EXIF orientation 6: original size (10, 30), grid (4, 2)", orig == (10, 30) and grid == (4, 2),
          f"{orig} {grid}")
    # fully transparent RGBA: the chessboard (square 8, white 255, gray 180) shows through
    rgba = np.zeros((20, 20, 4), np.uint8)
    rgba[..., :3] = rng.integers(0, 256, (20, 20, 3))
    pt, grid, _ = V.prepare_pixels(png(Image.fromarray(rgba, "RGBA")), media)
    gray = float((np.float32(180 / 255.0) - np.float32(0.5)) * np.float32(2))  # 0.41176...
    got = [px(pt, grid, y, x, c) for (y, x) in ((0, 0), (0, 8), (8, 0), (8, 8), (19, 19), (16, 8)) for c in range(3)]
    check("transparent RGBA -> chessboard: (0,0) white 1.0, (0,8) and (8,0) gray 0.41176, (8,8) and (19,19) white, (16,8) gray",
          got == [1.0] * 3 + [gray] * 6 + [1.0] * 6 + [gray] * 3 and abs(gray - 0.411765) < 1e-6,
          f"{sorted(set(got))}")
    # half-transparent pixel over white (pattern white): 128/255 blend, truncated to uint8
    one = np.array([[[100, 50, 200, 128]]], np.uint8)
    pt, grid, _ = V.prepare_pixels(png(Image.fromarray(one, "RGBA")), dict(media, transparent_bg_config={"pattern": "white"}))
    got = [round((px(pt, grid, 0, 0, c) + 1.0) / 2.0 * 255.0) for c in range(3)]
    check("RGBA (100,50,200,a=128) on white -> (177,152,227)", got == [177, 152, 227], f"{got}")
    pt, grid, _ = V.prepare_pixels(png(Image.fromarray(one, "RGBA")), dict(media, transparent_bg_config=None))
    got = [round((px(pt, grid, 0, 0, c) + 1.0) / 2.0 * 255.0) for c in range(3)]
    check("transparent_bg_config null: alpha dropped (convert RGB)", got == [100, 50, 200], f"{got}")
    # palette image with a transparent index 0: index 0 -> chessboard, index 1 -> its colour
    pal = Image.fromarray(np.array([[0, 1] * 8] * 16, np.uint8), "P")
    pal.putpalette([0, 0, 0, 255, 0, 0] + [0] * 762)
    pal.info["transparency"] = 0
    pt, grid, _ = V.prepare_pixels(png(pal), media)
    got = [px(pt, grid, 0, 0, 0), px(pt, grid, 0, 1, 0), px(pt, grid, 0, 1, 1), px(pt, grid, 0, 8, 1)]
    check("palette with transparency: index 0 on chessboard, index 1 red", got == [1.0, 1.0, -1.0, gray], f"{got}")


# --------------------------------------------------------------------------------------
# (d) input_embeds and the CLI on a tiny K3 directory
# --------------------------------------------------------------------------------------

TEXT = {"model_type": "kimi_linear", "hidden_size": 48, "num_hidden_layers": 1, "vocab_size": 64,
        "intermediate_size": 40, "rms_norm_eps": 1e-5, "num_attention_heads": 2, "num_key_value_heads": 2,
        "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 6, "kv_lora_rank": 12,
        "mla_use_nope": True, "num_experts": 0, "first_k_dense_replace": 1, "tie_word_embeddings": False,
        "linear_attn_config": {"num_heads": 2, "head_dim": 8, "kda_layers": [], "full_attn_layers": [1]}}
PAD = 60


def text_weights(rng):
    c = TEXT
    D, H, nope, rope, vd, R_ = c["hidden_size"], 2, 8, 4, 6, 12
    s = {"model.embed_tokens.weight": (c["vocab_size"], D), "lm_head.weight": (c["vocab_size"], D),
         "model.norm.weight": None, "model.layers.0.input_layernorm.weight": None,
         "model.layers.0.post_attention_layernorm.weight": None,
         "model.layers.0.self_attn.q_proj.weight": (H * (nope + rope), D),
         "model.layers.0.self_attn.kv_a_proj_with_mqa.weight": (R_ + rope, D),
         "model.layers.0.self_attn.kv_a_layernorm.weight": None,
         "model.layers.0.self_attn.kv_b_proj.weight": (H * (nope + vd), R_),
         "model.layers.0.self_attn.o_proj.weight": (D, H * vd),
         "model.layers.0.mlp.gate_proj.weight": (40, D), "model.layers.0.mlp.up_proj.weight": (40, D),
         "model.layers.0.mlp.down_proj.weight": (D, 40)}
    W = {}
    for n, shp in s.items():
        if shp is None:
            W["language_model." + n] = rng.uniform(0.5, 1.5, R_ if "kv_a_layernorm" in n else D)
        else:
            W["language_model." + n] = rng.standard_normal(shp) / math.sqrt(shp[1])
    return W


def check_forward_and_cli(rng):
    vc = vision_config(hd=8)
    cfg = {"architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3", "text_config": TEXT,
           "vision_config": vc, "media_placeholder_token_id": PAD}
    W = {**text_weights(rng), **vision_weights(vc, rng)}
    toks = [1, 2, PAD, PAD, PAD, 5, PAD, 7]
    emb = rng.standard_normal((4, 48))
    base = R.forward(cfg, W, toks)
    d_same = {}
    same = R.forward(cfg, W, toks, dump=d_same,
                     input_embeds=(PAD, W["language_model.model.embed_tokens.weight"][[PAD] * 4]))
    check("input_embeds equal to the pad rows leaves the logits unchanged", maxabs(base, same) == 0.0)
    dump = {}
    got = R.forward(cfg, W, toks, dump=dump, input_embeds=(PAD, emb))
    got2 = R.forward(cfg, W, toks, input_embeds={"pad_id": PAD, "embeds": emb})
    e = dump["embed"]
    check("input_embeds replaces exactly the pad rows, in order (pair and dict forms)",
          maxabs(e[[2, 3, 4, 6]], emb) == 0.0 and maxabs(e[[0, 1, 5, 7]], d_same["embed"][[0, 1, 5, 7]]) == 0.0
          and maxabs(got, got2) == 0.0 and maxabs(got[:2], base[:2]) == 0.0 and maxabs(got[2:], base[2:]) > 1e-3)
    try:
        R.forward(cfg, W, toks, input_embeds=(PAD, emb[:3]))
        check("input_embeds count mismatch rejected", False)
    except ValueError:
        check("input_embeds count mismatch rejected", True)

    with tempfile.TemporaryDirectory() as td:
        with open(os.path.join(td, "config.json"), "w") as fh:
            json.dump(cfg, fh)
        with open(os.path.join(td, "preprocessor_config.json"), "w") as fh:
            json.dump({"media_proc_cfg": {"patch_size": 14, "merge_kernel_size": 2, "in_patch_limit": 65536,
                                          "patch_limit_on_one_side": 512, "image_mean": [0.5, 0.5, 0.5],
                                          "image_std": [0.5, 0.5, 0.5],
                                          "transparent_bg_config": V.DEFAULT_BG}}, fh)
        R.write_safetensors(os.path.join(td, "model.safetensors"), {n: ("BF16", a) for n, a in W.items()},
                            metadata={"format": "pt"})
        a = rng.integers(0, 256, (20, 30, 4), dtype=np.uint8)   # 30x20 RGBA -> 56x28 -> grid 2x4, N = 2
        b = rng.integers(0, 256, (40, 40, 3), dtype=np.uint8)   # 40x40 RGB -> 56x56 -> grid 4x4, N = 4
        pa, pb = os.path.join(td, "a.png"), os.path.join(td, "b.png")
        Image.fromarray(a, "RGBA").save(pa)
        Image.fromarray(b, "RGB").save(pb)
        toks = [1, PAD, PAD, 3, PAD, PAD, PAD, PAD, 9]
        with open(os.path.join(td, "t.json"), "w") as fh:
            json.dump(toks, fh)
        lo, eo = os.path.join(td, "l.f32"), os.path.join(td, "e.f32")
        r = subprocess.run([sys.executable, V.__file__, "--model", td, "--tokens", os.path.join(td, "t.json"),
                            "--image", pa, "--image", pb, "--out", lo, "--embeds-out", eo],
                           capture_output=True, text=True)
        ok = r.returncode == 0
        if ok:
            imgs = [open(pa, "rb").read(), open(pb, "rb").read()]
            emb = V.image_embeds(td, imgs)
            c2, W2 = R.load_model_dir(td)
            ref = R.forward(c2, W2, toks, input_embeds=(PAD, emb))
            fe = np.fromfile(eo, "<f4")
            fl = np.fromfile(lo, "<f4")
            ok = (emb.shape == (6, 48) and fe.size == 6 * 48 and fl.size == len(toks) * 64
                  and maxabs(fe.reshape(6, 48), emb.astype(np.float32)) == 0.0
                  and maxabs(fl.reshape(len(toks), 64), ref.astype(np.float32)) == 0.0
                  and set(W2) == set(W))
        check("CLI on a tiny bf16 K3 dir (2 images, 6 pad rows) == image_embeds + forward; loader keeps vision tensors",
              ok, r.stderr.strip()[-400:])


def main():
    rng = np.random.default_rng(1234)
    torch.set_grad_enabled(False)
    check_interp(rng)
    check_tower(rng)
    check_pixels()
    check_forward_and_cli(rng)
    if FAILS:
        print(f"FAILED {len(FAILS)}: " + "; ".join(FAILS))
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())

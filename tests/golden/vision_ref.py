#!/usr/bin/python3
"""Independent float64 reference of Kimi-K3's vision path: pixels -> MoonViT tower -> projector.

Written from the K3 vision math (docs/vision.md; no engine code, no other project's code) in
numpy, on the checkpoint's weights widened to float64 (kimi_ref.py's reader):

  pixels     PIL: open (JPEG: EXIF transpose), scale s = min(1, sqrt(in_patch_limit /
             (max(1, W//p) * max(1, H//p))), side*p/W, side*p/H), new = min(max(1, int(W*s)),
             side*p) per axis, BICUBIC resize of the image as opened; alpha (an 'A' band or a
             'transparency' entry) composited in float32 over transparent_bg_config's
             background (K3: a chessboard), else convert('RGB'); zero-pad bottom/right to a
             multiple of merge*p; (u8/255 - mean) / std in float32; 14x14 patches row-major over
             the (gh, gw) grid, each flattened (channel, row, column).
  tower      patch_embed (a p-stride conv = patches @ W.reshape(D, 3p^2)^T) + the learned
             [Gh, Gw, D] position grid (bilinear-resized like torch's F.interpolate,
             align_corners=False, when (gh, gw) != (Gh, Gw)); per block
             x += wo(attn(rope2d(wqkv(rms0(x))))), x += fc1(gelu_tanh(fc0(rms1(x)))), no biases,
             RMSNorm eps 2^-7, bidirectional attention over one image's patches; 2-D RoPE on
             adjacent (re, im) pairs, pair 2k turned by col*f_k, pair 2k+1 by row*f_k,
             f_k = 10000^(-4k/head_dim); final_layernorm.
  projector  2x2 patch cells (row-major cells, patches (0,0),(0,1),(1,0),(1,1) of a cell
             concatenated) -> rms(proj.2 . gelu_erf(proj.0 . x); post_norm, projector_ln_eps).

Every vision_tower.* / mm_projector.* tensor of the checkpoint must be read (a stray one, e.g. a
bias this math does not have, is an error rather than silently ignored).

Library:
    media = load_media_cfg(model_dir)                       # preprocessor_config.json media_proc_cfg
    patches, (gh, gw), (W, H) = prepare_pixels(png_bytes, media)
    emb = encode_image(vcfg, W, patches, (gh, gw))          # float64 [gh/2 * gw/2, text_hidden]
    emb = image_embeds(model_dir or (cfg, W), [bytes, ...]) # all images, concatenated
CLI:
    /usr/bin/python3 vision_ref.py --model DIR --tokens T.json --image A.png [--image B.png ...]
        --out logits.f32 [--embeds-out E.f32]
runs kimi_ref.forward with the image embeddings in place of the <|media_pad|> rows
(config.json media_placeholder_token_id), writing little-endian float32 [T, vocab]
(and float32 [sum N, text_hidden] embeddings).
"""

import argparse
import io
import json
import math
import os
import sys

import numpy as np
from PIL import Image, ImageOps

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kimi_ref as R  # noqa: E402

VT_EPS = 2.0 ** -7          # torch.finfo(torch.bfloat16).eps: the tower's RMSNorms have no eps of their own
ROPE_THETA = 10000.0

# --------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------

DEFAULT_BG = {"pattern": "chessboard", "chessboard_square_size": 8, "chessboard_white_value": 255,
              "chessboard_gray_value": 180, "chessboard_square_on_top_left": True}
DEFAULT_MEDIA = {"patch_size": 14, "merge_kernel_size": 2, "in_patch_limit": 65536,
                 "patch_limit_on_one_side": 512, "image_mean": [0.5, 0.5, 0.5],
                 "image_std": [0.5, 0.5, 0.5], "transparent_bg_config": DEFAULT_BG,
                 "transparent_bg_fill_stage": "after_resize"}


def load_media_cfg(model_dir):
    """preprocessor_config.json's media_proc_cfg over DEFAULT_MEDIA (absent file/keys keep the
    defaults; an explicit "transparent_bg_config": null means alpha is dropped by convert('RGB'))."""
    m = json.loads(json.dumps(DEFAULT_MEDIA))
    path = os.path.join(model_dir, "preprocessor_config.json")
    if os.path.exists(path):
        with open(path) as fh:
            pc = json.load(fh)
        m.update(pc.get("media_proc_cfg", pc))
    return m


class VisionCfg:
    """config.json's vision_config (the whole top-level dict or the vision_config itself)."""

    def __init__(self, c):
        if "vision_config" in c:
            c = c["vision_config"]
        self.raw = c
        self.p = int(c.get("patch_size", 14))
        self.D = int(c["vt_hidden_size"])
        self.n_layers = int(c["vt_num_hidden_layers"])
        self.H = int(c["vt_num_attention_heads"])
        self.Q = int(c.get("qkv_hidden_size") or self.D)
        self.I = int(c["vt_intermediate_size"])
        self.Gh = int(c["init_pos_emb_height"])
        self.Gw = int(c["init_pos_emb_width"])
        mk = c.get("merge_kernel_size", [2, 2])
        self.merge = tuple(int(v) for v in (mk if isinstance(mk, (list, tuple)) else [mk, mk]))
        self.mm_hidden = int(c.get("mm_hidden_size") or self.D)
        self.text_hidden = int(c["text_hidden_size"])
        self.proj_eps = float(c.get("projector_ln_eps", 1e-5))
        if self.Q % self.H:
            raise ValueError(f"qkv_hidden_size {self.Q} not divisible by {self.H} heads")
        self.hd = self.Q // self.H
        if self.hd % 4:
            raise ValueError(f"vision head_dim {self.hd} must be a multiple of 4 (2-D RoPE)")
        if self.merge != (2, 2):
            raise ValueError(f"merge_kernel_size {list(self.merge)} not supported (2x2)")
        if self.mm_hidden != self.D:
            raise ValueError(f"mm_hidden_size {self.mm_hidden} != vt_hidden_size {self.D}")


def check_media_vs_vision(media, vcfg):
    if int(media["patch_size"]) != vcfg.p:
        raise ValueError(f"media patch_size {media['patch_size']} != vision_config patch_size {vcfg.p}")
    if int(media["merge_kernel_size"]) != vcfg.merge[0]:
        raise ValueError(f"media merge_kernel_size {media['merge_kernel_size']} != vision merge {vcfg.merge}")


# --------------------------------------------------------------------------------------
# pixels
# --------------------------------------------------------------------------------------

def resize_dims(W, H, media):
    """(new_w, new_h) of the bicubic resize."""
    p = int(media["patch_size"])
    side = int(media["patch_limit_on_one_side"])
    lim = float(media["in_patch_limit"])
    s = min(1.0, math.sqrt(lim / (max(1.0, W // p) * max(1.0, H // p))), side * p / W, side * p / H)
    return min(max(1, int(W * s)), side * p), min(max(1, int(H * s)), side * p)


def background(h, w, bg):
    """uint8-valued float32 [h, w, 3] background of transparent_bg_config."""
    pat = bg.get("pattern", "black")
    if pat == "white":
        return np.full((h, w, 3), 255.0, np.float32)
    if pat == "black":
        return np.zeros((h, w, 3), np.float32)
    if pat != "chessboard":
        raise ValueError(f"transparent_bg_config pattern {pat!r} not supported")
    sq = int(bg.get("chessboard_square_size", 8))
    odd = ((np.arange(h)[:, None] // sq + np.arange(w)[None, :] // sq) % 2) == 1
    gray_cells = odd if bg.get("chessboard_square_on_top_left", True) else ~odd
    v = np.where(gray_cells, float(bg.get("chessboard_gray_value", 180)),
                 float(bg.get("chessboard_white_value", 255))).astype(np.float32)
    return np.repeat(v[:, :, None], 3, axis=2)


def to_rgb_u8(img, bg):
    """uint8 [h, w, 3]: RGB as is; alpha images composited over bg (None: alpha dropped)."""
    if img.mode == "RGB":
        return np.array(img)
    has_alpha = "A" in img.getbands() or "transparency" in img.info
    if not has_alpha or bg is None:
        return np.array(img.convert("RGB"))
    rgba = np.array(img.convert("RGBA"))
    a = (rgba[..., 3].astype(np.float32) / np.float32(255))[..., None]
    rgb = rgba[..., :3].astype(np.float32)
    out = a * rgb + (np.float32(1) - a) * background(rgba.shape[0], rgba.shape[1], bg)
    return out.astype(np.uint8)


def patchify(x, p):
    """[3, H', W'] -> [gh*gw, 3*p*p]: patches row-major over the grid, each (channel, row, col)."""
    C, Hp, Wp = x.shape
    gh, gw = Hp // p, Wp // p
    return x.reshape(C, gh, p, gw, p).transpose(1, 3, 0, 2, 4).reshape(gh * gw, C * p * p), (gh, gw)


def prepare_pixels(image_bytes, media):
    """-> (patches float32 [gh*gw, 3p^2], (gh, gw), original (W, H))."""
    p = int(media["patch_size"])
    f = int(media["merge_kernel_size"]) * p
    img = Image.open(io.BytesIO(image_bytes))
    if img.format == "JPEG":
        img = ImageOps.exif_transpose(img)
    W, H = img.size
    nw, nh = resize_dims(W, H, media)
    bg = media.get("transparent_bg_config")
    if media.get("transparent_bg_fill_stage", "after_resize") == "before_resize":
        img = Image.fromarray(to_rgb_u8(img, bg), "RGB")
        u8 = np.array(img.resize((nw, nh), Image.Resampling.BICUBIC))
    else:
        u8 = to_rgb_u8(img.resize((nw, nh), Image.Resampling.BICUBIC), bg)
    Hp, Wp = -(-nh // f) * f, -(-nw // f) * f
    pad = np.zeros((Hp, Wp, 3), np.uint8)
    pad[:nh, :nw] = u8
    x = (pad / 255.0).astype(np.float32)
    mean = np.asarray(media["image_mean"], np.float32)
    inv_std = (1.0 / np.asarray(media["image_std"], np.float64)).astype(np.float32)
    x = (x - mean) * inv_std
    patches, grid = patchify(np.ascontiguousarray(x.transpose(2, 0, 1)), p)
    return patches, grid, (W, H)


# --------------------------------------------------------------------------------------
# tower
# --------------------------------------------------------------------------------------

def _bilinear_matrix(n_in, n_out):
    """[n_out, n_in] row weights of 1-D linear interpolation, align_corners=False (half-pixel
    centres, source clamped at 0, upper neighbour clamped at n_in-1)."""
    src = np.maximum((np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5, 0.0)
    i0 = np.floor(src).astype(np.int64)
    i1 = np.minimum(i0 + 1, n_in - 1)
    lam = src - i0
    M = np.zeros((n_out, n_in))
    np.add.at(M, (np.arange(n_out), i0), 1.0 - lam)
    np.add.at(M, (np.arange(n_out), i1), lam)
    return M


def pos_emb_for(pe, gh, gw):
    """Position grid [Gh, Gw, D] at the image grid [gh, gw, D]."""
    Gh, Gw, _ = pe.shape
    if (gh, gw) == (Gh, Gw):
        return pe
    return np.einsum("ai,bj,ijd->abd", _bilinear_matrix(Gh, gh), _bilinear_matrix(Gw, gw), pe)


def rope_angles(gh, gw, hd):
    """[gh*gw, hd/2] angles: complex pair 2k at col*f_k, pair 2k+1 at row*f_k."""
    f = ROPE_THETA ** (-4.0 * np.arange(hd // 4) / hd)
    n = np.arange(gh * gw)
    row, col = (n // gw).astype(np.float64), (n % gw).astype(np.float64)
    ang = np.empty((gh * gw, hd // 2))
    ang[:, 0::2] = col[:, None] * f[None, :]
    ang[:, 1::2] = row[:, None] * f[None, :]
    return ang


def apply_rope(x, ang):
    """x [n, H, hd]: rotate each adjacent (re, im) pair j by ang[:, j]."""
    re, im = x[..., 0::2], x[..., 1::2]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    out = np.empty_like(x)
    out[..., 0::2] = re * c - im * s
    out[..., 1::2] = re * s + im * c
    return out


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


_ERF = np.frompyfunc(math.erf, 1, 1)


def gelu_erf(x):
    return 0.5 * x * (1.0 + _ERF(x / math.sqrt(2.0)).astype(np.float64))


def attention(q, k, v):
    """Bidirectional softmax attention per head.  q, k, v [n, H, hd] -> [n, H*hd]."""
    n, H, hd = q.shape
    s = np.einsum("ihd,jhd->hij", q, k) / math.sqrt(hd)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    a = e / e.sum(axis=-1, keepdims=True)
    return np.einsum("hij,jhd->ihd", a, v).reshape(n, H * hd)


VT = "vision_tower."
MP = "mm_projector."


def vision_tensor_names(vcfg):
    names = [VT + "patch_embed.proj.weight", VT + "patch_embed.pos_emb.weight",
             VT + "encoder.final_layernorm.weight",
             MP + "proj.0.weight", MP + "proj.2.weight", MP + "post_norm.weight"]
    for i in range(vcfg.n_layers):
        b = f"{VT}encoder.blocks.{i}."
        names += [b + n for n in ("norm0.weight", "norm1.weight", "wqkv.weight", "wo.weight",
                                  "mlp.fc0.weight", "mlp.fc1.weight")]
    return names


def check_vision_tensors(vcfg, W):
    """All expected tensors present with their shapes, none extra under the two prefixes."""
    D, Q, I, p, T = vcfg.D, vcfg.Q, vcfg.I, vcfg.p, vcfg.text_hidden
    want = {VT + "patch_embed.proj.weight": (D, 3, p, p), VT + "patch_embed.pos_emb.weight": (vcfg.Gh, vcfg.Gw, D),
            VT + "encoder.final_layernorm.weight": (D,), MP + "proj.0.weight": (4 * D, 4 * D),
            MP + "proj.2.weight": (T, 4 * D), MP + "post_norm.weight": (T,)}
    for i in range(vcfg.n_layers):
        b = f"{VT}encoder.blocks.{i}."
        want.update({b + "norm0.weight": (D,), b + "norm1.weight": (D,), b + "wqkv.weight": (3 * Q, D),
                     b + "wo.weight": (D, Q), b + "mlp.fc0.weight": (I, D), b + "mlp.fc1.weight": (D, I)})
    for n, shp in want.items():
        if n not in W:
            raise KeyError(f"vision tensor {n} missing")
        if tuple(W[n].shape) != shp:
            raise ValueError(f"{n}: shape {tuple(W[n].shape)}, expected {shp}")
    extra = sorted(n for n in W if (n.startswith(VT) or n.startswith(MP)) and n not in want)
    if extra:
        raise ValueError(f"vision tensors this reference does not read: {extra[:4]}")


def vision_tower(vcfg, W, patches, grid):
    """float64 [gh*gw, D] after final_layernorm."""
    gh, gw = grid
    n = gh * gw
    D, H, hd, Q = vcfg.D, vcfg.H, vcfg.hd, vcfg.Q
    x = np.asarray(patches, dtype=np.float64)
    if x.shape != (n, 3 * vcfg.p * vcfg.p):
        raise ValueError(f"patches {x.shape} do not fit grid {grid} with patch {vcfg.p}")
    x = x @ W[VT + "patch_embed.proj.weight"].reshape(D, -1).T
    x = x + pos_emb_for(W[VT + "patch_embed.pos_emb.weight"], gh, gw).reshape(n, D)
    ang = rope_angles(gh, gw, hd)
    for i in range(vcfg.n_layers):
        b = f"{VT}encoder.blocks.{i}."
        qkv = R.linear(R.rmsnorm(x, W[b + "norm0.weight"], VT_EPS), W[b + "wqkv.weight"])
        q = apply_rope(qkv[:, :Q].reshape(n, H, hd), ang)
        k = apply_rope(qkv[:, Q:2 * Q].reshape(n, H, hd), ang)
        v = qkv[:, 2 * Q:].reshape(n, H, hd)
        x = x + R.linear(attention(q, k, v), W[b + "wo.weight"])
        h = R.rmsnorm(x, W[b + "norm1.weight"], VT_EPS)
        x = x + R.linear(gelu_tanh(R.linear(h, W[b + "mlp.fc0.weight"])), W[b + "mlp.fc1.weight"])
    return R.rmsnorm(x, W[VT + "encoder.final_layernorm.weight"], VT_EPS)


def merge_2x2(x, grid):
    """[gh*gw, D] -> [(gh/2)*(gw/2), 4D]: cell (r, c) = patches (2r,2c), (2r,2c+1), (2r+1,2c), (2r+1,2c+1)."""
    gh, gw = grid
    if gh % 2 or gw % 2:
        raise ValueError(f"grid {grid} not a multiple of the 2x2 merge")
    D = x.shape[1]
    g = x.reshape(gh // 2, 2, gw // 2, 2, D).transpose(0, 2, 1, 3, 4)
    return g.reshape((gh // 2) * (gw // 2), 4 * D)


def projector(vcfg, W, m):
    h = gelu_erf(R.linear(m, W[MP + "proj.0.weight"]))
    return R.rmsnorm(R.linear(h, W[MP + "proj.2.weight"]), W[MP + "post_norm.weight"], vcfg.proj_eps)


def encode_image(vcfg, W, patches, grid):
    """One image's patches -> float64 [(gh/2)*(gw/2), text_hidden]."""
    vcfg = vcfg if isinstance(vcfg, VisionCfg) else VisionCfg(vcfg)
    check_vision_tensors(vcfg, W)
    return projector(vcfg, W, merge_2x2(vision_tower(vcfg, W, patches, grid), grid))


def image_embeds(model, images, media=None):
    """model: a model directory or a (config dict, weights) pair; images: list of encoded image
    bytes.  -> float64 [sum N, text_hidden], the images' embeddings in order."""
    if isinstance(model, (str, os.PathLike)):
        cfg, W = R.load_model_dir(model)
        media = media or load_media_cfg(model)
    else:
        cfg, W = model
    media = media or json.loads(json.dumps(DEFAULT_MEDIA))
    vcfg = VisionCfg(cfg)
    check_media_vs_vision(media, vcfg)
    out = [encode_image(vcfg, W, *prepare_pixels(b, media)[:2]) for b in images]
    if not out:
        return np.zeros((0, vcfg.text_hidden))
    return np.concatenate(out, axis=0)


# --------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------

def read_tokens(arg):
    """A JSON file (a list of ids, or an object with "tokens" / "input_ids"), or "1,2,3"."""
    if os.path.exists(arg):
        with open(arg) as fh:
            t = json.load(fh)
        if isinstance(t, dict):
            t = t.get("tokens", t.get("input_ids"))
        return [int(v) for v in t]
    return [int(v) for v in arg.split(",") if v.strip()]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="K3 model directory (config.json, *.safetensors, preprocessor_config.json)")
    ap.add_argument("--tokens", help="JSON file with the token ids (<|media_pad|> rows get the images); needed by --out")
    ap.add_argument("--image", action="append", default=[], help="image file, in placeholder order (repeatable)")
    ap.add_argument("--out", help="logits: little-endian float32 [T, vocab]")
    ap.add_argument("--embeds-out", help="image embeddings: little-endian float32 [sum N, text_hidden]")
    a = ap.parse_args(argv)
    if not (a.out or a.embeds_out):
        ap.error("nothing to write: give --out and/or --embeds-out")
    if a.out and not a.tokens:
        ap.error("--out needs --tokens")
    cfg, W = R.load_model_dir(a.model)
    media = load_media_cfg(a.model)
    imgs = []
    for path in a.image:
        with open(path, "rb") as fh:
            imgs.append(fh.read())
    emb = image_embeds((cfg, W), imgs, media)
    if a.embeds_out:
        emb.astype("<f4").tofile(a.embeds_out)
    if a.out:
        if "media_placeholder_token_id" not in cfg:
            raise KeyError("config.json has no media_placeholder_token_id")
        tokens = read_tokens(a.tokens)
        logits = R.forward(cfg, W, tokens, input_embeds=(int(cfg["media_placeholder_token_id"]), emb))
        logits.astype("<f4").tofile(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Kimi-K3's vision tower and projector in torch, differentiable, for training the default
model (issue 48): the math of docs/vision.md as the float64 reference tests/golden/vision_ref.py
writes it (whose pixel preprocessing this reuses: PIL resize, padding, normalisation, patches),
in float32 with autograd.

  patches, grid = pixels(png_bytes, media)          # numpy, no gradient
  emb = encode_image(vcfg, W, patches, grid)         # torch [gh/2 * gw/2, text_hidden]
"""

import math
import os
import sys

import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "golden"))
import vision_ref as V  # noqa: E402

VT, MP = V.VT, V.MP


def pixels(image_bytes, media):
    patches, grid, _ = V.prepare_pixels(image_bytes, media)
    return torch.from_numpy(patches), grid


def rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def pos_emb(pe, gh, gw):
    Gh, Gw, _ = pe.shape
    if (gh, gw) == (Gh, Gw):
        return pe
    mh = torch.from_numpy(V._bilinear_matrix(Gh, gh)).float()
    mw = torch.from_numpy(V._bilinear_matrix(Gw, gw)).float()
    return torch.einsum("ai,bj,ijd->abd", mh, mw, pe)


def rope(x, ang):
    """x [n, H, hd]: each adjacent (re, im) pair j turned by ang[:, j]."""
    re, im = x[..., 0::2], x[..., 1::2]
    c, s = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
    return torch.stack([re * c - im * s, re * s + im * c], dim=-1).flatten(-2)


def tower(vcfg, W, patches, grid):
    gh, gw = grid
    n = gh * gw
    D, H, hd, Q = vcfg.D, vcfg.H, vcfg.hd, vcfg.Q
    x = patches @ W[VT + "patch_embed.proj.weight"].reshape(D, -1).t()
    x = x + pos_emb(W[VT + "patch_embed.pos_emb.weight"], gh, gw).reshape(n, D)
    ang = torch.from_numpy(V.rope_angles(gh, gw, hd)).float()
    for i in range(vcfg.n_layers):
        b = f"{VT}encoder.blocks.{i}."
        qkv = F.linear(rms(x, W[b + "norm0.weight"], V.VT_EPS), W[b + "wqkv.weight"])
        q = rope(qkv[:, :Q].reshape(n, H, hd), ang).transpose(0, 1)           # [H, n, hd]
        k = rope(qkv[:, Q:2 * Q].reshape(n, H, hd), ang).transpose(0, 1)
        v = qkv[:, 2 * Q:].reshape(n, H, hd).transpose(0, 1)
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hd), dim=-1)   # bidirectional
        x = x + F.linear((a @ v).transpose(0, 1).reshape(n, Q), W[b + "wo.weight"])
        h = rms(x, W[b + "norm1.weight"], V.VT_EPS)
        x = x + F.linear(F.gelu(F.linear(h, W[b + "mlp.fc0.weight"]), approximate="tanh"), W[b + "mlp.fc1.weight"])
    return rms(x, W[VT + "encoder.final_layernorm.weight"], V.VT_EPS)


def encode_image(vcfg, W, patches, grid):
    """One image's patches -> [(gh/2)*(gw/2), text_hidden]: tower, 2x2 cells, projector."""
    gh, gw = grid
    x = tower(vcfg, W, patches, grid)
    D = x.shape[1]
    m = x.reshape(gh // 2, 2, gw // 2, 2, D).permute(0, 2, 1, 3, 4).reshape((gh // 2) * (gw // 2), 4 * D)
    h = F.gelu(F.linear(m, W[MP + "proj.0.weight"]))                          # erf GELU
    return rms(F.linear(h, W[MP + "proj.2.weight"]), W[MP + "post_norm.weight"], vcfg.proj_eps)

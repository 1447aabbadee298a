#!/usr/bin/python3
"""PyTorch eager bf16 baseline of the Kimi Linear / Kimi-K3 forward pass (speed reference).

This is "the baseline a user would otherwise reach for on a CPU": plain torch eager code,
weights and activations in bf16, every projection a batched `torch.nn.functional.linear`,
the numerically sensitive parts in float32 the way the HF / fla code does it (RMSNorm
statistics, gates, softmax, and the KDA recurrent state).  The only per-token Python loop
is the KDA recurrence over time inside a KDA layer; batch and heads are vectorised, and the
MoE loops over experts (never over tokens).

The semantics mirror the float64 numpy reference tests/golden/kimi_ref.py (itself written
from docs/model.md: #kda, #mla, #moe, #decoder): KDA with short conv + SiLU, L2-normalised q/k
(q scaled by K^-0.5), gate g = -exp(A_log) * softplus(f + dt_bias), beta = sigmoid(b_proj),
recurrence decay -> predict -> delta -> write -> read, gated RMSNorm with sigmoid(z),
o_proj; NoPE MLA (expanded form for a fresh prefill, weight-absorbed form over the latent
cache otherwise); sigmoid/softmax router with e_score_correction_bias for selection only,
grouped top-k, renormalisation, routed_scaling_factor, shared experts; dense MLP before
first_k_dense_replace; final norm; lm_head or tied embeddings.

Kimi-K3 text model (docs/model.md#k3): config.json with the text keys under text_config,
tensors under `language_model.` (vision_tower.* / mm_projector.* skipped), optionally
sharded with model.safetensors.index.json.  Each feature is switched on by its own key
(absent = Kimi Linear): hidden_act "situ" (float32, every MLP and expert);
linear_attn_config.use_full_rank_gate (z = g_proj(x)) and gate_lower_bound
(g = lb * sigmoid(exp(A_log) * (f + dt_bias)); a padded 1-D A_log uses its first H);
q_lora_rank; mla_use_output_gate (attention output * sigmoid(g_proj(x)) before o_proj);
routed_expert_hidden_size / latent_moe_use_norm (routed experts on the latent
x . down^T, their sum RMS-normed and projected up; router and shared experts on x);
attn_res_block_size (Block Attention Residuals: a float32 softmax mix over the banked
block inputs and the running partial sum before attention, before the FFN and before the
final norm).

Uses only the standard library, numpy and torch (Debian python3-torch 1.13); checkpoint loading
and the config live in kimi_torch_io.py beside it.

CLI (called by `kimi-cpp bench model --compare-torch`):
  kimi_torch.py --model DIR --prompt-lens 128,512 --batches 1,4,16 --contexts 0,1024,4096 \
                --reps 3 --decode-steps 8 --threads 2 --json OUT.json [--seed 0] [--quiet]
  kimi_torch.py --model DIR --logits --tokens 1,2,3 --out FILE
      (correctness mode: little-endian float32 logits [T, vocab] of every position,
       the same format as kimi_ref.py's CLI)

Benchmark method: prefill rows time a batch-1 prefill of p random token ids from a fresh
state (tokens/s = p / seconds).  Decode rows set up a synthetic state of B sequences with
D tokens of context (random KDA states, conv histories and MLA latent caches; the values do
not change the cost), run one untimed decode step, then time `reps` runs of
`decode_steps` greedy steps (each step feeds the argmax of the previous step's logits).
Block AttnRes mixes over depth within a token, so a K3 decode state is the same KDA states,
conv histories and MLA caches.
"""

import argparse
import json
import os
import statistics
import struct
import sys
import time

import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kimi_torch_io import Config, ModelError, load_model_dir  # noqa: E402

# --------------------------------------------------------------------------------------
# small ops
# --------------------------------------------------------------------------------------

def rms_norm(x, w, eps):
    """RMSNorm with float32 statistics (HF style); returns x's dtype."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * w.float()).to(x.dtype)


def l2_norm(x, eps=1e-6):
    """x / sqrt(sum(x^2) + eps) over the last dim (fla form)."""
    return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps)


def swiglu(x, wg, wu, wd):
    return F.linear(F.silu(F.linear(x, wg)) * F.linear(x, wu), wd)


def situ_mul(gate, up, beta, lin_beta):
    """SiTU (docs/model.md#situ) in float32: beta*tanh(gate/beta)*sigmoid(gate) *
    lin_beta*tanh(up/lin_beta) (up unchanged when lin_beta is None); returns gate's dtype."""
    g, u = gate.float(), up.float()
    a = torch.tanh(g / beta).mul_(beta).mul_(torch.sigmoid(g))
    if lin_beta is not None:
        u = torch.tanh(u / lin_beta).mul_(lin_beta)
    return a.mul_(u).to(gate.dtype)


def glu_ffn(x, wg, wu, wd, cfg):
    """down(act(gate(x), up(x))): SwiGLU (bf16, as HF), or SiTU (float32) when hidden_act
    is situ."""
    if cfg.act == "silu":
        return swiglu(x, wg, wu, wd)
    return F.linear(situ_mul(F.linear(x, wg), F.linear(x, wu), cfg.situ_beta, cfg.situ_lin_beta), wd)


def attn_res_mix(P, blocks, wv, eps):
    """Block AttnRes depth mix (docs/model.md#attnres, #attnres-details), float32: entries [B_1..B_n, P]
    (each [B, T, D]), score_i = RMS-normalised entry (no weight) . wv, wv = res_norm.weight *
    res_proj.weight [D] (f32); softmax over the n+1 entries per token; returns the weighted
    sum of the RAW entries in P's dtype."""
    E = torch.stack(blocks + [P]).float()                                     # [n+1, B, T, D]
    s = torch.matmul(E * torch.rsqrt(E.pow(2).mean(-1, keepdim=True) + eps), wv)  # [n+1, B, T]
    a = torch.softmax(s, dim=0).unsqueeze(-1)                                 # [n+1, B, T, 1]
    return (a * E).sum(0).to(P.dtype)


# --------------------------------------------------------------------------------------
# KDA (docs/model.md#kda)
# --------------------------------------------------------------------------------------

class KDAState:
    """Per-layer decode state of B sequences."""

    def __init__(self, S, conv):
        self.S = S          # [B, H, K, V] float32 recurrent state
        self.conv = conv    # {"q"|"k"|"v": [B, W-1, C]} last W-1 pre-conv projections

    @staticmethod
    def zeros(B, cfg, dtype):
        H, K, W = cfg.kda_heads, cfg.kda_dim, cfg.conv_w
        S = torch.zeros(B, H, K, K, dtype=torch.float32)
        conv = {n: torch.zeros(B, W - 1, H * K, dtype=dtype) for n in "qkv"}
        return KDAState(S, conv)


def short_conv_silu(raw, w, hist):
    """Depthwise causal conv (tap W-1 = current token) + SiLU, computed in float32.

    raw [B, T, C], w [C, 1, W], hist [B, W-1, C].  Returns (out [B, T, C] f32, new hist)."""
    T = raw.shape[1]
    wf = w.reshape(w.shape[0], -1).float()                      # [C, W]
    W = wf.shape[1]
    full = torch.cat([hist.to(raw.dtype), raw], dim=1)          # [B, W-1+T, C]
    fullf = full.float()
    acc = fullf[:, 0:T] * wf[:, 0]
    for i in range(1, W):                                       # loop over taps, not tokens
        acc += fullf[:, i:i + T] * wf[:, i]
    return F.silu(acc), full[:, T:].clone()                     # [B, T, C], [B, W-1, C]


def kda_recurrence(q, k, v, g, beta, S):
    """Token-by-token KDA recurrence (docs/model.md#kda-recurrence), batched over B and heads, in float32.

    q, k, g [B, T, H, K]; v [B, T, H, V]; beta [B, T, H]; S [B, H, K, V] (updated in place).
    Returns (o [B, T, H, V], the state after the tokens: S itself here; a functional
    replacement, as training uses, returns a new tensor)."""
    B, T, H, _ = q.shape
    decay = g.exp()                                             # [B, T, H, K]
    bv = beta.unsqueeze(-1)                                     # [B, T, H, 1]
    o = torch.empty(B, T, H, v.shape[-1], dtype=torch.float32)
    for t in range(T):
        S.mul_(decay[:, t].unsqueeze(-1))                       # decay rows     [B, H, K, V]
        k_t = k[:, t].unsqueeze(-2)                             # [B, H, 1, K]
        pred = torch.matmul(k_t, S).squeeze(-2)                 # S^T k          [B, H, V]
        u = bv[:, t] * (v[:, t] - pred)                         # delta          [B, H, V]
        S.addcmul_(k_t.transpose(-1, -2), u.unsqueeze(-2))      # write k u^T    [B, H, K, V]
        o[:, t] = torch.matmul(q[:, t].unsqueeze(-2), S).squeeze(-2)  # read after write
    return o, S


class KDALayer:
    def __init__(self, W, p, cfg):
        self.cfg = cfg
        gate = ("g_proj.weight",) if cfg.full_rank_gate else ("g_a_proj.weight", "g_b_proj.weight")
        self.w = {n: W[p + n] for n in (
            "q_proj.weight", "k_proj.weight", "v_proj.weight",
            "q_conv1d.weight", "k_conv1d.weight", "v_conv1d.weight",
            "f_a_proj.weight", "f_b_proj.weight", "b_proj.weight",
            "o_norm.weight", "o_proj.weight", "A_log", "dt_bias") + gate}
        # Kimi Linear stores A_log as [1, 1, H, 1]; K3 as a 1-D vector padded beyond H (docs/model.md#k3-kda):
        # the first H values are the real ones.
        n = self.w["A_log"].numel()
        if n < cfg.kda_heads:
            raise ModelError(f"{p}A_log has {n} values, expected at least {cfg.kda_heads}")
        self.w["A_log"] = self.w["A_log"].reshape(-1)[:cfg.kda_heads]

    def new_state(self, B, dtype):
        return KDAState.zeros(B, self.cfg, dtype)

    def __call__(self, x, st):
        """x [B, T, D] (normed) -> [B, T, D]; st: KDAState, updated."""
        w, cfg = self.w, self.cfg
        B, T, _ = x.shape
        H, K = cfg.kda_heads, cfg.kda_dim
        qkv = {}
        for n in "qkv":
            raw = F.linear(x, w[f"{n}_proj.weight"])                       # [B, T, H*K]
            out, st.conv[n] = short_conv_silu(raw, w[f"{n}_conv1d.weight"], st.conv[n])
            qkv[n] = out.view(B, T, H, K)                                  # f32
        q = l2_norm(qkv["q"]) * (K ** -0.5)                                # [B, T, H, K]
        k = l2_norm(qkv["k"])                                              # [B, T, H, K]
        f = F.linear(F.linear(x, w["f_a_proj.weight"]), w["f_b_proj.weight"]).float()
        fb = f.view(B, T, H, K) + w["dt_bias"].float().view(H, K)          # [B, T, H, K]
        A = torch.exp(w["A_log"].float().reshape(H, 1))                    # [H, 1]
        if cfg.gate_lb is None:
            g = -A * F.softplus(fb)                                        # docs/model.md#kda-gates, g <= 0
        else:
            g = cfg.gate_lb * torch.sigmoid(A * fb)                        # docs/model.md#k3-kda, g in (lb, 0)
        beta = torch.sigmoid(F.linear(x, w["b_proj.weight"]).float())      # [B, T, H]
        if cfg.full_rank_gate:
            z = F.linear(x, w["g_proj.weight"])                            # [B, T, H*K] (docs/model.md#k3-kda)
        else:
            z = F.linear(F.linear(x, w["g_a_proj.weight"]), w["g_b_proj.weight"])  # [B, T, H*K]
        o, st.S = kda_recurrence(q, k, qkv["v"], g, beta, st.S)            # [B, T, H, V] f32
        o = o.to(x.dtype)                                                  # core output in act dtype
        y = rms_norm(o, w["o_norm.weight"], cfg.eps).float() * torch.sigmoid(z.float().view(B, T, H, K))
        return F.linear(y.to(x.dtype).view(B, T, H * K), w["o_proj.weight"])  # [B, T, D]


# --------------------------------------------------------------------------------------
# MLA (docs/model.md#mla)
# --------------------------------------------------------------------------------------

class MLACache:
    """Latent cache [c_hat ; k_r] of B sequences, preallocated and grown by doubling."""

    def __init__(self, B, width, dtype, capacity=0):
        self.buf = torch.empty(B, max(capacity, 16), width, dtype=dtype)  # [B, cap, R+rope]
        self.length = 0

    def append(self, ckv):
        """ckv [B, T, R+rope]; returns the filled view [B, length, R+rope]."""
        B, T, Wd = ckv.shape
        need = self.length + T
        if need > self.buf.shape[1]:
            nb = torch.empty(B, max(need, 2 * self.buf.shape[1]), Wd, dtype=self.buf.dtype)
            nb[:, :self.length] = self.buf[:, :self.length]
            self.buf = nb
        self.buf[:, self.length:need] = ckv
        self.length = need
        return self.buf[:, :need]


def causal_mask(T, Tk):
    """[T, Tk] bool, query t sits at absolute position Tk - T + t."""
    pos_q = torch.arange(T).unsqueeze(1) + (Tk - T)
    return torch.arange(Tk).unsqueeze(0) <= pos_q


class MLALayer:
    def __init__(self, W, p, cfg):
        self.cfg = cfg
        H, nope, vd, R = cfg.mla_heads, cfg.nope, cfg.vdim, cfg.kv_lora
        names = ["kv_a_proj_with_mqa.weight", "kv_a_layernorm.weight", "kv_b_proj.weight", "o_proj.weight"]
        names += ["q_a_proj.weight", "q_a_layernorm.weight", "q_b_proj.weight"] if cfg.q_lora else ["q_proj.weight"]
        names += ["g_proj.weight"] if cfg.mla_out_gate else []     # docs/model.md#k3-mla sigmoid output gate
        self.w = {n: W[p + n] for n in names}
        kvb = self.w["kv_b_proj.weight"].view(H, nope + vd, R)
        self.w_uk = kvb[:, :nope].contiguous()                     # [H, nope, R]
        self.w_uv_t = kvb[:, nope:].transpose(1, 2).contiguous()   # [H, R, vd]

    def new_state(self, B, dtype, capacity=0):
        return MLACache(B, self.cfg.kv_lora + self.cfg.rope, dtype, capacity)

    def _project(self, x):
        """x [B, T, D] -> q [B, T, H, nope+rope], ckv [B, T, R+rope] (c normed)."""
        w, cfg = self.w, self.cfg
        B, T, _ = x.shape
        if cfg.q_lora:
            qa = rms_norm(F.linear(x, w["q_a_proj.weight"]), w["q_a_layernorm.weight"], 1e-6)
            q = F.linear(qa, w["q_b_proj.weight"])
        else:
            q = F.linear(x, w["q_proj.weight"])
        q = q.view(B, T, cfg.mla_heads, cfg.nope + cfg.rope)
        ckv = F.linear(x, w["kv_a_proj_with_mqa.weight"])[..., :cfg.kv_lora + cfg.rope]
        c_hat = rms_norm(ckv[..., :cfg.kv_lora], w["kv_a_layernorm.weight"], 1e-6)
        return q, torch.cat([c_hat, ckv[..., cfg.kv_lora:]], dim=-1)

    def _softmax(self, s, T, Tk):
        """s [B, H, T, Tk] raw scores -> bf16 probabilities (causal, f32 softmax)."""
        cfg = self.cfg
        s = s.float() * ((cfg.nope + cfg.rope) ** -0.5)
        if T > 1:
            s = s.masked_fill(~causal_mask(T, Tk), float("-inf"))
        return torch.softmax(s, dim=-1)

    def _attend_expanded(self, q, kv):
        """Keys/values materialised per head (cheaper for a fresh prefill).
        q [B, T, H, dqk], kv [B, Tk, R+rope] -> [B, T, H*vd]."""
        cfg = self.cfg
        B, T, H, _ = q.shape
        Tk = kv.shape[1]
        e = F.linear(kv[..., :cfg.kv_lora], self.w["kv_b_proj.weight"]).view(B, Tk, H, cfg.nope + cfg.vdim)
        k_r = kv[..., cfg.kv_lora:].unsqueeze(2).expand(B, Tk, H, cfg.rope)
        key = torch.cat([e[..., :cfg.nope], k_r], dim=-1).permute(0, 2, 3, 1)   # [B, H, dqk, Tk]
        val = e[..., cfg.nope:].transpose(1, 2)                                 # [B, H, Tk, vd]
        a = self._softmax(torch.matmul(q.transpose(1, 2), key), T, Tk)          # [B, H, T, Tk]
        o = torch.matmul(a.to(q.dtype), val)                                    # [B, H, T, vd]
        return o.transpose(1, 2).reshape(B, T, H * cfg.vdim)

    def _attend_absorbed(self, q, kv):
        """Weight-absorbed form over the latent cache (docs/model.md#mla-absorbed).
        q [B, T, H, dqk], kv [B, Tk, R+rope] -> [B, T, H*vd]."""
        cfg = self.cfg
        B, T, H, _ = q.shape
        Tk, R = kv.shape[1], cfg.kv_lora
        q_nope = q[..., :cfg.nope].permute(2, 0, 1, 3).reshape(H, B * T, cfg.nope)   # [H, B*T, nope]
        q_lat = torch.bmm(q_nope, self.w_uk)                                       # [H, B*T, R]
        q_lat = q_lat.view(H, B, T, R).permute(1, 0, 2, 3)                        # [B, H, T, R]
        q_t = torch.cat([q_lat, q[..., cfg.nope:].transpose(1, 2)], dim=-1)       # [B, H, T, R+rope]
        s = torch.bmm(q_t.reshape(B, H * T, R + cfg.rope), kv.transpose(1, 2))    # [B, H*T, Tk]
        a = self._softmax(s.view(B, H, T, Tk), T, Tk).to(q.dtype)                 # [B, H, T, Tk]
        o_lat = torch.bmm(a.view(B, H * T, Tk), kv[..., :R])                       # [B, H*T, R]
        o_lat = o_lat.view(B, H, T, R).permute(1, 0, 2, 3).reshape(H, B * T, R)   # [H, B*T, R]
        o = torch.bmm(o_lat, self.w_uv_t)                                          # [H, B*T, vd]
        return o.view(H, B, T, cfg.vdim).permute(1, 2, 0, 3).reshape(B, T, H * cfg.vdim)

    def __call__(self, x, cache):
        """x [B, T, D] (normed) -> [B, T, D]; cache: MLACache, appended to."""
        q, ckv = self._project(x)
        fresh = cache.length == 0
        kv = cache.append(ckv)                                       # [B, Tk, R+rope]
        o = self._attend_expanded(q, kv) if fresh else self._attend_absorbed(q, kv)   # [B, T, H*vd]
        if self.cfg.mla_out_gate:   # o * sigmoid(g_proj(x)), x the normed layer input (docs/model.md#k3-mla)
            o = (o.float() * torch.sigmoid(F.linear(x, self.w["g_proj.weight"]).float())).to(o.dtype)
        return F.linear(o, self.w["o_proj.weight"])


# --------------------------------------------------------------------------------------
# MoE / dense MLP (docs/model.md#moe)
# --------------------------------------------------------------------------------------

class MoELayer:
    def __init__(self, W, p, cfg):
        self.cfg = cfg
        self.gate = W[p + "gate.weight"]                          # [E, D]
        self.bias = W.get(p + "gate.e_score_correction_bias")     # [E] or None
        self.experts = [tuple(W[p + f"experts.{e}.{n}.weight"] for n in ("w1", "w3", "w2"))
                        for e in range(cfg.n_experts)]
        # Latent MoE (docs/model.md#latent-moe): routed experts run on x . down^T, their sum is (normed and)
        # projected back up; the router and the shared experts see the full x.
        self.down = W[p + "routed_expert_down_proj.weight"] if cfg.latent else None     # [Lat, D]
        self.up = W[p + "routed_expert_up_proj.weight"] if cfg.latent else None         # [D, Lat]
        self.lat_norm = W[p + "routed_expert_norm.weight"] if cfg.latent and cfg.latent_norm else None
        q = p + "shared_experts."
        self.shared = (tuple(W[q + n] for n in ("gate_proj.weight", "up_proj.weight", "down_proj.weight"))
                       if cfg.n_shared > 0 else None)

    def route(self, x):
        """x [N, D] -> (expert ids [N, k], weights [N, k] float32)."""
        cfg = self.cfg
        logits = F.linear(x, self.gate).float()                   # [N, E]
        s = torch.sigmoid(logits) if cfg.router_act == "sigmoid" else torch.softmax(logits, -1)
        sel = s if self.bias is None else s + self.bias.float()
        if cfg.grouped and cfg.n_group > 1:
            N, E = sel.shape
            grp = sel.view(N, cfg.n_group, E // cfg.n_group)
            gscore = grp.topk(min(2, grp.shape[-1]), dim=-1).values.sum(-1)      # [N, G]
            keep = gscore.topk(cfg.topk_group, dim=-1).indices                   # [N, topk_group]
            allowed = torch.zeros_like(gscore, dtype=torch.bool).scatter_(1, keep, True)
            sel = sel.masked_fill(~allowed.repeat_interleave(E // cfg.n_group, dim=1), float("-inf"))
        idx = sel.topk(cfg.top_k, dim=-1).indices                  # [N, k]
        wts = s.gather(1, idx)                                     # unbiased scores
        if cfg.renorm:
            wts = wts / wts.sum(-1, keepdim=True)
        return idx, wts * cfg.scale

    def __call__(self, x):
        """x [B, T, D] -> [B, T, D]; tokens grouped by expert, a Python loop over experts."""
        cfg = self.cfg
        B, T, D = x.shape
        xf = x.reshape(B * T, D)                                   # [N, D]
        idx, wts = self.route(xf)
        k = idx.shape[1]
        flat = idx.reshape(-1)                                     # [N*k]
        order = torch.argsort(flat)
        counts = torch.bincount(flat, minlength=len(self.experts)).tolist()
        tok = order // k                                           # token of each slot, by expert
        wsorted = wts.reshape(-1)[order]
        xe = F.linear(xf, self.down) if self.down is not None else xf   # [N, Lat] or [N, D]
        out = torch.zeros(B * T, xe.shape[1], dtype=torch.float32)
        start = 0
        for e, c in enumerate(counts):
            if c == 0:
                continue
            t = tok[start:start + c]
            y = glu_ffn(xe.index_select(0, t), *self.experts[e], cfg)   # [c, Lat or D]
            out.index_add_(0, t, y.float() * wsorted[start:start + c, None])
            start += c
        if self.up is not None:                                    # latent sum -> [N, D]
            r = rms_norm(out, self.lat_norm, cfg.eps) if self.lat_norm is not None else out
            out = F.linear(r.to(x.dtype), self.up).float()
        if self.shared is not None:
            out += glu_ffn(xf, *self.shared, cfg).float()
        return out.to(x.dtype).view(B, T, D)


class DenseMLP:
    def __init__(self, W, p, cfg):
        self.cfg = cfg
        self.w = tuple(W[p + n] for n in ("gate_proj.weight", "up_proj.weight", "down_proj.weight"))

    def __call__(self, x):
        return glu_ffn(x, *self.w, self.cfg)


# --------------------------------------------------------------------------------------
# model (docs/model.md#decoder)
# --------------------------------------------------------------------------------------

class KimiTorch:
    """Kimi Linear / Kimi-K3 text model in torch eager; holds the weights and a batched
    decode state."""

    def __init__(self, model_dir, dtype=torch.bfloat16, weights=None):
        # weights: (text config dict, {name: tensor}) already loaded (training rebuilds the
        # model from its parameters each step: tools/train_default/train.py)
        cfg_dict, W = weights if weights is not None else load_model_dir(model_dir, dtype)
        self.cfg = cfg = Config(cfg_dict)
        self.dtype = dtype
        try:
            self.embed = W["model.embed_tokens.weight"]            # [vocab, D]
            self.head = self.embed if cfg.tie else W["lm_head.weight"]
            self.norm = W["model.norm.weight"]
            self.layers = []
            for i in range(cfg.n_layers):
                p = f"model.layers.{i}."
                attn = (KDALayer if cfg.is_kda(i) else MLALayer)(W, p + "self_attn.", cfg)
                ffn = MoELayer(W, p + "block_sparse_moe.", cfg) if cfg.is_moe(i) else DenseMLP(W, p + "mlp.", cfg)
                self.layers.append((W[p + "input_layernorm.weight"], attn,
                                    W[p + "post_attention_layernorm.weight"], ffn))
            # Block AttnRes (docs/model.md#attnres): per layer the score vectors of the mix before attention and
            # before the FFN, and one before the final norm (each res_norm.weight * res_proj.weight).
            self.attn_res = self.attn_res_out = None
            if cfg.attn_res_bs:
                def wv(q):
                    return (W[q + "_norm.weight"].float().reshape(-1) * W[q + "_proj.weight"].float().reshape(-1))
                self.attn_res = [(wv(f"model.layers.{i}.self_attention_res"), wv(f"model.layers.{i}.mlp_res"))
                                 for i in range(cfg.n_layers)]
                self.attn_res_out = wv("model.output_attn_res")
        except KeyError as e:
            raise ModelError(f"checkpoint lacks tensor {e}")
        if tuple(self.embed.shape) != (cfg.vocab, cfg.hidden):
            raise ModelError(f"embed_tokens shape {tuple(self.embed.shape)} does not match the config")
        self.state = None    # list (per layer) of KDAState / MLACache
        self.batch = 0

    # -- state --------------------------------------------------------------------------

    def reset(self, B, capacity=0):
        """Fresh (empty) state for B sequences; MLA caches preallocated to `capacity`."""
        self.batch = B
        self.state = [attn.new_state(B, self.dtype, capacity) if isinstance(attn, MLALayer)
                      else attn.new_state(B, self.dtype) for _, attn, _, _ in self.layers]

    def synthetic_context(self, B, D, seed=0, reserve=256):
        """State as if B sequences had D tokens of context, without running prefill:
        random KDA states (normal*0.02, f32), conv histories and MLA latent caches."""
        g = torch.Generator().manual_seed(seed)
        self.reset(B, capacity=D + reserve)
        for st in self.state:
            if isinstance(st, KDAState):
                st.S.copy_(torch.randn(st.S.shape, generator=g) * 0.02)
                for n in st.conv:
                    st.conv[n] = torch.randn(st.conv[n].shape, generator=g).to(self.dtype)
            elif D > 0:
                st.append(torch.randn(B, D, st.buf.shape[2], generator=g).to(self.dtype))

    # -- forward ------------------------------------------------------------------------

    def _forward(self, tokens, inputs_embeds=None):
        """tokens [B, T] -> final-normed hidden states [B, T, D], advancing the state.
        inputs_embeds [B, T, D]: the inputs instead of the tokens' embeddings (images' rows)."""
        x = F.embedding(tokens, self.embed) if inputs_embeds is None else inputs_embeds   # [B, T, D]
        eps, bs = self.cfg.eps, self.cfg.attn_res_bs
        if not bs:
            for (ln1, attn, ln2, ffn), st in zip(self.layers, self.state):
                h = x + attn(rms_norm(x, ln1, eps), st)
                x = h + ffn(rms_norm(h, ln2, eps))
            return rms_norm(x, self.norm, eps)
        # Block AttnRes (docs/model.md#attnres, #attnres-details): x is the running partial sum P; `blocks` the banked raw
        # layer inputs.  Per token over depth only, so nothing of it is carried across steps.
        blocks = []
        for i, ((ln1, attn, ln2, ffn), st, (wv_attn, wv_mlp)) in enumerate(zip(self.layers, self.state, self.attn_res)):
            h = attn_res_mix(x, blocks, wv_attn, eps) if blocks else x
            a = attn(rms_norm(h, ln1, eps), st)
            if i % bs == 0:                                        # bank the raw P_in, restart
                blocks.append(x)
                x = a
            else:
                x = x + a
            h2 = attn_res_mix(x, blocks, wv_mlp, eps)               # incl. the block banked now
            x = x + ffn(rms_norm(h2, ln2, eps))
        return rms_norm(attn_res_mix(x, blocks, self.attn_res_out, eps), self.norm, eps)

    def _check_tokens(self, tokens):
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= self.cfg.vocab):
            raise ValueError("token id out of range")

    def prefill(self, tokens, all_logits=False):
        """tokens LongTensor [B, T] from a fresh state -> float32 logits of the last
        position [B, vocab] (every position [B, T, vocab] when all_logits)."""
        self._check_tokens(tokens)
        B, T = tokens.shape
        self.reset(B, capacity=T + 256)
        xn = self._forward(tokens)                                 # [B, T, D]
        if not all_logits:
            xn = xn[:, -1]                                         # [B, D]
        return F.linear(xn, self.head).float()

    def decode(self, tokens):
        """tokens LongTensor [B] (one step of B equal-length sequences) -> logits [B, vocab]."""
        self._check_tokens(tokens)
        if self.state is None or tokens.shape[0] != self.batch:
            raise ValueError("decode batch does not match the state (call prefill first)")
        xn = self._forward(tokens.view(-1, 1))[:, 0]               # [B, D]
        return F.linear(xn, self.head).float()


# --------------------------------------------------------------------------------------
# benchmark
# --------------------------------------------------------------------------------------

def summary(vals):
    return {"min": min(vals), "median": statistics.median(vals), "max": max(vals)}


def log(quiet, msg):
    if not quiet:
        print(f"kimi_torch: {msg}", file=sys.stderr, flush=True)


def bench_prefill(m, p, reps, gen):
    m.prefill(torch.randint(0, m.cfg.vocab, (1, min(p, 8)), generator=gen))    # warm-up
    tps = []
    for _ in range(reps):
        toks = torch.randint(0, m.cfg.vocab, (1, p), generator=gen)
        t0 = time.perf_counter()
        m.prefill(toks)
        tps.append(p / (time.perf_counter() - t0))
    return {"test": f"pp{p}", "prompt_tokens": p, "tokens_per_s": summary(tps)}


def bench_decode(m, b, d, reps, steps, seed, gen):
    m.synthetic_context(b, d, seed=seed, reserve=1 + reps * steps)
    tok = m.decode(torch.randint(0, m.cfg.vocab, (b,), generator=gen)).argmax(-1)  # warm-up
    tps, ms = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(steps):
            tok = m.decode(tok).argmax(-1)                         # greedy: feed the argmax
        s = time.perf_counter() - t0
        tps.append(b * steps / s)
        ms.append(1000.0 * s / steps)
    return {"test": f"tg{steps} b{b} @ d{d}", "batch": b, "context": d,
            "tokens_per_s": summary(tps), "step_ms": summary(ms)}


def run_benchmark(m, a):
    gen = torch.Generator().manual_seed(a.seed)
    res = {"benchmark": "torch_eager_bf16" if m.dtype == torch.bfloat16 else "torch_eager_f32",
           "torch_version": torch.__version__, "threads": a.threads, "model": a.model,
           "prefill": [], "decode": []}
    for p in a.prompt_lens:
        row = bench_prefill(m, p, a.reps, gen)
        res["prefill"].append(row)
        log(a.quiet, f"{row['test']}: {row['tokens_per_s']['median']:.2f} tokens/s (median of {a.reps})")
    for d in a.contexts:
        for b in a.batches:
            row = bench_decode(m, b, d, a.reps, a.decode_steps, a.seed, gen)
            res["decode"].append(row)
            log(a.quiet, f"{row['test']}: {row['tokens_per_s']['median']:.2f} tokens/s, "
                         f"{row['step_ms']['median']:.1f} ms/step (median of {a.reps})")
    m.state = None
    with open(a.json, "w") as fh:
        json.dump(res, fh, indent=1)
        fh.write("\n")


# --------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------

class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def _int_list(name, s, lo):
    try:
        vals = [int(v) for v in s.split(",") if v.strip() != ""]
    except ValueError:
        raise UsageError(f"{name}: expected comma-separated integers, got '{s}'")
    if not vals or min(vals) < lo:
        raise UsageError(f"{name}: expected integers >= {lo}, got '{s}'")
    return vals


def parse_args(argv):
    ap = _Parser(prog="kimi_torch.py", description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="model directory (config.json + *.safetensors)")
    ap.add_argument("--prompt-lens", default="128,512")
    ap.add_argument("--batches", default="1,4,16")
    ap.add_argument("--contexts", default="0,1024,4096")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--decode-steps", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", help="benchmark output file")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--dtype", choices=("bf16", "f32"), default="bf16",
                    help="weight/activation dtype (default bf16; f32 is for comparison only)")
    ap.add_argument("--logits", action="store_true", help="correctness mode: logits of every position")
    ap.add_argument("--tokens", help="--logits: comma-separated token ids")
    ap.add_argument("--out", help="--logits: output file, little-endian float32 [T, vocab]")
    a = ap.parse_args(argv)
    if a.reps < 1 or a.decode_steps < 1 or a.threads < 1:
        raise UsageError("--reps, --decode-steps and --threads must be >= 1")
    if a.logits:
        if not a.tokens or not a.out:
            raise UsageError("--logits needs --tokens and --out")
        a.tokens = _int_list("--tokens", a.tokens, 0)
    else:
        if not a.json:
            raise UsageError("benchmark mode needs --json OUT.json (or use --logits)")
        if not os.path.isdir(os.path.dirname(os.path.abspath(a.json))):
            raise UsageError(f"--json: directory of {a.json} does not exist")
        a.prompt_lens = _int_list("--prompt-lens", a.prompt_lens, 1)
        a.batches = _int_list("--batches", a.batches, 1)
        a.contexts = _int_list("--contexts", a.contexts, 0)
    return a


def main(argv=None):
    try:
        a = parse_args(sys.argv[1:] if argv is None else argv)
        torch.set_num_threads(a.threads)
        dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
        with torch.inference_mode():
            t0 = time.perf_counter()
            try:
                m = KimiTorch(a.model, dtype)
            except (KeyError, ValueError, RuntimeError, struct.error) as e:
                raise ModelError(f"{a.model}: unusable checkpoint ({type(e).__name__}: {e})")
            if a.logits:
                if max(a.tokens) >= m.cfg.vocab:
                    raise UsageError(f"--tokens: token id {max(a.tokens)} >= vocab_size {m.cfg.vocab}")
                logits = m.prefill(torch.tensor([a.tokens], dtype=torch.long), all_logits=True)[0]
                logits.numpy().astype("<f4").tofile(a.out)
            else:
                log(a.quiet, f"loaded {a.model} ({a.dtype}) in {time.perf_counter() - t0:.1f} s, "
                             f"torch {torch.__version__}, {a.threads} threads")
                run_benchmark(m, a)
    except (UsageError, ModelError) as e:
        print(f"kimi_torch: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"kimi_torch: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

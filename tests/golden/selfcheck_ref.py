#!/usr/bin/python3
"""Self-checks of the float64 reference (kimi_ref.py) that need no C++ engine.

 (a) KDA: an independently written chunkwise-parallel (WY/UT) form (docs/model.md#kda-chunkwise,
     chunk 16, ragged tails) equals the token-by-token recurrence (docs/model.md#kda-recurrence); chunked
     prefill(N) + recurrent continuation equals the full recurrence; conv / softplus
     helpers equal torch's.
 (b) MLA: the weight-absorbed form (docs/model.md#mla-absorbed) equals the expanded form used by the reference.
 (c) MoE routing: hand-computed cases (bias only in selection, unbiased renormalised
     scaled weights, grouped top-k with num_expert_group > 1, ties -> lower index).
 (d) safetensors writer/reader round trip with BF16 / F16 / F32 tensors, and a whole tiny
     model: file round trip, CLI, and prefix + continuation == full forward.
 (e) Kimi-K3 pieces (docs/model.md#k3; in selfcheck_k3.py): Block AttnRes mix against hand-computed numbers and
     the decoder's block bookkeeping re-traced longhand from a dump; lower-bound forget
     gate range (lb, 0); SiTU against its formula (incl. linear beta null); q-LoRA + gated
     MLA and latent MoE longhand; prefix + continuation == full forward on in-memory K3
     models (AttnRes with a partial last block, latent MoE, features toggled one by one);
     the K3 layout (text_config, language_model. prefix, vision tensors ignored, padded
     F32 A_log) round-trips through write_safetensors / load_model_dir, single file and
     sharded with model.safetensors.index.json.

Run: /usr/bin/python3 tests/golden/selfcheck_ref.py      (exit status 0 = all passed)
"""

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kimi_ref as R  # noqa: E402

FAILS = []


def check(name, ok, detail=""):
    print(f"[{'ok' if ok else 'FAIL'}] {name}" + (f"  ({detail})" if detail else ""))
    if not ok:
        FAILS.append(name)


def maxabs(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))))


def rel(a, b):
    return maxabs(a, b) / max(float(np.max(np.abs(b))), 1e-300)


# --------------------------------------------------------------------------------------
# (a) KDA chunk form, written separately from the reference's recurrence
# --------------------------------------------------------------------------------------

def kda_chunk(q, k, v, g, beta, S0=None, C=16):
    """Chunkwise WY/UT form.  Shapes as kimi_ref.kda_recurrent.  Returns (o, S)."""
    T, H, K = q.shape
    V = v.shape[-1]
    n = -(-T // C)
    pad = n * C - T

    def padt(a):
        return np.concatenate([a, np.zeros((pad,) + a.shape[1:])], axis=0) if pad else a

    q, k, v, g, beta = (padt(a) for a in (q, k, v, g, beta))
    S = np.zeros((H, K, V)) if S0 is None else S0.copy()
    o = np.zeros((n * C, H, V))
    ii = np.arange(C)[:, None]
    jj = np.arange(C)[None, :]
    strict = jj < ii
    incl = jj <= ii
    for c in range(n):
        sl = slice(c * C, (c + 1) * C)
        for h in range(H):
            qc, kc, vc, gc, bc = q[sl, h], k[sl, h], v[sl, h], g[sl, h], beta[sl, h]
            Gam = np.cumsum(gc, axis=0)                              # [C, K]
            diff = Gam[:, None, :] - Gam[None, :, :]                 # [i, j, K]
            E = np.exp(np.where(incl[:, :, None], diff, -np.inf))    # only j <= i exps
            L = bc[:, None] * np.einsum("id,jd,ijd->ij", kc, kc, E) * strict
            Tm = np.zeros((C, C))
            for i in range(C):                                       # (I + L)^-1
                Tm[i, i] = 1.0
                for j in range(i):
                    Tm[i, j] = -np.dot(L[i, j:i], Tm[j:i, j])
            Wb = Tm * bc[None, :]
            w = Wb @ (np.exp(Gam) * kc)
            u = Wb @ vc
            U = u - w @ S[h]
            Aqk = np.einsum("id,jd,ijd->ij", qc, kc, E) * incl
            o[sl, h] = (qc * np.exp(Gam)) @ S[h] + Aqk @ U
            S[h] = np.exp(Gam[-1])[:, None] * S[h] + (np.exp(Gam[-1][None, :] - Gam) * kc).T @ U
    return o[:T], S


def random_kda_inputs(rng, T, H, K, strong_decay=False):
    q = rng.standard_normal((T, H, K))
    k = rng.standard_normal((T, H, K))
    v = rng.standard_normal((T, H, K))
    q = q / np.sqrt((q * q).sum(-1, keepdims=True) + 1e-6) * K ** -0.5
    k = k / np.sqrt((k * k).sum(-1, keepdims=True) + 1e-6)
    A_log = rng.uniform(-1.0, 2.5 if strong_decay else 0.5, size=H)
    dt_bias = rng.standard_normal(H * K)
    f = rng.standard_normal((T, H * K)) * (3.0 if strong_decay else 1.0)
    g = -np.exp(A_log)[None, :, None] * R.softplus_torch((f + dt_bias).reshape(T, H, K))
    beta = R.sigmoid(rng.standard_normal((T, H)))
    return q, k, v, g, beta


def check_kda(rng):
    H, K = 3, 16
    for T in (16, 45, 64, 7):
        for strong in (False, True):
            q, k, v, g, beta = random_kda_inputs(rng, T, H, K, strong)
            o_r, S_r = R.kda_recurrent(q, k, v, g, beta)
            o_c, S_c = kda_chunk(q, k, v, g, beta, C=16)
            eo, es = rel(o_c, o_r), rel(S_c, S_r)
            check(f"KDA chunk16 == recurrence T={T} strong_decay={strong} (min g {g.min():.1f})",
                  eo < 1e-12 and es < 1e-12, f"rel o {eo:.1e}, rel S {es:.1e}")
    # random initial state
    q, k, v, g, beta = random_kda_inputs(rng, 45, H, K)
    S0 = rng.standard_normal((H, K, K))
    o_r, S_r = R.kda_recurrent(q, k, v, g, beta, S0)
    o_c, S_c = kda_chunk(q, k, v, g, beta, S0, C=16)
    check("KDA chunk16 == recurrence with random S0", rel(o_c, o_r) < 1e-12 and rel(S_c, S_r) < 1e-12,
          f"rel o {rel(o_c, o_r):.1e}, rel S {rel(S_c, S_r):.1e}")
    # chunked prefill(N) + recurrent continuation == full recurrence
    q, k, v, g, beta = random_kda_inputs(rng, 53, H, K)
    o_full, S_full = R.kda_recurrent(q, k, v, g, beta)
    for N in (16, 30, 37, 48):
        o1, S1 = kda_chunk(q[:N], k[:N], v[:N], g[:N], beta[:N], C=16)
        o2, S2 = R.kda_recurrent(q[N:], k[N:], v[N:], g[N:], beta[N:], S1)
        o = np.concatenate([o1, o2])
        check(f"KDA chunk prefill({N}) + recurrent({53 - N}) == recurrent(53)",
              rel(o, o_full) < 1e-12 and rel(S2, S_full) < 1e-12,
              f"rel o {rel(o, o_full):.1e}, rel S {rel(S2, S_full):.1e}")
    # the recurrence against the closed form S_t = (I - b k k^T) D S + b k v^T  (one head)
    q, k, v, g, beta = random_kda_inputs(rng, 12, 1, 8)
    S = np.zeros((8, 8))
    o_cf = []
    for t in range(12):
        kk = k[t, 0][:, None]
        S = (np.eye(8) - beta[t, 0] * kk @ kk.T) @ np.diag(np.exp(g[t, 0])) @ S + beta[t, 0] * kk @ v[t, 0][None, :]
        o_cf.append(S.T @ q[t, 0])
    o_r, _ = R.kda_recurrent(q, k, v, g, beta)
    check("KDA recurrence == closed form (tech report Eq. 1)", rel(o_r[:, 0], np.array(o_cf)) < 1e-13,
          f"rel {rel(o_r[:, 0], np.array(o_cf)):.1e}")


def check_torch_helpers(rng):
    try:
        import torch
        import torch.nn.functional as F
    except Exception as e:  # pragma: no cover
        check("torch available for helper cross-checks", False, str(e))
        return
    T, Cc, W = 23, 10, 4
    raw = rng.standard_normal((T, Cc))
    w = rng.standard_normal((Cc, 1, W))
    out, hist = R.causal_conv_silu(raw, w)
    ref = F.conv1d(torch.tensor(raw.T[None]), torch.tensor(w), padding=W - 1, groups=Cc)[0, :, :T]
    ref = F.silu(ref).numpy().T
    check("causal depthwise conv + SiLU == torch conv1d(padding=W-1)[:T]", maxabs(out, ref) < 1e-13,
          f"max abs {maxabs(out, ref):.1e}")
    o1, h1 = R.causal_conv_silu(raw[:9], w)
    o2, _ = R.causal_conv_silu(raw[9:], w, h1)
    check("conv prefix + continuation from history == full conv",
          maxabs(np.concatenate([o1, o2]), out) < 1e-14)
    xs = np.array([-50.0, -20.0, -1.0, 0.0, 3.0, 19.9, 20.0, 20.1, 35.0])
    sp = R.softplus_torch(xs)
    spt = F.softplus(torch.tensor(xs)).numpy()
    check("softplus == torch softplus (threshold 20)", maxabs(sp, spt) < 1e-14, f"{maxabs(sp, spt):.1e}")
    x = rng.standard_normal(1000) * 3
    rb = R.round_bf16(x)
    tb = torch.tensor(x, dtype=torch.float32).to(torch.bfloat16).to(torch.float64).numpy()
    check("round_bf16 == torch float32->bfloat16 rounding", np.array_equal(rb, tb))


# --------------------------------------------------------------------------------------
# (b) MLA absorbed form
# --------------------------------------------------------------------------------------

def mla_absorbed(q, c_hat, k_r, W, p, cfg):
    """Decode-style absorbed MLA: each query t attends to cached [c_hat ; k_r] of 0..t."""
    H, nope, rope, vd, Rk = cfg.mla_heads, cfg.nope, cfg.rope, cfg.vdim, cfg.kv_lora
    Wkvb = W[p + "kv_b_proj.weight"].reshape(H, nope + vd, Rk)
    W_UK, W_UV = Wkvb[:, :nope, :], Wkvb[:, nope:, :]
    scale = (nope + rope) ** -0.5
    T = q.shape[0]
    out = np.zeros((T, H, vd))
    for t in range(T):
        cache = np.concatenate([c_hat[:t + 1], k_r[:t + 1]], axis=1)     # [t+1, R+rope]
        for h in range(H):
            q_lat = W_UK[h].T @ q[t, h, :nope]
            qt = np.concatenate([q_lat, q[t, h, nope:]])
            s = cache @ qt * scale
            a = np.exp(s - s.max())
            a /= a.sum()
            o_lat = a @ c_hat[:t + 1]
            out[t, h] = W_UV[h] @ o_lat
    return out.reshape(T, H * vd)


def check_mla(rng):
    cfg, W = tiny_model(rng, {"num_attention_heads": 5, "qk_nope_head_dim": 12, "qk_rope_head_dim": 6,
                              "v_head_dim": 10, "kv_lora_rank": 20})
    c = R.Cfg(cfg)
    p = "model.layers.2.self_attn."
    x = rng.standard_normal((19, c.hidden))
    q, c_hat, k_r = R.mla_project(x, W, p, c)
    e = R.mla_attend_expanded(q, c_hat, k_r, W, p, c)
    a = mla_absorbed(q, c_hat, k_r, W, p, c)
    check("MLA absorbed (576-style latent cache) == expanded NoPE MLA", rel(a, e) < 1e-13, f"rel {rel(a, e):.1e}")
    full, _ = R.mla_layer(x, W, p, c)
    o1, cache = R.mla_layer(x[:11], W, p, c)
    o2, _ = R.mla_layer(x[11:], W, p, c, cache)
    check("MLA prefix(11) + continuation with latent cache == full", rel(np.concatenate([o1, o2]), full) < 1e-13)
    # direct per-head softmax written out longhand for one query
    t, h = 7, 3
    kv = x @ W[p + "kv_a_proj_with_mqa.weight"].T
    ch = kv[:, :20] / np.sqrt((kv[:, :20] ** 2).mean(-1, keepdims=True) + 1e-6) * W[p + "kv_a_layernorm.weight"]
    kvb = (ch @ W[p + "kv_b_proj.weight"].T).reshape(19, 5, 22)
    keys = np.concatenate([kvb[:t + 1, h, :12], kv[:t + 1, 20:26]], axis=1)
    qq = (x @ W[p + "q_proj.weight"].T).reshape(19, 5, 18)[t, h]
    s = keys @ qq / np.sqrt(18.0)
    pr = np.exp(s - s.max()); pr /= pr.sum()
    oh = pr @ kvb[:t + 1, h, 12:]
    check("MLA longhand single head/query", maxabs(oh, e[t].reshape(5, 10)[h]) < 1e-13)


# --------------------------------------------------------------------------------------
# (c) MoE routing, hand-computed
# --------------------------------------------------------------------------------------

def logit(p):
    return np.log(p) - np.log1p(-p)


def check_moe():
    base = {"num_experts": 8, "num_experts_per_token": 3, "routed_scaling_factor": 2.446,
            "moe_renormalize": True, "num_expert_group": 2, "topk_group": 1, "use_grouped_topk": True,
            "moe_router_activation_func": "sigmoid", "hidden_size": 8, "num_hidden_layers": 1,
            "vocab_size": 8}
    s = np.array([0.9, 0.1, 0.2, 0.3, 0.5, 0.4, 0.7, 0.7])
    lg = logit(s)
    lg[7] = lg[6]                            # exact tie between experts 6 and 7
    s = R.sigmoid(lg)
    bias = np.array([-0.15, 0.0, 0.0, 0.0, 0.0, 0.2, 0.0, 0.0])
    # s' = [0.75, .1, .2, .3 | .5, .6, .7, .7]; group scores (top-2 sum): 1.05 vs 1.4 -> group 1
    # top-3 in group 1: 6, 7 (tie, lower index first), 5 (0.6 > 0.5)
    # weights use the UNBIASED s: [.7, .7, .4] / 1.8 * 2.446
    c = R.Cfg(base)
    idx, w = R.route(lg, bias, c)
    exp_w = np.array([0.7, 0.7, 0.4]) / 1.8 * 2.446
    check("MoE grouped top-k selects [6,7,5]", list(idx) == [6, 7, 5], f"got {list(idx)}")
    check("MoE weights unbiased, renormalised, scaled", np.allclose(w, exp_w, rtol=0, atol=1e-12),
          f"got {np.round(w, 6).tolist()} want {np.round(exp_w, 6).tolist()}")
    # biased weights would have been [.7,.7,.6]/2.0*2.446 — make sure we are not there
    check("MoE weights differ from the biased variant", maxabs(w, np.array([0.7, 0.7, 0.6]) / 2.0 * 2.446) > 0.05)
    # ungrouped: top-3 over all s' -> 0 (0.75), 6, 7
    c1 = R.Cfg(dict(base, num_expert_group=1))
    idx, w = R.route(lg, bias, c1)
    check("MoE ungrouped top-k selects [0,6,7]", list(idx) == [0, 6, 7], f"got {list(idx)}")
    check("MoE ungrouped weights", np.allclose(w, np.array([0.9, 0.7, 0.7]) / 2.3 * 2.446, atol=1e-12))
    # use_grouped_topk false ignores groups
    c2 = R.Cfg(dict(base, use_grouped_topk=False))
    idx, _ = R.route(lg, bias, c2)
    check("MoE use_grouped_topk=false ignores groups", list(idx) == [0, 6, 7], f"got {list(idx)}")
    # no renormalisation
    c3 = R.Cfg(dict(base, moe_renormalize=False))
    idx, w = R.route(lg, bias, c3)
    check("MoE moe_renormalize=false: w = s * scale",
          list(idx) == [6, 7, 5] and np.allclose(w, np.array([0.7, 0.7, 0.4]) * 2.446, atol=1e-12))
    # masked groups are excluded even when kept experts have negative s' (mask is -inf, not 0)
    bias2 = np.array([-0.15, 0.0, 0.0, 0.0, -1.0, -1.0, 0.0, 0.0])
    # s' = [.75,.1,.2,.3 | -.5,-.6,.7,.7]; groups 1.05 vs 1.4 -> group 1; top-3: 6, 7, 4
    idx, w = R.route(lg, bias2, c)
    check("MoE masked group never selected (kept experts with negative s')", list(idx) == [6, 7, 4],
          f"got {list(idx)}")
    check("MoE weights for that case", np.allclose(w, np.array([0.7, 0.7, 0.5]) / 1.9 * 2.446, atol=1e-12))
    # topk_group 2 of 4 groups
    c4 = R.Cfg(dict(base, num_expert_group=4, topk_group=2, num_experts_per_token=2))
    # groups (pairs): [.75+.1=.85], [.2+.3=.5], [.5+.6=1.1], [1.4] -> groups 3, 2 -> top-2: 6, 7
    idx, _ = R.route(lg, bias, c4)
    check("MoE 4 groups keep 2, top-2", list(idx) == [6, 7], f"got {list(idx)}")
    # full moe_layer on one token vs longhand
    rng = np.random.default_rng(5)
    D, I, E = 8, 6, 8
    W = {"gate.weight": rng.standard_normal((E, D)), "gate.e_score_correction_bias": rng.standard_normal(E) * 0.1,
         "shared_experts.gate_proj.weight": rng.standard_normal((I, D)),
         "shared_experts.up_proj.weight": rng.standard_normal((I, D)),
         "shared_experts.down_proj.weight": rng.standard_normal((D, I))}
    for e in range(E):
        W[f"experts.{e}.w1.weight"] = rng.standard_normal((I, D))
        W[f"experts.{e}.w3.weight"] = rng.standard_normal((I, D))
        W[f"experts.{e}.w2.weight"] = rng.standard_normal((D, I))
    c5 = R.Cfg(dict(base, num_shared_experts=1))
    x = rng.standard_normal((1, D))
    out = R.moe_layer(x, W, "", c5)
    lgt = W["gate.weight"] @ x[0]
    sg = 1 / (1 + np.exp(-lgt))
    idx, w = R.route(lgt, W["gate.e_score_correction_bias"], c5)
    silu = lambda a: a / (1 + np.exp(-a))  # noqa: E731
    ref = np.zeros(D)
    for e, we in zip(idx, w):
        ref += we * (W[f"experts.{e}.w2.weight"] @ (silu(W[f"experts.{e}.w1.weight"] @ x[0]) * (W[f"experts.{e}.w3.weight"] @ x[0])))
    ref += W["shared_experts.down_proj.weight"] @ (silu(W["shared_experts.gate_proj.weight"] @ x[0]) * (W["shared_experts.up_proj.weight"] @ x[0]))
    check("MoE layer longhand (routed + shared)", maxabs(out[0], ref) < 1e-12 and abs(w.sum() - 2.446) < 1e-12
          and np.allclose(w / w.sum(), sg[idx] / sg[idx].sum()))


# --------------------------------------------------------------------------------------
# tiny random model + (d) safetensors
# --------------------------------------------------------------------------------------

TINY = {
    "architectures": ["KimiLinearForCausalLM"], "model_type": "kimi_linear",
    "hidden_size": 40, "num_hidden_layers": 5, "vocab_size": 97, "intermediate_size": 56,
    "rms_norm_eps": 1e-5, "num_attention_heads": 3, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4,
    "v_head_dim": 6, "kv_lora_rank": 12, "q_lora_rank": None, "mla_use_nope": True,
    "num_experts": 6, "num_experts_per_token": 2, "num_shared_experts": 2, "moe_intermediate_size": 10,
    "first_k_dense_replace": 1, "moe_layer_freq": 1, "routed_scaling_factor": 2.446,
    "moe_renormalize": True, "num_expert_group": 2, "topk_group": 1, "use_grouped_topk": True,
    "moe_router_activation_func": "sigmoid", "tie_word_embeddings": False,
    "linear_attn_config": {"num_heads": 3, "head_dim": 8, "short_conv_kernel_size": 4,
                           "kda_layers": [1, 2, 4, 5], "full_attn_layers": [3]},
}


def tiny_model(rng, overrides=None):
    """Random model as {name: (dtype, array)} rounded to the stored dtype; returns (cfg, W float64)."""
    cfg = json.loads(json.dumps(TINY))
    cfg.update(overrides or {})
    st = tiny_tensors(rng, cfg)
    W = {n: (R.round_bf16(a) if dt == "BF16" else a.astype(np.float32).astype(np.float64)) for n, (dt, a) in st.items()}
    return cfg, W


def tiny_tensors(rng, cfg):
    """Random tensors {name: (dtype, array)} for a (Kimi Linear or K3) config dict; K3
    features are generated when their keys are on, K3 layout (prefix, vision tensors, 1-D
    A_log padded to max(H, head_dim)) when the config has a text_config."""
    c = R.Cfg(cfg)
    D = c.hidden
    pre = c.prefix
    t = {}

    def lin(name, o, i, dt="BF16"):
        t[pre + name] = (dt, rng.standard_normal((o, i)) / np.sqrt(i))

    def vec(name, n, lo=0.7, hi=1.3, dt="BF16"):
        t[pre + name] = (dt, rng.uniform(lo, hi, n))

    def res(name):  # AttnRes score weights: norm weight [D] and proj [1, D]
        vec(name + "_norm.weight", D, 0.5, 1.5)
        t[pre + name + "_proj.weight"] = ("BF16", rng.standard_normal((1, D)) * 1.5 / np.sqrt(D))

    t[pre + "model.embed_tokens.weight"] = ("BF16", rng.standard_normal((c.vocab, D)))
    vec("model.norm.weight", D)
    if not c.tie:
        lin("lm_head.weight", c.vocab, D)
    if c.attn_res_bs:
        res("model.output_attn_res")
    if c.k3_layout:  # vision tensors that a text-only loader must ignore (odd shapes on purpose)
        t["vision_tower.patch_embed.proj.weight"] = ("BF16", rng.standard_normal((5, 3, 2, 2)))
        t["vision_tower.blocks.0.norm.weight"] = ("F32", rng.standard_normal(7))
        t["mm_projector.proj.0.weight"] = ("BF16", rng.standard_normal((D + 3, 11)))
    H, K = c.kda_heads, c.kda_dim
    for i in range(c.n_layers):
        p = f"model.layers.{i}."
        vec(p + "input_layernorm.weight", D)
        vec(p + "post_attention_layernorm.weight", D)
        if c.attn_res_bs:
            res(p + "self_attention_res")
            res(p + "mlp_res")
        a = p + "self_attn."
        if c.is_kda(i):
            for n in "qkv":
                lin(a + f"{n}_proj.weight", H * K, D)
                t[pre + a + f"{n}_conv1d.weight"] = ("BF16", rng.standard_normal((H * K, 1, c.conv_w)) * 0.5)
            lin(a + "f_a_proj.weight", K, D)
            lin(a + "f_b_proj.weight", H * K, K)
            t[pre + a + "dt_bias"] = ("F32", rng.standard_normal(H * K))
            if c.k3_layout:
                n_a = max(H, K)  # padded; the padding must never be read
                a_log = np.concatenate([rng.uniform(-1.0, 1.0, H), np.full(n_a - H, 50.0)])
                t[pre + a + "A_log"] = ("F32", a_log)
            else:
                t[pre + a + "A_log"] = ("F32", rng.uniform(-1.0, 1.0, (1, 1, H, 1)))
            lin(a + "b_proj.weight", H, D)
            if c.full_rank_gate:
                lin(a + "g_proj.weight", H * K, D)
            else:
                lin(a + "g_a_proj.weight", K, D)
                lin(a + "g_b_proj.weight", H * K, K)
            vec(a + "o_norm.weight", K)
            lin(a + "o_proj.weight", D, H * K)
        else:
            Hm = c.mla_heads
            if c.q_lora:
                lin(a + "q_a_proj.weight", int(c.q_lora), D)
                vec(a + "q_a_layernorm.weight", int(c.q_lora))
                lin(a + "q_b_proj.weight", Hm * (c.nope + c.rope), int(c.q_lora))
            else:
                lin(a + "q_proj.weight", Hm * (c.nope + c.rope), D)
            lin(a + "kv_a_proj_with_mqa.weight", c.kv_lora + c.rope, D)
            vec(a + "kv_a_layernorm.weight", c.kv_lora)
            lin(a + "kv_b_proj.weight", Hm * (c.nope + c.vdim), c.kv_lora)
            if c.mla_out_gate:
                lin(a + "g_proj.weight", Hm * c.vdim, D)
            lin(a + "o_proj.weight", D, Hm * c.vdim)
        if c.is_moe(i):
            m = p + "block_sparse_moe."
            I = int(c.raw["moe_intermediate_size"])
            Din = c.latent or D
            lin(m + "gate.weight", c.n_experts, D)
            t[pre + m + "gate.e_score_correction_bias"] = ("F32", rng.standard_normal(c.n_experts) * 0.05)
            for e in range(c.n_experts):
                lin(m + f"experts.{e}.w1.weight", I, Din)
                lin(m + f"experts.{e}.w3.weight", I, Din)
                lin(m + f"experts.{e}.w2.weight", Din, I)
            if c.latent:
                lin(m + "routed_expert_down_proj.weight", c.latent, D)
                lin(m + "routed_expert_up_proj.weight", D, c.latent)
                if c.latent_norm:
                    vec(m + "routed_expert_norm.weight", c.latent)
            if c.n_shared:
                Is = I * c.n_shared
                lin(m + "shared_experts.gate_proj.weight", Is, D)
                lin(m + "shared_experts.up_proj.weight", Is, D)
                lin(m + "shared_experts.down_proj.weight", D, Is)
        else:
            I = int(c.raw["intermediate_size"])
            lin(p + "mlp.gate_proj.weight", I, D)
            lin(p + "mlp.up_proj.weight", I, D)
            lin(p + "mlp.down_proj.weight", D, I)
    return t


def check_safetensors_and_model(rng):
    with tempfile.TemporaryDirectory() as td:
        # mixed-dtype round trip
        x = rng.standard_normal((3, 5)) * 10
        tens = {"a.bf16": ("BF16", x), "b.f16": ("F16", x[0]), "c.f32": ("F32", x.T),
                "d.scalar": ("F32", np.array(3.5)), "e.big": ("BF16", np.array([1e30, -3e-30, 0.0, 65504.0, 1.0 + 2 ** -8]))}
        f = os.path.join(td, "t.safetensors")
        R.write_safetensors(f, tens, metadata={"format": "pt"})
        got, meta = R.read_safetensors(f)
        check("safetensors metadata read back", meta == {"format": "pt"})
        check("safetensors BF16 round trip", got["a.bf16"].shape == (3, 5) and np.array_equal(got["a.bf16"], R.round_bf16(x)))
        check("safetensors F16 round trip", np.array_equal(got["b.f16"], x[0].astype(np.float16).astype(np.float64)))
        check("safetensors F32 round trip", np.array_equal(got["c.f32"], x.T.astype(np.float32).astype(np.float64)))
        check("safetensors scalar shape []", got["d.scalar"].shape == () and float(got["d.scalar"]) == 3.5)
        check("bf16 rounding: 1+2^-8 ties to even -> 1.0", float(got["e.big"][4]) == 1.0)
        # raw layout: header length + JSON; BF16 data equals upper halves of float32
        with open(f, "rb") as fh:
            raw = fh.read()
        n = int.from_bytes(raw[:8], "little")
        hdr = json.loads(raw[8:8 + n])
        b0, b1 = hdr["a.bf16"]["data_offsets"]
        bits = np.frombuffer(raw[8 + n + b0:8 + n + b1], dtype="<u2")
        check("safetensors BF16 bytes decode via (u16<<16) as f32", np.array_equal(R.bf16_bits_to_f64(bits).reshape(3, 5), got["a.bf16"]))

        # whole tiny model: write -> read -> forward; prefix + continuation == full
        for over in ({}, {"tie_word_embeddings": True, "num_expert_group": 1, "moe_renormalize": False}):
            cfg = json.loads(json.dumps(TINY))
            cfg.update(over)
            st = tiny_tensors(rng, cfg)
            md = os.path.join(td, "m")
            os.makedirs(md, exist_ok=True)
            with open(os.path.join(md, "config.json"), "w") as fh:
                json.dump(cfg, fh)
            R.write_safetensors(os.path.join(md, "model.safetensors"), st)
            cfg2, W = R.load_model_dir(md)
            toks = rng.integers(0, cfg["vocab_size"], 37).tolist()
            full = R.forward(cfg2, W, toks)
            states = [None] * cfg["num_hidden_layers"]
            l1 = R.forward(cfg2, W, toks[:20], states=states)
            l2 = R.forward(cfg2, W, toks[20:], states=states)
            e = rel(np.concatenate([l1, l2]), full)
            check(f"model prefix(20)+continuation(17) == full forward {over or ''}", e < 1e-12, f"rel {e:.1e}")
            for t0 in (5, 19):  # causality: logits at t0 depend only on tokens <= t0
                lt = R.forward(cfg2, W, toks[:t0 + 1])
                check(f"model causal at position {t0}", rel(lt[t0], full[t0]) < 1e-12)
            outf = os.path.join(td, "l.bin")
            r = subprocess.run([sys.executable, R.__file__, "--model", md, "--tokens", ",".join(map(str, toks)),
                                "--out", outf], capture_output=True, text=True)
            ok = r.returncode == 0 and os.path.getsize(outf) == 4 * len(toks) * cfg["vocab_size"]
            if ok:
                cli = np.fromfile(outf, dtype="<f4").reshape(len(toks), cfg["vocab_size"])
                ok = maxabs(cli, full.astype(np.float32)) == 0.0
            check("CLI writes float32 [T, vocab] equal to forward()", ok, r.stderr.strip()[-300:])
            check("logits finite and non-trivial", np.isfinite(full).all() and np.std(full) > 0.1)


def main():
    t0 = time.time()
    rng = np.random.default_rng(1234)
    check_kda(rng)
    check_torch_helpers(rng)
    check_mla(rng)
    check_moe()
    check_safetensors_and_model(rng)
    sys.modules.setdefault("selfcheck_ref", sys.modules[__name__])   # one FAILS list for both files
    import selfcheck_k3  # noqa: E402  (the Kimi-K3 checks)
    selfcheck_k3.check_k3(rng)
    print(f"selfcheck: {len(FAILS)} failure(s), {time.time() - t0:.1f}s")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())

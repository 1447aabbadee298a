#!/usr/bin/python3
"""Self-checks of the float64 reference's Kimi-K3 parts (kimi_ref.py, docs/model.md#k3) that
need no C++ engine; run by selfcheck_ref.py, which owns the check() bookkeeping.

 (e) AttnRes mix against hand-computed cases and its block bookkeeping against a longhand
     trace; the lower-bound gate and SiTU against their formulas; q-LoRA + gated MLA, latent
     MoE and the full-rank KDA gate against longhand layers; prefix + continuation == full
     forward on in-memory K3 variants; the K3 checkpoint layout (prefix, vision tensors
     ignored, padded A_log, sharded index) through the writer, the loader and the CLI.
"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kimi_ref as R  # noqa: E402
from selfcheck_ref import TINY, check, maxabs, rel, tiny_tensors  # noqa: E402



TINY_K3_TEXT = {
    "model_type": "kimi_linear",
    "hidden_size": 40, "num_hidden_layers": 7, "vocab_size": 97, "intermediate_size": 56,
    "rms_norm_eps": 1e-5, "num_attention_heads": 2, "num_key_value_heads": 2,
    "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 6, "kv_lora_rank": 12,
    "q_lora_rank": 10, "mla_use_nope": True, "mla_use_output_gate": True,
    "hidden_act": "situ", "activation_situ_beta": 1.5, "activation_situ_linear_beta": 2.0,
    "num_experts": 6, "num_experts_per_token": 3, "num_shared_experts": 2, "moe_intermediate_size": 10,
    "routed_expert_hidden_size": 22, "latent_moe_use_norm": True,
    "first_k_dense_replace": 1, "moe_layer_freq": 1, "routed_scaling_factor": 1.7,
    "moe_renormalize": True, "num_expert_group": 1, "topk_group": 1, "use_grouped_topk": True,
    "moe_router_activation_func": "sigmoid", "tie_word_embeddings": False,
    "attn_res_block_size": 3,
    "linear_attn_config": {"num_heads": 3, "head_dim": 8, "short_conv_kernel_size": 4,
                           "kda_layers": [1, 2, 3, 5, 6], "full_attn_layers": [4, 7],
                           "use_full_rank_gate": True, "gate_lower_bound": -5.0},
}


def k3_config(text_over=None, la_over=None):
    t = json.loads(json.dumps(TINY_K3_TEXT))
    t.update(text_over or {})
    t["linear_attn_config"].update(la_over or {})
    return {"architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3",
            "text_config": t, "vision_config": {"hidden_size": 5, "num_hidden_layers": 1}}


def widen(st):
    return {n: (R.round_bf16(a) if dt == "BF16" else a.astype(np.float32).astype(np.float64)) for n, (dt, a) in st.items()}


def check_attn_res_mix(rng):
    # hand case: D = 2, T = 1, one bank B1 = [3, 4], P = [1, 0], w_norm = [1, 2], w_proj = [[0.5, 0.25]]
    # -> w = [0.5, 0.5]; eps 0: rms(B1) = sqrt(12.5), score_B1 = 0.5 * 7 / sqrt(12.5);
    #    rms(P) = sqrt(0.5), score_P = 0.5 * 1 / sqrt(0.5) = sqrt(0.5)
    B1 = np.array([[3.0, 4.0]])
    P = np.array([[1.0, 0.0]])
    wn, wp = np.array([1.0, 2.0]), np.array([[0.5, 0.25]])
    s1, sp = 3.5 / np.sqrt(12.5), np.sqrt(0.5)
    a1 = 1.0 / (1.0 + np.exp(sp - s1))
    want = a1 * B1 + (1 - a1) * P
    got = R.attn_res_mix(P, [B1], wn, wp, 0.0)
    check("AttnRes mix hand case (raw entries, softmax incl. P)", maxabs(got, want) < 1e-15,
          f"got {got.ravel().tolist()} want {want.ravel().tolist()}")
    # the numbers themselves: s1 = 0.989949, sP = 0.707107, a1 = 1/(1+e^-0.282843) = 0.570243,
    # out = [3 a1 + (1 - a1), 4 a1] = [2.140486, 2.280972]
    check("AttnRes hand case numbers", abs(a1 - 0.570243) < 1e-6 and abs(float(got[0, 0]) - 2.140486) < 1e-6
          and abs(float(got[0, 1]) - 2.280972) < 1e-6, f"a1 {a1:.6f} out {got.ravel().round(6).tolist()}")
    # empty bank -> P itself; one entry per token; scale invariance of the scores (not the output)
    check("AttnRes mix with no banked blocks returns P", maxabs(R.attn_res_mix(P, [], wn, wp, 1e-5), P) == 0.0)
    D, T = 9, 4
    Bs = [rng.standard_normal((T, D)) * (i + 1) for i in range(3)]
    Pc = rng.standard_normal((T, D))
    wn, wp = rng.uniform(0.5, 1.5, D), rng.standard_normal((1, D))
    got = R.attn_res_mix(Pc, Bs, wn, wp, 1e-5)
    want = np.zeros((T, D))
    for t in range(T):
        ent = [b[t] for b in Bs] + [Pc[t]]
        sc = [sum(e[d] / np.sqrt(sum(v * v for v in e) / D + 1e-5) * wn[d] * wp[0, d] for d in range(D)) for e in ent]
        m = max(sc)
        ex = [np.exp(v - m) for v in sc]
        want[t] = sum(x / sum(ex) * e for x, e in zip(ex, ent))
    check("AttnRes mix longhand (3 blocks + P, 4 tokens)", maxabs(got, want) < 1e-13, f"{maxabs(got, want):.1e}")
    got2 = R.attn_res_mix(Pc, [b * 7.0 for b in Bs], wn, wp, 0.0)
    ok = maxabs(R.attn_res_mix(Pc, Bs, wn, wp, 0.0) - Pc, got2 - Pc) > 1e-3   # raw entries: scaling a bank changes output
    check("AttnRes output uses the raw (scaled) entries, scores the normalised ones", ok)


def check_k3_gate_and_act(rng):
    c = R.Cfg(k3_config())
    H, K = 3, 8
    A_log = rng.uniform(-3, 1, H)
    fb = np.concatenate([rng.standard_normal((40, H, K)) * 3, np.full((1, H, K), 1e4), np.full((1, H, K), -1e4)])
    g = R.kda_gate(fb, A_log, c)
    with np.errstate(over="ignore"):
        direct = -5.0 / (1.0 + np.exp(-np.exp(A_log)[None, :, None] * fb))
    check("lower-bound gate == lb*sigmoid(exp(A_log)*(f+dt_bias))", maxabs(g, direct) < 1e-14)
    gi = g[:40]
    check("lower-bound gate range (lb, 0) on finite inputs", bool((gi > -5.0).all() and (gi < 0.0).all()),
          f"min {gi.min():.4f} max {gi.max():.2e}")
    check("lower-bound gate saturates to [lb, 0] at +-1e4", bool((g >= -5.0).all() and (g <= 0.0).all()))
    c0 = R.Cfg(k3_config(la_over={"gate_lower_bound": None}))
    g0 = R.kda_gate(fb[:40], A_log, c0)
    check("no lower bound -> Kimi Linear gate -exp(A_log)*softplus", maxabs(g0, -np.exp(A_log)[None, :, None] * R.softplus_torch(fb[:40])) == 0.0
          and g0.min() < -5.0)
    # SiTU
    gate = np.linspace(-30, 30, 241)[:, None] + rng.standard_normal((241, 3))
    up = rng.standard_normal((241, 3)) * 6
    got = R.act_mul(gate, up, c)
    b, bl = 1.5, 2.0
    want = b * np.tanh(gate / b) / (1.0 + np.exp(-gate)) * (bl * np.tanh(up / bl))
    check("SiTU == b*tanh(g/b)*sigmoid(g) * bl*tanh(u/bl)", maxabs(got, want) < 1e-13, f"{maxabs(got, want):.1e}")
    check("SiTU bounded by beta*beta_lin", bool(np.abs(got).max() < b * bl))
    cn = R.Cfg(k3_config({"activation_situ_linear_beta": None}))
    got = R.act_mul(gate, up, cn)
    want = b * np.tanh(gate / b) / (1.0 + np.exp(-gate)) * up
    check("SiTU with activation_situ_linear_beta null: up passes through", maxabs(got, want) < 1e-13)
    cs = R.Cfg(k3_config({"hidden_act": "silu"}))
    check("hidden_act silu -> silu(g)*u", maxabs(R.act_mul(gate, up, cs), gate / (1 + np.exp(-gate)) * up) < 1e-13)
    # a missing beta is an error, not a silent silu
    try:
        R.Cfg(k3_config({"activation_situ_beta": None}))
        check("SiTU without activation_situ_beta rejected", False)
    except ValueError:
        check("SiTU without activation_situ_beta rejected", True)


def check_k3_mla_moe(rng):
    cfg = k3_config()
    c = R.Cfg(cfg)
    W = R.text_weights(c, widen(tiny_tensors(rng, cfg)))
    # MLA layer 3 (1-based 4): q-LoRA + output gate, longhand for one head/query
    p = "model.layers.3.self_attn."
    T, Hm, nope, rope, vd, Rk = 13, 2, 8, 4, 6, 12
    x = rng.standard_normal((T, 40))
    out, _ = R.mla_layer(x, W, p, c)
    qa = x @ W[p + "q_a_proj.weight"].T
    qa = qa / np.sqrt((qa ** 2).mean(-1, keepdims=True) + 1e-6) * W[p + "q_a_layernorm.weight"]
    q = (qa @ W[p + "q_b_proj.weight"].T).reshape(T, Hm, nope + rope)
    kv = x @ W[p + "kv_a_proj_with_mqa.weight"].T
    ch = kv[:, :Rk] / np.sqrt((kv[:, :Rk] ** 2).mean(-1, keepdims=True) + 1e-6) * W[p + "kv_a_layernorm.weight"]
    kvb = (ch @ W[p + "kv_b_proj.weight"].T).reshape(T, Hm, nope + vd)
    o = np.zeros((T, Hm, vd))
    for t in range(T):
        for h in range(Hm):
            keys = np.concatenate([kvb[:t + 1, h, :nope], kv[:t + 1, Rk:Rk + rope]], axis=1)
            s_ = keys @ q[t, h] / np.sqrt(nope + rope)
            pr = np.exp(s_ - s_.max())
            o[t, h] = (pr / pr.sum()) @ kvb[:t + 1, h, nope:]
    gate = 1.0 / (1.0 + np.exp(-(x @ W[p + "g_proj.weight"].T)))
    ref = (o.reshape(T, Hm * vd) * gate) @ W[p + "o_proj.weight"].T
    check("MLA q-LoRA (q_a_layernorm eps 1e-6) + sigmoid output gate, longhand", rel(out, ref) < 1e-13,
          f"rel {rel(out, ref):.1e}")
    # latent MoE, one token longhand
    m = "model.layers.2.block_sparse_moe."
    x1 = rng.standard_normal((1, 40))
    got = R.moe_layer(x1, W, m, c)
    lg = W[m + "gate.weight"] @ x1[0]
    sg = 1.0 / (1.0 + np.exp(-lg))
    sel = np.argsort(-(sg + W[m + "gate.e_score_correction_bias"]), kind="stable")[:3]
    w = sg[sel] / sg[sel].sum() * 1.7
    act = lambda a, u: 1.5 * np.tanh(a / 1.5) / (1 + np.exp(-a)) * 2.0 * np.tanh(u / 2.0)  # noqa: E731
    xl = W[m + "routed_expert_down_proj.weight"] @ x1[0]
    r = np.zeros(22)
    for e, we in zip(sel, w):
        q_ = m + f"experts.{e}."
        r += we * (W[q_ + "w2.weight"] @ act(W[q_ + "w1.weight"] @ xl, W[q_ + "w3.weight"] @ xl))
    r = r / np.sqrt((r ** 2).mean() + 1e-5) * W[m + "routed_expert_norm.weight"]
    ref = W[m + "routed_expert_up_proj.weight"] @ r
    sh = m + "shared_experts."
    ref += W[sh + "down_proj.weight"] @ act(W[sh + "gate_proj.weight"] @ x1[0], W[sh + "up_proj.weight"] @ x1[0])
    check("latent MoE longhand (router on full x, experts on latent, norm, up, shared on full x)",
          rel(got[0], ref) < 1e-13, f"rel {rel(got[0], ref):.1e}")
    # KDA full-rank gate: z = x g_proj^T
    p = "model.layers.0.self_attn."
    inp = R.kda_inputs(x, W, p, c)
    check("KDA full-rank output gate z = g_proj(x)", maxabs(inp["z"], x @ W[p + "g_proj.weight"].T) == 0.0)
    check("KDA lower-bound gate inside (lb, 0) in a layer", bool((inp["g"] > -5).all() and (inp["g"] < 0).all()))


def trace_attn_res(dump, n_layers, bs, W, eps):
    """Longhand docs/model.md#attnres-details bookkeeping from the dumped sublayer outputs; returns the mixes."""
    mix = R.attn_res_mix
    P = dump["embed"]
    B = []
    got = {}
    for L in range(n_layers):
        p = f"model.layers.{L}."
        P_in = P
        h = mix(P_in, B, W[p + "self_attention_res_norm.weight"], W[p + "self_attention_res_proj.weight"], eps) if B else P_in
        if L % bs == 0:
            B = B + [P_in]
            P = dump[f"layer{L}.attn_out"]
        else:
            P = P_in + dump[f"layer{L}.attn_out"]
        h2 = mix(P, B, W[p + "mlp_res_norm.weight"], W[p + "mlp_res_proj.weight"], eps)
        got[f"layer{L}.attn_mix"], got[f"layer{L}.ffn_mix"], got[f"layer{L}.n_blocks"] = h, h2, len(B)
        P = P + dump[f"layer{L}.ffn_out"]
        got[f"layer{L}.out"] = P
    got["output_mix"] = mix(P, B, W["model.output_attn_res_norm.weight"], W["model.output_attn_res_proj.weight"], eps)
    return got


def check_k3_model(rng):
    variants = [
        ("all K3 features, 7 layers, AttnRes bs 3 (blocks 3+3+1)", {}, {}),
        ("bs 2, no routed-expert norm, linear beta null", {"attn_res_block_size": 2, "latent_moe_use_norm": False,
                                                          "activation_situ_linear_beta": None}, {}),
        ("low-rank KDA gate, no lower bound, q_lora null, no MLA gate",
         {"q_lora_rank": None, "mla_use_output_gate": False}, {"use_full_rank_gate": False, "gate_lower_bound": None}),
        ("no AttnRes, no latent MoE, silu", {"attn_res_block_size": None, "routed_expert_hidden_size": None,
                                             "latent_moe_use_norm": False, "hidden_act": "silu"}, {}),
        ("bs 1 (every layer banks), top-k == num_experts", {"attn_res_block_size": 1, "num_experts_per_token": 6}, {}),
    ]
    for label, tover, lover in variants:
        cfg = k3_config(tover, lover)
        W = widen(tiny_tensors(rng, cfg))
        toks = rng.integers(0, 97, 31).tolist()
        dump = {}
        full = R.forward(cfg, W, toks, dump=dump)
        states = [None] * 7
        l1 = R.forward(cfg, W, toks[:17], states=states)
        l2 = R.forward(cfg, W, toks[17:21], states=states)
        l3 = R.forward(cfg, W, toks[21:], states=states)
        e = rel(np.concatenate([l1, l2, l3]), full)
        check(f"K3 prefix(17)+4+10 == full forward [{label}]", e < 1e-12 and np.isfinite(full).all()
              and np.std(full) > 0.1, f"rel {e:.1e}")
        lt = R.forward(cfg, W, toks[:9])
        check(f"K3 causal at position 8 [{label}]", rel(lt[8], full[8]) < 1e-12)
        c = R.Cfg(cfg)
        if c.attn_res_bs:
            got = trace_attn_res(dump, 7, c.attn_res_bs, R.text_weights(c, W), 1e-5)
            worst = max(maxabs(got[k], dump[k]) for k in got)
            nb = [int(dump[f"layer{L}.n_blocks"]) for L in range(7)]
            want_nb = [L // c.attn_res_bs + 1 for L in range(7)]
            check(f"K3 AttnRes bookkeeping re-traced longhand [{label}]", worst < 1e-12 and nb == want_nb,
                  f"max {worst:.1e}, blocks per layer {nb}")
    # a Kimi Linear (flat) config can switch K3 features on too
    flat = json.loads(json.dumps(TINY))
    flat.update({"hidden_act": "situ", "activation_situ_beta": 4.0, "activation_situ_linear_beta": 25.0,
                 "attn_res_block_size": 2, "routed_expert_hidden_size": 14, "latent_moe_use_norm": True,
                 "q_lora_rank": 9, "mla_use_output_gate": True})
    flat["linear_attn_config"].update({"use_full_rank_gate": True, "gate_lower_bound": -5.0})
    W = widen(tiny_tensors(rng, flat))
    check("flat (Kimi Linear layout) config with K3 features: no prefix",
          "model.layers.0.self_attn.g_proj.weight" in W and not any(k.startswith("language_model.") for k in W))
    toks = rng.integers(0, 97, 23).tolist()
    full = R.forward(flat, W, toks)
    states = [None] * 5
    l1 = R.forward(flat, W, toks[:12], states=states)
    l2 = R.forward(flat, W, toks[12:], states=states)
    check("flat config with K3 features: prefix + continuation == full", rel(np.concatenate([l1, l2]), full) < 1e-12)


def check_k3_layout(rng):
    cfg = k3_config()
    st = tiny_tensors(rng, cfg)
    W0 = widen(st)
    toks = rng.integers(0, 97, 29).tolist()
    ref = R.forward(cfg, W0, toks)
    names = sorted(st)
    check("K3 tensors: every text tensor under language_model., vision tensors present",
          all(n.startswith(("language_model.", "vision_tower.", "mm_projector.")) for n in names)
          and any(n.startswith("vision_tower.") for n in names) and any(n.startswith("mm_projector.") for n in names)
          and "language_model.lm_head.weight" in st and "language_model.model.output_attn_res_norm.weight" in st)
    a_log = st["language_model.model.layers.0.self_attn.A_log"]
    check("K3 A_log stored 1-D F32 padded to max(H, head_dim)", a_log[0] == "F32" and a_log[1].shape == (8,))
    # vision tensors ignored; A_log padding never read
    Wv = {k: v for k, v in W0.items() if k.startswith("language_model.")}
    check("K3 forward ignores vision_tower.* / mm_projector.*", maxabs(R.forward(cfg, Wv, toks), ref) == 0.0)
    Wp = dict(W0)
    for k in Wp:
        if k.endswith("A_log"):
            Wp[k] = Wp[k].copy()
            Wp[k][3:] = -123.0
    check("K3 A_log padding beyond H is never read", maxabs(R.forward(cfg, Wp, toks), ref) == 0.0)
    Ws = dict(W0)
    Ws["language_model.model.layers.0.self_attn.A_log"] = W0["language_model.model.layers.0.self_attn.A_log"][:2]
    try:
        R.forward(cfg, Ws, toks)
        check("K3 A_log shorter than H rejected", False)
    except ValueError:
        check("K3 A_log shorter than H rejected", True)
    with tempfile.TemporaryDirectory() as td:
        # single file
        md = os.path.join(td, "one")
        os.makedirs(md)
        with open(os.path.join(md, "config.json"), "w") as fh:
            json.dump(cfg, fh)
        R.write_safetensors(os.path.join(md, "model.safetensors"), st, metadata={"format": "pt"})
        c2, W2 = R.load_model_dir(md)
        check("K3 single-file round trip: same tensors, same logits",
              set(W2) == set(W0) and maxabs(R.forward(c2, W2, toks), ref) == 0.0)
        # sharded with index, in the HF naming
        md = os.path.join(td, "sharded")
        os.makedirs(md)
        with open(os.path.join(md, "config.json"), "w") as fh:
            json.dump(cfg, fh)
        n_sh = 3
        shards = [dict() for _ in range(n_sh)]
        for j, n in enumerate(names):
            shards[j % n_sh][n] = st[n]
        wmap = {}
        for j, sh in enumerate(shards):
            fn = f"model-{j + 1:05d}-of-{n_sh:05d}.safetensors"
            R.write_safetensors(os.path.join(md, fn), sh, metadata={"format": "pt"})
            wmap.update({n: fn for n in sh})
        with open(os.path.join(md, R.INDEX_NAME), "w") as fh:
            json.dump({"metadata": {"total_size": 0}, "weight_map": wmap}, fh)
        c3, W3 = R.load_model_dir(md)
        check("K3 sharded (index) round trip: same tensors, same logits",
              set(W3) == set(W0) and maxabs(R.forward(c3, W3, toks), ref) == 0.0)
        outf = os.path.join(td, "l.bin")
        r = subprocess.run([sys.executable, R.__file__, "--model", md, "--tokens", ",".join(map(str, toks)),
                            "--out", outf], capture_output=True, text=True)
        ok = r.returncode == 0 and os.path.getsize(outf) == 4 * len(toks) * 97
        if ok:
            ok = maxabs(np.fromfile(outf, dtype="<f4").reshape(len(toks), 97), ref.astype(np.float32)) == 0.0
        check("K3 CLI on the sharded directory", ok, r.stderr.strip()[-300:])
        # an index that disagrees with the shards is an error
        bad = dict(wmap)
        moved = names[0]
        bad[moved] = f"model-00002-of-{n_sh:05d}.safetensors" if wmap[moved].startswith("model-00001") else \
            f"model-00001-of-{n_sh:05d}.safetensors"
        expect_index_rejected(md, bad, "index naming the wrong shard rejected")
        expect_index_rejected(md, {n: f for n, f in wmap.items() if n != names[1]}, "index missing a tensor rejected")


def expect_index_rejected(md, weight_map, name):
    """Writes `weight_map` as the directory's index; loading must then raise ValueError."""
    with open(os.path.join(md, R.INDEX_NAME), "w") as fh:
        json.dump({"weight_map": weight_map}, fh)
    try:
        R.load_model_dir(md)
        check(name, False)
    except ValueError:
        check(name, True)


def check_k3(rng):
    check_attn_res_mix(rng)
    check_k3_gate_and_act(rng)
    check_k3_mla_moe(rng)
    check_k3_model(rng)
    check_k3_layout(rng)

#!/usr/bin/python3
"""Independent float64 reference implementation of the Kimi Linear / Kimi-K3 forward pass.

Written from docs/model.md (kda, mla, moe, decoder and, for Kimi-K3, k3 incl. attnres-details) only;
it shares no code with the C++ engine.  Everything is computed in float64 numpy on the
weights exactly as stored (bf16 / f16 / f32 values widened to float64).

Kimi-K3 layout: config.json with the text model under "text_config" (vision_config
ignored here), tensors prefixed "language_model." (vision_tower.* / mm_projector.* are loaded
into the weights dict under their full names but not read by the text model; vision_ref.py
computes image embeddings from them, which forward(..., input_embeds=...) puts in place of the
<|media_pad|> rows), optionally sharded with model.safetensors.index.json.  Every K3 feature is switched on by
its own key, so a Kimi Linear config may use them too (absent keys = Kimi Linear):
  hidden_act "situ" (+ activation_situ_beta, activation_situ_linear_beta)
  linear_attn_config.use_full_rank_gate, linear_attn_config.gate_lower_bound
  q_lora_rank, mla_use_output_gate
  routed_expert_hidden_size, latent_moe_use_norm
  attn_res_block_size (Block Attention Residuals)

CLI:
    /usr/bin/python3 kimi_ref.py --model DIR --tokens 1,2,3 --out FILE [--dump FILE.npz]
writes the logits of every position as little-endian float32 [T, vocab_size].

Library:
    logits = kimi_ref.forward_dir(model_dir, tokens)          # float64 [T, vocab]
    logits = kimi_ref.forward(cfg, weights, tokens)           # same, in-memory model
    logits = kimi_ref.forward(cfg, weights, tokens, input_embeds=(pad_id, embeds))
                                                              # rows tokens == pad_id <- embeds
"""

import argparse
import glob
import json
import os
import struct
import sys

import numpy as np

# --------------------------------------------------------------------------------------
# safetensors I/O (no external package)
# --------------------------------------------------------------------------------------

_ST_DTYPES = {
    "F64": (np.float64, 8),
    "F32": (np.float32, 4),
    "F16": (np.float16, 2),
    "BF16": (None, 2),
    "I64": (np.int64, 8),
    "I32": (np.int32, 4),
    "I16": (np.int16, 2),
    "I8": (np.int8, 1),
    "U8": (np.uint8, 1),
}


def bf16_bits_to_f64(bits):
    """uint16 bf16 bit patterns -> float64 (exact widening)."""
    u32 = bits.astype(np.uint32) << np.uint32(16)
    return u32.view(np.float32).astype(np.float64)


def f64_to_bf16_bits(x):
    """float -> uint16 bf16 bit patterns, round-to-nearest-even (NaN kept as NaN)."""
    f = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    u = f.view(np.uint32).astype(np.uint64)
    rounding = ((u >> np.uint64(16)) & np.uint64(1)) + np.uint64(0x7FFF)
    out = ((u + rounding) >> np.uint64(16)).astype(np.uint16)
    nan = np.isnan(f)
    if nan.any():
        out[nan] = np.uint16(0x7FC0)
    return out


def round_bf16(x):
    """Round float values to the nearest bf16 and widen back to float64."""
    return bf16_bits_to_f64(f64_to_bf16_bits(x))


def read_safetensors(path):
    """Return ({name: float64 ndarray}, metadata dict or None)."""
    with open(path, "rb") as fh:
        data = fh.read()
    if len(data) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    base = 8 + n
    meta = header.pop("__metadata__", None)
    out = {}
    for name, info in header.items():
        dt = info["dtype"]
        shape = tuple(int(s) for s in info["shape"])
        begin, end = (int(v) for v in info["data_offsets"])
        if dt not in _ST_DTYPES:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dt}")
        npdt, size = _ST_DTYPES[dt]
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if end - begin != count * size:
            raise ValueError(f"{path}: tensor {name}: byte size {end - begin} != {count}*{size}")
        raw = data[base + begin:base + end]
        if dt == "BF16":
            arr = bf16_bits_to_f64(np.frombuffer(raw, dtype="<u2"))
        else:
            arr = np.frombuffer(raw, dtype=np.dtype(npdt).newbyteorder("<")).astype(np.float64)
        out[name] = arr.reshape(shape)
    return out, meta


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: (dtype_str, ndarray)} with dtype_str in BF16/F16/F32.

    Values are converted to the stored dtype (bf16 with round-to-nearest-even)."""
    header = {}
    blobs = []
    off = 0
    for name in sorted(tensors):
        dt, arr = tensors[name]
        arr = np.asarray(arr)
        if dt == "BF16":
            b = f64_to_bf16_bits(arr).astype("<u2").tobytes()
        elif dt == "F16":
            b = arr.astype("<f2").tobytes()
        elif dt == "F32":
            b = arr.astype("<f4").tobytes()
        elif dt == "F64":
            b = arr.astype("<f8").tobytes()
        else:
            raise ValueError(dt)
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if metadata is not None:
        header["__metadata__"] = metadata
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((8 - len(hj) % 8) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(hj)))
        fh.write(hj)
        for b in blobs:
            fh.write(b)


INDEX_NAME = "model.safetensors.index.json"


def load_model_dir(model_dir):
    """Read config.json and the safetensors weights of a model directory.

    With model.safetensors.index.json the shards named by its weight_map are read and the
    map is checked both ways (every mapped tensor sits in its named shard, every tensor of
    a shard is mapped to that shard); otherwise every *.safetensors file is read.  Every tensor
    is returned under its full name, so a K3 checkpoint's vision_tower.* / mm_projector.*
    tensors stay available (vision_ref.py); forward() reads only the text model's."""
    with open(os.path.join(model_dir, "config.json")) as fh:
        cfg = json.load(fh)
    index_path = os.path.join(model_dir, INDEX_NAME)
    wmap = None
    if os.path.exists(index_path):
        with open(index_path) as fh:
            wmap = json.load(fh)["weight_map"]
        files = [os.path.join(model_dir, f) for f in sorted(set(wmap.values()))]
        missing = [f for f in files if not os.path.exists(f)]
        if missing:
            raise FileNotFoundError(f"{INDEX_NAME} names missing shards: {missing[:3]}")
    else:
        files = sorted(glob.glob(os.path.join(model_dir, "*.safetensors")))
    if not files:
        raise FileNotFoundError(f"no *.safetensors in {model_dir}")
    weights = {}
    for f in files:
        w, _ = read_safetensors(f)
        dup = set(w) & set(weights)
        if dup:
            raise ValueError(f"duplicate tensors across shards: {sorted(dup)[:3]}")
        if wmap is not None:
            base = os.path.basename(f)
            stray = [n for n in w if wmap.get(n) != base]
            if stray:
                raise ValueError(f"{base}: tensors not mapped to this shard by {INDEX_NAME}: {stray[:3]}")
        weights.update(w)
    if wmap is not None:
        absent = sorted(set(wmap) - set(weights))
        if absent:
            raise ValueError(f"{INDEX_NAME} maps tensors no shard holds: {absent[:3]}")
    dequantize_mxfp4(cfg, weights)
    return cfg, weights


_E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def dequantize_mxfp4(cfg, weights):
    """compressed-tensors mxfp4-pack-quantized (docs/mxfp4.md#format), read exactly. The file decides
    the form: every X.weight_packed (uint8 [out, in/2], even column in the low nibble) with its
    X.weight_scale (uint8 E8M0 [out, in/32], 2^(s-127)) becomes a float64 X.weight, whatever
    the config's targets/ignore say (the published K3 stores modules its config targets, such as
    the router, as plain BF16). The config must declare the format; a module stored both ways is
    an error."""
    packed_names = [n for n in weights if n.endswith(".weight_packed")]
    if not packed_names:
        return
    q = cfg.get("quantization_config") or cfg.get("text_config", {}).get("quantization_config")
    if not q:
        raise ValueError(f"{packed_names[0]}: MXFP4 tensors but no quantization_config")
    groups = q.get("config_groups", {})
    fmts = {g.get("format", q.get("format")) for g in groups.values()}
    if fmts != {"mxfp4-pack-quantized"}:
        raise ValueError(f"quantization format {sorted(map(str, fmts))} is not read by this reference")
    for name in packed_names:
        base = name[: -len(".weight_packed")]
        if base + ".weight" in weights:
            raise ValueError(f"{base}: stored both dense and packed")
        packed = weights.pop(name).astype(np.uint8)
        scale = weights.pop(base + ".weight_scale").astype(np.int64)
        out, half = packed.shape
        nib = np.empty((out, half * 2), dtype=np.uint8)
        nib[:, 0::2] = packed & 15
        nib[:, 1::2] = packed >> 4
        factor = np.repeat(np.ldexp(1.0, scale - 127), 32, axis=1)
        weights[base + ".weight"] = _E2M1[nib] * factor


# --------------------------------------------------------------------------------------
# elementwise helpers (float64)
# --------------------------------------------------------------------------------------

def sigmoid(x):
    x = np.asarray(x, dtype=np.float64)
    return np.exp(-np.logaddexp(0.0, -x))


def silu(x):
    return x * sigmoid(x)


def softplus_torch(x):
    """torch.nn.functional.softplus(beta=1, threshold=20)."""
    x = np.asarray(x, dtype=np.float64)
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rms_noweight(x, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


def l2norm(x, eps=1e-6):
    """x / sqrt(sum(x^2) + eps) over the last axis (fla l2norm form, docs/model.md#kda-conv)."""
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + eps)


def act_mul(gate, up, cfg):
    """Gated activation of every MLP / expert: silu(gate)*up, or SiTU (docs/model.md#situ):
    beta*tanh(gate/beta)*sigmoid(gate) * beta_lin*tanh(up/beta_lin) (up passes through when
    activation_situ_linear_beta is null)."""
    if cfg.act == "silu":
        return silu(gate) * up
    b = cfg.situ_beta
    a = b * np.tanh(gate / b) * sigmoid(gate)
    bl = cfg.situ_lin_beta
    return a * (up if bl is None else bl * np.tanh(up / bl))


def linear(x, w):
    """x [..., in] · w[out, in]^T"""
    return x @ w.T


# --------------------------------------------------------------------------------------
# config helpers
# --------------------------------------------------------------------------------------

K3_ARCH = "KimiK3ForConditionalGeneration"


class Cfg:
    def __init__(self, top):
        self.top = top
        archs = top.get("architectures") or []
        # Kimi-K3 (multimodal wrapper): text model under text_config, tensors under
        # "language_model."; vision_config / vision tensors are ignored.
        self.k3_layout = "text_config" in top or K3_ARCH in archs or top.get("model_type") == "kimi_k3"
        if self.k3_layout:
            if not isinstance(top.get("text_config"), dict):
                raise ValueError("Kimi-K3 config without a text_config object")
            c = top["text_config"]
            self.prefix = "language_model."
        else:
            c = top
            self.prefix = ""
        self.raw = c
        self.hidden = int(c["hidden_size"])
        self.n_layers = int(c["num_hidden_layers"])
        self.vocab = int(c["vocab_size"])
        self.eps = float(c.get("rms_norm_eps", 1e-5))
        la = c.get("linear_attn_config") or {}
        self.kda_layers = set(int(v) for v in (la.get("kda_layers") or []))
        self.full_attn_layers = set(int(v) for v in (la.get("full_attn_layers") or []))
        self.kda_heads = int(la.get("num_heads", 0) or 0)
        self.kda_dim = int(la.get("head_dim", 0) or 0)
        self.conv_w = int(la.get("short_conv_kernel_size", 4) or 4)
        self.mla_heads = int(c.get("num_attention_heads", 0) or 0)
        self.nope = int(c.get("qk_nope_head_dim", 0) or 0)
        self.rope = int(c.get("qk_rope_head_dim", 0) or 0)
        self.vdim = int(c.get("v_head_dim", 0) or 0)
        self.kv_lora = int(c.get("kv_lora_rank", 0) or 0)
        self.q_lora = c.get("q_lora_rank")
        self.mla_use_nope = bool(c.get("mla_use_nope", True))
        self.n_experts = int(c.get("num_experts", 0) or 0)
        self.top_k = int(c.get("num_experts_per_token", 0) or 0)
        self.n_shared = int(c.get("num_shared_experts", 0) or 0)
        self.first_dense = int(c.get("first_k_dense_replace", 0) or 0)
        self.moe_freq = int(c.get("moe_layer_freq", 1) or 1)
        self.renorm = bool(c.get("moe_renormalize", True))
        self.scale = float(c.get("routed_scaling_factor", 1.0))
        self.n_group = int(c.get("num_expert_group", 1) or 1)
        self.topk_group = int(c.get("topk_group", 1) or 1)
        self.grouped = bool(c.get("use_grouped_topk", True))
        self.router_act = c.get("moe_router_activation_func", "sigmoid")
        self.tie = bool(c.get("tie_word_embeddings", False))
        # ---- Kimi-K3 features (each on its own key; absent = Kimi Linear behaviour)
        self.act = c.get("hidden_act", "silu") or "silu"
        if self.act not in ("silu", "situ"):
            raise ValueError(f"hidden_act {self.act!r} not supported (silu, situ)")
        self.situ_beta = self.situ_lin_beta = None
        if self.act == "situ":
            if c.get("activation_situ_beta") is None:
                raise ValueError("hidden_act situ needs activation_situ_beta")
            self.situ_beta = float(c["activation_situ_beta"])
            lb = c.get("activation_situ_linear_beta")
            self.situ_lin_beta = None if lb is None else float(lb)
        self.full_rank_gate = bool(la.get("use_full_rank_gate", False))
        glb = la.get("gate_lower_bound")
        self.gate_lb = None if glb is None else float(glb)
        if self.gate_lb is not None and not self.gate_lb < 0:
            raise ValueError(f"gate_lower_bound {glb} must be negative (g in (lb, 0))")
        self.mla_out_gate = bool(c.get("mla_use_output_gate", False))
        lat = c.get("routed_expert_hidden_size")
        self.latent = int(lat) if lat else 0
        self.latent_norm = bool(c.get("latent_moe_use_norm", False))
        bs = c.get("attn_res_block_size")
        self.attn_res_bs = int(bs) if bs else 0
        if self.attn_res_bs < 0:
            raise ValueError(f"attn_res_block_size {bs} must be > 0 (or null/0 for plain residuals)")

    def is_kda(self, i):
        return (i + 1) in self.kda_layers

    def is_moe(self, i):
        return self.n_experts > 0 and i >= self.first_dense and i % self.moe_freq == 0


# --------------------------------------------------------------------------------------
# KDA (docs/model.md#kda)
# --------------------------------------------------------------------------------------

def causal_conv_silu(raw, w, hist=None):
    """Depthwise causal conv + SiLU.

    raw [T, C] pre-conv projections, w [C, 1, W] (or [C, W]); tap W-1 = current token.
    hist [W-1, C] previous raw projections (oldest first), zeros when None.
    Returns (out [T, C], new_hist [W-1, C])."""
    w = w.reshape(w.shape[0], -1)
    C, W = w.shape
    T = raw.shape[0]
    if hist is None:
        hist = np.zeros((W - 1, C))
    full = np.concatenate([hist, raw], axis=0)  # [W-1+T, C]
    out = np.zeros((T, C))
    for i in range(W):
        out += full[i:i + T] * w[:, i]
    return silu(out), full[full.shape[0] - (W - 1):].copy()


def kda_inputs(x, W, p, cfg, conv_hist=None):
    """Everything that precedes the recurrence.

    Returns dict with q, k (l2-normed, q scaled) [T,H,K], v [T,H,K], g [T,H,K] (log decay),
    beta [T,H], z [T,H*K] and the new conv histories."""
    H, K = cfg.kda_heads, cfg.kda_dim
    T = x.shape[0]
    hist = conv_hist or {}
    res = {"conv": {}}
    qkv = {}
    for n in ("q", "k", "v"):
        raw = linear(x, W[p + f"{n}_proj.weight"])
        out, nh = causal_conv_silu(raw, W[p + f"{n}_conv1d.weight"], hist.get(n))
        qkv[n] = out.reshape(T, H, K)
        res["conv"][n] = nh
    q, k, v = qkv["q"], qkv["k"], qkv["v"]
    q = l2norm(q) * (K ** -0.5)
    k = l2norm(k)
    f = linear(linear(x, W[p + "f_a_proj.weight"]), W[p + "f_b_proj.weight"])  # [T, H*K]
    A_log = W[p + "A_log"].reshape(-1)
    # Kimi Linear stores [1,1,H,1]; K3 a 1-D F32 padded beyond H: the first H are real
    if A_log.shape[0] < H:
        raise ValueError(f"{p}A_log has {A_log.shape[0]} values, expected at least {H}")
    A_log = A_log[:H]
    dt_bias = W[p + "dt_bias"].reshape(-1)
    g = kda_gate((f + dt_bias).reshape(T, H, K), A_log, cfg)
    beta = sigmoid(linear(x, W[p + "b_proj.weight"]))  # [T, H]
    if cfg.full_rank_gate:
        z = linear(x, W[p + "g_proj.weight"])  # [T, H*K]  (docs/model.md#k3-kda)
    else:
        z = linear(linear(x, W[p + "g_a_proj.weight"]), W[p + "g_b_proj.weight"])  # [T, H*K]
    res.update(q=q, k=k, v=v, g=g, beta=beta, z=z)
    return res


def kda_gate(fb, A_log, cfg):
    """Log-space forget gate g [T,H,K] from fb = f + dt_bias [T,H,K] and A_log [H].

    Kimi Linear (docs/model.md#kda-gates): -exp(A_log)*softplus(fb)                  (g <= 0)
    gate_lower_bound lb (docs/model.md#k3-kda): lb*sigmoid(exp(A_log)*fb)          (g in (lb, 0))"""
    A = np.exp(A_log)[None, :, None]
    if cfg.gate_lb is None:
        return -A * softplus_torch(fb)
    return cfg.gate_lb * sigmoid(A * fb)


def kda_recurrent(q, k, v, g, beta, S0=None):
    """Token-by-token KDA recurrence (docs/model.md#kda-recurrence).  q,k,g [T,H,K], v [T,H,V], beta [T,H].

    S0 [H,K,V] (zeros when None).  Returns (o [T,H,V], S [H,K,V])."""
    T, H, K = q.shape
    V = v.shape[-1]
    S = np.zeros((H, K, V)) if S0 is None else S0.copy()
    o = np.zeros((T, H, V))
    for t in range(T):
        S = S * np.exp(g[t])[:, :, None]                       # decay rows
        pred = np.einsum("hk,hkv->hv", k[t], S)                # S^T k
        u = beta[t][:, None] * (v[t] - pred)                   # delta
        S = S + k[t][:, :, None] * u[:, None, :]               # write
        o[t] = np.einsum("hk,hkv->hv", q[t], S)                # read after write
    return o, S


def kda_output(o, z, W, p, cfg):
    """Gated RMSNorm (sigmoid gate) per head + o_proj (docs/model.md#kda-output)."""
    T, H, V = o.shape
    y = rmsnorm(o, W[p + "o_norm.weight"], cfg.eps) * sigmoid(z.reshape(T, H, V))
    return linear(y.reshape(T, H * V), W[p + "o_proj.weight"])


def kda_layer(x, W, p, cfg, state=None):
    """state: None or dict(conv={q,k,v: hist}, S=[H,K,V]).  Returns (out, new_state)."""
    st = state or {}
    inp = kda_inputs(x, W, p, cfg, st.get("conv"))
    o, S = kda_recurrent(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], st.get("S"))
    return kda_output(o, inp["z"], W, p, cfg), {"conv": inp["conv"], "S": S}


# --------------------------------------------------------------------------------------
# MLA (docs/model.md#mla), expanded NoPE form
# --------------------------------------------------------------------------------------

def mla_project(x, W, p, cfg):
    """Returns q [T,H,nope+rope], c_hat [T,R], k_r [T,rope]."""
    H, nope, rope = cfg.mla_heads, cfg.nope, cfg.rope
    T = x.shape[0]
    if cfg.q_lora:
        qa = rmsnorm(linear(x, W[p + "q_a_proj.weight"]), W[p + "q_a_layernorm.weight"], 1e-6)
        q = linear(qa, W[p + "q_b_proj.weight"])
    else:
        q = linear(x, W[p + "q_proj.weight"])
    q = q.reshape(T, H, nope + rope)
    ckv = linear(x, W[p + "kv_a_proj_with_mqa.weight"])
    c = ckv[:, :cfg.kv_lora]
    k_r = ckv[:, cfg.kv_lora:cfg.kv_lora + rope]
    c_hat = rmsnorm(c, W[p + "kv_a_layernorm.weight"], 1e-6)
    return q, c_hat, k_r


def mla_attend_expanded(q, c_hat, k_r, W, p, cfg):
    """Causal softmax attention, keys/values materialised per head.  Returns [T, H*vdim]
    (before o_proj)."""
    H, nope, rope, vd = cfg.mla_heads, cfg.nope, cfg.rope, cfg.vdim
    T = q.shape[0]
    Tk = c_hat.shape[0]
    kv = linear(c_hat, W[p + "kv_b_proj.weight"]).reshape(Tk, H, nope + vd)
    k_nope, v = kv[:, :, :nope], kv[:, :, nope:]
    key = np.concatenate([k_nope, np.broadcast_to(k_r[:, None, :], (Tk, H, rope))], axis=-1)
    scale = (nope + rope) ** -0.5
    s = np.einsum("thd,uhd->htu", q, key) * scale  # [H, T, Tk]
    # query t sits at absolute position Tk - T + t
    pos_q = np.arange(T)[:, None] + (Tk - T)
    mask = np.arange(Tk)[None, :] <= pos_q
    s = np.where(mask[None], s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    a = e / e.sum(axis=-1, keepdims=True)
    o = np.einsum("htu,uhd->thd", a, v)
    return o.reshape(T, H * vd)


def mla_layer(x, W, p, cfg, cache=None):
    """cache: None or dict(c=[Tp,R], kr=[Tp,rope]).  Returns (out, new_cache)."""
    if not cfg.mla_use_nope:
        raise NotImplementedError("mla_use_nope=false (RoPE MLA) is not part of Kimi Linear")
    q, c_hat, k_r = mla_project(x, W, p, cfg)
    if cache is not None:
        c_hat = np.concatenate([cache["c"], c_hat], axis=0)
        k_r = np.concatenate([cache["kr"], k_r], axis=0)
    o = mla_attend_expanded(q, c_hat, k_r, W, p, cfg)
    if cfg.mla_out_gate:
        o = mla_output_gate(o, x, W, p, cfg)
    return linear(o, W[p + "o_proj.weight"]), {"c": c_hat, "kr": k_r}


def mla_output_gate(o, x, W, p, cfg):
    """docs/model.md#k3-mla: [T, H*v] attention output times sigmoid(g_proj(x)), x = the normed layer input."""
    return o * sigmoid(linear(x, W[p + "g_proj.weight"]))


# --------------------------------------------------------------------------------------
# MoE (docs/model.md#moe)
# --------------------------------------------------------------------------------------

def _topk_indices(vals, k):
    """Indices of the k largest values, ties broken by lower index."""
    order = np.argsort(-vals, kind="stable")
    return order[:k]


def route(logits, bias, cfg):
    """Router for one token.  logits [E] (fp64), bias [E] or None.

    Returns (expert indices [k], weights [k]) — weights are the UNBIASED scores,
    renormalised if configured, then scaled by routed_scaling_factor."""
    E = logits.shape[0]
    if cfg.router_act == "sigmoid":
        s = sigmoid(logits)
    elif cfg.router_act == "softmax":
        e = np.exp(logits - logits.max())
        s = e / e.sum()
    else:
        raise ValueError(f"router activation {cfg.router_act}")
    sel = s + (bias if bias is not None else 0.0)
    if cfg.grouped and cfg.n_group > 1:
        G = cfg.n_group
        if E % G:
            raise ValueError("num_experts not divisible by num_expert_group")
        gs = E // G
        grp = sel.reshape(G, gs)
        top2 = np.sort(grp, axis=1)[:, ::-1][:, :min(2, gs)]
        gscore = top2.sum(axis=1)
        keep = _topk_indices(gscore, cfg.topk_group)
        allowed = np.zeros(E, dtype=bool)
        for gi in keep:
            allowed[gi * gs:(gi + 1) * gs] = True
        sel = np.where(allowed, sel, -np.inf)
    idx = _topk_indices(sel, cfg.top_k)
    w = s[idx].copy()
    if cfg.renorm:
        w = w / w.sum()
    w = w * cfg.scale
    return idx, w


def glu_ffn(x, wg, wu, wd, cfg):
    """down(act(gate(x), up(x))): SwiGLU, or SiTU when hidden_act is situ."""
    return linear(act_mul(linear(x, wg), linear(x, wu), cfg), wd)


def swiglu(x, wg, wu, wd):
    return linear(silu(linear(x, wg)) * linear(x, wu), wd)


def moe_layer(x, W, p, cfg, record=None):
    """Router on the full x; routed experts on x (or on the latent x·down^T, docs/model.md#latent-moe);
    shared experts on the full x."""
    logits = linear(x, W[p + "gate.weight"])  # [T, E]
    bias = W.get(p + "gate.e_score_correction_bias")
    T = x.shape[0]
    xe = linear(x, W[p + "routed_expert_down_proj.weight"]) if cfg.latent else x
    r = np.zeros((T, xe.shape[1]))
    for t in range(T):
        idx, w = route(logits[t], bias, cfg)
        if record is not None:
            record.append((idx.tolist(), w.tolist()))
        for e, we in zip(idx, w):
            q = p + f"experts.{int(e)}."
            r[t] += we * glu_ffn(xe[t], W[q + "w1.weight"], W[q + "w3.weight"], W[q + "w2.weight"], cfg)
    out = latent_moe_out(r, W, p, cfg) if cfg.latent else r
    if cfg.n_shared > 0:
        q = p + "shared_experts."
        out = out + glu_ffn(x, W[q + "gate_proj.weight"], W[q + "up_proj.weight"], W[q + "down_proj.weight"], cfg)
    return out


def latent_moe_out(r, W, p, cfg):
    """Latent routed sum [T, Lat] -> (routed_expert_norm) -> routed_expert_up_proj -> [T, D]."""
    if cfg.latent_norm:
        r = rmsnorm(r, W[p + "routed_expert_norm.weight"], cfg.eps)
    return linear(r, W[p + "routed_expert_up_proj.weight"])


def dense_mlp(x, W, p, cfg):
    return glu_ffn(x, W[p + "gate_proj.weight"], W[p + "up_proj.weight"], W[p + "down_proj.weight"], cfg)


# --------------------------------------------------------------------------------------
# Block Attention Residuals (docs/model.md#attnres, #attnres-details)
# --------------------------------------------------------------------------------------

def attn_res_mix(P, B, w_norm, w_proj, eps):
    """Depth-wise softmax mix of the banked blocks B (list of [T, D]) and the current partial
    sum P [T, D]: score_i = sum_d rms_noweight(e_i)[d] * w_norm[d] * w_proj[d], softmax over
    the n+1 entries [B_1..B_n, P] per token, output sum_i a_i * e_i of the RAW entries."""
    E = np.stack(list(B) + [P])                                   # [n+1, T, D]
    wv = w_norm.reshape(-1) * w_proj.reshape(-1)
    s = np.einsum("ntd,d->nt", rms_noweight(E, eps), wv)          # [n+1, T]
    s = s - s.max(axis=0, keepdims=True)
    a = np.exp(s)
    a = a / a.sum(axis=0, keepdims=True)
    return np.einsum("nt,ntd->td", a, E)


def attn_res_bank(P_in, h):
    """What a block start banks: the RAW incoming partial sum (not the mixed h)."""
    return P_in


def attn_res_block_start(i, bs):
    """Layer i (0-based) opens a new block: bank P_in and restart the partial sum."""
    return i % bs == 0


# --------------------------------------------------------------------------------------
# decoder (docs/model.md#decoder)
# --------------------------------------------------------------------------------------

def text_weights(cfg, W):
    """The text-model tensors under their Kimi Linear names (K3: strip "language_model.",
    ignore everything else, e.g. vision_tower.* / mm_projector.*)."""
    if not cfg.prefix:
        return W
    n = len(cfg.prefix)
    Wt = {k[n:]: v for k, v in W.items() if k.startswith(cfg.prefix)}
    if "model.embed_tokens.weight" not in Wt:
        raise KeyError(f"K3 layout: no {cfg.prefix}model.embed_tokens.weight")
    return Wt


def media_rows(tokens, input_embeds, hidden):
    """input_embeds: (pad_id, embeds) or {"pad_id": id, "embeds": array}.  Returns (mask of the
    rows tokens == pad_id, float64 embeds [count, hidden]); the counts must match."""
    if isinstance(input_embeds, dict):
        pad_id = input_embeds.get("pad_id", input_embeds.get("media_pad_id"))
        e = input_embeds["embeds"]
    else:
        pad_id, e = input_embeds
    e = np.asarray(e, dtype=np.float64)
    mask = tokens == int(pad_id)
    n = int(mask.sum())
    if e.ndim != 2 or e.shape[0] != n or e.shape[1] != hidden:
        raise ValueError(f"input_embeds {e.shape} for {n} media pad tokens (id {pad_id}) of width {hidden}")
    return mask, e


def forward(cfg_dict, W, tokens, dump=None, states=None, input_embeds=None):
    """Float64 logits [T, vocab].

    input_embeds: optional (pad_id, embeds [N, hidden]) or {"pad_id", "embeds"}: the embedding
            rows of the tokens equal to pad_id are replaced, in order, by the N rows of embeds
            (image embeddings, vision_ref.py); N must equal the number of such tokens.

    dump: optional dict that receives intermediate arrays (per-layer hidden states).
    states: optional list (one entry per layer) of caches from a previous call; updated
            in place so that forward(prefix) + forward(rest, states) == forward(all).
            (Block AttnRes mixes across depth per token and needs no cross-step state.)"""
    cfg = cfg_dict if isinstance(cfg_dict, Cfg) else Cfg(cfg_dict)
    W = text_weights(cfg, W)
    tokens = np.asarray(tokens, dtype=np.int64)
    if tokens.size and (tokens.min() < 0 or tokens.max() >= cfg.vocab):
        raise ValueError("token id out of range")
    emb = W["model.embed_tokens.weight"]
    x = emb[tokens]
    if input_embeds is not None:
        mask, e = media_rows(tokens, input_embeds, x.shape[1])
        x[mask] = e
    if dump is not None:
        dump["embed"] = x.copy()
    if states is None:
        states = [None] * cfg.n_layers
    bs = cfg.attn_res_bs
    blocks = []  # AttnRes: banked block snapshots (raw partial sums)
    for i in range(cfg.n_layers):
        p = f"model.layers.{i}."
        if bs:
            P_in = x
            h = attn_res_mix(P_in, blocks, W[p + "self_attention_res_norm.weight"],
                             W[p + "self_attention_res_proj.weight"], cfg.eps) if blocks else P_in
        else:
            h = x
        xn = rmsnorm(h, W[p + "input_layernorm.weight"], cfg.eps)
        if cfg.is_kda(i):
            a, states[i] = kda_layer(xn, W, p + "self_attn.", cfg, states[i])
        else:
            a, states[i] = mla_layer(xn, W, p + "self_attn.", cfg, states[i])
        if bs:
            if attn_res_block_start(i, bs):
                blocks.append(attn_res_bank(P_in, h))
                P = a
            else:
                P = P_in + a
            h2 = attn_res_mix(P, blocks, W[p + "mlp_res_norm.weight"], W[p + "mlp_res_proj.weight"], cfg.eps)
        else:
            P = h2 = h + a
        hn = rmsnorm(h2, W[p + "post_attention_layernorm.weight"], cfg.eps)
        if cfg.is_moe(i):
            f = moe_layer(hn, W, p + "block_sparse_moe.", cfg)
        else:
            f = dense_mlp(hn, W, p + "mlp.", cfg)
        x = P + f
        if dump is not None:
            if bs:
                dump[f"layer{i}.attn_mix"] = h
                dump[f"layer{i}.ffn_mix"] = h2
                dump[f"layer{i}.n_blocks"] = np.array(len(blocks))
            dump[f"layer{i}.attn_in"] = xn
            dump[f"layer{i}.attn_out"] = a
            dump[f"layer{i}.ffn_in"] = hn
            dump[f"layer{i}.ffn_out"] = f
            dump[f"layer{i}.out"] = x.copy()
    if bs:
        x = attn_res_mix(x, blocks, W["model.output_attn_res_norm.weight"],
                         W["model.output_attn_res_proj.weight"], cfg.eps)
        if dump is not None:
            dump["output_mix"] = x
    xn = rmsnorm(x, W["model.norm.weight"], cfg.eps)
    head = emb if cfg.tie else W["lm_head.weight"]
    logits = linear(xn, head)
    if dump is not None:
        dump["final_norm"] = xn
        dump["logits"] = logits
    return logits


def forward_dir(model_dir, tokens, dump=None):
    cfg, W = load_model_dir(model_dir)
    return forward(cfg, W, tokens, dump=dump)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="model directory (config.json + *.safetensors)")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids")
    ap.add_argument("--out", required=True, help="output file: little-endian float32 [T, vocab]")
    ap.add_argument("--dump", help="optional .npz with per-layer hidden states (float64)")
    a = ap.parse_args(argv)
    tokens = [int(t) for t in a.tokens.split(",") if t.strip() != ""]
    dump = {} if a.dump else None
    logits = forward_dir(a.model, tokens, dump=dump)
    logits.astype("<f4").tofile(a.out)
    if a.dump:
        np.savez(a.dump, **dump)
    return 0


if __name__ == "__main__":
    sys.exit(main())

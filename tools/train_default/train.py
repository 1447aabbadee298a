#!/usr/bin/python3
"""Trains the default model (issue 48): a tiny Kimi-K3, in the published checkpoint layout, on
render.py's token sequences, with Debian's python3-torch; reproducible from a seed.

The model starts as `kimi-cpp make-model --preset k3-tiny` writes it (byte-level tokenizer with
K3's specials, vision tower and projector included), so every tensor has its published name and
shape and the engine's own K3 code path serves the result unchanged. The forward is the torch
baseline's (tools/torch_baseline/kimi_torch.py: KDA, MLA, MoE with shared experts, latent MoE,
AttnRes, SiTU) in float32, with its two in-place kernels replaced by autograd-safe ones; the
loss is the cross-entropy of the completions (the model's replies) only.

The vision tower and projector train with it (vision_torch.py): each image's embeddings take
its <|media_pad|> rows, as the engine does. About 1,000 tokens/s on 2 cores, forward and
backward, with the chunked KDA below.

  train.py --kimi build/bin/kimi-cpp --data train.tokens.jsonl --init DIR --out DIR [--steps N]
           [--batch 8] [--lr 3e-3] [--seed 0] [--check] [--only-vision]
"""

import argparse
import base64
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

# OpenBLAS on one thread: torch's own threads split the work around its products, and the two
# thread pools competing for 2 cores made a step 1.45x slower (a float32 sum order fixed by this
# also keeps a run reproducible)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch_baseline"))
import kimi_torch  # noqa: E402
from kimi_torch_io import K3_PREFIX, load_model_dir, read_safetensors  # noqa: E402
import vision_torch  # noqa: E402  (puts tests/golden on the path)
import kimi_ref  # noqa: E402  (the float64 reference's safetensors writer)


# --------------------------------------------------------------------------------------
# autograd-safe replacements of the baseline's in-place kernels (same math)
# --------------------------------------------------------------------------------------

def kda_recurrence(q, k, v, g, beta, S):
    """As kimi_torch.kda_recurrence (decay, predict, delta, write, read after write), without
    in-place updates, so gradients flow through the state. S [B, H, K, V] is the start state;
    returns (o, the state after the tokens)."""
    decay = g.exp()
    bv = beta.unsqueeze(-1)
    outs = []
    for t in range(q.shape[1]):
        S = S * decay[:, t].unsqueeze(-1)
        k_t = k[:, t].unsqueeze(-2)                                 # [B, H, 1, K]
        pred = torch.matmul(k_t, S).squeeze(-2)                     # [B, H, V]
        u = bv[:, t] * (v[:, t] - pred)
        S = S + k_t.transpose(-1, -2) * u.unsqueeze(-2)
        outs.append(torch.matmul(q[:, t].unsqueeze(-2), S).squeeze(-2))
    return torch.stack(outs, dim=1), S                              # [B, T, H, V], [B, H, K, V]


def kda_chunked(q, k, v, g, beta, S, chunk=16):
    """The same recurrence a chunk of tokens at a time (the WY form of the delta rule, as fla's
    chunk_kda): within a chunk, with G the running sum of the log decays g,
      u = beta * (v - (k * exp(G))^T S0 - A u),  A[t, j] = sum_d k_t k_j exp(G_t - G_j), j < t,
    solved as a unit lower-triangular system; then
      o_t = (q_t * exp(G_t))^T S0 + sum_{j <= t} (sum_d q_t k_j exp(G_t - G_j)) u_j,
      S   = exp(G_last) * S0 + sum_j (k_j * exp(G_last - G_j)) u_j^T.
    exp(G_t - G_j) is split as exp(G_t - R) exp(R - G_j) around the chunk's middle R, so A and
    the scores are matrix products. With K3's gate floor (-5 a token) and 16-token chunks every
    factor, and every product of two (the masked ones too, which the backward multiplies by
    zero), stays below exp(80), inside float32. Equal to kda_recurrence up to rounding."""
    B, T, H, K = q.shape
    qh, kh, vh, gh = (x.permute(0, 2, 1, 3) for x in (q, k, v, g))                     # [B, H, T, *]
    bh = beta.permute(0, 2, 1).unsqueeze(-1)                                             # [B, H, T, 1]
    outs = []
    for c0 in range(0, T, chunk):
        qc, kc, vc, bc = qh[:, :, c0:c0 + chunk], kh[:, :, c0:c0 + chunk], vh[:, :, c0:c0 + chunk], bh[:, :, c0:c0 + chunk]
        G = gh[:, :, c0:c0 + chunk].cumsum(2)                                            # [B, H, C, K]
        C = G.shape[2]
        R = G[:, :, C // 2:C // 2 + 1]                                                   # [B, H, 1, K]
        k_in, k_out = kc * (G - R).exp(), kc * (R - G).exp()
        strict = torch.ones(C, C, dtype=torch.bool).tril(-1)
        A = (k_in @ k_out.transpose(-1, -2)) * strict                                    # [B, H, C, C]
        P = ((qc * (G - R).exp()) @ k_out.transpose(-1, -2)) * (strict | torch.eye(C, dtype=torch.bool))
        eG = G.exp()
        rhs = bc * (vc - (kc * eG) @ S)                                                  # [B, H, C, V]
        u = torch.linalg.solve_triangular(torch.eye(C) + bc * A, rhs, upper=False, unitriangular=True)
        outs.append((qc * eG) @ S + P @ u)                                               # [B, H, C, V]
        last = G[:, :, -1:]                                                              # [B, H, 1, K]
        S = last.exp().transpose(-1, -2) * S + (kc * (last - G).exp()).transpose(-1, -2) @ u
    return torch.cat(outs, dim=2).permute(0, 2, 1, 3).contiguous(), S                    # [B, T, H, V]


def situ_mul(gate, up, beta, lin_beta):
    g, u = gate.float(), up.float()
    a = torch.tanh(g / beta) * beta * torch.sigmoid(g)
    if lin_beta is not None:
        u = torch.tanh(u / lin_beta) * lin_beta
    return (a * u).to(gate.dtype)


def mla_append(self, ckv):
    """MLACache.append without writing into a buffer (the prefix's latents stay in the graph):
    a prefix state of one sequence is broadcast to the batch that continues it."""
    if self.length == 0:
        self.buf = ckv
    else:
        self.buf = torch.cat([self.buf.expand(ckv.shape[0], -1, -1), ckv], dim=1)
    self.length = self.buf.shape[1]
    return self.buf


kimi_torch.kda_recurrence = kda_chunked
kimi_torch.situ_mul = situ_mul
kimi_torch.MLACache.append = mla_append
# past a shared prefix too, the keys and values are expanded per head (the weight-absorbed form
# pays off when decoding, not over a batch of whole suffixes)
kimi_torch.MLALayer._attend_absorbed = kimi_torch.MLALayer._attend_expanded


# --------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------

def load_rows(path, vocab, media):
    """render.py's rows, each image's patches prepared once (row["pixels"]: [(patches, grid)])."""
    rows = []
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if max(r["ids"]) >= vocab:
                raise SystemExit(f"train: token id {max(r['ids'])} >= vocab {vocab}: render with the same tokenizer")
            r["pixels"] = [vision_torch.pixels(base64.b64decode(u.split(",", 1)[1]), media) for u in r["images"]]
            rows.append(r)
    return rows


def batch_of(rows, pad):
    """tokens [B, T] (padded at the end), targets [B, T] (-100 outside the completions)."""
    T = max(len(r["ids"]) for r in rows)
    tok = torch.full((len(rows), T), pad, dtype=torch.long)
    tgt = torch.full((len(rows), T), -100, dtype=torch.long)
    for i, r in enumerate(rows):
        ids = torch.tensor(r["ids"], dtype=torch.long)
        tok[i, :len(ids)] = ids
        tgt[i, r["n_prompt"] - 1:len(ids) - 1] = ids[r["n_prompt"]:]   # position t predicts token t + 1
    return tok, tgt


# --------------------------------------------------------------------------------------
# model
# --------------------------------------------------------------------------------------

class Model:
    """The parameters: the text model's (names as load_model_dir gives them) and the vision
    tower's and projector's (their checkpoint names)."""

    def __init__(self, init):
        with open(os.path.join(init, "config.json")) as f:
            self.top = json.load(f)
        self.cfg, text = load_model_dir(init, torch.float32)
        vision = {}
        for f in sorted(os.listdir(init)):
            if f.endswith(".safetensors"):
                vision.update(read_safetensors(os.path.join(init, f), torch.float32,
                                               keep=lambda n: n.startswith((vision_torch.VT, vision_torch.MP))))
        self.text = {n: t.clone().requires_grad_(True) for n, t in text.items()}
        self.vision = {n: t.clone().requires_grad_(True) for n, t in vision.items()}
        self.vcfg = vision_torch.V.VisionCfg(self.top) if vision else None
        self.media_pad = self.top.get("media_placeholder_token_id")

    def params(self):
        return list(self.text.values()) + list(self.vision.values())

    def freeze_text(self):
        """Only the vision tower and projector learn: a text-only prompt's logits stay as they are."""
        for t in self.text.values():
            t.requires_grad_(False)

    def embeds(self, m, tok, rows):
        """The inputs of tok (the rows' tokens, or their columns past a shared prefix): token
        embeddings, each image's rows in place of its pad tokens; None without images."""
        if not any(r["pixels"] for r in rows):
            return None
        x = F.embedding(tok, m.embed)
        for b, r in enumerate(rows):
            if not r["pixels"]:
                continue
            emb = torch.cat([vision_torch.encode_image(self.vcfg, self.vision, p, g) for p, g in r["pixels"]])
            pos = (tok[b] == self.media_pad).nonzero().flatten()
            if len(pos) != emb.shape[0]:
                raise SystemExit(f"train: {len(pos)} image tokens but {emb.shape[0]} image rows")
            x = x.index_put((torch.full_like(pos, b), pos), emb)
        return x

    def logits(self, tok, rows):
        """tok [B, T] -> (logits [B, T - P, vocab] of positions P.., P). The prefix every row
        shares (the system messages; no image, none of a completion's targets) runs once, for
        one sequence, and its state is broadcast to the batch."""
        m = kimi_torch.KimiTorch(None, torch.float32, (self.cfg, self.text))
        B, T = tok.shape
        P = 0
        limit = min(r["n_prompt"] for r in rows) - 1
        while P < limit and bool((tok[:, P] == tok[0, P]).all()) and int(tok[0, P]) != self.media_pad:
            P += 1
        if P < 16:
            P = 0
        m.reset(1 if P else B, capacity=T + 1)
        if P:
            m._forward(tok[:1, :P])
            for st in m.state:
                if isinstance(st, kimi_torch.KDAState):
                    st.S = st.S.expand(B, -1, -1, -1)
                    st.conv = {n: h.expand(B, -1, -1) for n, h in st.conv.items()}
        rest = tok[:, P:]
        return F.linear(m._forward(rest, self.embeds(m, rest, rows)), m.head), P


def forward_loss(model, tok, tgt, rows):
    logits, P = model.logits(tok, rows)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt[:, P:].reshape(-1), ignore_index=-100)


def export(init, out, model):
    """out = init with its tensors replaced by the trained ones (BF16); config, tokenizer and
    preprocessor as make-model wrote them."""
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(init):
        if not f.endswith(".safetensors"):
            shutil.copy(os.path.join(init, f), os.path.join(out, f))
    allw = {}
    for f in sorted(os.listdir(init)):
        if f.endswith(".safetensors"):
            allw.update(read_safetensors(os.path.join(init, f), torch.float32))
    trained = {K3_PREFIX + n: t for n, t in model.text.items()}
    trained.update(model.vision)
    for key, t in trained.items():
        if key not in allw:
            raise SystemExit(f"train: {key} is not in the initial checkpoint")
        allw[key] = t
    # BF16, rounded to nearest even: the float64 reference's writer (tests/golden/kimi_ref.py)
    kimi_ref.write_safetensors(os.path.join(out, "model.safetensors"),
                               {n: ("BF16", t.detach().double().numpy()) for n, t in allw.items()})


def check_against_engine(kimi, out, row):   # a row without images
    """The exported model's logits from the engine (score, f32 activations) against the torch
    forward on the same BF16 weights: the largest difference."""
    cfg_dict, W = load_model_dir(out, torch.float32)
    ids = row["ids"]
    with tempfile.TemporaryDirectory(prefix="kimi-train-") as tmp:
        path = os.path.join(tmp, "logits.f32")
        subprocess.run([kimi, "score", "--model", out, "--tokens", ",".join(map(str, ids)), "--out", path,
                        "--activation-dtype", "f32", "--threads", "2"], check=True, capture_output=True)
        eng = torch.frombuffer(bytearray(open(path, "rb").read()), dtype=torch.float32).view(len(ids), -1)
    with torch.no_grad():
        m = kimi_torch.KimiTorch(None, torch.float32, (cfg_dict, W))
        m.reset(1, capacity=len(ids) + 1)
        ref = F.linear(m._forward(torch.tensor([ids])), m.head)[0]
    return float((eng - ref).abs().max()), float(ref.abs().max())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kimi", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--init", required=True, help="make-model's k3-tiny with the byte-level tokenizer")
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--log", help="every step's loss as JSONL (plot_loss.py draws it)")
    ap.add_argument("--check", action="store_true", help="compare the engine's logits with torch's at the end")
    ap.add_argument("--only-vision", action="store_true",
                    help="train the vision tower and projector alone, on the rows with images")
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)
    rng = random.Random(a.seed)
    model = Model(a.init)
    rows = load_rows(a.data, model.cfg["vocab_size"], vision_torch.V.load_media_cfg(a.init))
    check_row = next(r for r in rows if not r["images"])
    params = model.params()
    if a.only_vision:
        model.freeze_text()
        params = list(model.vision.values())
        rows = [r for r in rows if r["images"]]
    print(f"train: {len(rows)} sequences ({sum(1 for r in rows if r['images'])} with images), "
          f"{sum(t.numel() for t in model.params()) / 1e6:.2f} M parameters", file=sys.stderr)
    # one task and request variant a batch: its rows share their system messages (tools
    # included), which run once
    by_task = {}
    for r in rows:
        by_task.setdefault((r["task"], r.get("variant", "")), []).append(r)
    tasks = sorted(by_task)
    weights = [len(by_task[t]) for t in tasks]
    log = open(a.log, "w", buffering=1) if a.log else None   # line-buffered: readable while it runs
    opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=0.0)
    t0 = time.time()
    for step in range(a.steps):
        lr = a.lr * min(1.0, (step + 1) / 20) * 0.5 * (1 + math.cos(math.pi * step / a.steps))
        for group in opt.param_groups:
            group["lr"] = lr
        task = rng.choices(tasks, weights=weights)[0]
        batch = rng.sample(by_task[task], min(a.batch, len(by_task[task])))
        tok, tgt = batch_of(batch, model.cfg.get("pad_token_id", 0))
        loss = forward_loss(model, tok, tgt, batch)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        rec = {"step": step, "task": task[0], "loss": round(loss.item(), 4), "lr": lr, "s": round(time.time() - t0, 1)}
        if log:
            log.write(json.dumps(rec) + "\n")
        if step % 10 == 0 or step == a.steps - 1:
            print(json.dumps(rec), flush=True)
    export(a.init, a.out, model)
    if a.check:
        diff, scale = check_against_engine(a.kimi, a.out, check_row)
        print(f"train: engine vs torch logits: max |diff| {diff:.3g} (max |logit| {scale:.3g})", file=sys.stderr)


if __name__ == "__main__":
    main()

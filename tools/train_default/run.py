#!/usr/bin/python3
"""`make train-default`: the default model (models/kimi-k3-mini) from nothing, reproducibly:
  1. the initial checkpoint: `kimi-cpp make-model --preset k3-tiny` at the widths below, with the
     byte-level tokenizer (256 byte tokens + K3's 256 specials at their real ids);
  2. the training set (data.py, seed 1) and the held-out evaluation set (seed 2, every task alike,
     no training question repeated), rendered by the engine's own chat format (render.py);
  3. training (train.py) in two phases, each ending in the BF16 export into the checkpoint
     layout: the whole model on every task; then the vision tower and projector alone on the
     image tasks (the text model frozen, so no text answer changes), as the tower can lag
     behind the text; then the check that the engine's logits match torch's on the export;
  4. the loss curve (plot_loss.py).

  run.py --kimi build/bin/kimi-cpp --out models/kimi-k3-mini [--work DIR] [--steps N]

The evaluation set goes to OUT/eval.jsonl, the loss log to OUT/train-log.jsonl and its plot to
OUT/loss.svg; OUT/generation_config.json makes the server's default sampling greedy. Needs Debian's
python3-torch and python3-pil (and, for speed, an optimised BLAS such as libopenblas0).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))

# The model: Kimi-K3's architecture at width 128 (k3-tiny's layer map: KDA, KDA, KDA, MLA, KDA;
# MoE with two shared experts and the latent MoE; AttnRes; SiTU), vocabulary 512.
WIDTHS = {
    "text_config.vocab_size": 512,
    "text_config.hidden_size": 128,
    "text_config.intermediate_size": 256,
    "text_config.head_dim": 32,
    "text_config.kv_lora_rank": 64,
    "text_config.qk_nope_head_dim": 32,
    "text_config.v_head_dim": 32,
    "text_config.q_lora_rank": 48,
    "text_config.moe_intermediate_size": 64,
    "text_config.routed_expert_hidden_size": 96,
    "text_config.linear_attn_config.head_dim": 32,
    "text_config.linear_attn_config.num_heads": 4,
    "vision_config.text_hidden_size": 128,
}
TRAIN_SEED, EVAL_SEED = 1, 2
N_TRAIN, N_EVAL = 24000, 720
# the second phase (the vision tower and projector alone): its steps and learning rate
PHASE2_STEPS, PHASE2_LR = 600, 4e-3


def run(cmd, **kw):
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, **kw)


def append_log(log, log2):
    """The second phase's steps after the first's in one log (one loss curve)."""
    with open(log) as f:
        last = json.loads(f.read().splitlines()[-1])
    with open(log2) as f2, open(log, "a") as f:
        for line in f2:
            rec = json.loads(line)
            rec["step"] += last["step"] + 1
            rec["s"] = round(rec["s"] + last["s"], 1)
            f.write(json.dumps(rec) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kimi", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", help="keep the intermediate files here (default: a temporary directory)")
    ap.add_argument("--steps", type=int, default=2400, help="phase 1's steps (phase 2: PHASE2_STEPS)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=4e-3)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    py = sys.executable
    t0 = time.time()
    work = a.work or tempfile.mkdtemp(prefix="kimi-train-")
    os.makedirs(work, exist_ok=True)
    try:
        init = os.path.join(work, "init")
        sets = [x for k, v in WIDTHS.items() for x in ("--set", f"{k}={v}")]
        run([a.kimi, "make-model", "--preset", "k3-tiny", "--seed", str(a.seed), *sets, "--out", init, "--quiet"])
        train, held = os.path.join(work, "train.jsonl"), os.path.join(work, "eval.jsonl")
        run([py, os.path.join(HERE, "data.py"), "--seed", str(TRAIN_SEED), "--n", str(N_TRAIN), "--out", train])
        run([py, os.path.join(HERE, "data.py"), "--seed", str(EVAL_SEED), "--n", str(N_EVAL), "--exclude", train,
             "--balanced", "--out", held])
        tokens = os.path.join(work, "train.tokens.jsonl")
        run([py, os.path.join(HERE, "render.py"), "--kimi", a.kimi, "--model", init, "--in", train, "--out", tokens])
        log, log2, phase1 = (os.path.join(work, f) for f in ("train-log.jsonl", "phase2-log.jsonl", "phase1"))
        train_cmd = [py, os.path.join(HERE, "train.py"), "--kimi", a.kimi, "--data", tokens, "--batch", str(a.batch)]
        run([*train_cmd, "--init", init, "--out", phase1, "--steps", str(a.steps), "--lr", str(a.lr),
             "--seed", str(a.seed), "--log", log])
        run([*train_cmd, "--init", phase1, "--out", a.out, "--steps", str(PHASE2_STEPS), "--lr", str(PHASE2_LR),
             "--seed", str(a.seed + 1), "--only-vision", "--log", log2, "--check"])
        append_log(log, log2)
        # greedy unless a request says otherwise: a model this small answers best at temperature 0
        with open(os.path.join(a.out, "generation_config.json"), "w") as f:
            json.dump({"temperature": 0.0, "max_new_tokens": 512}, f, indent=2)
            f.write("\n")
        shutil.copy(held, os.path.join(a.out, "eval.jsonl"))
        shutil.copy(log, os.path.join(a.out, "train-log.jsonl"))
        run([py, os.path.join(HERE, "plot_loss.py"), "--log", log, "--out", os.path.join(a.out, "loss.svg")])
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    print(f"train-default: {a.out} in {(time.time() - t0) / 60:.1f} minutes", file=sys.stderr)


if __name__ == "__main__":
    main()

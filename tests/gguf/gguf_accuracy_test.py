#!/usr/bin/env python3
"""GGUF accuracy against a float64 reference, and against llama.cpp on the same files.

A random Kimi Linear and a random Kimi-K3 checkpoint (widths that are multiples of 256, so
the k-quant and codebook blocks apply) are converted by llama.cpp's convert_hf_to_gguf.py
(BF16) and quantized by its quantizer (llama_quant: llama_model_quantize, the function
llama-quantize runs) to each type (IQ2_XXS/IQ2_XS/IQ1_* with a synthetic importance matrix,
as llama.cpp requires one there). For every file:

  ref        tests/golden/kimi_ref.py in float64 on the file's weights as gguf-py
             dequantizes them (gguf_ref_weights.py maps them back to the checkpoint's names)
  kimi f32   `kimi-cpp score --activation-dtype f32`: must match ref within 1e-4 (max abs)
  kimi bf16  `kimi-cpp score --activation-dtype bf16`
  llama.cpp  llama_logits (libllama, CPU): it rounds activations to 8 bits before its
             quantized dot products

and kimi's bf16 logits must be closer to ref than llama.cpp's on the quantized types: the
median over positions of each position's RMS error (a position where either engine's
expert choice flips, a top-k near a tie, is an outlier for both; RMS and max are reported). A table (and --json) reports every error.

usage: gguf_accuracy_test.py --kimi BIN --llama-cpp SRC --llama-bin DIR [--types ...] [--json F]
(DIR holds llama_quant and llama_logits, from tools/llama_cpp/build.sh)
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "golden"))
import gguf_model_test as gm  # noqa: E402
import gguf_ref_weights  # noqa: E402
import kimi_ref  # noqa: E402

TOKENS = [1, 5, 9, 100, 200, 300, 7, 8, 9, 10, 11, 12, 13, 500, 900, 3, 77, 64, 1000, 2]
F32_TOLERANCE = 1e-4
WIDE = {   # presets at widths that k-quants (256-element blocks) can hold
    "tiny": ["hidden_size=256", "intermediate_size=512", "moe_intermediate_size=256", "kv_lora_rank=256",
             "linear_attn_config.head_dim=64", "linear_attn_config.num_heads=4", "head_dim=64",
             "qk_nope_head_dim=64", "v_head_dim=64"],
    "k3-tiny": ["text_config.hidden_size=256", "text_config.intermediate_size=512",
                "text_config.moe_intermediate_size=256", "text_config.routed_expert_hidden_size=256",
                "text_config.kv_lora_rank=256", "text_config.linear_attn_config.head_dim=64",
                "text_config.linear_attn_config.num_heads=4", "text_config.head_dim=64",
                "text_config.qk_nope_head_dim=64", "text_config.v_head_dim=64", "text_config.q_lora_rank=256"],
}
NEEDS_IMATRIX = {"IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ1_S", "IQ1_M"}


def write_imatrix(gguf, src, out, seed):
    """A legacy-format importance matrix (llama.cpp's imatrix .dat: entries of name, ncall,
    values) with a positive weight per input column of every matrix in src."""
    rng = np.random.default_rng(seed)
    entries = []
    for t in gguf.GGUFReader(src).tensors:
        ne = [int(x) for x in t.shape]
        if len(ne) < 2:
            continue
        n = ne[0] * (ne[2] if len(ne) > 2 else 1)
        entries.append((t.name.encode(), rng.uniform(0.25, 4.0, n).astype(np.float32)))
    with open(out, "wb") as f:
        f.write(np.int32(len(entries)).tobytes())
        for name, vals in entries:
            f.write(np.array([len(name)], np.int32).tobytes() + name)
            f.write(np.array([1, vals.size], np.int32).tobytes() + vals.tobytes())
    return out


def errors(got, ref):
    """max_abs and rms over all logits; median_rms: the median over positions of each
    position's RMS error. One position whose expert choice flips (a top-k near a tie, on
    either engine) dominates rms; the median shows the error every other position has."""
    d = got.astype(np.float64) - ref   # [T, vocab]
    per_pos = np.sqrt(np.mean(d * d, axis=1))
    return {"max_abs": float(np.max(np.abs(d))), "rms": float(np.sqrt(np.mean(d * d))),
            "median_rms": float(np.median(per_pos)), "per_position_rms": per_pos}


def run_preset(ctx, a, preset, types):
    d = ctx.make_model(preset, 21, WIDE[preset])
    cfg = json.load(open(os.path.join(d, "config.json")))
    src = ctx.convert(d, os.path.join(ctx.tmp, f"{preset}-bf16.gguf"))
    imatrix = write_imatrix(ctx.gguf, src, os.path.join(ctx.tmp, "imatrix.dat"), 5)
    rows = []
    for qtype in ["BF16"] + types:
        path = src
        if qtype != "BF16":
            path = os.path.join(ctx.tmp, f"{preset}-{qtype}.gguf")
            cmd = [os.path.join(a.llama_bin, "llama_quant"), src, path, qtype, "--threads", "2"]
            gm.run(cmd + (["--imatrix", imatrix] if qtype in NEEDS_IMATRIX else []))
        kinds = {}
        for t in ctx.gguf.GGUFReader(path).tensors:
            kinds[t.tensor_type.name] = kinds.get(t.tensor_type.name, 0) + int(t.n_bytes)
        ref = kimi_ref.forward(cfg, gguf_ref_weights.load(ctx.gguf, path, d), TOKENS)
        row = {"preset": preset, "type": qtype, "bytes_by_type": kinds}
        for dt in ("f32", "bf16"):
            got = np.frombuffer(ctx.score(path, dt, TOKENS), np.float32).reshape(ref.shape)
            row[f"kimi_{dt}"] = errors(got, ref)
        out = os.path.join(ctx.tmp, "llama.f32")
        gm.run([os.path.join(a.llama_bin, "llama_logits"), path, ",".join(map(str, TOKENS)), out, "2"])
        row["llama_cpp"] = errors(np.fromfile(out, np.float32).reshape(ref.shape), ref)
        os.remove(out)
        row["ref_max_abs_logit"] = float(np.max(np.abs(ref)))
        rows.append(row)
        kb, lc = row["kimi_bf16"].pop("per_position_rms"), row["llama_cpp"].pop("per_position_rms")
        row["kimi_f32"].pop("per_position_rms")
        row["positions_kimi_bf16_closer"] = int(np.sum(kb < lc))
        print(f"{preset:8s} {qtype:8s} kimi f32 max {row['kimi_f32']['max_abs']:.2e} | median RMS: kimi bf16 "
              f"{row['kimi_bf16']['median_rms']:.2e}  llama.cpp {row['llama_cpp']['median_rms']:.2e} | RMS: "
              f"{row['kimi_bf16']['rms']:.2e}  {row['llama_cpp']['rms']:.2e} | kimi closer at "
              f"{row['positions_kimi_bf16_closer']}/{len(TOKENS)}", flush=True)
        if path != src:
            os.remove(path)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kimi", required=True)
    ap.add_argument("--llama-cpp", required=True, help="llama.cpp sources (gguf-py, the converter)")
    ap.add_argument("--llama-bin", required=True, help="folder with llama_quant and llama_logits")
    ap.add_argument("--types", default="Q8_0,Q4_K_M,Q2_K,IQ2_XXS")
    ap.add_argument("--presets", default="tiny,k3-tiny")
    ap.add_argument("--json", help="write the rows here")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kimi-gguf-acc-") as tmp:
        ctx = gm.Ctx(a, tmp)
        rows = []
        for preset in a.presets.split(","):
            rows += run_preset(ctx, a, preset, a.types.split(","))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    bad = []
    for r in rows:
        what = f"{r['preset']} {r['type']}"
        if not math.isfinite(r["llama_cpp"]["median_rms"]):
            bad.append(f"{what}: llama.cpp's logits are not finite (its build: {a.llama_bin}/../build.flags)")
            continue
        if not r["kimi_f32"]["max_abs"] <= F32_TOLERANCE:
            bad.append(f"{what}: kimi f32 logits {r['kimi_f32']['max_abs']:.3e} from the float64 reference "
                       f"(> {F32_TOLERANCE})")
        if r["type"] != "BF16" and not r["kimi_bf16"]["median_rms"] < r["llama_cpp"]["median_rms"]:
            bad.append(f"{what}: kimi bf16 error {r['kimi_bf16']['median_rms']:.3e} (median over positions "
                       f"of the RMS) is not below llama.cpp's {r['llama_cpp']['median_rms']:.3e}")
    if bad:
        sys.exit("FAILED:\n  " + "\n  ".join(bad))
    print(f"ok: {len(rows)} files; kimi f32 within {F32_TOLERANCE} of the float64 reference, "
          f"kimi bf16 closer to it than llama.cpp on every quantized type")


if __name__ == "__main__":
    main()

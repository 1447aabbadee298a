#!/usr/bin/python3
"""What quantization costs the default model in accuracy (docs/quantization.md): its forms made
from the BF16 checkpoint, then all of them evaluated by ONE `kimi-cpp eval tasks` command on the
held-out set, which prints per-task exact-match accuracy and the exact McNemar test of each form
against BF16:
  bf16        the committed checkpoint (safetensors);
  mxfp4       its routed experts in MXFP4 (`kimi-cpp quantize --targets experts`);
  gguf-bf16   llama.cpp's converter output (tools/llama_convert), BF16: the GGUF path itself;
  q8_0, q4_k_m, q2_k, iq4_xs
              that file through llama.cpp's quantizer (llama_model_quantize, tests/gguf/llama_quant.cpp).
llama.cpp quantizes a row whose width is not a multiple of 256 (all of this model's: 128, 96,
64) with a fallback type (Q4_K_M: Q5_0/Q5_1, Q2_K: Q4_0, IQ4_XS: IQ4_NL), as it would for any
such model; the script prints each form's types. A GGUF has no vision tower (llama.cpp's K3 converter drops it), so the image items are n/a there.
Test tooling: llama.cpp's sources (tools/llama_cpp/fetch.sh) and llama_quant
(tools/llama_cpp/build.sh); `make eval-default` fetches and builds both.

  quant_eval.py --kimi build/bin/kimi-cpp --model models/kimi-k3-mini --llama-cpp build/llama-src/llama.cpp
                --llama-bin build/llama-build/bin [--work DIR] [--json OUT] [--limit N]
"""

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
GGUF_TYPES = ("Q8_0", "Q4_K_M", "Q2_K", "IQ4_XS")


def run(cmd, env=None):
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, env=env)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kimi", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--llama-cpp", required=True, help="llama.cpp's sources (convert_hf_to_gguf.py, gguf-py)")
    ap.add_argument("--llama-bin", required=True, help="the folder with llama_quant")
    ap.add_argument("--work", help="keep the quantized forms here (default: a temporary directory)")
    ap.add_argument("--json", help="the eval summary as JSON")
    ap.add_argument("--out", help="the samples (OUT.LABEL.jsonl; default: in the work directory)")
    ap.add_argument("--limit", type=int, default=0)
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="kimi-quant-eval-")
    os.makedirs(work, exist_ok=True)
    try:
        mx = os.path.join(work, "mxfp4")
        if not os.path.isfile(os.path.join(mx, "config.json")):
            run([a.kimi, "quantize", "--model", a.model, "--out", mx, "--targets", "experts", "--quiet"])
        shutil.copy(os.path.join(a.model, "eval.jsonl"), mx)
        base = os.path.join(work, "bf16.gguf")
        if not os.path.isfile(base):
            run([os.path.join(HERE, "..", "llama_convert", "convert.sh"), a.model, base, "bf16"],
                env=dict(os.environ, LLAMA_CPP_DIR=a.llama_cpp))
        forms = [("bf16", a.model), ("mxfp4", mx), ("gguf-bf16", base)]
        for t in GGUF_TYPES:
            path = os.path.join(work, t.lower() + ".gguf")
            if not os.path.isfile(path):
                run([os.path.join(a.llama_bin, "llama_quant"), base, path, t, "--threads", "2"])
            forms.append((t.lower(), path))
        sys.path.insert(0, os.path.join(a.llama_cpp, "gguf-py"))
        import gguf   # llama.cpp's reader: which type each form's matrices got
        for label, path in forms[2:]:
            types = collections.Counter(t.tensor_type.name for t in gguf.GGUFReader(path).tensors if len(t.shape) > 1)
            print(f"{label}: matrices by type: " + ", ".join(f"{k} {v}" for k, v in types.most_common()), flush=True)
        cmd = [a.kimi, "eval", "tasks", "--data", os.path.join(a.model, "eval.jsonl"),
               "--out", a.out or os.path.join(work, "samples.jsonl")]
        for label, path in forms:
            cmd += ["--model", f"{label}={path}"]
        if a.json:
            cmd += ["--json", a.json]
        if a.limit:
            cmd += ["--limit", str(a.limit)]
        run(cmd)
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

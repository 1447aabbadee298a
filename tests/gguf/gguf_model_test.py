#!/usr/bin/env python3
"""GGUF models end to end, against llama.cpp's own tools (its converter and gguf-py).

  model     Random Kimi Linear and Kimi-K3 checkpoints converted by llama.cpp's
            convert_hf_to_gguf.py (BF16, one file and split in 3 parts): the GGUF gives
            logits bit-identical to the safetensors checkpoint, in f32 and bf16 activations,
            and `inspect` reads it. A_log is drawn where torch.exp (which the converter uses
            to fold -exp(A_log) into the file) agrees with glibc's expf, so the two files
            encode the same model (docs/gguf.md#exactness).
  quant     Every block type through the whole model: the weights of a converted model
            replaced by random blocks of one type, and a twin GGUF holding gguf-py's
            dequantization of them in F32: logits bit-identical, both precisions.
  tokenizer A GGUF vocabulary written from a tokenizer directory (as the converter spells it)
            encodes the tokenizer corpus exactly as the directory does.
  errors    Corrupt or unsupported files: a one-line error naming the problem, exit code 1.
  mpi       Block-type GGUFs under `mpirun -np 2` (tensor parallelism, each rank a whole-block
            slice of the row-parallel weights): f32 logits within 1e-5 of one process, bf16
            within 1e-2; a file whose rows cannot split at whole blocks is a clear error.

usage: gguf_model_test.py CASE --kimi BIN --llama-cpp DIR [--tok-dir D --corpus F] [--mpirun M]
"""
import argparse
import ctypes
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PY = "/usr/bin/python3"


def run(cmd, env=None, check=True):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if check and p.returncode != 0:
        sys.exit(f"FAILED: {' '.join(cmd)}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


class Ctx:
    def __init__(self, a, tmp):
        self.kimi, self.llama, self.tmp = a.kimi, a.llama_cpp, tmp
        sys.path.insert(0, os.path.join(self.llama, "gguf-py"))
        os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
        import gguf  # noqa: E402  (llama.cpp's gguf-py)
        self.gguf = gguf

    def make_model(self, preset, seed, sets=()):
        out = os.path.join(self.tmp, f"{preset}-{seed}")
        cmd = [self.kimi, "make-model", "--out", out, "--preset", preset, "--seed", str(seed), "--quiet"]
        for s in sets:
            cmd += ["--set", s]
        run(cmd)
        return out

    def convert(self, model_dir, out, outtype="bf16", extra=()):
        env = dict(os.environ, LLAMA_CPP_DIR=self.llama, PYTHON=PY)
        run([os.path.join(ROOT, "tools", "llama_convert", "convert.sh"), model_dir, out, outtype, *extra], env=env)
        return out

    def score(self, model, dtype, tokens, extra=()):
        out = os.path.join(self.tmp, "logits.f32")
        run([self.kimi, "score", "--model", model, "--tokens", ",".join(map(str, tokens)),
             "--activation-dtype", dtype, "--out", out, *extra])
        with open(out, "rb") as f:
            data = f.read()
        os.remove(out)
        return data


# --- safetensors editing (A_log) ---------------------------------------------------------

def read_safetensors_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)), 8 + n


def agreeing_a_log(ctx, path, k3):
    """Redraws every A_log so that -torch.exp (as the converter computes it, on the same
    slice) equals -expf of glibc (as kimi.cpp computes it) bit for bit."""
    import torch
    libm = ctypes.CDLL("libm.so.6")
    libm.expf.restype, libm.expf.argtypes = ctypes.c_float, [ctypes.c_float]
    header, base = read_safetensors_header(path)
    rng = np.random.default_rng(7)
    with open(path, "r+b") as f:
        for name, info in header.items():
            if not name.endswith(".A_log"):
                continue
            assert info["dtype"] == "F32", name
            n = int(np.prod(info["shape"]))
            x = np.log(rng.uniform(1, 16, n)).astype(np.float32)
            for _ in range(100):
                t = torch.exp(torch.from_numpy(x.copy()).float()).numpy()
                g = np.array([libm.expf(float(v)) for v in x], dtype=np.float32)
                bad = t.view(np.uint32) != g.view(np.uint32)
                if not bad.any():
                    break
                x[bad] = np.log(rng.uniform(1, 16, int(bad.sum()))).astype(np.float32)
            else:
                sys.exit(f"could not draw an A_log on which torch and glibc agree for {name}")
            f.seek(base + info["data_offsets"][0])
            f.write(x.tobytes())


# --- the cases ---------------------------------------------------------------------------

TOKENS = [1, 5, 9, 100, 200, 300, 7, 8, 9, 10, 11, 12, 13, 500, 900, 3]


def case_model(ctx):
    for preset in ("tiny", "k3-tiny"):
        d = ctx.make_model(preset, 3)
        agreeing_a_log(ctx, os.path.join(d, "model.safetensors"), preset.startswith("k3"))
        one = ctx.convert(d, os.path.join(ctx.tmp, f"{preset}.gguf"))
        split_dir = os.path.join(ctx.tmp, f"{preset}-split")
        os.makedirs(split_dir)
        ctx.convert(d, os.path.join(split_dir, "m.gguf"), "bf16", ["--split-max-tensors", "40"])
        parts = sorted(os.listdir(split_dir))
        if len(parts) < 2 or not parts[0].endswith("-00001-of-%05d.gguf" % len(parts)):
            sys.exit(f"{preset}: the converter wrote {parts}, expected split parts")
        first = os.path.join(split_dir, parts[0])
        for dt in ("f32", "bf16"):
            ref = ctx.score(d, dt, TOKENS)
            for label, path in (("gguf", one), (f"split x{len(parts)}", first)):
                got = ctx.score(path, dt, TOKENS)
                if got != ref:
                    a, b = np.frombuffer(ref, np.float32), np.frombuffer(got, np.float32)
                    i = int(np.argmax(a != b))
                    sys.exit(f"{preset} {label} {dt}: logits differ at {i}: {a[i]!r} vs {b[i]!r}")
                print(f"{preset}: {label} {dt}: {len(ref) // 4} logits bit-identical")
        info = run([ctx.kimi, "inspect", "--model", one]).stdout
        for want in ("gguf:", "chat template", "layer map"):
            if want not in info:
                sys.exit(f"{preset}: inspect output lacks '{want}':\n{info}")
        tensors = run([ctx.kimi, "inspect", "--model", one, "--tensors", "--json"]).stdout
        names = {t["name"] for t in json.loads(tensors)}
        ref_names = {t["name"] for t in json.loads(run([ctx.kimi, "inspect", "--model", d, "--tensors",
                                                          "--json"]).stdout)
                     if not t["name"].startswith(("vision_tower.", "mm_projector."))}   # GGUF: text only
        if names != ref_names:
            sys.exit(f"{preset}: tensor names differ: {sorted(names ^ ref_names)[:8]}")
        print(f"{preset}: inspect ok, {len(names)} tensors under the checkpoint's names")


def copy_metadata(gguf, reader, writer):
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        vt = field.types[0]
        sub = field.types[-1] if vt == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vt, sub_type=sub)


# Random blocks of each type with sane scales: bytes drawn at random, the f16 scale fields
# (offsets per type) set to small positive values, so the weights stay O(0.1).
SCALE_FIELDS = {   # type → [(byte offset, "d" or "dmin")] of f16 scales in a block
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0], "IQ4_NL": [0],
    "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208], "IQ4_XS": [0],
    "IQ2_XXS": [0], "IQ2_XS": [0], "IQ2_S": [0], "IQ3_XXS": [0], "IQ3_S": [0], "IQ1_S": [0],
    "TQ1_0": [52], "TQ2_0": [64], "MXFP4": [], "IQ1_M": [],
}


def random_blocks(gguf, qtype, n_blocks, rng):
    elems, size = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, (n_blocks, size), dtype=np.uint8)
    name = qtype.name
    for off in SCALE_FIELDS[name]:
        d = rng.uniform(0.002, 0.02, n_blocks).astype(np.float16)
        raw[:, off:off + 2] = d.view(np.uint8).reshape(n_blocks, 2)
    if name == "MXFP4":   # E8M0 scales near 2^-4
        raw[:, 0] = rng.integers(118, 124, n_blocks)
    if name == "IQ1_M":   # the f16 scale is spread over the top nibbles of the last 4 bytes (scales)
        d = rng.uniform(0.002, 0.02, n_blocks).astype(np.float16).view(np.uint16)
        sc = raw[:, 48:56].view(np.uint16).copy()
        for k in range(4):
            sc[:, k] = (sc[:, k] & 0x0FFF) | (((d >> (4 * k)) & 0xF) << 12)
        raw[:, 48:56] = sc.view(np.uint8)
    return raw


def quantized_pair(ctx, src, qname, out_q, out_f):
    """Writes src with every quantizable weight as random `qname` blocks (out_q) and the same
    model with gguf-py's dequantization of those blocks in F32 (out_f)."""
    gguf = ctx.gguf
    qtype = gguf.GGMLQuantizationType[qname]
    elems, _ = gguf.GGML_QUANT_SIZES[qtype]
    reader = gguf.GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    rng = np.random.default_rng(11)
    writers = [gguf.GGUFWriter(out_q, arch), gguf.GGUFWriter(out_f, arch)]
    n_quant = 0
    for w in writers:
        copy_metadata(gguf, reader, w)
    for t in reader.tensors:
        shape = [int(x) for x in reversed(t.shape)]   # numpy order
        data = np.array(t.data)
        quant = (len(shape) >= 2 and shape[-1] % elems == 0 and t.tensor_type == gguf.GGMLQuantizationType.BF16
                 and "ffn_gate_inp" not in t.name)
        if not quant:
            for w in writers:
                w.add_tensor(t.name, data, raw_dtype=t.tensor_type)
            continue
        n_quant += 1
        n_blocks = int(np.prod(shape)) // elems
        raw = random_blocks(gguf, qtype, n_blocks, rng)
        byte_shape = gguf.quant_shape_to_byte_shape(tuple(shape), qtype)
        writers[0].add_tensor(t.name, raw.reshape(byte_shape), raw_shape=byte_shape, raw_dtype=qtype)
        deq = gguf.quants.dequantize(raw.reshape(byte_shape), qtype).astype(np.float32).reshape(shape)
        if not np.isfinite(deq).all():
            sys.exit(f"{qname}: random blocks decoded to non-finite weights in {t.name}")
        writers[1].add_tensor(t.name, deq, raw_dtype=gguf.GGMLQuantizationType.F32)
    for w in writers:
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
    return n_quant


# the types with a factored bf16 product (AVX-512 BF16)
FACTORED = {"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_0", "Q4_0", "Q5_0", "IQ4_NL", "IQ4_XS", "MXFP4"}
QUANT_TYPES_32 = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "IQ4_NL", "MXFP4"]
QUANT_TYPES_256 = ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS",
                   "IQ3_S", "IQ1_S", "IQ1_M", "TQ1_0", "TQ2_0"]


def case_quant(ctx, types):
    # widths that are multiples of 256 (the k-quant and codebook blocks) at tiny-model cost
    d = ctx.make_model("tiny", 5, ["hidden_size=256", "intermediate_size=256", "moe_intermediate_size=256",
                                   "kv_lora_rank=256", "linear_attn_config.head_dim=128",
                                   "linear_attn_config.num_heads=2"])
    agreeing_a_log(ctx, os.path.join(d, "model.safetensors"), False)
    src = ctx.convert(d, os.path.join(ctx.tmp, "q-src.gguf"))
    for qname in types:
        q, f = os.path.join(ctx.tmp, f"{qname}.gguf"), os.path.join(ctx.tmp, f"{qname}-f32.gguf")
        n = quantized_pair(ctx, src, qname, q, f)
        notes = []
        for dt in ("f32", "bf16"):
            a, b = ctx.score(q, dt, TOKENS), ctx.score(f, dt, TOKENS)
            if a == b:
                notes.append(f"{dt}: = the F32 twin")
            else:
                x, y = np.frombuffer(a, np.float32), np.frombuffer(b, np.float32)
                i = int(np.argmax(x != y))
                rel = float(np.max(np.abs(x - y)) / np.max(np.abs(y)))
                # bf16 activations × Q4_K/Q6_K/Q8_0 on AVX-512 BF16 run the factored product: the same
                # exact weights summed in another order; every other case must equal the twin
                if dt != "bf16" or qname not in FACTORED or not rel < 1e-2:
                    sys.exit(f"{qname} {dt}: logits differ from the F32 twin at {i}: {x[i]!r} vs {y[i]!r} (rel {rel:.2e})")
                notes.append(f"{dt}: factored product, within {rel:.1e} of the twin")
            # the rows never depend on how the prompt is fed or what runs beside it
            for extra in (["--prefill-chunk", "3"], ["--batch-filler", "2"]):
                if ctx.score(q, dt, TOKENS, extra) != a:
                    sys.exit(f"{qname} {dt}: logits change with {' '.join(extra)}")
        print(f"{qname}: {n} tensors quantized; {'; '.join(notes)}; chunked and batched bit-identical")
        os.remove(q)
        os.remove(f)


def case_tokenizer(ctx, tok_dir, corpus):
    """A GGUF holding only tok_dir's vocabulary (spelled as llama.cpp's converter spells it)
    must encode the corpus exactly as tok_dir."""
    gguf = ctx.gguf
    import base64
    ranks = []
    with open(os.path.join(tok_dir, "tiktoken.model"), "rb") as f:
        for line in f:
            if line.strip():
                tok, rank = line.split()
                ranks.append((int(rank), base64.b64decode(tok)))
    ranks.sort()
    cfg = json.load(open(os.path.join(tok_dir, "tokenizer_config.json")))
    specials = {int(k): v["content"] for k, v in cfg.get("added_tokens_decoder", {}).items()}
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    byte_char = dict(zip(bs, (chr(c) for c in cs)))
    tokens = ["".join(byte_char[b] for b in tok) for _, tok in ranks]
    types = [1] * len(tokens)
    n_base = len(tokens)
    for i in range(n_base, n_base + 256):
        tokens.append(specials.get(i, f"[PAD{i}]"))
        types.append(3 if i in specials else 5)
    out = os.path.join(ctx.tmp, "vocab.gguf")
    w = gguf.GGUFWriter(out, "kimi-linear")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("kimi-k2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_eos_token_id(n_base + 1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    outs = []
    for t in (tok_dir, out):
        outs.append(run([ctx.kimi, "tokenize", "--tokenizer", t, "--input-jsonl", corpus]).stdout)
    if outs[0] != outs[1]:
        a, b = outs[0].splitlines(), outs[1].splitlines()
        i = next(k for k in range(min(len(a), len(b))) if a[k] != b[k]) if a != b[:len(a)] else len(a)
        sys.exit(f"tokenizer: line {i} differs:\n dir:  {a[i][:200] if i < len(a) else ''}\n"
                 f" gguf: {b[i][:200] if i < len(b) else ''}")
    print(f"tokenizer: {len(outs[0].splitlines())} corpus lines encoded identically ({n_base} base tokens)")


def case_errors(ctx):
    gguf = ctx.gguf
    d = ctx.make_model("tiny", 9)
    good = ctx.convert(d, os.path.join(ctx.tmp, "good.gguf"))
    data = open(good, "rb").read()

    def expect(path, *needles):
        p = run([ctx.kimi, "generate", "--model", path, "--tokens", "1,2", "--max-tokens", "1"], check=False)
        err = p.stderr.strip().splitlines()
        if p.returncode != 1 or len(err) != 1 or not all(n in err[0] for n in needles):
            sys.exit(f"{os.path.basename(path)}: expected exit 1 and one line naming {needles}, got "
                     f"{p.returncode}: {p.stderr[-800:]}")
        print(f"{os.path.basename(path)}: {err[0][:160]}")

    def write(name, blob):
        path = os.path.join(ctx.tmp, name)
        with open(path, "wb") as f:
            f.write(blob)
        return path

    expect(write("truncated.gguf", data[: len(data) // 3]), "truncated.gguf")
    expect(write("header-only.gguf", data[:20]), "header-only.gguf")
    expect(write("magic.gguf", b"GGUX" + data[4:]), "magic.gguf")
    expect(write("v1.gguf", data[:4] + struct.pack("<I", 1) + data[8:]), "v1")
    # an unsupported tensor type (Q8_1): named with the tensor
    reader = gguf.GGUFReader(good)
    w = gguf.GGUFWriter(os.path.join(ctx.tmp, "q8_1.gguf"), "kimi-linear")
    copy_metadata(gguf, reader, w)
    for t in reader.tensors:
        if t.name == "blk.0.ffn_up.weight":
            shape = tuple(int(x) for x in reversed(t.shape))
            bshape = gguf.quant_shape_to_byte_shape(shape, gguf.GGMLQuantizationType.Q8_1)
            w.add_tensor(t.name, np.zeros(bshape, np.uint8), raw_shape=bshape,
                         raw_dtype=gguf.GGMLQuantizationType.Q8_1)
        else:
            w.add_tensor(t.name, np.array(t.data), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    expect(os.path.join(ctx.tmp, "q8_1.gguf"), "Q8_1", "blk.0.ffn_up.weight")
    # a non-Kimi architecture
    w = gguf.GGUFWriter(os.path.join(ctx.tmp, "llama.gguf"), "llama")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    expect(os.path.join(ctx.tmp, "llama.gguf"), "llama")


def case_mpi(ctx, mpirun):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    ids = ",".join(str(7 + (i * 37) % 900) for i in range(24))

    def logits(model, dt, np_=1):
        out = os.path.join(ctx.tmp, "mpi.f32")
        pre = [mpirun, "-np", str(np_), "--oversubscribe"] if np_ > 1 else []
        p = run(pre + [ctx.kimi, "score", "--model", model, "--tokens", ids, "--activation-dtype", dt, "--out", out],
                env=env, check=False)
        if p.returncode != 0:
            return None, p.stderr
        data = np.fromfile(out, np.float32)
        os.remove(out)
        return data, ""

    # every row-parallel input (heads · head dim, MLP and expert units) 512 wide: 256 a rank
    d = ctx.make_model("tiny", 6, ["hidden_size=256", "intermediate_size=1024", "moe_intermediate_size=512",
                                   "kv_lora_rank=256", "linear_attn_config.head_dim=128", "linear_attn_config.num_heads=4",
                                   "head_dim=128", "qk_nope_head_dim=128", "v_head_dim=128"])
    src = ctx.convert(d, os.path.join(ctx.tmp, "mpi-src.gguf"))
    for qname in ("Q4_K", "Q6_K", "Q8_0"):
        q, f = os.path.join(ctx.tmp, f"mpi-{qname}.gguf"), os.path.join(ctx.tmp, "mpi-twin.gguf")
        quantized_pair(ctx, src, qname, q, f)
        os.remove(f)
        for dt, tol in (("f32", 1e-5), ("bf16", 1e-2)):
            one, _ = logits(q, dt)
            two, err = logits(q, dt, 2)
            if two is None:
                sys.exit(f"{qname} {dt}: mpirun -np 2 failed: {err[-600:]}")
            rel = float(np.abs(two - one).max() / np.abs(one).max())
            if not rel <= tol:
                sys.exit(f"{qname} {dt}: mpirun -np 2 logits {rel:.2e} from one process (> {tol})")
            print(f"{qname} {dt}: mpirun -np 2 within {rel:.1e} of one process")
        os.remove(q)
    # o_proj 4 heads x 64 = 256 columns: 128 a rank cuts a Q4_K block; a one-line error naming it
    d = ctx.make_model("tiny", 7, ["hidden_size=256", "intermediate_size=512", "moe_intermediate_size=256",
                                   "kv_lora_rank=256", "linear_attn_config.head_dim=64", "linear_attn_config.num_heads=4",
                                   "head_dim=64", "qk_nope_head_dim=64", "v_head_dim=64"])
    src = ctx.convert(d, os.path.join(ctx.tmp, "mpi-src2.gguf"))
    q, f = os.path.join(ctx.tmp, "mpi-cut.gguf"), os.path.join(ctx.tmp, "mpi-twin.gguf")
    quantized_pair(ctx, src, "Q4_K", q, f)
    out, err = logits(q, "f32", 2)
    lines = [ln for ln in err.splitlines() if "kimi-cpp" in ln and "error" in ln]
    if out is not None or not lines or not all("multiples of 256" in ln and "o_proj" in ln for ln in lines):
        sys.exit(f"an unsplittable Q4_K file under mpirun -np 2: expected a clear error naming o_proj, got:\n{err[-800:]}")
    print(f"unsplittable: {lines[0][:200]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=["model", "quant", "tokenizer", "errors", "mpi"])
    ap.add_argument("--kimi", required=True)
    ap.add_argument("--llama-cpp", required=True)
    ap.add_argument("--types", default=",".join(QUANT_TYPES_32 + QUANT_TYPES_256))
    ap.add_argument("--tok-dir")
    ap.add_argument("--corpus")
    ap.add_argument("--mpirun")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kimi-gguf-") as tmp:
        ctx = Ctx(a, tmp)
        if a.case == "model":
            case_model(ctx)
        elif a.case == "quant":
            case_quant(ctx, a.types.split(","))
        elif a.case == "tokenizer":
            case_tokenizer(ctx, a.tok_dir, a.corpus)
        elif a.case == "mpi":
            case_mpi(ctx, a.mpirun)
        else:
            case_errors(ctx)


if __name__ == "__main__":
    main()

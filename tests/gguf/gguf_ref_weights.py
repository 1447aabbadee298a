"""The weights a GGUF file encodes, under the checkpoint's own names, for the float64
reference (tests/golden/kimi_ref.py): each tensor decoded by llama.cpp's gguf-py
(gguf.quants.dequantize) and widened to float64, the converter's changes undone.

Test tooling only, written from llama.cpp's gguf-py name map (gguf.get_tensor_name_map) and
what its convert_hf_to_gguf.py writes for kimi-linear / kimi-k3; it shares no code with the
engine's own GGUF loader (src/checkpoint/weight_store_gguf.cpp), which it checks.

    weights = gguf_ref_weights.load(gguf, "model.gguf", "checkpoint-dir")

`checkpoint-dir` is the safetensors checkpoint the file was converted from: its tensor names
and shapes say what to look for (its values are not read).
"""
import json
import os
import re
import struct

import numpy as np

EXPERT = {"w1": "ffn_gate_exps", "w2": "ffn_down_exps", "w3": "ffn_up_exps"}
RES = {"self_attention_res": "attn_res_score", "mlp_res": "ffn_res_score"}


def checkpoint_shapes(model_dir):
    shapes = {}
    for name in sorted(os.listdir(model_dir)):
        if not name.endswith(".safetensors"):
            continue
        with open(os.path.join(model_dir, name), "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
        shapes.update({k: v["shape"] for k, v in header.items() if k != "__metadata__"})
    return shapes


def load(gguf, path, model_dir):
    reader = gguf.GGUFReader(path)
    arch_name = reader.fields["general.architecture"].contents()
    arch = {"kimi-linear": gguf.MODEL_ARCH.KIMI_LINEAR, "kimi-k3": gguf.MODEL_ARCH.KIMI_K3}[arch_name]
    tensors = {}
    for t in reader.tensors:
        shape = [int(x) for x in reversed(t.shape)]   # numpy order: [.., rows, cols]
        tensors[t.name] = gguf.quants.dequantize(np.array(t.data), t.tensor_type).astype(np.float64).reshape(shape)
    shapes = {k: v for k, v in checkpoint_shapes(model_dir).items()
              if not k.startswith(("vision_tower.", "mm_projector."))}
    n_layers = 1 + max(int(m.group(1)) for k in shapes for m in [re.search(r"layers\.(\d+)\.", k)] if m)
    names = gguf.get_tensor_name_map(arch, n_layers)
    used, out = set(), {}

    def take(gname):
        if gname not in tensors:
            raise KeyError(f"{os.path.basename(path)} has no tensor {gname}")
        used.add(gname)
        return tensors[gname]

    for hf, shape in shapes.items():
        short = hf[len("language_model."):] if hf.startswith("language_model.") else hf
        m = re.match(r"model\.layers\.(\d+)\.(.*)$", short)
        blk = f"blk.{m.group(1)}." if m else ""
        rest = m.group(2) if m else short
        e = re.match(r"block_sparse_moe\.experts\.(\d+)\.(w[123])\.weight$", rest)
        r = re.match(r"(self_attention_res|mlp_res)_(norm|proj)\.weight$", rest)
        if e:    # stacked experts [E, rows, cols]
            value = take(blk + EXPERT[e.group(2)] + ".weight")[int(e.group(1))]
        elif r or short.startswith("model.output_attn_res_"):
            # AttnRes: the converter fuses norm ⊙ proj into one score vector; norm = that vector
            # and proj = ones compute the same score
            score = take(blk + RES[r.group(1)] + ".weight") if r else take("output_res_score.weight")
            kind = r.group(2) if r else short.rsplit("_", 1)[1].split(".")[0]
            value = score if kind == "norm" else np.ones_like(score)
        elif rest == "self_attn.A_log":    # stored folded as -exp(A_log), one value per head
            value = np.log(-take(blk + "ssm_a").reshape(-1))
            if value.size != int(np.prod(shape)):
                out[hf] = value
                continue
        elif rest == "self_attn.dt_bias":
            value = take(blk + "ssm_dt.bias")
        elif rest == "block_sparse_moe.gate.e_score_correction_bias":
            value = take(blk + "exp_probs_b.bias")
        elif rest == "self_attn.g_proj.weight":    # KDA: ssm_g; MLA: attn_gate
            value = take(blk + ("ssm_g.weight" if blk + "ssm_g.weight" in tensors else "attn_gate.weight"))
        elif rest == "self_attn.kv_b_proj.weight" and blk + "attn_kv_b.weight" not in tensors:
            k_b = take(blk + "attn_k_b.weight")   # [H, r, nope]
            v_b = take(blk + "attn_v_b.weight")   # [H, v, r]
            value = np.concatenate([k_b.transpose(0, 2, 1), v_b], axis=1)   # [H, nope + v, r]
        else:
            gname = names.get_name(short, try_suffixes=(".weight", ".bias"))
            if gname is None:
                raise KeyError(f"no GGUF name for {hf}")
            value = take(gname)
        out[hf] = np.asarray(value, dtype=np.float64).reshape(shape)
    left = sorted(set(tensors) - used)
    if left:
        raise KeyError(f"{os.path.basename(path)}: tensors not mapped back: {left[:6]}")
    return out

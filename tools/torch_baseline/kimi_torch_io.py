"""Checkpoint loading and the config of the PyTorch eager baseline (kimi_torch.py): safetensors
read without the safetensors package, Kimi Linear and Kimi-K3 layouts (K3: text_config, the
language_model. prefix, vision tensors skipped, sharded index), and the parsed config.

Standard library + torch only (Debian python3-torch 1.13).
"""

import glob
import json
import math
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "golden"))
from kimi_ref import Cfg  # noqa: E402  (the one config parser of the Python references)

# --------------------------------------------------------------------------------------
# safetensors loading (no safetensors package)
# --------------------------------------------------------------------------------------

_ST_DTYPES = {  # safetensors dtype -> (torch dtype to read the raw bytes as, item size)
    "BF16": (torch.int16, 2),   # reinterpreted as bfloat16 below
    "F16": (torch.float16, 2),
    "F32": (torch.float32, 4),
    "F64": (torch.float64, 8),
}


class ModelError(Exception):
    """A bad model directory or checkpoint (reported as `kimi_torch: ...`, exit 2)."""


def _read_file(path):
    """Whole file into one bytearray (tensors below are zero-copy views of it)."""
    size = os.path.getsize(path)
    buf = bytearray(size)
    view = memoryview(buf)
    with open(path, "rb") as fh:
        pos = 0
        while pos < size:
            n = fh.readinto(view[pos:pos + (256 << 20)])
            if not n:
                raise ModelError(f"{path}: short read")
            pos += n
    return buf


def read_safetensors(path, dtype, keep=None):
    """{name: tensor} of one .safetensors file; floating tensors converted to `dtype`.
    keep(name) -> bool selects the tensors to return (None: all); the others are skipped
    unread, whatever their dtype."""
    buf = _read_file(path)
    if len(buf) < 8:
        raise ModelError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", buf[:8])
    try:
        header = json.loads(bytes(buf[8:8 + n]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelError(f"{path}: bad safetensors header ({e})")
    header.pop("__metadata__", None)
    base = 8 + n
    out = {}
    for name, info in header.items():
        if keep is not None and not keep(name):
            continue
        dt = info.get("dtype")
        if dt not in _ST_DTYPES:
            raise ModelError(f"{path}: tensor {name}: unsupported dtype {dt}")
        raw_dtype, size = _ST_DTYPES[dt]
        shape = [int(s) for s in info["shape"]]
        begin, end = (int(v) for v in info["data_offsets"])
        count = math.prod(shape)
        if end - begin != count * size or base + end > len(buf):
            raise ModelError(f"{path}: tensor {name}: bad data offsets")
        off = base + begin
        if count == 0:
            t = torch.zeros(shape, dtype=raw_dtype)
        elif off % size == 0:
            t = torch.frombuffer(buf, dtype=raw_dtype, count=count, offset=off)
        else:  # misaligned: copy the bytes out
            t = torch.frombuffer(bytearray(buf[off:off + count * size]), dtype=raw_dtype)
        if dt == "BF16":
            t = t.view(torch.bfloat16)
        t = t.reshape(shape)
        out[name] = t if t.dtype == dtype else t.to(dtype)
    return out


K3_ARCH = "KimiK3ForConditionalGeneration"
K3_PREFIX = "language_model."
INDEX_NAME = "model.safetensors.index.json"


def text_config(top):
    """(text model config dict, tensor name prefix) of a config.json.  Kimi-K3 (the
    multimodal wrapper, docs/model.md#k3) nests the text model's keys under text_config and
    prefixes its tensors with `language_model.`; Kimi Linear is flat, without a prefix."""
    if not isinstance(top, dict):
        raise ModelError("config.json: not a JSON object")
    archs = top.get("architectures") or []
    if "text_config" in top or K3_ARCH in archs or top.get("model_type") == "kimi_k3":
        if not isinstance(top.get("text_config"), dict):
            raise ModelError("config.json: Kimi-K3 config without a text_config object")
        return top["text_config"], K3_PREFIX
    return top, ""


def load_model_dir(model_dir, dtype):
    """(text config dict, {name: tensor in `dtype`}) of a model directory.

    Kimi-K3: the text model's tensors under their Kimi Linear names (the `language_model.`
    prefix stripped); every other tensor (vision_tower.*, mm_projector.*) is skipped.
    With model.safetensors.index.json only the shards its weight_map names for those
    tensors are read; otherwise every *.safetensors file."""
    cfg_path = os.path.join(model_dir, "config.json")
    if not os.path.isdir(model_dir):
        raise ModelError(f"model directory {model_dir} does not exist")
    try:
        with open(cfg_path) as fh:
            top = json.load(fh)
    except (OSError, json.JSONDecodeError) as e:
        raise ModelError(f"cannot read {cfg_path}: {e}")
    cfg, prefix = text_config(top)
    for where, c in (("", top), ("text_config.", cfg)):
        if isinstance(c, dict) and c.get("quantization_config") is not None:
            raise ModelError(f"config.json: '{where}quantization_config' declares quantized weights; "
                             f"only unquantized BF16/F16/F32 checkpoints are supported")
    index_path = os.path.join(model_dir, INDEX_NAME)
    if os.path.exists(index_path):
        try:
            with open(index_path) as fh:
                wmap = json.load(fh)["weight_map"]
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as e:
            raise ModelError(f"cannot read {index_path}: {e}")
        files = [os.path.join(model_dir, f) for f in sorted(set(
            f for n, f in wmap.items() if n.startswith(prefix)))]
        missing = [os.path.basename(f) for f in files if not os.path.exists(f)]
        if missing:
            raise ModelError(f"{INDEX_NAME} names missing shards: {missing[:3]}")
    else:
        files = sorted(glob.glob(os.path.join(model_dir, "*.safetensors")))
    if not files:
        raise ModelError(f"no *.safetensors in {model_dir}")
    keep = (lambda n: n.startswith(prefix)) if prefix else None
    weights = {}
    for f in files:
        w = read_safetensors(f, dtype, keep)
        if prefix:
            w = {n[len(prefix):]: t for n, t in w.items()}
        dup = set(w) & set(weights)
        if dup:
            raise ModelError(f"duplicate tensors across shards: {sorted(dup)[:3]}")
        weights.update(w)
    if prefix and "model.embed_tokens.weight" not in weights:
        raise ModelError(f"Kimi-K3 layout but no {prefix}model.embed_tokens.weight")
    return cfg, weights


# --------------------------------------------------------------------------------------
# config
# --------------------------------------------------------------------------------------

class Config(Cfg):
    """The config.json keys the forward pass uses: the one parser of the Python references
    (tests/golden/kimi_ref.py, Cfg) on the text model's config dict (load_model_dir's), its errors
    as ModelError, plus what this baseline does not implement."""

    def __init__(self, c):
        try:
            super().__init__(c)   # the text config: flat, no text_config key
        except (KeyError, TypeError, ValueError) as e:
            raise ModelError(f"config.json: missing or bad key {e}")
        if not self.mla_use_nope:
            raise ModelError("mla_use_nope=false (RoPE MLA) is not part of Kimi Linear")
        if self.router_act not in ("sigmoid", "softmax"):
            raise ModelError(f"router activation {self.router_act} is not supported")

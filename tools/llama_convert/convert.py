#!/usr/bin/env python3
"""Run llama.cpp's convert_hf_to_gguf.py on a kimi.cpp `make-model` checkpoint.

Test/bench tooling only. Usage (normally via convert.sh):

    python3 convert.py LLAMA_CPP_DIR [convert_hf_to_gguf.py args...]

Needs tools/llama_convert (this folder, for the `transformers` stub) and
LLAMA_CPP_DIR/gguf-py on sys.path; it puts them there itself.

Two run-time adjustments (llama.cpp's sources are not edited):

  1. torch < 2.1 (Debian's 1.13 here) has no float8 dtypes, but the
     converter names torch.float8_e4m3fn / float8_e5m2 in class-level dtype
     tables at import time. Missing ones are set to inert placeholder objects
     so the import works; any checkpoint that really holds F8 tensors would
     then fail loudly (make-model writes BF16/F32 only).

  2. TextModel.get_vocab_base_pre() identifies the BPE pre-tokenizer by
  hashing the token ids the HF tokenizer gives for a fixed test string. A make-model
  vocab is a small random tiktoken vocab, so that hash can never match the
  real Kimi-K2 entry. For the stub's Kimi tiktoken tokenizer (and only it)
  the pre-tokenizer is therefore reported as "kimi-k2": the same regex
  Kimi's tokenization_kimi.py (and kimi.cpp) uses, which is what llama.cpp
  applies for Kimi Linear / Kimi-K3 GGUFs converted from the real models.
"""
from __future__ import annotations

import runpy
import sys
from pathlib import Path


class _MissingTorchDtype:
    """Placeholder for a dtype this torch build lacks; unusable on purpose."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"<torch.{self.name} unavailable in this torch build>"


def _torch_compat() -> None:
    import torch
    for name in ("float8_e4m3fn", "float8_e5m2"):
        if not hasattr(torch, name):
            setattr(torch, name, _MissingTorchDtype(name))


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(f"usage: {sys.argv[0]} LLAMA_CPP_DIR [convert_hf_to_gguf.py args...]")
    llama_dir = Path(sys.argv[1]).resolve()
    script = llama_dir / "convert_hf_to_gguf.py"
    if not script.is_file():
        sys.exit(f"error: {script} not found (set LLAMA_CPP_DIR)")

    here = Path(__file__).resolve().parent
    for p in (str(llama_dir), str(llama_dir / "gguf-py"), str(here)):
        if p not in sys.path:
            sys.path.insert(0, p)
    # stand-ins used only when the real package is missing (tqdm)
    if str(here / "fallback") not in sys.path:
        sys.path.append(str(here / "fallback"))

    _torch_compat()

    import transformers  # noqa: F401  (must be the stub)
    if not getattr(transformers, "__version__", "").endswith("kimi-cpp-stub"):
        sys.exit(f"error: imported a real transformers from {transformers.__file__}, not the stub")

    from conversion import base  # the same module object convert_hf_to_gguf.py imports

    orig_get_vocab_base_pre = base.TextModel.get_vocab_base_pre

    def get_vocab_base_pre(self, tokenizer) -> str:
        if getattr(tokenizer, "is_kimi_cpp_stub", False):
            base.logger.info("kimi.cpp stub tokenizer: pre-tokenizer hash skipped, using 'kimi-k2'")
            return "kimi-k2"
        return orig_get_vocab_base_pre(self, tokenizer)

    base.TextModel.get_vocab_base_pre = get_vocab_base_pre

    sys.argv = [str(script)] + sys.argv[2:]
    runpy.run_path(str(script), run_name="__main__")


if __name__ == "__main__":
    main()

"""Minimal stand-in for the HF `transformers` package (test/bench tooling only).

It implements exactly what llama.cpp's convert_hf_to_gguf.py touches when it
converts the two architectures kimi.cpp's `make-model` writes:

  * KimiLinearForCausalLM          (conversion/kimi_linear.py)
  * KimiK3ForConditionalGeneration (conversion/kimi_k3.py)

namely
  * AutoConfig.from_pretrained(dir, trust_remote_code=...).to_dict()
  * AutoTokenizer.from_pretrained(dir, trust_remote_code=True) for a Kimi
    tiktoken checkpoint (tiktoken.model + tokenizer_config.json)
  * transformers.convert_slow_tokenizer.bytes_to_unicode

Anything else raises, so a converter path we did not mean to support fails
loudly instead of producing a silently different GGUF.
"""
from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

__version__ = "0.0.0-kimi-cpp-stub"


def _model_dir(path: Any) -> Path:
    p = Path(os.fspath(path))
    if not p.is_dir():
        # real transformers would try the Hub here; this machine has no network
        raise OSError(f"transformers stub: {p} is not a local directory (no Hub access in the stub)")
    return p


class PretrainedConfig:
    """config.json as attributes; to_dict() gives back a deep copy of the JSON."""

    def __init__(self, **kwargs: Any):
        self._dict = copy.deepcopy(kwargs)
        for k, v in kwargs.items():
            setattr(self, k, copy.deepcopy(v))

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self._dict)

    def __getitem__(self, key: str) -> Any:
        return self._dict[key]

    def __contains__(self, key: str) -> bool:
        return key in self._dict

    def get(self, key: str, default: Any = None) -> Any:
        return self._dict.get(key, default)

    def __repr__(self) -> str:
        return f"PretrainedConfig({json.dumps(self._dict, indent=2, sort_keys=True)})"


class AutoConfig:
    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: Any, trust_remote_code: bool | None = None,
                        **kwargs: Any) -> PretrainedConfig:
        del trust_remote_code  # config.json is plain data; nothing to execute
        cfg_path = _model_dir(pretrained_model_name_or_path) / "config.json"
        if not cfg_path.is_file():
            raise OSError(f"transformers stub: no config.json in {cfg_path.parent}")
        with open(cfg_path, "r", encoding="utf-8") as f:
            cfg = json.load(f)
        cfg.update(kwargs)
        return PretrainedConfig(**cfg)


class AutoTokenizer:
    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: Any, trust_remote_code: bool | None = None,
                        **kwargs: Any):
        from .tokenization_kimi import TikTokenTokenizer

        d = _model_dir(pretrained_model_name_or_path)
        tok_cfg_path = d / "tokenizer_config.json"
        tok_cfg: dict[str, Any] = {}
        if tok_cfg_path.is_file():
            with open(tok_cfg_path, "r", encoding="utf-8") as f:
                tok_cfg = json.load(f)

        tok_class = tok_cfg.get("tokenizer_class")
        auto_map = (tok_cfg.get("auto_map") or {}).get("AutoTokenizer")
        is_kimi_tiktoken = (tok_class == "TikTokenTokenizer" or
                            (auto_map is not None and "TikTokenTokenizer" in str(auto_map)))

        if is_kimi_tiktoken:
            # Kimi's tokenizer is remote code (tokenization_kimi.py); real
            # transformers refuses it without trust_remote_code=True, which is
            # what makes the converter fall through from _set_vocab_gpt2 to
            # the tiktoken path. Keep that behaviour.
            if not trust_remote_code:
                raise ValueError(
                    f"transformers stub: the tokenizer in {d} ({tok_class}) is custom code; "
                    "pass trust_remote_code=True")
            return TikTokenTokenizer.from_dir(d, tok_cfg, **kwargs)

        raise NotImplementedError(
            f"transformers stub: only Kimi tiktoken tokenizers are supported "
            f"(tokenizer_class={tok_class!r}, auto_map={auto_map!r}) in {d}")


__all__ = ["AutoConfig", "AutoTokenizer", "PretrainedConfig", "__version__"]

"""Pure-Python stand-in for Kimi's remote-code TikTokenTokenizer.

Mirrors moonshotai's tokenization_kimi.py as far as llama.cpp's converter reads
it (conversion/kimi_linear.py: KimiLinearModel.set_vocab, also used by K3):

  tokenizer.model._mergeable_ranks   bytes -> rank, from tiktoken.model
  tokenizer.special_tokens           str -> id, ids [n_base, n_base + 256)
  tokenizer.eos_id                   id of tokenizer_config's eos_token

plus the usual inspection helpers (get_vocab, vocab_size, added tokens,
decode). No `tiktoken` module is needed: the rank file is base64 + rank per
line and the merges are rebuilt by the converter itself (QwenModel.bpe).

encode() is deliberately not implemented: the converter only calls it to hash
the pre-tokenizer (get_vocab_base_pre), and that hash can never match the real
Kimi-K2 entry for a make-model vocab anyway; tools/llama_convert/convert.py
resolves the pre-tokenizer to "kimi-k2" for this tokenizer instead.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from .convert_slow_tokenizer import bytes_to_unicode

NUM_RESERVED_SPECIAL_TOKENS = 256  # as in Kimi's TikTokenTokenizer

# Kimi's pre-tokenizer regex (tiktoken / `regex` syntax), recorded for reference
PAT_STR = "|".join([
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])


def load_tiktoken_bpe(path: Path) -> dict[bytes, int]:
    """tiktoken.load.load_tiktoken_bpe for a local file: `<base64 token> <rank>` per line."""
    ranks: dict[bytes, int] = {}
    with open(path, "rb") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2:
                raise ValueError(f"{path}:{lineno}: expected '<base64> <rank>', got {line[:80]!r}")
            tok = base64.b64decode(parts[0], validate=True)
            rank = int(parts[1])
            if tok in ranks:
                raise ValueError(f"{path}:{lineno}: duplicate token {tok!r}")
            ranks[tok] = rank
    ranks_sorted = sorted(ranks.values())
    if ranks_sorted != list(range(len(ranks_sorted))):
        # tiktoken requires dense ranks 0..n-1; Kimi relies on n_base == len(ranks)
        raise ValueError(f"{path}: ranks are not dense 0..{len(ranks_sorted) - 1}")
    return ranks


@dataclass
class AddedToken:
    content: str
    lstrip: bool = False
    rstrip: bool = False
    normalized: bool = False
    single_word: bool = False
    special: bool = True

    def __str__(self) -> str:
        return self.content


class _Encoding:
    """The bits of tiktoken.Encoding the converter and helpers read."""

    def __init__(self, name: str, pat_str: str, mergeable_ranks: dict[bytes, int],
                 special_tokens: dict[str, int]):
        self.name = name
        self._pat_str = pat_str
        self._mergeable_ranks = mergeable_ranks
        self._special_tokens = special_tokens
        self._decoder: dict[int, bytes] = {r: t for t, r in mergeable_ranks.items()}
        self._decoder.update({i: s.encode("utf-8") for s, i in special_tokens.items()})
        self.n_vocab = max(self._decoder) + 1

    @property
    def pat_str(self) -> str:
        return self._pat_str

    @property
    def special_tokens_set(self) -> set[str]:
        return set(self._special_tokens)

    def decode_single_token_bytes(self, token: int) -> bytes:
        return self._decoder[token]

    def decode_bytes(self, tokens: Iterable[int]) -> bytes:
        return b"".join(self._decoder[t] for t in tokens)

    def decode(self, tokens: Iterable[int], errors: str = "replace") -> str:
        return self.decode_bytes(tokens).decode("utf-8", errors=errors)

    def encode(self, *args: Any, **kwargs: Any) -> list[int]:
        raise NotImplementedError(
            "transformers stub: tiktoken encode() is not implemented (no `regex`/`tiktoken` here); "
            "llama.cpp's converter only needs it for the pre-tokenizer hash")


class TikTokenTokenizer:
    # lets tools/llama_convert/convert.py recognise the stub
    is_kimi_cpp_stub = True

    def __init__(self, vocab_file: Path, added_tokens_decoder: dict[int, AddedToken],
                 bos_token: str | None = "[BOS]", eos_token: str | None = "[EOS]",
                 unk_token: str | None = None, pad_token: str | None = None,
                 additional_special_tokens: list[str] | None = None,
                 model_max_length: int | None = None, chat_template: str | None = None):
        self.vocab_file = str(vocab_file)
        self.added_tokens_decoder: dict[int, AddedToken] = dict(sorted(added_tokens_decoder.items()))
        self.additional_special_tokens = list(additional_special_tokens or [])
        self.model_max_length = model_max_length
        self.chat_template = chat_template
        self.bos_token, self.eos_token, self.unk_token, self.pad_token = bos_token, eos_token, unk_token, pad_token

        mergeable_ranks = load_tiktoken_bpe(Path(vocab_file))
        num_base_tokens = len(mergeable_ranks)
        self.num_base_tokens = num_base_tokens

        # same construction as Kimi's tokenization_kimi.py
        special_tokens_mapping = {i: t.content for i, t in self.added_tokens_decoder.items()}
        self.special_tokens: dict[str, int] = {
            special_tokens_mapping.get(i, f"<|reserved_token_{i}|>"): i
            for i in range(num_base_tokens, num_base_tokens + NUM_RESERVED_SPECIAL_TOKENS)
        }
        stray = [i for i in special_tokens_mapping
                 if not num_base_tokens <= i < num_base_tokens + NUM_RESERVED_SPECIAL_TOKENS]
        if stray:
            raise ValueError(f"added_tokens_decoder ids outside the reserved range "
                             f"[{num_base_tokens}, {num_base_tokens + NUM_RESERVED_SPECIAL_TOKENS}): {stray[:8]}")

        self.model = _Encoding(Path(vocab_file).name, PAT_STR, mergeable_ranks, self.special_tokens)
        self.n_words = self.model.n_vocab

        def _id(tok: str | None) -> int | None:
            return None if tok is None else self.special_tokens.get(str(tok))

        self.bos_id = _id(bos_token)
        self.eos_id = _id(eos_token)
        self.pad_id = _id(pad_token)
        self.unk_id = _id(unk_token)
        if self.eos_id is None:
            raise ValueError(f"eos_token {eos_token!r} is not among the special tokens")

        byte_encoder = bytes_to_unicode()
        self.decoder: dict[int, str] = {
            i: "".join(byte_encoder[b] for b in self.model.decode_single_token_bytes(i))
            for i in range(self.n_words)
        }
        self.encoder: dict[str, int] = {s: i for i, s in self.decoder.items()}

    @classmethod
    def from_dir(cls, d: Path, tok_cfg: dict[str, Any], **kwargs: Any) -> "TikTokenTokenizer":
        vocab_file = d / "tiktoken.model"
        if not vocab_file.is_file():
            raise OSError(f"transformers stub: {vocab_file} not found")

        added: dict[int, AddedToken] = {}
        for k, v in (tok_cfg.get("added_tokens_decoder") or {}).items():
            fields = {f: v[f] for f in ("lstrip", "rstrip", "normalized", "single_word", "special") if f in v}
            added[int(k)] = AddedToken(content=v["content"], **fields)

        def tok_str(x: Any) -> str | None:
            if isinstance(x, dict):  # serialized AddedToken
                return x.get("content")
            return x

        args = dict(
            vocab_file=vocab_file,
            added_tokens_decoder=added,
            bos_token=tok_str(tok_cfg.get("bos_token", "[BOS]")),
            eos_token=tok_str(tok_cfg.get("eos_token", "[EOS]")),
            unk_token=tok_str(tok_cfg.get("unk_token")),
            pad_token=tok_str(tok_cfg.get("pad_token")),
            additional_special_tokens=[tok_str(t) for t in tok_cfg.get("additional_special_tokens") or []],
            model_max_length=tok_cfg.get("model_max_length"),
            chat_template=tok_cfg.get("chat_template"),
        )
        args.update({k: v for k, v in kwargs.items() if k in args})
        return cls(**args)

    # --- PreTrainedTokenizer-style helpers ---

    @property
    def vocab_size(self) -> int:
        return self.n_words

    def __len__(self) -> int:
        return self.n_words

    def get_vocab(self) -> dict[str, int]:
        return dict(self.encoder)

    @property
    def vocab(self) -> dict[str, int]:
        return self.get_vocab()

    def get_added_vocab(self) -> dict[str, int]:
        return {t.content: i for i, t in self.added_tokens_decoder.items()}

    @property
    def all_special_tokens(self) -> list[str]:
        return [t.content for t in self.added_tokens_decoder.values() if t.special]

    @property
    def all_special_ids(self) -> list[int]:
        return [i for i, t in self.added_tokens_decoder.items() if t.special]

    @property
    def bos_token_id(self) -> int | None:
        return self.bos_id

    @property
    def eos_token_id(self) -> int | None:
        return self.eos_id

    @property
    def pad_token_id(self) -> int | None:
        return self.pad_id

    @property
    def unk_token_id(self) -> int | None:
        return self.unk_id

    def convert_ids_to_tokens(self, ids: int | list[int]):
        if isinstance(ids, int):
            return self.decoder[ids]
        return [self.decoder[i] for i in ids]

    def convert_tokens_to_ids(self, tokens: str | list[str]):
        if isinstance(tokens, str):
            return self.encoder.get(tokens, self.unk_id)
        return [self.encoder.get(t, self.unk_id) for t in tokens]

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False, **kwargs: Any) -> str:
        ids = list(ids)
        if skip_special_tokens:
            ids = [i for i in ids if i not in self.model._special_tokens.values()]
        return self.model.decode(ids)

    def encode(self, *args: Any, **kwargs: Any) -> list[int]:
        return self.model.encode(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any):
        raise NotImplementedError("transformers stub: tokenizer __call__ is not implemented")

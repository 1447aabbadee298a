"""Stand-in for transformers.convert_slow_tokenizer: only bytes_to_unicode."""
from __future__ import annotations

from functools import lru_cache


@lru_cache()
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable unicode map (same table as transformers)."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(2**8):
        if b not in bs:
            bs.append(b)
            cs.append(2**8 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))

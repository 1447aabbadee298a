"""Tiny stand-in for `tqdm` (only what gguf-py's GGUFWriter uses).

Lives in tools/llama_convert/fallback/, which convert.sh puts at the END of
PYTHONPATH, so a real tqdm wins when one is installed. Prints a line to
stderr about every 10% (and at the end) instead of drawing a bar.
"""
from __future__ import annotations

import sys
import time
from typing import Any


def _fmt(n: float) -> str:
    for unit in ("", "K", "M", "G", "T"):
        if abs(n) < 1000 or unit == "T":
            return f"{n:.1f}{unit}" if unit else f"{int(n)}"
        n /= 1000
    return str(n)


class tqdm:
    def __init__(self, iterable: Any = None, desc: str | None = None, total: float | None = None,
                 unit: str = "it", unit_scale: bool = False, **kwargs: Any):
        self.iterable = iterable
        self.desc = desc or ""
        self.total = total
        self.unit = unit
        self.n = 0
        self._t0 = time.monotonic()
        self._next_pct = 10

    def __iter__(self):
        for x in self.iterable:
            yield x
            self.update(1)
        self.close()

    def _print(self) -> None:
        dt = time.monotonic() - self._t0
        tot = f"/{_fmt(self.total)}" if self.total else ""
        print(f"{self.desc}: {_fmt(self.n)}{tot} {self.unit}s, {dt:.1f}s", file=sys.stderr, flush=True)

    def update(self, n: float = 1) -> None:
        self.n += n
        if self.total:
            pct = 100 * self.n / self.total
            if pct >= self._next_pct:
                self._print()
                while self._next_pct <= pct:
                    self._next_pct += 10

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        self.desc = desc or ""

    def reset(self, total: float | None = None) -> None:
        self.n = 0
        self.total = total
        self._next_pct = 10

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @staticmethod
    def write(s: str, file: Any = None, **kwargs: Any) -> None:
        print(s, file=file or sys.stderr)

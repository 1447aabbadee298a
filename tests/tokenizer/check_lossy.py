#!/usr/bin/python3
"""Lossy decoding test: for random byte strings (mostly UTF-8-like, with truncated and invalid
sequences), `tokenizer_tool lossy` must give what Python's bytes.decode("utf-8", "replace")
gives, both one-shot (decode_lossy) and as the concatenation of streamed pieces.

usage: check_lossy.py TOKENIZER_TOOL WORK_DIR
"""
import os
import random
import subprocess
import sys


def sample(rng):
    pieces = [b"a", b" ", "中".encode(), "é".encode(), "😀".encode(), b"\xe4\xb8", b"\xf0\x9f", b"\xc3", b"\xed\xa0\x80",
              b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\xe0\x80\xaf", b"\x80", b"\xbf", b"\xff", b"\xfe", b"\xf8\x88\x80\x80\x80"]
    out = b""
    for _ in range(rng.randrange(0, 30)):
        out += bytes([rng.randrange(256)]) if rng.random() < 0.3 else rng.choice(pieces)
    return out


def main():
    tool, work = sys.argv[1:3]
    os.makedirs(work, exist_ok=True)
    tok_dir = os.path.join(work, "synthetic-2048")
    subprocess.run([tool, "synth", tok_dir, "2048", "9"], check=True, capture_output=True)
    rng = random.Random(2024)
    cases = [sample(rng) for _ in range(5000)]
    path = os.path.join(work, "lossy.hex")
    with open(path, "w") as f:
        for c in cases:
            f.write(c.hex() + "\n")
    out = subprocess.run([tool, "lossy", tok_dir, path], check=True, capture_output=True).stdout.decode().splitlines()
    failures = 0
    for c, line in zip(cases, out):
        want = c.decode("utf-8", "replace").encode("utf-8").hex()
        one_shot, streamed = line.split(" ") if " " in line else (line, "")
        if one_shot != want or streamed != want:
            failures += 1
            if failures <= 5:
                print(f"bytes {c.hex()}: python {want}, decode_lossy {one_shot}, streamed {streamed}")
    if len(out) != len(cases):
        failures += 1
        print(f"expected {len(cases)} lines, got {len(out)}")
    print(f"{len(cases)} byte strings, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

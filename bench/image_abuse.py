#!/usr/bin/env python3
"""The image-path abuse cases of docs/reliability.md#images, measured on any `kimi-cpp` binary
(also one from before the fixes: only flags every version has are used), as a before/after table.

    /usr/bin/python3 bench/image_abuse.py --kimi build/bin/kimi-cpp [--kimi OLD/kimi-cpp ...]

On a random k3-tiny checkpoint, per binary:
  - poisoning: a black 28x28 PNG (A), then a white one whose last 8 RGB bytes are
    489815cf756f1ebc (B; the same key under the old invertible pixel hash): does B after A get
    A's logprobs, or B's own (B alone on a fresh server)?
  - a GIF declaring a 9459x9459 screen with a 1x1 frame, 1 and 8 per request (--max-model-len
    512): status, time, growth of the server's peak RSS (VmHWM);
  - a 2800x2800 image whose client hangs up after 2 s (--max-model-len 40000): how long a 28x28
    image sent beside it waits.
Needs Debian's python3-pil. Prints one JSON object per binary; never fails on the figures.
"""
import argparse
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "server"))
import http_common as hc  # noqa: E402
import http_images as hi  # noqa: E402
from http_common import Server, post  # noqa: E402


def chat(port, *urls, timeout=300):
    return post(port, "/v1/chat/completions", hi.image_chat(*urls), timeout=timeout)


def measure(model):
    out = {}
    s = Server("--max-model-len", "512", model=model)
    a = bytes(28 * 28 * 3)
    b = bytearray(b"\xff" * (28 * 28 * 3))
    b[-8:] = bytes.fromhex("489815cf756f1ebc")
    url_a, url_b = hi.data_url(hi.png(a, 28, 28), "image/png"), hi.data_url(hi.png(b, 28, 28), "image/png")
    ra, rb = chat(s.port, url_a), chat(s.port, url_b)
    fresh = Server("--max-model-len", "512", model=model)
    alone = chat(fresh.port, url_b)
    fresh.stop()
    lp = lambda r: r.json()["choices"][0]["logprobs"]  # noqa: E731
    out["b_after_a_gets_a_reply"] = lp(rb) == lp(ra)
    out["b_after_a_equals_b_alone"] = lp(rb) == lp(alone)
    bomb = hi.data_url(hi.gif_screen(9459, 9459), "image/gif")
    for n in (1, 8):
        h0, t0 = hi.vm_hwm_kib(s), time.monotonic()
        r = chat(s.port, *([bomb] * n))
        out["bomb_x%d" % n] = {"status": r.status, "seconds": round(time.monotonic() - t0, 3),
                               "vm_hwm_growth_mib": (hi.vm_hwm_kib(s) - h0) // 1024}
    s.stop()
    big_server = Server("--max-model-len", "40000", model=model)
    big = hi.image_chat(hi.data_url(hi.gif_screen(2800, 2800), "image/gif"))
    t = threading.Thread(target=hi.send_and_hang_up, args=(big_server.port, big, 2.0))
    t.start()
    time.sleep(0.5)
    t0 = time.monotonic()
    r = chat(big_server.port, hi.data_url(hi.png(bytes(range(256)) * 9 + bytes(48), 28, 28), "image/png"))
    out["small_beside_abandoned_large"] = {"status": r.status, "seconds": round(time.monotonic() - t0, 2)}
    t.join()
    big_server.stop()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kimi", action="append", required=True, help="a kimi-cpp binary (repeatable)")
    args = ap.parse_args()
    try:
        for kimi in args.kimi:
            hc.KIMI = os.path.abspath(kimi)
            model = hc.make_model(seed=13, preset="k3-tiny")
            print(json.dumps({"kimi": kimi, **measure(model)}), flush=True)
    finally:
        hc.cleanup()


if __name__ == "__main__":
    main()

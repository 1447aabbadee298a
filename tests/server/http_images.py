"""HTTP tests, part 15: images cannot poison, starve or stall the server (a k3-tiny checkpoint).

- Cache poisoning: a black 28x28 PNG (A) and a white one whose last 8 RGB bytes are
  489815cf756f1ebc (B) had the same 64-bit key under the old, invertible pixel hash (checked here
  with that hash). B sent after A must get exactly B's reply on a fresh server (logprobs bit for
  bit), and no encoder-cache hit.
- Budgets before work: a ~40-byte GIF declaring a 9459x9459 screen with a 1x1 frame, alone and 8 per
  request, is a 400 before any pixel is decoded: the server's peak RSS (VmHWM) grows < 256 MiB.
  Over --max-image-pixels and over --mm-request-memory: 400s naming the flag, before the context
  check.
- Stalls: a large image whose client hangs up after 2 s does not hold up another client's small
  image (answered within 10 s), and its encode stops between tower blocks (the
  kimi:mm_encodes_stopped_total counter); two requests for the same new image at once encode it
  once; an encode past --request-timeout is a 408; past --mm-memory (the images of all requests in
  flight) a request waits, then gets a 503 naming the flag.
Run through http_test.py.
"""
import base64
import http.client
import io
import json
import struct
import threading
import time
import unittest

import http_common as hc
from http_common import Server, check_error, metrics, post

NORMAL = None   # --max-model-len 512
LARGE = None    # --max-model-len 40000: large images are accepted
SLOW = None     # --request-timeout 2
TIGHT = None    # --mm-memory 0.1: one 2000x2000 image at a time


def setUpModule():
    global NORMAL, LARGE, SLOW, TIGHT
    model = hc.make_model(seed=13, preset="k3-tiny")
    NORMAL = Server("--max-model-len", "512", model=model)
    LARGE = Server("--max-model-len", "40000", "--mm-request-memory", "3", "--mm-memory", "6", model=model)
    SLOW = Server("--max-model-len", "40000", "--mm-request-memory", "3", "--request-timeout", "2", model=model)
    TIGHT = Server("--max-model-len", "40000", "--mm-request-memory", "0.1", "--mm-memory", "0.1", "--request-timeout",
                   "2", model=model)


# ---------------------------------------------------------------------------------------- images

def png(rgb, w, h):
    from PIL import Image
    buf = io.BytesIO()
    Image.frombytes("RGB", (w, h), bytes(rgb)).save(buf, "PNG")
    return buf.getvalue()


def gif_screen(w, h):
    """A GIF89a whose logical screen is w x h, with one 1x1 frame (a 2-colour global table)."""
    return (b"GIF89a" + struct.pack("<HHBBB", w, h, 0x80, 0, 0) + b"\x00\x00\x00\xff\xff\xff" +
            b"," + struct.pack("<HHHHB", 0, 0, 1, 1, 0) + b"\x02\x02\x44\x01\x00" + b";")


def data_url(b, mime):
    return "data:%s;base64,%s" % (mime, base64.b64encode(b).decode())


def image_chat(*urls, max_tokens=6, **kw):
    parts = [{"type": "image_url", "image_url": {"url": u}} for u in urls]
    parts.append({"type": "text", "text": "What is in the image?"})
    body = {"model": hc.SERVED, "messages": [{"role": "user", "content": parts}], "max_tokens": max_tokens,
            "temperature": 0, "ignore_eos": True, "logprobs": True, "top_logprobs": 2}
    body.update(kw)
    return body


def old_key(w, h, rgb):
    """The pixel hash kimi.cpp used before SHA-256 (splitmix steps over 8-byte words): invertible."""
    m64 = (1 << 64) - 1

    def mix(x, v):
        x ^= (v + 0x9e3779b97f4a7c15) & m64
        x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & m64
        x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & m64
        return x ^ (x >> 31)

    k = 0x6a09e667f3bcc908
    for v in (w, h, w, h, 0, 0):
        k = mix(k, v)
    n = len(rgb)
    for i in range(0, n - n % 8, 8):
        k = mix(k, int.from_bytes(rgb[i:i + 8], "little"))
    tail = int.from_bytes(bytes(rgb[n - n % 8:]) + bytes(8 - n % 8), "little") if n % 8 else 0
    return mix(k, tail ^ n)


def vm_hwm_kib(server):
    with open("/proc/%d/status" % server.proc.pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def send_and_hang_up(port, body, after_s):
    """POSTs `body` (JSON) to /v1/chat/completions and closes the connection after `after_s`
    seconds without reading the answer."""
    data = json.dumps(body).encode()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    c.putrequest("POST", "/v1/chat/completions")
    c.putheader("Content-Type", "application/json")
    c.putheader("Content-Length", str(len(data)))
    c.endheaders(data)
    time.sleep(after_s)
    c.sock.close()


def counter(server, name):
    return metrics(server.port).get(name, 0.0)


class T15Images(unittest.TestCase):
    def test_a_colliding_images_do_not_share_a_cache_entry(self):
        a = bytes(28 * 28 * 3)
        b = bytearray(b"\xff" * (28 * 28 * 3))
        b[-8:] = bytes.fromhex("489815cf756f1ebc")
        self.assertEqual(old_key(28, 28, a), old_key(28, 28, b))   # the probe's pair: one key under the old hash
        self.assertEqual(old_key(28, 28, a), 0xab5785bad35ceed0)
        url_a, url_b = data_url(png(a, 28, 28), "image/png"), data_url(png(b, 28, 28), "image/png")
        hits0 = counter(NORMAL, "kimi:mm_encoder_cache_hits_total")
        ra = post(NORMAL.port, "/v1/chat/completions", image_chat(url_a))
        self.assertEqual(ra.status, 200, ra)
        rb = post(NORMAL.port, "/v1/chat/completions", image_chat(url_b))
        self.assertEqual(rb.status, 200, rb)
        self.assertEqual(counter(NORMAL, "kimi:mm_encoder_cache_hits_total"), hits0, "B must not hit A's encoder entry")
        fresh = Server("--max-model-len", "512", model=NORMAL.args[NORMAL.args.index("--model") + 1])
        try:
            alone = post(fresh.port, "/v1/chat/completions", image_chat(url_b))
        finally:
            fresh.stop()
        self.assertEqual(alone.status, 200, alone)
        got, want = rb.json()["choices"][0], alone.json()["choices"][0]
        self.assertEqual(got["message"]["content"], want["message"]["content"])
        self.assertEqual(json.dumps(got["logprobs"]), json.dumps(want["logprobs"]), "B after A == B alone, bit for bit")
        self.assertNotEqual(json.dumps(ra.json()["choices"][0]["logprobs"]), json.dumps(got["logprobs"]))

    def test_b_bomb_gif_is_refused_before_decoding(self):
        bomb = data_url(gif_screen(9459, 9459), "image/gif")
        warm = post(NORMAL.port, "/v1/chat/completions", image_chat(data_url(png(bytes(28 * 28 * 3), 28, 28), "image/png")))
        self.assertEqual(warm.status, 200, warm)
        before = vm_hwm_kib(NORMAL)
        t0 = time.monotonic()
        for n in (1, 8):
            r = post(NORMAL.port, "/v1/chat/completions", image_chat(*([bomb] * n)))
            check_error(self, r, 400, msg="a bomb GIF x%d" % n)
        grew = vm_hwm_kib(NORMAL) - before
        print("\n      peak RSS grew %d KiB for the bomb GIFs (x1, x8)" % grew, end=" ")
        self.assertLess(grew, 256 * 1024, "peak RSS grew %d KiB" % grew)
        self.assertLess(time.monotonic() - t0, 5.0, "refusing from the header is immediate")
        # over --max-image-pixels (a 10000 x 10000 screen is 100 M pixels, the default limit 89.5 M)
        r = post(NORMAL.port, "/v1/chat/completions", image_chat(data_url(gif_screen(10000, 10000), "image/gif")))
        check_error(self, r, 400, msg="over --max-image-pixels")
        self.assertIn("--max-image-pixels", r.json()["error"]["message"])
        # over --mm-request-memory (1 GiB by default): large screens, 8 in one request
        r = post(NORMAL.port, "/v1/chat/completions", image_chat(*([data_url(gif_screen(9000, 9000), "image/gif")] * 8)))
        check_error(self, r, 400, msg="over --mm-request-memory")
        self.assertIn("--mm-request-memory", r.json()["error"]["message"])
        r = post(NORMAL.port, "/v1/chat/completions", image_chat(data_url(png(bytes(28 * 28 * 3), 28, 28), "image/png")))
        self.assertEqual(r.status, 200, r)   # and the server still serves

    def test_c_abandoned_large_encode_does_not_stall_a_small_one(self):
        stopped0 = counter(LARGE, "kimi:mm_encodes_stopped_total")
        big = image_chat(data_url(gif_screen(2800, 2800), "image/gif"))
        t = threading.Thread(target=send_and_hang_up, args=(LARGE.port, big, 2.0))
        t.start()
        time.sleep(0.5)
        small = data_url(png(bytes(range(256)) * 9 + bytes(48), 28, 28), "image/png")
        t0 = time.monotonic()
        r = post(LARGE.port, "/v1/chat/completions", image_chat(small), timeout=60)
        took = time.monotonic() - t0
        t.join()
        self.assertEqual(r.status, 200, r)
        self.assertLess(took, 10.0, "a small image waited %.1f s behind an abandoned large one" % took)
        deadline = time.monotonic() + 90
        while counter(LARGE, "kimi:mm_encodes_stopped_total") < stopped0 + 1:
            self.assertLess(time.monotonic(), deadline, "the abandoned encode did not stop")
            time.sleep(0.2)
        print("\n      small image beside an abandoned 2800x2800 one: %.2f s; the large encode stopped %.1f s after "
              "the hang-up" % (took, time.monotonic() - t0 - 1.5), end=" ")
        hc.wait_metrics(LARGE.port, lambda m: m.get("kimi:mm_encodes_running", 0) == 0, timeout=30)

    def test_d_same_image_at_once_is_encoded_once(self):
        rgb = bytes((i * 7) % 251 for i in range(560 * 560 * 3))
        url = data_url(png(rgb, 560, 560), "image/png")
        enc0 = counter(LARGE, "kimi:mm_images_encoded_total")
        out = [None, None]

        def go(i):
            out[i] = post(LARGE.port, "/v1/chat/completions", image_chat(url), timeout=120)

        ts = [threading.Thread(target=go, args=(i,)) for i in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        for r in out:
            self.assertEqual(r.status, 200, r)
        self.assertEqual(counter(LARGE, "kimi:mm_images_encoded_total"), enc0 + 1)
        self.assertEqual(out[0].json()["choices"][0]["logprobs"], out[1].json()["choices"][0]["logprobs"])

    def test_e_encode_past_the_request_timeout_is_a_408(self):
        t0 = time.monotonic()
        r = post(SLOW.port, "/v1/chat/completions", image_chat(data_url(gif_screen(2000, 2000), "image/gif")),
                 timeout=120)
        check_error(self, r, 408, msg="encode past --request-timeout 2")
        self.assertLess(time.monotonic() - t0, 60)
        hc.wait_metrics(SLOW.port, lambda m: m.get("kimi:mm_encodes_stopped_total", 0) >= 1, timeout=5)

    def test_f_past_the_global_image_memory_a_request_waits_then_gets_a_503(self):
        out = {}

        def go(name, side):
            out[name] = post(TIGHT.port, "/v1/chat/completions", image_chat(data_url(gif_screen(side, side), "image/gif")),
                             timeout=120)

        waits0 = hc.metrics(TIGHT.port).get("kimi:mm_memory_waits_total", 0)
        first = threading.Thread(target=go, args=("first", 2000))   # ~62 MiB of the 102 MiB budget
        first.start()
        time.sleep(0.5)
        t0 = time.monotonic()
        go("second", 2001)   # another ~62 MiB: waits for room until its deadline
        waited = time.monotonic() - t0
        first.join()
        # the budget made it wait: a 408 alone could also come from an encode that never waited
        self.assertEqual(hc.metrics(TIGHT.port).get("kimi:mm_memory_waits_total", 0) - waits0, 1,
                         "the second request must have waited for image memory")
        # The second waits for room; it gets a 503 when its deadline passes while the first still
        # holds the memory. The first gives it back once it notices its own deadline (between tower
        # blocks), which on a slow machine can come before the second's: the second then gets the
        # room and runs into its own deadline (408). Either way it waited first.
        check_error(self, out["second"], (503, 408), msg="past --mm-memory")
        if out["second"].status == 503:
            self.assertIn("--mm-memory", out["second"].json()["error"]["message"])
        self.assertGreaterEqual(waited, 1.5, "it waited for room first")
        check_error(self, out["first"], 408, msg="the first one ran past --request-timeout 2")
        r = post(TIGHT.port, "/v1/chat/completions", image_chat(data_url(png(bytes(28 * 28 * 3), 28, 28), "image/png")))
        self.assertEqual(r.status, 200, r)   # the budget is given back

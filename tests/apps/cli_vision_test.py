#!/usr/bin/python3
"""The terminal commands with Kimi-K3 images: generate --image, chat /image, score --request,
chat-template (expanded and --no-expand-images), inspect (the tower and the tensor manifest),
quantize (the tower stays BF16), and bad images → exit 1 with one clear line, never a crash.

  cli_vision_test.py --kimi BIN
Needs Debian's /usr/bin/python3 with python3-pil (the images are drawn with it)."""

import argparse
import base64
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from PIL import Image

KIMI = None
WORK = None
MODEL = None


def run(*args, input=None, timeout=120):
    p = subprocess.run([KIMI, *args], input=input, capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def image_file(name, w, h, mode="RGB", fmt="PNG"):
    img = Image.new(mode, (w, h))
    img.putdata([((x * 9) % 256, (y * 5) % 256, (x + y) % 256, 255)[: len(mode)] for y in range(h) for x in range(w)])
    path = os.path.join(WORK, name)
    img.save(path, format=fmt)
    return path


def setUpModule():
    global WORK, MODEL
    WORK = tempfile.mkdtemp(prefix="kimi-cli-vision-")
    MODEL = os.path.join(WORK, "k3")
    rc, _, err = run("make-model", "--preset", "k3-tiny", "--seed", "4", "--out", MODEL, "--quiet")
    assert rc == 0, err


def tearDownModule():
    shutil.rmtree(WORK, ignore_errors=True)


class Vision(unittest.TestCase):
    def gen(self, *extra):
        rc, out, err = run("generate", "--model", MODEL, "--json", "--quiet", "-n", "4", "--temperature", "0",
                           "--ignore-eos", *extra)
        self.assertEqual(rc, 0, err)
        return json.loads(out)

    def test_generate_image_places(self):
        a = image_file("a.png", 90, 60)
        text = self.gen("--prompt", "Describe it.")
        before = self.gen("--prompt", "Describe it.", "--image", a)   # no placeholder: the image goes first
        marked = self.gen("--prompt", "<|kimi_image_placeholder|>Describe it.", "--image", a)
        # 90x60 pads to 112x84: 4 x 3 merged tokens + begin, "image 90x60", content, end
        self.assertGreater(before["prompt_tokens"], text["prompt_tokens"] + 12)
        self.assertEqual(before["token_ids"], marked["token_ids"])
        two = self.gen("--prompt", "x", "--image", a, "--image", image_file("b.jpg", 30, 200, fmt="JPEG"))
        self.assertGreater(two["prompt_tokens"], before["prompt_tokens"])

    def test_generate_bad_images_exit_1(self):
        bad = os.path.join(WORK, "bad.png")
        with open(bad, "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40)
        trunc = os.path.join(WORK, "trunc.png")
        with open(image_file("full.png", 50, 50), "rb") as f:
            data = f.read()
        with open(trunc, "wb") as f:
            f.write(data[: len(data) // 2])
        for path in (bad, trunc, os.path.join(WORK, "missing.png")):
            rc, out, err = run("generate", "--model", MODEL, "--prompt", "x", "--image", path, "-n", "2")
            self.assertEqual(rc, 1, err)
            lines = [l for l in err.splitlines() if l.strip()]
            self.assertEqual(len(lines), 1, err)
            self.assertIn(os.path.basename(path), lines[0])
        rc, _, err = run("generate", "--model", MODEL, "--prompt", "<|kimi_image_placeholder|> and "
                         "<|kimi_image_placeholder|>", "--image", image_file("c.png", 20, 20), "-n", "2")
        self.assertEqual(rc, 1, err)
        self.assertIn("--image", err)

    def test_chat_image_command(self):
        a = image_file("chat.png", 64, 48)   # pads to 84 x 56: 3 x 2 merged tokens
        rc, out, err = run("chat", "--model", MODEL, "-n", "4", "--temperature", "0", "--quiet", "--stop", "\n",
                           input=f"/image {a}\nWhat is it?\n/image {WORK}/nothing.png\nAgain\n".encode())
        self.assertEqual(rc, 0, err)
        self.assertIn("(image 64x48, 6 tokens: it goes with your next message)", out)
        self.assertIn("nothing.png: no such image file", out)

    def test_score_request_and_chat_template(self):
        with open(image_file("s.png", 70, 70), "rb") as f:
            png = f.read()
        url = "data:image/png;base64," + base64.b64encode(png).decode()
        req = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"},
                                                         {"type": "image_url", "image_url": {"url": url}}]}]}
        rpath = os.path.join(WORK, "req.json")
        with open(rpath, "w") as f:
            json.dump(req, f)
        out, toks = os.path.join(WORK, "l.f32"), os.path.join(WORK, "t.json")
        rc, _, err = run("score", "--model", MODEL, "--request", rpath, "--out", out, "--tokens-out", toks)
        self.assertEqual(rc, 0, err)
        with open(toks) as f:
            ids = json.load(f)
        with open(os.path.join(MODEL, "config.json")) as f:
            cfg = json.load(f)
        self.assertEqual(ids.count(cfg["media_placeholder_token_id"]), 9)   # 70x70 pads to 84x84: 3 x 3
        self.assertEqual(os.path.getsize(out), 4 * len(ids) * cfg["text_config"]["vocab_size"])
        # --max-image-tokens lowers the resize budget: 9 tokens become at most 4
        rc, _, err = run("score", "--model", MODEL, "--request", rpath, "--out", out, "--tokens-out", toks,
                         "--max-image-tokens", "4")
        self.assertEqual(rc, 0, err)
        with open(toks) as f:
            capped = json.load(f).count(cfg["media_placeholder_token_id"])
        self.assertGreaterEqual(capped, 1)
        self.assertLessEqual(capped, 4)
        rc, o, err = run("chat-template", "--tokenizer", MODEL, "--request", rpath, "--json")
        self.assertEqual(rc, 0, err)
        j = json.loads(o)
        self.assertEqual(j["ids"], ids)   # the server's prompt, byte for byte
        self.assertIn("<|media_begin|>image 70x70<|media_content|>" + "<|media_pad|>" * 9 + "<|media_end|>", j["text"])
        rc, o, err = run("chat-template", "--tokenizer", MODEL, "--request", rpath, "--json", "--no-expand-images")
        self.assertEqual(rc, 0, err)
        self.assertIn("hi<|kimi_image_placeholder|>", json.loads(o)["text"])

    def test_inspect_and_quantize_keep_the_tower(self):
        rc, out, err = run("inspect", "--model", MODEL)
        self.assertEqual(rc, 0, err)
        self.assertIn("vision:       MoonViT, 2 blocks of width 32 (2 heads x 16, MLP 64), patch 14, position grid 8x8",
                      out)
        rc, out, err = run("inspect", "--model", MODEL, "--tensors", "--json")
        self.assertEqual(rc, 0, err)
        rows = {r["name"]: r for r in json.loads(out)}
        for name, shape in [("vision_tower.patch_embed.proj.weight", [32, 3, 14, 14]),
                            ("vision_tower.patch_embed.pos_emb.weight", [8, 8, 32]),
                            ("vision_tower.encoder.blocks.1.wqkv.weight", [96, 32]),
                            ("vision_tower.encoder.blocks.1.mlp.fc1.weight", [32, 64]),
                            ("mm_projector.proj.0.weight", [128, 128]), ("mm_projector.proj.2.weight", [64, 128]),
                            ("mm_projector.post_norm.weight", [64])]:
            self.assertEqual(rows[name]["shape"], shape, name)
            self.assertEqual(rows[name]["dtype"], "BF16", name)
            self.assertFalse(rows[name]["quantizable"], name)
            self.assertIsNone(rows[name]["split"], name)
        q = os.path.join(WORK, "q")
        rc, _, err = run("quantize", "--model", MODEL, "--out", q, "--format", "mxfp4", "--targets", "all-linear")
        self.assertEqual(rc, 0, err)
        rc, out, err = run("inspect", "--model", q, "--tensors", "--json")
        self.assertEqual(rc, 0, err)
        qrows = {r["name"]: r for r in json.loads(out)}
        self.assertEqual(qrows["mm_projector.proj.0.weight"]["dtype"], "BF16")
        self.assertIn("vision_tower.encoder.blocks.0.wqkv.weight", qrows)
        rc, out, err = run("generate", "--model", q, "--prompt", "x", "--image", image_file("q.png", 30, 30), "-n", "2",
                           "--json", "--quiet")
        self.assertEqual(rc, 0, err)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--kimi", required=True)
    a, rest = ap.parse_known_args()
    KIMI = os.path.abspath(a.kimi)
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)

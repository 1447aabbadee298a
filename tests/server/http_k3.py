"""HTTP tests, part 8: a Kimi-K3 checkpoint served end to end.

A random `k3-tiny` model (the published K3 layout: nested text_config, language_model. prefix,
vision tensors skipped) on its own server: /v1/models, chat and completions streamed and not
(greedy stream text == non-stream text, usage; also on the published MXFP4 form made by
make-model --mxfp4-experts), the skipped-tensor and cache lines at startup,
and an out-of-range prompt token id as a 400. Run through http_test.py.
"""
import re
import unittest

import http_common as hc
from http_common import SERVED, chat_body, check_error, completion_body, get, post, stream

K3 = None
K3_MXFP4 = None   # the published MXFP4 form (make-model --mxfp4-experts)


def setUpModule():
    global K3, K3_MXFP4
    K3 = hc.Server("--max-model-len", "512", model=hc.make_model(seed=4, preset="k3-tiny"))
    K3_MXFP4 = hc.Server("--max-model-len", "512", model=hc.make_model(
        seed=5, preset="k3-tiny", extra=("--mxfp4-experts", "--set", "text_config.routed_expert_hidden_size=64")))


class T8KimiK3(unittest.TestCase):
    def test_a_startup_lines(self):
        # stderr is read by its own thread: wait for each line rather than racing the ready line
        K3.wait_line(K3.err, re.compile(r"images on \(vision tower 2 blocks"), 10)
        K3.wait_line(K3.err, re.compile(r"cache: \d+ state slots x [0-9.]+ [KMG]iB \(KDA\)"), 10)
        K3.wait_line(K3.err, re.compile(r"chat format kimi-k3"), 10)

    def test_b_models(self):
        r = get(K3.port, "/v1/models")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["data"][0]["id"], SERVED)

    def test_c_chat_and_completion_stream_equal_plain(self):
        for server in (K3, K3_MXFP4):
            self.stream_equals_plain(server)

    def stream_equals_plain(self, server):
        for path, body, chat in (("/v1/chat/completions", chat_body(max_tokens=12, temperature=0, ignore_eos=True), True),
                                 ("/v1/completions", completion_body(max_tokens=12, temperature=0, ignore_eos=True), False)):
            r = post(server.port, path, body)
            self.assertEqual(r.status, 200, r)
            j = r.json()
            self.assertEqual(j["usage"]["completion_tokens"], 12, j)
            plain = j["choices"][0]["message"]["content"] if chat else j["choices"][0]["text"]
            s = stream(server.port, path, dict(body, stream=True))
            self.assertEqual(s.status, 200)
            text = "".join((ch["delta"].get("content") or "") if chat else ch["text"]
                           for ev in s.events for ch in ev["choices"])
            self.assertEqual(text, plain, path)

    def test_d_bad_token_id(self):
        r = post(K3.port, "/v1/completions", completion_body(prompt=[1, 2, 99999]))
        check_error(self, r, 400, msg="out-of-range prompt token id")
        r = post(K3.port, "/v1/chat/completions", chat_body())
        self.assertEqual(r.status, 200, r)   # and the server still serves


if __name__ == "__main__":
    unittest.main()

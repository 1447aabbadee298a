"""HTTP tests, part 2: generation on the shared server.

Chat and completions, streamed and not, read with plain http.client: strict SSE framing, the usage
chunk, [DONE] last, stream text == non-stream text (greedy), n > 1, finish_reason length / stop,
logprobs shapes, system_fingerprint, every optional field accepted. Run through http_test.py.
"""
import time
import unittest

import http_common as hc
from http_common import SERVED, chat_body, completion_body, post, stream

setUpModule = hc.setup_shared      # the model and the shared server: once, for all the modules


def check_usage(tc, u, prompt=None, completion=None):
    for k in ("prompt_tokens", "completion_tokens", "total_tokens"):
        tc.assertIsInstance(u[k], int, u)
    tc.assertEqual(u["total_tokens"], u["prompt_tokens"] + u["completion_tokens"], u)
    if prompt is not None:
        tc.assertEqual(u["prompt_tokens"], prompt, u)
    if completion is not None:
        tc.assertEqual(u["completion_tokens"], completion, u)


def check_envelope(tc, j, obj, id_prefix):
    tc.assertEqual(j["object"], obj, j)
    tc.assertIsInstance(j["id"], str)
    tc.assertTrue(j["id"].startswith(id_prefix), j["id"])
    tc.assertIsInstance(j["created"], int)
    tc.assertLessEqual(abs(j["created"] - time.time()), 3600 * 24, j["created"])
    tc.assertEqual(j["model"], SERVED)
    tc.assertIsInstance(j.get("system_fingerprint"), str, j)
    tc.assertTrue(j["system_fingerprint"], j)


def stream_text(tc, s, chat):
    """The concatenated text of choice 0 of a stream, and its last finish_reason."""
    parts, finish = [], None
    for ev in s.events:
        for ch in ev["choices"]:
            tc.assertEqual(ch["index"], 0, ev)
            if chat:
                c = ch["delta"].get("content")
                if c is not None:
                    parts.append(c)
            else:
                parts.append(ch["text"])
            if ch.get("finish_reason") is not None:
                tc.assertIsNone(finish, "two chunks with a finish_reason: %r" % ev)
                finish = ch["finish_reason"]
    return "".join(parts), finish



# ----------------------------------------------------------------------------------------------
# 2. Generation
# ----------------------------------------------------------------------------------------------

class T2Generation(unittest.TestCase):
    def test_chat_non_stream(self):
        r = post(hc.MAIN.port, "/v1/chat/completions", chat_body(max_tokens=8, ignore_eos=True))
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.headers["content-type"].startswith("application/json"))
        j = r.json()
        check_envelope(self, j, "chat.completion", "chatcmpl-")
        self.assertEqual(len(j["choices"]), 1)
        ch = j["choices"][0]
        self.assertEqual(ch["index"], 0)
        self.assertEqual(ch["message"]["role"], "assistant")
        self.assertIsInstance(ch["message"]["content"], str)
        self.assertEqual(ch["finish_reason"], "length")
        self.assertIn("logprobs", ch)
        check_usage(self, j["usage"], completion=8)

    def test_completion_non_stream(self):
        r = post(hc.MAIN.port, "/v1/completions", completion_body(max_tokens=8, ignore_eos=True))
        self.assertEqual(r.status, 200, r)
        j = r.json()
        check_envelope(self, j, "text_completion", "cmpl-")
        self.assertEqual(len(j["choices"]), 1)
        ch = j["choices"][0]
        self.assertEqual(ch["index"], 0)
        self.assertIsInstance(ch["text"], str)
        self.assertEqual(ch["finish_reason"], "length")
        tok = post(hc.MAIN.port, "/tokenize", {"prompt": "Once upon a time"}).json()
        check_usage(self, j["usage"], prompt=tok["count"], completion=8)

    def _stream_vs_plain(self, path, body, chat):
        plain = post(hc.MAIN.port, path, body)
        self.assertEqual(plain.status, 200, plain)
        pj = plain.json()
        s = stream(hc.MAIN.port, path, dict(body, stream=True, stream_options={"include_usage": True}))
        self.assertEqual(s.status, 200, s.raw_error)
        self.assertTrue(s.headers["content-type"].startswith("text/event-stream"), s.headers)
        self.assertTrue(s.done, "no data: [DONE]")
        self.assertGreaterEqual(len(s.events), 2)
        obj, prefix = ("chat.completion.chunk", "chatcmpl-") if chat else ("text_completion", "cmpl-")
        ids = set()
        for ev in s.events:
            check_envelope(self, ev, obj, prefix)
            ids.add(ev["id"])
        self.assertEqual(len(ids), 1, "one id across the chunks of a stream")
        last = s.events[-1]
        self.assertEqual(last["choices"], [], "the usage chunk has no choices")
        check_usage(self, last["usage"], prompt=pj["usage"]["prompt_tokens"], completion=body["max_tokens"])
        for ev in s.events[:-1]:
            self.assertEqual(len(ev["choices"]), 1, ev)
            self.assertNotIn("usage", ev, "usage only in the final chunk without continuous_usage_stats")
        if chat:
            self.assertEqual(s.events[0]["choices"][0]["delta"].get("role"), "assistant", s.events[0])
            for ev in s.events[1:-1]:
                self.assertNotIn("role", ev["choices"][0]["delta"], ev)
        text, finish = stream_text(self, s, chat)
        self.assertEqual(finish, "length")
        self.assertIsNotNone(s.events[-2]["choices"][0]["finish_reason"], "finish_reason in the last choice chunk")
        want = pj["choices"][0]["message"]["content"] if chat else pj["choices"][0]["text"]
        self.assertEqual(text, want, "stream concatenation != non-stream text (greedy)")
        return text

    def test_chat_stream_equals_non_stream(self):
        t = self._stream_vs_plain("/v1/chat/completions", chat_body(max_tokens=24, temperature=0, ignore_eos=True), True)
        self.assertTrue(t)

    def test_completion_stream_equals_non_stream(self):
        t = self._stream_vs_plain("/v1/completions", completion_body(max_tokens=24, temperature=0, ignore_eos=True), False)
        self.assertTrue(t)

    def test_greedy_is_deterministic_and_seed_reproducible(self):
        b = completion_body(max_tokens=12, temperature=0, ignore_eos=True)
        t1 = post(hc.MAIN.port, "/v1/completions", b).json()["choices"][0]["text"]
        t2 = post(hc.MAIN.port, "/v1/completions", b).json()["choices"][0]["text"]
        self.assertEqual(t1, t2)
        b = completion_body(max_tokens=12, temperature=1.0, seed=1234, ignore_eos=True)
        s1 = post(hc.MAIN.port, "/v1/completions", b).json()["choices"][0]["text"]
        s2 = post(hc.MAIN.port, "/v1/completions", b).json()["choices"][0]["text"]
        self.assertEqual(s1, s2, "the same seed gives the same sample")

    def test_stream_without_usage(self):
        s = stream(hc.MAIN.port, "/v1/chat/completions", chat_body(max_tokens=3, ignore_eos=True, stream=True))
        self.assertEqual(s.status, 200, s.raw_error)
        self.assertTrue(s.done)
        for ev in s.events:
            self.assertNotIn("usage", ev)
            self.assertEqual(len(ev["choices"]), 1)
        self.assertEqual(s.events[-1]["choices"][0]["finish_reason"], "length")

    def test_n_choices(self):
        r = post(hc.MAIN.port, "/v1/completions", completion_body(max_tokens=3, n=3, ignore_eos=True))
        self.assertEqual(r.status, 200, r)
        j = r.json()
        self.assertEqual(sorted(c["index"] for c in j["choices"]), [0, 1, 2])
        for c in j["choices"]:
            self.assertEqual(c["finish_reason"], "length")
        check_usage(self, j["usage"], completion=9)
        s = stream(hc.MAIN.port, "/v1/chat/completions", chat_body(max_tokens=3, n=2, ignore_eos=True, stream=True,
                                                                stream_options={"include_usage": True}))
        self.assertTrue(s.done)
        finishes = {}
        for ev in s.events[:-1]:
            for ch in ev["choices"]:
                if ch["finish_reason"] is not None:
                    finishes[ch["index"]] = ch["finish_reason"]
        self.assertEqual(finishes, {0: "length", 1: "length"})
        check_usage(self, s.events[-1]["usage"], completion=6)

    def test_stop_string(self):
        # the greedy text, then again with a stop string from its middle: it ends just before it
        b = completion_body(max_tokens=32, temperature=0, ignore_eos=True)
        full = post(hc.MAIN.port, "/v1/completions", b).json()["choices"][0]["text"]
        cut = None
        for i in range(1, len(full)):
            if full[i].isascii() and full[i].isalnum() and full[i] not in full[:i]:
                cut = i
                break
        if cut is None:
            self.skipTest("no usable stop character in the greedy text %r" % full)
        r = post(hc.MAIN.port, "/v1/completions", dict(b, stop=[full[cut]]))
        self.assertEqual(r.status, 200, r)
        ch = r.json()["choices"][0]
        self.assertEqual(ch["finish_reason"], "stop", (full, full[cut], ch))
        self.assertEqual(ch["text"], full[:cut], (full, full[cut], ch))

    def test_logprobs_shapes(self):
        r = post(hc.MAIN.port, "/v1/chat/completions", chat_body(max_tokens=3, ignore_eos=True, logprobs=True, top_logprobs=2))
        self.assertEqual(r.status, 200, r)
        content = r.json()["choices"][0]["logprobs"]["content"]
        self.assertEqual(len(content), 3)
        for e in content:
            self.assertIsInstance(e["token"], str)
            self.assertLessEqual(e["logprob"], 0.0)
            self.assertEqual(len(e["top_logprobs"]), 2)
        r = post(hc.MAIN.port, "/v1/completions", completion_body(max_tokens=3, ignore_eos=True, logprobs=2))
        self.assertEqual(r.status, 200, r)
        lp = r.json()["choices"][0]["logprobs"]
        self.assertEqual(len(lp["tokens"]), 3)
        self.assertEqual(len(lp["token_logprobs"]), 3)
        self.assertEqual(len(lp["text_offset"]), 3)

    def test_accepted_optional_fields(self):
        # every supported field at a valid value is accepted
        ok_chat = dict(temperature=0.5, top_p=0.9, top_k=5, min_p=0.05, n=1, stop=["\n\n", "END"], stop_token_ids=[5],
                       seed=7, presence_penalty=0.5, frequency_penalty=-0.5, repetition_penalty=1.1,
                       logit_bias={"5": 10, "6": -100}, logprobs=False, ignore_eos=False,
                       response_format={"type": "text"}, tool_choice="none",
                       tools=[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
                       max_completion_tokens=3)
        r = post(hc.MAIN.port, "/v1/chat/completions", chat_body(**ok_chat))
        self.assertEqual(r.status, 200, r)
        r = post(hc.MAIN.port, "/v1/chat/completions", chat_body(tool_choice="auto", top_k=-1, stop="x", model=None))
        self.assertEqual(r.status, 200, r)
        r = post(hc.MAIN.port, "/v1/completions", completion_body(prompt=[1, 2, 3], echo=True, logprobs=None, seed=0))
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.json()["choices"][0]["text"].startswith(
            post(hc.MAIN.port, "/detokenize", {"tokens": [1, 2, 3]}).json()["prompt"]))
        r = post(hc.MAIN.port, "/v1/completions", completion_body(prompt=["a", "b"], max_tokens=2))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(len(r.json()["choices"]), 2)

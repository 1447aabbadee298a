"""HTTP tests, part 1: the shape of every read-only endpoint on the shared server.

/health, /version, /v1/models, /, /tokenize <-> /detokenize, and /metrics parsed as Prometheus
text, whose counters move by exactly what the requests report. Run through http_test.py.
"""
import math
import os
import re
import unittest

import http_common as hc
from http_common import SERVED, chat_body, completion_body, get, idle, parse_prometheus, post, stream, wait_metrics

setUpModule = hc.setup_shared      # the model and the shared server: once, for all the modules


# ----------------------------------------------------------------------------------------------
# 1. Shapes and metrics
# ----------------------------------------------------------------------------------------------

class T1Shapes(unittest.TestCase):
    def test_health(self):
        r = get(hc.MAIN.port, "/health")
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.headers["content-type"].startswith("application/json"))
        self.assertEqual(r.json(), {"status": "ok"})

    def test_version(self):
        r = get(hc.MAIN.port, "/version")
        self.assertEqual(r.status, 200, r)
        j = r.json()
        self.assertEqual(j["name"], "kimi.cpp")
        self.assertRegex(j["version"], r"^\d+\.\d+\.\d+")
        self.assertEqual(j["version"], hc.MAIN.version, "the version in /version and in the ready line")

    def test_models(self):
        r = get(hc.MAIN.port, "/v1/models")
        self.assertEqual(r.status, 200, r)
        j = r.json()
        self.assertEqual(j["object"], "list")
        self.assertEqual(len(j["data"]), 1, j)
        card = j["data"][0]
        self.assertEqual(card["id"], SERVED)
        self.assertEqual(card["object"], "model")
        self.assertIsInstance(card["created"], int)
        self.assertIsInstance(card["owned_by"], str)
        self.assertEqual(card["root"], SERVED)   # the served name, never the path on disk
        self.assertNotIn(hc.MODEL_DIR, r.body.decode())
        self.assertEqual(card["max_model_len"], 4096)

    def test_index_page(self):
        r = get(hc.MAIN.port, "/")
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.headers["content-type"].startswith("text/html"), r.headers)
        page = r.body.decode("utf-8")
        self.assertIn("<html", page.lower())
        self.assertIn("kimi.cpp", page)
        self.assertIn("/v1/chat/completions", page)

    def test_web_assets(self):
        # the page's libraries, embedded from Debian's packages at build time, with a strict CSP
        for path, src in (("/web/vendor/marked.min.js", "/usr/share/javascript/marked/marked.min.js"),
                          ("/web/vendor/purify.min.js", "/usr/share/nodejs/dompurify/dist/purify.min.js")):
            r = get(hc.MAIN.port, path)
            self.assertEqual(r.status, 200, r)
            self.assertTrue(r.headers["content-type"].startswith("text/javascript"), r.headers)
            with open(src, "rb") as f:
                self.assertEqual(r.body, f.read(), path)
            csp = r.headers["content-security-policy"]
            self.assertIn("script-src 'self'", csp)
            self.assertIn("default-src 'none'", csp)
            self.assertEqual(r.headers["x-content-type-options"], "nosniff")
        # the page's own files, as written in web/
        web = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "web")
        for name, kind in (("index.html", "text/html"), ("app.js", "text/javascript"), ("app.css", "text/css")):
            r = get(hc.MAIN.port, "/web/" + name)
            self.assertEqual(r.status, 200, r)
            self.assertTrue(r.headers["content-type"].startswith(kind), r.headers)
            with open(os.path.join(web, name), "rb") as f:
                self.assertEqual(r.body, f.read(), name)
        self.assertEqual(get(hc.MAIN.port, "/web/nothing.js").status, 404)
        self.assertEqual(get(hc.MAIN.port, "/web/../v1/models").status, 404)

    def test_tokenize_detokenize_round_trip(self):
        for text in ["Hello, world!", "héllo wörld 你好 🙂", "a  b\n\tc", "x" * 300]:
            with self.subTest(text=text[:20]):
                r = post(hc.MAIN.port, "/tokenize", {"prompt": text})
                self.assertEqual(r.status, 200, r)
                j = r.json()
                self.assertEqual(j["count"], len(j["tokens"]), j)
                self.assertEqual(j["max_model_len"], 4096)
                self.assertIn("token_strs", j)
                self.assertGreater(j["count"], 0)
                for t in j["tokens"]:
                    self.assertIsInstance(t, int)
                    self.assertTrue(0 <= t < hc.VOCAB, t)
                r = post(hc.MAIN.port, "/detokenize", {"tokens": j["tokens"]})
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.json(), {"prompt": text})
        # with the model name, and the chat form: the template adds tokens around the content
        r = post(hc.MAIN.port, "/tokenize", {"model": SERVED, "prompt": "hi"})
        self.assertEqual(r.status, 200, r)
        plain = r.json()["count"]
        r = post(hc.MAIN.port, "/tokenize", {"model": SERVED, "messages": [{"role": "user", "content": "hi"}]})
        self.assertEqual(r.status, 200, r)
        chat = r.json()
        self.assertEqual(chat["count"], len(chat["tokens"]))
        self.assertGreater(chat["count"], plain)
        # the chat prompt length is what a chat completion reports as prompt_tokens
        r = post(hc.MAIN.port, "/v1/chat/completions", chat_body(messages=[{"role": "user", "content": "hi"}], max_tokens=1))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["usage"]["prompt_tokens"], chat["count"])
        r = post(hc.MAIN.port, "/detokenize", {"tokens": []})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json(), {"prompt": ""})

    REQUIRED = ["kimi:prompt_tokens_total", "kimi:generation_tokens_total", "kimi:num_requests_running",
                "kimi:num_requests_waiting", "kimi:kv_cache_usage_perc", "kimi:cache_blocks_used",
                "kimi:cache_blocks_total", "kimi:state_slots_used", "kimi:state_slots_total",
                "kimi:attn_output_copies_total", "kimi:step_heap_allocations_total",
                'kimi:request_success_total{finished_reason="stop"}',
                'kimi:request_success_total{finished_reason="length"}',
                'kimi:request_success_total{finished_reason="abort"}',
                'kimi:http_responses_total{code="2xx"}', 'kimi:http_responses_total{code="4xx"}',
                'kimi:http_responses_total{code="5xx"}']
    HISTOGRAMS = ["kimi:time_to_first_token_seconds", "kimi:inter_token_latency_seconds",
                  "kimi:e2e_request_latency_seconds"]

    def test_metrics_format_and_counters(self):
        r = get(hc.MAIN.port, "/metrics")
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.headers["content-type"].startswith("text/plain"), r.headers)
        m0, types = parse_prometheus(r.body.decode("utf-8"))
        for name in self.REQUIRED:
            self.assertIn(name, m0)
        for h in self.HISTOGRAMS:
            self.assertEqual(types.get(h), "histogram", h)
            buckets = sorted(((float(re.search(r'le="([^"]+)"', k).group(1)), v) for k, v in m0.items()
                              if k.startswith(h + "_bucket{")), key=lambda x: x[0])
            self.assertGreater(len(buckets), 1, h)
            self.assertEqual(buckets[-1][0], math.inf, h)
            self.assertEqual([v for _, v in buckets], sorted(v for _, v in buckets), "%s buckets are not cumulative" % h)
            self.assertEqual(buckets[-1][1], m0[h + "_count"], h)
            self.assertIn(h + "_sum", m0)
        self.assertEqual(m0["kimi:ready"], 1)
        self.assertGreater(m0["kimi:cache_blocks_total"], 0)
        self.assertGreater(m0["kimi:state_slots_total"], 0)
        self.assertTrue(0 <= m0["kimi:kv_cache_usage_perc"] <= 1)

        # two requests of known sizes, one bad one: the counters move by exactly that
        a = post(hc.MAIN.port, "/v1/chat/completions", chat_body(max_tokens=5, ignore_eos=True))
        b = post(hc.MAIN.port, "/v1/completions", completion_body(max_tokens=7, ignore_eos=True))
        s = stream(hc.MAIN.port, "/v1/completions", completion_body(max_tokens=3, ignore_eos=True, stream=True,
                                                                 stream_options={"include_usage": True}))
        bad = post(hc.MAIN.port, "/v1/completions", completion_body(temperature=-1))
        self.assertEqual(a.status, 200, a)
        self.assertEqual(b.status, 200, b)
        self.assertEqual(s.status, 200)
        self.assertEqual(bad.status, 400)
        ua, ub, us = a.json()["usage"], b.json()["usage"], s.events[-1]["usage"]
        # the HTTP status counters are bumped once a response is written: give them a moment
        c4 = 'kimi:http_responses_total{code="4xx"}'
        m1 = wait_metrics(hc.MAIN.port, lambda m: m[c4] > m0[c4], timeout=5)
        self.assertEqual(m1["kimi:prompt_tokens_total"] - m0["kimi:prompt_tokens_total"],
                         ua["prompt_tokens"] + ub["prompt_tokens"] + us["prompt_tokens"])
        self.assertEqual(m1["kimi:generation_tokens_total"] - m0["kimi:generation_tokens_total"], 5 + 7 + 3)
        ln = 'kimi:request_success_total{finished_reason="length"}'
        self.assertEqual(m1[ln] - m0[ln], 3)
        self.assertGreaterEqual(m1['kimi:http_responses_total{code="2xx"}'] - m0['kimi:http_responses_total{code="2xx"}'], 3)
        self.assertEqual(m1['kimi:http_responses_total{code="4xx"}'] - m0['kimi:http_responses_total{code="4xx"}'], 1)
        for h in ["kimi:time_to_first_token_seconds", "kimi:e2e_request_latency_seconds"]:
            self.assertEqual(m1[h + "_count"] - m0[h + "_count"], 3, h)
            self.assertGreater(m1[h + "_sum"], m0[h + "_sum"], h)
        self.assertEqual(m1["kimi:inter_token_latency_seconds_count"] - m0["kimi:inter_token_latency_seconds_count"],
                         4 + 6 + 2)
        self.assertGreater(m1["kimi:engine_steps_total"], m0["kimi:engine_steps_total"])
        # the engine gauges may lag the last token by a step
        m2 = wait_metrics(hc.MAIN.port, idle, timeout=5)
        self.assertEqual(m2["kimi:num_requests_running"], 0)
        self.assertEqual(m2["kimi:num_requests_waiting"], 0)

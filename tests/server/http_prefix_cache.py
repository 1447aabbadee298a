"""HTTP tests, part 9: the prefix cache (on by default), against a server without it.

Servers with the cache (the default interval 256, and --prefix-checkpoint-interval 32) next to a
--no-enable-prefix-caching one: usage.prompt_tokens_details.cached_tokens is exactly the rule's
hit, greedy text (stream and not) is the cold server's, the startup lines, /metrics counters
moving by exactly what the requests report, a client leaving mid-prefill, and multi-turn chat
resuming at the previous prompt's and reply's last full block. Run through http_test.py.

The rule: every finished request leaves KDA checkpoints at each multiple of the interval it
computed, at its prompt's last full block (floor(len/16)*16) and the last full block before its
last token (floor((len-1)/16)*16: the same prompt again resumes there), at its reply's last full block
(floor((len + generated - 1)/16)*16: the last sampled token is never fed); a new prompt hits at
the largest checkpoint c whose c tokens it shares, with c <= len - 1. CacheModel below keeps
those checkpoints, so every expected cached_tokens is computed, not written down. The caching
servers get --prefix-cache-memory 0.01 (about 1100 checkpoints of the tiny model), so that
nothing here is evicted and the rule holds exactly.
"""
import json
import random
import re
import socket
import sys
import unittest

import http_common as hc
from http_common import SERVED, Server, chat_body, completion_body, get, idle, metrics, post, stream, wait_metrics

setUpModule = hc.setup_shared      # the model (and the shared server, whose startup line is checked)

BLOCK = 16
CKPT_MEMORY = "0.01"               # GiB of checkpoints: no eviction in these tests
FORCED = 500                       # a token logit_bias forces (" T" in the tiny tokenizer): known reply ids
LONG_CONTEXT = 16384               # --max-model-len of the disconnect test's server and of the cold one
ABORT = 'kimi:request_success_total{finished_reason="abort"}'
STARTUP_ON_RE = re.compile(r"serve: cache: .*; prefix cache on: (\d+) KDA checkpoints x ([0-9.]+) ([KMG]?i?B) = "
                           r"([0-9.]+ [KMG]?i?B) \(--prefix-cache-memory\), every (\d+) tokens and at each prompt's "
                           r"and reply's last full block$")
STARTUP_OFF_RE = re.compile(r"serve: cache: .*; prefix cache off$")
UNITS = {"B": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3}     # as the startup line prints sizes


def token_ids(seed, n):
    """n random prompt token ids in [100, 1000): ordinary tokens of the tiny vocab (specials are >= 1024)."""
    rng = random.Random(seed)
    return [rng.randrange(100, 1000) for _ in range(n)]


class CacheModel:
    """The checkpoints a caching server holds (all of them: nothing is evicted here), keyed by the
    tokens before them; hit() is the documented hit of a new prompt."""

    def __init__(self, interval):
        self.interval = (interval + BLOCK - 1) // BLOCK * BLOCK
        self.keys = set()

    def positions(self, prompt_len, generated=0, computed=None):
        """Checkpoint positions of a request: interval multiples of what it computed, its prompt's
        last full block, its reply's last full block. computed: a request cut short (prefill)."""
        prompt_blocks = {(prompt_len - 1) // BLOCK * BLOCK, prompt_len // BLOCK * BLOCK}
        if computed is not None:
            pos = set(range(self.interval, computed + 1, self.interval)) | {c for c in prompt_blocks if c <= computed}
        else:
            computed = prompt_len + max(generated - 1, 0)
            pos = set(range(self.interval, computed + 1, self.interval)) | prompt_blocks
            if generated > 1:
                pos.add(computed // BLOCK * BLOCK)
        return {c for c in pos if c > 0}

    def finished(self, prompt, reply_ids=None, max_tokens=1, computed=None):
        """Records a finished request. reply_ids: its generated token ids when known (forced); when
        not, only the checkpoints inside the prompt are recorded (a later prompt cannot share more
        than the prompt without knowing the reply). Returns the number of new checkpoints."""
        seq = list(prompt) + list(reply_ids or [])
        new = 0
        for c in self.positions(len(prompt), max_tokens, computed):
            if c <= len(seq):
                key = tuple(seq[:c])
                if key not in self.keys:
                    self.keys.add(key)
                    new += 1
        return new

    def hit(self, prompt):
        best = 0
        for c in range(BLOCK, len(prompt), BLOCK):      # c <= len - 1: one prompt token left to compute
            if tuple(prompt[:c]) in self.keys:
                best = c
        return best


def stream_text(tc, s, chat=False):
    """(text, usage) of a single-choice stream with include_usage."""
    tc.assertEqual(s.status, 200, s.raw_error)
    tc.assertTrue(s.done, "no [DONE]")
    parts = []
    for ev in s.events[:-1]:
        for ch in ev["choices"]:
            parts.append((ch["delta"].get("content") or "") if chat else ch["text"])
    tc.assertEqual(s.events[-1]["choices"], [], s.events[-1])
    return "".join(parts), s.events[-1]["usage"]


def cached(usage):
    return usage["prompt_tokens_details"]["cached_tokens"]


def stderr_text(srv):
    with srv.cond:
        return "".join(ln for ln in srv.err if ln is not None)


# ----------------------------------------------------------------------------------------------
# 9. Prefix cache
# ----------------------------------------------------------------------------------------------

class T9PrefixCache(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if hc.VOCAB <= 1000:
            raise AssertionError("the tiny model's vocab (%d) is too small for prompt ids in [100, 1000)" % hc.VOCAB)
        cls.warm = Server("--max-model-len", "4096", "--prefix-cache-memory", CKPT_MEMORY)          # interval 256
        cls.fine = Server("--max-model-len", "4096", "--prefix-cache-memory", CKPT_MEMORY,
                          "--prefix-checkpoint-interval", "32")
        cls.cold = Server("--max-model-len", str(LONG_CONTEXT), "--no-enable-prefix-caching")
        cls.warm_model = CacheModel(256)
        cls.fine_model = CacheModel(32)

    @classmethod
    def tearDownClass(cls):
        for s in (cls.warm, cls.fine, cls.cold):
            s.kill()

    # -- helpers --------------------------------------------------------------------------------

    def complete(self, srv, prompt, max_tokens=8, **kw):
        """(text, usage) of a greedy non-streamed completion of a token-id prompt."""
        r = post(srv.port, "/v1/completions", completion_body(prompt=prompt, max_tokens=max_tokens, temperature=0,
                                                              ignore_eos=True, **kw))
        self.assertEqual(r.status, 200, r)
        j = r.json()
        self.assertEqual(j["usage"]["prompt_tokens"], len(prompt), j["usage"])
        self.assertEqual(j["usage"]["completion_tokens"], max_tokens, j["usage"])
        return j["choices"][0]["text"], j["usage"]

    def complete_stream(self, srv, prompt, max_tokens=8, **kw):
        s = stream(srv.port, "/v1/completions", completion_body(prompt=prompt, max_tokens=max_tokens, temperature=0,
                                                                ignore_eos=True, stream=True,
                                                                stream_options={"include_usage": True}, **kw))
        text, usage = stream_text(self, s)
        self.assertEqual(usage["prompt_tokens"], len(prompt), usage)
        return text, usage

    def cold_text(self, prompt, max_tokens=8, **kw):
        """The cold server's greedy text (it never reports a cached token)."""
        text, usage = self.complete(self.cold, prompt, max_tokens, **kw)
        self.assertEqual(cached(usage), 0, "the server without a prefix cache reported cached tokens")
        return text

    def check(self, srv, model, prompt, what, max_tokens=8, streamed=False, reply_ids=None, **kw):
        """One request on a caching server: cached_tokens == the model's hit, text == the cold
        server's. Records the request in the model. Returns (text, cached_tokens)."""
        want = model.hit(prompt)
        text, usage = (self.complete_stream if streamed else self.complete)(srv, prompt, max_tokens, **kw)
        self.assertEqual(cached(usage), want, "%s: cached_tokens %d, the rule says %d" % (what, cached(usage), want))
        self.assertEqual(text, self.cold_text(prompt, max_tokens, **kw),
                         "%s (cached_tokens %d): greedy text differs from the server without a prefix cache"
                         % (what, cached(usage)))
        model.finished(prompt, reply_ids, max_tokens)
        return text, cached(usage)

    # -- tests ----------------------------------------------------------------------------------

    def test_a_startup_lines(self):
        on = self.warm.wait_line(self.warm.err, STARTUP_ON_RE, 10)
        n, interval = int(on.group(1)), int(on.group(5))
        self.assertEqual(interval, 256, on.group(0))
        self.assertEqual(n, metrics(self.warm.port)["kimi:prefix_cache_checkpoints_total"], on.group(0))
        slot = float(on.group(2)) * UNITS[on.group(3)]          # printed to 0.1 of its unit
        self.assertAlmostEqual(n, float(CKPT_MEMORY) * UNITS["GiB"] / slot, delta=n * 0.01 + 1,
                               msg="--prefix-cache-memory 0.01 / one checkpoint: %s" % on.group(0))
        fine = self.fine.wait_line(self.fine.err, STARTUP_ON_RE, 10)
        self.assertEqual(int(fine.group(5)), 32, fine.group(0))
        # the default budget: eight checkpoints per --max-num-seqs slot
        main = hc.MAIN.wait_line(hc.MAIN.err, STARTUP_ON_RE, 10)
        m = metrics(hc.MAIN.port)
        self.assertEqual(int(main.group(1)), 8 * m["kimi:state_slots_total"], main.group(0))
        self.assertEqual(int(main.group(1)), m["kimi:prefix_cache_checkpoints_total"], main.group(0))
        self.assertEqual(int(main.group(5)), 256, main.group(0))
        self.cold.wait_line(self.cold.err, STARTUP_OFF_RE, 10)
        self.assertNotIn("prefix cache on", stderr_text(self.cold))
        self.assertEqual(metrics(self.cold.port)["kimi:prefix_cache_checkpoints_total"], 0)
        # the interval is rounded up to whole blocks; --enable-prefix-caching is accepted
        srv = Server("--prefix-checkpoint-interval", "20", "--enable-prefix-caching")
        try:
            self.assertEqual(int(srv.wait_line(srv.err, STARTUP_ON_RE, 10).group(5)), 32)
        finally:
            srv.kill()

    def test_b_shared_long_prefix(self):
        # default interval 256. A (300) leaves checkpoints at 256 and 288 (its prompt's last full
        # block) and 304 (its reply's: 300 + 8 - 1 = 307)
        model = self.warm_model
        a = token_ids(101, 300)
        b = a[:270] + token_ids(102, 40)              # shares 270 -> 256
        c = a[:250] + token_ids(103, 40)              # shares 250: no checkpoint of A at or below -> 0
        _, hit = self.check(self.warm, model, a, "A (300 new tokens)")
        self.assertEqual(hit, 0)
        _, hit = self.check(self.warm, model, b, "B = A[:270] + 40 others")
        self.assertEqual(hit, 256)
        _, hit = self.check(self.warm, model, c, "C = A[:250] + 40 others")
        self.assertEqual(hit, 0)
        # streamed: B again (its prompt's last full block, 304 of 310), C again (288 of 290)
        _, hit = self.check(self.warm, model, b, "B again, streamed", streamed=True)
        self.assertEqual(hit, 304)
        _, hit = self.check(self.warm, model, c, "C again, streamed", streamed=True)
        self.assertEqual(hit, 288)
        # the cold server streams the same text and reports no cached token
        text, usage = self.complete_stream(self.cold, b)
        self.assertEqual(cached(usage), 0)
        self.assertEqual(text, self.cold_text(b))
        # the --prefix-checkpoint-interval 32 server: C hits at 224 after A
        fm = self.fine_model
        self.check(self.fine, fm, a, "A on the interval-32 server")
        _, hit = self.check(self.fine, fm, c, "C on the interval-32 server", streamed=True)
        self.assertEqual(hit, 224)

    def test_c_one_token_difference(self):
        # interval 32, A of 200 tokens: checkpoints at 32, 64, ..., 192 (also its prompt's last
        # full block); B_p = A with token p changed hits at the last multiple of 32 <= p
        model = self.fine_model
        a = token_ids(201, 200)
        self.check(self.fine, model, a, "A (200 new tokens)")
        seen = []
        for i, p in enumerate([0, 5, 15, 16, 31, 32, 33, 100, 150, 191, 192, 193, 199]):
            b = list(a)
            b[p] = 100 + (b[p] - 100 + 1) % 900
            text, hit = self.check(self.fine, model, b, "A with token %d changed" % p, streamed=(i % 2 == 1))
            self.assertEqual(hit, p // 32 * 32, "A with token %d changed" % p)
            seen.append((p, hit))
        sys.stderr.write("\n  one-token difference at p -> cached_tokens: %s\n" % seen)

    def test_d_identical_prompt(self):
        # the same prompt again hits at its last checkpoint that leaves one token to compute
        for srv, model, n, want in ((self.fine, self.fine_model, 200, 192),   # 192: interval and last block
                                    (self.fine, self.fine_model, 215, 208),   # last block 208
                                    (self.fine, self.fine_model, 208, 192),   # the block before the last token
                                    (self.warm, self.warm_model, 300, 288),   # last block 288
                                    (self.warm, self.warm_model, 304, 288)):  # 304 is the whole prompt: the block before
            with self.subTest(prompt_len=n, interval=model.interval):
                p = token_ids(300 + n + model.interval, n)
                text1, hit = self.check(srv, model, p, "first (%d tokens)" % n)
                self.assertEqual(hit, 0)
                text2, hit = self.check(srv, model, p, "again (%d tokens)" % n)
                self.assertEqual(hit, want)
                text3, hit = self.check(srv, model, p, "a third time (%d tokens)" % n, streamed=True)
                self.assertEqual(hit, want)
                self.assertEqual(text1, text2)
                self.assertEqual(text1, text3)

    def test_e_reply_last_full_block(self):
        # a reply of known ids (logit_bias forces FORCED): the next prompt = prompt + reply + more
        # hits at the reply's last full block, floor((len + generated - 1) / 16) * 16
        model = self.warm_model
        bias = {str(FORCED): 100}
        for n, gen, want in ((100, 13, 112), (100, 12, 96), (120, 30, 144)):
            with self.subTest(prompt_len=n, generated=gen):
                a = token_ids(500 + n + gen, n)
                text, hit = self.check(self.warm, model, a, "A (%d tokens, %d forced)" % (n, gen), max_tokens=gen,
                                       reply_ids=[FORCED] * gen, logit_bias=bias)
                self.assertEqual(hit, 0)
                forced = post(self.warm.port, "/detokenize", {"tokens": [FORCED] * gen}).json()["prompt"]
                self.assertEqual(text, forced, "logit_bias did not force the reply")
                b = a + [FORCED] * gen + token_ids(600 + n + gen, 20)
                _, hit = self.check(self.warm, model, b, "A + its reply + 20 more")
                self.assertEqual(hit, want)

    def test_f_metrics(self):
        # on a server no one else uses meanwhile: the counters move by exactly what the requests report
        srv, model = self.warm, self.warm_model
        port = srv.port
        m0 = wait_metrics(port, idle)
        self.assertTrue(idle(m0), m0)
        p1 = token_ids(701, 300)
        p4 = token_ids(702, 40)
        prompts = [p1, p1[:270] + token_ids(703, 30), p1, p4, p4 + token_ids(704, 10), token_ids(705, 7)]
        prompt_sum = cached_sum = 0
        want_blocks = want_ckpts = 0
        blocks = set()
        hits = []
        for i, p in enumerate(prompts):
            want = model.hit(p)
            # max_tokens 1: what a request computes is its prompt, so its cached blocks and its
            # checkpoints are known exactly
            text, usage = (self.complete_stream if i % 2 else self.complete)(srv, p, max_tokens=1)
            self.assertEqual(cached(usage), want, "prompt %d: cached_tokens %d, the rule says %d" % (i, cached(usage), want))
            hits.append(cached(usage))
            prompt_sum += usage["prompt_tokens"]
            cached_sum += cached(usage)
            want_ckpts += model.finished(p, max_tokens=1)
            for k in range(BLOCK, len(p) + 1, BLOCK):
                if tuple(p[:k]) not in blocks:
                    blocks.add(tuple(p[:k]))
                    want_blocks += 1
        self.assertEqual(hits, [0, 256, 288, 0, 32, 0])
        # the engine publishes its counters at the end of the step that answered the last request
        m1 = wait_metrics(port, lambda m: idle(m) and m["kimi:prefix_cache_queries_total"] -
                          m0["kimi:prefix_cache_queries_total"] >= prompt_sum)
        self.assertTrue(idle(m1), "not idle after the requests: %r" % m1)

        def d(name):
            return m1[name] - m0[name]
        self.assertEqual(d("kimi:prefix_cache_queries_total"), prompt_sum, "queries = the prompt tokens looked up")
        self.assertEqual(d("kimi:prefix_cache_hits_total"), cached_sum, "hits = the cached_tokens reported")
        self.assertEqual(d("kimi:prompt_tokens_total"), prompt_sum)
        self.assertEqual(d("kimi:prompt_tokens_computed_total"), prompt_sum - cached_sum,
                         "prompt tokens computed = prompt - cached")
        self.assertEqual(d("kimi:prefix_cache_blocks_cached"), want_blocks, "new full prompt blocks kept as cached blocks")
        self.assertEqual(d("kimi:prefix_cache_checkpoints"), want_ckpts, "new checkpoints")
        self.assertEqual(d("kimi:prefix_cache_checkpoints_saved_total"), want_ckpts, "checkpoints written")
        self.assertGreater(m1["kimi:prefix_cache_blocks_cached"], 0)
        self.assertEqual(m1["kimi:cache_blocks_used"], 0, "cached blocks are not counted as used")
        self.assertLessEqual(m1["kimi:prefix_cache_checkpoints"], m1["kimi:prefix_cache_checkpoints_total"])
        self.assertEqual(m1["kimi:prefix_cache_checkpoints_total"], m0["kimi:prefix_cache_checkpoints_total"])
        # bytes = checkpoints x one checkpoint (the size the startup line prints)
        per = m1["kimi:prefix_cache_checkpoint_bytes"] / m1["kimi:prefix_cache_checkpoints"]
        self.assertEqual(per, int(per))
        if m0["kimi:prefix_cache_checkpoints"] > 0:
            self.assertEqual(m0["kimi:prefix_cache_checkpoint_bytes"] / m0["kimi:prefix_cache_checkpoints"], per)
        on = srv.wait_line(srv.err, STARTUP_ON_RE, 10)
        self.assertLessEqual(abs(per / UNITS[on.group(3)] - float(on.group(2))), 0.05 + 1e-9,
                             "%d bytes a checkpoint; the startup line: %s" % (per, on.group(0)))
        # the server without a prefix cache looks nothing up and keeps nothing
        mc = metrics(self.cold.port)
        for name in ("queries_total", "hits_total", "blocks_cached", "checkpoints", "checkpoint_bytes",
                     "checkpoints_saved_total"):
            self.assertEqual(mc["kimi:prefix_cache_" + name], 0, name)

    def test_g_disconnect_mid_prefill(self):
        # The server finds a client gone only when it writes to it: the first token, or a
        # keep-alive comment after 0.5 s without one. 16 tokens a step, a 12007-token prompt
        # takes about 1.8 s to prefill on two idle cores (a 400-token one, 17 ms, would be done
        # before anyone noticed), so the client below leaves mid-prefill.
        srv = Server("--max-model-len", str(LONG_CONTEXT), "--max-num-batched-tokens", "16",
                     "--prefix-cache-memory", CKPT_MEMORY)
        try:
            port = srv.port
            n = 12007
            prompt = token_ids(801, n)
            m0 = metrics(port)
            body = json.dumps(completion_body(prompt=prompt, max_tokens=8, temperature=0, ignore_eos=True,
                                              stream=True)).encode()
            s = socket.create_connection(("127.0.0.1", port), timeout=60)
            try:
                s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(body) + body)
                got = b""
                while b"\r\n\r\n" not in got:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    got += chunk
                self.assertTrue(got.startswith(b"HTTP/1.1 200"), got[:200])
                self.assertNotIn(b"data:", got, "a token arrived before the client left")
            finally:
                s.close()
            m1 = wait_metrics(port, lambda m: idle(m) and m[ABORT] > m0[ABORT], timeout=30)
            self.assertTrue(idle(m1), "not idle after the client left: %r" % m1)
            self.assertEqual(m1[ABORT] - m0[ABORT], 1, "the abandoned request is counted as an abort")
            computed = int(m1["kimi:prompt_tokens_computed_total"] - m0["kimi:prompt_tokens_computed_total"])
            self.assertEqual(m1["kimi:generation_tokens_total"], m0["kimi:generation_tokens_total"],
                             "the request produced a token: the client did not leave mid-prefill")
            self.assertTrue(0 < computed < n, "computed %d of %d prompt tokens before the abort" % (computed, n))
            # what it computed stays: its full blocks, and checkpoints at each multiple of 256
            model = CacheModel(256)
            self.assertEqual(m1["kimi:prefix_cache_blocks_cached"], computed // BLOCK)
            self.assertEqual(m1["kimi:prefix_cache_checkpoints"], model.finished(prompt, computed=computed))
            # the same prompt resumes there; same text as a cold server
            text2, u2 = self.complete(srv, prompt)
            self.assertEqual(cached(u2), computed // 256 * 256, "after an abort at %d" % computed)
            self.assertEqual(cached(u2), model.hit(prompt))
            self.assertEqual(text2, self.cold_text(prompt), "after an abort at %d, cached_tokens %d" % (computed, cached(u2)))
            self.assertEqual(get(port, "/health").status, 200)
            model.finished(prompt, max_tokens=8)
            text3, u3 = self.complete(srv, prompt)
            self.assertEqual(text3, text2)
            self.assertEqual(cached(u3), n // BLOCK * BLOCK)
            self.assertEqual(cached(u3), model.hit(prompt))
            self.assertGreaterEqual(cached(u3), cached(u2))
            self.assertTrue(idle(wait_metrics(port, idle)))
            sys.stderr.write("\n  disconnect: aborted after %d of %d prompt tokens; cached_tokens then %d, %d\n"
                             % (computed, n, cached(u2), cached(u3)))
        finally:
            srv.kill()

    def test_h_multi_turn_chat(self):
        words = ("apple river stone cloud music window garden silver orange paper bridge candle forest mountain "
                 "yellow ocean pencil rabbit thunder violet").split()
        for forced in (False, True):
            with self.subTest(reply="forced" if forced else "free"):
                self._chat(words, forced)

    def _chat(self, words, forced):
        rng = random.Random(901 + forced)
        extra = {"logit_bias": {str(FORCED): 100}} if forced else {}
        msgs, prev, rows = [], None, []
        for turn in range(3):
            msgs.append({"role": "user", "content": " ".join(rng.choice(words) for _ in range(40))})
            body = chat_body(messages=msgs, max_tokens=12, temperature=0, ignore_eos=True, **extra)
            r = post(self.warm.port, "/v1/chat/completions", body)
            self.assertEqual(r.status, 200, r)
            j = r.json()
            reply, usage = j["choices"][0]["message"]["content"], j["usage"]
            rc = post(self.cold.port, "/v1/chat/completions", body)
            self.assertEqual(rc.status, 200, rc)
            self.assertEqual(cached(rc.json()["usage"]), 0)
            self.assertEqual(reply, rc.json()["choices"][0]["message"]["content"],
                             "turn %d: reply differs from the server without a prefix cache (cached_tokens %d)"
                             % (turn + 1, cached(usage)))
            t = post(self.warm.port, "/tokenize", {"model": SERVED, "messages": msgs, "add_generation_prompt": True})
            self.assertEqual(t.status, 200, t)
            toks = t.json()["tokens"]
            self.assertEqual(len(toks), usage["prompt_tokens"])
            rows.append((turn + 1, usage["prompt_tokens"], cached(usage)))
            hit = cached(usage)
            self.assertEqual(hit % BLOCK, 0)
            self.assertLess(hit, usage["prompt_tokens"])
            if prev is None:
                self.assertEqual(hit, 0)
            else:
                prev_toks, prev_len = prev
                # the previous prompt is a prefix of this one (history re-rendered the same way)
                k = next((i for i in range(prev_len) if prev_toks[i] != toks[i]), prev_len)
                self.assertEqual(k, prev_len, "turn %d: the re-rendered history differs from the previous prompt at "
                                 "token %d: before %r, now %r" % (turn + 1, k, prev_toks[k - 4:k + 4], toks[k - 4:k + 4]))
                floor_prev = prev_len // BLOCK * BLOCK
                self.assertGreaterEqual(hit, floor_prev, "turn %d: cached_tokens %d < the previous prompt's last full "
                                        "block %d" % (turn + 1, hit, floor_prev))
                if forced:
                    # the reply's ids are known and re-render as themselves: the hit is the reply's last full block
                    self.assertEqual(toks[prev_len:prev_len + 12], [FORCED] * 12, "the reply re-rendered differently")
                    self.assertEqual(hit, (prev_len + 12 - 1) // BLOCK * BLOCK, "turn %d" % (turn + 1))
            prev = (toks, usage["prompt_tokens"])
            msgs.append({"role": "assistant", "content": reply})
        sys.stderr.write("\n  chat (%s replies): (turn, prompt_tokens, cached_tokens) %s\n"
                         % ("forced" if forced else "free", rows))

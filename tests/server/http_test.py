#!/usr/bin/python3
"""End-to-end HTTP tests of `kimi-cpp serve` on a random tiny model (standard library only).

    /usr/bin/python3 tests/server/http_test.py --kimi /abs/path/kimi-cpp [unittest args]

unittest args select tests as before, e.g. `T5Fuzz`, `T7Shutdown.test_d_loading`, `-k disconnect`.
What is checked (one shared server for most tests; extra servers where flags differ), by module:
  http_shapes.py      1. shapes    /health, /version, /v1/models, /, /tokenize <-> /detokenize,
                                   /metrics (parsed as Prometheus text; counters move by exactly
                                   what the requests report)
  http_generation.py  2. generate  chat + completions, stream and not, with plain http.client:
                                   strict SSE framing, usage chunk, [DONE] last, stream text ==
                                   non-stream text (greedy), n > 1, finish_reason length / stop,
                                   system_fingerprint
  http_bad_input.py   3. bad input every invalid request -> its 4xx with OpenAI's error JSON;
                                   context limits on a --max-model-len 64 server; 413 on a
                                   --max-body-mb 1 server; unknown routes; no harm afterwards (and
                                   no 5xx ever)
                      4. auth      --api-key: 401 without/with a wrong key, 200 with it; /health,
                                   /metrics, /version open
  http_fuzz.py        5. fuzz      seeded random + mutated bodies on every POST endpoint, malformed
                                   HTTP: never a 5xx, always well-formed HTTP, the server alive and
                                   serving afterwards (KIMI_FUZZ_SEED, KIMI_FUZZ_ITERATIONS)
  http_lifecycle.py   6. disconnect a client leaving mid-stream frees its running slot, cache
                                   blocks and state slots, and is counted as an abort
                      7. shutdown  SIGTERM idle -> exit 0; SIGINT with a stream in flight -> it
                                   completes, exit 0; --shutdown-grace 0.5 with a long stream ->
                                   aborted, exit 0; /health 503 while loading
  http_k3.py          8. Kimi-K3   a k3-tiny checkpoint on its own server: startup lines, chat and
                                   completions stream == non-stream, a bad token id -> 400
  http_prefix_cache.py
                      9. prefix    servers with the cache (intervals 256 and 32) next to a
                         cache     --no-enable-prefix-caching one: cached_tokens exactly the
                                   rule's hit (shared prefixes, one changed token, the same prompt
                                   again, prompt + reply + more), greedy text == the cold server's
                                   (stream and not), startup lines, /metrics prefix-cache
                                   counters, a client leaving mid-prefill, multi-turn chat
  http_structured.py 10. structured output (JSON Schema corpus, regex, choice, GBNF, sampling features)
  http_structured_tools.py
                     11. forced tool calls on Kimi Linear and K3, K3 response_format
  http_hostile.py    12. hostile input that once crashed the server (deep GBNF, JSON Schema
                         text and tool-call arguments) on Kimi Linear and K3
  http_images.py     15. images  cache poisoning by a colliding image, bomb GIFs refused from their
                                   headers (peak RSS), an abandoned large encode beside a small one,
                                   one encode for the same image at once, the encode deadline
  http_type_errors.py
                     16. type errors  a field of the wrong type on /v1/responses and /v1/messages
                                   (count_tokens too) is a 400 naming it, null is absent; tool_use
                                   ids used twice are a 400, a tool_result with no tool_use is served
  http_hostile_routes.py
                     17. hostile  issue 56's reproducers: a stored /v1/responses chain bounded by
                         routes  --max-body-mb (peak RSS of four continuations), JSON Schemas in
                                   linear time at the largest body, no forged access lines, an
                                   empty --api-key never turns auth off
  http_agents.py     18. agents  what Claude Code sends to /v1/messages: the billing line dropped
                                   (the prefix cached), system messages in place, tool_reference and
                                   defer_loading, server tools left out, unique tool_use ids,
                                   several served names, a longer context with a warning
  http_common.py      the helpers they share (servers, HTTP, SSE, metrics, request bodies)
Exits non-zero on any failure. Every server started is killed at the end (also on failure).
"""
import argparse
import importlib
import os
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import http_common as hc  # noqa: E402

TEST_MODULES = ["http_shapes", "http_generation", "http_bad_input", "http_fuzz", "http_lifecycle", "http_k3",
                "http_prefix_cache", "http_structured", "http_structured_tools", "http_hostile",
                "http_connections", "http_images", "http_strict", "http_type_errors", "http_hostile_routes",
                "http_agents"]


def collect_tests():
    """Puts every TestCase class of TEST_MODULES into this module, so that unittest finds them
    here in the order of their names (T1Shapes ... T9PrefixCache) and by name on the command line."""
    here = sys.modules[__name__]
    for name in TEST_MODULES:
        mod = importlib.import_module(name)
        for attr, obj in vars(mod).items():
            if isinstance(obj, type) and issubclass(obj, unittest.TestCase) and obj.__module__ == name:
                if hasattr(here, attr):
                    raise SystemExit("test class %s defined twice (%s)" % (attr, name))
                setattr(here, attr, obj)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kimi", required=True, help="path of the kimi-cpp binary")
    args, rest = ap.parse_known_args()
    hc.KIMI = os.path.abspath(args.kimi)
    if not os.access(hc.KIMI, os.X_OK):
        sys.exit("not an executable: %s" % hc.KIMI)
    collect_tests()

    def on_term(sig, frame):
        hc.cleanup()
        os._exit(1)

    signal.signal(signal.SIGTERM, on_term)
    t0 = time.monotonic()
    ok = False
    try:
        prog = unittest.main(module=__name__, argv=[sys.argv[0]] + rest, exit=False, verbosity=2)
        ok = prog.result.wasSuccessful()
    finally:
        hc.cleanup()
    sys.stderr.write("http_test: %s in %.1f s\n" % ("OK" if ok else "FAILED", time.monotonic() - t0))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Soak (ctest label `soak`, not in `make test`): `kimi-cpp serve` on a random tiny model under a
steady mixed load, once with the prefix cache on and once off, half of --seconds each (600 in
ctest: 10 minutes). Four clients send chat and completion requests, streamed and not, n up to 4,
logprobs, JSON-schema output, prompts that share prefixes (so the prefix cache fills), streams cut
after a few tokens, and 1 MiB /tokenize prompts. Every 5 s the test reads /metrics.

It checks that resident memory plateaus: after a warm-up (the first 30%), the median of the last
third is within 5% + 24 MiB of the median before it, and anonymous resident memory stays within
the budget /metrics accounts for: KV cache + prefix-cache checkpoints (both allocated at start,
touched as they fill) + weights + a constant (--slack-mb, 256). No request may fail with a 5xx.
The series goes to --json (docs/reliability.md quotes it).

    /usr/bin/python3 tests/server/soak_test.py --kimi build/bin/kimi-cpp --seconds 600 --json soak.json
"""
import argparse
import json
import os
import random
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import http_common as hc  # noqa: E402


def one_request(port, rng, prefixes):
    """One request of the mix; returns its HTTP status (0: the client cut it on purpose)."""
    kind = rng.randrange(10)
    pre = rng.choice(prefixes)
    words = " ".join(rng.choice(["alpha", "beta", "gamma", "delta", "kimi", "soak", "7", "?"]) for _ in range(rng.randrange(1, 40)))
    if kind == 0:   # a 1 MiB prompt to /tokenize
        return hc.post(port, "/tokenize", {"prompt": "x" * (1 << 20)}, timeout=120).status
    if kind in (1, 2):   # a stream cut after a few events
        conn, r = hc.open_stream(port, "/v1/chat/completions",
                                 hc.chat_body(messages=[{"role": "user", "content": pre + words}], max_tokens=64, stream=True))
        status = r.status
        for _ in range(rng.randrange(1, 6)):
            if not r.readline():
                break
        conn.close()
        return 0 if status == 200 else status
    body = {"max_tokens": rng.randrange(1, 48), "n": rng.randrange(1, 5), "temperature": rng.choice([0, 0.7, 1.0]),
            "seed": rng.randrange(1 << 30)}
    if kind == 3:
        body["logprobs"] = rng.randrange(0, 6)
        body["prompt"] = pre + words
        return hc.post(port, "/v1/completions", hc.completion_body(**body), timeout=300).status
    if kind == 4:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "s", "schema": {
            "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 8}},
            "required": ["a"]}}}
    msgs = [{"role": "system", "content": pre}, {"role": "user", "content": words}]
    if rng.random() < 0.5:
        body["stream"] = True
        ev = hc.stream(port, "/v1/chat/completions", hc.chat_body(messages=msgs, **body), timeout=300)
        return ev.status
    return hc.post(port, "/v1/chat/completions", hc.chat_body(messages=msgs, **body), timeout=300).status


def soak(model, seconds, prefix_cache, seed):
    extra = ["--max-model-len", "2048"] + ([] if prefix_cache else ["--no-enable-prefix-caching"])
    srv = hc.Server(*extra, model=model)
    stop = threading.Event()
    statuses, errors = {}, []
    lock = threading.Lock()

    def client(k):
        rng = random.Random(seed * 100 + k)
        prefixes = ["You are assistant %d. " % i + "Shared context. " * rng.randrange(10, 120) for i in range(12)]
        while not stop.is_set():
            try:
                st = one_request(srv.port, rng, prefixes)
            except Exception as e:   # a connection error is a failure too
                st = -1
                with lock:
                    errors.append(repr(e)[:200])
            with lock:
                statuses[st] = statuses.get(st, 0) + 1

    workers = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(4)]
    for w in workers:
        w.start()
    series = []
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < seconds:
            time.sleep(5)
            m = hc.metrics(srv.port)
            series.append({"t": round(time.monotonic() - t0, 1),
                           "rss": m['kimi:process_resident_memory_bytes{kind="total"}'],
                           "anon": m['kimi:process_resident_memory_bytes{kind="anon"}'],
                           "cache_bytes": m["kimi:cache_memory_bytes"],
                           "prefix_capacity_bytes": m["kimi:prefix_cache_capacity_bytes"],
                           "checkpoint_bytes": m["kimi:prefix_cache_checkpoint_bytes"],
                           "weight_bytes": m["kimi:weight_bytes"],
                           "requests": sum(statuses.values())})
            print("  %s t=%5.0fs rss %6.1f MB (anon %6.1f MB) requests %d" % (
                "on " if prefix_cache else "off", series[-1]["t"], series[-1]["rss"] / 2**20, series[-1]["anon"] / 2**20,
                series[-1]["requests"]), flush=True)
    finally:
        stop.set()
        for w in workers:
            w.join(120)
        rc = srv.stop(timeout=30)
    return {"prefix_cache": prefix_cache, "seconds": seconds, "statuses": {str(k): v for k, v in sorted(statuses.items())},
            "errors": errors[:10], "exit_code": rc, "series": series}


def check(run, slack_mb):
    problems = []
    s = run["series"]
    if len(s) < 6:
        return ["too few samples (%d)" % len(s)]
    warm = int(len(s) * 0.3)
    rest = s[warm:]
    third = max(1, len(rest) // 3)
    # medians, so that one 1 MiB prompt in flight at a sample does not read as growth
    before = statistics.median(x["rss"] for x in rest[:-third])
    last = statistics.median(x["rss"] for x in rest[-third:])
    run["plateau"] = {"median_before_mb": before / 2**20, "median_last_third_mb": last / 2**20,
                      "peak_mb": max(x["rss"] for x in s) / 2**20}
    if last > before * 1.05 + 24 * 2**20:
        problems.append("RSS still growing: median %.1f MB in the last third vs %.1f MB before" % (last / 2**20, before / 2**20))
    budget = s[-1]["cache_bytes"] + s[-1]["prefix_capacity_bytes"] + s[-1]["weight_bytes"] + slack_mb * 2**20
    peak_anon = max(x["anon"] for x in s)
    run["budget"] = {"accounted_mb": (budget - slack_mb * 2**20) / 2**20, "slack_mb": slack_mb, "peak_anon_mb": peak_anon / 2**20}
    if peak_anon > budget:
        problems.append("anonymous RSS %.1f MB over the accounted budget %.1f MB" % (peak_anon / 2**20, budget / 2**20))
    bad = {k: v for k, v in run["statuses"].items() if int(k) >= 500 or int(k) < 0}
    if bad:
        problems.append("failed requests: %s %s" % (bad, run["errors"]))
    if run["exit_code"] != 0:
        problems.append("exit code %r after SIGTERM" % run["exit_code"])
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kimi", required=True)
    ap.add_argument("--seconds", type=float, default=600, help="total, split between prefix cache on and off")
    ap.add_argument("--slack-mb", type=float, default=256)
    ap.add_argument("--json")
    a = ap.parse_args()
    hc.KIMI = os.path.abspath(a.kimi)
    try:
        model = hc.make_model(seed=3)
        runs = [soak(model, a.seconds / 2, True, 1), soak(model, a.seconds / 2, False, 2)]
        failures = []
        for r in runs:
            for p in check(r, a.slack_mb):
                failures.append("prefix cache %s: %s" % ("on" if r["prefix_cache"] else "off", p))
        out = {"test": "soak", "runs": runs, "failures": failures}
        if a.json:
            with open(a.json, "w") as f:
                json.dump(out, f, indent=1)
        for r in runs:
            print("prefix cache %-3s: %s requests %s, plateau %s, budget %s" % (
                "on" if r["prefix_cache"] else "off", sum(r["statuses"].values()), r["statuses"], r.get("plateau"),
                r.get("budget")))
        for f in failures:
            print("FAIL " + f)
        print("soak: %s" % ("FAILED" if failures else "OK"))
        return 1 if failures else 0
    finally:
        hc.cleanup()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Prefix caching on vs off for `kimi-cpp serve`: a shared-prefix serving load and a multi-turn chat.

Both run against fresh servers with prefix caching on and with it off (--no-enable-prefix-caching).

1. `kimi-cpp bench serve --dataset prefix` (a --prefix-len shared prefix + a distinct --suffix-len
   suffix per request, --output-len tokens each, greedy, ignore_eos, --num-prompts requests at
   --max-concurrency): per mode TTFT (mean, median), mean TPOT, request / output / total token
   throughput, and from /metrics the prefix-cache token hit rate (hits / queries), prompt tokens
   computed, KDA checkpoints resident and their bytes, MLA blocks kept for the cache.
2. A --turns chat over /v1/chat/completions: each turn appends the previous assistant reply and a
   new user message of about --turn-len tokens (seeded words, counted with the server's /tokenize),
   greedy, ignore_eos, --turn-output tokens; per turn prompt_tokens, cached_tokens, the prefill
   tokens computed (prompt - cached) and TTFT (time to the first streamed content chunk).

Every server is fresh (--port 0, ready once /health is 200) and gets one short warm-up request
(counters are read as differences from after it); with --repeats > 1 the order alternates (on/off,
then off/on) so machine drift hits both modes. Markdown on stdout, progress on stderr, all raw
numbers + config + machine with --json FILE. Never fails on speed; servers are stopped on any exit.

    python3 bench/prefix_cache.py --kimi build/bin/kimi-cpp --model models/bench [--repeats 1] \\
        [--prefix-len 2048 --suffix-len 128 --output-len 64 --num-prompts 16 --max-concurrency 4] \\
        [--turns 6 --turn-len 128 --turn-output 64] [--json bench/results/prefix-cache.json] [--plot FILE.svg]

`make bench` runs it with the defaults into bench/results/prefix-cache.json and .md (about 5 minutes
on models/bench with 2 busy cores).
"""
import argparse
import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import (Server, check_inputs, exit_on_signals, fmt, machine_info, machine_line,  # noqa: E402
                        model_line, order_for, quote, request, serve_cmd, server_version, sse_events, stop_all,
                        wait_idle)
import serve_util  # noqa: E402

PROG = "prefix_cache"
MODES = ("on", "off")

# Seeded user messages are drawn from these (any deterministic text would do; /tokenize counts it).
WORDS = """the of and to in is that it was for on are as with his they at be this from have or by one
had not but what all were when we there can an your which their said if do will each about how up out
them then she many some so these would other into has more her two like him see time could no make
than first been its who now people my made over did down only way find use may water long little very
after words called just where most know get through back much before go good new write our used me man
too any day same right look think also around another came come work three word must because does part
even place well such here take why things help put years different away again off went old number great
tell men say small every found still between name should home big give air line set own under read last
never us left end along while might next sound below saw something thought both few those always looked
show large often together asked house world going want school important until form food keep children
feet land side without boy once animals life enough took sometimes four head above kind began almost
live page got earth need far hand high year mother light parts country father let night following picture
being study second eyes soon times story boys since white days paper hard near sentence better best across
during today others however sure means knew it's try told young miles sun ways thing whole hear example heard
several change answer room sea against top turned learn point city play toward five using himself usually""".split()



def log(msg):
    serve_util.log(PROG, msg)


# ------------------------------------------------------------------------------------------------
# Servers and HTTP
# ------------------------------------------------------------------------------------------------

def start_server(args, mode):
    """A fresh server with prefix caching on or off (the mode)."""
    flag = "--enable-prefix-caching" if mode == "on" else "--no-enable-prefix-caching"
    return Server(serve_cmd(args, [flag]), PROG, args.startup_timeout)


def post_json(port, path, body):
    status, data = request(port, "POST", path, body)
    if status != 200:
        raise SystemExit(f"prefix_cache: POST {path} -> HTTP {status}: {data[:500]!r}")
    return json.loads(data)


def stream_chat(port, body):
    """Streams one chat completion: reply text, usage, TTFT (first non-empty content chunk) and E2E."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=6 * 3600)
    try:
        t0 = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        if r.status != 200:
            raise SystemExit(f"prefix_cache: chat request -> HTTP {r.status}: {r.read()[:500]!r}")
        ttft, parts, usage, done = None, [], None, False
        for payload in sse_events(r):
            if payload == "[DONE]":
                done = True
                break
            ev = json.loads(payload)
            if "error" in ev:
                raise SystemExit(f"prefix_cache: chat stream error: {ev['error']}")
            if ev.get("usage"):
                usage = ev["usage"]
            for ch in ev.get("choices") or []:
                d = ch.get("delta") or {}
                piece = d.get("content") or ""
                if ttft is None and (piece or d.get("reasoning_content") or d.get("tool_calls")):
                    ttft = time.perf_counter() - t0
                parts.append(piece)
        e2e = time.perf_counter() - t0
        if not done or usage is None:
            raise SystemExit("prefix_cache: chat stream ended without usage / [DONE]")
        return {"text": "".join(parts), "usage": usage, "ttft_s": ttft, "e2e_s": e2e}
    finally:
        conn.close()


def warm_up(srv):
    """One short request (first-touch of the weights, thread start-up) outside the measured counters."""
    post_json(srv.port, "/v1/completions", {"prompt": "warm up", "max_tokens": 2, "temperature": 0, "ignore_eos": True})
    return wait_idle(srv.port, PROG)


def delta(after, before, name):
    if name not in after:
        return None
    return after[name] - before.get(name, 0.0)


# ------------------------------------------------------------------------------------------------
# 1. bench serve --dataset prefix
# ------------------------------------------------------------------------------------------------

def bench_serve_cmd(args, port, json_path):
    return [args.kimi, "bench", "serve", "--base-url", f"http://127.0.0.1:{port}", "--endpoint", "/v1/completions",
            "--tokenizer", args.model, "--dataset", "prefix", "--prefix-len", str(args.prefix_len),
            "--suffix-len", str(args.suffix_len), "--output-len", str(args.output_len),
            "--num-prompts", str(args.num_prompts), "--max-concurrency", str(args.max_concurrency),
            "--request-rate", "inf", "--ignore-eos", "--temperature", "0", "--seed", str(args.seed),
            "--json", json_path, "--quiet"]


SERVE_FIELDS = ("mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "mean_itl_ms",
                "mean_e2el_ms", "request_throughput", "output_throughput", "total_token_throughput", "duration",
                "completed", "failed", "total_input_tokens", "total_output_tokens")


def run_serve(args, mode, repeat, tmp):
    log(f"[1/2 bench serve] repeat {repeat + 1}/{args.repeats}, prefix caching {mode}: starting server")
    srv = start_server(args, mode)
    try:
        version = server_version(srv.port)
        before = warm_up(srv)
        out_json = os.path.join(tmp, f"serve-{mode}-{repeat}.json")
        cmd = bench_serve_cmd(args, srv.port, out_json)
        log(f"[1/2 bench serve] repeat {repeat + 1}/{args.repeats}, prefix caching {mode}: {args.num_prompts} requests "
            f"({args.prefix_len} + {args.suffix_len} tokens in, {args.output_len} out, concurrency {args.max_concurrency})")
        t0 = time.monotonic()
        res = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wall = time.monotonic() - t0
        if res.returncode != 0 or not os.path.exists(out_json):
            raise SystemExit(f"prefix_cache: bench serve failed (exit code {res.returncode}): {' '.join(cmd)}\n"
                             f"{res.stdout[-3000:]}{res.stderr[-3000:]}\n--- server output (tail) ---\n{srv.log_tail()}")
        with open(out_json) as f:
            raw = json.load(f)
        after = wait_idle(srv.port, PROG)
        queries = delta(after, before, "kimi:prefix_cache_queries_total")
        hits = delta(after, before, "kimi:prefix_cache_hits_total")
        row = {k: raw.get(k) for k in SERVE_FIELDS}
        row.update({
            "mode": mode, "repeat": repeat, "server_version": version, "wall_s": wall,
            "prefix_cache_queries": queries, "prefix_cache_hits": hits,
            "hit_rate": (hits / queries) if queries else (0.0 if queries == 0 else None),
            "prompt_tokens_computed": delta(after, before, "kimi:prompt_tokens_computed_total"),
            "prompt_tokens": delta(after, before, "kimi:prompt_tokens_total"),
            "checkpoints": after.get("kimi:prefix_cache_checkpoints"),
            "checkpoints_capacity": after.get("kimi:prefix_cache_checkpoints_total"),
            "checkpoint_bytes": after.get("kimi:prefix_cache_checkpoint_bytes"),
            "checkpoints_saved": delta(after, before, "kimi:prefix_cache_checkpoints_saved_total"),
            "blocks_cached": after.get("kimi:prefix_cache_blocks_cached"),
            "preemptions": delta(after, before, "kimi:num_preemptions_total"),
            "server_cmd": srv.cmd, "bench_cmd": cmd,
            "ttfts_s": raw.get("ttfts"), "input_lens": raw.get("input_lens"), "output_lens": raw.get("output_lens"),
        })
        log(f"[1/2 bench serve] prefix caching {mode}: mean TTFT {row['mean_ttft_ms']:.1f} ms, "
            f"{row['output_throughput']:.1f} output tok/s, hit rate {fmt_pct(row['hit_rate'])} ({wall:.1f} s)")
        return row
    finally:
        srv.stop()


# ------------------------------------------------------------------------------------------------
# 2. Multi-turn chat replay
# ------------------------------------------------------------------------------------------------

def count_tokens(port, text):
    return post_json(port, "/tokenize", {"prompt": text})["count"]


def user_messages(port, args):
    """--turns messages of seeded words, each the most words whose token count is <= --turn-len."""
    rng = random.Random(args.seed * 7919 + 17)
    base = count_tokens(port, "")
    msgs = []
    for t in range(args.turns):
        words = [rng.choice(WORDS) for _ in range(max(8, 2 * args.turn_len))]
        while count_tokens(port, " ".join(words)) - base < args.turn_len:
            words += [rng.choice(WORDS) for _ in range(args.turn_len)]
        lo, hi = 1, len(words)           # largest k with tokens(words[:k]) <= turn_len
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if count_tokens(port, " ".join(words[:mid])) - base <= args.turn_len:
                lo = mid
            else:
                hi = mid - 1
        text = " ".join(words[:lo])
        msgs.append({"text": text, "tokens": count_tokens(port, text) - base})
    return msgs


def run_chat(args, mode, repeat, msgs_box):
    log(f"[2/2 chat replay] repeat {repeat + 1}/{args.repeats}, prefix caching {mode}: starting server")
    srv = start_server(args, mode)
    try:
        if msgs_box[0] is None:
            msgs_box[0] = user_messages(srv.port, args)
        msgs = msgs_box[0]
        before = warm_up(srv)
        messages, turns = [], []
        for t, m in enumerate(msgs):
            messages.append({"role": "user", "content": m["text"]})
            body = {"model": args.served_name, "messages": messages, "max_completion_tokens": args.turn_output,
                    "temperature": 0, "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
            r = stream_chat(srv.port, body)
            u = r["usage"]
            cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0) or 0
            turn = {"turn": t + 1, "user_tokens": m["tokens"], "prompt_tokens": u["prompt_tokens"],
                    "cached_tokens": cached, "prefill_tokens": u["prompt_tokens"] - cached,
                    "completion_tokens": u.get("completion_tokens"),
                    "ttft_ms": r["ttft_s"] * 1e3 if r["ttft_s"] is not None else None, "e2e_ms": r["e2e_s"] * 1e3}
            turns.append(turn)
            log(f"[2/2 chat replay] prefix caching {mode}: turn {t + 1}/{args.turns}: {turn['prompt_tokens']} prompt tokens, "
                f"{cached} cached, TTFT {fmt(turn['ttft_ms'])} ms")
            messages.append({"role": "assistant", "content": r["text"]})
        after = wait_idle(srv.port, PROG)
        version = server_version(srv.port)
        return {"mode": mode, "repeat": repeat, "server_version": version, "server_cmd": srv.cmd, "turns": turns,
                "prefix_cache_queries": delta(after, before, "kimi:prefix_cache_queries_total"),
                "prefix_cache_hits": delta(after, before, "kimi:prefix_cache_hits_total"),
                "prompt_tokens_computed": delta(after, before, "kimi:prompt_tokens_computed_total"),
                "checkpoints": after.get("kimi:prefix_cache_checkpoints"),
                "checkpoint_bytes": after.get("kimi:prefix_cache_checkpoint_bytes")}
    finally:
        srv.stop()


# ------------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------------

def fmt_pct(v):
    return "–" if v is None else f"{100 * v:.1f} %"


def agg(values):
    """(median, min, max) of the non-None values, or None."""
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return statistics.median(vals), min(vals), max(vals)


def cell(a, fmt="{:.2f}", n=1):
    if a is None:
        return "–"
    med, lo, hi = a
    s = fmt.format(med)
    return s + (f" [{fmt.format(lo)}, {fmt.format(hi)}]" if n > 1 and lo != hi else "")


def report_serve(args, rows):
    n = args.repeats
    by = {m: [r for r in rows if r["mode"] == m] for m in MODES}
    lines = [f"## 1. `bench serve --dataset prefix`: {args.prefix_len}-token shared prefix + {args.suffix_len}-token "
             f"suffix, {args.output_len} output tokens, {args.num_prompts} prompts, concurrency {args.max_concurrency}", ""]
    if n > 1:
        lines += [f"Median of {n} runs per mode [min, max]; order alternated (on/off, then off/on).", ""]
    lines += ["| metric | prefix caching on | prefix caching off | speedup from caching (off/on for times and tokens, on/off for rates) |", "| --- | --- | --- | --- |"]
    metrics_rows = (("mean TTFT (ms)", "mean_ttft_ms", "{:.1f}", "lower"),
                    ("median TTFT (ms)", "median_ttft_ms", "{:.1f}", "lower"),
                    ("mean TPOT (ms)", "mean_tpot_ms", "{:.2f}", "lower"),
                    ("request throughput (req/s)", "request_throughput", "{:.3f}", "higher"),
                    ("output token throughput (tok/s)", "output_throughput", "{:.1f}", "higher"),
                    ("total token throughput (tok/s)", "total_token_throughput", "{:.1f}", "higher"),
                    ("benchmark duration (s)", "duration", "{:.2f}", "lower"),
                    ("prefix-cache token hit rate (hits / queries)", "hit_rate", "pct", None),
                    ("prompt tokens computed (of prompt tokens)", "prompt_tokens_computed", "{:.0f}", "lower"),
                    ("KDA checkpoints resident at the end", "checkpoints", "{:.0f}", None),
                    ("checkpoint bytes resident (MiB)", "checkpoint_bytes", "mib", None),
                    ("MLA blocks kept for the cache at the end", "blocks_cached", "{:.0f}", None))
    summary = {}
    for label, key, fmt, better in metrics_rows:
        a = {m: agg([r.get(key) for r in by[m]]) for m in MODES}
        summary[key] = {m: (a[m][0] if a[m] else None) for m in MODES}
        if fmt == "pct":
            cells = [("–" if a[m] is None else cell(tuple(100 * x for x in a[m]), "{:.1f}", n) + " %") for m in MODES]
        elif fmt == "mib":
            cells = [("–" if a[m] is None else cell(tuple(x / 2**20 for x in a[m]), "{:.2f}", n)) for m in MODES]
        else:
            cells = [cell(a[m], fmt, n) for m in MODES]
        if key == "prompt_tokens_computed":
            pt = {m: agg([r.get("prompt_tokens") for r in by[m]]) for m in MODES}
            cells = [c + (f" of {pt[m][0]:.0f}" if pt[m] else "") for c, m in zip(cells, MODES)]
        ratio = "–"
        if better and a["on"] and a["off"] and a["on"][0] and a["off"][0]:
            x = a["off"][0] / a["on"][0] if better == "lower" else a["on"][0] / a["off"][0]
            ratio = f"{x:.2f}×"
        lines.append(f"| {label} | {cells[0]} | {cells[1]} | {ratio} |")
    failed = sum(r.get("failed") or 0 for r in rows)
    if failed:
        lines += ["", f"**{failed} failed requests** (see the JSON)."]
    lines += ["", "Commands (first run of each mode; the port is the one that server got):", "", "```"]
    for m in MODES:
        if by[m]:
            lines += [quote(by[m][0]["server_cmd"]), quote(by[m][0]["bench_cmd"])]
    lines += ["```", ""]
    return lines, summary


def report_chat(args, runs):
    n = args.repeats
    by = {m: [r for r in runs if r["mode"] == m] for m in MODES}
    lines = [f"## 2. Multi-turn chat replay: {args.turns} turns, each a new ~{args.turn_len}-token user message after "
             f"the previous reply, {args.turn_output} output tokens (greedy, ignore_eos)", "",
             "prefill = prompt tokens - cached tokens (what the turn ran through the model); TTFT = time to the first "
             "streamed content chunk" + (f", median of {n} runs [min, max]" if n > 1 else "") + ".", "",
             "| turn | user msg tokens | on: prompt | on: cached | on: prefill | on: TTFT (ms) | off: prompt | "
             "off: cached | off: prefill | off: TTFT (ms) |", "| " + " | ".join(["---"] * 10) + " |"]
    per_turn = []
    totals = {m: {"prefill": 0, "ttft": 0.0} for m in MODES}
    for t in range(args.turns):
        row = [str(t + 1)]
        first = {m: by[m][0]["turns"][t] if by[m] else None for m in MODES}
        row.append(str((first["on"] or first["off"])["user_tokens"]))
        rec = {"turn": t + 1}
        for m in MODES:
            f = first[m]
            if f is None:
                row += ["–"] * 4
                continue
            ttft = agg([r["turns"][t]["ttft_ms"] for r in by[m]])
            row += [str(f["prompt_tokens"]), str(f["cached_tokens"]), str(f["prefill_tokens"]), cell(ttft, "{:.1f}", n)]
            totals[m]["prefill"] += f["prefill_tokens"]
            totals[m]["ttft"] += ttft[0] if ttft else 0.0
            rec[m] = {"prompt_tokens": f["prompt_tokens"], "cached_tokens": f["cached_tokens"],
                      "prefill_tokens": f["prefill_tokens"], "ttft_ms_median": ttft[0] if ttft else None}
        per_turn.append(rec)
        lines.append("| " + " | ".join(row) + " |")
    lines.append(f"| all | | | | {totals['on']['prefill']} | {totals['on']['ttft']:.1f} | | | "
                 f"{totals['off']['prefill']} | {totals['off']['ttft']:.1f} |")
    for m in MODES:
        if len(by[m]) > 1 and any([(x["prompt_tokens"], x["cached_tokens"]) for x in r["turns"]] !=
                                  [(x["prompt_tokens"], x["cached_tokens"]) for x in by[m][0]["turns"]] for r in by[m]):
            lines += ["", f"Note: token counts differed between the runs of mode {m} (the table shows the first; see the JSON)."]
    on = by["on"][0]["turns"] if by["on"] else []
    if len(on) > 1 and all(on[t]["cached_tokens"] <= on[t - 1]["prompt_tokens"] for t in range(1, len(on))):
        lines += ["", "Caching on, no hit reached into the previous reply: a hit covers the previous reply only where "
                  "its text re-tokenizes to the ids generated (a random-weights model replies with byte salad that "
                  "decodes to U+FFFD), so each turn here re-runs the previous prompt's last partial block, the "
                  "previous reply and the new message."]
    lines += ["", "Servers:", "", "```"] + [quote(by[m][0]["server_cmd"]) for m in MODES if by[m]] + ["```", ""]
    return lines, {"per_turn": per_turn, "totals": totals}


def write_plot(path, per_turn):
    """The chat replay as an SVG (standard library only): prefill tokens and TTFT per turn, on vs off."""
    panels = [("prefill tokens per turn", "prefill_tokens"), ("TTFT per turn (ms)", "ttft_ms_median")]
    colors = {"on": "#1f77b4", "off": "#d62728"}
    w, h, pad, gap = 420, 280, 48, 30
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * w + gap}" height="{h + 30}" font-family="sans-serif" '
           'font-size="12">', f'<rect width="{2 * w + gap}" height="{h + 30}" fill="white"/>']
    turns = [r["turn"] for r in per_turn]
    for k, (title, key) in enumerate(panels):
        x0 = k * (w + gap)
        series = {m: [(r["turn"], r[m][key]) for r in per_turn if m in r and r[m].get(key) is not None] for m in MODES}
        ymax = max([v for pts in series.values() for _, v in pts] + [1.0]) * 1.1
        sx = lambda t: x0 + pad + (t - 1) / max(len(turns) - 1, 1) * (w - 2 * pad)
        sy = lambda v: h - pad + 20 - v / ymax * (h - 2 * pad)
        svg.append(f'<text x="{x0 + w / 2}" y="16" text-anchor="middle" font-weight="bold">{title}</text>')
        svg.append(f'<line x1="{x0 + pad}" y1="{sy(0)}" x2="{x0 + w - pad}" y2="{sy(0)}" stroke="black"/>')
        svg.append(f'<line x1="{x0 + pad}" y1="{sy(0)}" x2="{x0 + pad}" y2="{sy(ymax)}" stroke="black"/>')
        for i in range(5):
            v = ymax * i / 4
            svg.append(f'<text x="{x0 + pad - 4}" y="{sy(v) + 4}" text-anchor="end">{v:.0f}</text>')
        for t in turns:
            svg.append(f'<text x="{sx(t)}" y="{sy(0) + 16}" text-anchor="middle">{t}</text>')
        svg.append(f'<text x="{x0 + w / 2}" y="{h + 24}" text-anchor="middle">turn</text>')
        for j, (m, pts) in enumerate(series.items()):
            if not pts:
                continue
            line = " ".join(f"{sx(t):.1f},{sy(v):.1f}" for t, v in pts)
            svg.append(f'<polyline points="{line}" fill="none" stroke="{colors[m]}" stroke-width="2"/>')
            svg += [f'<circle cx="{sx(t):.1f}" cy="{sy(v):.1f}" r="3" fill="{colors[m]}"/>' for t, v in pts]
            svg.append(f'<text x="{x0 + pad + 8}" y="{sy(ymax) + 14 + 14 * j}" fill="{colors[m]}">prefix caching {m}</text>')
    svg.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(svg) + "\n")


def checks(args, serve_rows, chat_runs):
    """Sanity warnings (never failures): caching on must hit, caching off must not."""
    warn = []
    for r in serve_rows:
        if r["mode"] == "on" and not r.get("prefix_cache_hits"):
            warn.append(f"bench serve, caching on, repeat {r['repeat'] + 1}: no prefix-cache hits")
        if r["mode"] == "off" and r.get("prefix_cache_hits"):
            warn.append(f"bench serve, caching off, repeat {r['repeat'] + 1}: {r['prefix_cache_hits']:.0f} hits")
    for c in chat_runs:
        cached = [t["cached_tokens"] for t in c["turns"]]
        if c["mode"] == "off" and any(cached):
            warn.append(f"chat replay, caching off, repeat {c['repeat'] + 1}: cached tokens {cached}")
        if c["mode"] == "on" and len(cached) > 1 and not any(cached[1:]):
            warn.append(f"chat replay, caching on, repeat {c['repeat'] + 1}: no cached tokens after turn 1")
    return warn


# ------------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    serve_util.add_server_args(ap, threads_default=0, scope=" (both modes and phases)")
    ap.add_argument("--repeats", type=int, default=1, help="runs per mode and phase (order alternates on/off, off/on)")
    ap.add_argument("--phases", default="serve,chat", help="which of serve,chat to run")
    ap.add_argument("--seed", type=int, default=0, help="seed of the prompts and the chat messages")
    g = ap.add_argument_group("1. bench serve --dataset prefix")
    g.add_argument("--prefix-len", type=int, default=2048, help="tokens of the prefix all requests share")
    g.add_argument("--suffix-len", type=int, default=128, help="tokens of each request's own suffix")
    g.add_argument("--output-len", type=int, default=64, help="tokens generated per request")
    g.add_argument("--num-prompts", type=int, default=16, help="requests per run")
    g.add_argument("--max-concurrency", type=int, default=4, help="0: unlimited")
    g = ap.add_argument_group("2. multi-turn chat replay")
    g.add_argument("--turns", type=int, default=6, help="user turns of the conversation")
    g.add_argument("--turn-len", type=int, default=128, help="tokens of each new user message (about)")
    g.add_argument("--turn-output", type=int, default=64, help="tokens of each reply")
    ap.add_argument("--json", default="", help="write all raw numbers, the config and the machine here")
    ap.add_argument("--plot", default="", help="write the chat replay (prefill tokens and TTFT per turn) as an SVG here")
    args = ap.parse_args()

    phases = {p.strip() for p in args.phases.split(",") if p.strip()}
    if not phases or phases - {"serve", "chat"}:
        ap.error("--phases takes serve, chat or serve,chat")
    for name in ("repeats", "num_prompts", "turns", "turn_len", "turn_output", "output_len", "suffix_len"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.prefix_len < 0 or args.max_concurrency < 0:
        ap.error("--prefix-len and --max-concurrency must be >= 0")
    check_inputs(args.kimi, args.model, PROG)
    args.served_name = args.served_name or os.path.basename(os.path.normpath(args.model)) or "model"

    # SIGTERM / SIGHUP end like Ctrl-C: the finally below stops every server.
    exit_on_signals(PROG)

    t_start = time.time()
    serve_rows, chat_runs = [], []
    try:
        with tempfile.TemporaryDirectory(prefix="kimi-prefix-cache-") as tmp:
            machine = machine_info(args.kimi, tmp, PROG)
            if "serve" in phases:
                for rep in range(args.repeats):
                    for mode in order_for(MODES, rep):
                        serve_rows.append(run_serve(args, mode, rep, tmp))
            if "chat" in phases:
                msgs_box = [None]
                for rep in range(args.repeats):
                    for mode in order_for(MODES, rep):
                        chat_runs.append(run_chat(args, mode, rep, msgs_box))
    except KeyboardInterrupt:
        stop_all()
        raise SystemExit("prefix_cache: interrupted")
    finally:
        stop_all()
    wall = time.time() - t_start

    out = ["# Prefix caching on vs off (kimi.cpp serve)", "", machine_line(machine)]
    version = next((r.get("server_version") for r in serve_rows + chat_runs if r.get("server_version")), None)
    out.append(model_line(args.model, version, t_start, wall))
    out += ["", "```", quote([sys.executable.split("/")[-1]] + sys.argv), "```", ""]
    summary = {}
    if serve_rows:
        lines, summary["serve"] = report_serve(args, serve_rows)
        out += lines
    if chat_runs:
        lines, summary["chat"] = report_chat(args, chat_runs)
        out += lines
    warnings = checks(args, serve_rows, chat_runs)
    for w in warnings:
        log("warning: " + w)
    if warnings:
        out += ["Warnings:", ""] + [f"- {w}" for w in warnings] + [""]
    print("\n".join(out).rstrip())

    if args.plot and summary.get("chat"):
        write_plot(args.plot, summary["chat"]["per_turn"])
        log(f"wrote {args.plot}")
    if args.json:
        cfg = {k: v for k, v in vars(args).items() if k not in ("json", "plot")}
        with open(args.json, "w") as f:
            json.dump({"benchmark": "prefix_cache", "config": cfg, "argv": sys.argv, "machine": machine,
                       "wall_s": wall, "started": t_start, "serve": serve_rows, "chat": chat_runs,
                       "summary": summary, "warnings": warnings}, f, indent=2)
        log(f"wrote {args.json}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Runs every libFuzzer target of a KIMI_FUZZ build for a bounded time (`make fuzz`).

usage: fuzz/run.py BUILD_DIR SECONDS OUT_JSON [--targets a,b] [--parallel N]

Each target runs on a working copy of its seed corpus (fuzz/corpus/<target>/, which is never
modified) with -max_total_time=SECONDS -rss_limit_mb=2048 -timeout=10 and its dictionary
(fuzz/<target>.dict) if there is one. Everything it writes (corpus copy, scratch files,
crash artifacts) lives in one temporary folder, removed on exit, on failure and on
SIGINT/SIGTERM. Prints executions, crashes and final coverage per target and writes
OUT_JSON as {target: {"execs", "crashes", "seconds", "cov", "ft", "corpus"}}. Exits 1 if a
target crashed (or failed to run): its crash inputs are copied to BUILD_DIR/fuzz-crashes/
<target>/ with the log next to them, and the message names them.
Debian's /usr/bin/python3, standard library only.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

TARGETS = ["fuzz_http", "fuzz_request", "fuzz_api_routes", "fuzz_safetensors", "fuzz_tokenizer", "fuzz_chat", "fuzz_grammar",
           "fuzz_matcher", "fuzz_image", "fuzz_image_header", "fuzz_gguf"]
FUZZ_DIR = os.path.dirname(os.path.abspath(__file__))
# libFuzzer's artifact names for a failing input (slow-unit-* is only a note)
FAILURE_PREFIXES = ("crash-", "leak-", "timeout-", "oom-")
RUNNING = set()   # the fuzzer processes now running (stopped if run.py is interrupted)


def parse_log(text):
    """execs, cov, ft, corpus size from libFuzzer's output (-print_final_stats=1)."""
    execs = re.findall(r"stat::number_of_executed_units:\s*(\d+)", text)
    if not execs:   # killed before the final stats: the last status line's #N
        execs = re.findall(r"^#(\d+)\s", text, re.M)
    status = re.findall(r"cov: (\d+) ft: (\d+) corp: (\d+)", text)
    cov, ft, corp = (int(x) for x in status[-1]) if status else (0, 0, 0)
    return (int(execs[-1]) if execs else 0), cov, ft, corp


def run_target(target, args, work):
    binary = os.path.join(args.build_dir, "bin", target)
    corpus = os.path.join(work, "corpus", target)
    scratch = os.path.join(work, "tmp", target)
    artifacts = os.path.join(work, "artifacts", target) + os.sep
    seeds = os.path.join(FUZZ_DIR, "corpus", target)
    if os.path.isdir(seeds):
        shutil.copytree(seeds, corpus)
    else:
        os.makedirs(corpus)
    os.makedirs(scratch)
    os.makedirs(artifacts)
    cmd = [binary, corpus, f"-max_total_time={args.seconds}", "-rss_limit_mb=2048", "-timeout=10",
           "-print_final_stats=1", f"-artifact_prefix={artifacts}"]
    dictionary = os.path.join(FUZZ_DIR, target + ".dict")
    if os.path.isfile(dictionary):
        cmd.append(f"-dict={dictionary}")
    env = dict(os.environ, TMPDIR=scratch, UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    except FileNotFoundError:
        proc = None
        rc, log = 127, f"{binary}: not found (build it: make build-fuzz)\n"
    if proc:
        RUNNING.add(proc)
        try:
            # the limit only guards against a hung process: libFuzzer stops itself at max_total_time
            out, _ = proc.communicate(timeout=args.seconds + 300)
            rc, log = proc.returncode, out.decode("utf-8", "replace")
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            rc, log = -9, out.decode("utf-8", "replace") + "\n[run.py: killed, past its time limit]\n"
        finally:
            RUNNING.discard(proc)
    seconds = time.monotonic() - t0
    execs, cov, ft, corp = parse_log(log)
    found = sorted(f for f in os.listdir(artifacts) if f.startswith(FAILURE_PREFIXES))
    result = {"execs": execs, "crashes": len(found), "seconds": round(seconds, 1), "cov": cov, "ft": ft, "corpus": corp}
    saved = []
    if found or rc != 0:
        if not found:
            result["crashes"] = 1   # a run that failed without an input to show (start-up, hang)
        keep = os.path.join(os.path.abspath(args.build_dir), "fuzz-crashes", target)
        os.makedirs(keep, exist_ok=True)
        for f in found:
            shutil.copy(os.path.join(artifacts, f), os.path.join(keep, f))
            saved.append(os.path.join(keep, f))
        with open(os.path.join(keep, "fuzz.log"), "w") as fh:
            fh.write(log)
        result["log"] = os.path.join(keep, "fuzz.log")
        result["inputs"] = saved
        result["exit_code"] = rc
    return target, result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build_dir")
    ap.add_argument("seconds", type=int)
    ap.add_argument("out_json")
    ap.add_argument("--targets", default=",".join(TARGETS), help="comma-separated (default: all)")
    ap.add_argument("--parallel", type=int, default=1, help="targets run at once (default 1)")
    args = ap.parse_args()
    targets = [t for t in args.targets.split(",") if t]
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        sys.exit(f"run.py: unknown target(s) {', '.join(unknown)} (known: {', '.join(TARGETS)})")

    work = tempfile.mkdtemp(prefix="kimi-fuzz-run-")

    def cleanup(*_):
        for p in list(RUNNING):
            p.kill()
        shutil.rmtree(work, ignore_errors=True)
        sys.exit(130)

    signal.signal(signal.SIGTERM, cleanup)
    signal.signal(signal.SIGINT, cleanup)
    results = {}
    try:
        with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
            for target, r in pool.map(lambda t: run_target(t, args, work), targets):
                results[target] = r
                print(f"{target:18} {r['execs']:>10} execs  {r['seconds']:>7.1f} s  cov {r['cov']:>6}  ft {r['ft']:>7}  "
                      f"corpus {r['corpus']:>5}  crashes {r['crashes']}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out_json)), exist_ok=True)
    with open(args.out_json, "w") as fh:
        json.dump(results, fh, indent=2)
        fh.write("\n")
    failed = {t: r for t, r in results.items() if r["crashes"]}
    if failed:
        for t, r in failed.items():
            inputs = ", ".join(r["inputs"]) or "(no input written)"
            print(f"FAIL {t}: exit code {r['exit_code']}; crash input: {inputs}; log: {r['log']}", file=sys.stderr)
            print(f"  reproduce: {os.path.join(args.build_dir, 'bin', t)} {r['inputs'][0] if r['inputs'] else ''}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()

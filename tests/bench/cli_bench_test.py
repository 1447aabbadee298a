#!/usr/bin/python3
"""End-to-end tests of the measuring commands on a random tiny model: bench decode --ab,
bench serve against our server, eval gsm8k --limit 5 against our server, eval compare; eval
tasks on the committed default model (in-process, two forms, and against a server); and bench
machine, bench matmul (with --compare-torch where /usr/bin/python3 has torch).

Run as: cli_bench_test.py --kimi build/bin/kimi-cpp [unittest args]. Standard library only."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from kimi_server import READY_RE, KimiServer  # noqa: E402

KIMI = None
WORK = None
MODEL = None
SERVER = None
URL = None


def torch_importable():
    """Whether Debian's /usr/bin/python3 can import torch (for the --compare-torch tests)."""
    try:
        return subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True,
                              timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


HAVE_TORCH = torch_importable()


def run(*args, timeout=300):
    p = subprocess.run([KIMI, *args], capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def head_bytes(path, n):
    with open(path, "rb") as f:
        return f.read(n)


def setUpModule():
    global WORK, MODEL, SERVER, URL
    WORK = tempfile.mkdtemp(prefix="kimi-bench-")
    unittest.addModuleCleanup(shutil.rmtree, WORK, ignore_errors=True)   # also when this setup fails
    MODEL = os.path.join(WORK, "tiny")
    rc, _, err = run("make-model", "--preset", "tiny", "--seed", "2", "--out", MODEL)
    assert rc == 0, err
    SERVER = KimiServer([KIMI, "serve", "--model", MODEL, "--port", "0", "--served-model-name", "kimi-tiny",
                         "--max-num-seqs", "8", "--quiet"], timeout=120, ready=READY_RE)
    unittest.addModuleCleanup(SERVER.stop, 30)    # runs before the rmtree above
    URL = SERVER.url


class BenchDecode(unittest.TestCase):
    def test_ab_json_counters_plot(self):
        js, png = os.path.join(WORK, "decode.json"), os.path.join(WORK, "decode.png")
        rc, out, err = run("bench", "decode", "--model", MODEL, "--ab", "--concurrency", "3", "--prefix-len", "24",
                           "--suffix-len", "8", "--output-len", "12", "--warmup", "1", "--runs", "2", "--threads", "2",
                           "--json", js, "--plot", png)
        self.assertEqual(rc, 0, err)
        j = read_json(js)
        layers = read_json(os.path.join(MODEL, "config.json"))["num_hidden_layers"]
        for k in ("config", "git_commit", "cpu_flags", "variants", "delta_direct_vs_copy"):
            self.assertIn(k, j)
        self.assertEqual(j["config"]["threads"], 2)
        for name in ("direct", "copy"):
            v = j["variants"][name]
            for k in ("mean_tpot_ms", "std_tpot_ms", "median_itl_ms", "p99_itl_ms", "output_throughput", "completed",
                      "attn_output_copies_per_step", "allocations_per_step"):
                self.assertIn(k, v)
            self.assertEqual(v["completed"], 3 * 2)
            self.assertGreater(v["mean_tpot_ms"], 0)
            self.assertEqual(v["allocations_per_step"], 0)
            self.assertGreater(v["decode_steps"], 0)
        self.assertEqual(j["variants"]["direct"]["attn_output_copies_per_step"], 0)
        self.assertEqual(j["variants"]["copy"]["attn_output_copies_per_step"], layers)
        self.assertIn("| direct |", out)
        self.assertIn("| copy |", out)
        self.assertEqual(head_bytes(png, 8), b"\x89PNG\r\n\x1a\n")

    def test_speculative_against_plain(self):
        js = os.path.join(WORK, "spec.json")
        rc, out, err = run("bench", "decode", "--model", MODEL, "--concurrency", "2", "--prefix-len", "0",
                           "--suffix-len", "7", "--repeat-prompt", "4", "--output-len", "16", "--warmup", "0",
                           "--runs", "2", "--json", js, "--speculative-config",
                           '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1, "prompt_lookup_max": 2}')
        self.assertEqual(rc, 0, err)
        j = read_json(js)
        self.assertEqual(set(j["variants"]), {"plain", "speculative"})
        self.assertIn("delta_speculative_vs_plain", j)
        self.assertEqual(j["config"]["repeat_prompt"], 4)
        sd = j["variants"]["speculative"]["spec_decode"]
        # a random model seldom repeats itself, so drafts may be few (the engine tests force them)
        self.assertLessEqual(sd["num_accepted_tokens"], sd["num_draft_tokens"])
        self.assertLessEqual(sd["num_draft_tokens"], 3 * sd["num_drafts"])
        if sd["num_drafts"]:
            self.assertAlmostEqual(sd["acceptance_rate"], sd["num_accepted_tokens"] / sd["num_draft_tokens"])
            self.assertAlmostEqual(sd["mean_acceptance_length"], 1 + sd["num_accepted_tokens"] / sd["num_drafts"])
        self.assertNotIn("spec_decode", j["variants"]["plain"])
        self.assertEqual(j["variants"]["speculative"]["allocations_per_step"], 0, "drafts reserved at submission")
        for name in ("plain", "speculative"):
            self.assertEqual(j["variants"][name]["completed"], 2 * 2)
        self.assertIn("acceptance rate", out)
        rc, _, err = run("bench", "decode", "--model", MODEL, "--ab", "--speculative-config",
                         '{"method": "ngram", "num_speculative_tokens": 2}')
        self.assertEqual(rc, 1)
        self.assertIn("not both", err)
        # one favoured token: the output repeats it, prompt lookup drafts it and every draft is kept
        rc, out, err = run("bench", "decode", "--model", MODEL, "--concurrency", "1", "--prefix-len", "0",
                           "--suffix-len", "8", "--output-len", "24", "--warmup", "0", "--runs", "1", "--json", js,
                           "--logit-bias", "3=40", "--speculative-config",
                           '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1, "prompt_lookup_max": 2}')
        self.assertEqual(rc, 0, err)
        j = read_json(js)
        self.assertEqual(j["config"]["logit_bias"], {"3": 40.0})
        sd = j["variants"]["speculative"]["spec_decode"]
        self.assertGreater(sd["num_drafts"], 0)
        self.assertEqual(sd["num_accepted_tokens"], sd["num_draft_tokens"])
        rc, _, err = run("bench", "decode", "--model", MODEL, "--logit-bias", "3=400")
        self.assertEqual(rc, 1)
        self.assertIn("logit_bias", err)

    def test_single_variant_and_bad_flags(self):
        rc, out, err = run("bench", "decode", "--model", MODEL, "--attn-output", "copy", "--concurrency", "2",
                           "--prefix-len", "4", "--suffix-len", "4", "--output-len", "4", "--runs", "1", "--warmup", "0")
        self.assertEqual(rc, 0, err)
        self.assertIn("| copy |", out)
        self.assertNotIn("| direct |", out)
        rc, _, err = run("bench", "decode", "--model", MODEL, "--output-len", "1")
        self.assertEqual(rc, 1)
        self.assertIn("--output-len", err)


class BenchMachine(unittest.TestCase):
    def test_probes_json(self):
        js = os.path.join(WORK, "machine.json")
        rc, out, err = run("bench", "machine", "--size-mb", "64", "--reps", "2", "--threads", "2", "--json", js)
        self.assertEqual(rc, 0, err)
        j = read_json(js)
        for k in ("cpu", "cpu_flags", "threads", "read_bandwidth_gbs", "peak_gflops"):
            self.assertIn(k, j)
        for part in (j["read_bandwidth_gbs"], j["peak_gflops"]["f32"], j["peak_gflops"]["bf16"]):
            for t in ("1_thread", "all_threads"):
                self.assertGreater(part[t]["median"], 0)
                self.assertLessEqual(part[t]["min"], part[t]["median"])
                self.assertLessEqual(part[t]["median"], part[t]["max"])
        self.assertIn("| read bandwidth |", out)
        # The AMX tile peak: measured where this process may use the tiles, else null and why.
        self.assertIn("amx_bf16_gflops", j)
        self.assertIn("amx_why_not", j)
        if j["amx_bf16_gflops"] is None:
            self.assertTrue(j["amx_why_not"])
            self.assertIn("AMX tile peak: not measured (" + j["amx_why_not"] + ")", out)
        else:
            self.assertIsNone(j["amx_why_not"])
            self.assertEqual(j["amx_bf16_gflops"]["isa"], "amx-bf16 (tdpbf16ps)")
            for t in ("1_thread", "all_threads"):
                p = j["amx_bf16_gflops"][t]
                self.assertTrue(0 < p["min"] <= p["median"] <= p["max"])
            self.assertIn("| bf16 tile peak (amx-bf16 (tdpbf16ps)) |", out)


class BenchModel(unittest.TestCase):
    def test_matrix_json(self):
        js, png = os.path.join(WORK, "model.json"), os.path.join(WORK, "model.png")
        rc, out, err = run("bench", "model", "--model", MODEL, "--prompt-lens", "16,32", "--batches", "1,3",
                           "--contexts", "0,20", "--reps", "2", "--decode-steps", "3", "--threads", "2",
                           "--max-num-batched-tokens", "16", "--json", js, "--plot", png)
        self.assertEqual(rc, 0, err)
        j = read_json(js)
        self.assertEqual([p["test"] for p in j["prefill"]], ["pp16", "pp32"])
        # Prefill after a cached context: the 20-token prefix comes from the prefix cache up to
        # its last full 16-token block, so each rep computes the other 4 + the new tokens.
        ctx = j["prefill_after_context"]
        self.assertEqual([p["test"] for p in ctx], ["pp16 @ d20", "pp32 @ d20"])
        for row, p in zip(ctx, (16, 32)):
            self.assertEqual(row["cached_tokens"], 16)
            self.assertEqual(row["computed_tokens"], p + 4)
            self.assertGreater(row["attention_gflops"], 0)
        # a cached context adds attention work per computed token
        share = [r["attention_gflops"] / r["gflops"] for r in (j["prefill"][0], ctx[0])]
        self.assertGreater(share[1], share[0])
        self.assertIn("| pp32 @ d20 |", out)
        self.assertEqual(len(j["decode"]), 4)
        self.assertGreater(j["read_bandwidth_gbs"], 0)
        # The bandwidth is the median of passes interleaved with the rows (3 first, 2 per decode
        # row, 2 at the end), reported with its spread.
        self.assertEqual(len(j["read_bandwidth_samples_gbs"]), 3 + 2 * 4 + 2)
        sp = j["read_bandwidth_spread_gbs"]
        self.assertTrue(0 < sp["min"] <= sp["median"] == j["read_bandwidth_gbs"] <= sp["max"])
        self.assertIn("median of 13 passes", out)
        self.assertGreater(j["peak_gflops"], 0)
        for row in j["decode"]:
            for k in ("tokens_per_s", "step_ms", "bytes_per_step", "roofline_step_ms", "pct_of_roofline", "probe_gbs",
                      "pct_of_roofline_row_probe"):
                self.assertIn(k, row)
            t = row["tokens_per_s"]
            self.assertTrue(0 < t["min"] <= t["median"] <= t["max"])
        # More context, more cache bytes; more batch, more (or equal) weight bytes.
        d = {(r["batch"], r["context"]): r for r in j["decode"]}
        self.assertGreater(d[(1, 20)]["cache_bytes"], d[(1, 0)]["cache_bytes"])
        self.assertGreaterEqual(d[(3, 0)]["weight_bytes"], d[(1, 0)]["weight_bytes"])
        self.assertIn("| pp16 |", out)
        self.assertEqual(head_bytes(png, 4), b"\x89PNG")

    def test_speculative_curve(self):
        js, png = os.path.join(WORK, "model_spec.json"), os.path.join(WORK, "model_spec.png")
        rc, out, err = run("bench", "model", "--model", MODEL, "--prompt-lens", "8", "--batches", "1,2",
                           "--contexts", "0,20", "--reps", "2", "--decode-steps", "3", "--threads", "2",
                           "--spec-prompt-len", "7", "--repeat-prompt", "4", "--spec-output-len", "12",
                           "--json", js, "--plot", png, "--speculative-config",
                           '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_min":1,"prompt_lookup_max":2}')
        self.assertEqual(rc, 0, err)
        j = read_json(js)
        self.assertEqual(j["speculative_config"], "ngram, k=3, n-grams 1..2")
        self.assertEqual(len(j["decode"]), 4)
        for row in j["decode"]:
            sp = row["speculative"]
            self.assertEqual(sp["k"], 3)
            self.assertEqual(sp["speculating_seqs"], row["batch"])
            self.assertEqual(sp["verify_tokens_per_step"], 4 * row["batch"])
            v = sp["verify_step_ms"]
            self.assertTrue(0 < v["min"] <= v["median"] <= v["max"])
            self.assertTrue(0 <= sp["verify_acceptance_rate"] <= 1)
            curve = sp["curve"]
            self.assertEqual([round(p["alpha"], 9) for p in curve], [i / 10 for i in range(11)])
            e = [p["expected_tokens_per_step"] for p in curve]
            self.assertAlmostEqual(e[0], 1.0)
            self.assertAlmostEqual(e[-1], 4.0)
            self.assertAlmostEqual(e[5], (1 - 0.5 ** 4) / 0.5)
            self.assertTrue(all(a < b for a, b in zip(e, e[1:])), e)   # monotone in alpha
            plain_ms, verify_ms = row["step_ms"]["median"], v["median"]
            for p in curve:   # speedup = B·E / verify against B / plain (every sequence speculates)
                self.assertAlmostEqual(p["speedup"], p["expected_tokens_per_step"] * plain_ms / verify_ms, places=6)
                self.assertAlmostEqual(p["tokens_per_s"], 1e3 * row["batch"] * p["expected_tokens_per_step"] / verify_ms,
                                       delta=1e-6 * p["tokens_per_s"])
            if verify_ms > plain_ms:
                self.assertLess(curve[0]["speedup"], 1)
            x = sp["crossover_acceptance"]
            if x is None:
                self.assertLess(curve[-1]["speedup"], 1)
            else:
                self.assertTrue(0 <= x <= 1, x)
                if x > 0:   # break-even there: E(x) = verify / plain
                    self.assertAlmostEqual(sp["crossover_mean_acceptance_length"], verify_ms / plain_ms, places=6)
                    self.assertAlmostEqual((1 - x ** 4) / (1 - x), verify_ms / plain_ms, places=6)
        e2e = j["speculative_end_to_end"]
        self.assertEqual((e2e["concurrency"], e2e["prompt_tokens"], e2e["repeat_prompt"]), (1, 28, 4))
        self.assertEqual((e2e["runs"], e2e["output_len"]), (2, 12))
        sd = e2e["spec_decode"]
        # a random model seldom repeats itself, so drafts may be few
        self.assertLessEqual(sd["num_accepted_tokens"], sd["num_draft_tokens"])
        self.assertLessEqual(sd["num_draft_tokens"], 3 * sd["num_drafts"])
        if sd["num_drafts"]:
            self.assertAlmostEqual(sd["acceptance_rate"], sd["num_accepted_tokens"] / sd["num_draft_tokens"])
            self.assertAlmostEqual(sd["mean_acceptance_length"], 1 + sd["num_accepted_tokens"] / sd["num_drafts"])
        for name in ("plain", "speculative"):
            self.assertEqual(e2e[name]["completed"], 2)
            self.assertGreater(e2e[name + "_tokens_per_s"], 0)
        self.assertAlmostEqual(e2e["speedup"], e2e["speculative_tokens_per_s"] / e2e["plain_tokens_per_s"])
        self.assertIn("| tg3 b2 @ d20 |", out.split("speculation (ngram")[1])
        self.assertIn("end to end (batch 1", out)
        self.assertEqual(head_bytes(png, 4), b"\x89PNG")
        # method draft_model, the model as its own draft: the draft's steps are in the verification
        # step, and greedy drafts of the same weights are always accepted
        rc, _, err = run("bench", "model", "--model", MODEL, "--prompt-lens", "8", "--batches", "1", "--contexts", "0",
                         "--reps", "1", "--decode-steps", "2", "--threads", "2", "--spec-output-len", "8", "--quiet",
                         "--json", js, "--speculative-config",
                         json.dumps({"method": "draft_model", "model": MODEL, "num_speculative_tokens": 2}))
        self.assertEqual(rc, 0, err)
        j = read_json(js)
        self.assertIn("draft model", j["decode"][0]["speculative"]["verify_step_includes"])
        sd = j["speculative_end_to_end"]["spec_decode"]
        self.assertGreater(sd["num_drafts"], 0)
        self.assertEqual(sd["num_accepted_tokens"], sd["num_draft_tokens"])
        # a token budget too small for the largest verification step is a clear error
        rc, _, err = run("bench", "model", "--model", MODEL, "--batches", "2", "--max-num-batched-tokens", "6",
                         "--speculative-config", '{"method":"ngram","num_speculative_tokens":3}')
        self.assertEqual(rc, 1)
        self.assertIn("8 tokens", err)

    def test_compare_torch(self):
        js = os.path.join(WORK, "model_torch.json")
        rc, out, err = run("bench", "model", "--model", MODEL, "--prompt-lens", "8", "--batches", "1,2",
                           "--contexts", "0,5", "--reps", "1", "--decode-steps", "2", "--threads", "1",
                           "--compare-torch", "--quiet", "--json", js)
        self.assertEqual(rc, 0, err)
        j = read_json(js)
        self.assertTrue(j["torch"]["torch_version"])
        for row in j["prefill"] + j["decode"]:
            self.assertGreater(row["speedup_vs_torch"], 0, row["test"])
            t = row["torch_tokens_per_s"]
            self.assertTrue(0 < t["min"] <= t["median"] <= t["max"])
            self.assertIn(f"| {row['test']} |", out.split("PyTorch")[1])
        # A missing baseline script is a clear error before any work.
        rc, _, err = run("bench", "model", "--model", MODEL, "--compare-torch", "--torch-script", "/nonexistent.py")
        self.assertEqual(rc, 1)
        self.assertIn("no baseline script", err)


class BenchMatmul(unittest.TestCase):
    def test_rows_and_bad_shape(self):
        js = os.path.join(WORK, "matmul.json")
        rc, out, err = run("bench", "matmul", "--shapes", "256x512,64x96", "--tokens", "1,8", "--reps", "1",
                           "--working-set-mb", "8", "--threads", "2", "--quiet", "--json", js)
        self.assertEqual(rc, 0, err)
        j = read_json(js)
        self.assertEqual([(r["shape"], r["tokens"]) for r in j["rows"]],
                         [("256x512", 1), ("256x512", 8), ("64x96", 1), ("64x96", 8)])
        for r in j["rows"]:
            self.assertTrue(0 < r["ms"]["min"] <= r["ms"]["median"] <= r["ms"]["max"])
            self.assertAlmostEqual(r["gflops"] / r["weight_gbs"], r["tokens"], places=6)   # 2·O·I·T flops / 2·O·I bytes
            self.assertGreater(r["probe_gbs"], 0)
        self.assertIn("| 64x96 | 8 |", out)
        rc, _, err = run("bench", "matmul", "--shapes", "12x", "--quiet")
        self.assertEqual(rc, 1)
        self.assertIn("is not OUTxIN", err)

    @unittest.skipUnless(HAVE_TORCH, "/usr/bin/python3 cannot import torch (Debian python3-torch)")
    def test_compare_torch(self):
        js = os.path.join(WORK, "matmul_torch.json")
        rc, out, err = run("bench", "matmul", "--shapes", "64x128,96x256", "--tokens", "1,16", "--reps", "1",
                           "--working-set-mb", "1", "--compare-torch", "--quiet", "--json", js)
        self.assertEqual(rc, 0, err)
        j = read_json(js)
        self.assertTrue(j["torch"]["version"])
        self.assertEqual([(r["shape"], r["tokens"]) for r in j["rows"]],
                         [("64x128", 1), ("64x128", 16), ("96x256", 1), ("96x256", 16)])
        for r in j["rows"]:
            t = r["torch_ms"]
            self.assertTrue(0 < t["min"] <= t["median"] <= t["max"], r)
            self.assertGreater(r["torch_gflops"], 0)
            self.assertAlmostEqual(r["speedup_vs_torch"], r["gflops"] / r["torch_gflops"], places=6)
            self.assertIn(f"| {r['shape']} | {r['tokens']} |", out)
        self.assertIn("| torch ms | torch GFLOP/s | ratio |", out)
        # A missing script is a clear error before any work; so are products torch is not asked for.
        rc, _, err = run("bench", "matmul", "--shapes", "64x128", "--compare-torch", "--torch-script",
                         "/nonexistent.py", "--quiet")
        self.assertNotEqual(rc, 0)
        self.assertIn("/nonexistent.py", err)
        rc, _, err = run("bench", "matmul", "--shapes", "64x128", "--compare-torch", "--activation-dtype", "f32")
        self.assertNotEqual(rc, 0)
        self.assertIn("bf16", err)


class BenchServe(unittest.TestCase):
    def test_against_our_server(self):
        js, png = os.path.join(WORK, "serve.json"), os.path.join(WORK, "serve.png")
        for endpoint in ("/v1/completions", "/v1/chat/completions"):
            rc, out, err = run("bench", "serve", "--base-url", URL, "--tokenizer", MODEL, "--endpoint", endpoint,
                               "--num-prompts", "8", "--random-input-len", "32", "--random-output-len", "8",
                               "--max-concurrency", "4", "--ignore-eos", "--json", js, "--plot", png)
            self.assertEqual(rc, 0, err + out)
            j = read_json(js)
            self.assertEqual(j["completed"], 8)
            self.assertEqual(j["failed"], 0)
            self.assertEqual(j["model_id"], "kimi-tiny")   # from /v1/models
            self.assertEqual(j["total_output_tokens"], 64)   # usage from the final chunk, ignore_eos
            for k in ("duration", "request_throughput", "output_throughput", "total_token_throughput",
                      "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms",
                      "mean_itl_ms", "p99_itl_ms", "mean_e2el_ms", "input_lens", "output_lens", "ttfts", "itls"):
                self.assertIn(k, j)
            self.assertTrue(all(len(g) == 7 for g in j["itls"]))   # 8 tokens → 7 gaps
            self.assertIn("Serving Benchmark Result", out)
            self.assertEqual(head_bytes(png, 4), b"\x89PNG")

    def test_prefix_dataset_and_rate(self):
        rc, out, err = run("bench", "serve", "--base-url", URL, "--tokenizer", MODEL, "--dataset", "prefix",
                           "--prefix-len", "24", "--suffix-len", "8", "--output-len", "4", "--num-prompts", "5",
                           "--request-rate", "50", "--ignore-eos", "--quiet")
        self.assertEqual(rc, 0, err + out)
        self.assertRegex(out, r"Successful requests:\s+5")


class EvalGsm8k(unittest.TestCase):
    def test_limit_5_against_our_server(self):
        out_path, js = os.path.join(WORK, "g.jsonl"), os.path.join(WORK, "g.json")
        rc, out, err = run("eval", "gsm8k", "--base-url", URL, "--limit", "5", "--max-tokens", "24", "--out", out_path,
                           "--json", js)
        self.assertEqual(rc, 0, err)
        lines = read_jsonl(out_path)
        self.assertEqual(len(lines), 5)
        for i, s in enumerate(lines):
            self.assertEqual(s["id"], i)
            for k in ("prompt", "response", "gold", "correct", "correct_by_scorer", "extracted"):
                self.assertIn(k, s)
            self.assertTrue(s["prompt"].startswith("Question: "))
            self.assertTrue(s["prompt"].endswith("\nAnswer:"))
            self.assertEqual(set(s["correct_by_scorer"]), {"vllm", "flexible-extract", "strict-match"})
            self.assertEqual(s["correct"], s["correct_by_scorer"]["vllm"])
        summ = read_json(js)
        self.assertEqual(summ["n"], 5)
        self.assertEqual(summ["requests_failed"], 0)
        for k in ("accuracy", "scorers", "garbled_responses"):
            self.assertIn(k, summ)
        self.assertIn("invalid_rate", summ["scorers"]["vllm"])

    def test_compare_reproduces_the_published_p_value(self):
        a, b = os.path.join(WORK, "a.jsonl"), os.path.join(WORK, "b.jsonl")
        with open(a, "w") as fa, open(b, "w") as fb:
            # 30 both right, 17 only A, 8 only B, 45 both wrong; B's file in another order.
            rows = [(True, True)] * 30 + [(True, False)] * 17 + [(False, True)] * 8 + [(False, False)] * 45
            for i, (ca, _) in enumerate(rows):
                fa.write(json.dumps({"id": "q%d" % i, "correct": ca}) + "\n")
            for i, (_, cb) in reversed(list(enumerate(rows))):
                fb.write(json.dumps({"id": "q%d" % i, "correct": cb}) + "\n")
        rc, out, err = run("eval", "compare", a, b, "--json")
        self.assertEqual(rc, 0, err)
        j = json.loads(out)
        s = j["scorers"]["correct"]
        self.assertEqual((s["both_correct"], s["only_a"], s["only_b"], s["both_wrong"]), (30, 17, 8, 45))
        self.assertAlmostEqual(s["mcnemar_p"], 0.1078, places=4)
        rc, out, err = run("eval", "compare", a, b)
        self.assertIn("p = 0.1078", out)
        rc, out, err = run("eval", "compare", a, a, "--json")
        self.assertEqual(json.loads(out)["scorers"]["correct"]["mcnemar_p"], 1.0)   # no discordant pairs
        with open(os.path.join(WORK, "bad.jsonl"), "w") as f:
            f.write('{"id": 1}\n')
        rc, _, err = run("eval", "compare", a, os.path.join(WORK, "bad.jsonl"))
        self.assertEqual(rc, 1)
        self.assertIn("correct", err)


DEFAULT_MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models", "kimi-k3-mini")


class EvalTasks(unittest.TestCase):
    """eval tasks on the committed default model: in-process (two forms, compared by McNemar)
    and against a server (the same replies: greedy, the same engine)."""

    def test_in_process_two_forms_and_against_a_server(self):
        mx = os.path.join(WORK, "mini-mxfp4")
        rc, _, err = run("quantize", "--model", DEFAULT_MODEL, "--out", mx, "--targets", "experts", "--quiet")
        self.assertEqual(rc, 0, err)
        out, js = os.path.join(WORK, "t.jsonl"), os.path.join(WORK, "t.json")
        data = os.path.join(DEFAULT_MODEL, "eval.jsonl")
        rc, text, err = run("eval", "tasks", "--model", "bf16=" + DEFAULT_MODEL, "--model", "mx=" + mx, "--data", data,
                            "--limit", "40", "--out", out, "--json", js, "--quiet", timeout=600)
        self.assertEqual(rc, 0, err)
        summ = read_json(js)
        self.assertEqual([r["label"] for r in summ["runs"]], ["bf16", "mx"])
        bf16, mxr = summ["runs"]
        tasks = bf16["tasks"]
        self.assertEqual(tasks["all"]["n"], sum(v["n"] for k, v in tasks.items() if k not in ("all", "text")))
        self.assertGreaterEqual(tasks["all"]["accuracy"], 0.8, text)   # the trained model, greedy
        self.assertIn("vs_first", mxr)
        self.assertEqual(mxr["vs_first"]["all"]["n_paired"], tasks["all"]["n"])
        self.assertIn("| task | n | bf16 | mx |", text)
        samples = read_jsonl(os.path.join(WORK, "t.bf16.jsonl"))
        self.assertEqual(len(samples), tasks["all"]["n"])
        for smp in samples:
            for k in ("id", "task", "answer", "reply", "correct"):
                self.assertIn(k, smp)
            if smp["task"] == "mul":
                self.assertEqual(set(smp["correct_by_scorer"]), {"tool_call", "final_answer"})
        # against a server: the same items, the same verdicts
        srv = KimiServer([KIMI, "serve", "--model", DEFAULT_MODEL, "--port", "0", "--quiet"], timeout=120,
                         ready=READY_RE)
        try:
            one = os.path.join(WORK, "t-server.jsonl")
            rc, _, err = run("eval", "tasks", "--base-url", srv.url, "--served-model", "kimi-k3-mini", "--data", data,
                             "--limit", "40", "--out", one, "--quiet", timeout=600)
            self.assertEqual(rc, 0, err)
        finally:
            srv.stop(30)
        by_server = {s["id"]: s["correct"] for s in read_jsonl(one)}
        self.assertEqual(by_server, {smp["id"]: smp["correct"] for smp in samples})

    def test_bad_input(self):
        rc, _, err = run("eval", "tasks", "--base-url", URL)
        self.assertEqual(rc, 1)
        self.assertIn("--data", err)
        bad = os.path.join(WORK, "bad-tasks.jsonl")
        with open(bad, "w") as f:
            f.write('{"task": "add2", "answer": 3}\n')
        rc, _, err = run("eval", "tasks", "--base-url", URL, "--data", bad)
        self.assertEqual(rc, 1)
        self.assertIn("bad-tasks.jsonl:1", err)
        rc, _, err = run("eval", "tasks", "--model", MODEL, "--model", MODEL, "--data", bad)
        self.assertEqual(rc, 1)
        self.assertIn("LABEL=PATH", err)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--kimi", required=True)
    a, rest = ap.parse_known_args()
    KIMI = os.path.abspath(a.kimi)
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)

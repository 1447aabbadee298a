#!/usr/bin/python3
"""End-to-end tests of `kimi-cpp generate` and `kimi-cpp chat` on a random tiny model, and of
every local command (inspect, score, generate, chat, bench decode --ab) on a random Kimi-K3, and
quantize / the published MXFP4 form of K3 (make-model --mxfp4-experts).

Run as: cli_test.py --kimi build/bin/kimi-cpp [unittest args, e.g. Generate]
Standard library only. Chat is driven both through a pipe and through a pseudo-terminal
(Ctrl-C as the terminal's interrupt character)."""
import argparse
import json
import os
import re
import pty
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

KIMI = None
WORK = None
MODEL = None      # model dir with its tokenizer
BARE = None       # the same model, no tokenizer files
TOKDIR = None     # the tokenizer alone


def run(*args, input=None, timeout=120):
    p = subprocess.run([KIMI, *args], input=input, capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def gen_json(*args):
    rc, out, err = run("generate", "--model", MODEL, "--json", *args)
    assert rc == 0, err
    lines = [l for l in out.splitlines() if l.strip()]
    assert len(lines) == 1, out
    return json.loads(lines[0])


def setUpModule():
    global WORK, MODEL, BARE, TOKDIR
    WORK = tempfile.mkdtemp(prefix="kimi-cli-")
    MODEL = os.path.join(WORK, "tiny")
    rc, _, err = run("make-model", "--preset", "tiny", "--seed", "3", "--out", MODEL)
    assert rc == 0, err
    BARE = os.path.join(WORK, "bare")
    TOKDIR = os.path.join(WORK, "tok")
    os.makedirs(BARE)
    os.makedirs(TOKDIR)
    for f in os.listdir(MODEL):
        dst = TOKDIR if f in ("tiktoken.model", "tokenizer_config.json") else BARE
        shutil.copy(os.path.join(MODEL, f), dst)


def tearDownModule():
    shutil.rmtree(WORK, ignore_errors=True)


PROMPT = "Once upon a time, in a land far away, there lived"


class Generate(unittest.TestCase):
    def test_json_shape_and_text(self):
        j = gen_json("--prompt", PROMPT, "-n", "24", "--temperature", "0", "--ignore-eos",
                     "--include-special", "--logprobs", "3")
        for k in ("prompt_tokens", "completion_tokens", "token_ids", "text", "finish_reason", "logprobs", "timings"):
            self.assertIn(k, j)
        self.assertEqual(j["completion_tokens"], 24)
        self.assertEqual(len(j["token_ids"]), 24)
        self.assertEqual(j["finish_reason"], "length")
        self.assertEqual(len(j["logprobs"]), 24)
        for lp, tid in zip(j["logprobs"], j["token_ids"]):
            self.assertEqual(lp["token"], tid)
            self.assertEqual(len(lp["top_logprobs"]), 3)
            self.assertEqual(lp["top_logprobs"][0]["token"], tid)   # greedy: the best is sampled
            self.assertLessEqual(lp["logprob"], 0.0)
        t = j["timings"]
        for k in ("ttft_ms", "prefill_tokens_per_s", "decode_tokens_per_s"):
            self.assertGreater(t[k], 0.0)
        # The text is the decode of the ids (bytes that are not UTF-8 become U+FFFD).
        rc, out, err = run("detokenize", "--tokenizer", MODEL, "--tokens", ",".join(map(str, j["token_ids"])))
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, j["text"] + "\n")

    def test_prompt_text_equals_prompt_tokens(self):
        rc, out, err = run("tokenize", "--tokenizer", MODEL, "--text", PROMPT)
        self.assertEqual(rc, 0, err)
        ids = [int(x) for x in out.replace(",", " ").replace("[", " ").replace("]", " ").split()]
        a = gen_json("--prompt", PROMPT, "-n", "10", "--temperature", "0", "--ignore-eos")
        b = gen_json("--tokens", ",".join(map(str, ids)), "-n", "10", "--temperature", "0", "--ignore-eos")
        self.assertEqual(a["prompt_tokens"], len(ids))
        self.assertEqual(a["token_ids"], b["token_ids"])
        self.assertEqual(a["text"], b["text"])

    def test_streamed_text_equals_json_text(self):
        args = ["--prompt", PROMPT, "-n", "20", "--temperature", "0.8", "--seed", "11", "--ignore-eos"]
        j = gen_json(*args)
        rc, out, err = run("generate", "--model", MODEL, *args)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, j["text"] + "\n")
        self.assertIn("prefill", err)
        self.assertIn("decode", err)
        self.assertIn("cache:", err)
        self.assertNotIn("\r", err)   # no progress bar when stderr is not a terminal

    def test_seeded_sampling_is_reproducible(self):
        a = gen_json("--prompt", PROMPT, "-n", "16", "--temperature", "1.0", "--seed", "5", "--ignore-eos")
        b = gen_json("--prompt", PROMPT, "-n", "16", "--temperature", "1.0", "--seed", "5", "--ignore-eos",
                     "--max-num-batched-tokens", "3")
        c = gen_json("--prompt", PROMPT, "-n", "16", "--temperature", "1.0", "--seed", "6", "--ignore-eos")
        self.assertEqual(a["token_ids"], b["token_ids"])
        self.assertNotEqual(a["token_ids"], c["token_ids"])

    def test_stop_string_cuts_the_text(self):
        full = gen_json("--prompt", PROMPT, "-n", "40", "--temperature", "0", "--ignore-eos")
        text = full["text"]
        self.assertGreater(len(text), 12)
        stop = None
        for start in range(len(text) // 3, len(text) - 3):
            cand = text[start:start + 3]
            if "\ufffd" not in cand and text.find(cand) == start and cand.strip():
                stop = cand
                break
        self.assertIsNotNone(stop)
        j = gen_json("--prompt", PROMPT, "-n", "40", "--temperature", "0", "--ignore-eos", "--stop", stop,
                     "--stop", "\u2603never")
        self.assertEqual(j["finish_reason"], "stop")
        self.assertEqual(j["text"], text[:text.find(stop)])
        self.assertEqual(j["token_ids"], full["token_ids"][:len(j["token_ids"])])

    def test_stop_token_id(self):
        full = gen_json("--prompt", PROMPT, "-n", "30", "--temperature", "0", "--ignore-eos")
        target = full["token_ids"][7]
        j = gen_json("--prompt", PROMPT, "-n", "30", "--temperature", "0", "--ignore-eos",
                     "--stop-token-ids", str(target))
        first = full["token_ids"].index(target)
        self.assertEqual(j["token_ids"], full["token_ids"][:first + 1])
        self.assertEqual(j["finish_reason"], "stop")

    def test_tokenizer_flag_and_tokens_only(self):
        j = gen_json("--prompt", PROMPT, "-n", "8", "--temperature", "0", "--ignore-eos")
        rc, out, err = run("generate", "--model", BARE, "--tokenizer", TOKDIR, "--json", "--prompt", PROMPT,
                           "-n", "8", "--temperature", "0", "--ignore-eos")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["token_ids"], j["token_ids"])
        # Without a tokenizer: token ids in, token ids out.
        rc, out, err = run("generate", "--model", BARE, "--json", "--tokens", "5,6,7", "-n", "4")
        self.assertEqual(rc, 0, err)
        self.assertIsNone(json.loads(out)["text"])
        rc, out, err = run("generate", "--model", BARE, "--prompt", "hi")
        self.assertEqual(rc, 1)
        self.assertIn("--tokenizer", err)

    def test_step_stats(self):
        rc, out, err = run("generate", "--model", MODEL, "--tokens", ",".join(["7"] * 20), "-n", "6",
                           "--ignore-eos", "--max-num-batched-tokens", "8", "--step-stats", "--attn-output", "copy")
        self.assertEqual(rc, 0, err)
        steps = [json.loads(l) for l in err.splitlines() if l.startswith("{")]
        self.assertEqual(len(steps), 3 + 5)   # 20 prompt tokens in chunks of 8, then 5 decodes
        self.assertEqual([s["n_prefill_tokens"] for s in steps[:3]], [8, 8, 4])
        self.assertTrue(all(s["n_decode_seqs"] == 1 and s["n_tokens"] == 1 for s in steps[3:]))
        layers = json.load(open(os.path.join(MODEL, "config.json")))["num_hidden_layers"]
        self.assertTrue(all(s["attn_output_copies"] == layers for s in steps))
        self.assertEqual(steps[-1]["forward_heap_allocations"], 0)

    def test_cache_memory_sizing_is_printed(self):
        rc, out, err = run("generate", "--model", MODEL, "--tokens", "1,2", "-n", "2", "--cache-memory", "0.01",
                           "--max-num-seqs", "3")
        self.assertEqual(rc, 0, err)
        self.assertIn("3 state slots", err)
        self.assertIn("prefix cache on: 24 KDA checkpoints", err)   # the default: 8 per sequence slot
        rc, out, err = run("generate", "--model", MODEL, "--tokens", "1,2", "-n", "2", "--no-enable-prefix-caching")
        self.assertEqual(rc, 0, err)
        self.assertIn("prefix cache off", err)
        rc, out, err = run("generate", "--model", MODEL, "--tokens", "1,2", "-n", "2", "--cache-memory", "0.00001")
        self.assertEqual(rc, 1)
        self.assertIn("too small", err)

    def test_bad_input_is_a_clear_error(self):
        cases = [
            ([], "--model"),
            (["--model", MODEL], "--prompt"),
            (["--model", MODEL, "--prompt", "a", "--tokens", "1"], "exactly one"),
            (["--model", MODEL, "--tokens", "1,999999"], "out of range"),
            (["--model", MODEL, "--tokens", "1,x"], "not an integer"),
            (["--model", MODEL, "--tokens", "1", "-n", "100000"], "max-model-len"),
            (["--model", MODEL, "--tokens", "1", "--max-model-len", "8", "-n", "8"], "max-model-len"),
            (["--model", MODEL, "--tokens", "1", "--top-p", "0"], "top_p"),
            (["--model", MODEL, "--tokens", "1", "--temperature", "-1"], "temperature"),
            (["--model", MODEL, "--tokens", "1", "--stop", ""], "stop"),
            (["--model", MODEL, "--tokens", "1", "--bogus"], "unknown argument"),
            (["--model", MODEL, "--tokens", "1", "--prefix-cache-memory", "1000000"], "prefix-cache-memory"),
            (["--model", MODEL, "--tokens", "1", "--prefix-cache-memory", "-1"], "prefix-cache-memory"),
            (["--model", MODEL, "--tokens", "1", "--prefix-checkpoint-interval", "-16"], "prefix-checkpoint-interval"),
            (["--model", MODEL, "--tokens", "1", "--enable-prefix-caching", "--no-enable-prefix-caching"], "at most one"),
            (["--model", os.path.join(WORK, "nope"), "--tokens", "1"], "nope"),
        ]
        for args, needle in cases:
            rc, out, err = run("generate", *args)
            self.assertEqual(rc, 1, (args, err))
            last = err.strip().splitlines()[-1]
            self.assertTrue(last.startswith("kimi-cpp generate: error: "), err)
            self.assertIn(needle, last, args)

    def test_draft_model(self):
        """--speculative-config draft_model: a second random model with the same tokenizer drafts; greedy
        output equals plain generate's, spec_decode is reported; a draft with another vocabulary or
        tokenizer, a missing one, and dspark are one-line errors."""
        draft = os.path.join(WORK, "draft")
        other = os.path.join(WORK, "draft-other-vocab")
        try:
            rc, _, err = run("make-model", "--preset", "tiny", "--seed", "4", "--out", draft, "--quiet")
            self.assertEqual(rc, 0, err)
            rc, _, err = run("make-model", "--preset", "tiny", "--seed", "4", "--out", other, "--quiet",
                             "--set", "vocab_size=1100")
            self.assertEqual(rc, 0, err)
            spec = lambda d: json.dumps({"method": "draft_model", "model": d, "num_speculative_tokens": 3})
            args = ("--prompt", PROMPT, "-n", "24", "--temperature", "0", "--ignore-eos", "--logprobs", "1")
            plain = gen_json(*args)
            # another seed writes another tokenizer: the draft's is refused until it is the target's
            rc, _, err = run("generate", "--model", MODEL, *args, "--speculative-config", spec(draft))
            self.assertEqual(rc, 1, err)
            self.assertIn("tokenizer differs", err.strip().splitlines()[-1])
            for f in ("tiktoken.model", "tokenizer_config.json"):
                shutil.copy(os.path.join(MODEL, f), draft)
            got = gen_json(*args, "--speculative-config", spec(draft))
            self.assertEqual(got["token_ids"], plain["token_ids"])
            self.assertEqual(got["logprobs"], plain["logprobs"])
            sd = got["spec_decode"]
            self.assertGreater(sd["num_drafts"], 0)
            self.assertLessEqual(sd["num_accepted_tokens"], sd["num_draft_tokens"])
            for d, needle in ((other, "vocab_size"), (os.path.join(WORK, "nope"), "nope")):
                rc, _, err = run("generate", "--model", MODEL, *args, "--speculative-config", spec(d))
                self.assertEqual(rc, 1, err)
                self.assertIn(needle, err.strip().splitlines()[-1])
            rc, _, err = run("generate", "--model", MODEL, *args, "--speculative-config",
                             '{"method": "dspark", "model": "x", "num_speculative_tokens": 7}')
            self.assertEqual(rc, 1, err)
            self.assertIn("runtime.md#dspark", err)
        finally:
            shutil.rmtree(draft, ignore_errors=True)
            shutil.rmtree(other, ignore_errors=True)

    def test_structured_output_flags(self):
        schema = os.path.join(WORK, "schema.json")
        with open(schema, "w") as f:
            json.dump({"type": "object", "properties": {"name": {"type": "string", "maxLength": 5},
                                                        "n": {"type": "integer", "minimum": 0, "maximum": 99}},
                       "required": ["name", "n"], "additionalProperties": False}, f)
        gbnf = os.path.join(WORK, "list.gbnf")
        with open(gbnf, "w") as f:
            f.write('root ::= "[" item ("," item){0,3} "]"\nitem ::= [a-z]{1,3} | [0-9]\n')
        for seed in range(3):
            j = gen_json("--prompt", PROMPT, "-n", "300", "--seed", str(seed), "--json-schema", schema)
            self.assertEqual(j["finish_reason"], "stop", j)
            v = json.loads(j["text"])
            self.assertEqual(sorted(v), ["n", "name"])
            self.assertTrue(isinstance(v["name"], str) and len(v["name"]) <= 5 and 0 <= v["n"] <= 99, v)
            self.assertGreater(j["grammar_compile_ms"], 0)
            j = gen_json("--prompt", PROMPT, "-n", "60", "--seed", str(seed), "--regex", r"\d{3}-[a-z]{2}")
            self.assertRegex(j["text"], r"^\d{3}-[a-z]{2}$")
            j = gen_json("--prompt", PROMPT, "-n", "60", "--seed", str(seed), "--choice", "red,green,a\\,b")
            self.assertIn(j["text"], ["red", "green", "a,b"])
            j = gen_json("--prompt", PROMPT, "-n", "60", "--seed", str(seed), "--grammar", gbnf)
            self.assertRegex(j["text"], r"^\[([a-z]{1,3}|[0-9])(,([a-z]{1,3}|[0-9])){0,3}\]$")
        bad = os.path.join(WORK, "bad.json")
        with open(bad, "w") as f:
            json.dump({"type": "object", "patternProperties": {}}, f)
        deep = os.path.join(WORK, "deep.json")   # the server's limits, with exit code 1
        with open(deep, "w") as f:
            f.write('{"const":' + "[" * 100000 + "]" * 100000 + "}")
        deep_gbnf = os.path.join(WORK, "deep.gbnf")
        with open(deep_gbnf, "w") as f:
            f.write("root ::= " + "(" * 20000 + '"a"' + ")" * 20000)
        for args, needle in [(["--json-schema", bad], "patternProperties"), (["--regex", "(a"], "regex"),
                             (["--json-schema", deep], "nested deeper than 64 levels"),
                             (["--grammar", deep_gbnf], "groups nested deeper than 100 levels"),
                             (["--grammar", schema], "--grammar"), (["--choice", "a", "--regex", "b"], "at most one"),
                             (["--json-schema", os.path.join(WORK, "missing.json")], "missing.json")]:
            rc, out, err = run("generate", "--model", MODEL, "--prompt", PROMPT, *args)
            self.assertEqual(rc, 1, (args, err))
            self.assertIn(needle, err.strip().splitlines()[-1], args)

    def test_ctrl_c_stops_generation(self):
        p = subprocess.Popen([KIMI, "generate", "--model", MODEL, "--prompt", PROMPT, "-n", "30000",
                              "--max-model-len", "32768", "--ignore-eos"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        first = os.read(p.stdout.fileno(), 64)   # it is streaming
        self.assertTrue(first)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 130, err)
        self.assertIn(b"finish abort", err)


def chat_pipe(lines, *extra):
    # Replies end at a newline (--stop), so each is one line of the output.
    return run("chat", "--model", MODEL, "-n", "12", "--temperature", "0", "--quiet", "--stop", "\n", *extra,
               input=("\n".join(lines) + "\n").encode())


class Chat(unittest.TestCase):
    def test_pipe_multi_turn_reset_exit(self):
        rc, out, err = chat_pipe(["Hello", "How are you?", "/reset", "Hello", "/exit", "ignored"])
        self.assertEqual(rc, 0, err)
        replies = out.split("\n")
        self.assertEqual(len(replies), 5, out)
        self.assertEqual(replies[2], "(conversation reset)")
        self.assertEqual(replies[4], "")
        # After /reset the conversation is the same as the first turn: the same greedy reply.
        self.assertEqual(replies[0], replies[3])

    def test_history_is_used(self):
        # The second turn sees the first: its reply differs from a fresh conversation's.
        rc, a, err = chat_pipe(["Hello", "Tell me more"])
        self.assertEqual(rc, 0, err)
        rc, b, err = chat_pipe(["Tell me more"])
        self.assertEqual(rc, 0, err)
        self.assertNotEqual(a.split("\n")[1], b.split("\n")[0])

    def test_prefix_cache_reuses_earlier_turns(self):
        # Each turn's prompt starts with the previous one: with the prefix cache (default) it
        # resumes at the previous prompt's last full block (16-token blocks), bit-identically —
        # the replies equal those of a run without the cache, where nothing is cached.
        lines = ["Hello there, how is the weather today in the city of Paris?", "Tell me more about it please",
                 "And then what happened next?"]
        system = ("--system", "You are a helpful assistant who answers briefly.")
        stats = re.compile(r"\[prefill (\d+) tok \((\d+) from the prefix cache\)")
        rc, on, err_on = chat_pipe(lines, "--stats", *system)
        self.assertEqual(rc, 0, err_on)
        rc, off, err_off = chat_pipe(lines, "--stats", "--no-enable-prefix-caching", *system)
        self.assertEqual(rc, 0, err_off)
        self.assertEqual(on, off)
        turns_on = [(int(a), int(b)) for a, b in stats.findall(err_on)]
        turns_off = [(int(a), int(b)) for a, b in stats.findall(err_off)]
        self.assertEqual(len(turns_on), 3, err_on)
        self.assertEqual([p for p, _ in turns_on], [p for p, _ in turns_off])
        self.assertEqual([c for _, c in turns_off], [0, 0, 0])
        self.assertEqual(turns_on[0][1], 0)
        for (prev, _), (_, cached) in zip(turns_on, turns_on[1:]):
            self.assertGreaterEqual(cached, prev // 16 * 16, err_on)

    def test_end_of_input_quits(self):
        rc, out, err = run("chat", "--model", MODEL, "-n", "4", "--quiet", input=b"")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "")

    def test_ctrl_c_in_pipe_mode_stops_the_reply_only(self):
        p = subprocess.Popen([KIMI, "chat", "--model", MODEL, "-n", "30000", "--max-model-len", "32768",
                              "--ignore-eos", "--quiet"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdin.write(b"Tell me a long story\n")
        p.stdin.flush()
        first = os.read(p.stdout.fileno(), 64)   # the reply is streaming
        self.assertTrue(first)
        p.send_signal(signal.SIGINT)
        p.stdin.write(b"/exit\n")
        p.stdin.flush()
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)
        self.assertIn(b"[stopped]", first + out)

    def test_tty_prompt_and_ctrl_c(self):
        pid, fd = pty.fork()
        if pid == 0:
            os.execv(KIMI, [KIMI, "chat", "--model", MODEL, "-n", "30000", "--max-model-len", "32768",
                            "--ignore-eos", "--temperature", "0"])
        buf = b""

        def read_until(needle, timeout=60):
            nonlocal buf
            end = time.time() + timeout
            while needle not in buf:
                left = end - time.time()
                if left <= 0:
                    raise AssertionError("timed out waiting for %r; got %r" % (needle, buf[-300:]))
                r, _, _ = select.select([fd], [], [], left)
                if r:
                    try:
                        chunk = os.read(fd, 4096)
                    except OSError:
                        raise AssertionError("pty closed waiting for %r; got %r" % (needle, buf[-300:]))
                    buf += chunk
            i = buf.index(needle) + len(needle)
            seen, buf = buf[:i], buf[i:]
            return seen

        try:
            read_until(b"> ")
            os.write(fd, b"Tell me a long story\r")
            read_until(b"story\r\n")           # the echo; then the reply streams
            end = time.time() + 30
            while not buf and time.time() < end:
                if select.select([fd], [], [], 1)[0]:
                    buf += os.read(fd, 64)
            self.assertTrue(buf, "the reply did not start")
            os.write(fd, b"\x03")              # the terminal's interrupt character
            read_until(b"[stopped]")
            read_until(b"> ")                  # still running, prompting again
            os.write(fd, b"\x03")              # Ctrl-C at the prompt does not quit either
            read_until(b"> ")
            os.write(fd, b"/exit\r")
            _, status = os.waitpid(pid, 0)
            self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        finally:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            os.close(fd)


class Quantize(unittest.TestCase):
    """kimi-cpp quantize: the written directory, inspect on it, generation from it, its errors."""

    def test_quantize_inspect_generate(self):
        out = os.path.join(WORK, "tiny-mxfp4")
        rc, _, err = run("quantize", "--model", MODEL, "--out", out, "--format", "mxfp4", "--targets", "experts+shared",
                         "--quiet")
        self.assertEqual(rc, 0, err)
        self.assertIn("linears to MXFP4 (experts+shared)", err)
        with open(os.path.join(out, "config.json")) as fh:
            q = json.load(fh)["quantization_config"]
        self.assertEqual(q["quant_method"], "compressed-tensors")
        self.assertEqual(q["config_groups"]["group_0"]["format"], "mxfp4-pack-quantized")
        self.assertEqual(q["config_groups"]["group_0"]["targets"], ["Linear"])
        self.assertIn("lm_head", q["ignore"])
        self.assertNotIn("model.layers.1.block_sparse_moe.shared_experts.up_proj", q["ignore"])
        for f in ("tiktoken.model", "tokenizer_config.json", "model.safetensors"):
            self.assertTrue(os.path.exists(os.path.join(out, f)), f)
        rc, text, err = run("inspect", "--model", out)
        self.assertEqual(rc, 0, err)
        self.assertIn("MXFP4", text)
        rc, text, err = run("generate", "--model", out, "--prompt", "Hello", "-n", "5", "--ignore-eos", "--json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(text)["completion_tokens"], 5)
        # errors: one line, exit 1 (already quantized, output not empty) or 2 (bad flag)
        rc, _, err = run("quantize", "--model", out, "--out", os.path.join(WORK, "again"), "--format", "mxfp4")
        self.assertEqual(rc, 1, err)
        self.assertIn("already quantized", err)
        rc, _, err = run("quantize", "--model", MODEL, "--out", out, "--format", "mxfp4")
        self.assertEqual(rc, 1, err)
        self.assertIn("not empty", err)
        rc, _, err = run("quantize", "--model", MODEL, "--out", os.path.join(WORK, "x"), "--format", "nvfp4")
        self.assertNotEqual(rc, 0)
        self.assertIn("--format", err)


class Loader(unittest.TestCase):
    """Model directories a careless or hostile user may hand over: a named pipe in place of a
    model file is refused at once (opening it used to block forever), NaN/Inf weights are refused
    naming the tensor (--skip-weight-check loads them), a corrupt tokenizer is named as such by
    inspect rather than reported missing."""

    def copy_of_model(self, name):
        d = os.path.join(WORK, name)
        shutil.copytree(MODEL, d)
        return d

    def test_named_pipes_are_refused(self):
        for f in ("config.json", "model.safetensors", "tiktoken.model"):
            d = self.copy_of_model("fifo-" + f)
            os.remove(os.path.join(d, f))
            os.mkfifo(os.path.join(d, f))
            rc, _, err = run("inspect", "--model", d, timeout=20)
            self.assertEqual(rc, 1 if f != "tiktoken.model" else 0, err)
            if f != "tiktoken.model":
                self.assertIn("not a regular file", err)
            shutil.rmtree(d)

    def test_non_finite_weights_are_refused(self):
        d = self.copy_of_model("nan")
        path = os.path.join(d, "model.safetensors")
        with open(path, "r+b") as fh:   # one BF16 NaN (0x7fc0) as the first norm weight of layer 1
            n = int.from_bytes(fh.read(8), "little")
            header = json.loads(fh.read(n))
            name = "model.layers.1.input_layernorm.weight"
            fh.seek(8 + n + header[name]["data_offsets"][0])
            fh.write(b"\xc0\x7f")
        for cmd in (["inspect"], ["score", "--tokens", "1,2", "--out", os.path.join(d, "x.bin")],
                    ["generate", "--prompt", "hi", "-n", "2"]):
            rc, _, err = run(*cmd, "--model", d)
            self.assertEqual(rc, 1, (cmd, err))
            self.assertIn("tensor '%s' holds a NaN or Inf value (element 0)" % name, err)
            self.assertIn("--skip-weight-check", err)
        rc, _, err = run("inspect", "--model", d, "--skip-weight-check")
        self.assertEqual(rc, 0, err)
        shutil.rmtree(d)

    def test_corrupt_tokenizer_is_named(self):
        d = self.copy_of_model("bad-tok")
        with open(os.path.join(d, "tiktoken.model"), "w") as fh:
            fh.write("not base64 at all\n")
        rc, text, err = run("inspect", "--model", d)
        self.assertEqual(rc, 0, err)
        line = next(l for l in text.splitlines() if l.startswith("chat format:"))
        self.assertIn("unreadable tokenizer", line)
        shutil.rmtree(d)


class K3Mxfp4(unittest.TestCase):
    """Kimi-K3 in the published MXFP4 form (make-model --mxfp4-experts): inspect's report, score
    equal to the quantize round trip of the same dense checkpoint, generate, bench model, and
    quantize refusing an already quantized directory."""

    SETS = ["--set", "text_config.routed_expert_hidden_size=64", "--set", "text_config.num_experts_per_token=3"]

    @classmethod
    def setUpClass(cls):
        cls.pub = os.path.join(WORK, "k3-mxfp4")
        cls.dense = os.path.join(WORK, "k3-dense")
        for out, extra in ((cls.pub, ["--mxfp4-experts"]), (cls.dense, [])):
            rc, _, err = run("make-model", "--preset", "k3-tiny", "--seed", "6", "--out", out, "--quiet", *cls.SETS, *extra)
            assert rc == 0, err

    def test_config_and_inspect(self):
        with open(os.path.join(self.pub, "config.json")) as fh:
            cfg = json.load(fh)
        self.assertNotIn("quantization_config", cfg)
        q = cfg["text_config"]["quantization_config"]
        self.assertEqual(q["config_groups"]["group_0"]["targets"], ["Linear"])
        self.assertEqual(q["ignore"][0], "re:.*self_attn.*")
        rc, text, err = run("inspect", "--model", self.pub)
        self.assertEqual(rc, 0, err)
        self.assertIn("stored MXFP4: 96 routed experts", text)   # 4 MoE layers x 8 experts x 3
        line = next(l for l in text.splitlines() if "targeted by the config, stored dense" in l)
        for want in ("4 routers", "8 latent projections", "11 AttnRes vectors"):
            self.assertIn(want, line)

    def test_score_equals_the_quantize_round_trip(self):
        q = os.path.join(WORK, "k3-dense-q")
        rc, _, err = run("quantize", "--model", self.dense, "--out", q, "--format", "mxfp4", "--quiet")
        self.assertEqual(rc, 0, err)
        with open(os.path.join(q, "config.json")) as a, open(os.path.join(self.pub, "config.json")) as b:
            self.assertEqual(json.load(a), json.load(b))
        logits = []
        for d in (self.pub, q):
            out = os.path.join(WORK, os.path.basename(d) + ".bin")
            rc, _, err = run("score", "--model", d, "--tokens", "5,17,300,9,1000,2", "--out", out)
            self.assertEqual(rc, 0, err)
            with open(out, "rb") as fh:
                logits.append(fh.read())
        self.assertEqual(logits[0], logits[1])
        rc, _, err = run("quantize", "--model", self.pub, "--out", os.path.join(WORK, "k3-again"), "--format", "mxfp4")
        self.assertEqual(rc, 1, err)
        self.assertIn("already quantized", err)

    def test_generate_and_bench_model(self):
        rc, text, err = run("generate", "--model", self.pub, "--prompt", "Hello", "-n", "6", "--ignore-eos", "--json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(text)["completion_tokens"], 6)
        out = os.path.join(WORK, "k3-bench.json")
        rc, _, err = run("bench", "model", "--model", self.pub, "--prompt-lens", "16", "--batches", "1,2", "--contexts", "0",
                         "--reps", "1", "--decode-steps", "2", "--quiet", "--json", out)
        self.assertEqual(rc, 0, err)
        with open(out) as fh:
            self.assertTrue(json.load(fh))


def safetensors_header(model_dir):
    """{name: (shape, dtype)} of every tensor in a model directory, read from the files' headers."""
    out = {}
    for f in sorted(os.listdir(model_dir)):
        if not f.endswith(".safetensors"):
            continue
        with open(os.path.join(model_dir, f), "rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            hdr = json.loads(fh.read(n))
        for name, v in hdr.items():
            if name != "__metadata__":
                out[name] = (v["shape"], v["dtype"])
    return out


class TensorManifest(unittest.TestCase):
    """inspect --tensors --json names exactly the tensors a checkpoint holds (names, shapes and
    dtypes from the safetensors headers), in Kimi Linear, K3, K3 with MXFP4 experts and sharded
    form, with each row's quantizable flag and tensor-parallel split axis."""

    def manifest(self, d):
        rc, out, err = run("inspect", "--model", d, "--tensors", "--json")
        self.assertEqual(rc, 0, err)
        rows = json.loads(out)
        for r in rows:
            self.assertEqual(set(r), {"name", "shape", "dtype", "quantizable", "split"})
        self.assertEqual(len({r["name"] for r in rows}), len(rows))
        self.assertEqual({r["name"]: (r["shape"], r["dtype"]) for r in rows}, safetensors_header(d))
        return {r["name"]: r for r in rows}

    def test_kimi_linear(self):
        m = self.manifest(MODEL)
        self.assertEqual(m["model.layers.0.self_attn.q_proj.weight"]["split"], 0)
        self.assertEqual(m["model.layers.0.self_attn.o_proj.weight"]["split"], 1)
        self.assertEqual(m["model.layers.0.self_attn.A_log"]["split"], 2)
        self.assertIsNone(m["model.layers.0.input_layernorm.weight"]["split"])
        self.assertIsNone(m["model.layers.1.block_sparse_moe.gate.weight"]["split"])
        self.assertFalse(m["model.layers.1.block_sparse_moe.gate.weight"]["quantizable"])
        self.assertTrue(m["model.layers.1.block_sparse_moe.experts.0.w2.weight"]["quantizable"])
        self.assertEqual(m["model.layers.1.block_sparse_moe.experts.0.w2.weight"]["split"], 1)
        self.assertFalse(m["model.embed_tokens.weight"]["quantizable"])
        rc, text, err = run("inspect", "--model", MODEL, "--tensors")
        self.assertEqual(rc, 0, err)
        self.assertIn("%d tensors" % len(m), text)

    def test_k3_mxfp4_and_shards(self):
        d = os.path.join(WORK, "k3-manifest")
        rc, _, err = run("make-model", "--preset", "k3-tiny", "--seed", "2", "--out", d, "--quiet", "--mxfp4-experts",
                         "--max-shard-size", "1", "--set", "text_config.vocab_size=8448")
        self.assertEqual(rc, 0, err)
        self.assertGreater(len([f for f in os.listdir(d) if f.endswith(".safetensors")]), 1)
        m = self.manifest(d)
        # w2's input (moe_intermediate_size 32) is MXFP4; w1/w3's (the 48-wide latent) stay BF16
        pre = "language_model.model.layers.1.block_sparse_moe.experts.0."
        self.assertFalse(pre + "w2.weight" in m)
        self.assertTrue(m[pre + "w2.weight_packed"]["quantizable"])
        self.assertEqual(m[pre + "w2.weight_scale"]["split"], 1)
        self.assertEqual(m[pre + "w1.weight"]["dtype"], "BF16")
        self.assertFalse(m[pre + "w1.weight"]["quantizable"])
        self.assertIsNone(m["vision_tower.patch_embed.proj.weight"]["split"])
        self.assertFalse(m["vision_tower.patch_embed.proj.weight"]["quantizable"])
        self.assertEqual(m["language_model.model.layers.0.self_attn.A_log"]["split"], 0)   # padded vector

    def test_missing_tensor_is_named(self):
        d = os.path.join(WORK, "manifest-missing")
        shutil.copytree(MODEL, d)
        rc, _, err = run("inspect", "--model", d, "--tensors", "--json")
        self.assertEqual(rc, 0, err)
        with open(os.path.join(d, "config.json")) as fh:
            cfg = json.load(fh)
        cfg["tie_word_embeddings"] = True   # the file still holds lm_head: listed as an extra tensor
        with open(os.path.join(d, "config.json"), "w") as fh:
            json.dump(cfg, fh)
        self.assertIn("lm_head.weight", self.manifest(d))
        cfg["tie_word_embeddings"] = False
        cfg["num_hidden_layers"] = 5   # a layer the files lack
        cfg["linear_attn_config"]["kda_layers"] = [1, 2, 3, 5]
        with open(os.path.join(d, "config.json"), "w") as fh:
            json.dump(cfg, fh)
        rc, _, err = run("inspect", "--model", d, "--tensors")
        self.assertEqual(rc, 1)
        self.assertIn("model.layers.4.", err)
        self.assertIn("missing", err)


class K3(unittest.TestCase):
    """A k3-tiny checkpoint (published K3 layout) through every local command."""

    @classmethod
    def setUpClass(cls):
        cls.dir = os.path.join(WORK, "k3")
        rc, _, err = run("make-model", "--preset", "k3-tiny", "--seed", "2", "--out", cls.dir)
        assert rc == 0, err

    def test_inspect_names_the_k3_blocks(self):
        rc, out, err = run("inspect", "--model", self.dir)
        self.assertEqual(rc, 0, err)
        for want in ("KimiK3ForConditionalGeneration", "lower bound -5", "full-rank g_proj", "q-LoRA rank 24",
                     "output gate sigmoid", "48-wide latent", "SiTU (beta 4, linear beta 25)",
                     "block size 2 -> 3 blocks", "vision:       MoonViT, 2 blocks of width 32",
                     "2x2 merge -> 128 -> GELU -> 64", "media pad id 1045", "KDA state"):
            self.assertIn(want, out)

    def test_score_generate_chat(self):
        out_file = os.path.join(self.dir, "logits.bin")
        rc, _, err = run("score", "--model", self.dir, "--tokens", "1,2,3,4,5", "--out", out_file)
        self.assertEqual(rc, 0, err)
        self.assertNotIn("skipped", err)   # the vision tower is part of the model now
        self.assertEqual(os.path.getsize(out_file), 5 * 1280 * 4)
        rc, out, err = run("generate", "--model", self.dir, "--prompt", "Hello", "-n", "6", "--ignore-eos", "--json")
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["completion_tokens"], 6)
        rc, out, err = run("chat", "--model", self.dir, "-n", "5", "--temperature", "0", "--quiet", "--stop", "\n",
                           input=b"Hello\nAgain\n")
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(out.split("\n")), 3, out)

    def test_bench_decode_ab_counts_one_copy_per_attention_layer(self):
        js = os.path.join(self.dir, "ab.json")
        rc, _, err = run("bench", "decode", "--model", self.dir, "--ab", "--concurrency", "2", "--prefix-len", "16",
                         "--suffix-len", "4", "--output-len", "4", "--runs", "1", "--warmup", "0", "--quiet",
                         "--json", js, timeout=300)
        self.assertEqual(rc, 0, err)
        with open(js) as f:
            j = json.load(f)
        self.assertEqual(j["config"]["attention_layers"], 5)
        self.assertEqual(j["variants"]["direct"]["attn_output_copies_per_step"], 0)
        self.assertEqual(j["variants"]["copy"]["attn_output_copies_per_step"], 5)
        self.assertEqual(j["variants"]["direct"]["allocations_per_step"], 0)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--kimi", required=True)
    a, rest = ap.parse_known_args()
    KIMI = os.path.abspath(a.kimi)
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)

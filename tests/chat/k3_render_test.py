#!/usr/bin/python3
"""Kimi-K3 conversation format: the native renderer (`kimi-cpp chat-template`) against the
Python reference port (k3_encoder_ref.py), on every conversation of k3_conversations.json.

  k3_render_test.py --kimi BIN              the comparison (needs BIN make-model / chat-template / tokenize)
  k3_render_test.py --selfcheck             the reference alone: hand-computed strings + invariants

For each corpus entry the test runs
  BIN chat-template --tokenizer DIR (--messages M.json [--tools T.json] | --request R.json)
                    [--add-generation-prompt] [--thinking on|off] [--thinking-effort E] --json
on a k3-tiny tokenizer and checks:
  * a well-formed entry: exit 0, "format" "kimi-k3", text byte-identical to the reference, and
    ids equal to the reference's ids. K3's tokenizer (tokenization_kimi.py
    apply_chat_template -> _encode_chat_segments; vLLM's kimi_k3 tokenizer likewise) encodes the
    encoder's segments one by one: the four markers as special tokens, every other segment
    (tag names, attribute pieces, content) as ordinary text. The reference ids are therefore
    the per-segment encodings (BIN tokenize --special all / none), concatenated. With
    --ids-mode text they are instead `BIN tokenize --special all` of the whole rendered text
    (entries marked "injection" excepted, where content spells a marker).
    Either way the number of special ids must equal the number of marker segments.
  * a malformed entry ("expect_error"): exit 1, one error line on stderr, nothing on stdout.
Standard library only (Debian /usr/bin/python3).
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import k3_encoder_ref as ref  # noqa: E402

CORPUS = os.path.join(HERE, "k3_conversations.json")


# ---------------------------------------------------------------------------------------------
# Corpus loading: once with Python semantics (for the reference), once keeping each number's
# spelling so the engine reads the same JSON text the corpus has (1e5 stays 1e5).


class RawNumber:
    def __init__(self, text):
        self.text = text


def load_corpus(path=CORPUS):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    plain = json.loads(text)
    raw = json.loads(text, parse_float=RawNumber, parse_int=RawNumber)
    return plain, raw


def dump_raw(v):
    if isinstance(v, RawNumber):
        return v.text
    if isinstance(v, dict):
        return "{" + ", ".join(json.dumps(k, ensure_ascii=False) + ": " + dump_raw(x) for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(dump_raw(x) for x in v) + "]"
    return json.dumps(v, ensure_ascii=False)


# ---------------------------------------------------------------------------------------------
# Self-check of the reference


def eff(e):
    return ('<|open|>message role="system" type="thinking-effort"<|sep|>`thinking_effort` guides on how '
            'much to think in your thinking channel (not including the response channel), supported '
            'values include `low`, `medium`, `high`, and `max`.\nNow the system is invoked with '
            '`thinking_effort=' + e + '`.<|close|>message<|sep|><|end_of_msg|>')


HAND = [
    ("image parts become the placeholder",
     lambda: ref.render([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}},
                                                      {"type": "image", "image": "x"}]}], thinking=False),
     '<|open|>message role="user"<|sep|>a<|kimi_image_placeholder|><|kimi_image_placeholder|><|close|>message<|sep|>'
     '<|end_of_msg|>'),
    ("user + generation prompt, defaults",
     lambda: ref.render([{"role": "user", "content": "hi"}], add_generation_prompt=True),
     eff("max") + '<|open|>message role="user"<|sep|>hi<|close|>message<|sep|><|end_of_msg|>'
     '<|open|>message role="assistant"<|sep|><|open|>think<|sep|>'),
    ("thinking off, escaped name, typed arguments, tool result by id",
     lambda: ref.render([
         {"role": "user", "name": 'a&"b', "content": "q"},
         {"role": "assistant", "content": "", "tool_calls": [
             {"id": "1", "function": {"name": "f", "arguments": {"x": 1, "y": "s", "z": [1, {"a": None}]}}}]},
         {"role": "tool", "tool_call_id": "1", "content": "r"}], thinking=False),
     '<|open|>message role="user" name="a&amp;&quot;b"<|sep|>q<|close|>message<|sep|><|end_of_msg|>'
     '<|open|>message role="assistant"<|sep|><|open|>response<|sep|><|close|>response<|sep|>'
     '<|open|>tools<|sep|><|open|>call tool="f" index="1"<|sep|>'
     '<|open|>argument key="x" type="number"<|sep|>1<|close|>argument<|sep|>'
     '<|open|>argument key="y" type="string"<|sep|>s<|close|>argument<|sep|>'
     '<|open|>argument key="z" type="array"<|sep|>[1, {"a": null}]<|close|>argument<|sep|>'
     '<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>'
     '<|open|>message role="tool" tool="f" index="1"<|sep|>r<|close|>message<|sep|><|end_of_msg|>'),
    ("request: tools sorted, tool_choice none, json_object, thinking off",
     lambda: ref.render_request({
         "messages": [{"role": "user", "content": "u"}],
         "tools": [{"b": 1, "a": {"d": [2, 1], "c": "é"}}],
         "tool_choice": "none", "response_format": {"type": "json_object"},
         "chat_template_kwargs": {"thinking": False}}),
     '<|open|>message role="system" type="tool-declare"<|sep|># Tools\nHere are the available tools, '
     'described in JSONSchema.\n\n```json\n[{"a":{"c":"é","d":[2,1]},"b":1}]\n```'
     '<|close|>message<|sep|><|end_of_msg|>'
     '<|open|>message role="user"<|sep|>u<|close|>message<|sep|><|end_of_msg|>'
     '<|open|>message role="system" type="tool-choice"<|sep|>The system is invoked with '
     '`tool_choice=none`.\nYou MUST NOT call any tools in the next message.<|close|>message<|sep|>'
     '<|end_of_msg|>'
     '<|open|>message role="system" type="response-format"<|sep|>The system is invoked with '
     '`response_format=json_object`.\nYour response must be raw JSON data without markdown code '
     'blocks (```json) or any additional formatting.<|close|>message<|sep|><|end_of_msg|>'
     '<|open|>message role="assistant"<|sep|><|open|>response<|sep|>'),
    ("request: reasoning_effort, parsed/unparsed string args, reordered results, json_schema",
     lambda: ref.render_request({
         "messages": [{"role": "user", "content": "u"},
                      {"role": "assistant", "content": "c", "reasoning_content": "r", "tool_calls": [
                          {"id": "a", "function": {"name": "g", "arguments": '{"k": "v"}'}},
                          {"id": "b", "function": {"name": "h", "arguments": "[1]"}}]},
                      {"role": "tool", "tool_call_id": "b", "content": "B"},
                      {"role": "tool", "tool_call_id": "a", "content": "A"}],
         "reasoning_effort": "low", "add_generation_prompt": False,
         "response_format": {"type": "json_schema", "json_schema": {
             "name": "n", "schema": {"type": "object", "properties": {}}}}}),
     eff("low") + '<|open|>message role="user"<|sep|>u<|close|>message<|sep|><|end_of_msg|>'
     '<|open|>message role="assistant"<|sep|><|open|>think<|sep|>r<|close|>think<|sep|>'
     '<|open|>response<|sep|>c<|close|>response<|sep|><|open|>tools<|sep|>'
     '<|open|>call tool="g" index="1"<|sep|><|open|>argument key="k" type="string"<|sep|>v'
     '<|close|>argument<|sep|><|close|>call<|sep|>'
     '<|open|>call tool="h" index="2"<|sep|><|open|>json type="object"<|sep|>[1]<|close|>json<|sep|>'
     '<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>'
     '<|open|>message role="tool" tool="g" index="1"<|sep|>A<|close|>message<|sep|><|end_of_msg|>'
     '<|open|>message role="tool" tool="h" index="2"<|sep|>B<|close|>message<|sep|><|end_of_msg|>'
     '<|open|>message role="system" type="response-format"<|sep|>The system is invoked with '
     '`response_format=json_schema`.\nYour response must be raw JSON data without markdown code '
     'blocks (```json) or any additional formatting.\nThe JSON data must match the following '
     'schema:\n```json\n{"properties":{},"type":"object"}\n```<|close|>message<|sep|><|end_of_msg|>'),
    ("dynamic tools, reasoning fallback, position/name resolution, parts",
     lambda: ref.render([
         {"role": "system", "content": "ignored", "tools": [{"z": 0, "A": 1}]},
         {"role": "assistant", "content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}],
          "reasoning_content": "", "reasoning": " r ", "tool_calls": [
              {"function": {"name": "p"}}, {"function": {"name": "q", "arguments": "  "}}]},
         {"role": "tool", "content": "1"}, {"role": "tool", "name": "w", "content": "2"}],
         thinking_effort="high"),
     eff("high") + '<|open|>message role="system" type="tool-declare"<|sep|>## New Tools Available\n'
     'The system dynamically extends the toolset via lazy-loading.\nYou have access to all existing '
     'and extended tools.\nHere are the specs for the extended tools.\n\n```json\n[{"A":1,"z":0}]\n```'
     '<|close|>message<|sep|><|end_of_msg|>'
     '<|open|>message role="assistant"<|sep|><|open|>think<|sep|> r <|close|>think<|sep|>'
     '<|open|>response<|sep|>xy<|close|>response<|sep|><|open|>tools<|sep|>'
     '<|open|>call tool="p" index="1"<|sep|><|close|>call<|sep|>'
     '<|open|>call tool="q" index="2"<|sep|><|close|>call<|sep|><|close|>tools<|sep|>'
     '<|close|>message<|sep|><|end_of_msg|>'
     '<|open|>message role="tool" tool="p" index="1"<|sep|>1<|close|>message<|sep|><|end_of_msg|>'
     '<|open|>message role="tool" tool="w" index="2"<|sep|>2<|close|>message<|sep|><|end_of_msg|>'),
]

HAND_SEGMENTS = (
    lambda: ref.segments([{"role": "user", "name": "n", "content": "c"}], thinking=False),
    [("<|open|>", True), ("message", False), (" role", False), ('="', False), ("user", False),
     ('"', False), (" name", False), ('="', False), ("n", False), ('"', False), ("<|sep|>", True),
     ("c", False), ("<|close|>", True), ("message", False), ("<|sep|>", True), ("<|end_of_msg|>", True)],
)

HAND_ERRORS = [
    ("effort medium", lambda: ref.render([], thinking_effort="medium")),
    ("args number", lambda: ref.render([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 1}}]}])),
    ("orphan tool", lambda: ref.render([{"role": "tool", "content": "x"}])),
    ("no role", lambda: ref.render([{"content": "x"}])),
]

CHILDREN = {None: {"message"}, "message": {"think", "response", "tools"}, "tools": {"call"},
            "call": {"argument", "json"}}


def structure_problems(entry, segs):
    """Invariants every rendering must satisfy; returns a list of problems."""
    probs = []
    for t, c in segs:
        if c and t not in ref.MARKERS:
            probs.append("control segment %r is not a marker" % t)
        if not t:
            probs.append("empty segment")
    stack = []
    msgs = []          # [attrs, [child tags], closed] per message
    i, n = 0, len(segs)

    def text_at(k):
        return segs[k][0] if k < n and not segs[k][1] else None
    while i < n:
        t, c = segs[i]
        if not c:
            i += 1
            continue
        if t == ref.OPEN:
            tag = text_at(i + 1)
            if tag is None or " " in tag:
                probs.append("open without a tag at segment %d" % i)
                break
            k = i + 2
            attrs = []
            while k < n and not segs[k][1]:
                key = segs[k][0]
                if not key.startswith(" ") or text_at(k + 1) != '="':
                    probs.append("bad attribute at segment %d" % k)
                    break
                if text_at(k + 2) == '"':
                    val, k = "", k + 3
                else:
                    val, k = text_at(k + 2), k + 4
                    if text_at(k - 1) != '"':
                        probs.append("unterminated attribute at segment %d" % k)
                attrs.append((key[1:], val))
            if k >= n or segs[k] != (ref.SEP, True):
                probs.append("open %s not ended by sep" % tag)
                break
            parent = stack[-1] if stack else None
            if tag not in CHILDREN.get(parent, set()):
                probs.append("%s inside %s" % (tag, parent))
            if tag == "message":
                msgs.append([dict(attrs), [], False])
            elif stack and stack[-1] == "message":
                msgs[-1][1].append(tag)
            stack.append(tag)
            i = k + 1
        elif t == ref.CLOSE:
            tag = text_at(i + 1)
            if not stack or tag != stack[-1] or i + 2 >= n or segs[i + 2] != (ref.SEP, True):
                probs.append("bad close %r at segment %d (open: %s)" % (tag, i, stack))
                break
            stack.pop()
            i += 3
            if tag == "message":
                msgs[-1][2] = True
                if i >= n or segs[i] != (ref.END_OF_MSG, True):
                    probs.append("message not followed by end_of_msg")
                i += 1
        else:
            probs.append("stray marker %r at segment %d" % (t, i))
            i += 1

    opts = entry.get("options", {})
    if "request" in entry:
        o = ref.request_options(entry["request"])
        gen, thinking, effort, tools = o["add_generation_prompt"], o["thinking"], o["thinking_effort"], o["tools"]
    else:
        gen = opts.get("add_generation_prompt", False)
        thinking = opts.get("thinking", True)
        effort = opts.get("thinking_effort", "max")
        tools = entry.get("tools")
    want_tail = ["message", "think" if thinking else "response"] if gen else []
    if stack != want_tail:
        probs.append("left open %s, want %s" % (stack, want_tail))
    types = [m[0].get("type") for m in msgs]
    if thinking != ("thinking-effort" in types):
        probs.append("thinking-effort message presence wrong")
    if thinking and ("`thinking_effort=%s`" % effort) not in "".join(t for t, _ in segs):
        probs.append("wrong effort")
    if bool(tools) != (types[:1] == ["tool-declare"]):
        probs.append("tool-declare placement wrong")
    last_tool_index = 0
    for attrs, children, closed in msgs:
        role = attrs.get("role")
        if role == "assistant" and closed:
            want = (["think"] if thinking else []) + ["response"]
            if children[:len(want)] != want or children[len(want):] not in ([], ["tools"]):
                probs.append("assistant children %s, want %s[+tools]" % (children, want))
            last_tool_index = 0
        if role == "tool":
            last_tool_index += 1
            if attrs.get("index") != str(last_tool_index):
                probs.append("tool index %s, want %d" % (attrs.get("index"), last_tool_index))
    spelled = any(m in t for t, c in segs if not c for m in ref.MARKERS)
    if spelled != bool(entry.get("injection")):
        probs.append("entry's `injection` flag (%s) disagrees with content spelling markers (%s)"
                     % (bool(entry.get("injection")), spelled))
    return probs


def selfcheck():
    fails = []
    for what, fn, want in HAND:
        got = fn()
        if got != want:
            fails.append("hand case %r:\n%s" % (what, text_diff(want, got, "hand", "reference")))
    got_seg = HAND_SEGMENTS[0]()
    if got_seg != HAND_SEGMENTS[1]:
        fails.append("segment cuts: %r" % got_seg)
    for what, fn in HAND_ERRORS:
        try:
            fn()
            fails.append("hand error case %r rendered" % what)
        except ref.RenderError:
            pass
    plain, _ = load_corpus()
    names = [e["name"] for e in plain]
    if len(set(names)) != len(names):
        fails.append("duplicate names in the corpus")
    n_ok = n_err = 0
    for e in plain:
        try:
            segs = ref.entry_segments(e)
        except ref.RenderError as x:
            if not e.get("expect_error"):
                fails.append("%s: reference refused it: %s" % (e["name"], x))
            n_err += 1
            continue
        if e.get("expect_error"):
            fails.append("%s: expected an error, the reference rendered it" % e["name"])
            continue
        n_ok += 1
        for p in structure_problems(e, segs):
            fails.append("%s: %s" % (e["name"], p))
    if len(plain) < 45 or n_err < 8:
        fails.append("corpus too small: %d entries, %d malformed" % (len(plain), n_err))
    for f in fails:
        print("FAIL " + f)
    print("k3_render selfcheck: %d hand cases, %d conversations rendered, %d refused, %d problems"
          % (len(HAND) + 1 + len(HAND_ERRORS), n_ok, n_err, len(fails)))
    return 0 if not fails else 1


# ---------------------------------------------------------------------------------------------
# Diffs


def text_diff(want, got, wname="reference", gname="engine"):
    a, b = want.encode("utf-8"), got.encode("utf-8")
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    lo = max(0, k - 80)

    def ctx(s):
        return repr(s[lo:k + 80].decode("utf-8", "replace"))
    where = a[:k].decode("utf-8", "replace")
    last_open = where.rfind(ref.OPEN)
    return ("  first difference at byte %d (%s %d bytes, %s %d bytes), inside %r\n"
            "  %-9s ...%s\n  %-9s ...%s"
            % (k, wname, len(a), gname, len(b),
               where[last_open:last_open + 60] if last_open >= 0 else "(start)",
               wname, ctx(a), gname, ctx(b)))


def ids_diff(want, got, seg_of_token, segs):
    k = 0
    while k < min(len(want), len(got)) and want[k] == got[k]:
        k += 1
    lo = max(0, k - 6)
    s = ("  first differing id at index %d (reference %d ids, engine %d ids)\n"
         "  reference ...%s\n  engine    ...%s" % (k, len(want), len(got), want[lo:k + 8], got[lo:k + 8]))
    if seg_of_token is not None and k < len(seg_of_token):
        j = seg_of_token[k]
        s += "\n  at reference segment %d %r (%s), after %r" % (
            j, segs[j][0], "marker" if segs[j][1] else "text", segs[j - 1][0] if j else "")
    return s


# ---------------------------------------------------------------------------------------------
# The comparison against the engine


class Runner:
    def __init__(self, kimi, work):
        self.kimi = kimi
        self.work = work

    def run(self, args, timeout=60):
        return subprocess.run([self.kimi] + args, capture_output=True, timeout=timeout)

    def tokenize_lines(self, tokdir, strings, special):
        """One id list per string (tokenize --input-jsonl)."""
        if not strings:
            return []
        path = os.path.join(self.work, "tok_%s.jsonl" % special)
        with open(path, "w", encoding="utf-8") as f:
            for s in strings:
                f.write(json.dumps(s, ensure_ascii=False) + "\n")
        p = self.run(["tokenize", "--tokenizer", tokdir, "--special", special, "--input-jsonl", path], 300)
        if p.returncode != 0:
            raise RuntimeError("tokenize failed: " + p.stderr.decode("utf-8", "replace"))
        lines = p.stdout.decode().split("\n")
        out = [json.loads(x) for x in lines if x.strip()]
        if len(out) != len(strings):
            raise RuntimeError("tokenize gave %d lines for %d strings" % (len(out), len(strings)))
        return out


# A refusal with one of these is about the test's files, not the conversation.
WRONG_REASONS = ("invalid JSON", "cannot open", "usage:", "unknown flag", "is required")


def run_comparison(kimi, ids_mode, only, verbose):
    plain, raw = load_corpus()
    work = tempfile.mkdtemp(prefix="k3_render_")
    try:
        return _compare(kimi, work, plain, raw, ids_mode, only, verbose)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _compare(kimi, work, plain, raw, ids_mode, only, verbose):
    r = Runner(kimi, work)
    tokdir = os.path.join(work, "k3-tiny")
    p = r.run(["make-model", "--preset", "k3-tiny", "--out", tokdir, "--seed", "0"], 120)
    if p.returncode != 0:
        print("FAIL make-model --preset k3-tiny: " + p.stderr.decode("utf-8", "replace").strip())
        return 1
    with open(os.path.join(tokdir, "tokenizer_config.json"), encoding="utf-8") as f:
        added = json.load(f).get("added_tokens_decoder", {})
    contents = {v.get("content") for v in added.values()}
    missing = [m for m in ref.MARKERS if m not in contents]
    if missing:
        print("FAIL k3-tiny tokenizer lacks added tokens %s" % missing)
        return 1
    n_base = min(int(k) for k in added)

    fails = []
    results = []   # (entry, segs or None, engine json or None)
    for e, er in zip(plain, raw):
        if only and not any(o in e["name"] for o in only):
            continue
        name = e["name"]
        try:
            segs = ref.entry_segments(e)
        except ref.RenderError as x:
            segs = None
            if not e.get("expect_error"):
                fails.append("%s: the reference refuses it (%s)" % (name, x))
                continue
        args = ["chat-template", "--tokenizer", tokdir, "--json", "--no-expand-images"]
        d = os.path.join(work, "case")
        os.makedirs(d, exist_ok=True)

        def put(fname, value):
            path = os.path.join(d, fname)
            with open(path, "w", encoding="utf-8") as f:
                f.write(dump_raw(value))
            return path
        if "request" in e:
            args += ["--request", put("request.json", er["request"])]
        else:
            args += ["--messages", put("messages.json", er["messages"])]
            if "tools" in e:
                args += ["--tools", put("tools.json", er["tools"])]
            o = e.get("options", {})
            if o.get("add_generation_prompt"):
                args.append("--add-generation-prompt")
            if "thinking" in o:
                args += ["--thinking", "on" if o["thinking"] else "off"]
            if "thinking_effort" in o:
                args += ["--thinking-effort", o["thinking_effort"]]
        try:
            p = r.run(args)
        except subprocess.TimeoutExpired:
            fails.append("%s: chat-template timed out" % name)
            continue
        out = p.stdout.decode("utf-8", "replace")
        err = p.stderr.decode("utf-8", "replace")
        if e.get("expect_error"):
            lines = [x for x in err.split("\n") if x.strip()]
            if p.returncode != 1 or len(lines) != 1 or out.strip():
                fails.append("%s: malformed, want exit 1 + one stderr line + empty stdout; got exit %d, "
                             "%d stderr lines %r, stdout %r" % (name, p.returncode, len(lines), err[:300], out[:200]))
            elif any(w in lines[0] for w in WRONG_REASONS):
                fails.append("%s: refused, but for the wrong reason: %s" % (name, lines[0]))
            else:
                results.append((e, None, None))
                if verbose:
                    print("ok   %s (refused: %s)" % (name, lines[0]))
            continue
        if p.returncode != 0:
            fails.append("%s: exit %d: %s" % (name, p.returncode, err.strip()[:500]))
            continue
        try:
            j = json.loads(out)
        except ValueError:
            fails.append("%s: output is not JSON: %r" % (name, out[:300]))
            continue
        if j.get("format") != "kimi-k3":
            fails.append("%s: format %r, want 'kimi-k3'" % (name, j.get("format")))
        results.append((e, segs, j))

    # Reference ids: every segment encoded on its own (markers as specials, the rest as text).
    rendered = [(e, s, j) for e, s, j in results if s is not None]
    uniq = sorted({t for _, s, _ in rendered for t, c in s if not c})
    seg_ids = dict(zip(uniq, r.tokenize_lines(tokdir, uniq, "none")))
    marker_ids = dict(zip(ref.MARKERS, r.tokenize_lines(tokdir, list(ref.MARKERS), "all")))
    for m, ids in marker_ids.items():
        if len(ids) != 1 or ids[0] < n_base:
            fails.append("marker %s does not encode to one special id: %s" % (m, ids))
    whole = r.tokenize_lines(tokdir, ["".join(t for t, _ in s) for _, s, _ in rendered], "all")

    text_ok = ids_ok = ids_total = 0
    differ_modes = []
    for (e, segs, j), whole_ids in zip(rendered, whole):
        name = e["name"]
        want = "".join(t for t, _ in segs)
        got = j.get("text")
        if got == want:
            text_ok += 1
        else:
            fails.append("%s: text differs from the reference\n%s" % (name, text_diff(want, got or "")))
        want_ids, owner = [], []
        for k, (t, c) in enumerate(segs):
            ids = marker_ids[t] if c else seg_ids[t]
            want_ids += ids
            owner += [k] * len(ids)
        if want_ids != whole_ids and not e.get("injection"):
            differ_modes.append(name)
        got_ids = j.get("ids")
        n_markers = sum(1 for _, c in segs if c)
        n_special = sum(1 for x in (got_ids or []) if x >= n_base)
        if n_special != n_markers:
            fails.append("%s: %d special ids in the engine's ids, %d marker segments" % (name, n_special, n_markers))
        if ids_mode == "text" and not e.get("injection"):
            want_cmp, owner = whole_ids, None
        else:
            want_cmp = want_ids
        ids_total += 1
        if got_ids == want_cmp:
            ids_ok += 1
        else:
            fails.append("%s: ids differ (%s mode)\n%s" % (name, ids_mode, ids_diff(want_cmp, got_ids or [], owner, segs)))
        if e.get("injection"):
            # The content spelling markers must be plain text in the ids, exactly as tokenize
            # --special none gives it.
            for t, c in segs:
                if not c and any(m in t for m in ref.MARKERS):
                    sub = seg_ids[t]
                    if not any(got_ids[k:k + len(sub)] == sub for k in range(len(got_ids or []) - len(sub) + 1)):
                        fails.append("%s: the ids of %r (tokenize --special none: %s) are not in the engine's ids"
                                     % (name, t, sub))
        if verbose and got == want and got_ids == want_cmp:
            print("ok   %s" % name)

    n_err_want = sum(1 for e in plain if e.get("expect_error") and (not only or any(o in e["name"] for o in only)))
    n_err_ok = sum(1 for e, s, j in results if s is None)
    for f in fails:
        print("FAIL " + f)
    if differ_modes:
        print("note: for %d conversation(s) the per-segment ids differ from tokenizing the whole text: %s"
              % (len(differ_modes), ", ".join(differ_modes)))
    n_want = sum(1 for e in plain if not e.get("expect_error") and (not only or any(o in e["name"] for o in only)))
    print("k3_render: %d/%d conversations matched byte for byte, ids matched %d/%d, malformed refused %d/%d"
          % (text_ok, n_want, ids_ok, ids_total, n_err_ok, n_err_want))
    return 1 if fails else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kimi", help="path to the kimi-cpp binary")
    ap.add_argument("--selfcheck", action="store_true", help="check the reference alone")
    ap.add_argument("--ids-mode", choices=["segments", "text"], default="segments",
                    help="reference ids: per-segment encoding (K3's tokenizer; default) or the whole text")
    ap.add_argument("-k", action="append", default=[], help="only entries whose name contains this")
    ap.add_argument("-v", action="store_true", help="print every passing entry")
    ap.add_argument("--print", metavar="NAME", help="print the reference rendering of one entry and exit")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if a.print:
        plain, _ = load_corpus()
        for e in plain:
            if e["name"] == a.print:
                try:
                    sys.stdout.write("".join(t for t, _ in ref.entry_segments(e)) + "\n")
                except ref.RenderError as x:
                    print("error: %s" % x)
                return 0
        print("no entry %r" % a.print)
        return 1
    if a.selfcheck:
        return selfcheck()
    if not a.kimi:
        ap.error("--kimi BIN is required (or --selfcheck)")
    rc = selfcheck()
    if rc:
        return rc
    return run_comparison(a.kimi, a.ids_mode, a.k, a.v)


if __name__ == "__main__":
    sys.exit(main())

"""HTTP tests, part 18: what agent programs send to /v1/messages (issue 57; docs/agents.md), on a
Kimi Linear and a Kimi-K3 server, with plain http.client:

- Claude Code's billing line (`x-anthropic-billing-header: …`, a new suffix each prompt) is
  dropped: two prompts that differ only in it count the same tokens as one without it, and the
  second is served from the prefix cache;
- `system` messages inside `messages` are rendered in place; `cache_control` is ignored;
- `tool_reference` blocks count as their tool's name; a `defer_loading` tool joins the prompt
  only once a tool_reference names it; Anthropic's server tools are left out (one log line);
- `thinking` adaptive, `output_config.effort`, `context_management`, `metadata` are accepted;
- a reply's tool_use ids are unique (`toolu_…`) and the prompt renders a call the same whatever
  id the client gives it back with;
- /v1/responses: hosted tools (web_search, file_search) left out of the prompt; include
  reasoning.encrypted_content, and a reasoning item sent back with it alone restores the text;
  custom (freeform) tools come back as custom_tool_call items with their raw input, and go back
  in as the function call the model made; call ids are unique;
- `--served-model-name A B` (vLLM's form): both names accepted, /v1/models lists both, replies
  carry the first; a --max-model-len past the model's declared length runs with a warning.
Run through http_test.py.
"""
import json
import time
import unittest

import http_common as hc
from http_common import Server, post

SERVERS = {}


def setUpModule():
    SERVERS["kimi-linear"] = Server("--max-model-len", "4096", model=hc.make_model(seed=41))
    SERVERS["k3"] = Server("--max-model-len", "4096", model=hc.make_model(seed=42, preset="k3-tiny"))


TOOL = {"name": "calculator", "description": "Evaluates arithmetic",
        "input_schema": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}
# a call a random model finishes at once under the forced grammar: one digit
DIGIT = {"name": "digit", "description": "Takes a digit",
         "input_schema": {"type": "object", "properties": {"d": {"type": "integer", "minimum": 0, "maximum": 9}},
                          "required": ["d"], "additionalProperties": False}}


def body(messages, **kw):
    b = {"model": hc.SERVED, "max_tokens": 2, "temperature": 0, "messages": messages}
    b.update(kw)
    return b


def count(srv, b):
    r = post(srv.port, "/v1/messages/count_tokens", {k: v for k, v in b.items() if k not in ("max_tokens", "temperature")})
    assert r.status == 200, r
    return r.json()["input_tokens"]


def billing(suffix):
    return {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.328.%s; cc_entrypoint=sdk-cli;" % suffix}


class T18Agents(unittest.TestCase):
    def test_a_the_billing_line_is_dropped_and_the_prefix_cached(self):
        for name, srv in SERVERS.items():
            with self.subTest(server=name):
                system = [{"type": "text", "text": "You are an agent. " * 40, "cache_control": {"type": "ephemeral"}}]
                msgs = [{"role": "user", "content": "List the files."}]
                plain = count(srv, body(msgs, system=system))
                first = body(msgs, system=[billing("a1f")] + system)
                self.assertEqual(count(srv, first), plain, "%s: the billing block adds no token" % name)
                self.assertEqual(post(srv.port, "/v1/messages", first).status, 200)
                second = post(srv.port, "/v1/messages", body(msgs, system=[billing("9c0")] + system))
                self.assertEqual(second.status, 200, second)
                usage = second.json()["usage"]
                self.assertGreaterEqual(usage["cache_read_input_tokens"], (plain - 16) // 16 * 16,
                                        "%s: the second prompt is served from the cache: %r" % (name, usage))

    def test_b_system_messages_render_in_place(self):
        for name, srv in SERVERS.items():
            with self.subTest(server=name):
                two = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                       {"role": "user", "content": "go on"}]
                with_system = two[:2] + [{"role": "system", "content": [{"type": "text", "text": "Be brief.",
                                                                          "cache_control": {"type": "ephemeral"}}]}] + two[2:]
                self.assertGreater(count(srv, body(with_system)), count(srv, body(two)), name)
                r = post(srv.port, "/v1/messages", body(with_system))
                self.assertEqual(r.status, 200, "%s: %r" % (name, r))

    def test_c_tools_agents_send(self):
        for name, srv in SERVERS.items():
            with self.subTest(server=name):
                deferred = dict(TOOL, name="weather", defer_loading=True)
                server_tool = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
                msgs = [{"role": "user", "content": "hi"}]
                base = count(srv, body(msgs, tools=[TOOL]))
                self.assertEqual(count(srv, body(msgs, tools=[TOOL, deferred])), base, "%s: a deferred tool waits" % name)
                self.assertEqual(count(srv, body(msgs, tools=[TOOL, server_tool])), base, "%s: a server tool is left out" % name)
                # a tool_reference names the deferred tool: it joins the prompt
                found = [{"role": "user", "content": "find weather"},
                         {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_s1", "name": "calculator",
                                                            "input": {"expression": "1"}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_s1",
                                                       "content": [{"type": "tool_reference", "tool_name": "weather"}]}]}]
                self.assertGreater(count(srv, body(found, tools=[TOOL, deferred])), count(srv, body(found, tools=[TOOL])),
                                   "%s: referenced, the deferred tool is in the prompt" % name)
                r = post(srv.port, "/v1/messages", body(found, tools=[TOOL, deferred, server_tool]))
                self.assertEqual(r.status, 200, "%s: %r" % (name, r))
                deadline = time.monotonic() + 5
                while time.monotonic() < deadline and not any("web_search" in ln and "note:" in ln for ln in srv.err):
                    time.sleep(0.05)
                notes = [ln for ln in srv.err if "note:" in ln and "web_search" in ln]
                self.assertEqual(len(notes), 1, "%s: one line for the server tool, the first time: %r" % (name, notes))

    def test_d_fields_claude_code_sends_are_accepted(self):
        for name, srv in SERVERS.items():
            with self.subTest(server=name):
                b = body([{"role": "user", "content": "hi"}], thinking={"type": "adaptive"},
                         output_config={"effort": "medium"}, context_management={"edits": []},
                         metadata={"user_id": "u1"})
                r = post(srv.port, "/v1/messages?beta=true", b, headers={"anthropic-beta": "claude-code-20250219,oauth-2025-04-20"})
                self.assertEqual(r.status, 200, "%s: %r" % (name, r))
                r = post(srv.port, "/v1/messages", dict(b, output_config={"effort": "extreme"}))
                self.assertEqual(r.status, 400, "%s: %r" % (name, r))

    def test_e_tool_use_ids_are_unique_and_the_prompt_keeps_the_models_own(self):
        for name, srv in SERVERS.items():
            with self.subTest(server=name):
                ask = body([{"role": "user", "content": "Pick a digit."}], tools=[DIGIT],
                           tool_choice={"type": "tool", "name": "digit"}, max_tokens=200,
                           **({"thinking": {"type": "disabled"}} if name == "k3" else {}))
                ids = []
                for _ in range(2):
                    r = post(srv.port, "/v1/messages", ask)
                    self.assertEqual(r.status, 200, r)
                    uses = [b for b in r.json()["content"] if b["type"] == "tool_use"]
                    self.assertTrue(uses, "%s: a forced call: %r" % (name, r.json()))
                    ids += [u["id"] for u in uses]
                self.assertTrue(all(i.startswith("toolu_") for i in ids), ids)
                self.assertEqual(len(set(ids)), len(ids), "%s: unique ids %r" % (name, ids))

                def turn(call_id):
                    return [{"role": "user", "content": "What is 12 * 7?"},
                            {"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": "calculator",
                                                               "input": {"expression": "12 * 7"}}]},
                            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "84"}]}]
                self.assertEqual(count(srv, body(turn("toolu_01"), tools=[TOOL])),
                                 count(srv, body(turn("toolu_0123456789abcdef0123456789"), tools=[TOOL])),
                                 "%s: the prompt shows the model's own call id, not the client's" % name)

    def test_f_several_served_names_and_a_longer_context_with_a_warning(self):
        model = SERVERS["kimi-linear"].args[SERVERS["kimi-linear"].args.index("--model") + 1]
        srv = Server("--served-model-name", "kimi-a", "claude-b", "--max-model-len", "8192", model=model, served=None)
        try:
            srv.wait_line(srv.err, r"warning: --max-model-len 8192 is past the 4096 tokens", 10)   # stderr is read apart
            ids = [c["id"] for c in hc.get(srv.port, "/v1/models").json()["data"]]
            self.assertEqual(ids, ["kimi-a", "claude-b"])
            r = post(srv.port, "/v1/messages", dict(body([{"role": "user", "content": "hi"}]), model="claude-b"))
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["model"], "kimi-a", "replies carry the first name")
            r = post(srv.port, "/v1/chat/completions", {"model": "claude-b", "max_tokens": 1,
                                                        "messages": [{"role": "user", "content": "hi"}]})
            self.assertEqual(r.status, 200, r)
            self.assertEqual(post(srv.port, "/v1/messages", dict(body([{"role": "user", "content": "hi"}]),
                                                                 model="gpt-x")).status, 404)
        finally:
            srv.kill()

    def test_g_responses_hosted_tools_and_encrypted_reasoning(self):
        srv = SERVERS["k3"]
        fn = {"type": "function", "name": "calculator", "parameters": TOOL["input_schema"]}
        base = {"model": hc.SERVED, "max_output_tokens": 12, "temperature": 0, "ignore_eos": True,
                "input": "Say hello.", "reasoning": {"effort": "low"}, "store": False}
        plain = post(srv.port, "/v1/responses", dict(base, tools=[fn]))
        hosted = post(srv.port, "/v1/responses", dict(base, tools=[fn, {"type": "web_search"}, {"type": "file_search"}]))
        self.assertEqual((plain.status, hosted.status), (200, 200), hosted)
        self.assertEqual(hosted.json()["usage"]["input_tokens"], plain.json()["usage"]["input_tokens"],
                         "hosted tools are left out of the prompt")
        r = post(srv.port, "/v1/responses", dict(base, include=["reasoning.encrypted_content"], max_output_tokens=40))
        self.assertEqual(r.status, 200, r)
        items = r.json()["output"]
        reasoning = [i for i in items if i["type"] == "reasoning"]
        self.assertTrue(reasoning, items)
        text = reasoning[0]["content"][0]["text"]
        self.assertTrue(reasoning[0]["encrypted_content"].startswith("kimi-reasoning-v1:"), reasoning[0])
        # sent back as Codex does with store false (content dropped, encrypted_content kept), the
        # reasoning is restored exactly: the prompt equals the one with the text sent explicitly
        later = [{"type": "reasoning", "summary": [], "encrypted_content": reasoning[0]["encrypted_content"]},
                 {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello."}]},
                 {"role": "user", "content": "Again."}]
        explicit = [dict(later[0], content=[{"type": "reasoning_text", "text": text}])] + later[1:]
        a = post(srv.port, "/v1/responses", dict(base, input=[{"role": "user", "content": "Say hello."}] + later))
        b = post(srv.port, "/v1/responses", dict(base, input=[{"role": "user", "content": "Say hello."}] + explicit))
        self.assertEqual((a.status, b.status), (200, 200), (a, b))
        self.assertEqual(a.json()["usage"]["input_tokens"], b.json()["usage"]["input_tokens"])
        self.assertTrue(any("web_search" in ln and "note:" in ln for ln in srv.err))

    def test_h_responses_custom_tools_and_call_ids(self):
        for name, srv in SERVERS.items():
            with self.subTest(server=name):
                patch = {"type": "custom", "name": "apply_patch", "description": "Applies a patch",
                         "format": {"type": "grammar", "syntax": "regex", "definition": "[a-z]{1,8}"}}
                base = {"model": hc.SERVED, "temperature": 0, "store": False, "max_output_tokens": 300,
                        "input": "Fix the bug.", "tools": [patch], "tool_choice": {"type": "function", "name": "apply_patch"},
                        "parallel_tool_calls": False,
                        **({"reasoning": {"effort": "none"}} if name == "k3" else {})}
                ids = []
                for _ in range(2):
                    r = post(srv.port, "/v1/responses", base)
                    self.assertEqual(r.status, 200, r)
                    calls = [i for i in r.json()["output"] if i["type"] == "custom_tool_call"]
                    self.assertEqual(len(calls), 1, r.json()["output"])
                    self.assertEqual(calls[0]["name"], "apply_patch")
                    self.assertRegex(calls[0]["input"], r"^[a-z]{1,8}$", "the input follows the regex format")
                    ids.append(calls[0]["call_id"])
                self.assertTrue(all(i.startswith("call_") for i in ids) and ids[0] != ids[1], ids)
                # back in the input as a custom_tool_call and its output: the prompt is that of the
                # function call the model made (its one argument, `input`)
                custom = [{"role": "user", "content": "Fix the bug."},
                          {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** Begin Patch"},
                          {"type": "custom_tool_call_output", "call_id": "c1", "output": "Done."}]
                as_fn = custom[:1] + [{"type": "function_call", "call_id": "c1", "name": "apply_patch",
                                       "arguments": json.dumps({"input": "*** Begin Patch"}, separators=(",", ":"))},
                                      {"type": "function_call_output", "call_id": "c1", "output": "Done."}]
                body2 = dict(base, max_output_tokens=2)
                body2.pop("tool_choice")
                a = post(srv.port, "/v1/responses", dict(body2, input=custom))
                b = post(srv.port, "/v1/responses", dict(body2, input=as_fn))
                self.assertEqual((a.status, b.status), (200, 200), (a, b))
                self.assertEqual(a.json()["usage"]["input_tokens"], b.json()["usage"]["input_tokens"])


if __name__ == "__main__":
    unittest.main()

"""Reference renderer for Kimi-K3's conversation format ("XTML"), standard library only.

An independent Python port of the encoder that ships with the K3 checkpoint (encoding_k3.py,
also carried by vLLM) and of its Jinja port in llama.cpp (models/templates/Kimi-K3.jinja),
written for tests/chat/k3_render_test.py. Where the sources differ, it follows the decisions
of the issue that added the native C++ renderer:

* thinking_effort is one of low|high|max (default max, as K3's tokenization_kimi.py
  apply_chat_template sets it); anything else is an error while thinking is on, and is ignored
  while thinking is off.
* tool-call arguments: an object gives typed `argument` elements in its key order; a non-blank
  string gives a `json` element holding the string as is (the Jinja port); blank / null /
  missing give nothing; any other JSON type is an error. Request mode (render_request) first
  parses a string that holds a JSON object, as vLLM does before templating.
* an image part becomes the image placeholder text <|kimi_image_placeholder|> (the K3
  processor later expands it into the image's tokens; kimi-cpp chat-template
  --no-expand-images shows this form).

The output is also available as segments, (text, is_control) pairs, cut exactly where
encoding_k3.build_chat_segments cuts them. K3's tokenizer (tokenization_kimi.py
_encode_chat_segments, and vLLM's kimi_k3 tokenizer) encodes segment by segment: control
segments with special tokens allowed, every other segment as ordinary text, so token ids are
the concatenation of the per-segment encodings.
"""

import json

OPEN = "<|open|>"
CLOSE = "<|close|>"
SEP = "<|sep|>"
END_OF_MSG = "<|end_of_msg|>"
MARKERS = (OPEN, CLOSE, SEP, END_OF_MSG)
IMAGE_PLACEHOLDER = "<|kimi_image_placeholder|>"

THINKING_EFFORTS = ("low", "high", "max")

TOOLS_HEADER = "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n"
DYNAMIC_TOOLS_HEADER = ("## New Tools Available\n"
                        "The system dynamically extends the toolset via lazy-loading.\n"
                        "You have access to all existing and extended tools.\n"
                        "Here are the specs for the extended tools.\n\n```json\n")
EFFORT_BODY = ("`thinking_effort` guides on how much to think in your thinking channel "
               "(not including the response channel), supported values include `low`, "
               "`medium`, `high`, and `max`.\nNow the system is invoked with "
               "`thinking_effort={}`.")
TOOL_CHOICE_REQUIRED = ("The system is invoked with `tool_choice=required`.\n"
                        "You MUST call tools in the next message.")
TOOL_CHOICE_NONE = ("The system is invoked with `tool_choice=none`.\n"
                    "You MUST NOT call any tools in the next message.")
RAW_JSON_RULE = ("Your response must be raw JSON data without markdown code blocks (```json) "
                 "or any additional formatting.")
JSON_OBJECT_BODY = "The system is invoked with `response_format=json_object`.\n" + RAW_JSON_RULE
JSON_SCHEMA_BODY = ("The system is invoked with `response_format=json_schema`.\n" + RAW_JSON_RULE +
                    "\nThe JSON data must match the following schema:\n```json\n{}\n```")


class RenderError(ValueError):
    """The conversation cannot be rendered (the engine must refuse it too)."""


# ---------------------------------------------------------------------------------------------
# JSON helpers


def deep_sorted(value):
    """Objects with their keys sorted (code-point order, as Python's sorted) at every level."""
    if isinstance(value, dict):
        return {k: deep_sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [deep_sorted(v) for v in value]
    return value


def sorted_json(value):
    """Deep-sorted, compact separators, non-ASCII written as is."""
    return json.dumps(deep_sorted(value), ensure_ascii=False, separators=(",", ":"))


def value_type(value):
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    raise RenderError("argument value of unsupported type %s" % type(value).__name__)


def value_text(value):
    """A string as is; anything else as Python's json.dumps with its default separators
    (", " and ": "), keys in their given order, non-ASCII as is."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def escape_attr(value):
    return value.replace("&", "&amp;").replace('"', "&quot;")


# ---------------------------------------------------------------------------------------------
# The segment builder


class _Out:
    def __init__(self):
        self.segs = []

    def ctrl(self, marker):
        self.segs.append((marker, True))

    def text(self, s):
        if not isinstance(s, str):
            raise RenderError("expected text, got %s" % type(s).__name__)
        if s:
            self.segs.append((s, False))

    def open(self, tag, attrs=()):
        self.ctrl(OPEN)
        self.text(tag)
        for key, val in attrs:
            if isinstance(val, bool) or not isinstance(val, (str, int)):
                raise RenderError("attribute %s must be a string" % key)
            # encoding_k3 writes each attribute as four text segments.
            self.text(" " + key)
            self.text('="')
            self.text(escape_attr(str(val)))
            self.text('"')
        self.ctrl(SEP)

    def close(self, tag):
        self.ctrl(CLOSE)
        self.text(tag)
        self.ctrl(SEP)

    def end_of_msg(self):
        self.ctrl(END_OF_MSG)

    def internal_system(self, kind, body):
        self.open("message", [("role", "system"), ("type", kind)])
        self.text(body.strip())
        self.close("message")
        self.end_of_msg()

    def tool_declare(self, tools, dynamic):
        self.open("message", [("role", "system"), ("type", "tool-declare")])
        self.text((DYNAMIC_TOOLS_HEADER if dynamic else TOOLS_HEADER) + sorted_json(tools) + "\n```")
        self.close("message")
        self.end_of_msg()

    def content(self, content, where):
        """A string, or a list of parts whose text parts each become one segment."""
        if content is None:
            return
        if isinstance(content, str):
            self.text(content)
            return
        if not isinstance(content, list):
            raise RenderError("%s: content must be a string or a list of parts" % where)
        for part in content:
            if not isinstance(part, dict):
                raise RenderError("%s: content part must be an object" % where)
            kind = part.get("type")
            if kind in ("image", "image_url"):
                self.text(IMAGE_PLACEHOLDER)
                continue
            if kind is None:
                raise RenderError("%s: content part without a type" % where)
            text = part.get("text")
            if not isinstance(text, str):
                raise RenderError("%s: content part of type %r has no text" % (where, kind))
            self.text(text)


def _function_of(call):
    fn = call.get("function")
    return fn if isinstance(fn, dict) else call


def _call_name(call, where):
    name = _function_of(call).get("name")
    if not isinstance(name, str):
        raise RenderError("%s: tool call without a function name" % where)
    return name


def _arguments(fn, request_mode, where):
    """('object', dict) | ('json', str) | ('none', None)."""
    args = fn.get("arguments")
    if args is None:
        return "none", None
    if isinstance(args, dict):
        return "object", args
    if isinstance(args, str):
        if not args.strip():
            return "none", None
        if request_mode:
            try:
                parsed = json.loads(args)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                return "object", parsed
        return "json", args
    raise RenderError("%s: tool call arguments must be an object or a JSON string, not %s"
                      % (where, type(args).__name__))


def _assistant(out, msg, thinking, request_mode, where):
    if thinking:
        reasoning = msg.get("reasoning_content") or msg.get("reasoning")
        out.open("think")
        if reasoning is not None:
            if not isinstance(reasoning, str):
                raise RenderError("%s: reasoning must be a string" % where)
            if reasoning.strip():
                out.text(reasoning)
        out.close("think")
    out.open("response")
    out.content(msg.get("content"), where)
    out.close("response")
    calls = msg.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        raise RenderError("%s: tool_calls must be a list" % where)
    if calls:
        out.open("tools")
        for i, call in enumerate(calls, start=1):
            cw = "%s tool_calls[%d]" % (where, i - 1)
            if not isinstance(call, dict):
                raise RenderError("%s: a tool call must be an object" % cw)
            name = _call_name(call, cw)
            out.open("call", [("tool", name), ("index", i)])
            kind, args = _arguments(_function_of(call), request_mode, cw)
            if kind == "json":
                out.open("json", [("type", "object")])
                out.text(args)
                out.close("json")
            elif kind == "object":
                for key, val in args.items():
                    out.open("argument", [("key", key), ("type", value_type(val))])
                    out.text(value_text(val))
                    out.close("argument")
            out.close("call")
        out.close("tools")


def _id_of(msg):
    # encoding_k3: message.get("tool_call_id", message.get("id"))
    return msg["tool_call_id"] if "tool_call_id" in msg else msg.get("id")


def _order_tool_run(run, calls):
    """A run of consecutive tool messages: if every one names (by tool_call_id / id) a call of
    the last assistant, they come back in that assistant's call order with the call's name;
    otherwise None (each keeps its place and finds its own name)."""
    if not isinstance(calls, list) or not calls:
        return None
    index = {}
    for pos, call in enumerate(calls, start=1):
        if not isinstance(call, dict) or call.get("id") is None:
            continue
        index.setdefault(str(call["id"]), (pos, _function_of(call).get("name")))
    keyed = []
    for offset, msg in enumerate(run):
        cid = _id_of(msg)
        hit = index.get(str(cid)) if cid is not None else None
        if hit is None:
            return None
        keyed.append((hit[0], offset, msg, hit[1]))
    keyed.sort(key=lambda k: (k[0], k[1]))
    return [(msg, name) for _, _, msg, name in keyed]


def build_segments(messages, tools=None, *, add_generation_prompt=False, thinking=True,
                   thinking_effort="max", tool_choice=None, response_format=None,
                   request_mode=False):
    if not isinstance(messages, list):
        raise RenderError("messages must be a list")
    if thinking and thinking_effort not in THINKING_EFFORTS:
        raise RenderError("unsupported thinking_effort %r (supported: low, high, max)"
                          % (thinking_effort,))
    out = _Out()
    if tools:
        if not isinstance(tools, list):
            raise RenderError("tools must be a list")
        out.tool_declare(tools, dynamic=False)
    if thinking:
        out.internal_system("thinking-effort", EFFORT_BODY.format(thinking_effort))

    last_calls = None   # tool_calls of the last assistant message
    tool_index = 0      # tool messages since it
    i = 0
    while i < len(messages):
        msg = messages[i]
        where = "messages[%d]" % i
        if not isinstance(msg, dict):
            raise RenderError("%s: a message must be an object" % where)
        role = msg.get("role")
        if role is None:
            raise RenderError("%s: message without a role" % where)
        if role in ("user", "system"):
            if role == "system" and msg.get("tools"):
                if not isinstance(msg["tools"], list):
                    raise RenderError("%s: tools must be a list" % where)
                out.tool_declare(msg["tools"], dynamic=True)
            else:
                attrs = [("role", role)]
                if msg.get("name"):
                    attrs.append(("name", msg["name"]))
                out.open("message", attrs)
                out.content(msg.get("content"), where)
                out.close("message")
                out.end_of_msg()
            i += 1
        elif role == "assistant":
            last_calls = msg.get("tool_calls")
            tool_index = 0
            attrs = [("role", "assistant")]
            if msg.get("name"):
                attrs.append(("name", msg["name"]))
            out.open("message", attrs)
            _assistant(out, msg, thinking, request_mode, where)
            out.close("message")
            out.end_of_msg()
            i += 1
        elif role == "tool":
            j = i
            while j < len(messages) and isinstance(messages[j], dict) and messages[j].get("role") == "tool":
                j += 1
            run = messages[i:j]
            ordered = _order_tool_run(run, last_calls)
            if ordered is None:
                ordered = [(m, None) for m in run]
            for k, (tmsg, resolved) in enumerate(ordered):
                twhere = "messages[%d]" % (i + k)
                tool_index += 1
                name = resolved
                if name is None:
                    name = tmsg["tool"] if "tool" in tmsg else tmsg.get("name")
                if name is None and isinstance(last_calls, list) and tool_index <= len(last_calls):
                    call = last_calls[tool_index - 1]
                    if isinstance(call, dict):
                        name = _call_name(call, twhere)
                if name is None:
                    raise RenderError("%s: tool message with no resolvable tool name (no matching "
                                      "tool_call_id, no tool/name, no call at its position)" % twhere)
                if not isinstance(name, str):
                    raise RenderError("%s: tool name must be a string" % twhere)
                out.open("message", [("role", "tool"), ("tool", name), ("index", tool_index)])
                out.content(tmsg.get("content"), twhere)
                out.close("message")
                out.end_of_msg()
            i = j
        else:
            raise RenderError("%s: unknown role %r" % (where, role))

    if tool_choice == "required":
        out.internal_system("tool-choice", TOOL_CHOICE_REQUIRED)
    elif tool_choice == "none":
        out.internal_system("tool-choice", TOOL_CHOICE_NONE)

    if response_format is not None:
        rf_type = response_format.get("type") if isinstance(response_format, dict) else response_format
        if rf_type == "json_object":
            out.internal_system("response-format", JSON_OBJECT_BODY)
        elif rf_type == "json_schema":
            wrapper = response_format.get("json_schema") if isinstance(response_format, dict) else None
            schema = wrapper
            if isinstance(wrapper, dict):
                if "schema" in wrapper:
                    schema = wrapper["schema"]
                elif "json_schema" in wrapper:
                    schema = wrapper["json_schema"]
            out.internal_system("response-format", JSON_SCHEMA_BODY.format(sorted_json(schema)))

    if add_generation_prompt:
        out.open("message", [("role", "assistant")])
        out.open("think" if thinking else "response")
    return out.segs


def segments(messages, tools=None, *, add_generation_prompt=False, thinking=True,
             thinking_effort="max", tool_choice=None, response_format=None):
    """[(text, is_control)], cut as encoding_k3.build_chat_segments cuts them."""
    return build_segments(messages, tools, add_generation_prompt=add_generation_prompt,
                          thinking=thinking, thinking_effort=thinking_effort,
                          tool_choice=tool_choice, response_format=response_format)


def render(messages, tools=None, *, add_generation_prompt=False, thinking=True,
           thinking_effort="max", tool_choice=None, response_format=None):
    return "".join(t for t, _ in segments(
        messages, tools, add_generation_prompt=add_generation_prompt, thinking=thinking,
        thinking_effort=thinking_effort, tool_choice=tool_choice, response_format=response_format))


# ---------------------------------------------------------------------------------------------
# Request mode: a whole OpenAI /v1/chat/completions body


def request_options(body, *, add_generation_prompt=None, thinking=None, thinking_effort=None):
    """The render arguments a request body stands for. Keyword arguments, when not None,
    override the body (as chat-template's --add-generation-prompt/--thinking/--thinking-effort)."""
    if not isinstance(body, dict):
        raise RenderError("request body must be an object")
    if "messages" not in body:
        raise RenderError("request without messages")
    kwargs = body.get("chat_template_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise RenderError("chat_template_kwargs must be an object")
    th = kwargs.get("thinking", True)
    if not isinstance(th, bool):
        raise RenderError("chat_template_kwargs.thinking must be a boolean")
    if "thinking_effort" in kwargs and kwargs["thinking_effort"] is not None:
        effort = kwargs["thinking_effort"]
    elif body.get("reasoning_effort") is not None:
        effort = body["reasoning_effort"]
    else:
        effort = "max"
    gen = body.get("add_generation_prompt", True)
    if add_generation_prompt:
        gen = True
    if thinking is not None:
        th = thinking
    if thinking_effort is not None:
        effort = thinking_effort
    return dict(tools=body.get("tools"), add_generation_prompt=bool(gen), thinking=th,
                thinking_effort=effort, tool_choice=body.get("tool_choice"),
                response_format=body.get("response_format"))


def request_segments(body, **overrides):
    o = request_options(body, **overrides)
    return build_segments(body["messages"], o.pop("tools"), request_mode=True, **o)


def render_request(body, **overrides):
    return "".join(t for t, _ in request_segments(body, **overrides))


# ---------------------------------------------------------------------------------------------
# Corpus entries (tests/chat/k3_conversations.json)


def entry_segments(entry):
    """Segments of one corpus entry; raises RenderError for a malformed one."""
    if "request" in entry:
        return request_segments(entry["request"])
    o = entry.get("options", {})
    return segments(entry["messages"], entry.get("tools"),
                    add_generation_prompt=o.get("add_generation_prompt", False),
                    thinking=o.get("thinking", True),
                    thinking_effort=o.get("thinking_effort", "max"))

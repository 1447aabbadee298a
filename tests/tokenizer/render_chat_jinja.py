#!/usr/bin/python3
"""Reference renderer for the chat-template test: renders conversations with the Jinja
chat_template from a tokenizer directory the way HF transformers does (apply_chat_template:
ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, json.dumps-based
tojson with ensure_ascii=False) after tokenization_kimi.py's deep_sort_dict(tools).

usage: render_chat_jinja.py TOKENIZER_DIR CASES.json OUT.jsonl
CASES.json: [{"messages": [...], "tools": [...] | null, "add_generation_prompt": bool}, ...]
OUT.jsonl: one JSON string (the rendered prompt) per case.
"""
import json
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def deep_sort_dict(obj):
    if isinstance(obj, dict):
        return {k: deep_sort_dict(v) for k, v in sorted(obj.items())}
    if isinstance(obj, list):
        return [deep_sort_dict(item) for item in obj]
    return obj


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def main():
    tok_dir, cases_path, out_path = sys.argv[1:4]
    with open(f"{tok_dir}/tokenizer_config.json", encoding="utf-8") as f:
        template_text = json.load(f)["chat_template"]
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    template = env.from_string(template_text)
    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)
    with open(out_path, "w", encoding="utf-8") as out:
        for case in cases:
            tools = case.get("tools")
            text = template.render(messages=case["messages"], tools=deep_sort_dict(tools),
                                   add_generation_prompt=case.get("add_generation_prompt", False))
            out.write(json.dumps(text, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()

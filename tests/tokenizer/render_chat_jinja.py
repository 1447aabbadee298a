#!/usr/bin/python3
"""Reference renderer for the chat-template test: renders conversations with a Jinja chat
template the way HF transformers' apply_chat_template does (ImmutableSandboxedEnvironment,
trim_blocks, lstrip_blocks, loopcontrols, a json.dumps-based tojson with ensure_ascii=False),
after tokenization_kimi.py's deep_sort_dict(tools). Needs Debian's python3-jinja2.
"""
import json

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


def load_template(tokenizer_dir):
    with open(f"{tokenizer_dir}/tokenizer_config.json", encoding="utf-8") as f:
        text = json.load(f)["chat_template"]
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env.from_string(text)


def render(template, messages, tools=None, add_generation_prompt=False):
    return template.render(messages=messages, tools=deep_sort_dict(tools), add_generation_prompt=add_generation_prompt)

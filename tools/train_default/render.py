#!/usr/bin/python3
"""Token sequences for training the default model (issue 48): each example of data.py rendered by
the engine's own K3 chat format (`kimi-cpp chat-template --request --json`), so training sees
exactly the prompt serving builds.

For an example (request, reply):
  prompt     = render(request, add_generation_prompt=true): what the server sends the model;
  completion = what the model must write: render(request + [reply], add_generation_prompt=false)
               past render(request, add_generation_prompt=true), both without response_format
               (its system message comes after the messages, so only the prompt carries it).
The completion must extend the prompt exactly (checked), and ends with <|end_of_msg|>.

Output: JSONL, one {"task", "ids", "n_prompt", "answer", "images"} per example: ids = prompt +
completion, the loss on ids[n_prompt:]; images: the request's image URLs in order (their
<|media_pad|> tokens are in ids; the trainer encodes the pixels).

  render.py --kimi build/bin/kimi-cpp --model DIR --in train.jsonl --out train.tokens.jsonl [--jobs 2]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

sys.dont_write_bytecode = True


class RenderError(Exception):
    pass


def render_ids(kimi, model, body, tmp):
    """The token ids of a request body under the model's chat format."""
    path = os.path.join(tmp, f"req-{os.getpid()}-{id(body)}.json")
    with open(path, "w") as f:
        json.dump(body, f)
    try:
        p = subprocess.run([kimi, "chat-template", "--tokenizer", model, "--model", model, "--request", path, "--json"],
                           capture_output=True, text=True)
    finally:
        os.remove(path)
    if p.returncode != 0:
        raise RenderError(p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "chat-template failed")
    return json.loads(p.stdout)["ids"]


def image_urls(request):
    urls = []
    for m in request["messages"]:
        if isinstance(m.get("content"), list):
            urls += [part["image_url"]["url"] for part in m["content"] if part.get("type") == "image_url"]
    return urls


def render_example(kimi, model, ex, tmp):
    req = ex["request"]
    prompt = render_ids(kimi, model, dict(req, add_generation_prompt=True), tmp)
    plain = {k: v for k, v in req.items() if k != "response_format"}
    head = prompt if plain == req else render_ids(kimi, model, dict(plain, add_generation_prompt=True), tmp)
    full = render_ids(kimi, model, dict(plain, messages=plain["messages"] + [ex["reply"]], add_generation_prompt=False),
                      tmp)
    if full[:len(head)] != head:
        raise RenderError(f"{ex['task']}: the reply's render does not extend its prompt")
    completion = full[len(head):]
    return {"task": ex["task"], "ids": prompt + completion, "n_prompt": len(prompt), "answer": ex["answer"],
            "images": image_urls(req)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kimi", required=True)
    ap.add_argument("--model", required=True, help="a model directory with the tokenizer and vision config")
    ap.add_argument("--in", dest="inp", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    with open(a.inp) as f:
        examples = [json.loads(line) for line in f if line.strip()]
    with tempfile.TemporaryDirectory(prefix="kimi-render-") as tmp, ThreadPoolExecutor(a.jobs) as pool:
        rows = list(pool.map(lambda ex: render_example(a.kimi, a.model, ex, tmp), examples))
    with open(a.out, "w") as f:
        for r in rows:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")
    n = sum(len(r["ids"]) for r in rows)
    print(f"render: {len(rows)} examples, {n} tokens ({n / max(len(rows), 1):.0f} each), "
          f"{sum(len(r['ids']) - r['n_prompt'] for r in rows)} in completions", file=sys.stderr)


if __name__ == "__main__":
    main()

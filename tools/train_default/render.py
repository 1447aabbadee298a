#!/usr/bin/python3
"""Token sequences for training the default model (issue 48): each example of data.py rendered by
the engine's own K3 chat format (`kimi-cpp chat-template --request --json`), so training sees
exactly the prompt serving builds (one `chat-template --requests` process a job).

For an example (request, reply):
  prompt     = render(request, add_generation_prompt=true): what the server sends the model;
  completion = what the model must write: render(request + [reply], add_generation_prompt=false)
               past render(request, add_generation_prompt=true), both without response_format
               (its system message comes after the messages, so only the prompt carries it).
The completion must extend the prompt exactly (checked), and ends with <|end_of_msg|>.

Output: JSONL, one {"task", "variant", "ids", "n_prompt", "answer", "images"} per example: ids = prompt +
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


def render_all(kimi, model, bodies, jobs):
    """The token ids of each request body under the model's chat format: `chat-template
    --requests` over a JSONL file, in `jobs` processes."""
    def run(part):
        with tempfile.NamedTemporaryFile("w", prefix="kimi-render-", suffix=".jsonl") as f:
            for b in part:
                f.write(json.dumps(b, separators=(",", ":")) + "\n")
            f.flush()
            p = subprocess.run([kimi, "chat-template", "--tokenizer", model, "--model", model, "--requests", f.name],
                               capture_output=True, text=True)
        if p.returncode != 0:
            raise RenderError(p.stderr.strip() or "chat-template failed")
        out = [json.loads(line) for line in p.stdout.splitlines()]
        for o in out:
            if "error" in o:
                raise RenderError(o["error"])
        return [o["ids"] for o in out]
    step = -(-len(bodies) // jobs) if bodies else 1
    with ThreadPoolExecutor(jobs) as pool:
        parts = list(pool.map(run, [bodies[i:i + step] for i in range(0, len(bodies), step)]))
    return [ids for part in parts for ids in part]


def image_urls(request):
    urls = []
    for m in request["messages"]:
        if isinstance(m.get("content"), list):
            urls += [part["image_url"]["url"] for part in m["content"] if part.get("type") == "image_url"]
    return urls


def bodies_of(ex):
    """The three renders an example needs: its prompt, the prompt without response_format, and
    the conversation with the reply (also without response_format)."""
    req = ex["request"]
    plain = {k: v for k, v in req.items() if k != "response_format"}
    return [dict(req, add_generation_prompt=True), dict(plain, add_generation_prompt=True),
            dict(plain, messages=plain["messages"] + [ex["reply"]], add_generation_prompt=False)]


def row_of(ex, prompt, head, full):
    if full[:len(head)] != head:
        raise RenderError(f"{ex['task']}: the reply's render does not extend its prompt")
    return {"task": ex["task"], "variant": ex.get("variant", ""), "ids": prompt + full[len(head):],
            "n_prompt": len(prompt), "answer": ex["answer"], "images": image_urls(ex["request"])}


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
    ids = render_all(a.kimi, a.model, [b for ex in examples for b in bodies_of(ex)], a.jobs)
    rows = [row_of(ex, *ids[3 * i:3 * i + 3]) for i, ex in enumerate(examples)]
    with open(a.out, "w") as f:
        for r in rows:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")
    n = sum(len(r["ids"]) for r in rows)
    print(f"render: {len(rows)} examples, {n} tokens ({n / max(len(rows), 1):.0f} each), "
          f"{sum(len(r['ids']) - r['n_prompt'] for r in rows)} in completions", file=sys.stderr)


if __name__ == "__main__":
    main()

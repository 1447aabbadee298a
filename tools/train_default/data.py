#!/usr/bin/python3
"""The default model's synthetic tasks (issue 48): chat requests as a user sends them and the
replies the model should give, as OpenAI chat-completions bodies, deterministic for a seed.

Tasks (each example: {"task", "request", "reply", "answer"}; `reply` is the assistant message
the model must produce after `request`, `answer` what an evaluation checks):
  add2, sub2   2-digit addition / subtraction, reasoning in the thinking channel;
  add3         3-digit addition;
  mul          multiplication of 1-2 digits through a `calculator` tool: turn 1 is the call
               (valid JSON arguments), turn 2 (after the tool's result) the final answer;
  word         short word problems (apples, coins, ...) with reasoning;
  json         the same questions with response_format json_schema {"answer": integer};
  colour       "What colour is this image?" with a solid-colour image (image_url data URI);
  shape        "What shape is this?" with a simple shape on white.
Questions come in the forms users type: "What is 37 + 45?", "What is 37 plus 45?",
"Compute 81 - 9.", "What is 12 * 7?", lower case, extra spaces, no question mark.

Only the standard library and Debian's python3-pil (images) are used. The requests are rendered
by the engine's own K3 chat format (`kimi-cpp chat-template --request`), so training sees what
serving sends (render.py).

  data.py --seed 1 --n 20000 --out train.jsonl     # the training set
  data.py --seed 2 --n 500 --exclude train.jsonl --out eval.jsonl   # held out: another seed,
                                                                     # no training question
"""

import argparse
import base64
import io
import json
import random
import re
import sys

sys.dont_write_bytecode = True

CALCULATOR = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluates an arithmetic expression with integers and + - * and returns the result.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "for example 12 * 7"}},
            "required": ["expression"],
        },
    },
}

ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}},
    "required": ["answer"],
    "additionalProperties": False,
}

COLOURS = {
    "red": (220, 30, 30), "green": (30, 170, 60), "blue": (30, 60, 220), "yellow": (240, 220, 30),
    "black": (0, 0, 0), "white": (255, 255, 255), "orange": (250, 140, 20), "purple": (140, 50, 170),
}
SHAPES = ("circle", "square", "triangle")

OPS = {"+": ("plus", lambda a, b: a + b), "-": ("minus", lambda a, b: a - b), "*": ("times", lambda a, b: a * b)}


def user_form(rng, a, op, b):
    """One of the ways a user asks for a op b, with the noise users add."""
    word = OPS[op][0]
    forms = [f"What is {a} {op} {b}?", f"What is {a} {word} {b}?", f"Compute {a} {op} {b}.",
             f"What's {a} {op} {b}?", f"{a} {op} {b} = ?", f"Calculate {a} {word} {b}."]
    q = rng.choice(forms)
    r = rng.random()
    if r < 0.15:
        q = q.lower()
    elif r < 0.3:
        q = q.rstrip("?.")
    if rng.random() < 0.15:
        q = "  ".join(q.split(" "))
    if rng.random() < 0.1:
        q = " " + q + " "
    return q


PLACES = ("ones", "tens", "hundreds", "thousands")


def column_steps(a, op, b):
    """The reasoning for a op b (+ or -, b <= a for -): a column at a time from the ones, each
    column named by its place, a carry or borrow as the next column's "+1" / "-1":
      "37 + 45: ones 7+5=12, tens 3+4+1=8, so 82."
      "81 - 9: ones 1-9 borrow 11-9=2, tens 8-0-1=7, so 72."
    Short, since every byte is a token, and each digit of the result is found by its place."""
    n = len(str(max(a, b)))
    da, db = str(a).zfill(n)[::-1], str(b).zfill(n)[::-1]
    parts, carry = [], 0
    for i in range(n):
        x, y = int(da[i]), int(db[i])
        tail = f"{op}1" if carry else ""
        term = f"{x}{op}{y}{tail}"
        s = x + y + carry if op == "+" else x - y - carry
        if op == "+":
            carry = s // 10
            parts.append(f"{PLACES[i]} {term}={s}")
        elif s < 0:
            carry = 1
            parts.append(f"{PLACES[i]} {term} borrow {10 + x}{op}{y}{tail}={s + 10}")
        else:
            carry = 0
            parts.append(f"{PLACES[i]} {term}={s}")
    return f"{a} {op} {b}: " + ", ".join(parts) + f", so {OPS[op][1](a, b)}."


def arithmetic(rng, task):
    if task == "add2":
        a, b, op = rng.randint(10, 99), rng.randint(10, 99), "+"
    elif task == "sub2":
        a, b, op = rng.randint(10, 99), rng.randint(1, 99), "-"
        if b > a:
            a, b = b, a
    else:   # add3
        a, b, op = rng.randint(100, 999), rng.randint(10, 999), "+"
    result = OPS[op][1](a, b)
    req = {"messages": [{"role": "user", "content": user_form(rng, a, op, b)}]}
    reply = {"role": "assistant", "reasoning_content": column_steps(a, op, b), "content": str(result)}
    return req, reply, result


def multiplication(rng):
    """Turn 1: the call; turn 2: the answer after the tool's result. Returns both examples."""
    a, b = rng.randint(2, 99), rng.randint(2, 9)
    if rng.random() < 0.5:
        a, b = b, a
    result = a * b
    question = user_form(rng, a, "*", b)
    expr = f"{a} * {b}"
    call = {"id": "functions.calculator:0", "type": "function",
            "function": {"name": "calculator", "arguments": json.dumps({"expression": expr})}}
    turn1 = {"role": "assistant", "reasoning_content": f"A multiplication: I use the calculator for {expr}.",
             "content": "", "tool_calls": [call]}
    req1 = {"messages": [{"role": "user", "content": question}], "tools": [CALCULATOR]}
    req2 = {"messages": [{"role": "user", "content": question}, turn1,
                         {"role": "tool", "tool_call_id": "functions.calculator:0", "content": str(result)}],
            "tools": [CALCULATOR]}
    turn2 = {"role": "assistant", "reasoning_content": f"The calculator says {expr} = {result}.", "content": str(result)}
    return [(req1, turn1, {"expression": expr}), (req2, turn2, result)]


NAMES = ("Ann", "Ben", "Mia", "Sam", "Lea", "Tom")
THINGS = ("apples", "coins", "books", "pens", "stones", "cards")


def word_problem(rng):
    name, thing = rng.choice(NAMES), rng.choice(THINGS)
    a, b = rng.randint(2, 60), rng.randint(2, 40)
    if rng.random() < 0.5:
        q = f"{name} has {a} {thing} and gets {b} more. How many {thing} does {name} have now?"
        result = a + b
        why = f"{name} starts with {a} and gets {b}. " + column_steps(a, "+", b)
    else:
        a, b = max(a, b), min(a, b)
        q = f"{name} has {a} {thing} and gives away {b}. How many {thing} are left?"
        result = a - b
        why = f"{name} starts with {a} and gives {b} away. " + column_steps(a, "-", b)
    req = {"messages": [{"role": "user", "content": q}]}
    return req, {"role": "assistant", "reasoning_content": why, "content": str(result)}, result


def json_answer(rng):
    req, reply, result = arithmetic(rng, rng.choice(("add2", "sub2", "add3")))
    req["response_format"] = {"type": "json_schema",
                              "json_schema": {"name": "answer", "schema": ANSWER_SCHEMA}}
    reply = dict(reply, content=json.dumps({"answer": result}))
    return req, reply, result


def image_uri(draw, size):
    """A PNG data URI of a white image of size (width, height) painted by draw(ImageDraw, Image)."""
    from PIL import Image, ImageDraw   # python3-pil, only for the image tasks
    img = Image.new("RGB", size, (255, 255, 255))
    draw(ImageDraw.Draw(img), img)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def jitter(rng, rgb):
    return tuple(max(0, min(255, c + rng.randint(-12, 12))) for c in rgb)


def colour_task(rng):
    name = rng.choice(sorted(COLOURS))
    rgb = jitter(rng, COLOURS[name])
    # half of them 56 x 56 (4 image tokens), the rest of 28 to 112 pixels a side: the answer must
    # not depend on the size, nor on the black padding up to a multiple of 28 pixels
    size = (56, 56) if rng.random() < 0.5 else (rng.randint(28, 112), rng.randint(28, 112))
    uri = image_uri(lambda d, img: d.rectangle([0, 0, size[0], size[1]], fill=rgb), size)
    q = rng.choice(["What colour is this image?", "What color is this image?", "what colour is this image",
                    "Which colour is this?", "What colour is this image ?"])
    req = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": uri}},
                                                      {"type": "text", "text": q}]}]}
    reply = {"role": "assistant", "reasoning_content": f"The whole image is one colour: {name}.", "content": name.capitalize() + "."}
    return req, reply, name


def shape_task(rng):
    shape = rng.choice(SHAPES)
    rgb = jitter(rng, COLOURS[rng.choice(("red", "green", "blue", "black"))])
    canvas = (56, 56)
    size = rng.randint(30, 50)  # its side, anywhere on the canvas
    x, y = rng.randint(0, canvas[0] - 1 - size), rng.randint(0, canvas[1] - 1 - size)

    def draw(d, img):
        box = [x, y, x + size, y + size]
        if shape == "circle":
            d.ellipse(box, fill=rgb)
        elif shape == "square":
            d.rectangle(box, fill=rgb)
        else:
            d.polygon([(x + size // 2, y), (x + size, y + size), (x, y + size)], fill=rgb)
    q = rng.choice(["What shape is this?", "what shape is this", "Which shape is in this image?"])
    req = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": image_uri(draw, canvas)}},
                                                      {"type": "text", "text": q}]}]}
    reply = {"role": "assistant", "reasoning_content": f"I see one {shape} on white.", "content": f"A {shape}."}
    return req, reply, shape


# task -> share of the examples
MIX = {"add2": 0.10, "sub2": 0.13, "add3": 0.19, "mul": 0.045, "word": 0.05, "json": 0.18, "colour": 0.11, "shape": 0.195}


# How the request is sent besides its messages: as the OpenAI client sends it (the renderer's
# defaults: thinking on, effort max), as the chat page does (effort chosen), with a system prompt.
VARIANTS = ("plain", "effort-max", "effort-high", "effort-low", "system")
VARIANT_WEIGHTS = (0.7, 0.08, 0.08, 0.06, 0.08)


def with_variant(req, variant):
    if variant.startswith("effort-"):
        return dict(req, chat_template_kwargs={"thinking": True, "thinking_effort": variant[7:]})
    if variant == "system":
        return dict(req, messages=[{"role": "system", "content": "You are a helpful assistant."}] + req["messages"])
    return req


def question_key(ex):
    """What makes a text question the same question: its numbers and its answer (None for
    images: each is drawn anew)."""
    text = ex["request"]["messages"][-1]["content"] if ex["task"] != "mul_answer" else ex["request"]["messages"][-3]["content"]
    if not isinstance(text, str):
        return None
    return ex["task"].split("_")[0] + ":" + ",".join(re.findall(r"\d+", text)) + "=" + json.dumps(ex["answer"])


def examples(seed, n, exclude=frozenset(), balanced=False):
    """n examples (a multiplication contributes its two turns), deterministic for the seed;
    none whose question_key is in exclude (held-out evaluation). The tasks are drawn with the
    shares of MIX, or all alike (balanced: an evaluation set, every task measured as well)."""
    rng = random.Random(seed)
    tasks, weights = zip(*MIX.items())
    if balanced:
        weights = [1.0] * len(tasks)
    out = []
    while len(out) < n:
        task = rng.choices(tasks, weights)[0]
        if task in ("add2", "sub2", "add3"):
            items = [arithmetic(rng, task)]
        elif task == "mul":
            items = multiplication(rng)
        elif task == "word":
            items = [word_problem(rng)]
        elif task == "json":
            items = [json_answer(rng)]
        elif task == "colour":
            items = [colour_task(rng)]
        else:
            items = [shape_task(rng)]
        variant = rng.choices(VARIANTS, VARIANT_WEIGHTS)[0]
        new = []
        for i, (req, reply, answer) in enumerate(items):
            name = task if task != "mul" else ("mul_call", "mul_answer")[i]
            new.append({"task": name, "variant": variant, "request": req, "reply": reply, "answer": answer})
        if exclude and any(question_key(ex) in exclude for ex in new):
            continue
        for ex in new:
            ex["request"] = with_variant(ex["request"], variant)
        out += new
    return out[:n]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--out", required=True)
    ap.add_argument("--exclude", help="a data.py file whose questions this set must not repeat")
    ap.add_argument("--balanced", action="store_true", help="every task alike, not MIX's shares (an evaluation set)")
    a = ap.parse_args()
    exclude = set()
    if a.exclude:
        with open(a.exclude) as f:
            exclude = {question_key(json.loads(line)) for line in f} - {None}
    with open(a.out, "w") as f:
        for ex in examples(a.seed, a.n, exclude, a.balanced):
            f.write(json.dumps(ex, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Docs that cannot rot: checks every Markdown document of the repository (README.md, docs/,
tools/*/README.md) and the file references of the source comments (standard library only).

  * every relative link [text](path#anchor) names a file that exists, and its anchor exists
    there: an <a id="..."> or a heading's GitHub slug (Pandoc's {#id} is refused: GitHub shows it
    as text);
  * every repository path a document or a source comment names in backticks or after "see" /
    "docs/" (src/…, apps/…, tests/…, tools/…, bench/…, web/…, fuzz/…, docs/…) exists;
  * every `Class::member` a document names in backticks exists in the sources as that member;
  * no "§" section number in the sources, tests and tools: the repository's documents have
    none (RFC sections are allowed: "RFC 9112 §6.3").

    python3 tools/check_docs.py [--root DIR]      exit 0: clean; 1: each problem on a line
"""
import argparse
import os
import re
import sys

ROOT_DIRS = ("src", "apps", "tests", "tools", "bench", "web", "fuzz", "docs", "cmake")
CODE_EXT = (".cpp", ".h", ".py", ".mjs", ".js", ".sh", ".cmake")
# Sources whose "§" is text under test (the tokenizer corpora), not a section number.
TEXT_DATA = ("src/tokenizer/synthetic_seed.cpp", "tests/tokenizer/gen_corpus.mjs")


def slug(heading):
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped, spaces → '-'."""
    h = re.sub(r"<[^>]+>", "", heading.strip().lower())
    h = re.sub(r"[`*_~\[\]()]", "", h)
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors_of(path, cache={}):
    if path not in cache:
        ids, seen = set(), {}
        with open(path, encoding="utf-8") as f:
            fence = False
            for line in f:
                if line.lstrip().startswith("```"):
                    fence = not fence
                    continue
                if fence:
                    continue
                ids.update(re.findall(r'<a id="([^"]+)"', line))
                m = re.match(r"^(#{1,6})\s+(.*?)\s*$", line)
                if m:
                    s = slug(m.group(2))
                    n = seen.get(s, 0)
                    seen[s] = n + 1
                    ids.add(s if n == 0 else "%s-%d" % (s, n))
        cache[path] = ids
    return cache[path]


def doc_files(root):
    out = [os.path.join(root, "README.md")]
    for d, _, files in os.walk(os.path.join(root, "docs")):
        out += [os.path.join(d, f) for f in files if f.endswith(".md")]
    for d, _, files in os.walk(os.path.join(root, "tools")):
        out += [os.path.join(d, f) for f in files if f.endswith(".md")]
    return sorted(p for p in out if os.path.exists(p))


def code_files(root):
    out = []
    for top in ("src", "apps", "tests", "tools", "bench", "fuzz", "web"):
        for d, _, files in os.walk(os.path.join(root, top)):
            out += [os.path.join(d, f) for f in files if f.endswith(CODE_EXT)]
    return sorted(out)


def strip_fences(text):
    return re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)


PATH_RE = re.compile(r"(?<![\w/.-])((?:%s)/[\w./+-]*[\w/])" % "|".join(ROOT_DIRS))


# A line that names another project's files (their paths are not ours to check).
OTHER_PROJECTS = re.compile(r"llama\.cpp|tiktoken|vLLM|vllm|transformers|\bfla\b|SGLang|sglang|PyTorch|\bHF\b|ggml")


def path_exists(root, p):
    if any(c in p for c in "*{}…<>$"):
        return True
    p = p.rstrip("/")
    if p.startswith("bench/results/"):   # what `make bench` writes
        return True
    for base in (root, os.path.join(root, "src")):   # "bench/step_traffic.h" names src/bench/…
        full = os.path.join(base, p)
        if os.path.exists(full):
            return True
        # a stem the text completes: `quant_config.{h,cpp}`, `cmd_NAME.cpp`, `k3-model.{txt,json}`
        parent, stem = os.path.split(full)
        if os.path.isdir(parent) and any(e.startswith(stem) for e in os.listdir(parent)):
            return True
    return False


def check(root):
    problems = []
    symbols = None
    for doc in doc_files(root):
        rel = os.path.relpath(doc, root)
        text = strip_fences(open(doc, encoding="utf-8").read())
        for n, line in enumerate(text.split("\n"), 1):
            where = "%s:%d" % (rel, n)
            if re.search(r"\{#[\w-]+\}", line):
                problems.append("%s: a Pandoc {#id} anchor (GitHub shows it as text); use <a id=\"...\"></a>" % where)
            for target in re.findall(r"\]\(([^)\s]+)\)", line):
                if re.match(r"^[a-z]+:", target):
                    continue
                path, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
                if not os.path.exists(dest):
                    problems.append("%s: link to a missing file: %s" % (where, target))
                    continue
                if anchor and dest.endswith(".md") and anchor not in anchors_of(dest):
                    problems.append("%s: link to a missing anchor: %s" % (where, target))
            for code in re.findall(r"`([^`]+)`", line):
                if OTHER_PROJECTS.search(line):
                    break
                for p in PATH_RE.findall(code):
                    if not path_exists(root, p):
                        problems.append("%s: names a path that does not exist: %s" % (where, p))
                for cls, member in re.findall(r"\b([A-Z]\w+)::(~?\w+)", code):
                    if symbols is None:
                        symbols = "\n".join(open(f, encoding="utf-8", errors="replace").read()
                                            for f in code_files(root) if f.endswith((".cpp", ".h")))
                    if not re.search(r"\b%s\b" % re.escape(member), symbols) or not re.search(r"\b%s\b" % cls, symbols):
                        problems.append("%s: names a symbol not in the sources: %s::%s" % (where, cls, member))
    for f in code_files(root):
        rel = os.path.relpath(f, root)
        if rel == "tools/check_docs.py":
            continue
        for n, line in enumerate(open(f, encoding="utf-8", errors="replace"), 1):
            where = "%s:%d" % (rel, n)
            if "§" in line and not re.search(r"RFC \d+ §", line) and rel not in TEXT_DATA:
                problems.append("%s: a § section number (no document of the repository has numbered sections)" % where)
            comment = re.search(r"(//|#|\"\"\"|\*)\s*(.*)", line)
            if not comment:
                continue
            for p in re.findall(r"(?<![\w/.-])(docs/[\w.-]+\.md(?:#[\w-]+)?)", comment.group(2)):
                path, _, anchor = p.partition("#")
                dest = os.path.join(root, path)
                if not os.path.exists(dest):
                    problems.append("%s: names a missing document: %s" % (where, p))
                elif anchor and anchor not in anchors_of(dest):
                    problems.append("%s: names a missing anchor: %s" % (where, p))
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    root = os.path.abspath(ap.parse_args().root)
    problems = check(root)
    for p in problems:
        print(p)
    print("check_docs: %d documents, %d problem(s)" % (len(doc_files(root)), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Functions a reader can hold in their head: every function defined in src/ is at
most 80 lines, unless the comment just above it says why it is longer, with a line that starts
"long:" (e.g. "// long: one switch over the op kinds, each case two lines"). Standard library
only; relies on the clang-format layout of this repository (a definition's closing brace is a
line of its own at the definition's indentation).

    python3 tools/check_function_length.py [--root DIR] [--max N] [--list]
    exit 0: clean; 1: each function over the limit without a note, on a line
"""
import argparse
import os
import re
import sys

DIRS = ("src",)
# The start of a definition: a signature line (at namespace level, or one class indentation in)
# that is not a control statement, a type or a namespace, and whose body opens at its end.
NOT_FUNCTION = re.compile(r"^\s*(if|for|while|switch|do|else|return|namespace|class|struct|union|enum|"
                          r"extern|typedef|using|template\s*<[^>]*>\s*(class|struct))\b")
OPEN_RE = re.compile(r"\)\s*(const)?\s*(noexcept)?\s*(override)?\s*(->\s*[\w:<>&*, ]+)?\s*"
                     r"(:\s*.*)?\{\s*(//.*)?$")


def functions(lines):
    """(start index, end index, name) of each function definition at indentation 0 or 4."""
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        indent = len(line) - len(line.lstrip(" "))
        stripped = line.strip()
        if indent in (0, 4) and stripped and not stripped.startswith(("//", "#", "}", "{", "*")) \
                and not NOT_FUNCTION.match(line) and "(" in stripped and not stripped.endswith(";"):
            # the signature may run over several lines, up to the line that opens the body
            j = i
            sig = stripped
            # a one-line definition ("… { return x; }") or a declaration ends the search
            while j < n and not lines[j].rstrip().endswith(("{", ";", "}")) and j - i < 12:
                j += 1
                sig += " " + lines[j].strip() if j < n else ""
            if j < n and lines[j].rstrip().endswith("{") and OPEN_RE.search(sig) and "=" not in sig.split("(")[0]:
                close = " " * indent + "}"
                k = j + 1
                while k < n and not (lines[k].rstrip() == close or lines[k].startswith(close + " ")
                                     or lines[k].rstrip() == close + ";"):
                    k += 1
                if k < n:
                    name = re.match(r"[^(]*?([\w:~]+)\s*\(", sig)
                    yield i, k, name.group(1) if name else sig[:40]
                    i = k + 1
                    continue
        i += 1


def has_note(lines, start):
    """Whether the comment block right above the definition has a "long:" line."""
    j = start - 1
    while j >= 0 and lines[j].strip().startswith(("//", "template")):
        if re.match(r"\s*//\s*long:", lines[j]):
            return True
        j -= 1
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--max", type=int, default=80)
    ap.add_argument("--list", action="store_true", help="also list the long functions that have a note")
    a = ap.parse_args()
    problems = []
    for d in DIRS:
        for dirpath, _, files in os.walk(os.path.join(a.root, d)):
            for f in sorted(files):
                if not f.endswith((".cpp", ".h")):
                    continue
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8") as fh:
                    lines = fh.read().split("\n")
                rel = os.path.relpath(path, a.root)
                for s, e, name in functions(lines):
                    length = e - s + 1
                    if length <= a.max:
                        continue
                    noted = has_note(lines, s)
                    if not noted:
                        problems.append("%s:%d: %s is %d lines (over %d, and no 'long:' note above it)"
                                        % (rel, s + 1, name, length, a.max))
                    elif a.list:
                        print("%s:%d: %s is %d lines (noted)" % (rel, s + 1, name, length))
    for p in problems:
        print(p)
    print("%d function(s) over %d lines without a note" % (len(problems), a.max), file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

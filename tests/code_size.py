#!/usr/bin/env python3
"""The house's size limits on the C++/CUDA sources of src/, apps/ and python/src/: no file over 700
lines (one responsibility a file) and no function over 150 lines (a screen or two; split it along
its seams). Prints every file and function over the limit and exits 1 if there is one.

    python3 tests/code_size.py [REPO]

Functions are found without a compiler: a '{' that ends a parameter list (`) {`, `) const {`,
`) noexcept {`, `) -> T {`) outside any other function body opens one, its matching '}' closes it;
comments and string literals are skipped. Lambdas and blocks inside a function count as its lines.
"""
import os
import re
import sys

MAX_FILE_LINES = 700
MAX_FUNCTION_LINES = 150
ROOTS = ("src", "apps", os.path.join("python", "src"))
EXTENSIONS = (".cpp", ".cu", ".hpp", ".cuh", ".h")
SIGNATURE_END = re.compile(r"\)\s*(const)?\s*(noexcept)?\s*(override)?\s*(->\s*[\w:<>, *&]+)?\s*\{\s*$")
SCOPE = re.compile(r"^\s*(namespace\b|extern\s+\"|struct\b|class\b|union\b|enum\b)")


def code_of(line, state):
    """The line without comments and with string / char literals emptied; state carries /* */."""
    out, i = [], 0
    while i < len(line):
        if state["block"]:
            end = line.find("*/", i)
            if end < 0:
                return "".join(out)
            state["block"], i = False, end + 2
            continue
        if line.startswith("//", i):
            break
        if line.startswith("/*", i):
            state["block"], i = True, i + 2
            continue
        c = line[i]
        if c in "\"'":
            i += 1
            while i < len(line) and line[i] != c:
                i += 2 if line[i] == "\\" else 1
            out.append('""')
            i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def functions(path):
    """(lines, first line) of every function body in the file."""
    state, stack, found = {"block": False}, [], []
    with open(path, errors="replace") as f:
        for number, raw in enumerate(f, 1):
            line = code_of(raw.rstrip("\n"), state)
            for k, ch in enumerate(line):
                if ch == "{":
                    kind = "other"
                    if SCOPE.match(line):
                        kind = "scope"
                    elif SIGNATURE_END.search(line[:k + 1]) and all(s[0] != "function" for s in stack):
                        kind = "function"
                    stack.append((kind, number))
                elif ch == "}" and stack:
                    kind, start = stack.pop()
                    if kind == "function":
                        found.append((number - start + 1, start))
    return found


def main(repo):
    problems = []
    for root in ROOTS:
        for folder, _, files in os.walk(os.path.join(repo, root)):
            for name in sorted(files):
                if not name.endswith(EXTENSIONS):
                    continue
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, repo)
                with open(path, errors="replace") as f:
                    n = sum(1 for _ in f)
                if n > MAX_FILE_LINES:
                    problems.append(f"{rel}: {n} lines (at most {MAX_FILE_LINES})")
                for length, start in functions(path):
                    if length > MAX_FUNCTION_LINES:
                        problems.append(f"{rel}:{start}: a function of {length} lines (at most {MAX_FUNCTION_LINES})")
    for p in problems:
        print(p)
    print(f"{len(problems)} over the size limits" if problems else "sizes within the limits")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")))

#!/usr/bin/env python3
"""docs/cli.md and `yolocu <command> --help` name the same options, and the program accepts them.

For every command (detect, track, eval, bench, infer, inspect):
  - every option its --help names, and every option its section of docs/cli.md names (the "## "
    sections whose heading names `yolocu <command>`), is accepted by the command's parser: run as
    `yolocu <command> --OPTION` it does not say "unknown option";
  - every option the parser accepts, out of all the options that any help or docs/cli.md names,
    is named by the command's --help and by its docs section (or, for commands that take another
    command's options, "as in yolocu detect", by that command's).
Prints each disagreement and exits 1.

usage: docs_cli.py YOLOCU_BINARY [REPOSITORY ROOT]
"""
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

yolocu = sys.argv[1]
root = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), ".."))
commands = ["detect", "track", "eval", "bench", "infer", "inspect"]
inherits = {"track": "detect", "eval": "detect", "bench": "detect", "inspect": "detect"}  # "as in yolocu detect"
option_re = re.compile(r"(?<![\w-])--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)")
never = {"help"}  # every command takes it; it prints the help instead of failing


def run(*args):
    p = subprocess.run([yolocu, *args], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"))
    return p.returncode, p.stdout + p.stderr


def help_options(cmd):
    rc, out = run(cmd, "--help")
    if rc != 0:
        sys.exit(f"yolocu {cmd} --help: exit status {rc}: {out}")
    return set(option_re.findall(out)) - never


def docs_sections():
    """command -> the text of docs/cli.md's sections about it."""
    text = open(os.path.join(root, "docs", "cli.md"), encoding="utf-8").read()
    sections = {c: "" for c in commands}
    for part in re.split(r"(?m)^(?=## )", text):
        heading = part.split("\n", 1)[0]
        for c in commands:
            if re.search(r"yolocu %s\b" % c, heading):
                sections[c] += part
    return sections


def accepts(cmd, option):
    rc, out = run(cmd, "--" + option)
    return f"unknown option --{option}" not in out


def main():
    docs = {c: set(option_re.findall(t)) - never for c, t in docs_sections().items()}
    helps = {c: help_options(c) for c in commands}
    candidates = set().union(*docs.values(), *helps.values())
    problems = []
    pairs = [(c, o) for c in commands for o in sorted(candidates)]
    with ThreadPoolExecutor(max_workers=8) as pool:  # one process per probe, a few hundred
        known = dict(zip(pairs, pool.map(lambda p: accepts(*p), pairs)))
    for c in commands:
        if not docs[c]:
            problems.append(f"docs/cli.md: no section about yolocu {c}")
        accepted = {o for o in sorted(candidates) if known[(c, o)]}
        for o in sorted(helps[c] - accepted):
            problems.append(f"yolocu {c} --help names --{o}, which yolocu {c} does not accept")
        for o in sorted(docs[c] - accepted):
            problems.append(f"docs/cli.md (yolocu {c}) names --{o}, which yolocu {c} does not accept")
        parent = inherits.get(c)
        for o in sorted(accepted):
            if o not in helps[c] and not (parent and o in helps[parent]):
                problems.append(f"yolocu {c} accepts --{o}, which its --help does not name")
            if o not in docs[c] and not (parent and o in docs[parent]):
                problems.append(f"yolocu {c} accepts --{o}, which docs/cli.md does not name in its section")
    for p in problems:
        print(p)
    print(f"{len(commands)} commands, {len(candidates)} option names checked, {len(problems)} disagreements")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

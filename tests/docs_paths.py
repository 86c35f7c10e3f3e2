#!/usr/bin/env python3
"""Every repository path that README.md and docs/*.md name must exist.

A path here is a word starting with one of the repository's top-level folders (src/, include/,
apps/, tests/, bench/, python/, scripts/, docs/, cmake/, .ci/); build outputs (build/...) and
patterns (*, <...>, {...}) are not checked. Prints each missing path as file:line and exits 1.

usage: docs_paths.py [REPOSITORY ROOT]
"""
import glob
import os
import re
import sys

root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
folders = "src|include|apps|tests|bench|python|scripts|docs|cmake|\\.ci"
path_re = re.compile(r"(?<![\w/.-])((?:\.\./)?(?:%s)/[\w./*<>{}-]*)" % folders)
docs = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
missing = 0
checked = 0
for doc in docs:
    with open(doc, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            for m in path_re.finditer(line):
                p = m.group(1).rstrip(".,:;)")
                if any(c in p for c in "*<>{}"):
                    continue
                checked += 1
                # relative to the repository root, or to the document's folder (docs/x.md links)
                if not any(os.path.exists(os.path.join(base, p)) for base in (root, os.path.dirname(doc))):
                    print(f"{os.path.relpath(doc, root)}:{n}: {p} does not exist")
                    missing += 1
print(f"{checked} paths in {len(docs)} documents, {missing} missing")
sys.exit(1 if missing or not checked else 0)

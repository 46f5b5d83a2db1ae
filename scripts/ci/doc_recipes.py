#!/usr/bin/env python3
"""The code blocks of a doc, as CI runs them (scripts/ci/recipes.sh, scripts/ci/podman.sh).
Every fenced block must follow a mark, on the line before its fence:
  <!-- ci: file RECIPE[,RECIPE...] PATH -->  the block is the file PATH of each recipe
  <!-- ci: run RECIPE DIR -->                 the block is a shell script run in DIR
  <!-- ci: in REPO-PATH -->                   the block appears verbatim in that repository file
A block without a mark fails, so that no recipe in the docs goes unchecked.
`extract` writes each recipe's files under OUT/RECIPE/, checks the `in` blocks against
--repo, and prints one line per run block, in the docs' order: RECIPE<TAB>DIR<TAB>SCRIPT.
usage: doc_recipes.py extract DOC.md... --out OUT --repo ROOT [--only RECIPE] [--skip RECIPE]"""
import argparse
import os
import re
import sys

MARK = re.compile(r"^\s*<!--\s*ci:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(```+)(.*)$")


def blocks(path):
    """(line number, mark or None, text) of each fenced block, indentation removed."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks = m.group(1), m.group(2)
        prev = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        mark = MARK.match(prev)
        body, j = [], i + 1
        while j < len(lines) and not (lines[j].strip() == ticks):
            line = lines[j]
            if line.strip() and not line.startswith(indent):
                raise SystemExit(f"{path}:{j + 1}: a line of the block is indented less than its fence")
            body.append(line[len(indent):])
            j += 1
        if j == len(lines):
            raise SystemExit(f"{path}:{i + 1}: unclosed code block")
        out.append((i + 1, mark.group(1) if mark else None, "\n".join(body) + "\n"))
        i = j + 1
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("command", choices=["extract"])
    ap.add_argument("docs", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--skip", action="append", default=[])
    a = ap.parse_args()
    wanted = lambda r: (not a.only or r in a.only) and r not in a.skip  # noqa: E731
    errors, runs, n = [], [], 0
    for doc in a.docs:
        for line, mark, text in blocks(doc):
            where = f"{doc}:{line}"
            if mark is None:
                errors.append(f"{where}: a code block without a `<!-- ci: file|run|in ... -->` mark; "
                              "every block in this doc must be checked by CI")
                continue
            words = mark.split()
            if words[0] == "file" and len(words) == 3:
                for recipe in words[1].split(","):
                    if wanted(recipe):
                        dest = os.path.join(a.out, recipe, words[2])
                        os.makedirs(os.path.dirname(dest), exist_ok=True)
                        with open(dest, "w", encoding="utf-8") as f:
                            f.write(text)
            elif words[0] == "run" and len(words) == 3:
                recipe, cwd = words[1], words[2]
                if wanted(recipe):
                    n += 1
                    script = os.path.join(a.out, f".run-{n:02d}-{recipe}.sh")
                    with open(script, "w", encoding="utf-8") as f:
                        f.write(f"# {where}\n{text}")
                    runs.append(f"{recipe}\t{cwd}\t{script}")
            elif words[0] == "in" and len(words) == 2:
                try:
                    with open(os.path.join(a.repo, words[1]), encoding="utf-8") as f:
                        found = text in f.read()
                except OSError as e:
                    errors.append(f"{where}: cannot read {words[1]}: {e}")
                    continue
                if not found:
                    errors.append(f"{where}: the block does not appear verbatim in {words[1]}; make them agree")
            else:
                errors.append(f"{where}: unknown mark `{mark}`")
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        return 1
    print("\n".join(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())

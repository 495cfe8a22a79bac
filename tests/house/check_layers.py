#!/usr/bin/env python3
"""The layer rules, enforced: every #include of the repository's C++ and CUDA
sources against the `May include:` line of the layer README that owns it.

How it works. A layer is a folder with a README.md holding a line that starts
with "May include:"; the rule is every `backticked` path on that line and the
lines after it up to the next blank line (prose in between is for people).
A path names a folder (everything under it) or one file. A source belongs to
the deepest layer folder above it, and may always include its own layer's
files. An include is resolved the way the build resolves it: beside the
including file, then from the repository root, src/ and include/; the
generated feature header is named `grove_build_info.h` in a rule. Angle
includes resolve the same way from the root, src/ and include/ (the build
finds them there too); what resolves to no file of the repository is the
system's or a third party's and is not checked. Block comments and `#if 0`
regions are read as the compiler reads them: not at all.

Two more rules hold everywhere:
  - a source that tests a GROVE_HAVE_* feature macro includes the one
    generated feature header before its first test, and tests it with
    `#if` (the macros are 0 or 1: `#ifdef GROVE_HAVE_CUDA` is always true);
  - the README's rule names only paths that exist.

Usage: check_layers.py [repository root]   (exit 1 and one line per broken
edge when a rule is broken; --list prints every layer and its rule)
"""
import os
import re
import sys

SOURCE_EXT = (".h", ".hpp", ".cc", ".cpp", ".c", ".cu", ".cuh")
GENERATED = "grove_build_info.h"
SKIP_DIRS = {"build", ".git", ".venv", ".bundle", "fixtures"}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
FEATURE_RE = re.compile(r"^\s*#\s*(?:el)?if\b.*\bGROVE_HAVE_[A-Z_]+", re.M)
DEFINED_RE = re.compile(r"^\s*#\s*(?:ifdef|ifndef)\s+GROVE_HAVE_|\bdefined\s*\(?\s*GROVE_HAVE_", re.M)
BLOCK_COMMENT_RE = re.compile(r"/\*.*?\*/", re.S)
IF0_RE = re.compile(r"^\s*#\s*if\s+0\b.*?^\s*#\s*endif\b", re.M | re.S)


def preprocessed(text):
    """The text without block comments (their lines kept) and #if 0 regions."""
    text = BLOCK_COMMENT_RE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    text = text.replace("\\\n", " ")  # continued lines join
    return IF0_RE.sub("", text)


def read_rule(readme):
    """The backticked paths of the README's 'May include:' paragraph, or None."""
    lines = open(readme, encoding="utf-8").read().split("\n")
    for i, line in enumerate(lines):
        text = line.replace("**", "")
        if text.startswith("May include:"):
            para = [text]
            for more in lines[i + 1:]:
                if not more.strip():
                    break
                para.append(more)
            return [p.rstrip("/") for p in re.findall(r"`([^`]+)`", " ".join(para))]
    return None


def find_layers(root):
    layers = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".")]
        if "README.md" in filenames:
            rel = os.path.relpath(dirpath, root)
            rule = read_rule(os.path.join(dirpath, "README.md"))
            if rule is not None and rel != ".":
                layers[rel] = rule
    return layers


def owner(path, layers):
    """The deepest layer folder that holds `path` (repository-relative), or None."""
    best = None
    for layer in layers:
        if path.startswith(layer + "/") and (best is None or len(layer) > len(best)):
            best = layer
    return best


def resolve(root, src, kind, name):
    if name == GENERATED:
        return GENERATED
    here = os.path.dirname(src)
    bases = ("", "src", "include") if kind == "<" else (here, "", "src", "include")
    for base in bases:
        cand = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def allowed(target, rule):
    for item in rule:
        if target == item or target.startswith(item + "/"):
            return True
    return False


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), "..", ".."))
    layers = find_layers(root)
    if "--list" in sys.argv:
        for layer in sorted(layers):
            print(f"{layer}: {', '.join(layers[layer])}")
        return 0
    problems = []
    for layer, rule in sorted(layers.items()):
        for item in rule:
            if item != GENERATED and not os.path.exists(os.path.join(root, item)):
                problems.append(f"{layer}/README.md: the rule names {item}, which does not exist")
    checked = edges = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".")]
        for fn in filenames:
            if not fn.endswith(SOURCE_EXT):
                continue
            src = os.path.relpath(os.path.join(dirpath, fn), root)
            layer = owner(src, layers)
            text = preprocessed(open(os.path.join(root, src), encoding="utf-8", errors="replace").read())
            includes = INCLUDE_RE.findall(text)
            feature = FEATURE_RE.search(text)
            if feature:
                header = [m for m in INCLUDE_RE.finditer(text) if m.group(2) == GENERATED]
                if not header:
                    problems.append(f"{src}: tests a GROVE_HAVE_* macro without including {GENERATED}")
                elif header[0].start() > feature.start():
                    problems.append(f"{src}: tests a GROVE_HAVE_* macro before including {GENERATED}")
            if DEFINED_RE.search(text):
                problems.append(f"{src}: tests whether a GROVE_HAVE_* macro is defined; they are "
                                f"always defined (0 or 1): use #if")
            if layer is None:
                continue
            checked += 1
            for kind, name in includes:
                target = resolve(root, src, kind, name)
                if target is None:
                    continue
                edges += 1
                if target.startswith(layer + "/") or allowed(target, layers[layer]):
                    continue
                problems.append(f"{src}: includes {target}, which {layer}/README.md does not allow")
    for p in problems:
        print(p)
    print(f"check_layers: {len(layers)} layers, {checked} sources, {edges} include edges, "
          f"{len(problems)} broken", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The layer rules, enforced: every #include of the repository's C++ and CUDA
sources against the `May include:` line of the layer README that owns it.

How it works. A layer is a folder with a README.md holding a line that starts
with "May include:"; the rule is every `backticked` path on that line and the
lines after it up to the next blank line (prose in between is for people).
A path names a folder (everything under it) or one file. A source belongs to
the deepest layer folder above it, and may always include its own layer's
files. An include is resolved the way the build resolves it: beside the
including file, then from the repository root, src/ and include/ (and,
for tests, tests/); the
generated feature header is named `grove_build_info.h` in a rule. Angle
includes resolve the same way from the root, src/ and include/ (the build
finds them there too); what resolves to no file of the repository is the
system's or a third party's and is not checked. Block comments and `#if 0`
regions are read as the compiler reads them: not at all.

More rules hold everywhere:
  - every source belongs to a layer: a source in a folder with no rule
    above it (tests included) is a failure, not a pass;
  - a source that tests a GROVE_HAVE_* feature macro includes the one
    generated feature header before its first test, and tests it with
    `#if` (the macros are 0 or 1: `#ifdef GROVE_HAVE_CUDA` is always true);
  - the README's rule names only paths that exist;
  - link lines keep the rule too. Every CMake file is read for the targets
    grove_layer() defines (a target's files: its listed sources and the
    headers beside them, or everything under its folder when its sources
    are a variable; src/capi's also the public header it implements) and
    for what each target links: grove_layer's DEPS,
    target_link_libraries and grove_gtest's LIBS. A target defined in a
    layer may link another only if its rule allows including one of that
    target's files (or the target lies in its own layer).

Usage: check_layers.py [repository root]   (exit 1 and one line per broken
edge when a rule is broken; --list prints every layer and its rule)
"""
import os
import re
import sys

SOURCE_EXT = (".h", ".hpp", ".cc", ".cpp", ".c", ".cu", ".cuh")
GENERATED = "grove_build_info.h"
SKIP_DIRS = {"build", ".git", ".venv", ".bundle", "fixtures"}
CMAKE_FILES = ("CMakeLists.txt",)
PUBLIC_HEADER = "include/grove/grove.h"
CMAKE_EXT = ".cmake"
CALL_RE = re.compile(r"\b(grove_layer|grove_gtest|target_link_libraries|add_executable|add_library)\s*\(", re.I)
LINK_KEYWORDS = {"PUBLIC", "PRIVATE", "INTERFACE", "LINK_PUBLIC", "LINK_PRIVATE"}
SECTION_WORDS = {"SOURCES", "DEPS", "LIBS", "LABELS", "TIMEOUT", "PROCESSORS", "STATIC", "SHARED",
                 "MODULE", "OBJECT", "EXCLUDE_FROM_ALL"}
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
    if src.startswith("tests/"):  # test programs also see tests/ (grove_gtest)
        bases += ("tests",)
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


def cmake_calls(text):
    """(command, argument tokens) of every call CALL_RE names, comments dropped."""
    text = re.sub(r"#[^\n]*", "", text)
    calls = []
    for m in CALL_RE.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        args = text[m.end():i - 1]
        calls.append((m.group(1).lower(), re.findall(r'"[^"]*"|[^\s"]+', args)))
    return calls


def source_token(token, here):
    """A SOURCES token as a repository-relative path, or None (a variable)."""
    for var in ("${CMAKE_CURRENT_SOURCE_DIR}/", "${CMAKE_CURRENT_LIST_DIR}/",
                "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/"):
        if token.startswith(var):
            token = token[len(var):]
    if "$" in token:
        return None
    return os.path.normpath(os.path.join(here, token))


def cmake_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".")]
        for fn in filenames:
            if fn in CMAKE_FILES or fn.endswith(CMAKE_EXT):
                yield os.path.join(dirpath, fn), os.path.relpath(dirpath, root)


def read_targets(root):
    """Libraries: name -> (folder, files, whole) where `whole` means the
    sources came from a variable (the target stands for its whole folder).
    And link edges: (target or program, its folder, what it links, the CMake
    file). Definitions are read first from every file, so a link line in
    another file than the target's definition is charged to the right folder."""
    calls = [(path, here, cmake_calls(open(path, encoding="utf-8").read()))
             for path, here in cmake_files(root)]
    defined, targets, links, aliases = {}, {}, [], {}
    for path, here, cs in calls:
        for cmd, args in cs:
            if args and cmd in ("add_executable", "add_library", "grove_gtest", "grove_layer"):
                defined.setdefault(args[0], here)
            if not args or cmd not in ("grove_layer", "add_library"):
                continue
            name, rest = args[0], args[1:]
            if "ALIAS" in rest:  # another name of a library defined elsewhere
                aliases[name] = rest[rest.index("ALIAS") + 1]
                continue
            if "INTERFACE" in rest or "IMPORTED" in rest:
                continue  # third-party flags and libraries, no grove sources
            section = "SOURCES" if cmd == "add_library" else None
            files, whole = set(), False
            for t in rest:
                if t in SECTION_WORDS:
                    section = t if t in ("SOURCES", "DEPS") else section
                elif section == "SOURCES":
                    src = source_token(t, here)
                    if src is None:
                        whole = True
                    elif src.endswith(SOURCE_EXT):
                        files.add(src)
                        files.add(os.path.splitext(src)[0] + ".h")
            if here == "src/capi" or name == "grove":  # they implement the public header
                files.add(PUBLIC_HEADER)
            targets[name] = (here, files, whole)
    for alias, real in aliases.items():
        if real in targets:
            targets[alias] = targets[real]
    for path, here, cs in calls:
        rel = os.path.relpath(path, root)
        for cmd, args in cs:
            if not args:
                continue
            name, rest = args[0], args[1:]
            if "$" in name:
                continue  # a function's target, named by a variable: unknown here
            if cmd in ("grove_layer", "grove_gtest"):
                section = None
                for t in rest:
                    if t in SECTION_WORDS:
                        section = t
                    elif section in ("DEPS", "LIBS"):
                        links.append((name, defined.get(name, here), t, rel))
            elif cmd == "target_link_libraries":
                for t in rest:
                    if t not in LINK_KEYWORDS:
                        links.append((name, defined.get(name, here), t, rel))
    return targets, links


def link_problems(root, layers):
    targets, links = read_targets(root)
    problems = []
    for name, folder, dep, cmake_file in links:
        if dep not in targets or dep == name:
            continue  # a system or third-party library, a variable, or itself
        layer = owner(folder + "/", layers)
        if layer is None:
            continue  # reported as a source without a rule
        dep_folder, dep_files, whole = targets[dep]
        if dep_folder == layer or dep_folder.startswith(layer + "/"):
            continue
        rule = layers[layer]
        if PUBLIC_HEADER in dep_files and allowed(PUBLIC_HEADER, rule):
            continue
        # A library of a whole folder needs the folder; one of listed
        # sources, one of its files.
        if allowed(dep_folder, rule) or (not whole and any(allowed(f, rule) for f in dep_files)):
            continue
        problems.append(f"{cmake_file}: {name} links {dep} ({dep_folder}), which "
                        f"{layer}/README.md does not allow")
    return problems


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
                problems.append(f"{src}: no README.md with a 'May include:' rule in its folder "
                                f"or above it")
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
    problems += link_problems(root, layers)
    for p in problems:
        print(p)
    print(f"check_layers: {len(layers)} layers, {checked} sources, {edges} include edges, "
          f"{len(problems)} broken", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

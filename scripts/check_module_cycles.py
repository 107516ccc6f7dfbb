#!/usr/bin/env python3
"""No two modules of a crate import each other (ARCHITECTURE.md, Invariants).

For each crate under crates/, collects which of its modules each module names and prints the
pairs that name each other, crate by crate. A module is a top-level one (`src/x.rs` or
`src/x/`), or a file inside a directory module beside its siblings (`src/hub/client.rs`
next to `src/hub/stage.rs`). A module names another by `crate::x`, `crate::{x, ...}` or
`super::x`, anywhere in its text: code, tests and doc links alike. A circle is usually one
helper in the wrong file; move it to the module both sides can depend on.

Exits 1 when a crate has a pair that ALLOWED does not list.
"""

import os
import re
import sys

# Circles known and being removed, as (crate, module, module); none today.
ALLOWED: set = set()

CRATE_PATH = re.compile(r"crate::((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)")
CRATE_GROUP = re.compile(r"crate::\{([^}]*)\}")
SUPER_PATH = re.compile(r"\bsuper::((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)")


def module_path(src, path):
    """`src/hub/client.rs` → ["hub", "client"]; a mod.rs, lib.rs or main.rs is its directory."""
    parts = os.path.relpath(path, src)[:-3].split(os.sep)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return parts


def named_paths(parts, text):
    """Every module path the text names, as a list of segments from the crate root."""
    for m in CRATE_PATH.finditer(text):
        yield m.group(1).split("::")
    for m in CRATE_GROUP.finditer(text):
        for item in m.group(1).split(","):
            if item.strip():
                yield item.strip().split("::")
    for m in SUPER_PATH.finditer(text):
        yield parts[:-1] + m.group(1).split("::")


def cycles(src):
    """Pairs of sibling modules (at any depth) that name each other, as sorted path strings."""
    modules = set()
    edges = set()
    for root, _, files in os.walk(src):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            parts = module_path(src, path)
            for depth in range(1, len(parts) + 1):
                modules.add(tuple(parts[:depth]))
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for target in named_paths(parts, text):
                # The first segment where the two paths part: siblings under a common parent.
                k = 0
                while k < len(parts) and k < len(target) and parts[k] == target[k]:
                    k += 1
                if k < len(parts) and k < len(target):
                    edges.add((tuple(parts[: k + 1]), tuple(target[: k + 1])))
    found = set()
    for a, b in edges:
        if (b, a) in edges and a in modules and b in modules:
            found.add(tuple(sorted(("/".join(a), "/".join(b)))))
    return sorted(found)


def main():
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    failed = False
    for crate in sorted(os.listdir("crates")):
        src = os.path.join("crates", crate, "src")
        if not os.path.isdir(src):
            continue
        found = cycles(src)
        print(crate, found)
        for a, b in found:
            if (crate, a, b) not in ALLOWED:
                print(f"{crate}: {a} and {b} import each other; move what one takes from the "
                      "other to a module both can depend on", file=sys.stderr)
                failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

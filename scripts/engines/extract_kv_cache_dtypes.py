#!/usr/bin/env python3
"""Extract the KV cache dtypes each engine accepts (crates/preflight-plan/data/kv_cache_dtypes.json).

`--kv-dtype` is refused for an engine whose own flag would refuse it: vLLM has no q4_0 cache,
llama.cpp no FP8 one. The choices are read from the released packages, not retyped:

  vllm       0.19.0  `CacheDType = Literal[...]` in vllm/config/cache.py (what
                     `--kv-cache-dtype` validates against)
  sglang     0.5.23  the `choices=[...]` of the `kv_cache_dtype` field in
                     sglang/srt/arg_groups/fields/model.py
  llama.cpp  0.3.36  `kv_cache_types` in the vendored common/arg.cpp (what `-ctk` / `-ctv`
                     parse), each `GGML_TYPE_X` as `ggml_type_name` prints it (lower case)

Nothing is installed or imported: archives are opened with zipfile/tarfile, Python parsed with
`ast`, C++ read with a regular expression. Download the inputs (outside the repository):

    pip download --no-deps vllm==0.19.0 --platform manylinux_2_31_x86_64 \\
        --only-binary=:all: --python-version 3.11 -d PKGS
    pip download --no-deps sglang==0.5.23 --platform manylinux_2_34_x86_64 \\
        --only-binary=:all: --python-version 3.11 -d PKGS
    pip download --no-deps --no-binary llama-cpp-python llama_cpp_python==0.3.36 -d PKGS

    python3 scripts/engines/extract_kv_cache_dtypes.py PKGS crates/preflight-plan/data          # write
    python3 scripts/engines/extract_kv_cache_dtypes.py PKGS crates/preflight-plan/data --check  # compare
"""

import argparse
import ast
import re
import sys
from pathlib import Path

from extract_config_keys import PACKAGES as CONFIG_KEY_PACKAGES
from extract_config_keys import Archive, check_package, dump

SCRIPT = "scripts/engines/extract_kv_cache_dtypes.py"
OUT_FILE = "kv_cache_dtypes.json"

PACKAGES = {
    "vllm": ("vllm-0.19.0-cp38-abi3-manylinux_2_31_x86_64.whl", "0.19.0",
             "2d0e5fae45367bdbf111fcad68f4c0f8fdddd2f2fb643e52f0f2daebef7b41cf"),
    "sglang": ("sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl", "0.5.23",
               "00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937"),
    "llama_cpp": CONFIG_KEY_PACKAGES["llama-cpp-python"],
}

VLLM_FILE = "vllm/config/cache.py"
SGLANG_FILE = "sglang/srt/arg_groups/fields/model.py"
LLAMA_FILE = "vendor/llama.cpp/common/arg.cpp"


def strings(node):
    return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]


def vllm_values(text):
    """`CacheDType = Literal["auto", ...]` at module level."""
    for node in ast.parse(text).body:
        if (isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["CacheDType"]
                and isinstance(node.value, ast.Subscript)):
            return strings(node.value.slice), f"{VLLM_FILE}:{node.lineno}-{node.end_lineno}"
    sys.exit(f"error: no CacheDType in {VLLM_FILE}")


def sglang_values(text):
    """The `choices=[...]` keyword inside the annotation of the `kv_cache_dtype` field."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "kv_cache_dtype":
            for call in ast.walk(node.annotation):
                for kw in getattr(call, "keywords", []):
                    if kw.arg == "choices" and isinstance(kw.value, ast.List):
                        return strings(kw.value), f"{SGLANG_FILE}:{kw.value.lineno}-{kw.value.end_lineno}"
    sys.exit(f"error: no kv_cache_dtype choices in {SGLANG_FILE}")


def llama_cpp_values(text):
    """`const std::vector<ggml_type> kv_cache_types = { GGML_TYPE_F32, ... };`"""
    m = re.search(r"kv_cache_types\s*=\s*\{([^}]*)\}", text)
    if not m:
        sys.exit(f"error: no kv_cache_types in {LLAMA_FILE}")
    first = text.count("\n", 0, m.start()) + 1
    last = text.count("\n", 0, m.end()) + 1
    # ggml_type_name() is the type traits' `type_name`: the enum name after GGML_TYPE_, lower case.
    values = [t.lower() for t in re.findall(r"GGML_TYPE_(\w+)", m.group(1))]
    return values, f"{LLAMA_FILE}:{first}-{last}"


READERS = {
    "vllm": (VLLM_FILE, vllm_values),
    "sglang": (SGLANG_FILE, sglang_values),
    "llama_cpp": (LLAMA_FILE, llama_cpp_values),
}


def generate(pkgs):
    doc = {
        "schema": "preflight kv_cache_dtypes v1",
        "extracted_by": SCRIPT + " (static read of the released archives; nothing imported)",
        "source_convention": "path inside the archive (sdist: relative to its top directory):line-end",
    }
    for engine, (fname, version, digest) in PACKAGES.items():
        path = check_package(pkgs, engine, PACKAGES, SCRIPT)
        name, read = READERS[engine]
        text = Archive(path, lambda member, name=name: member == name).files.get(name)
        if text is None:
            sys.exit(f"error: {name} not in {path}")
        values, source = read(text)
        doc[engine] = {"package": fname, "version": version, "sha256": digest, "values": values, "source": source}
    return dump(doc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("pkgs", help="directory holding the three downloaded archives")
    ap.add_argument("out", help="output directory (crates/preflight-plan/data)")
    ap.add_argument("--check", action="store_true", help="compare with the committed file instead of writing")
    args = ap.parse_args()
    text = generate(args.pkgs)
    target = Path(args.out) / OUT_FILE
    if not args.check:
        target.write_text(text)
        return
    if not target.exists() or target.read_text() != text:
        sys.exit(f"check failed: {target} differs from a fresh extraction; rerun without --check")
    print(f"ok: {OUT_FILE} reproduces byte for byte")


if __name__ == "__main__":
    main()

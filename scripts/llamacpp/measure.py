#!/usr/bin/env python3
"""Measure what llama.cpp allocates for GGUF files and write oracle lines in the format of
`fixtures/oracles/llamacpp/llamacpp-oracle.jsonl` (one JSON object per context).

    python3 scripts/llamacpp/measure.py MEASURE_BIN OUT.jsonl MODEL.gguf [MODEL.gguf ...]

MEASURE_BIN is `scripts/llamacpp/measure.c` built against llama-cpp-python 0.3.36's vendored
llama.cpp (commit 0c1e570). A MODEL.gguf may be a header stub grown to its full size
(`truncate -s`): weights are mapped, never read. Every MiB figure in a line is parsed from
llama.cpp's own log, kept verbatim in `log_excerpt`; nothing is computed here.

Runs per model: n_ctx {4096, 8192, 10000, 32768} x {1 sequence; 4 sequences, one stream
each (the C API default); 4 sequences, unified} x flash attention {off, on}; n_batch 2048,
n_ubatch 512, f16 K/V, swa_full true (the C API default). A model whose runs create two KV
caches (llama_kv_cache_iswa: the non-SWA one, then the SWA one) is measured again with swa_full
false (the CLI tools' default), which sizes the SWA cache by its window.
"""

import json
import os
import re
import subprocess
import sys

COMMIT = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
CONTEXTS = [4096, 8192, 10000, 32768]
SEQUENCES = [(1, 0), (4, 0), (4, 1)]
N_BATCH, N_UBATCH = 2048, 512

MIB = r"([0-9.]+) MiB"


def runs(swa_full=1):
    for n_ctx in CONTEXTS:
        for n_seq, unified in SEQUENCES:
            for flash in (0, 1):
                yield n_ctx, n_seq, unified, flash, swa_full, N_UBATCH


def parse_run(head, lines, arch, model_lines, gguf):
    n_ctx, n_seq, unified, flash, swa_full, ubatch = head
    text = "".join(lines)
    row = {
        "model": os.path.basename(gguf).removesuffix(".gguf"),
        "arch": arch,
        "gguf_file": os.path.basename(gguf),
        "file_bytes": os.path.getsize(gguf),
        "llama_cpp_python": "0.3.36",
        "llama_cpp_commit": COMMIT,
        "n_ctx_requested": n_ctx,
        "n_seq_max": n_seq,
        "kv_unified": bool(unified),
        "swa_full": bool(swa_full),
        "flash_attn": bool(flash),
        "n_batch": N_BATCH,
        "n_ubatch": ubatch,
        "use_extra_bufts": False,
        "ok": "done\n" in lines,
    }
    mapped = [float(m) for m in re.findall(r"CPU_Mapped model buffer size = +" + MIB, model_lines)]
    row["model_mapped_mib"] = round(sum(mapped), 2)
    if m := re.search(r"n_ctx_seq += (\d+)", text):
        row["n_ctx_seq"] = int(m.group(1))
    if m := re.search(r"n_ctx += (\d+)", text):
        row["n_ctx_used"] = int(m.group(1))
    row["kv_mib"] = round(sum(float(x) for x in re.findall(r"KV buffer size = +" + MIB, text)), 2)
    row["rs_mib"] = round(sum(float(x) for x in re.findall(r"RS buffer size = +" + MIB, text)), 2)
    out = re.findall(r"output buffer size = +" + MIB, text)
    row["output_mib"] = round(sum(float(x) for x in out), 2)
    compute = re.findall(r"compute buffer size = +" + MIB, text)
    row["compute_mib"] = round(sum(float(x) for x in compute), 2)
    caches = []
    for m in re.finditer(
        r"llama_kv_cache: size = +([0-9.]+) MiB \( *(\d+) cells, +(\d+) layers, +(\d+)/(\d+) seqs\), "
        r"K \((\w+)\): +([0-9.]+) MiB, V \((\w+)\): +([0-9.]+) MiB",
        text,
    ):
        caches.append({
            "kind": "kv", "mib": float(m.group(1)), "cells": int(m.group(2)),
            "layers": int(m.group(3)), "n_stream": int(m.group(4)), "n_seq_max": int(m.group(5)),
            "type_k": m.group(6), "k_mib": float(m.group(7)),
            "type_v": m.group(8), "v_mib": float(m.group(9)),
        })
    for m in re.finditer(
        r"llama_memory_recurrent: size = +([0-9.]+) MiB \( *(\d+) cells, +(\d+) layers, +(\d+) seqs +(\d+) rs_seq\), "
        r"R \((\w+)\): +([0-9.]+) MiB, S \((\w+)\): +([0-9.]+) MiB",
        text,
    ):
        caches.append({
            "kind": "recurrent", "mib": float(m.group(1)), "cells": int(m.group(2)),
            "layers": int(m.group(3)), "n_seq_max": int(m.group(4)), "n_rs_seq": int(m.group(5)),
            "type_r": m.group(6), "r_mib": float(m.group(7)),
            "type_s": m.group(8), "s_mib": float(m.group(9)),
        })
    kv = [c for c in caches if c["kind"] == "kv"]
    if len(kv) == 2:
        # llama_kv_cache_iswa logs its non-SWA cache first (llama-kv-cache-iswa.cpp:82-93).
        kv[0]["role"], kv[1]["role"] = "non-SWA", "SWA"
    row["caches"] = caches
    row["log_excerpt"] = model_lines + text
    return row


def measure(binary, gguf, swa_full=1):
    stdin = "".join(" ".join(map(str, r)) + "\n" for r in runs(swa_full))
    done = subprocess.run([binary, gguf], input=stdin, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{gguf}: measure exited {done.returncode}: {done.stderr[-2000:]}")
    lines = done.stdout.splitlines(keepends=True)
    arch = None
    model_lines = ""
    rows, head, body = [], None, []
    for line in lines:
        if m := re.search(r"arch += (\S+)", line):
            arch = m.group(1)
        if line.startswith("run "):
            if head:
                rows.append(parse_run(head, body, arch, model_lines, gguf))
            head, body = tuple(int(x) for x in line.split()[1:]), []
        elif head is None:
            model_lines += line
        else:
            body.append(line)
    if head:
        rows.append(parse_run(head, body, arch, model_lines, gguf))
    return rows


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    binary, out, models = sys.argv[1], sys.argv[2], sys.argv[3:]
    with open(out, "a", encoding="utf-8") as f:
        for gguf in models:
            rows = measure(binary, gguf)
            if any(c.get("role") == "SWA" for r in rows for c in r["caches"]):
                rows += measure(binary, gguf, swa_full=0)
            for row in rows:
                f.write(json.dumps(row, separators=(",", ":")) + "\n")
            print(f"{gguf}: measured", file=sys.stderr)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Regenerate the planner's engine and device data (crates/preflight-plan/data/).

The planner judges "will it run there?" from two committed files, trimmed to what the
judgements need:

  engines.json  registered architectures, quantization methods, kernel and attention gates
                of vLLM 0.33.0, SGLang 0.5.23, llama.cpp (llama-cpp-python 0.3.36) and
                transformers 5.24.0, each fact with its `path:line` inside the released package
  devices.json  the device catalogue: compute capability, memory, bandwidth, dense TFLOPS,
                each with its vendor source; the CUDA-visible total where a vLLM startup log
                measured it

Input: the full extractions the project keeps beside the repository (`engines/*.json`, each
read straight from the released wheel/sdist whose sha256 it records; see that directory's
README) and the vLLM startup-log records (`oracles/vllm-startup-logs.jsonl`). Reading the
wheels themselves (~1 GB for vLLM alone, four extractors) is the upstream step; this script
starts from its output, and checks every hand-read kernel gate below against the extracted
source text, so a new release whose code moved fails here instead of silently changing a
verdict.

    # DIR holds engines/ and oracles/ (the extractions beside the clone: ../shared in CI)
    python3 scripts/engines/regenerate.py --shared DIR            # write
    python3 scripts/engines/regenerate.py --shared DIR --check    # compare only
    # and against the released archives themselves (sha256 + every cited registry line):
    pip download --no-deps transformers==5.24.0 ... -d pkgs
    python3 scripts/engines/regenerate.py --shared DIR --check --packages pkgs
    # (with --packages, also data/config_keys.json, modelopt.json and llamacpp_keys.json,
    #  through extract_config_keys.py, from the same directory of archives)
    # config keys read per architecture, ModelOpt quant_algo values, llama.cpp GGUF keys
    # (config_keys.json, modelopt.json, llamacpp_keys.json): see scripts/engines/extract_config_keys.py

Output is deterministic (sorted keys, fixed indentation): a rerun reproduces the committed
files byte for byte.
"""

import argparse
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE.parent.parent / "crates" / "preflight-plan" / "data"

GIB = 1 << 30

# vLLM registry groups whose architectures run through vLLM's Transformers backend.
VLLM_TRANSFORMERS_GROUPS = {"_TRANSFORMERS_SUPPORTED_MODELS", "_TRANSFORMERS_BACKEND_MODELS"}

# Sparse-MLA candidates of vLLM's CUDA priority function, per capability branch
# (vllm/platforms/cuda.py:_get_backend_priorities). Each name must appear in that function's
# source; each backend's accepted majors are then read from its supports_compute_capability.
VLLM_SPARSE_MLA_CANDIDATES = {
    "10": ["FLASHINFER_MLA_SPARSE", "FLASHMLA_SPARSE", "FLASH_ATTN_MLA_SPARSE_FA4"],
    "12": ["FLASHINFER_MLA_SPARSE_SM120"],
    "other": ["FLASH_ATTN_MLA_SPARSE", "FLASHMLA_SPARSE", "FLASHINFER_MLA_SPARSE_SM90"],
}

# Kernel paths read by hand from the vLLM 0.33.0 wheel (engines/README.md "Worked questions"):
# for each weight format, the capability from which a native kernel exists, and the fallback
# vLLM's own selection reaches below it. `check` strings must occur in the cited extracted
# code, so the table is re-verified on every regeneration.
VLLM_KERNEL_PATHS = [
    {
        "format": "fp8",
        "native": [
            {
                "from": 89,
                "below": 1000,
                "kernel": "FP8 tensor-core GEMMs (CUTLASS / DeepGEMM / FlashInfer block-FP8); vLLM's supports_fp8() is cc >= 8.9",
            },
        ],
        "fallback": "Marlin weight-only FP8 (W8A16): weights stay FP8, activations BF16",
        "fallback_from": 75,
        "source": "vllm/model_executor/layers/quantization/utils/w8a8_utils.py:21-28; vllm/model_executor/layers/quantization/fp8.py:247-250; .../kernels/linear/scaled_mm/marlin.py:35-45",
    },
    {
        "format": "nvfp4",
        "native": [
            {
                "from": 100,
                "below": 1000,
                "kernel": "FlashInfer CUTLASS / CuTe-DSL NVFP4 GEMMs and NVFP4 MoE (cc >= 10.0; FlashInfer is a vLLM dependency)",
            },
        ],
        "fallback": "Marlin weight-only FP4 (W4A16): \"Weight-only FP4 compression will be used leveraging the Marlin kernel\"",
        "fallback_from": 75,
        "source": "vllm/model_executor/kernels/linear/__init__.py:593-609; .../nvfp4/marlin.py:22-38; vllm/model_executor/layers/fused_moe/oracle/nvfp4.py:203-212",
    },
    {
        "format": "mxfp4_moe",
        # In the MXFP4 MoE oracle's order; the first whose gate passes is used.
        "native": [
            {"from": 100, "below": 110, "kernel": "FlashInfer TRT-LLM MXFP4 MoE (SM10x)"},
            {
                "from": 90,
                "below": 130,
                "kernel": "OAI Triton MXFP4 MoE (9.0 <= cc < 13.0)",
                "needs": "triton_kernels, which vLLM does not depend on",
            },
            {"from": 90, "below": 91, "kernel": "FlashInfer CUTLASS MXFP4xBF16 MoE (cc 9.0 exactly)"},
            {
                # FP4 tensor cores exist from 10.0; below it the README's worked answer is Marlin.
                "from": 100,
                "below": 1000,
                "kernel": "CUTLASS MXFP4xMXFP4 MoE",
                "compiled": "mxfp4_experts_quant_supported (a torch.ops._C op: its capability gate is compiled code)",
            },
        ],
        "fallback": "Marlin weight-only MXFP4 MoE experts",
        "fallback_from": 75,
        "source": "vllm/model_executor/layers/fused_moe/oracle/mxfp4.py:402-435,650-760; .../experts/gpt_oss_triton_kernels_moe.py:41-53; .../experts/flashinfer_cutlass_moe.py:128-139; .../experts/marlin_moe.py:592-594",
    },
]

# Quantization methods vLLM renames by the checkpoint's model_type before it looks them up:
# a quantization config's `override_quantization_method` claims the checkpoint. The cited
# line must name the method it resolves to (`--packages` checks it in the wheel).
VLLM_METHOD_OVERRIDES = [
    {
        "declared": "mxfp4",
        "model_type": "gpt_oss",
        "resolves_to": "gpt_oss_mxfp4",
        "source": "vllm/model_executor/layers/quantization/mxfp4.py:144-146 (GptOssMxfp4Config.override_quantization_method)",
    },
]

# The native NVFP4 and MXFP4 paths above count FlashInfer as present: the wheel requires it
# (`--packages` checks its METADATA says so).
VLLM_DEFAULT_DEPENDENCY = "Requires-Dist: flashinfer-python"


# SGLang: only minimum capabilities are extracted, not its kernel selection. Below the
# hardware's native support for a format (FP8 tensor cores from 8.9, FP4 from 10.0) any path
# that loads is necessarily a non-native one; that is all the judgement claims.
HARDWARE_NATIVE_FROM = {"fp8": 89, "nvfp4": 100, "mxfp4_moe": 90}

# Devices: the catalogue's own names (lower-case vendor-model-memory) for devices.json ids.
DEVICE_NAMES = {
    "h100-80gb-sxm": "h100-80gb",
    "h100-pcie": "h100-pcie",
    "h200": "h200",
    "b200": "b200",
    "gb200": "gb200",
    "a100-80gb": "a100-80gb",
    "a100-40gb": "a100-40gb",
    "l40s": "l40s",
    "l4": "l4",
    "a10g": "a10g",
    "rtx-3090": "rtx-3090",
    "rtx-4090": "rtx-4090",
    "rtx-5090": "rtx-5090",
    "mi300x": "mi300x",
    "mi325x": "mi325x",
    "mi355x": "mi355x",
}

# A device the previous catalogue carried that devices.json has no record for. Kept so
# `h100-94gb` keeps meaning what it meant; its figures say where they come from.
EXTRA_DEVICES = [
    {
        "name": "h100-94gb",
        "aliases": ["h100-nvl"],
        "description": "NVIDIA H100 NVL 94GB (HBM3)",
        "vendor": "NVIDIA",
        "compute_capability": {
            "value": 90,
            "source": "https://developer.nvidia.com/cuda-gpus (\"9.0 | NVIDIA GH200 NVIDIA H200 NVIDIA H100\"; the NVL is an H100)",
        },
        "memory_bytes": {
            "value": 94 * GIB,
            "source": "carried from preflight's earlier catalogue (NVIDIA's H100 NVL product page: 94GB); not in devices.json",
        },
    },
]

# CUDA-visible totals: the startup-log `gpu` labels that name one catalogue device exactly.
CUDA_VISIBLE_LABELS = {"H100-80GB": "h100-80gb", "RTX 3090": "rtx-3090"}


def die(message):
    sys.exit(f"regenerate: {message}")


def require(text, needle, where):
    if needle not in text:
        die(f"{where}: expected `{needle}` in the extracted source; the engine's code moved — re-read it")


def vllm(data):
    archs = {}
    for a in data["architectures"]:
        flags = a.get("flags", {})
        entry = archs.setdefault(a["architecture"], {"source": a["source"], "flags": set()})
        for flag, name in [
            ("is_hybrid", "hybrid"),
            ("is_attention_free", "attention_free"),
            ("supports_multimodal", "multimodal"),
        ]:
            if flags.get(flag, {}).get("value") is True:
                entry["flags"].add(name)
        if a.get("needs_sparse_mla_backend", {}).get("value") is True:
            entry["flags"].add("sparse_mla")
        if a["registry_group"] in VLLM_TRANSFORMERS_GROUPS:
            entry["flags"].add("transformers_backend")
    for entry in archs.values():
        entry["flags"] = sorted(entry["flags"])
    quant = {}
    for q in data["quantization_methods"]:
        if "online shorthand" in (q.get("config_class") or ""):
            continue
        caps = [r for group in q.get("min_capability", []) for r in (group.get("returns", []) if isinstance(group, dict) else group)]
        ints = [c for c in caps if isinstance(c, int)]
        quant[q["method"]] = {
            "min_capability": min(ints) if ints else None,
            "source": (q.get("min_capability") or [{}])[0].get("source", "") if isinstance((q.get("min_capability") or [{}])[0], dict) else "",
        }
    # Sparse MLA: which capability majors some candidate backend accepts.
    priority = data["attention_backend_priority_cuda"]["code"]
    backends = {b["backend"]: b for b in data["attention_backends"] if b.get("backend")}
    majors = set()
    sources = []
    for branch, names in VLLM_SPARSE_MLA_CANDIDATES.items():
        for name in names:
            require(priority, f"AttentionBackendEnum.{name}", "vllm _get_backend_priorities")
            b = backends.get(name) or die(f"vllm: no attention backend {name}")
            code = b["supports_compute_capability"]["code"]
            found = re.search(r"capability\.major == (\d+)", code)
            accepted = {int(found.group(1))} if found else set()
            found = re.search(r"capability\.major in \[([\d, ]+)\]", code)
            if found:
                accepted |= {int(x) for x in found.group(1).split(",")}
            if not accepted:
                die(f"vllm: cannot read {name}'s capability gate: {code!r}")
            if branch != "other":
                accepted &= {int(branch)}
            else:
                accepted -= {10, 12}
            majors |= accepted
            sources.append(b["supports_compute_capability"]["source"])
    gguf = data["gguf"]
    if gguf["gguf_in_QUANTIZATION_METHODS"] or gguf["gguf_in_LoadFormats"]:
        die("vllm: GGUF became built in; update the format judgement")
    plugin = next(m for m in gguf["metadata_mentions"] if "gguf-plugin" in m["text"])
    return {
        "version": data["version"],
        "package": data["package"],
        "package_sha256": data["package_sha256"],
        "architectures": archs,
        "previously_supported": {
            p["architecture"]: {"until": p["value"], "source": p["source"]} for p in data["previously_supported_architectures"]
        },
        "out_of_tree": {p["architecture"]: {"plugin": p["value"], "source": p["source"]} for p in data["out_of_tree_architectures"]},
        "quantization": quant,
        "sparse_mla": {
            "capability_majors": sorted(majors),
            "source": f"{data['attention_backend_priority_cuda']['source']}; " + "; ".join(sorted(set(sources))),
        },
        "gguf": {
            "loadable": False,
            "plugin": plugin["text"].split("Requires-Dist: ")[-1].split(";")[0],
            "source": f"{gguf['load_formats']['source']}; {plugin['source']}",
        },
        "kernel_paths": VLLM_KERNEL_PATHS,
        "method_overrides": VLLM_METHOD_OVERRIDES,
    }


def sglang(data):
    archs = {a["architecture"]: a["source"] for a in data["architectures"]}
    hybrid = {}
    for h in data["hybrid_classification"]:
        for cls, mt in h["config_model_types"].items():
            hybrid[mt["model_type"]] = f"{h['source']} ({h['function']})"
    quant = {}
    for q in data["quantization_methods"]:
        if q["registered_when"] != "always":
            continue
        caps = q.get("min_capability", {}).get("returns", [])
        # CUDA's branch: the first return value (the others are NPU / MUSA / ROCm branches).
        first = caps[0] if caps else None
        if isinstance(first, str):
            # `100 if self.use_mxfp8 else 80`: the plain CUDA branch is the `else`;
            # `60 if not _is_musa else 21`: it is the `if`.
            found = re.fullmatch(r"(\d+) if (not )?.* else (\d+)", first)
            first = int(found.group(1) if found.group(2) else found.group(3)) if found else None
        quant.setdefault(q["method"], {"min_capability": first, "source": q["min_capability"]["source"]})
    # `mxfp4` is registered on CUDA (its condition includes is_cuda()).
    for q in data["quantization_methods"]:
        if q["method"] == "mxfp4" and "is_cuda()" in q["registered_when"]:
            quant["mxfp4"] = {"min_capability": q["min_capability"]["returns"][0], "source": q["min_capability"]["source"]}
    fallback = data["unsupported_arch_fallback"]
    require(fallback["code"], "TransformersForCausalLM", "sglang _normalize_archs")
    return {
        "version": data["version"],
        "package": data["package"],
        "package_sha256": data["package_sha256"],
        "architectures": archs,
        "hybrid_model_types": hybrid,
        "quantization": quant,
        "transformers_fallback_source": fallback["source"],
        "sparse_mla_note": "DSA (sparse MLA) below SM90: SGLang's argument code does not refuse it; whether its kernels run is decided in compiled sgl-kernel code",
        "sparse_mla_source": data["dsa_sparse_mla"]["auto_resolution"]["source"],
    }


def llama_cpp(data):
    archs = {}
    for a in data["architectures"]:
        kind = "hybrid" if a["is_hybrid"] else "recurrent" if a["is_recurrent"] else "attention"
        archs[a["name"]] = {"kind": kind, "source": a["source"]}
    converter = {}
    for c in data["converter_hf_architectures"]:
        if c["writes"] != "text model GGUF":
            continue
        converter.setdefault(c["hf_architecture"], {"writes": c["general_architecture"], "source": c["source"]})
    return {
        "version": data["llama_cpp_python_version"],
        "package": data["package"],
        "package_sha256": data["package_sha256"],
        "architectures": archs,
        "converter": converter,
    }


def transformers(data):
    model_types = {}
    for m in data["model_types"]:
        classes = sorted(
            {c for key in ("causal_lm", "image_text_to_text", "multimodal_lm") for c in m.get(key, {}).get("classes", [])}
        )
        if classes:
            source = next(m[key]["source"] for key in ("causal_lm", "image_text_to_text", "multimodal_lm") if key in m)
            model_types[m["model_type"]] = {"classes": classes, "source": source}
    quant = sorted(q["method"] for q in data["quantization_methods"])
    return {
        "version": data["version"],
        "package": data["package"],
        "package_sha256": data["package_sha256"],
        "model_types": model_types,
        "quantization": quant,
    }


def capability(field):
    if not field:
        return None
    major, minor = field["value"].split(".")
    return int(major) * 10 + int(minor)


def figure(field, scale=1.0):
    if not field:
        return None
    return {"value": round(field["value"] * scale, 6), "source": field["source"]["url"]}


def devices(data, oracles):
    measured = {}
    for line in oracles.read_text().splitlines():
        record = json.loads(line)
        name = CUDA_VISIBLE_LABELS.get(record.get("gpu") or "")
        if name and record.get("gpu_total_gib"):
            measured.setdefault(name, []).append((record["gpu_total_gib"], record["id"]))
    out = []
    for d in data["devices"]:
        name = DEVICE_NAMES.get(d["id"]) or die(f"devices: no catalogue name for {d['id']}")
        memory = d.get("memory")
        memory_bytes = None
        if memory:
            # Device memory is built in binary units: a vendor's "80 GB" is 80 GiB.
            value = memory.get("bytes") or memory.get("bytes_if_binary_GiB")
            memory_bytes = {"value": value, "source": memory["source"]["url"]}
        entry = {
            "name": name,
            "aliases": sorted({d["id"]} - {name}),
            "description": d["name"],
            "vendor": d["vendor"],
            "compute_capability": (
                {"value": capability(d["compute_capability"]), "source": d["compute_capability"]["source"]["url"]}
                if d.get("compute_capability")
                else None
            ),
            "gfx_arch": {"value": d["gfx_arch"]["value"], "source": d["gfx_arch"]["source"]["url"]} if d.get("gfx_arch") else None,
            "memory_bytes": memory_bytes,
            "memory_bandwidth_tb_s": figure(d.get("memory_bandwidth")),
            "bf16_dense_tflops": figure(d.get("bf16_dense_tflops")),
            "fp8_dense_tflops": figure(d.get("fp8_dense_tflops")),
            "fp4_dense_tflops": figure(d.get("fp4_dense_tflops")),
        }
        if name in measured:
            values = Counter(v for v, _ in measured[name])
            gib, _ = values.most_common(1)[0]
            ids = sorted(i for v, i in measured[name] if v == gib)
            entry["cuda_visible_bytes"] = {
                "value": int(gib * GIB),
                "gib": gib,
                "source": f"oracles/vllm-startup-logs.jsonl gpu_total_gib, records {', '.join(map(str, ids))}",
            }
        out.append(entry)
    for extra in EXTRA_DEVICES:
        out.append(
            {
                "aliases": [],
                "gfx_arch": None,
                "memory_bandwidth_tb_s": None,
                "bf16_dense_tflops": None,
                "fp8_dense_tflops": None,
                "fp4_dense_tflops": None,
                **extra,
            }
        )
    return {"generated_by": "scripts/engines/regenerate.py from engines/devices.json (" + data["generated_by"] + ")", "rule": data["rule"], "devices": out}


def verify_packages(directory, engines_data):
    """Check the committed facts against the released packages themselves: each archive's
    sha256 must be the one the extraction recorded, and every registry line the data cites
    must name what the data says it names. Engines whose archive is not in `directory` are
    reported as skipped, never passed."""
    import hashlib
    import tarfile
    import zipfile

    def lines_of(archive, inner):
        if archive.suffix == ".whl":
            with zipfile.ZipFile(archive) as z:
                return z.read(inner).decode("utf-8", "replace").splitlines()
        with tarfile.open(archive) as t:
            top = t.getnames()[0].split("/")[0]
            return t.extractfile(f"{top}/{inner}").read().decode("utf-8", "replace").splitlines()

    def cited(archive, source, needle, cache, above=0):
        path, _, line = source.partition(":")
        first = int(line.split("-")[0].split(" ")[0])
        if path not in cache:
            cache[path] = lines_of(archive, path)
        text = "\n".join(cache[path][max(0, first - 1 - above) : first + 2])
        return needle in text

    # (cited line, what it must say, lines above it that may say it: a converter class's
    # `@ModelBase.register(...)` decorators sit above the `class` line the data cites).
    checks = {
        "vllm": lambda e: [(a["source"], f'"{name}"', 0) for name, a in e["architectures"].items()]
        + [(o["source"], f'"{o["resolves_to"]}"', 0) for o in e["method_overrides"]],
        "sglang": lambda e: [(src, "EntryClass", 0) for src in e["architectures"].values()],
        "llama_cpp": lambda e: [(c["source"], f'"{name}"', 15) for name, c in e["converter"].items()]
        + [(a["source"], f'"{name}"', 0) for name, a in e["architectures"].items()],
        "transformers": lambda e: [(m["source"], f'"{name}"', 0) for name, m in e["model_types"].items()],
    }
    failed = []
    for key, facts in checks.items():
        engine = engines_data[key]
        archive = Path(directory) / engine["package"]
        if not archive.exists():
            print(f"{key}: {engine['package']} not in {directory}: skipped")
            continue
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        if digest != engine["package_sha256"]:
            failed.append(f"{key}: sha256 {digest} is not the recorded {engine['package_sha256']}")
            continue
        if key == "vllm":
            metadata = "\n".join(lines_of(archive, f"vllm-{engine['version']}.dist-info/METADATA"))
            if VLLM_DEFAULT_DEPENDENCY not in metadata:
                failed.append(f"vllm: METADATA no longer has `{VLLM_DEFAULT_DEPENDENCY}`: FlashInfer paths are optional now")
        cache = {}
        pairs = facts(engine)
        bad = [src for src, needle, above in pairs if not cited(archive, src, needle, cache, above)]
        if bad:
            failed.append(f"{key}: {len(bad)} of {len(pairs)} cited lines do not say what the data says, e.g. {bad[:3]}")
        else:
            print(f"{key}: sha256 matches; {len(pairs)} cited lines checked in the archive")
    if failed:
        die("; ".join(failed))


def render(value):
    # One key a line, no indentation: diffs stay readable, the file stays small.
    return json.dumps(value, indent=0, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", type=Path, required=True, help="directory holding engines/ and oracles/")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="compare with the committed files, write nothing")
    parser.add_argument(
        "--packages",
        type=Path,
        help="a directory of the released archives (pip download ... --no-deps): check their sha256 and the cited lines",
    )
    args = parser.parse_args()
    engines = args.shared / "engines"
    load = lambda name: json.loads((engines / name).read_text())
    files = {
        "engines.json": render(
            {
                "from": "engines/{vllm,sglang,llamacpp,transformers}.json, read from the released packages (sha256 per engine)",
                "vllm": vllm(load("vllm.json")),
                "sglang": sglang(load("sglang.json")),
                "llama_cpp": llama_cpp(load("llamacpp.json")),
                "transformers": transformers(load("transformers.json")),
                "hardware_native_from": HARDWARE_NATIVE_FROM,
            }
        ),
        "devices.json": render(devices(load("devices.json"), args.shared / "oracles" / "vllm-startup-logs.jsonl")),
    }
    if args.packages:
        verify_packages(args.packages, json.loads(files["engines.json"]))
    stale = []
    for name, text in files.items():
        path = args.out / name
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
            print(f"wrote {path} ({len(text.encode())} bytes)")
    if stale:
        die(f"out of date: {', '.join(stale)} (rerun without --check)")
    if args.check:
        print("engine and device data reproduce byte for byte")
    if args.packages:
        # The config-key, ModelOpt and llama.cpp key data are read from the archives
        # themselves (transformers, vLLM, nvidia-modelopt, llama-cpp-python): the same check.
        extract = [sys.executable, str(HERE / "extract_config_keys.py"), str(args.packages), str(args.out)]
        subprocess.run(extract + (["--check"] if args.check else []), check=True)


if __name__ == "__main__":
    main()

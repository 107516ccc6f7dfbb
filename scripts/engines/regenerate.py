#!/usr/bin/env python3
"""Regenerate the planner's engine and device data (crates/preflight-plan/data/).

The planner judges "will it run there?" from two committed files, trimmed to what the
judgements need:

  engines.json  registered architectures, quantization methods, kernel and attention gates
                of vLLM 0.19.0 (the release whose memory the planner models), SGLang 0.5.23,
                llama.cpp (llama-cpp-python 0.3.36) and transformers 5.24.0, each fact with its
                `path:line` inside the released package
  devices.json  the device catalogue: compute capability, memory, bandwidth, dense TFLOPS,
                each with its vendor source; the CUDA-visible total where a vLLM startup log
                measured it

Input: the full extractions, each read straight from the released wheel/sdist whose sha256 it
records — vLLM's committed here (`scripts/engines/extracted/vllm-0.19.0.json`, written by
`extract_vllm.py`), the others kept beside the repository (`engines/*.json`; see that
directory's README) — and the vLLM startup-log records (`oracles/vllm-startup-logs.jsonl`).
Reading the wheels themselves is the upstream step; this script starts from its output, and
checks every hand-read kernel gate, sparse-MLA candidate and backend priority below against the
extracted source text (and, with `--packages`, against the wheel's own lines), so a new release
whose code moved fails here instead of silently changing a verdict.

    # DIR holds engines/ and oracles/ (the extractions beside the clone: ../shared in CI)
    python3 scripts/engines/regenerate.py --shared DIR            # write
    python3 scripts/engines/regenerate.py --shared DIR --check    # compare only
    # another vLLM extraction (its kernel paths must have been re-read: the version is checked)
    python3 scripts/engines/regenerate.py --shared DIR --vllm-extraction PATH
    # and against the released archives themselves (sha256, every cited registry line, every
    # hand-read vLLM citation, and the vLLM extraction re-run from its wheel byte for byte):
    pip download --no-deps vllm==0.19.0 transformers==5.24.0 ... -d pkgs
    python3 scripts/engines/regenerate.py --shared DIR --check --packages pkgs
    # (with --packages, also data/config_keys.json, modelopt.json and llamacpp_keys.json,
    #  through extract_config_keys.py, from the same directory of archives)
    # config keys read per architecture, ModelOpt quant_algo values, llama.cpp GGUF keys
    # (config_keys.json, modelopt.json, llamacpp_keys.json): see scripts/engines/extract_config_keys.py
    # KV cache dtypes each engine accepts (kv_cache_dtypes.json): scripts/engines/extract_kv_cache_dtypes.py

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
ROOT = HERE.parent.parent
OUT = ROOT / "crates" / "preflight-plan" / "data"

GIB = 1 << 30

# vLLM registry groups whose architectures run through vLLM's Transformers backend.
VLLM_TRANSFORMERS_GROUPS = {"_TRANSFORMERS_SUPPORTED_MODELS", "_TRANSFORMERS_BACKEND_MODELS"}

# The vLLM release the hand-read tables below were read from. The planner models vLLM's
# memory for this release (docs/memory.md), so its support data comes from the same wheel;
# an extraction of another release is refused until these tables are re-read for it.
VLLM_HAND_READ_VERSION = "0.19.0"
VLLM_DEFAULT_EXTRACTION = HERE / "extracted" / f"vllm-{VLLM_HAND_READ_VERSION}.json"

# Sparse-MLA candidates of vLLM's CUDA priority function, per capability branch
# (vllm/platforms/cuda.py:51-113 `_get_backend_priorities`: major 10 → :59-90, the sparse
# list after the dense MLA backends; any other major → :91-98, FLASHMLA_SPARSE last). Each name
# must appear in that function's source, and every sparse backend it names must be listed
# here; each backend's accepted majors are then read from its supports_compute_capability.
VLLM_SPARSE_MLA_CANDIDATES = {
    "10": ["FLASHINFER_MLA_SPARSE", "FLASHMLA_SPARSE"],
    "other": ["FLASHMLA_SPARSE"],
}

# Kernel paths read by hand from the vLLM 0.19.0 wheel: for each weight format, the
# capability from which a native kernel exists, and the fallback vLLM's own selection reaches
# below it. Every claim is backed by a VLLM_EVIDENCE line below.
VLLM_KERNEL_PATHS = [
    {
        "format": "fp8",
        "native": [
            {
                "from": 89,
                "below": 1000,
                "kernel": "FP8 tensor-core GEMMs (FlashInfer from 10.0, CUTLASS; block-FP8 through DeepGEMM / CUTLASS / Triton); vLLM's Marlin FP8 kernel, first in its list, refuses cc >= 8.9",
            },
        ],
        "fallback": "Marlin weight-only FP8 (W8A16): weights stay FP8, activations BF16",
        "fallback_from": 75,
        "source": "vllm/model_executor/kernels/linear/__init__.py:109-115; .../kernels/linear/scaled_mm/marlin.py:36-56; vllm/model_executor/layers/quantization/utils/marlin_utils_fp8.py:24-25; vllm/model_executor/layers/quantization/fp8.py:277-278; MoE vllm/model_executor/layers/fused_moe/oracle/fp8.py:68-80, .../fused_moe/fused_marlin_moe.py:565-567",
    },
    {
        "format": "nvfp4",
        "native": [
            {
                "from": 100,
                "below": 1000,
                "kernel": "FlashInfer CUTLASS NVFP4 GEMM (cc >= 10.0; FlashInfer is a vLLM dependency) and NVFP4 MoE (FlashInfer TRT-LLM / CuTe-DSL on 10.x, FlashInfer CUTLASS from 10.0, vLLM CUTLASS on 10.x/11.x/12.x)",
            },
        ],
        "fallback": "Marlin weight-only FP4 (W4A16): \"Weight-only FP4 compression will be used leveraging the Marlin kernel\"",
        "fallback_from": 75,
        "source": "vllm/model_executor/layers/quantization/utils/nvfp4_utils.py:39-86, :140-150; vllm/model_executor/layers/quantization/utils/marlin_utils_fp4.py:26-27; vllm/model_executor/layers/fused_moe/oracle/nvfp4.py:140-146",
    },
    {
        "format": "mxfp4_moe",
        # In the MXFP4 MoE oracle's order; the first whose gate passes is used.
        "native": [
            {"from": 100, "below": 110, "kernel": "FlashInfer TRT-LLM MXFP4xBF16 MoE (SM10x)"},
            {
                # triton_kernels ships inside the wheel (vllm/third_party/triton_kernels):
                # has_triton_kernels() finds it in every install.
                "from": 90,
                "below": 110,
                "kernel": "OAI Triton MXFP4 MoE (9.0 <= cc < 11.0; triton_kernels ships in the wheel)",
            },
            {"from": 90, "below": 91, "kernel": "FlashInfer CUTLASS MXFP4xBF16 MoE (cc 9.0 exactly)"},
        ],
        "fallback": "Marlin weight-only MXFP4 MoE experts",
        "fallback_from": 75,
        "source": "vllm/model_executor/layers/fused_moe/oracle/mxfp4.py:174-183, :345-354; .../experts/trtllm_mxfp4_moe.py:79-81; .../fused_moe/gpt_oss_triton_kernels_moe.py:887-896; vllm/utils/import_utils.py:420-427; .../fused_moe/flashinfer_cutlass_moe.py:143-178; .../fused_moe/fused_marlin_moe.py:565-567, :574-587",
    },
]

# Quantization methods vLLM renames by the checkpoint's model_type before it looks them up
# (a config's `override_quantization_method`; `--packages` checks each cited line names the
# method it resolves to). 0.19.0 has none: gpt-oss's `mxfp4` loads as Mxfp4Config
# (vllm/model_executor/layers/quantization/__init__.py:156).
VLLM_METHOD_OVERRIDES = []

# The native NVFP4 and MXFP4 paths above count FlashInfer as present: the wheel requires it
# (`--packages` checks its METADATA says so).
VLLM_DEFAULT_DEPENDENCY = "Requires-Dist: flashinfer-python"

# What each hand-read claim above rests on: (`path:line[-end]` in the wheel, text those lines
# hold). A citation whose exact span the extraction records (a gate's or a list's source) is
# checked against the extraction on every run; every citation is checked in the wheel itself
# with `--packages`.
VLLM_EVIDENCE = [
    # sparse MLA
    ("vllm/platforms/cuda.py:51-113", "if device_capability.major == 10:"),
    ("vllm/platforms/cuda.py:59-90", "AttentionBackendEnum.FLASHINFER_MLA_SPARSE,"),
    ("vllm/platforms/cuda.py:59-90", "*sparse_backends,"),
    ("vllm/platforms/cuda.py:91-98", "AttentionBackendEnum.FLASHMLA_SPARSE,"),
    # fp8
    ("vllm/model_executor/kernels/linear/__init__.py:109-115", "MarlinFP8ScaledMMLinearKernel"),
    ("vllm/model_executor/kernels/linear/scaled_mm/marlin.py:36-56", "compute_capability >= 89"),
    ("vllm/model_executor/kernels/linear/scaled_mm/pytorch.py:24-33", "compute_capability < 89"),
    ("vllm/model_executor/layers/quantization/utils/marlin_utils_fp8.py:24-25", "has_device_capability(75)"),
    ("vllm/model_executor/layers/quantization/fp8.py:277-278", "Marlin"),
    ("vllm/platforms/cuda.py:411-412", "has_device_capability(89)"),
    ("vllm/model_executor/layers/fused_moe/oracle/fp8.py:68-80", "Fp8MoeBackend.MARLIN"),
    ("vllm/model_executor/layers/fused_moe/fused_marlin_moe.py:565-567", "has_device_capability((7, 5))"),
    ("vllm/model_executor/layers/fused_moe/fused_marlin_moe.py:574-587", "kFp8Static128BlockSym"),
    # nvfp4
    ("vllm/model_executor/layers/quantization/utils/nvfp4_utils.py:39-86", "has_device_capability(100) and has_flashinfer()"),
    ("vllm/model_executor/layers/quantization/utils/nvfp4_utils.py:39-86", "elif is_fp4_marlin_supported():"),
    ("vllm/model_executor/layers/quantization/utils/nvfp4_utils.py:140-150", "Weight-only FP4 compression"),
    ("vllm/model_executor/layers/quantization/utils/marlin_utils_fp4.py:26-27", "has_device_capability(75)"),
    ("vllm/model_executor/layers/fused_moe/oracle/nvfp4.py:140-146", "NvFp4MoeBackend.MARLIN"),
    ("vllm/model_executor/layers/fused_moe/experts/trtllm_nvfp4_moe.py:82-89", "is_device_capability_family(100)"),
    ("vllm/model_executor/layers/fused_moe/cutlass_moe.py:681-687", "is_device_capability_family(120)"),
    ("vllm/model_executor/layers/fused_moe/flashinfer_cutlass_moe.py:143-178", "(kNvfp4Static, kNvfp4Dynamic)"),
    ("vllm/model_executor/layers/fused_moe/fused_marlin_moe.py:574-587", "kNvfp4Static"),
    # mxfp4 MoE
    ("vllm/model_executor/layers/fused_moe/oracle/mxfp4.py:174-183", "Mxfp4MoeBackend.FLASHINFER_TRTLLM_MXFP4_BF16,\n        Mxfp4MoeBackend.CK,\n        Mxfp4MoeBackend.TRITON,\n        Mxfp4MoeBackend.FLASHINFER_CUTLASS_MXFP4_BF16,"),
    ("vllm/model_executor/layers/fused_moe/oracle/mxfp4.py:174-183", "Mxfp4MoeBackend.MARLIN"),
    ("vllm/model_executor/layers/fused_moe/oracle/mxfp4.py:345-354", "for backend in AVAILABLE_BACKENDS:"),
    ("vllm/model_executor/layers/fused_moe/experts/trtllm_mxfp4_moe.py:79-81", "is_device_capability_family(100) and has_flashinfer()"),
    ("vllm/model_executor/layers/fused_moe/gpt_oss_triton_kernels_moe.py:887-896", "(9, 0) <= (cap.major, cap.minor) < (11, 0)"),
    ("vllm/utils/import_utils.py:420-427", '_has_module(\n        "vllm.third_party.triton_kernels"'),
    ("vllm/model_executor/layers/fused_moe/flashinfer_cutlass_moe.py:143-178", "(kMxfp4Static, None),"),
    ("vllm/model_executor/layers/fused_moe/flashinfer_cutlass_moe.py:143-178", "p.is_device_capability(90)"),
    ("vllm/model_executor/layers/fused_moe/fused_marlin_moe.py:574-587", "kMxfp4Static"),
    # no method override: gpt-oss's mxfp4 is Mxfp4Config
    ("vllm/model_executor/layers/quantization/__init__.py:156", '"mxfp4": Mxfp4Config,'),
]


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

# Memory and bandwidth NVIDIA publishes for the GeForce parts the shared catalogue leaves
# without them (its records cite compute capability only): each from NVIDIA's architecture
# whitepaper for the part, filled only where the catalogue has no figure of its own.
VENDOR_FIGURES = {
    "rtx-3090": {
        "memory_gib": 24,
        "bandwidth_tb_s": 0.936,
        "source": "https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf (GeForce RTX 3090: 24 GB GDDR6X, 936 GB/sec)",
    },
    "rtx-4090": {
        "memory_gib": 24,
        "bandwidth_tb_s": 1.008,
        "source": "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf (GeForce RTX 4090: 24 GB GDDR6X, 1008 GB/sec)",
    },
    "rtx-5090": {
        "memory_gib": 32,
        "bandwidth_tb_s": 1.792,
        "source": "https://images.nvidia.com/aem-dam/Solutions/geforce/blackwell/nvidia-rtx-blackwell-gpu-architecture.pdf (GeForce RTX 5090: 32 GB GDDR7, 1792 GB/sec)",
    },
}

# CUDA-visible totals: the startup-log `gpu` labels that name one catalogue device exactly.
CUDA_VISIBLE_LABELS = {"H100-80GB": "h100-80gb", "RTX 3090": "rtx-3090"}


def die(message):
    sys.exit(f"regenerate: {message}")


def require(text, needle, where):
    if needle not in text:
        die(f"{where}: expected `{needle}` in the extracted source; the engine's code moved — re-read it")


def extraction_texts(data):
    """`source` → the text the extraction records for it (a gate's `code`, a priority list)."""
    texts = {}

    def walk(node):
        if isinstance(node, dict):
            src = node.get("source")
            if isinstance(src, str):
                if isinstance(node.get("code"), str) and not node["code"].endswith("...[truncated]"):
                    texts.setdefault(src, node["code"])
                elif isinstance(node.get("list") or node.get("priority_order"), list):
                    texts.setdefault(src, "\n".join(node.get("list") or node["priority_order"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(data)
    return texts


def says(text, needle):
    """`needle` occurs in `text`, whitespace and commas aside (a list's text is its names)."""
    norm = lambda t: re.sub(r"[\s,]", "", t)
    return norm(needle) in norm(text)


def check_evidence_in_extraction(data):
    """The hand-read citations whose span the extraction records must hold their text there."""
    texts = extraction_texts(data)
    checked = 0
    for source, needle in VLLM_EVIDENCE:
        if source in texts:
            if not says(texts[source], needle):
                die(f"vllm: {source} no longer says `{needle}`; the engine's code moved — re-read it")
            checked += 1
    return checked


def vllm(data):
    if data["version"] != VLLM_HAND_READ_VERSION:
        die(
            f"vllm: the extraction is of {data['version']}, the hand-read kernel paths and sparse-MLA "
            f"candidates of {VLLM_HAND_READ_VERSION}: re-read them for {data['version']} first"
        )
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
        sparse = a.get("needs_sparse_mla_backend", {})
        if sparse.get("value") is True:
            entry["flags"].add("sparse_mla")
        elif sparse.get("config_key"):
            # Sparse only when the checkpoint's config has the key: the planner sees it as an
            # MLA indexer (DeepSeek-V3.2's and GLM-5's `index_*` keys).
            if sparse["config_key"] != "index_topk":
                die(f"vllm: {a['architecture']} is sparse when its config has {sparse['config_key']}, which the planner does not read")
            entry["flags"].add("sparse_mla_if_index_topk")
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
        # A negative minimum is no GPU gate (cpu_awq returns -1: a CPU-only method).
        least = min(ints) if ints else None
        quant[q["method"]] = {
            "min_capability": least if least is not None and least >= 0 else None,
            "source": (q.get("min_capability") or [{}])[0].get("source", "") if isinstance((q.get("min_capability") or [{}])[0], dict) else "",
        }
    # Sparse MLA: which capability majors some candidate backend accepts.
    priority = data["attention_backend_priority_cuda"]["code"]
    backends = {b["backend"]: b for b in data["attention_backends"] if b.get("backend")}
    listed = {name for names in VLLM_SPARSE_MLA_CANDIDATES.values() for name in names}
    for name, b in backends.items():
        if b.get("is_sparse", {}).get("value") is True and f"AttentionBackendEnum.{name}" in priority and name not in listed:
            die(f"vllm: _get_backend_priorities names the sparse backend {name}, which VLLM_SPARSE_MLA_CANDIDATES lacks — re-read it")
    own_branches = {int(branch) for branch in VLLM_SPARSE_MLA_CANDIDATES if branch != "other"}
    majors = set()
    sources = []
    for branch, names in VLLM_SPARSE_MLA_CANDIDATES.items():
        for name in names:
            require(priority, f"AttentionBackendEnum.{name}", "vllm _get_backend_priorities")
            b = backends.get(name) or die(f"vllm: no attention backend {name}")
            if b.get("is_sparse", {}).get("value") is not True:
                die(f"vllm: {name} is no longer a sparse backend")
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
                accepted -= own_branches
            majors |= accepted
            sources.append(b["supports_compute_capability"]["source"])
    check_evidence_in_extraction(data)
    gguf = data["gguf"]
    if gguf["gguf_in_QUANTIZATION_METHODS"] and gguf["gguf_in_LoadFormats"]:
        requirement = next(m for m in gguf["metadata_mentions"] if m["text"].startswith("Requires-Dist: gguf"))
        gguf_out = {
            "loadable": True,
            "plugin": None,
            "source": f"{quant_source(data, 'gguf')}; {gguf['load_formats']['source']} (LoadFormats); {requirement['source']} ({requirement['text']})",
        }
    elif not gguf["gguf_in_QUANTIZATION_METHODS"] and not gguf["gguf_in_LoadFormats"]:
        plugin = next(m for m in gguf["metadata_mentions"] if "gguf-plugin" in m["text"])
        gguf_out = {
            "loadable": False,
            "plugin": plugin["text"].split("Requires-Dist: ")[-1].split(";")[0],
            "source": f"{gguf['load_formats']['source']}; {plugin['source']}",
        }
    else:
        die("vllm: GGUF is half built in (a quantization method or a load format, not both); update the format judgement")
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
        "gguf": gguf_out,
        "kernel_paths": VLLM_KERNEL_PATHS,
        "method_overrides": VLLM_METHOD_OVERRIDES,
    }


def quant_source(data, method):
    """Where vLLM maps `method` to its config class."""
    q = next(q for q in data["quantization_methods"] if q["method"] == method)
    return q["config_class_source"].split(" (")[0] + f" (method_to_config: {method})"


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
        vendor = VENDOR_FIGURES.get(name)
        if vendor and entry["memory_bytes"] is None:
            # Device memory is built in binary units: a vendor's "24 GB" is 24 GiB.
            entry["memory_bytes"] = {"value": vendor["memory_gib"] * GIB, "source": vendor["source"]}
        if vendor and entry["memory_bandwidth_tb_s"] is None:
            entry["memory_bandwidth_tb_s"] = {"value": vendor["bandwidth_tb_s"], "source": vendor["source"]}
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
            # Every hand-read kernel-path / sparse-MLA citation, in the wheel's own text.
            spans = {}
            for source, needle in VLLM_EVIDENCE:
                path, _, lines = source.partition(":")
                first, _, last = lines.partition("-")
                if path not in spans:
                    spans[path] = lines_of(archive, path)
                text = "\n".join(spans[path][int(first) - 1 : int(last or first)])
                if not says(text, needle):
                    failed.append(f"vllm: {source} does not say `{needle}`")
            print(f"vllm: {len(VLLM_EVIDENCE)} hand-read citations checked in the archive")
        cache = {}
        pairs = facts(engine)
        bad = [src for src, needle, above in pairs if not cited(archive, src, needle, cache, above)]
        if bad:
            failed.append(f"{key}: {len(bad)} of {len(pairs)} cited lines do not say what the data says, e.g. {bad[:3]}")
        else:
            print(f"{key}: sha256 matches; {len(pairs)} cited lines checked in the archive")
    if failed:
        die("; ".join(failed))


def reextract_vllm(directory, data, extraction):
    """The vLLM extraction itself reproduces from the wheel, byte for byte."""
    import tempfile

    wheel = Path(directory) / data["package"]
    if not wheel.exists():
        print(f"vllm: {data['package']} not in {directory}: extraction not re-run")
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "vllm.json"
        subprocess.run([sys.executable, str(HERE / "extract_vllm.py"), str(wheel), str(out)], check=True)
        if out.read_bytes() != extraction.read_bytes():
            die(f"{extraction} is not what extract_vllm.py reads from {wheel.name} (rerun it)")
    print(f"vllm: {extraction.name} reproduces from {wheel.name} byte for byte")


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
    parser.add_argument(
        "--vllm-extraction",
        type=Path,
        default=VLLM_DEFAULT_EXTRACTION,
        help=f"the full vLLM extraction (extract_vllm.py WHEEL OUT); default {VLLM_DEFAULT_EXTRACTION.relative_to(ROOT)}",
    )
    args = parser.parse_args()
    engines = args.shared / "engines"
    load = lambda name: json.loads((engines / name).read_text())
    vllm_data = json.loads(args.vllm_extraction.read_text())
    vllm_from = (
        str(args.vllm_extraction.resolve().relative_to(ROOT))
        if args.vllm_extraction.resolve().is_relative_to(ROOT)
        else args.vllm_extraction.name
    )
    files = {
        "engines.json": render(
            {
                "from": f"{vllm_from} and engines/{{sglang,llamacpp,transformers}}.json, read from the released packages (sha256 per engine)",
                "vllm": vllm(vllm_data),
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
        reextract_vllm(args.packages, vllm_data, args.vllm_extraction)
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
        # So are the KV cache dtypes each engine accepts (vLLM 0.19.0, SGLang, llama.cpp).
        for script in ("extract_config_keys.py", "extract_kv_cache_dtypes.py"):
            extract = [sys.executable, str(HERE / script), str(args.packages), str(args.out)]
            subprocess.run(extract + (["--check"] if args.check else []), check=True)


if __name__ == "__main__":
    main()

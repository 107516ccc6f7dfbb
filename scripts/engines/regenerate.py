#!/usr/bin/env python3
"""Regenerate the planner's engine and device data (crates/preflight-plan/data/).

The planner judges "will it run there?" from two committed files, trimmed to what the
judgements need:

  engines.json  registered architectures, quantization methods, kernel and attention gates
                of vLLM 0.19.0 (the release whose memory the planner models), SGLang 0.5.23,
                llama.cpp (llama-cpp-python 0.3.36) and transformers 5.24.0, each fact with its
                `path:line` inside the released package
  devices.json  the device catalogue: compute capability, memory, bandwidth, dense (and the
                vendor's sparse) TFLOPS and INT8 TOPS, the scale-up link and its direction,
                each with its vendor source and quoted text (the shared engines/devices.json
                and, for what it lacks, VENDOR_FIGURES below); the CUDA-visible total where a
                vLLM startup log measured it

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

# Apple silicon (issue 25 item 4): Max and Ultra chips, planned with llama.cpp's Metal
# backend. One device per chip as Apple bins it: where the memory bandwidth differs with the
# GPU (M3 Max, M4 Max), the GPU's core count is in the name. The unified memory is the Mac's
# configuration, not the chip's, so it is never catalogued: the user gives it (`m3-ultra=512GB`).
# Bandwidth is quoted from Apple's own tech-specs pages (VENDOR_FIGURES); where no Apple text
# was reachable it stays null (data/README.md lists why).
APPLE_SILICON = [
    {"name": "m2-max", "description": "Apple M2 Max (unified memory, Metal)", "vendor": "Apple", "unified_memory": True},
    {"name": "m2-ultra", "description": "Apple M2 Ultra (unified memory, Metal)", "vendor": "Apple", "unified_memory": True},
    {
        "name": "m3-max-30c",
        "description": "Apple M3 Max, 14-core CPU / 30-core GPU (unified memory, Metal)",
        "vendor": "Apple",
        "unified_memory": True,
    },
    {
        "name": "m3-max-40c",
        "description": "Apple M3 Max, 16-core CPU / 40-core GPU (unified memory, Metal)",
        "vendor": "Apple",
        "unified_memory": True,
    },
    {"name": "m3-ultra", "description": "Apple M3 Ultra (unified memory, Metal)", "vendor": "Apple", "unified_memory": True},
    {
        "name": "m4-max-32c",
        "description": "Apple M4 Max, 14-core CPU / 32-core GPU (unified memory, Metal)",
        "vendor": "Apple",
        "unified_memory": True,
    },
    {
        "name": "m4-max-40c",
        "description": "Apple M4 Max, 16-core CPU / 40-core GPU (unified memory, Metal)",
        "vendor": "Apple",
        "unified_memory": True,
    },
]
APPLE_MBP16_NOV2023 = "https://support.apple.com/en-au/117737"
APPLE_MBP16_NOV2023_NOTE = "Apple's tech-specs page, MacBook Pro (16-inch, Nov 2023), read as the search tool's pages corpus stores it (address written https://support.apple.com./en-au/117737)"
APPLE_MAC_STUDIO_2025 = "https://www.apple.com/mac-studio/specs/"
APPLE_MAC_STUDIO_2025_VIA = "the page (Mac Studio with M4 Max or M3 Ultra, 2025) was not reachable; read through a verbatim copy of its Chip section pasted into a public file (search-index id 58824776158), Apple's non-breaking hyphens kept"

# The GPU's working set on Apple silicon. llama.cpp's Metal backend reports the device's total
# (and its free memory, less what is allocated) as `MTLDevice.recommendedMaxWorkingSetSize`
# (ggml/src/ggml-metal/ggml-metal-device.m l.1501–1510, `ggml_metal_device_get_memory`, read
# by `ggml_backend_metal_device_get_memory`, ggml-metal.cpp l.676–680): what its layer split
# and its fit size the device by, and what it warns past (ggml-metal-device.m l.2013–2021).
# Every Metal buffer counts towards it, the weights mapped from the GGUF included
# (`ggml_metal_buffer_map`, `newBufferWithBytesNoCopy`). macOS sets the figure; Apple
# documents no formula. The rule below is preflight's, read off the figures llama.cpp (and
# tools reading the same property) logged on Macs whose memory the reporter stated; newer
# macOS releases report more on the machines logged, so the rule errs low there.
METAL_WORKING_SET = {
    "rule": (
        "preflight's rule, not Apple's: 2/3 of the unified memory up to 32 GiB, 3/4 above. Read off the "
        "recommendedMaxWorkingSetSize llama.cpp's Metal backend logs (evidence below, macOS 13-15); macOS 26 "
        "reports more on the Macs logged (an M5 Max 128 GB: 107.52 GiB, 84%), so the rule is conservative there. "
        "A Mac's own figure (llama.cpp prints it at start-up; `sudo sysctl iogpu.wired_limit_mb=N` raises it) "
        "is given with working_set (--working-set)."
    ),
    "reported_by": (
        "ggml/src/ggml-metal/ggml-metal-device.m l.1501-1510 (ggml_metal_device_get_memory: *total = "
        "recommendedMaxWorkingSetSize, *free = total - currentAllocatedSize), read by "
        "ggml_backend_metal_device_get_memory (ggml-metal.cpp l.676-680); llama-cpp-python 0.3.36, vendor/llama.cpp"
    ),
    "up_to_bytes": 32 * GIB,
    "fraction_up_to": [2, 3],
    "fraction_above": [3, 4],
    "evidence": [
        {
            "mac": "M2 Max, 32 GB",
            "logged": "ggml_metal_init: recommendedMaxWorkingSetSize = 21845.34 MB",
            "reads": "21845.34 MiB (the log's MB were MiB then) = 2/3 of 32 GiB",
            "source": "https://github.com/ollama/ollama/issues/434",
        },
        {
            "mac": "M1 Max, 32 GB",
            "logged": "ggml_metal_init: recommendedMaxWorkingSetSize = 21845.34 MB",
            "reads": "2/3 of 32 GiB",
            "source": "https://github.com/ggml-org/llama.cpp/pull/2011",
        },
        {
            "mac": "M2 Max, 96 GB",
            "logged": "ggml_metal_init: recommendedMaxWorkingSetSize  = 73728,00 MB",
            "reads": "73728 MiB = 72 GiB = 3/4 of 96 GiB",
            "source": "https://github.com/ggml-org/llama.cpp/issues/3213",
        },
        {
            "mac": "M2, 64 GB (\"M2 Mac Pro with 64 GB Memory\")",
            "logged": "ggml_metal_init: recommendedMaxWorkingSetSize  = 51539.61 MB",
            "reads": "51539.61 MB (10^6) = 48 GiB = 3/4 of 64 GiB",
            "source": "a llama.cpp issue as copied into a public file (search-index id 30259091797)",
        },
        {
            "mac": "M4, 16 GB, macOS 15.6",
            "logged": "max_recommended_working_set_size (~10.67 GB on 16GB M4)",
            "reads": "10.67 GiB = 2/3 of 16 GiB",
            "source": "https://github.com/exo-explore/exo/pull/1672",
        },
        {
            "mac": "M5 Max, 128 GB, macOS 26.x (above the rule)",
            "logged": "recommendedMaxWorkingSetSize: 107.52 GiB     # stock",
            "reads": "84% of 128 GiB; the rule gives 96 GiB",
            "source": "https://github.com/antirez/ds4/pull/893",
        },
        {
            "mac": "M3 Ultra (memory not stated; above the rule for any M3 Ultra configuration)",
            "logged": "ggml_metal_device_init: recommendedMaxWorkingSetSize  = 498216.21 MB",
            "reads": "464 GiB; the rule gives 384 GiB on 512 GiB",
            "source": "a llama-bench log in a public file (search-index id 40195527572)",
        },
    ],
}

# Vendor figures the shared catalogue lacks, each quoted from the vendor: its datasheet,
# product page or whitepaper, a vendor-owned repository (NVIDIA's ai-dynamo/aiconfigurator
# system specs, AMD's ROCm documentation), the vendor's documentation site or its own MLPerf
# submission. `via` names the copy a page was read through when the page itself was not
# reachable (a verbatim transcription in a public file); such a figure is marked so and
# listed in data/README.md. A figure here fills only a field the shared file leaves null; one
# the shared file already holds must agree (a contradiction stops the run). Dense and sparse
# follow the shared rule: NVIDIA prints Tensor Core rows "with sparsity", and a dense figure
# is half of one only where the vendor's footnote says so (`derived` says which).
VENDOR_RULE = (
    "Figures the shared catalogue lacks, each quoted with its URL from the vendor: a datasheet, product page or "
    "whitepaper, a vendor-owned repository (NVIDIA ai-dynamo/aiconfigurator, AMD ROCm docs), the vendor's documentation "
    "site or its own MLPerf submission. `via` names the verbatim transcription a page was read through when the page "
    "itself was not reachable; `derived` states any arithmetic. Dense is half of sparse only where the vendor's footnote "
    "marks the row as with sparsity. scale_up is one GPU's scale-up link (NVLink, Infinity Fabric, or PCIe for PCIe "
    "parts) in GB/s, with the direction the source states (unidirectional, bidirectional, or unstated)."
)
AIC = "https://github.com/ai-dynamo/aiconfigurator/blob/095f58a51c4ca8e61b66ec108d86f223f8d559ce/aic-core/src/aiconfigurator_core/systems/"
MI300_DOC = "https://github.com/ROCm/legacy-rocm-build/blob/089d7513c55fc7b6edb2a75b83cb40ca883a0ec2/docs/conceptual/gpu-arch/mi300.md"
H200_PAGE = "https://www.nvidia.com/en-us/data-center/h200/"
H200_VIA = "the page was not reachable; read through two verbatim transcriptions of its specification table in public GitHub files (search-index ids 70234909778 and 20069761154), which agree"
MI300X_PAGE = "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html"
MI300X_VIA = "the page was not reachable; read through a verbatim transcription of its specification table and footnotes in a public GitHub file (search-index id 69069788652)"
RTX_PRO_PAGE = "https://www.nvidia.com/en-us/data-center/rtx-pro-6000-blackwell-server-edition/"
RTX_PRO_VIA = "the page was not reachable; read through transcriptions in public GitHub files (search-index ids 69549664363, 67160728849), which agree on 96 GB and 1,597 GB/s for the Server Edition"
NV_MLPERF_61 = "https://github.com/mlcommons/inference_results_v6.1/blob/{commit}/closed/NVIDIA/results/{system}/wan-2.2-t2v-a14b/Offline/README.md"


def aic(file, line, quote):
    return {"source": f"{AIC}{file}#L{line}", "quote": quote}


VENDOR_FIGURES = {
    "h100-80gb": {
        "int8_dense_tops": {"value": 1978.0, **aic("h100_sxm.yaml", 11, "int8_tc_flops: 1978000000000000 # 1978TFLOPS")},
        "scale_up": {
            "value_gb_s": 450.0,
            "link": "nvlink",
            "direction": "unidirectional",
            **aic("h100_sxm.yaml", 19, "intra_node_bw: 450000000000  # Byte/s per gpu, single direction"),
        },
    },
    "h100-pcie": {
        "int8_dense_tops": {"value": 1513.0, **aic("h100_pcie.yaml", 14, "int8_tc_flops: 1513000000000000 # 1513TOPS (dense; NVIDIA specs list 3026TOPS with sparsity)")},
        "bf16_sparse_tflops": {"value": 1513.0, **aic("h100_pcie.yaml", 13, "bfloat16_tc_flops: 756500000000000 # 756.5TFLOPS (dense; NVIDIA specs list 1513TFLOPS with sparsity)")},
        "fp8_sparse_tflops": {"value": 3026.0, **aic("h100_pcie.yaml", 15, "fp8_tc_flops: 1513000000000000 # 1513TFLOPS (dense; NVIDIA specs list 3026TFLOPS with sparsity)")},
        "int8_sparse_tops": {"value": 3026.0, **aic("h100_pcie.yaml", 14, "int8_tc_flops: 1513000000000000 # 1513TOPS (dense; NVIDIA specs list 3026TOPS with sparsity)")},
        "scale_up": {
            "value_gb_s": 64.0,
            "link": "pcie",
            "direction": "unidirectional",
            **aic("h100_pcie.yaml", 22, "intra_node_bw: 64000000000 # Byte/s per GPU, single direction, PCIe Gen5 x16 without NVLink"),
        },
    },
    "h200": {
        "int8_dense_tops": {"value": 1978.0, **aic("h200_sxm.yaml", 11, "int8_tc_flops: 1978000000000000 # 1978TFLOPS")},
        "scale_up": {
            "value_gb_s": 450.0,
            "link": "nvlink",
            "direction": "unidirectional",
            **aic("h200_sxm.yaml", 19, "intra_node_bw: 450000000000  # Byte/s per gpu, single direction"),
        },
    },
    "h200-nvl": {
        "memory_gib": {"value": 141, "source": H200_PAGE, "via": H200_VIA, "quote": "GPU Memory | 141GB (H200 NVL column)"},
        "bandwidth_tb_s": {"value": 4.8, "source": H200_PAGE, "via": H200_VIA, "quote": "Memory Bandwidth | 4.8TB/s (H200 NVL column)"},
        "bf16_sparse_tflops": {"value": 1671.0, "source": H200_PAGE, "via": H200_VIA, "quote": "BFLOAT16 Tensor Core | 1,671 TFLOPS | \"With sparsity\" (H200 NVL column)"},
        "fp8_sparse_tflops": {"value": 3341.0, "source": H200_PAGE, "via": H200_VIA, "quote": "FP8 Tensor Core | 3,341 TFLOPS | \"With sparsity\" (H200 NVL column)"},
        "int8_sparse_tops": {"value": 3341.0, "source": H200_PAGE, "via": H200_VIA, "quote": "INT8 Tensor Core | 3,341 TFLOPS | \"With sparsity\" (H200 NVL column; the page prints INT8 in TFLOPS)"},
        "scale_up": {
            "value_gb_s": 900.0,
            "link": "nvlink",
            "direction": "bidirectional",
            "source": H200_PAGE,
            "via": H200_VIA,
            "quote": "NVLink Bridge | 900GB/s per GPU (2- or 4-way) (H200 NVL column)",
            "direction_from": f"the page does not say; NVIDIA's own H200 SXM spec counts the same 18 fourth-generation NVLinks as 450 GB/s a direction ({AIC}h200_sxm.yaml#L19: 'intra_node_bw: 450000000000  # Byte/s per gpu, single direction'), so 900 GB/s is both directions",
        },
    },
    "b200": {
        "int8_dense_tops": {"value": 4500.0, **aic("b200_sxm.yaml", 13, "int8_tc_flops: 4500000000000000 # 4500TFLOPS")},
        "scale_up": {
            "value_gb_s": 900.0,
            "link": "nvlink",
            "direction": "unidirectional",
            **aic("b200_sxm.yaml", 22, "intra_node_bw: 900000000000  # Byte/s per gpu, single direction"),
        },
    },
    "gb200": {
        "memory_gib": {
            "value": 186,
            "source": NV_MLPERF_61.format(commit="9be46cc5c44fdfc54d66de88477a0a79ac3137c0", system="GB200-NVL72_GB200-186GB_aarch64x72_TRT"),
            "quote": "Then launch the Wan2.2 GB200-NVL72_GB200-186GB_aarch64x72_TRT Offline videogen endpoint workflow from closed/NVIDIA.",
            "note": "NVIDIA's own name for the part in its MLPerf Inference v6.1 submission (submitter NVIDIA): 186 GB a GPU",
        },
        "int8_dense_tops": {"value": 5000.0, **aic("gb200.yaml", 13, "int8_tc_flops: 5000000000000000 # 5000TFLOPS")},
        "scale_up": {
            "value_gb_s": 900.0,
            "link": "nvlink",
            "direction": "unidirectional",
            **aic("gb200.yaml", 24, "intra_node_bw: 900000000000  # Byte/s per GPU, single direction - NVLink 5th gen within node"),
        },
    },
    "b300": {
        "memory_gib": {
            "value": 288,
            "source": "https://docs.nvidia.com/nim/bionemo/boltz2/release-notes/2026/5/18",
            "quote": "NVIDIA B300 (NVIDIA-B300-SXM6-AC): Added support for this B300 Tensor Core GPU SKU with 288GB HBM3e memory per GPU",
        },
        "bandwidth_tb_s": {"value": 7.75, **aic("b300_sxm.yaml", 8, "mem_bw: 7750000000000 # 7.75 TB/s (Total mem_bw: 62TB/s / 8 GPUs)")},
        "bf16_dense_tflops": {"value": 2250.0, **aic("b300_sxm.yaml", 12, "bfloat16_tc_flops: 2250000000000000 # 2250 TFLOPS (4.5 PFLOPS sparse / 2)")},
        "bf16_sparse_tflops": {"value": 4500.0, **aic("b300_sxm.yaml", 12, "bfloat16_tc_flops: 2250000000000000 # 2250 TFLOPS (4.5 PFLOPS sparse / 2)")},
        "fp8_dense_tflops": {"value": 4500.0, **aic("b300_sxm.yaml", 14, "fp8_tc_flops: 4500000000000000 # 4.5 PFLOPS (9 PFLOPS sparse / 2)")},
        "fp8_sparse_tflops": {"value": 9000.0, **aic("b300_sxm.yaml", 14, "fp8_tc_flops: 4500000000000000 # 4.5 PFLOPS (9 PFLOPS sparse / 2)")},
        "fp4_dense_tflops": {"value": 14000.0, **aic("b300_sxm.yaml", 15, "fp4_tc_flops: 14000000000000000 # 14 PFLOPS (18 PFLOPS sparse | 14 PFLOPS dense)")},
        "fp4_sparse_tflops": {"value": 18000.0, **aic("b300_sxm.yaml", 15, "fp4_tc_flops: 14000000000000000 # 14 PFLOPS (18 PFLOPS sparse | 14 PFLOPS dense)")},
        "int8_dense_tops": {"value": 153.5, **aic("b300_sxm.yaml", 13, "int8_tc_flops: 153500000000000 # 153.5 TFLOPS (307 TOPS sparse / 2)")},
        "int8_sparse_tops": {"value": 307.0, **aic("b300_sxm.yaml", 13, "int8_tc_flops: 153500000000000 # 153.5 TFLOPS (307 TOPS sparse / 2)")},
        "scale_up": {
            "value_gb_s": 900.0,
            "link": "nvlink",
            "direction": "unidirectional",
            **aic("b300_sxm.yaml", 22, "intra_node_bw: 900000000000  # Byte/s per gpu, single direction (1.8 TB/s NVLink bidir / 2)"),
        },
    },
    "gb300": {
        "memory_gib": {
            "value": 288,
            "source": NV_MLPERF_61.format(commit="a5cad3dc55d3dd71aa98fb04260d936880248b34", system="GB300-NVL72_GB300-288GB_aarch64x72_TRT"),
            "quote": "Then launch the Wan2.2 GB300-NVL72_GB300-288GB_aarch64x72_TRT Offline videogen endpoint workflow from closed/NVIDIA.",
            "note": "NVIDIA's own name for the part in its MLPerf Inference v6.1 submission (submitter NVIDIA): 288 GB a GPU",
        },
        "bandwidth_tb_s": {"value": 8.0, **aic("gb300.yaml", 8, "mem_bw: 8000000000000 # 8TB/s")},
        "bf16_dense_tflops": {"value": 2500.0, **aic("gb300.yaml", 12, "bfloat16_tc_flops: 2500000000000000 # 2500TFLOPS")},
        "fp8_dense_tflops": {"value": 5000.0, **aic("gb300.yaml", 14, "fp8_tc_flops: 5000000000000000 # 5PFLOPS")},
        "fp4_dense_tflops": {"value": 15000.0, **aic("gb300.yaml", 15, "fp4_tc_flops: 15000000000000000 # 15PFLOPS")},
        "int8_dense_tops": {"value": 165.0, **aic("gb300.yaml", 13, "int8_tc_flops: 165000000000000 # 165TFLOPS")},
        "scale_up": {
            "value_gb_s": 900.0,
            "link": "nvlink",
            "direction": "unidirectional",
            **aic("gb300.yaml", 24, "intra_node_bw: 900000000000  # Byte/s per GPU, single direction - NVLink 5th gen within node"),
        },
    },
    "gh200": {
        "memory_gib": {
            "value": 144,
            "source": "https://github.com/mlcommons/inference_results_v4.1/blob/a2f5d66d17e8f75c02fd74dfe810ecca6a046696/closed/NVIDIA/systems/GH200-GraceHopper-Superchip_GH200-144GB_aarch64x1_TRT.json",
            "quote": "\"accelerator_memory_capacity\": \"144 GB\", \"accelerator_memory_configuration\": \"HBM3e\", \"accelerator_model_name\": \"NVIDIA GH200 Grace Hopper Superchip 144GB\", \"submitter\": \"NVIDIA\"",
        },
    },
    "a100-80gb": {
        "int8_dense_tops": {"value": 624.0, **aic("a100_sxm.yaml", 11, "int8_tc_flops: 624000000000000 # 624TFLOPS")},
        "scale_up": {
            "value_gb_s": 300.0,
            "link": "nvlink",
            "direction": "unidirectional",
            **aic("a100_sxm.yaml", 18, "intra_node_bw: 300000000000  # Byte/s per gpu, single direction"),
        },
    },
    "l40s": {
        "int8_dense_tops": {"value": 733.0, **aic("l40s.yaml", 11, "int8_tc_flops: 733000000000000 # 733 TFLOPS")},
        "scale_up": {
            "value_gb_s": 32.0,
            "link": "pcie",
            "direction": "unidirectional",
            **aic("l40s.yaml", 19, "intra_node_bw: 32000000000  # Byte/s per gpu, single direction (pcie 4.0)"),
        },
    },
    "l4": {
        "int8_dense_tops": {"value": 242.0, **aic("l4.yaml", 14, "int8_tc_flops: 242000000000000 # 242TOPS (dense; NVIDIA specs list 485TOPS with sparsity)")},
        "bf16_sparse_tflops": {"value": 242.0, **aic("l4.yaml", 13, "bfloat16_tc_flops: 121000000000000 # 121TFLOPS (dense; NVIDIA specs list 242TFLOPS with sparsity)")},
        "fp8_sparse_tflops": {"value": 485.0, **aic("l4.yaml", 15, "fp8_tc_flops: 242000000000000 # 242TFLOPS (dense; NVIDIA specs list 485TFLOPS with sparsity)")},
        "int8_sparse_tops": {"value": 485.0, **aic("l4.yaml", 14, "int8_tc_flops: 242000000000000 # 242TOPS (dense; NVIDIA specs list 485TOPS with sparsity)")},
        "scale_up": {
            "value_gb_s": 32.0,
            "link": "pcie",
            "direction": "unidirectional",
            **aic("l4.yaml", 22, "intra_node_bw: 32000000000 # Byte/s per GPU, single direction, PCIe Gen4 x16"),
        },
    },
    "rtx-pro-6000": {
        "memory_gib": {"value": 96, "source": RTX_PRO_PAGE, "via": RTX_PRO_VIA, "quote": "96 GB GDDR7"},
        "bandwidth_tb_s": {
            "value": 1.597,
            "source": RTX_PRO_PAGE,
            "via": RTX_PRO_VIA,
            "quote": "1597 GB/s",
            "note": f"NVIDIA's aiconfigurator spec for this part ({AIC}rtx_pro_6000_server.yaml#L11) uses 1.792 TB/s, the Workstation Edition's figure; the Server Edition's page prints 1,597 GB/s",
        },
        "scale_up": {
            "value_gb_s": 64.0,
            "link": "pcie",
            "direction": "unidirectional",
            **aic("rtx_pro_6000_server.yaml", 25, "intra_node_bw: 64000000000  # Byte/s per GPU, single direction, PCIe Gen5 x16"),
        },
    },
    "rtx-3090": {
        "memory_gib": {"value": 24, "source": "https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf", "quote": "GeForce RTX 3090: 24 GB GDDR6X, 936 GB/sec"},
        "bandwidth_tb_s": {"value": 0.936, "source": "https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf", "quote": "GeForce RTX 3090: 24 GB GDDR6X, 936 GB/sec"},
    },
    "rtx-4090": {
        "memory_gib": {"value": 24, "source": "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf", "quote": "GeForce RTX 4090: 24 GB GDDR6X, 1008 GB/sec"},
        "bandwidth_tb_s": {"value": 1.008, "source": "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf", "quote": "GeForce RTX 4090: 24 GB GDDR6X, 1008 GB/sec"},
    },
    "rtx-5090": {
        "memory_gib": {"value": 32, "source": "https://images.nvidia.com/aem-dam/Solutions/geforce/blackwell/nvidia-rtx-blackwell-gpu-architecture.pdf", "quote": "GeForce RTX 5090: 32 GB GDDR7, 1792 GB/sec"},
        "bandwidth_tb_s": {"value": 1.792, "source": "https://images.nvidia.com/aem-dam/Solutions/geforce/blackwell/nvidia-rtx-blackwell-gpu-architecture.pdf", "quote": "GeForce RTX 5090: 32 GB GDDR7, 1792 GB/sec"},
    },
    "mi300x": {
        "int8_dense_tops": {"value": 2614.9, "source": MI300_DOC, "quote": "Matrix INT8 | 4096 (FLOPS/CLOCK/CU) | 2614.9 (Peak TFLOPS)"},
        "bf16_sparse_tflops": {"value": 2614.9, "source": MI300X_PAGE, "via": MI300X_VIA, "quote": "MI300-17: ... The MI300X is expected to be able to take advantage of fine-grained structure sparsity providing an estimated 2x improvement in math efficiency resulting 1,307.4 TFLOPS TF32, 2,614.9 TFLOPS FP16, 2,614.9 TFLOPS BF16, 5,229.8 TFLOPS FP8, 5,229.8 TOPs INT8 ... with sparsity"},
        "fp8_sparse_tflops": {"value": 5229.8, "source": MI300X_PAGE, "via": MI300X_VIA, "quote": "MI300-17: ... resulting ... 5,229.8 TFLOPS FP8, 5,229.8 TOPs INT8 ... with sparsity"},
        "int8_sparse_tops": {"value": 5229.8, "source": MI300X_PAGE, "via": MI300X_VIA, "quote": "MI300-17: ... resulting ... 5,229.8 TOPs INT8 ... with sparsity"},
        "scale_up": {
            "value_gb_s": 896.0,
            "link": "infinity-fabric",
            "direction": "unstated",
            "source": MI300X_PAGE,
            "via": MI300X_VIA,
            "quote": "Infinity Fabric Links | 8; Peak Infinity Fabric Link Bandwidth | 128 GB/s",
            "derived": f"7 links x 128 GB/s: in an eight-GPU platform each MI300X reaches its seven peers over seven of its links ({MI300_DOC}: 'The GPUs are using seven high-bandwidth, low-latency AMD Infinity Fabric links (red lines) to form a fully connected 8-GPU system.'); AMD does not say whether 128 GB/s a link is one direction or both",
        },
    },
    "m3-max-30c": {
        "bandwidth_tb_s": {
            "value": 0.3,
            "source": APPLE_MBP16_NOV2023,
            "quote": "Configurable to: M3 Max with 14-core CPU and 30-core GPU (300GB/s memory bandwidth), or M3 Max with 16-core CPU and 40-core GPU (400GB/s memory bandwidth)",
            "note": APPLE_MBP16_NOV2023_NOTE,
        },
    },
    "m3-max-40c": {
        "bandwidth_tb_s": {
            "value": 0.4,
            "source": APPLE_MBP16_NOV2023,
            "quote": "Configurable to: M3 Max with 14-core CPU and 30-core GPU (300GB/s memory bandwidth), or M3 Max with 16-core CPU and 40-core GPU (400GB/s memory bandwidth)",
            "note": APPLE_MBP16_NOV2023_NOTE,
        },
    },
    "m3-ultra": {
        "bandwidth_tb_s": {
            "value": 0.819,
            "source": APPLE_MAC_STUDIO_2025,
            "via": APPLE_MAC_STUDIO_2025_VIA,
            "quote": "Apple M3 Ultra chip … 819GB/s memory bandwidth … Configurable to: M3 Ultra with 32‑core CPU, 80‑core GPU, and 32‑core Neural Engine (819GB/s memory bandwidth)",
        },
    },
}

# Parts the shared catalogue has no record for, each from vendor sources (their figures in
# VENDOR_FIGURES): the Hopper and Blackwell parts beside the ones it holds.
CUDA_GPUS = "https://developer.nvidia.com/cuda-gpus"
VENDOR_DEVICES = [
    {
        "name": "h200-nvl",
        "after": "h200",
        "description": "NVIDIA H200 NVL (PCIe, NVLink bridge)",
        "vendor": "NVIDIA",
        "compute_capability": {"value": 90, "source": CUDA_GPUS, "quote": "9.0 | NVIDIA GH200 NVIDIA H200 NVIDIA H100"},
    },
    {
        "name": "gh200",
        "after": "h200-nvl",
        "description": "NVIDIA GH200 Grace Hopper Superchip 144GB (its Hopper GPU)",
        "vendor": "NVIDIA",
        "compute_capability": {"value": 90, "source": CUDA_GPUS, "quote": "9.0 | NVIDIA GH200 NVIDIA H200 NVIDIA H100"},
    },
    {
        "name": "b300",
        "after": "gb200",
        "description": "NVIDIA B300 (HGX, Blackwell Ultra)",
        "vendor": "NVIDIA",
        "compute_capability": {"value": 103, **aic("b300_sxm.yaml", 17, "sm_version: 103")},
    },
    {
        "name": "gb300",
        "after": "b300",
        "description": "NVIDIA GB300 (Blackwell Ultra GPU in a Grace-Blackwell superchip, per GPU)",
        "vendor": "NVIDIA",
        "compute_capability": {"value": 103, **aic("gb300.yaml", 17, "sm_version: 103")},
    },
    {
        "name": "rtx-pro-6000",
        "after": "rtx-5090",
        "description": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "vendor": "NVIDIA",
        "compute_capability": {"value": 120, **aic("rtx_pro_6000_server.yaml", 20, "sm_version: 120")},
    },
]

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
    return {"value": round(field["value"] * scale, 6), "source": field["source"]["url"], "quote": field["quote"]}


# The throughput fields, each a TFLOPS (TOPS for INT8) figure a device, dense or as the vendor
# prints it with 2:4 structured sparsity. FP4 is NVFP4 on NVIDIA Blackwell, MXFP4 on AMD CDNA 4.
THROUGHPUT = (
    "bf16_dense_tflops",
    "fp8_dense_tflops",
    "fp4_dense_tflops",
    "int8_dense_tops",
    "bf16_sparse_tflops",
    "fp8_sparse_tflops",
    "fp4_sparse_tflops",
    "int8_sparse_tops",
)

# Parts whose dense figures are half the vendor's sparse ones because the vendor's footnote
# marks its Tensor Core rows "With sparsity" (the shared rule): the note says so beside each.
DENSE_FROM_SPARSE = {
    "h200-nvl": "half of the sparse figure: the page's footnote marks its Tensor Core rows 'With sparsity'",
}


def sourced(field):
    """A VENDOR_FIGURES entry as the data file holds it (value, source, quote, and how it was read)."""
    return {k: v for k, v in field.items() if k in ("value", "source", "quote", "via", "note", "derived")}


def vendor_fill(name, entry):
    """Fill the fields the shared catalogue leaves null from VENDOR_FIGURES; stop on a contradiction."""
    vendor = VENDOR_FIGURES.get(name, {})
    fills = {}
    if "memory_gib" in vendor:
        # Device memory is built in binary units: a vendor's "24 GB" is 24 GiB.
        fills["memory_bytes"] = {**sourced(vendor["memory_gib"]), "value": vendor["memory_gib"]["value"] * GIB}
    if "bandwidth_tb_s" in vendor:
        fills["memory_bandwidth_tb_s"] = sourced(vendor["bandwidth_tb_s"])
    for field in THROUGHPUT:
        if field in vendor:
            fills[field] = sourced(vendor[field])
    if name in DENSE_FROM_SPARSE:
        for dense, sparse in (
            ("bf16_dense_tflops", "bf16_sparse_tflops"),
            ("fp8_dense_tflops", "fp8_sparse_tflops"),
            ("fp4_dense_tflops", "fp4_sparse_tflops"),
            ("int8_dense_tops", "int8_sparse_tops"),
        ):
            if sparse in fills and dense not in fills:
                fills[dense] = {**fills[sparse], "value": fills[sparse]["value"] / 2, "derived": DENSE_FROM_SPARSE[name]}
    for field, value in fills.items():
        held = entry.get(field)
        if held is None:
            entry[field] = value
        elif held["value"] != value["value"]:
            die(f"devices: {name}.{field}: the shared catalogue says {held['value']}, VENDOR_FIGURES {value['value']}")
    scale_up = vendor.get("scale_up")
    entry["scale_up"] = (
        {k: v for k, v in scale_up.items() if k in ("value_gb_s", "link", "direction", "source", "quote", "via", "note", "derived", "direction_from")}
        if scale_up
        else None
    )
    for field in THROUGHPUT + ("memory_bytes", "memory_bandwidth_tb_s"):
        entry.setdefault(field, None)
    return entry


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
            memory_bytes = {"value": value, "source": memory["source"]["url"], "quote": memory["quote"]}
        entry = {
            "name": name,
            "aliases": sorted({d["id"]} - {name}),
            "description": d["name"],
            "vendor": d["vendor"],
            "compute_capability": (
                {
                    "value": capability(d["compute_capability"]),
                    "source": d["compute_capability"]["source"]["url"],
                    "quote": d["compute_capability"]["quote"],
                }
                if d.get("compute_capability")
                else None
            ),
            "gfx_arch": (
                {"value": d["gfx_arch"]["value"], "source": d["gfx_arch"]["source"]["url"], "quote": d["gfx_arch"]["quote"]}
                if d.get("gfx_arch")
                else None
            ),
            "memory_bytes": memory_bytes,
            "memory_bandwidth_tb_s": figure(d.get("memory_bandwidth")),
            "bf16_dense_tflops": figure(d.get("bf16_dense_tflops")),
            "fp8_dense_tflops": figure(d.get("fp8_dense_tflops")),
            "fp4_dense_tflops": figure(d.get("fp4_dense_tflops")),
        }
        vendor_fill(name, entry)
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
    known = {e["name"] for e in out}
    for device in VENDOR_DEVICES:
        if device["name"] in known:
            die(f"devices: {device['name']} is in the shared catalogue now; drop it from VENDOR_DEVICES")
        entry = {"aliases": [], "gfx_arch": None, **{k: v for k, v in device.items() if k != "after"}}
        at = next(i for i, e in enumerate(out) if e["name"] == device["after"]) + 1
        out.insert(at, vendor_fill(device["name"], entry))
    for extra in EXTRA_DEVICES:
        out.append(vendor_fill(extra["name"], {"aliases": [], "gfx_arch": None, **extra}))
    for chip in APPLE_SILICON:
        entry = {"aliases": [], "compute_capability": None, "gfx_arch": None, "memory_bytes": None, **chip}
        out.append(vendor_fill(chip["name"], entry))
    unused = set(VENDOR_FIGURES) - {e["name"] for e in out}
    if unused:
        die(f"devices: VENDOR_FIGURES for parts not in the catalogue: {sorted(unused)}")
    return {
        "generated_by": "scripts/engines/regenerate.py from engines/devices.json (" + data["generated_by"] + ") and its own VENDOR_FIGURES",
        "rule": data["rule"],
        "vendor_figures_rule": VENDOR_RULE,
        "metal_working_set": METAL_WORKING_SET,
        "devices": out,
    }


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

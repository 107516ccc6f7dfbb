#!/usr/bin/env python3
"""Extract which config keys the reference implementations read (crates/preflight-plan/data/).

The planner grades every config.json key. Instead of hand-written per-family tables it uses
data read straight from the released packages' source: a key that neither transformers' nor
vLLM's implementation of the architecture reads cannot change the computation.

Outputs (under OUT_DIR, normally crates/preflight-plan/data/):

  config_keys.json   transformers 5.24.0 config classes (attributes + defaults, attribute_map
                     aliases, sub-configs, kwargs the config class consumes) and the attributes
                     the modeling code reads, per model_type; vLLM 0.33.0 per registered
                     architecture: the attributes its model module (and the model modules it
                     imports) read; shared helpers' reads recorded once as "common".
  modelopt.json      nvidia-modelopt 0.47.0: QUANTIZATION_* / KV_CACHE_* constants, the quant_algo
                     strings its HF exporter writes (per internal format), the hf_quant_config.json
                     / config.json `quantization_config` (quant_method: modelopt) layout, per-layer
                     `quantized_layers` fields for MIXED_PRECISION.
  llamacpp_keys.json llama.cpp vendored in llama-cpp-python 0.3.36: LLM_ARCH_NAMES, LLM_KV_NAMES, the
                     LLM_KV_* keys read by the generic hparams loader, by each architecture's
                     load_arch_hparams, by the model loader, the vocab loader and elsewhere.

Scope of transformers model types (to keep the file small): those with a causal-LM, an
image-text-to-text or a multimodal-LM class (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES, MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES), plus the
model types of their sub-configs (text_config, vision_config, ...). All vLLM registry entries.

Nothing is installed, imported, built or executed: the archives are opened with zipfile/tarfile,
Python parsed with `ast`, C++ read with regular expressions. Every fact carries its source line
inside the archive. Output is deterministic (sorted keys, fixed indentation).

Rules (also written into config_keys.json under "rules"):
  * A read is `<obj>.X` (load context, not a method call) or `getattr(<obj>, "X"[, d])`,
    `hasattr(<obj>, "X")`, `<obj>.get("X")`, `<obj>["X"]`, `"X" in <obj>`, where <obj> is
    config-like: the last name of the expression (`config`, `self.config`, `text_config`,
    `model_config.hf_config`, `cfg`, `get_text_config()`) contains "config" or ends in "cfg",
    and is not one of the engine's own config objects (vLLM's VllmConfig/ModelConfig/...
    sub-configs found in vllm/config/*.py, quantization/generation configs, class names).
    In vLLM, an expression through one of those objects counts only when an `hf_*` name follows
    it (`model_config.hf_config.X` counts, `parallel_config.X` does not).
  * Names only: nesting is not tracked (`config.text_config.hidden_size` reads `text_config`
    and `hidden_size`). Keys under rope_parameters / rope_scaling dicts (`.get("factor")`,
    `["rope_type"]` on an expression whose name contains "rope") are listed separately.
  * Dynamic (the extraction cannot tell which keys): getattr/hasattr/.get/[] with a non-literal
    name (unless the name is a for-loop variable over a literal list of strings, then each is a
    read), `<cfg>.to_dict()`, `<cfg>.to_diff_dict()`, `vars(<cfg>)`, `<cfg>.__dict__`, `**<cfg>`;
    vLLM's Transformers backend modules. Treat every key as read where `dynamic` is non-empty.
  * transformers: a model type's modeling files are models/<dir>/modeling_*.py plus every
    models/*/modeling_*.py they import (transitively). Shared helpers (configuration_utils,
    modeling_utils, modeling_rope_utils, masking_utils, cache_utils, modeling_layers,
    modeling_flash_attention_utils, integrations/heterogeneity/configuration_utils, the attention /
    experts integrations dispatched by name (sdpa/flash/flex/paged attention, moe, hub_kernels) and
    every integrations/* module an included model imports, resolved through the lazy
    integrations/__init__.py _import_structure) are read once: "common". generation/* is not
    included (use_cache and the sampling keys are generation settings).
  * vLLM: an architecture's modules are the registry module plus every module under
    vllm/model_executor/models/ or vllm/models/ it imports (transitively, all platform branches
    of vllm/models/* packages; over-approximates), except the shared helpers in "common"
    (config/*.py, transformers_utils/config.py + model_arch_config_convertor.py, models/utils.py,
    models/config.py, models/interfaces*.py, models/adapters.py, layers/rotary_embedding/*,
    layers/fused_moe/*); layers/mamba/** (except ops/) is followed through the import closure.
  * Config-class-internal reads (`self.X` in the config class's methods) are recorded separately
    as read_by_config_class; keys the config class pops from **kwargs (legacy names) as
    kwargs_read.

Download the inputs (outside the repository) and run:

    pip download --no-deps transformers==5.24.0 -d PKGS
    pip download --no-deps vllm==0.33.0 --platform manylinux_2_28_x86_64 \\
        --only-binary=:all: --python-version 3.11 -d PKGS
    pip download --no-deps nvidia-modelopt==0.47.0 -d PKGS
    pip download --no-deps --no-binary llama-cpp-python llama_cpp_python==0.3.36 -d PKGS

    python3 scripts/engines/extract_config_keys.py PKGS crates/preflight-plan/data          # write
    python3 scripts/engines/extract_config_keys.py PKGS crates/preflight-plan/data --check  # compare

--check regenerates into a temporary directory and compares bytes with OUT_DIR's files; it
exits non-zero on any difference, and (as does a write) on an archive whose sha256 differs from
the pinned one. Runtime ~2-4 min on 2 cores (stdlib only).
"""

import argparse
import ast
import hashlib
import io
import json
import re
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

SCRIPT = "scripts/engines/extract_config_keys.py"

PACKAGES = {
    "transformers": ("transformers-5.24.0-py3-none-any.whl", "5.24.0",
                     "ff5ebedf9359f94bb63772b6380eba6e7104d010cbbb2cb82c788817ea7486f6"),
    "vllm": ("vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl", "0.33.0",
             "4b6bdec4ab269990bf70d45a3c1e94c3760a27064513760193b26d6f0da883aa"),
    "nvidia-modelopt": ("nvidia_modelopt-0.47.0-py3-none-any.whl", "0.47.0",
                        "db13e62d7efe4a1512e8b8c3f479e28d64022306f94a194f13234e7dca1d3120"),
    "llama-cpp-python": ("llama_cpp_python-0.3.36.tar.gz", "0.3.36",
                         "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"),
}

OUT_FILES = ("config_keys.json", "modelopt.json", "llamacpp_keys.json")


# ----------------------------------------------------------------------------------------------
# archives


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Archive:
    """Text members of a wheel (zip) or sdist (tar.gz), keyed by path inside the archive
    (sdist paths relative to its top directory)."""

    def __init__(self, path, want):
        self.files = {}
        if str(path).endswith(".whl"):
            with zipfile.ZipFile(path) as z:
                for name in sorted(z.namelist()):
                    if want(name):
                        self.files[name] = z.read(name).decode("utf-8", "replace")
        else:
            with tarfile.open(path, "r:gz") as t:
                for m in t.getmembers():
                    if not m.isfile():
                        continue
                    rel = m.name.split("/", 1)[1] if "/" in m.name else m.name
                    if want(rel):
                        self.files[rel] = t.extractfile(m).read().decode("utf-8", "replace")
        self._ast = {}

    def tree(self, path):
        if path not in self._ast:
            try:
                self._ast[path] = ast.parse(self.files[path])
            except SyntaxError:
                self._ast[path] = None
        return self._ast[path]


def check_package(pkgs, key, packages=PACKAGES, script=SCRIPT):
    """The pinned archive `packages[key]` in `pkgs`, its sha256 checked; exits when absent or
    different."""
    fname, _version, expected = packages[key]
    path = Path(pkgs) / fname
    if not path.exists():
        sys.exit(f"error: {path} missing (see the pip download commands in {script}'s docstring)")
    got = sha256(path)
    if got != expected:
        sys.exit(f"error: {path} sha256 {got} != pinned {expected}")
    return path


def pkg_record(key):
    fname, version, digest = PACKAGES[key]
    return {"package": fname, "version": version, "sha256": digest}


# ----------------------------------------------------------------------------------------------
# AST helpers


class NotLiteral(Exception):
    pass


def _jsonable(v):
    if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
        return v
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            raise NotLiteral
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if not isinstance(k, str):
                raise NotLiteral
            out[k] = _jsonable(x)
        return out
    raise NotLiteral


def literal(node):
    """(True, value) when the node is a JSON-representable literal."""
    try:
        return True, _jsonable(ast.literal_eval(node))
    except (ValueError, TypeError, SyntaxError, NotLiteral, MemoryError, RecursionError):
        return False, None


def src_text(text, node, limit=240):
    s = ast.get_source_segment(text, node) or ast.unparse(node)
    s = " ".join(s.split())
    return s if len(s) <= limit else s[:limit] + "...[truncated]"


def default_of(text, node):
    """JSON default for a field/arg default expression."""
    ok, v = literal(node)
    if ok:
        return {"default": v}
    if isinstance(node, ast.Call):
        for kw in node.keywords:
            if kw.arg == "default":
                ok, v = literal(kw.value)
                if ok:
                    return {"default": v, "expr": src_text(text, node)}
            if kw.arg == "default_factory":
                f = kw.value
                if isinstance(f, ast.Lambda):
                    ok, v = literal(f.body)
                    if ok:
                        return {"default": v, "expr": src_text(text, node)}
                if isinstance(f, ast.Name) and f.id in ("list", "dict"):
                    return {"default": [] if f.id == "list" else {}, "expr": src_text(text, node)}
    return {"expr": src_text(text, node)}


def last_name(node):
    """Last identifier of an object expression: config / self.config / get_text_config()."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return last_name(node.func)
    if isinstance(node, ast.Subscript):
        return last_name(node.value)
    return None


def chain_names(node):
    out = []
    while True:
        if isinstance(node, ast.Attribute):
            out.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Name):
            out.append(node.id)
            break
        else:
            break
    return list(reversed(out))


def str_const(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


CONFIG_METHODS = {
    "to_dict", "to_diff_dict", "to_json_string", "get_text_config", "save_pretrained",
    "get", "update", "keys", "items", "values", "pop", "setdefault", "copy",
}


class ConfigPredicate:
    def __init__(self, deny, strict_hf=False):
        self.deny = deny
        self.strict_hf = strict_hf  # vLLM: an engine-config object must be followed by hf_*

    def __call__(self, obj):
        name = last_name(obj)
        if not name:
            return False
        low = name.lower()
        if not ("config" in low or low.endswith("cfg")):
            return False
        if name[:1].isupper() or "quant" in low or name in self.deny:
            return False
        names = chain_names(obj)
        if self.strict_hf:
            last_deny = max((i for i, n in enumerate(names) if n in self.deny), default=None)
            if last_deny is not None and not any("hf" in n.lower() for n in names[last_deny + 1:]):
                return False
        return True


class ReadCollector(ast.NodeVisitor):
    """Reads of config attributes in one module (first line per key)."""

    def __init__(self, is_cfg):
        self.is_cfg = is_cfg
        self.reads = {}
        self.rope = {}
        self.dynamic = []
        self.loop_strs = {}

    def add(self, key, line):
        if not key or (key.startswith("__") and key.endswith("__")):
            return
        if key not in self.reads or line < self.reads[key]:
            self.reads[key] = line

    def add_rope(self, key, line):
        if key not in self.rope or line < self.rope[key]:
            self.rope[key] = line

    def dyn(self, line, kind):
        self.dynamic.append((line, kind))

    def run(self, tree):
        # for-loop variables over literal string lists: getattr(config, name) resolves to those
        for node in ast.walk(tree):
            if isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.target, ast.Name):
                ok, v = literal(node.iter)
                if ok and isinstance(v, list) and v and all(isinstance(x, str) for x in v):
                    self.loop_strs.setdefault(node.target.id, set()).update(v)
            # names = ["a", "b"]; getattr_iter(config, names, ...)
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                ok, v = literal(node.value)
                if ok and isinstance(v, list) and v and all(isinstance(x, str) for x in v):
                    self.loop_strs.setdefault(node.targets[0].id, set()).update(v)
        self._method_funcs = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                self._method_funcs.add(id(node.func))
        self.visit(tree)
        return self

    def _name_arg(self, obj, arg, line, kind):
        s = str_const(arg)
        ok, v = literal(arg)
        if s is not None:
            self.add(s, line)
        elif ok and isinstance(v, list) and all(isinstance(x, str) for x in v):
            for x in v:
                self.add(x, line)
        elif isinstance(arg, ast.Name) and arg.id in self.loop_strs:
            for s in sorted(self.loop_strs[arg.id]):
                self.add(s, line)
        else:
            self.dyn(line, kind)

    def visit_Attribute(self, node):
        if isinstance(node.ctx, ast.Load):
            if id(node) not in self._method_funcs and self.is_cfg(node.value) \
                    and node.attr not in ("setter", "getter", "deleter"):
                if node.attr == "__dict__":
                    self.dyn(node.lineno, "__dict__")
                else:
                    self.add(node.attr, node.lineno)
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        t = node.target
        if isinstance(t, ast.Attribute) and self.is_cfg(t.value):
            self.add(t.attr, node.lineno)
        self.generic_visit(node)

    def visit_Call(self, node):
        f = node.func
        line = node.lineno
        if isinstance(f, ast.Name) and f.id in ("getattr", "hasattr") and len(node.args) >= 2:
            if self.is_cfg(node.args[0]):
                self._name_arg(node.args[0], node.args[1], line, f.id + "_nonliteral")
        elif isinstance(f, ast.Name) and f.id == "getattr_iter" and len(node.args) >= 2 \
                and self.is_cfg(node.args[0]):
            self._name_arg(node.args[0], node.args[1], line, "getattr_iter_nonliteral")
        elif isinstance(f, ast.Name) and f.id == "vars" and node.args and self.is_cfg(node.args[0]):
            self.dyn(line, "vars")
        elif isinstance(f, ast.Attribute):
            if f.attr in ("get", "pop") and node.args:
                if self.is_cfg(f.value):
                    self._name_arg(f.value, node.args[0], line, "get_nonliteral")
                elif "rope" in (last_name(f.value) or "").lower():
                    s = str_const(node.args[0])
                    if s is not None:
                        self.add_rope(s, line)
            elif f.attr in ("to_dict", "to_diff_dict") and self.is_cfg(f.value):
                self.dyn(line, f.attr)
        for kw in node.keywords:
            if kw.arg is None:
                v = kw.value
                if self.is_cfg(v):
                    self.dyn(line, "**config")
                elif isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
                        and v.func.attr in ("to_dict", "to_diff_dict") and self.is_cfg(v.func.value):
                    self.dyn(line, "**config.to_dict()")
        self.generic_visit(node)

    def visit_Subscript(self, node):
        if isinstance(node.ctx, ast.Load):
            s = str_const(node.slice)
            if self.is_cfg(node.value):
                if s is not None:
                    self.add(s, node.lineno)
                elif isinstance(node.slice, ast.Name) and node.slice.id in self.loop_strs:
                    for x in sorted(self.loop_strs[node.slice.id]):
                        self.add(x, node.lineno)
                elif not isinstance(node.slice, (ast.Constant, ast.Slice)):
                    self.dyn(node.lineno, "subscript_nonliteral")
            elif s is not None and "rope" in (last_name(node.value) or "").lower():
                self.add_rope(s, node.lineno)
        self.generic_visit(node)

    def visit_Compare(self, node):
        if len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            s = str_const(node.left)
            right = node.comparators[0]
            if s is not None:
                if self.is_cfg(right):
                    self.add(s, node.lineno)
                elif "rope" in (last_name(right) or "").lower():
                    self.add_rope(s, node.lineno)
        self.generic_visit(node)


def module_reads(arc, path, is_cfg, cache):
    key = (path, id(is_cfg))
    if key not in cache:
        tree = arc.tree(path)
        if tree is None:
            cache[key] = ({}, {}, [(0, "syntax_error")])
        else:
            c = ReadCollector(is_cfg).run(tree)
            cache[key] = (c.reads, c.rope, sorted(set(c.dynamic)))
    return cache[key]


def resolve_import(from_path, node, exists):
    """Module file paths a `from X import ...` / `import X` refers to (within the archive)."""
    pkg = from_path[:-3].split("/")
    if pkg[-1] == "__init__":
        pkg = pkg[:-1]
    else:
        pkg = pkg[:-1]
    outs = []
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = pkg[: len(pkg) - (node.level - 1)] if node.level > 1 else pkg
            mod = base + (node.module.split(".") if node.module else [])
        else:
            mod = node.module.split(".") if node.module else []
        cands = ["/".join(mod)]
        # `from pkg import submodule`
        for a in node.names:
            cands.append("/".join(mod + [a.name]))
    else:
        cands = ["/".join(a.name.split(".")) for a in node.names]
    for c in cands:
        for p in (c + ".py", c + "/__init__.py"):
            if exists(p):
                outs.append(p)
                break
    return outs


def imports_of(arc, path):
    tree = arc.tree(path)
    out = []
    if tree is None:
        return out
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.extend(resolve_import(path, node, arc.files.__contains__))
    return sorted(set(out))


class FileTable:
    def __init__(self):
        self.paths = []
        self.idx = {}

    def __call__(self, path):
        if path not in self.idx:
            self.idx[path] = len(self.paths)
            self.paths.append(path)
        return self.idx[path]

    def finalize(self, obj):
        """Renumber file indices in sorted path order (deterministic, independent of visit order)."""
        order = sorted(self.paths)
        remap = {self.idx[p]: i for i, p in enumerate(order)}

        def walk(o, key=None):
            if isinstance(o, dict):
                return {k: walk(v, k) for k, v in o.items()}
            if isinstance(o, FRef):
                return [remap[o.f], o.line] if o.line is not None else remap[o.f]
            if isinstance(o, list):
                return [walk(x) for x in o]
            return o

        return order, walk(obj)


class FRef:
    __slots__ = ("f", "line")

    def __init__(self, f, line=None):
        self.f = f
        self.line = line


# ----------------------------------------------------------------------------------------------
# transformers

TF_COMMON = [
    "transformers/configuration_utils.py",
    "transformers/modeling_utils.py",
    "transformers/modeling_rope_utils.py",
    "transformers/masking_utils.py",
    "transformers/cache_utils.py",
    "transformers/modeling_layers.py",
    "transformers/modeling_flash_attention_utils.py",
    "transformers/integrations/heterogeneity/configuration_utils.py",
]
# attention / experts implementations dispatched by name from modeling_utils (ALL_ATTENTION_FUNCTIONS,
# experts_implementation), always part of "common"
TF_COMMON_INTEGRATIONS = ["sdpa_attention", "flash_attention", "flex_attention", "sdpa_paged", "flash_paged",
                          "eager_paged", "moe", "hub_kernels"]
TF_BASE_CLASSES = ("PreTrainedConfig", "PretrainedConfig")
TF_CLASSVARS = ("model_type", "base_config_key", "default_theta", "keys_to_ignore_at_inference")


def tf_mapping(arc, path, name):
    """(model_type -> value, model_type -> line) of an OrderedDict([...]) / dict literal."""
    tree = arc.tree(path)
    out, lines = {}, {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            v = node.value
            if isinstance(v, ast.Call) and v.args:
                v = v.args[0]
            elts = v.elts if isinstance(v, (ast.List, ast.Tuple)) else []
            for e in elts:
                if isinstance(e, ast.Tuple) and len(e.elts) == 2:
                    k, val = str_const(e.elts[0]), e.elts[1]
                    ok, lv = literal(val)
                    if k is not None and ok:
                        out[k] = lv
                        lines[k] = e.lineno
                elif isinstance(e, ast.Starred):
                    # *list(OTHER.items())
                    inner = e.value
                    while isinstance(inner, ast.Call):
                        inner = inner.args[0] if inner.args else inner.func
                        if isinstance(inner, ast.Attribute):
                            inner = inner.value
                    if isinstance(inner, ast.Name):
                        o2, l2 = tf_mapping(arc, path, inner.id)
                        for k2 in o2:
                            out.setdefault(k2, o2[k2])
                            lines.setdefault(k2, l2[k2])
            if isinstance(v, ast.Dict):
                for k, val in zip(v.keys, v.values):
                    ok, lv = literal(val)
                    if str_const(k) is not None and ok:
                        out[str_const(k)] = lv
                        lines[str_const(k)] = k.lineno
    return out, lines


def tf_config_mapping(arc):
    am = "transformers/models/auto/auto_mappings.py"
    ca = "transformers/models/auto/configuration_auto.py"
    names, lines = tf_mapping(arc, am, "CONFIG_MAPPING_NAMES")
    src = {k: (am, lines[k]) for k in names}
    special, _ = tf_mapping(arc, am, "SPECIAL_MODEL_TYPE_TO_MODULE_NAME")
    # configuration_auto.py: CONFIG_MAPPING_NAMES.update({...}), SPECIAL_...update({...}),
    # CONFIG_MAPPING_NAMES = OrderedDict(**{"gpt-sw3": ...}, **CONFIG_MAPPING_NAMES)
    for node in ast.walk(arc.tree(ca)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update" \
                and isinstance(node.func.value, ast.Name) and node.args and isinstance(node.args[0], ast.Dict):
            target = node.func.value.id
            for k, v in zip(node.args[0].keys, node.args[0].values):
                if str_const(k) is None or str_const(v) is None:
                    continue
                if target == "CONFIG_MAPPING_NAMES":
                    names[str_const(k)] = str_const(v)
                    src[str_const(k)] = (ca, k.lineno)
                elif target == "SPECIAL_MODEL_TYPE_TO_MODULE_NAME":
                    special[str_const(k)] = str_const(v)
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "CONFIG_MAPPING_NAMES"
                                                for t in node.targets) and isinstance(node.value, ast.Call):
            for kw in node.value.keywords:
                if kw.arg is None and isinstance(kw.value, ast.Dict):
                    for k, v in zip(kw.value.keys, kw.value.values):
                        if str_const(k) and str_const(v):
                            names[str_const(k)] = str_const(v)
                            src[str_const(k)] = (ca, k.lineno)
    return names, src, special


class TfConfigs:
    def __init__(self, arc, ft):
        self.arc = arc
        self.ft = ft
        self.cls_cache = {}

    def find_class(self, path, name, depth=0):
        """(path, ClassDef) for `name` as visible in module `path`."""
        if depth > 6 or path not in self.arc.files:
            return None
        tree = self.arc.tree(path)
        if tree is None:
            return None
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return path, node
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
                real = [a.name for a in node.names if (a.asname or a.name) == name][0]
                for p in resolve_import(path, node, self.arc.files.__contains__):
                    if p.endswith("/" + real + ".py"):
                        continue
                    r = self.find_class(p, real, depth + 1)
                    if r:
                        return r
        return None

    def chain(self, path, name):
        """DFS MRO-ish list of (path, ClassDef); base configs included at the end."""
        out, seen = [], set()

        def go(p, n):
            r = self.find_class(p, n)
            if not r or (r[0], n) in seen:
                return
            seen.add((r[0], n))
            out.append(r)
            for b in r[1].bases:
                bn = b.id if isinstance(b, ast.Name) else (b.attr if isinstance(b, ast.Attribute) else None)
                if bn and bn not in ("object", "Generic"):
                    go(r[0], bn)

        go(path, name)
        return out

    def class_facts(self, path, cls):
        """Facts of one class body (not inherited)."""
        text = self.arc.files[path]
        f = self.ft(path)
        fields, classvars, props, self_reads, set_in_init = {}, {}, {}, {}, {}
        attribute_map = sub_configs = None
        init_args = {}
        has_init = False
        method_kwargs, method_calls = {}, {}
        for node in cls.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                ann = ast.unparse(node.annotation)
                n = node.target.id
                if ann.startswith("ClassVar") or ann.startswith("typing.ClassVar"):
                    if n == "attribute_map" and node.value is not None:
                        attribute_map = (literal(node.value)[1], node.lineno)
                    elif n in ("sub_configs", "sub_configs_defaults") and node.value is not None:
                        sub_configs = (self.sub_configs(text, node.value), node.lineno)
                    elif n in TF_CLASSVARS and node.value is not None:
                        classvars[n] = dict(default_of(text, node.value), source=FRef(f, node.lineno))
                    continue
                d = default_of(text, node.value) if node.value is not None else {"required": True}
                d["source"] = FRef(f, node.lineno)
                fields[n] = d
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                n = node.targets[0].id
                if n == "attribute_map":
                    ok, v = literal(node.value)
                    attribute_map = (v if ok else {"expr": src_text(text, node.value)}, node.lineno)
                elif n in ("sub_configs", "sub_configs_defaults"):
                    sub_configs = (self.sub_configs(text, node.value), node.lineno)
                elif n in TF_CLASSVARS:
                    classvars[n] = dict(default_of(text, node.value), source=FRef(f, node.lineno))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                decos = [ast.unparse(d) for d in node.decorator_list]
                if "property" in decos:
                    props.setdefault(node.name, FRef(f, node.lineno))
                if node.name == "__init__":
                    has_init = True
                    a = node.args
                    pos = a.posonlyargs + a.args
                    for arg, dflt in zip(pos[len(pos) - len(a.defaults):], a.defaults):
                        init_args[arg.arg] = dict(default_of(text, dflt), source=FRef(f, arg.lineno))
                    for arg, dflt in zip(a.kwonlyargs, a.kw_defaults):
                        if dflt is not None:
                            init_args[arg.arg] = dict(default_of(text, dflt), source=FRef(f, arg.lineno))
                        else:
                            init_args[arg.arg] = {"required": True, "source": FRef(f, arg.lineno)}
                    for arg in pos[1: len(pos) - len(a.defaults)]:
                        init_args[arg.arg] = {"required": True, "source": FRef(f, arg.lineno)}
                kwname = node.args.kwarg.arg if node.args.kwarg else None
                mkw = method_kwargs.setdefault(node.name, {})
                calls = method_calls.setdefault(node.name, set())
                funcs = {id(c.func) for c in ast.walk(node) if isinstance(c, ast.Call)}
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) \
                            and isinstance(sub.func.value, ast.Name) and sub.func.value.id in ("self", "cls"):
                        calls.add(sub.func.attr)
                    if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) \
                            and isinstance(sub.func.value, ast.Call) and isinstance(sub.func.value.func, ast.Name) \
                            and sub.func.value.func.id == "super":
                        calls.add(sub.func.attr)
                    line = getattr(sub, "lineno", None)
                    # kwargs consumed by the config class
                    if kwname and isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) \
                            and sub.func.attr in ("pop", "get") and isinstance(sub.func.value, ast.Name) \
                            and sub.func.value.id == kwname and sub.args and str_const(sub.args[0]):
                        mkw.setdefault(str_const(sub.args[0]), FRef(f, line))
                    if kwname and isinstance(sub, ast.Compare) and len(sub.ops) == 1 \
                            and isinstance(sub.ops[0], (ast.In, ast.NotIn)) and str_const(sub.left) \
                            and isinstance(sub.comparators[0], ast.Name) and sub.comparators[0].id == kwname:
                        mkw.setdefault(str_const(sub.left), FRef(f, line))
                    if kwname and isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name) \
                            and sub.value.id == kwname and str_const(sub.slice):
                        mkw.setdefault(str_const(sub.slice), FRef(f, line))
                    # self.X reads / stores
                    if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "self":
                        if isinstance(sub.ctx, ast.Load) and not sub.attr.startswith("__") and id(sub) not in funcs:
                            self_reads.setdefault(sub.attr, FRef(f, line))
                        elif isinstance(sub.ctx, ast.Store) and node.name in ("__init__", "__post_init__"):
                            set_in_init.setdefault(sub.attr, FRef(f, line))
                    if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) \
                            and sub.func.id in ("getattr", "hasattr") and len(sub.args) >= 2 \
                            and isinstance(sub.args[0], ast.Name) and sub.args[0].id == "self" \
                            and str_const(sub.args[1]):
                        self_reads.setdefault(str_const(sub.args[1]), FRef(f, line))
                    if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == "setattr" \
                            and len(sub.args) >= 2 and isinstance(sub.args[0], ast.Name) \
                            and sub.args[0].id == "self" and str_const(sub.args[1]) \
                            and node.name in ("__init__", "__post_init__"):
                        set_in_init.setdefault(str_const(sub.args[1]), FRef(f, line))
        return {
            "fields": fields, "init_args": init_args, "has_init": has_init, "classvars": classvars,
            "properties": props, "method_kwargs": method_kwargs, "method_calls": method_calls,
            "self_reads": self_reads,
            "set_in_init": set_in_init, "attribute_map": attribute_map, "sub_configs": sub_configs,
        }

    @staticmethod
    def sub_configs(text, node):
        out = {}
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                ks = str_const(k)
                if ks is None:
                    continue
                name = None
                if isinstance(v, ast.Name):
                    name = v.id
                elif isinstance(v, ast.Call):
                    for kw in v.keywords:
                        if kw.arg == "config_class" and isinstance(kw.value, ast.Name):
                            name = kw.value.id
                    if name is None and v.args and isinstance(v.args[0], ast.Name):
                        name = v.args[0].id
                out[ks] = name if name else {"expr": src_text(text, v)}
        else:
            out = {"expr": src_text(text, node)}
        return out

    def merged(self, chain, stop_at_base=True):
        """Attributes and the rest, child first; stops at PreTrainedConfig when asked."""
        attrs, props, kwargs_read, self_reads, set_in_init, classvars = {}, {}, {}, {}, {}, {}
        attribute_map = sub_configs = None
        classes = []
        method_kwargs, method_calls = {}, {}
        leaf = chain[0][1].name if chain else None
        for path, cls in chain:
            if stop_at_base and cls.name in TF_BASE_CLASSES:
                break
            classes.append(cls.name)
            facts = self.class_facts(path, cls)
            for n, d in list(facts["fields"].items()) + list(facts["init_args"].items()):
                if n in attrs:
                    continue
                if cls.name != leaf:
                    d = dict(d, defined_in=cls.name)
                attrs[n] = d
            for name, kw in facts["method_kwargs"].items():
                method_kwargs.setdefault(name, []).append(kw)
            for name, cs in facts["method_calls"].items():
                method_calls.setdefault(name, set()).update(cs)
            for dst, src_ in ((props, facts["properties"]),
                              (self_reads, facts["self_reads"]), (set_in_init, facts["set_in_init"]),
                              (classvars, facts["classvars"])):
                for k, v in src_.items():
                    dst.setdefault(k, v)
            if attribute_map is None and facts["attribute_map"] is not None:
                attribute_map = facts["attribute_map"][0]
            if sub_configs is None and facts["sub_configs"] is not None:
                sub_configs = facts["sub_configs"][0]
        # kwargs consumed on construction: __init__/__post_init__ and the methods they call
        todo, seen = ["__init__", "__post_init__"], set()
        while todo:
            m = todo.pop()
            if m in seen:
                continue
            seen.add(m)
            todo.extend(sorted(method_calls.get(m, ())))
        for m in sorted(seen):
            for kw in method_kwargs.get(m, []):
                for k, v in kw.items():
                    kwargs_read.setdefault(k, v)
        return {
            "classes": classes, "attributes": attrs, "properties": props, "kwargs_read": kwargs_read,
            "read_by_config_class": self_reads, "set_in_init": set_in_init, "class_vars": classvars,
            "attribute_map": attribute_map, "sub_configs": sub_configs,
        }


def tf_deny():
    return {"generation_config", "quantization_config", "quant_config", "gen_config", "processor_config",
            "preprocessor_config", "tokenizer_config", "feature_extractor_config", "image_processor_config",
            "peft_config", "adapter_config", "deepspeed_config", "ds_config", "fsdp_config",
            "accelerate_config", "trainer_config", "training_config", "hqq_config", "bnb_config",
            "cache_config", "load_config", "sweep_config", "ct_config", "distributed_config", "fusion_config"}


def extract_transformers(arc, ft, tf_pred):
    cfg_names, cfg_src, special = tf_config_mapping(arc)
    ma = "transformers/models/auto/modeling_auto.py"
    mappings = {}
    for label, var in (("causal_lm", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"),
                       ("image_text_to_text", "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES"),
                       ("multimodal_lm", "MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES")):
        names, lines = tf_mapping(arc, ma, var)
        for mt, cls in names.items():
            mappings.setdefault(mt, {})[label] = {"classes": cls if isinstance(cls, list) else [cls],
                                                  "source": FRef(ft(ma), lines[mt])}
    cfgs = TfConfigs(arc, ft)
    cache = {}
    class_to_mt = {}
    for mt, cname in cfg_names.items():
        class_to_mt.setdefault(cname, mt)

    def module_dir(mt):
        return special.get(mt, mt.replace("-", "_"))

    def config_path(mt):
        d = module_dir(mt)
        p = f"transformers/models/{d}/configuration_{d}.py"
        if p in arc.files:
            return p
        cands = sorted(x for x in arc.files if x.startswith(f"transformers/models/{d}/configuration_"))
        return cands[0] if cands else None

    # integrations/__init__.py is a lazy module: exported name -> submodule (_import_structure)
    integ_init = "transformers/integrations/__init__.py"
    integ_names = {}
    for node in arc.tree(integ_init).body:
        if isinstance(node, ast.AnnAssign) or isinstance(node, ast.Assign):
            tgt = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(tgt, ast.Name) and tgt.id == "_import_structure" and isinstance(node.value, ast.Dict):
                for k, v in zip(node.value.keys, node.value.values):
                    ok, names = literal(v)
                    if str_const(k) and ok:
                        for n in names:
                            integ_names.setdefault(n, f"transformers/integrations/{str_const(k)}.py")

    def helper_imports(p):
        out = set()
        tree = arc.tree(p)
        for node in ast.walk(tree) if tree else []:
            if isinstance(node, ast.ImportFrom):
                for q in resolve_import(p, node, arc.files.__contains__):
                    if q == integ_init:
                        out.update(integ_names[a.name] for a in node.names
                                   if a.name in integ_names and integ_names[a.name] in arc.files)
                    elif q in TF_COMMON or q.startswith("transformers/integrations/") \
                            or q.startswith("transformers/models/auto/"):
                        out.add(q)
        return out

    wanted = sorted(mappings)
    included = {mt: sorted(mappings[mt]) for mt in wanted}
    out_mt = {}
    queue = list(wanted)
    while queue:
        mt = queue.pop(0)
        if mt in out_mt or mt not in cfg_names:
            continue
        cname = cfg_names[mt]
        cpath = config_path(mt)
        if not (cpath and cfgs.find_class(cpath, cname)):
            # e.g. data2vec-text (configuration_data2vec_text.py), gpt-sw3 (GPT2Config)
            cpath = next((p for p in sorted(arc.files) if re.match(r"transformers/models/[^/]+/configuration_", p)
                          and cfgs.find_class(p, cname) and cfgs.find_class(p, cname)[0] == p), cpath)
        entry = {"config_class": cname}
        if mt in mappings:
            entry["generation_classes"] = mappings[mt]
        entry["included_because"] = included.get(mt, [])
        chain = cfgs.chain(cpath, cname) if cpath else []
        if not chain:
            entry["error"] = "config class not found statically"
            out_mt[mt] = entry
            continue
        entry["config_source"] = FRef(ft(chain[0][0]), chain[0][1].lineno)
        m = cfgs.merged(chain)
        entry["config_mro"] = m["classes"]
        entry["base"] = next((c.name for _, c in chain if c.name in TF_BASE_CLASSES), None)
        entry["attributes"] = m["attributes"]
        entry["attribute_map"] = m["attribute_map"] or {}
        entry["properties"] = m["properties"]
        entry["kwargs_read"] = m["kwargs_read"]
        entry["read_by_config_class"] = m["read_by_config_class"]
        entry["set_in_config_init"] = {k: v for k, v in m["set_in_init"].items() if k not in m["attributes"]}
        entry["class_vars"] = m["class_vars"]
        if m["sub_configs"]:
            subs = {}
            for k, v in sorted(m["sub_configs"].items()) if isinstance(m["sub_configs"], dict) else []:
                if isinstance(v, str):
                    smt = class_to_mt.get(v)
                    subs[k] = {"config_class": v, "model_type": smt}
                    if smt and smt not in out_mt:
                        included.setdefault(smt, [])
                        if f"sub_config_of:{mt}" not in included[smt]:
                            included[smt].append(f"sub_config_of:{mt}")
                        queue.append(smt)
                else:
                    subs[k] = v
            entry["sub_configs"] = subs
        # modeling files
        d = module_dir(mt)
        own = sorted(p for p in arc.files
                     if p.startswith(f"transformers/models/{d}/modeling_") and p.endswith(".py"))
        files, helpers, seen = [], set(), set()
        stack = list(own)
        while stack:
            p = stack.pop(0)
            if p in seen:
                continue
            seen.add(p)
            files.append(p)
            for q in imports_of(arc, p):
                if re.match(r"transformers/models/[^/]+/modeling_[^/]+\.py$", q) and \
                        not q.startswith("transformers/models/auto/"):
                    stack.append(q)
            helpers |= helper_imports(p)
        reads, rope, dyn = {}, {}, []
        for p in files:
            r, rp, dy = module_reads(arc, p, tf_pred, cache)
            fi = ft(p)
            for k in sorted(r):
                if k not in reads:
                    reads[k] = FRef(fi, r[k])
            for k in sorted(rp):
                if k not in rope:
                    rope[k] = FRef(fi, rp[k])
            dyn.extend([FRef(fi, ln), kind] for ln, kind in dy)
        entry["modeling_files"] = [FRef(ft(p)) for p in files]
        entry["helpers_imported"] = sorted(helpers)
        entry["delegates_to_auto_model"] = any(h.startswith("transformers/models/auto/") for h in helpers)
        entry["reads"] = reads
        entry["rope_parameter_keys_read"] = rope
        entry["dynamic"] = dyn
        out_mt[mt] = entry
    for mt in out_mt:
        out_mt[mt]["included_because"] = sorted(included.get(mt, []))

    # base config, recorded once
    base_path = "transformers/configuration_utils.py"
    base_chain = cfgs.chain(base_path, "PreTrainedConfig")
    bm = cfgs.merged(base_chain, stop_at_base=False)
    gen_keys = {}
    gpath = "transformers/generation/configuration_utils.py"
    for node in ast.walk(arc.tree(gpath)):
        if isinstance(node, ast.FunctionDef) and node.name == "_get_default_generation_params":
            for sub in ast.walk(node):
                if isinstance(sub, ast.Return) and isinstance(sub.value, ast.Dict):
                    for k, v in zip(sub.value.keys, sub.value.values):
                        if str_const(k):
                            gen_keys[str_const(k)] = dict(default_of(arc.files[gpath], v),
                                                          source=FRef(ft(gpath), k.lineno))
    base = {
        "class": "PreTrainedConfig",
        "source": FRef(ft(base_chain[0][0]), base_chain[0][1].lineno),
        "mro": bm["classes"],
        "attributes": bm["attributes"],
        "properties": bm["properties"],
        "kwargs_read": bm["kwargs_read"],
        "read_by_config_class": bm["read_by_config_class"],
        "set_in_config_init": {k: v for k, v in bm["set_in_init"].items() if k not in bm["attributes"]},
        "generation_params_popped": gen_keys,
        "generation_params_note": "PreTrainedConfig.__post_init__ pops these keys from config kwargs "
                                  "(GenerationConfig._get_default_generation_params); they configure "
                                  "generation, not the model",
    }
    used = {h for e in out_mt.values() for h in e.get("helpers_imported", [])
            if h.startswith("transformers/integrations/") and h != integ_init}
    common_files = sorted(set(TF_COMMON) | used |
                          {f"transformers/integrations/{n}.py" for n in TF_COMMON_INTEGRATIONS
                           if f"transformers/integrations/{n}.py" in arc.files})
    creads, crope, cdyn = {}, {}, []
    for p in common_files:
        r, rp, dy = module_reads(arc, p, tf_pred, cache)
        fi = ft(p)
        for k in sorted(r):
            creads.setdefault(k, FRef(fi, r[k]))
        for k in sorted(rp):
            crope.setdefault(k, FRef(fi, rp[k]))
        cdyn.extend([FRef(fi, ln), kind] for ln, kind in dy)
    common = {"files": [FRef(ft(p)) for p in common_files], "reads": creads,
              "rope_parameter_keys_read": crope, "dynamic": cdyn}
    return {"model_types": out_mt, "base_config": base, "common": common,
            "model_types_count": len(out_mt)}


# ----------------------------------------------------------------------------------------------
# vLLM

VLLM_COMMON_FIXED = [
    "vllm/transformers_utils/config.py",
    "vllm/transformers_utils/model_arch_config_convertor.py",
    "vllm/model_executor/models/utils.py",
    "vllm/model_executor/models/config.py",
    "vllm/model_executor/models/interfaces.py",
    "vllm/model_executor/models/interfaces_base.py",
    "vllm/model_executor/models/adapters.py",
]
VLLM_COMMON_PREFIXES = [
    "vllm/config/",
    "vllm/model_executor/layers/rotary_embedding/",
    "vllm/model_executor/layers/fused_moe/",
]
# model-specific layers reached through the import closure (mixers of hybrid models)
VLLM_FOLLOWED_LAYERS = ("vllm/model_executor/layers/mamba/",)
VLLM_NOT_FOLLOWED = {"vllm/model_executor/models/registry.py", "vllm/model_executor/models/__init__.py",
                     "vllm/models/__init__.py"}


def vllm_deny(arc):
    """Names of vLLM's own config objects: `*_config` fields of classes in vllm/config/*.py."""
    deny = set(tf_deny()) | {"vllm_config", "model_config", "moe_config", "eplb_config", "pass_config",
                             "moe_parallel_config", "mm_config", "spec_config", "draft_model_config",
                             "target_model_config", "model_arch_config", "pooler_config",
                             "multimodal_config", "vllm_parallel_config", "draft_vllm_config",
                             "_vllm_config", "dsa_vllm_config", "online_quantization_config",
                             "compilation_config", "speculative_config", "cache_config",
                             "parallel_config", "scheduler_config", "lora_config", "load_config",
                             "device_config", "kernel_config", "attention_config", "observability_config",
                             "structured_outputs_config", "kv_transfer_config", "kv_events_config",
                             "ec_transfer_config", "profiler_config", "additional_config"}
    for p in sorted(arc.files):
        if p.startswith("vllm/config/") and p.endswith(".py"):
            tree = arc.tree(p)
            if tree is None:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    for b in node.body:
                        if isinstance(b, ast.AnnAssign) and isinstance(b.target, ast.Name):
                            n = b.target.id
                            if (n.endswith("_config") or n.endswith("_cfg")) and "hf" not in n \
                                    and n not in ("text_config", "vision_config", "audio_config"):
                                deny.add(n)
    return deny


def extract_vllm(arc, ft, pred):
    reg = "vllm/model_executor/models/registry.py"
    tree = arc.tree(reg)
    entries = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            tgt = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if not (isinstance(tgt, ast.Name) and tgt.id.endswith("_MODELS") and isinstance(node.value, ast.Dict)):
                continue
            if tgt.id in ("_VLLM_MODELS",):
                continue
            for k, v in zip(node.value.keys, node.value.values):
                if k is None or str_const(k) is None:
                    continue
                ok, val = literal(v)
                if ok and isinstance(val, list) and len(val) == 2:
                    entries.setdefault(str_const(k), (tgt.id, val[0], val[1], k.lineno))

    def mod_path(mod):
        full = mod if mod.startswith("vllm.") else f"vllm.model_executor.models.{mod}"
        base = full.replace(".", "/")
        for p in (base + ".py", base + "/__init__.py"):
            if p in arc.files:
                return full, p
        return full, None

    common_files = sorted(set(p for p in VLLM_COMMON_FIXED if p in arc.files) |
                          {p for p in arc.files if p.endswith(".py") and
                           any(p.startswith(x) for x in VLLM_COMMON_PREFIXES)})
    common_set = set(common_files)
    cache = {}

    def follow(p):
        return (p.startswith("vllm/model_executor/models/") or p.startswith("vllm/models/")
                or (p.startswith(VLLM_FOLLOWED_LAYERS) and "/ops/" not in p)) \
            and p not in common_set and p not in VLLM_NOT_FOLLOWED

    closure_cache = {}

    def closure(start):
        if start in closure_cache:
            return closure_cache[start]
        files, seen, queue = [], set(), [start]
        while queue:
            p = queue.pop(0)
            if p in seen:
                continue
            seen.add(p)
            files.append(p)
            q = [x for x in imports_of(arc, p) if follow(x)]
            # platform-switched packages: all submodules of vllm/models/<pkg>/
            if p.startswith("vllm/models/") and p.endswith("/__init__.py"):
                pkgdir = p[: -len("__init__.py")]
                q += sorted(x for x in arc.files if x.startswith(pkgdir) and x.endswith(".py") and follow(x))
            queue.extend(sorted(set(q)))
        closure_cache[start] = files
        return files

    archs = {}
    for arch in sorted(entries):
        group, mod, cls, line = entries[arch]
        full, path = mod_path(mod)
        e = {"registry_group": group, "module": full, "class": cls, "source": FRef(ft(reg), line)}
        if path is None:
            e["error"] = "module not found in wheel"
            archs[arch] = e
            continue
        files = closure(path)
        reads, rope, dyn = {}, {}, []
        for p in files:
            r, rp, dy = module_reads(arc, p, pred, cache)
            fi = ft(p)
            for k in sorted(r):
                reads.setdefault(k, FRef(fi, r[k]))
            for k in sorted(rp):
                rope.setdefault(k, FRef(fi, rp[k]))
            dyn.extend([FRef(fi, ln), kind] for ln, kind in dy)
            if p.startswith("vllm/model_executor/models/transformers/"):
                dyn.append([FRef(fi, 1), "transformers_backend"])
        # class line
        t = arc.tree(path)
        for node in (t.body if t else []):
            if isinstance(node, ast.ClassDef) and node.name == cls:
                e["class_source"] = FRef(ft(path), node.lineno)
        e["modules"] = [FRef(ft(p)) for p in files]
        e["reads"] = reads
        e["rope_parameter_keys_read"] = rope
        e["dynamic"] = dyn
        archs[arch] = e
    creads, crope, cdyn = {}, {}, []
    for p in common_files:
        r, rp, dy = module_reads(arc, p, pred, cache)
        fi = ft(p)
        for k in sorted(r):
            creads.setdefault(k, FRef(fi, r[k]))
        for k in sorted(rp):
            crope.setdefault(k, FRef(fi, rp[k]))
        cdyn.extend([FRef(fi, ln), kind] for ln, kind in dy)
    common = {"files": [FRef(ft(p)) for p in common_files], "reads": creads,
              "rope_parameter_keys_read": crope, "dynamic": cdyn}
    return {"architectures": archs, "common": common, "architectures_count": len(archs)}


# ----------------------------------------------------------------------------------------------
# ModelOpt


def extract_modelopt(arc):
    out = {"constants": {}, "exported_quant_algo_strings": {}}
    mc = "modelopt/torch/export/model_config.py"
    for node in arc.tree(mc).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            n = node.targets[0].id
            if n.startswith("QUANTIZATION_") or n.startswith("KV_CACHE_"):
                ok, v = literal(node.value)
                if ok:
                    out["constants"][n] = {"value": v, "source": f"{mc}:{node.lineno}"}
    const_by_name = {k: v["value"] for k, v in out["constants"].items()}

    qu = "modelopt/torch/export/quant_utils.py"
    qtext = arc.files[qu]
    qtree = arc.tree(qu)
    funcs = {n.name: n for n in ast.walk(qtree) if isinstance(n, ast.FunctionDef)}

    def span(path, fn):
        return f"{path}:{fn.lineno}-{fn.end_lineno}"

    # process_layer_quant_config: internal format -> exported per-layer dict
    plq = funcs["process_layer_quant_config"]
    per_format, layer_fields = {}, {}
    fallback = None

    def walk_if(node):
        nonlocal fallback
        while isinstance(node, ast.If):
            t = node.test
            vals = []
            if isinstance(t, ast.Compare) and len(t.ops) == 1:
                ok, v = literal(t.comparators[0])
                if ok:
                    vals = v if isinstance(v, list) else [v]
            d = None
            for st in node.body:
                if isinstance(st, ast.Assign) and isinstance(st.value, ast.Dict):
                    d = st.value
            if d is not None:
                fields = {}
                for k, v in zip(d.keys, d.values):
                    ks = str_const(k)
                    ok, lv = literal(v)
                    fields[ks] = lv if ok else {"expr": src_text(qtext, v)}
                    layer_fields.setdefault(ks, f"{qu}:{k.lineno}")
                for v in vals:
                    per_format[str(v)] = {"layer_config": fields, "source": f"{qu}:{d.lineno}"}
            orelse = node.orelse
            if len(orelse) == 1 and isinstance(orelse[0], ast.If):
                node = orelse[0]
            else:
                for st in orelse:
                    if isinstance(st, ast.Assign) and isinstance(st.value, ast.Dict):
                        fallback = {"code": src_text(qtext, st), "source": f"{qu}:{st.lineno}",
                                    "meaning": "any other internal format is written verbatim as quant_algo"}
                break

    for node in ast.walk(plq):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and \
                isinstance(node.test.left, ast.Name) and node.test.left.id == "v":
            walk_if(node)
            break
    mixed = None
    for node in ast.walk(plq):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value == "MIXED_PRECISION":
            mixed = f"{qu}:{node.lineno}"
    out["process_layer_quant_config"] = {
        "function": "process_layer_quant_config", "source": span(qu, plq),
        "internal_format_to_layer_config": per_format,
        "fallback": fallback,
        "per_layer_fields": layer_fields,
        "mixed_precision": {
            "rule": "more than one distinct per-layer config -> quantization.quant_algo = MIXED_PRECISION and "
                    "quantization.quantized_layers = {module prefix: per-layer config}; exactly one -> its fields "
                    "are merged into quantization, quantized_layers is dropped and exclude_modules (wildcard-"
                    "summarised unquantized prefixes) is written",
            "source": mixed,
        },
    }
    # internal format names returned by get_quantization_format
    gqf = funcs.get("get_quantization_format")
    internal = set()
    if gqf:
        for node in ast.walk(gqf):
            if isinstance(node, ast.Return) and node.value is not None:
                if isinstance(node.value, ast.Name) and node.value.id in const_by_name:
                    internal.add(node.value.id)
        out["get_quantization_format"] = {"source": span(qu, gqf),
                                          "returns_constants": sorted(internal)}
    # kv cache algos
    kvf = funcs.get("_compute_kv_cache_dtype")
    if kvf:
        rets = sorted({node.value.id for node in ast.walk(kvf) if isinstance(node, ast.Return)
                       and isinstance(node.value, ast.Name)})
        out["kv_cache_quant_algo"] = {"function": "_compute_kv_cache_dtype", "source": span(qu, kvf),
                                      "returns": {r: const_by_name.get(r) for r in rets}}
    gqc = funcs["get_quant_config"]
    out["hf_quant_config_json"] = {
        "function": "get_quant_config", "source": span(qu, gqc),
        "layout": {"producer": {"name": "modelopt", "version": "<modelopt version>"},
                   "quantization": ["quant_algo", "kv_cache_quant_algo", "quantized_layers (MIXED_PRECISION)",
                                    "exclude_modules", "group_size", "has_zero_point", "pre_quant_scale"]},
    }
    # writer + config.json conversion
    ue = "modelopt/torch/export/unified_export_hf.py"
    for node in ast.walk(arc.tree(ue)):
        if isinstance(node, ast.FunctionDef) and node.name == "_write_hf_export_config":
            out["writer"] = {"function": "_write_hf_export_config", "source": span(ue, node),
                             "writes": ["hf_quant_config.json (get_quant_config output, when quant_algo or "
                                        "kv_cache_quant_algo is set)",
                                        "config.json quantization_config = convert_hf_quant_config_format(...)"]}
    ch = "modelopt/torch/export/convert_hf_config.py"
    ctext = arc.files[ch]
    for node in ast.walk(arc.tree(ch)):
        if isinstance(node, ast.FunctionDef) and node.name == "convert_hf_quant_config_format":
            algos, keys = {}, {}
            for sub in ast.walk(node):
                if isinstance(sub, ast.Compare) and isinstance(sub.left, ast.Name) \
                        and sub.left.id == "quant_algo_value" and len(sub.ops) == 1:
                    ok, v = literal(sub.comparators[0])
                    if ok:
                        algos.setdefault(str(v), f"{ch}:{sub.lineno}")
                if isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name) \
                        and sub.value.id == "new_config" and isinstance(sub.ctx, ast.Store) and str_const(sub.slice):
                    keys.setdefault(str_const(sub.slice), f"{ch}:{sub.lineno}")
            qm = None
            for sub in ast.walk(node):
                if isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Constant) and sub.value.value == "modelopt":
                    qm = f"{ch}:{sub.lineno}"
            out["config_json_quantization_config"] = {
                "function": "convert_hf_quant_config_format", "source": span(ch, node),
                "quant_method": {"value": "modelopt", "source": qm},
                "quant_algo_branches": algos,
                "keys_written": keys,
                "note": "MIXED_PRECISION: config_groups per distinct per-layer config plus the full "
                        "quantized_layers dict copied from hf_quant_config.json",
            }
        if isinstance(node, ast.FunctionDef) and node.name == "_quant_algo_to_group_config":
            algos = {}
            for sub in ast.walk(node):
                if isinstance(sub, ast.Compare) and len(sub.ops) == 1:
                    ok, v = literal(sub.comparators[0])
                    if ok:
                        for x in (v if isinstance(v, list) else [v]):
                            if isinstance(x, str):
                                algos.setdefault(x, f"{ch}:{sub.lineno}")
            out["mixed_precision_group_config"] = {"function": "_quant_algo_to_group_config",
                                                   "source": span(ch, node), "quant_algo_branches": algos}
    # every `"quant_algo": "<STR>"` dict literal / comparison in the package
    strings = {}
    for p in sorted(arc.files):
        if not p.endswith(".py") or not p.startswith("modelopt/"):
            continue
        tree = arc.tree(p)
        if tree is None:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                for k, v in zip(node.keys, node.values):
                    if str_const(k) in ("quant_algo", "kv_cache_quant_algo") and str_const(v):
                        strings.setdefault(str_const(v), {}).setdefault(str_const(k), f"{p}:{v.lineno}")
    out["exported_quant_algo_strings"] = strings
    values = set(v for k, v in ((k, s["layer_config"].get("quant_algo")) for k, s in per_format.items()) if v)
    values |= {"MIXED_PRECISION"} if mixed else set()
    values |= set(strings)
    verbatim = sorted(const_by_name[c] for c in internal if const_by_name.get(c) and const_by_name[c] not in per_format)
    out["process_layer_quant_config"]["written_verbatim_by_fallback"] = verbatim
    values |= set(verbatim)
    out["quant_algo_values"] = sorted(str(v) for v in values)
    out["kv_cache_quant_algo_values"] = sorted(v["value"] for k, v in out["constants"].items()
                                               if k.startswith("KV_CACHE_"))
    out["quant_algo_values_note"] = (
        "quant_algo_values: upper-case names written by process_layer_quant_config / get_quant_config / "
        "convert_hf_quant_config_format, plus the lower-case internal formats get_quantization_format can "
        "return that have no explicit branch and are written verbatim by the fallback "
        "(process_layer_quant_config.written_verbatim_by_fallback)")
    return out


# ----------------------------------------------------------------------------------------------
# llama.cpp

LC = "vendor/llama.cpp/"


def extract_llamacpp(arc):
    arch_cpp = LC + "src/llama-arch.cpp"
    text = arc.files[arch_cpp]
    lines = text.split("\n")

    def table(name):
        out = {}
        start = None
        for i, ln in enumerate(lines):
            if start is None and re.search(r"\b%s\s*=\s*\{" % name, ln):
                start = i
                continue
            if start is not None:
                if ln.strip().startswith("};"):
                    break
                m = re.match(r'\s*\{\s*(LLM_\w+)\s*,\s*"([^"]*)"\s*\}', ln)
                if m:
                    out[m.group(1)] = {"name": m.group(2), "source": f"{arch_cpp}:{i + 1}"}
        return out

    arch_names = table("LLM_ARCH_NAMES")
    kv_names = table("LLM_KV_NAMES")

    def kv_in(path, lo=1, hi=None):
        res = {}
        ls = arc.files[path].split("\n")
        hi = hi or len(ls)
        for i in range(lo - 1, hi):
            code = ls[i].split("//")[0]
            for m in re.finditer(r"\b(LLM_KV_[A-Z0-9_]+)\b", code):
                res.setdefault(m.group(1), f"{path}:{i + 1}")
        return res

    def func_span(path, sig_regex):
        ls = arc.files[path].split("\n")
        for i, ln in enumerate(ls):
            if re.match(sig_regex, ln):
                depth, started = 0, False
                for j in range(i, len(ls)):
                    depth += ls[j].count("{") - ls[j].count("}")
                    if ls[j].count("{"):
                        started = True
                    if started and depth <= 0:
                        return i + 1, j + 1
        return None

    model_cpp = LC + "src/llama-model.cpp"
    lh = func_span(model_cpp, r"void llama_model_base::load_hparams\(")
    swa = func_span(model_cpp, r"void llama_model_base::load_swa_pattern\(")
    generic = kv_in(model_cpp, *lh)
    swa_keys = kv_in(model_cpp, *swa)
    in_model = kv_in(model_cpp)
    other_model = {k: v for k, v in in_model.items() if int(v.rsplit(":", 1)[1]) < lh[0] or
                   (lh[1] < int(v.rsplit(":", 1)[1]) and not (swa[0] <= int(v.rsplit(":", 1)[1]) <= swa[1]))}

    # arch -> model class
    mtext = arc.files[model_cpp].split("\n")
    arch_class = {}
    pending = []
    fmap = func_span(model_cpp, r"static llama_model \* llama_model_mapping\(")
    for i in range(fmap[0] - 1, fmap[1]):
        for m in re.finditer(r"case\s+(LLM_ARCH_\w+)\s*:", mtext[i]):
            pending.append((m.group(1), i + 1))
        m = re.search(r"return new (llama_model_\w+)\(", mtext[i])
        if m:
            for a, ln in pending:
                arch_class[a] = (m.group(1), f"{model_cpp}:{i + 1}")
            pending = []
    # class -> parent, class -> load_arch_hparams span
    parents, loaders = {}, {}
    for p in sorted(arc.files):
        if not p.startswith(LC + "src/") or not (p.endswith(".h") or p.endswith(".cpp")):
            continue
        for i, ln in enumerate(arc.files[p].split("\n")):
            m = re.match(r"\s*struct\s+(llama_model_\w+)\s*:\s*public\s+(llama_model_\w+)", ln)
            if m:
                parents.setdefault(m.group(1), m.group(2))
        if p.startswith(LC + "src/models/") and p.endswith(".cpp"):
            for m in re.finditer(r"^void (llama_model_\w+)::load_arch_hparams\(", arc.files[p], re.M):
                sp = func_span(p, r"void %s::load_arch_hparams\(" % re.escape(m.group(1)))
                loaders[m.group(1)] = (p, sp)

    def loader_reads(cls, seen=None):
        seen = seen or set()
        c = cls
        while c and c not in loaders:
            c = parents.get(c)
        if not c or c in seen:
            return None, {}, False
        seen.add(c)
        p, (a, b) = loaders[c]
        reads = dict(kv_in(p, a, b))
        body = "\n".join(arc.files[p].split("\n")[a - 1: b])
        uses_swa = "load_swa_pattern(" in body
        for m in re.finditer(r"(llama_model_\w+)::load_arch_hparams\(", body):
            if m.group(1) != c:
                _, r2, s2 = loader_reads(m.group(1), seen)
                for k, v in r2.items():
                    reads.setdefault(k, v)
                uses_swa = uses_swa or s2
        return f"{p}:{a}-{b}", reads, uses_swa

    archs = {}
    for enum in sorted(arch_names):
        e = {"name": arch_names[enum]["name"], "source": arch_names[enum]["source"]}
        if enum in arch_class:
            cls, src = arch_class[enum]
            e["model_class"] = cls
            e["model_class_source"] = src
            span, reads, uses_swa = loader_reads(cls)
            e["load_arch_hparams"] = span
            if uses_swa:
                for k, v in swa_keys.items():
                    reads.setdefault(k, v)
            e["calls_load_swa_pattern"] = uses_swa
            e["kv_keys_read"] = {k: {"key": kv_names[k]["name"].replace("%s", e["name"]) if k in kv_names else None,
                                     "source": v} for k, v in sorted(reads.items())}
        archs[enum] = e

    def named(d, arch=None):
        return {k: {"key": kv_names[k]["name"] if k in kv_names else None, "source": v} for k, v in sorted(d.items())}

    others = {}
    for p in (LC + "src/llama-model-loader.cpp", LC + "src/llama-vocab.cpp", LC + "src/llama-adapter.cpp",
              LC + "src/llama-context.cpp", LC + "src/llama.cpp", LC + "src/llama-hparams.cpp"):
        if p in arc.files:
            r = kv_in(p)
            if r:
                others[p.rsplit("/", 1)[1]] = named(r)
    return {
        "arch_names": arch_names,
        "kv_names": kv_names,
        "generic_hparams": {"function": "llama_model_base::load_hparams",
                            "source": f"{model_cpp}:{lh[0]}-{lh[1]}", "kv_keys_read": named(generic)},
        "load_swa_pattern": {"function": "llama_model_base::load_swa_pattern",
                             "source": f"{model_cpp}:{swa[0]}-{swa[1]}", "kv_keys_read": named(swa_keys)},
        "llama_model_other": {"note": "llama-model.cpp outside load_hparams/load_swa_pattern "
                                      "(precision policy, chat template lookup)",
                              "kv_keys_read": named(other_model)},
        "other_readers": others,
        "other_readers_note": "llama-model-loader.cpp: general.architecture, split.*, general.file_type; "
                              "llama-vocab.cpp: tokenizer.ggml.* and tokenizer.* (vocab load); llama-adapter.cpp: "
                              "LoRA adapter GGUFs only. llama-quant.cpp and llama-model-saver.cpp write keys and are "
                              "not readers. Every GGUF key/value is also kept verbatim in llama_model::gguf_kv "
                              "(exposed by llama_model_meta_val_str) without affecting the computation.",
        "architectures": archs,
    }


# ----------------------------------------------------------------------------------------------
# main


_SCALAR_LIST = re.compile(r"\[\n\s*([^\[\]{}\n]*(?:,\n\s*[^\[\]{}\n]*)*)\n\s*\]")


def dump(obj):
    """Sorted keys, one-space indentation, arrays of scalars on one line."""
    text = json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False)
    text = _SCALAR_LIST.sub(lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",\n")) + "]", text)
    assert json.loads(text) == json.loads(json.dumps(obj))
    return text + "\n"


def generate(pkgs, out_dir):
    tpath = check_package(pkgs, "transformers")
    vpath = check_package(pkgs, "vllm")
    mpath = check_package(pkgs, "nvidia-modelopt")
    lpath = check_package(pkgs, "llama-cpp-python")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    ft = FileTable()
    tarc = Archive(tpath, lambda n: n.startswith("transformers/") and n.endswith(".py") and (
        "/models/" not in n or n.startswith("transformers/models/auto/")
        or re.match(r"transformers/models/[^/]+/(configuration|modeling)_[^/]+\.py$", n)))
    tf_pred = ConfigPredicate(tf_deny())
    tf = extract_transformers(tarc, ft, tf_pred)
    del tarc
    varc = Archive(vpath, lambda n: n.startswith("vllm/") and n.endswith(".py"))
    v_pred = ConfigPredicate(vllm_deny(varc), strict_hf=True)
    vl = extract_vllm(varc, ft, v_pred)
    del varc
    body = {"transformers": tf, "vllm": vl}
    files, body = ft.finalize(body)
    doc = {
        "schema": "preflight config_keys v1",
        "extracted_by": SCRIPT + " (static ast read of the released wheels; nothing imported)",
        "packages": {"transformers": pkg_record("transformers"), "vllm": pkg_record("vllm")},
        "source_convention": "[file_index, line]: files[file_index] is the path inside the wheel",
        "files": files,
        "rules": {
            "read": "`<cfg>.X` (load, not a method call), getattr/hasattr(<cfg>, \"X\"), <cfg>.get/pop(\"X\"), "
                    "<cfg>[\"X\"], \"X\" in <cfg>; <cfg> = expression whose last name contains 'config' or ends "
                    "in 'cfg', excluding the engine's own config objects (vLLM VllmConfig sub-configs, quantization/"
                    "generation configs, class names); in vLLM an engine-config object must be followed by an hf_* "
                    "name. Names only; nesting (text_config.X) not tracked.",
            "rope_parameter_keys_read": "keys read from rope_parameters / rope_scaling dicts (.get/[]/in on an "
                                        "expression whose name contains 'rope')",
            "dynamic": "sites where the extraction cannot tell the key: getattr/hasattr/.get/[] with a non-literal "
                       "name, to_dict()/to_diff_dict()/vars()/__dict__, **config, vLLM Transformers backend. When "
                       "non-empty (or in common), treat every key as possibly read.",
            "effective_reads": "a key is read for a model type/architecture when it is in its reads, in the "
                               "same engine's common.reads, or (transformers) reached through attribute_map "
                               "(config.json may carry either the alias or the target name)",
            "transformers_scope": "model types with a causal-LM, image-text-to-text or multimodal-LM class, plus "
                                  "their sub-configs' model types",
            "attributes": "dataclass-style annotated fields and classic __init__(x=default) parameters, child "
                          "class first, inheritance followed within transformers up to PreTrainedConfig "
                          "(recorded once under transformers.base_config); default = JSON literal when the "
                          "AST is a literal (or a call with a literal default=/default_factory), else expr",
            "read_by_config_class": "self.X / getattr(self, 'X') inside the config class's own methods "
                                    "(__post_init__, validate_*, properties)",
            "kwargs_read": "keys the config class takes from **kwargs (kwargs.pop/get, 'X' in kwargs): legacy "
                           "names it converts",
        },
        **body,
    }
    (out_dir / "config_keys.json").write_text(dump(doc))

    marc = Archive(mpath, lambda n: n.startswith("modelopt/") and n.endswith(".py"))
    mo = extract_modelopt(marc)
    mo.update({"schema": "preflight modelopt v1", "extracted_by": SCRIPT + " (static ast read; nothing imported)",
               "packages": {"nvidia-modelopt": pkg_record("nvidia-modelopt")},
               "source_convention": "path inside the wheel:line[-end]"})
    (out_dir / "modelopt.json").write_text(dump(mo))

    larc = Archive(lpath, lambda n: n.startswith(LC + "src/") and (n.endswith(".cpp") or n.endswith(".h")))
    lc = extract_llamacpp(larc)
    lc.update({"schema": "preflight llamacpp_keys v1",
               "extracted_by": SCRIPT + " (regular expressions over the vendored C++; nothing built)",
               "packages": {"llama-cpp-python": pkg_record("llama-cpp-python")},
               "source_convention": "path inside the sdist (relative to its top directory):line[-end]; "
                                    "kv key names: %s = general.architecture"})
    (out_dir / "llamacpp_keys.json").write_text(dump(lc))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("pkgs", help="directory holding the four downloaded archives")
    ap.add_argument("out", help="output directory (crates/preflight-plan/data)")
    ap.add_argument("--check", action="store_true", help="regenerate into a temp dir and compare bytes")
    args = ap.parse_args()
    if not args.check:
        generate(args.pkgs, args.out)
        return
    with tempfile.TemporaryDirectory() as tmp:
        generate(args.pkgs, tmp)
        bad = []
        for name in OUT_FILES:
            a = Path(tmp) / name
            b = Path(args.out) / name
            if not b.exists():
                bad.append(f"{b}: missing")
            elif a.read_bytes() != b.read_bytes():
                bad.append(f"{b}: differs from a fresh regeneration")
        if bad:
            sys.exit("check failed:\n  " + "\n  ".join(bad) + f"\nrerun: python3 {SCRIPT} {args.pkgs} {args.out}")
    print("ok: " + ", ".join(OUT_FILES) + " reproduce byte for byte")


if __name__ == "__main__":
    main()

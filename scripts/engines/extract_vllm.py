#!/usr/bin/env python3
"""Extract what a vLLM release supports, from its wheel (the full extraction regenerate.py trims).

    pip download --no-deps vllm==0.19.0 -d PKGS
    python3 scripts/engines/extract_vllm.py PKGS/vllm-0.19.0-cp38-abi3-manylinux_2_31_x86_64.whl OUT.json

Nothing is installed, imported or executed: the wheel is opened with zipfile and every `.py`
of the `vllm` package parsed with `ast`. Every fact carries `source` = `path:line[-end]`
inside the wheel; `code` is the verbatim source of the deciding function, truncated with
` ...[truncated]` past a per-field limit. The output schema is the one of the project's
`engines/vllm.json` (see that directory's README, "Field meanings"). Run on the 0.33.0 wheel
with `--extracted-by "tools/engines/extract_vllm.py (static AST read of the wheel; nothing
imported)"` it reproduces that file byte for byte but for 9 architecture records that gain a
conditional `needs_sparse_mla_backend` (DeepSeek-V2/V3 classes of the flat `deepseek_v2.py`,
`is_sparse=self.is_v32`; the earlier extraction read only `use_sparse=True`), and the trimmed
engines.json regenerate.py made from it is identical.

How each part is read:

  * a class index: a name visible in a module is its first binding in source order (module
    level, into `if`/`try` branches): a `class` or a `from X import Y [as Z]` (an assignment
    `Z = Y` is not followed). In a platform-switched package (`vllm/models/<pkg>/__init__.py`) that is the first branch.
    Bases are resolved the same way; flags and methods are looked up the class chain (depth
    first, left to right).
  * architectures: the `_*_MODELS` dicts of `vllm/model_executor/models/registry.py` (module
    names resolved like its `_resolve_module_name`), class flags from the chain, interface names
    (`Supports*`/`Is*`/`Has*` classes of the chain), sparse MLA (`use_sparse=True`, or
    `is_sparse=self.X` where `self.X = hasattr(config, "K")`: sparse when the config has `K`),
    model-specific attention backends (enum entries whose class lives in the model's package).
  * `previously_supported_architectures` / `out_of_tree_architectures`: `_PREVIOUSLY_SUPPORTED_MODELS`,
    `_OOT_SUPPORTED_MODELS`.
  * quantization: the `QuantizationMethods` Literal, `get_quantization_config`'s
    `method_to_config`, each config class's `get_min_capability()`.
  * linear kernels: the `_POSSIBLE_*_KERNELS` platform dicts with each CUDA kernel's `is_supported`.
  * fused MoE: every experts class's `_supports_current_device`, the gate helpers, the oracles'
    backend priority lists.
  * attention: `AttentionBackendEnum`, each backend class's capability methods and
    `supported_kv_cache_dtypes`, the CUDA priority function and its error.
  * `CacheDType`, `MambaDType`, `LoadFormats` and the METADATA lines mentioning GGUF.

Deterministic output (`json.dumps(indent=1, ensure_ascii=False)`, sorted traversal).
"""

import argparse
import ast
import json
import re
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from extract_config_keys import literal, sha256, str_const  # noqa: E402

EXTRACTED_BY = "scripts/engines/extract_vllm.py (static AST read of the wheel; nothing imported)"

REGISTRY = "vllm/model_executor/models/registry.py"

# Class flags read up the chain, in this order.
FLAGS = [
    "is_hybrid",
    "is_attention_free",
    "has_inner_state",
    "supports_multimodal",
    "supports_pp",
    "supports_lora",
    "supports_transcription",
    "is_pooling_model",
]
INTERFACE_NAME = re.compile(r"^(Supports|Is|Has)")
SPARSE_NOTE = "MLA built with use_sparse=True; only backends with is_sparse()==True qualify"


def truncate(code, limit):
    return code if len(code) <= limit else code[:limit] + " ...[truncated]"


class Wheel:
    """The wheel's `vllm/**.py` (and dist-info) texts with lazily parsed trees."""

    def __init__(self, path):
        self.path = Path(path)
        self.files = {}
        with zipfile.ZipFile(path) as z:
            for name in sorted(z.namelist()):
                if (name.startswith("vllm/") and name.endswith(".py")) or ".dist-info/" in name:
                    if name.endswith(".py") or name.endswith("METADATA"):
                        self.files[name] = z.read(name).decode("utf-8", "replace")
        self._trees = {}
        self._lines = {}

    def tree(self, path):
        if path not in self._trees:
            try:
                self._trees[path] = ast.parse(self.files[path]) if path in self.files else None
            except SyntaxError:
                self._trees[path] = None
        return self._trees[path]

    def lines(self, path):
        if path not in self._lines:
            self._lines[path] = self.files[path].split("\n")
        return self._lines[path]

    def segment(self, path, node):
        """Verbatim source of a node (from the `def`/`class` keyword, decorators excluded)."""
        lines = self.lines(path)
        first, last = node.lineno, node.end_lineno
        text = "\n".join(lines[first - 1 : last])
        start = node.col_offset
        end_cut = len(lines[last - 1]) - node.end_col_offset
        text = text[start:]
        if end_cut > 0:
            text = text[: len(text) - end_cut]
        return text

    def module_path(self, dotted):
        base = dotted.replace(".", "/")
        for p in (base + ".py", base + "/__init__.py"):
            if p in self.files:
                return p
        return None


def package_of(path):
    """Dotted package a module's relative imports resolve against."""
    parts = path[:-3].split("/")
    return parts[:-1]


def resolve_from(path, node):
    """Dotted module named by `from X import ...` in `path`."""
    if node.level:
        pkg = package_of(path)
        base = pkg[: len(pkg) - (node.level - 1)] if node.level > 1 else pkg
        return ".".join(base + (node.module.split(".") if node.module else []))
    return node.module or ""


def module_statements(body):
    """Module-level statements in source order, into if/try/with branches."""
    for st in body:
        yield st
        if isinstance(st, ast.If):
            yield from module_statements(st.body)
            yield from module_statements(st.orelse)
        elif isinstance(st, ast.Try):
            yield from module_statements(st.body)
            for h in st.handlers:
                yield from module_statements(h.body)
            yield from module_statements(st.orelse)
            yield from module_statements(st.finalbody)
        elif isinstance(st, ast.With):
            yield from module_statements(st.body)


class Index:
    def __init__(self, wheel):
        self.w = wheel
        self._bindings = {}
        self._cls = {}

    def bindings(self, path):
        """name -> first binding in `path`: ('class', node) / ('import', module, name)."""
        if path not in self._bindings:
            out = {}
            tree = self.w.tree(path)
            for st in module_statements(tree.body if tree else []):
                if isinstance(st, ast.ClassDef):
                    out.setdefault(st.name, ("class", st))
                elif isinstance(st, ast.ImportFrom):
                    mod = resolve_from(path, st)
                    for a in st.names:
                        out.setdefault(a.asname or a.name, ("import", mod, a.name))
            self._bindings[path] = out
        return self._bindings[path]

    def find_class(self, path, name, depth=0):
        """(path, ClassDef) of `name` as visible in module `path`, or None."""
        key = (path, name)
        if key in self._cls:
            return self._cls[key]
        self._cls[key] = None
        result = None
        if depth < 20 and path is not None:
            b = self.bindings(path).get(name)
            if b is None:
                result = None
            elif b[0] == "class":
                result = (path, b[1])
            else:
                _, mod, real = b
                target = self.w.module_path(mod)
                if target is not None:
                    result = self.find_class(target, real, depth + 1)
        self._cls[key] = result
        return result

    @staticmethod
    def base_name(expr):
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        if isinstance(expr, ast.Name):
            return expr.id
        if isinstance(expr, ast.Attribute):
            return expr.attr
        return None

    def chain(self, path, cls):
        """The class and its ancestors, depth first, left to right: [(path, ClassDef | None, name)]."""
        out, seen = [], set()

        def go(p, c):
            key = (p, c.name, c.lineno)
            if key in seen:
                return
            seen.add(key)
            out.append((p, c, c.name))
            for b in c.bases:
                n = self.base_name(b)
                if n is None:
                    continue
                found = self.find_class(p, n) if isinstance(b, ast.Name) or (
                    isinstance(b, ast.Subscript) and isinstance(b.value, ast.Name)) else None
                if found:
                    go(*found)
                else:
                    if ("?", n) not in seen:
                        seen.add(("?", n))
                        out.append((None, None, n))

        go(path, cls)
        return out


def class_attr(cls, name):
    """(value node, line) of a class-body assignment of `name`."""
    for st in cls.body:
        if isinstance(st, ast.Assign):
            for t in st.targets:
                if isinstance(t, ast.Name) and t.id == name:
                    return st.value, st.lineno
        elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.target.id == name:
            if st.value is not None:
                return st.value, st.lineno
    return None


def class_method(cls, name):
    for st in cls.body:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and st.name == name:
            return st
    return None


# ----------------------------------------------------------------------------------------------
# architectures


def registry_dicts(w):
    tree = w.tree(REGISTRY)
    groups = []
    named = {}
    for st in tree.body:
        if isinstance(st, (ast.Assign, ast.AnnAssign)):
            tgt = st.targets[0] if isinstance(st, ast.Assign) else st.target
            if isinstance(tgt, ast.Name) and isinstance(st.value, ast.Dict):
                named[tgt.id] = st.value
                if tgt.id.endswith("_MODELS") and tgt.id not in ("_VLLM_MODELS", "_PREVIOUSLY_SUPPORTED_MODELS",
                                                                  "_OOT_SUPPORTED_MODELS"):
                    groups.append(tgt.id)
    return groups, named


def resolve_module_name(w, mod):
    """registry.py's `_resolve_module_name` when the wheel has it, else the flat layout."""
    if mod.startswith("vllm.") and "_resolve_module_name" in w.files[REGISTRY]:
        return mod
    return f"vllm.model_executor.models.{mod}"


def extract_architectures(w, idx, model_backends):
    groups, named = registry_dicts(w)
    out = []
    for group in groups:
        d = named[group]
        for k, v in zip(d.keys, d.values):
            arch = str_const(k)
            ok, val = literal(v)
            if arch is None or not ok or len(val) != 2:
                continue
            mod, cls_name = val
            module = resolve_module_name(w, mod)
            e = {
                "architecture": arch,
                "registry_group": group,
                "module": module,
                "class": cls_name,
                "source": f"{REGISTRY}:{k.lineno}",
            }
            path = w.module_path(module)
            found = idx.find_class(path, cls_name) if path else None
            if found is None:
                e["class_source"] = None
                e["flags"] = {}
                e["interfaces"] = []
                out.append(e)
                continue
            cpath, cnode = found
            e["class_source"] = f"{cpath}:{cnode.lineno}"
            chain = idx.chain(cpath, cnode)
            flags = {}
            for flag in FLAGS:
                for p, c, _ in chain:
                    if c is None:
                        continue
                    a = class_attr(c, flag)
                    if a is not None:
                        ok, value = literal(a[0])
                        if ok:
                            flags[flag] = {"value": value, "source": f"{p}:{a[1]}"}
                        break
            e["flags"] = flags
            e["interfaces"] = sorted({n for _, _, n in chain if INTERFACE_NAME.match(n)})
            sparse = sparse_mla(w, module, path, chain)
            if sparse:
                e["needs_sparse_mla_backend"] = sparse
            pkg = model_package(module)
            if pkg and model_backends.get(pkg):
                e["model_specific_attention_backends"] = model_backends[pkg]
            out.append(e)
    return out


def model_package(module):
    """`vllm.models.<pkg>` of a registry module, or None for the flat layout."""
    parts = module.split(".")
    if len(parts) >= 3 and parts[:2] == ["vllm", "models"]:
        return "vllm/models/" + parts[2] + "/"
    return None


def sparse_mla(w, module, path, chain):
    """How the model's MLA is built: `use_sparse=True` (always sparse), or `is_sparse=self.X` /
    `use_sparse=self.X` where the same module sets `self.X = hasattr(config, "K")` (sparse when
    the checkpoint's config has `K`). A vllm.models package: its files; a flat module: the
    registry module and the modules of the registered class and its ancestors."""
    pkg = model_package(module)
    if pkg:
        files = sorted(p for p in w.files if p.startswith(pkg) and p.endswith(".py"))
    else:
        files = list(dict.fromkeys([path] + [p for p, _, _ in chain if p is not None]))
    conditional = None
    for p in files:
        tree = w.tree(p)
        if tree is None:
            continue
        keywords = sorted((n for n in ast.walk(tree) if isinstance(n, ast.keyword) and n.arg in ("use_sparse", "is_sparse")),
                          key=lambda n: (n.value.lineno, n.value.col_offset))
        for node in keywords:
            if node.arg == "use_sparse" and isinstance(node.value, ast.Constant) and node.value.value is True:
                return {"value": True, "source": f"{p}:{node.value.lineno}", "note": SPARSE_NOTE}
        if conditional is not None:
            continue
        for node in keywords:
            v = node.value
            if not (isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) and v.value.id == "self"):
                continue
            for a in ast.walk(tree):
                if (isinstance(a, ast.Assign) and len(a.targets) == 1 and isinstance(a.targets[0], ast.Attribute)
                        and isinstance(a.targets[0].value, ast.Name) and a.targets[0].value.id == "self"
                        and a.targets[0].attr == v.attr and isinstance(a.value, ast.Call)
                        and isinstance(a.value.func, ast.Name) and a.value.func.id == "hasattr"
                        and len(a.value.args) == 2 and str_const(a.value.args[1])):
                    key = str_const(a.value.args[1])
                    conditional = {
                        "value": f"if the config has {key}",
                        "config_key": key,
                        "source": f"{p}:{v.lineno}",
                        "condition_source": f"{p}:{a.lineno}",
                        "note": f"MLA built with {node.arg}=self.{v.attr}, self.{v.attr} = {ast.unparse(a.value)}: "
                                "sparse when the checkpoint's config has it, and then only backends with "
                                "is_sparse()==True qualify",
                    }
                    break
            if conditional is not None:
                break
    return conditional


def extract_registry_extras(w):
    _, named = registry_dicts(w)
    out = {}
    for key, var in (("previously_supported_architectures", "_PREVIOUSLY_SUPPORTED_MODELS"),
                     ("out_of_tree_architectures", "_OOT_SUPPORTED_MODELS")):
        items = []
        d = named.get(var)
        for k, v in zip(d.keys, d.values) if d is not None else []:
            items.append({"architecture": str_const(k), "value": str_const(v), "source": f"{REGISTRY}:{k.lineno}"})
        out[key] = items
    return out


# ----------------------------------------------------------------------------------------------
# quantization

QUANT_INIT = "vllm/model_executor/layers/quantization/__init__.py"
QUANT_CONFIG = "vllm/config/quantization.py"

# `code` truncation limits (characters) per field.
LIMITS = {
    "min_capability": 1500,
    "is_supported": 1500,
    "experts_device_gate": 900,
    "gate_helper": 900,
    "attention_method": 900,
    "supports_combination": 1500,
    "priority": 8000,
    "validate_configuration": 4000,
    "no_backend_error": 900,
}


def span(path, node):
    return f"{path}:{node.lineno}" if node.end_lineno == node.lineno else f"{path}:{node.lineno}-{node.end_lineno}"


def full_span(path, node):
    return f"{path}:{node.lineno}-{node.end_lineno}"


def literal_assign(w, path, name):
    """(value node, statement) of a module-level `name = ...` / `name: T = ...`."""
    tree = w.tree(path)
    for st in tree.body if tree else []:
        tgt = st.targets[0] if isinstance(st, ast.Assign) else st.target if isinstance(st, ast.AnnAssign) else None
        if isinstance(tgt, ast.Name) and tgt.id == name and st.value is not None:
            return st.value, st
    return None, None


def literal_args(node):
    """String members of `Literal[...]`."""
    if isinstance(node, ast.Subscript):
        sl = node.slice
        elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        return [str_const(e) for e in elts if str_const(e) is not None]
    return []


def returns_of(w, path, fn):
    out = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Return) and node.value is not None:
            ok, v = literal(node.value)
            out.append(v if ok else ast.get_source_segment(w.files[path], node.value) or ast.unparse(node.value))
    return out


def method_in_chain(idx, path, cls, name):
    """(path, ClassDef, FunctionDef) of the first definition of method `name` up the chain."""
    for p, c, _ in idx.chain(path, cls):
        if c is None:
            continue
        m = class_method(c, name)
        if m is not None:
            return p, c, m
    return None


def dotted(path, name):
    mod = path[:-3]
    if mod.endswith("/__init__"):
        mod = mod[: -len("/__init__")]
    return mod.replace("/", ".") + "." + name


def extract_quantization(w, idx):
    lit, lit_stmt = literal_assign(w, QUANT_INIT, "QuantizationMethods")
    methods = literal_args(lit)
    deprecated_node, _ = literal_assign(w, QUANT_INIT, "DEPRECATED_QUANTIZATION_METHODS")
    ok, deprecated = literal(deprecated_node) if deprecated_node is not None else (True, [])
    lit_source = f"{full_span(QUANT_INIT, lit_stmt)} (QuantizationMethods Literal)"
    # get_quantization_config: its imports (name -> class), local variables bound to classes,
    # and method_to_config
    fn = next(n for n in w.tree(QUANT_INIT).body if isinstance(n, ast.FunctionDef) and n.name == "get_quantization_config")
    local = {}  # local name -> [(module, real name)] in source order

    def visit(stmts):
        for st in stmts:
            if isinstance(st, ast.ImportFrom):
                mod = resolve_from(QUANT_INIT, st)
                for a in st.names:
                    local.setdefault(a.asname or a.name, []).append(("import", mod, a.name))
            elif isinstance(st, (ast.Assign, ast.AnnAssign)):
                tgt = st.targets[0] if isinstance(st, ast.Assign) else st.target
                if isinstance(tgt, ast.Name) and isinstance(st.value, ast.Name):
                    local.setdefault(tgt.id, []).append(("var", st.value.id))
            elif isinstance(st, ast.If):
                visit(st.body)
                visit(st.orelse)

    visit(fn.body)
    mapping = {}
    for node in ast.walk(fn):
        tgt = node.targets[0] if isinstance(node, ast.Assign) else node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(tgt, ast.Name) and tgt.id == "method_to_config" and isinstance(node.value, ast.Dict):
            for k, v in zip(node.value.keys, node.value.values):
                if str_const(k) is not None and isinstance(v, ast.Name):
                    mapping.setdefault(str_const(k), (v.id, k.lineno))

    def classes_of(name, seen=()):
        """Classes a local name of get_quantization_config can hold, in source order."""
        out = []
        for b in local.get(name, []):
            if b[0] == "import":
                found = idx.find_class(w.module_path(b[1]), b[2]) if w.module_path(b[1]) else None
                if found is None:
                    # `from pkg import Name` where pkg/__init__.py defines or re-exports it
                    continue
                out.append(found)
            elif b[1] not in seen:
                out.extend(classes_of(b[1], seen + (name,)))
        if not out and name not in local:
            found = idx.find_class(QUANT_INIT, name)
            if found:
                out.append(found)
        return out

    def min_capability(found, with_code=True):
        path, cls = found
        m = method_in_chain(idx, path, cls, "get_min_capability")
        rec = {"config_class": dotted(path, cls.name)}
        if m is None:
            rec["returns"] = []
            rec["source"] = None
            return rec
        mp, mc, mf = m
        rec["returns"] = returns_of(w, mp, mf)
        rec["source"] = f"{mp}:{mf.lineno} ({mc.name}.get_min_capability)"
        if with_code:
            rec["code"] = truncate(w.segment(mp, mf), LIMITS["min_capability"])
        return rec

    shorthands_node, shorthands_stmt = literal_assign(w, QUANT_CONFIG, "_ONLINE_SHORTHANDS") if QUANT_CONFIG in w.files else (None, None)
    shorthand_names = [str_const(k) for k in shorthands_node.keys] if isinstance(shorthands_node, ast.Dict) else []
    shorthand_source = full_span(QUANT_CONFIG, shorthands_stmt) if shorthands_stmt is not None else None
    out = []
    for method in methods:
        e = {"method": method, "source": lit_source}
        if method in deprecated:
            e["deprecated"] = True
        if method in mapping:
            var, line = mapping[method]
            e["config_class"] = var
            e["config_class_source"] = f"{QUANT_INIT}:{line} (get_quantization_config.method_to_config)"
            e["min_capability"] = [min_capability(c) for c in classes_of(var)]
        elif method in shorthand_names and "online" in mapping:
            var, _ = mapping["online"]
            e["config_class"] = f"{var} (online shorthand)"
            e["online_shorthand_source"] = shorthand_source
            e["min_capability"] = [min_capability(c, with_code=False) for c in classes_of(var)]
        else:
            e["config_class"] = None
            e["min_capability"] = []
        out.append(e)
    shorthands = {"names": shorthand_names, "source": shorthand_source} if shorthands_stmt is not None else None
    return out, shorthands


# ----------------------------------------------------------------------------------------------
# linear kernels

LINEAR_INIT = "vllm/model_executor/kernels/linear/__init__.py"
PLATFORMS = ("CUDA", "ROCM")


def extract_linear_kernels(w, idx):
    out = {}
    tree = w.tree(LINEAR_INIT)
    for st in tree.body if tree else []:
        tgt = st.targets[0] if isinstance(st, ast.Assign) else st.target if isinstance(st, ast.AnnAssign) else None
        if not (isinstance(tgt, ast.Name) and re.fullmatch(r"_POSSIBLE_\w*KERNELS", tgt.id) and isinstance(st.value, ast.Dict)):
            continue
        per = {}
        for k, v in zip(st.value.keys, st.value.values):
            plat = k.attr if isinstance(k, ast.Attribute) else None
            if plat not in PLATFORMS or not isinstance(v, ast.List):
                continue
            names = [e.id for e in v.elts if isinstance(e, ast.Name)]
            rec = {"priority_order": names, "source": full_span(LINEAR_INIT, v)}
            kernels = []
            if plat == "CUDA":
                # ROCm lists keep their order only; the kernels' gates are read for CUDA.
                for name in names:
                    found = idx.find_class(LINEAR_INIT, name)
                    k_rec = {"kernel": name}
                    if found is None:
                        k_rec["class_source"] = None
                        kernels.append(k_rec)
                        continue
                    cpath, cnode = found
                    k_rec["class_source"] = f"{cpath}:{cnode.lineno}"
                    m = method_in_chain(idx, cpath, cnode, "is_supported")
                    if m is not None:
                        mp, _, mf = m
                        k_rec["is_supported"] = {
                            "source": full_span(mp, mf),
                            "code": truncate(w.segment(mp, mf), LIMITS["is_supported"]),
                        }
                    kernels.append(k_rec)
            rec["kernels"] = kernels
            per[plat] = rec
        out[tgt.id] = {p: per[p] for p in PLATFORMS if p in per}
    return out


# ----------------------------------------------------------------------------------------------
# fused MoE

FUSED_MOE = "vllm/model_executor/layers/fused_moe/"
ORACLE = FUSED_MOE + "oracle/"
# Helper modules whose `*supported*` functions the experts gates call (besides fused_moe itself).
GATE_HELPER_MODULES = [
    "vllm/_custom_ops.py",
    "vllm/model_executor/layers/quantization/utils/w8a8_utils.py",
    "vllm/model_executor/layers/quantization/utils/nvfp4_utils.py",
    "vllm/model_executor/layers/quantization/utils/marlin_utils_fp8.py",
    "vllm/model_executor/layers/quantization/utils/marlin_utils_fp4.py",
    "vllm/utils/deep_gemm.py",
]
GATE_HELPER_NAME = re.compile(r"supported$|supports_|^_?is_supported")


def py_files_under(w, prefix):
    return sorted(p for p in w.files if p.startswith(prefix) and p.endswith(".py"))


def extract_fused_moe(w):
    gates = []
    for p in py_files_under(w, FUSED_MOE):
        tree = w.tree(p)
        if tree is None:
            continue
        classes = sorted((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)), key=lambda n: n.lineno)
        for c in classes:
            m = class_method(c, "_supports_current_device")
            if m is not None:
                gates.append({
                    "experts_class": c.name,
                    "source": full_span(p, m),
                    "code": truncate(w.segment(p, m), LIMITS["experts_device_gate"]),
                })
    helpers = []
    for p in py_files_under(w, FUSED_MOE) + [h for h in GATE_HELPER_MODULES if h in w.files]:
        tree = w.tree(p)
        for fn in tree.body if tree else []:
            if isinstance(fn, ast.FunctionDef) and GATE_HELPER_NAME.search(fn.name):
                helpers.append({
                    "function": fn.name,
                    "source": full_span(p, fn),
                    "code": truncate(w.segment(p, fn), LIMITS["gate_helper"]),
                })
    oracles = []
    for p in py_files_under(w, ORACLE):
        tree = w.tree(p)
        for fn in tree.body if tree else []:
            if not (isinstance(fn, ast.FunctionDef) and (fn.name.startswith("_get_priority_backends")
                                                         or fn.name.startswith("select_"))):
                continue
            lists = []
            for node in ast.walk(fn):
                if isinstance(node, ast.List) and node.elts and all(
                    isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id.endswith("Backend")
                    for e in node.elts
                ):
                    lists.append({"list": [ast.unparse(e) for e in node.elts], "source": full_span(p, node)})
            oracles.append({"function": fn.name, "source": full_span(p, fn), "backend_lists": lists})
    return {"experts_device_gates": gates, "gate_helpers": helpers, "oracle_priorities": oracles}


# ----------------------------------------------------------------------------------------------
# attention

ATTN_REGISTRY = "vllm/v1/attention/backends/registry.py"
ATTN_BASE = "vllm/v1/attention/backend.py"
CUDA_PLATFORM = "vllm/platforms/cuda.py"
ATTN_FLAG_METHODS = ["is_mla", "is_sparse"]
ATTN_METHODS = [
    "supports_compute_capability",
    "get_supported_head_sizes",
    "supports_head_size",
    "supports_sink",
    "supports_attn_type",
    "supports_mm_prefix",
    "supports_combination",
    "supports_non_causal",
    "supports_sliding_window",
    "supports_kv_cache_dtype",
]


def constant_return(fn):
    """The constant a method returns when its body is just `return <constant>`."""
    body = [st for st in fn.body if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant)
                                          and isinstance(st.value.value, str))]
    if len(body) == 1 and isinstance(body[0], ast.Return) and isinstance(body[0].value, ast.Constant):
        return True, body[0].value.value
    return False, None


def attention_enum(w):
    tree = w.tree(ATTN_REGISTRY)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "AttentionBackendEnum")
    out = []
    for st in cls.body:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            ok, v = literal(st.value)
            if ok and (v is None or isinstance(v, str)):
                out.append((st.targets[0].id, v, st.lineno))
    return out


def extract_attention(w, idx):
    backends = []
    by_package = {}
    for name, class_path, line in attention_enum(w):
        e = {"backend": name, "class_path": class_path, "source": f"{ATTN_REGISTRY}:{line}"}
        backends.append(e)
        if not class_path:
            continue
        module, _, cls_name = class_path.rpartition(".")
        pkg = model_package(module)
        if pkg:
            by_package.setdefault(pkg, []).append(name)
        path = w.module_path(module)
        found = idx.find_class(path, cls_name) if path else None
        if found is None:
            e["note"] = "class not found statically in the wheel"
            continue
        cpath, cnode = found
        e["class_source"] = f"{cpath}:{cnode.lineno}"
        chain = [(p, c) for p, c, _ in idx.chain(cpath, cnode) if c is not None]
        for attr, as_list in (("supported_dtypes", False), ("supported_kv_cache_dtypes", True)):
            for p, c in chain:
                found_attr = next((st for st in c.body if (
                    isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.target.id == attr
                    and st.value is not None) or (isinstance(st, ast.Assign) and any(
                        isinstance(t, ast.Name) and t.id == attr for t in st.targets))), None)
                if found_attr is not None:
                    ok, v = literal(found_attr.value)
                    e[attr] = {"value": v if (as_list and ok) else ast.unparse(found_attr.value),
                               "source": span(p, found_attr)}
                    break
        for meth in ATTN_FLAG_METHODS + ATTN_METHODS:
            m = next(((p, c, class_method(c, meth)) for p, c in chain if class_method(c, meth) is not None), None)
            if m is None:
                continue
            p, c, fn = m
            rec = {"source": full_span(p, fn), "defined_in": c.name}
            const, value = constant_return(fn) if meth in ATTN_FLAG_METHODS else (False, None)
            if const:
                rec["value"] = value
            else:
                limit = LIMITS["supports_combination"] if meth == "supports_combination" else LIMITS["attention_method"]
                rec["code"] = truncate(w.segment(p, fn), limit)
            e[meth] = rec
    return backends, by_package


def extract_priority(w, idx):
    tree = w.tree(CUDA_PLATFORM)
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_get_backend_priorities")
    out = {"function": "_get_backend_priorities", "source": full_span(CUDA_PLATFORM, fn),
           "code": truncate(w.segment(CUDA_PLATFORM, fn), LIMITS["priority"])}
    base = idx.find_class(ATTN_BASE, "AttentionBackend")
    if base:
        m = class_method(base[1], "validate_configuration")
        if m is not None:
            out["validate_configuration"] = {"source": full_span(base[0], m),
                                             "code": truncate(w.segment(base[0], m), LIMITS["validate_configuration"])}
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and "No valid attention backend" in (ast.get_source_segment(w.files[CUDA_PLATFORM], node) or ""):
            out["no_backend_error"] = {"source": full_span(CUDA_PLATFORM, node),
                                       "code": truncate(w.segment(CUDA_PLATFORM, node), LIMITS["no_backend_error"])}
            break
    return out


def extract_cache_dtypes(w):
    out = {}
    for key, name in (("kv_cache_dtype", "CacheDType"), ("mamba_ssm_cache_dtype", "MambaDType")):
        node, st = literal_assign(w, "vllm/config/cache.py", name)
        out[key] = {"values": literal_args(node), "source": span("vllm/config/cache.py", st)} if st is not None else None
    return out


LOADER_INIT = "vllm/model_executor/model_loader/__init__.py"


def extract_gguf(w, version):
    methods_node, _ = literal_assign(w, QUANT_INIT, "QuantizationMethods")
    formats_node, formats_st = literal_assign(w, LOADER_INIT, "LoadFormats")
    methods, formats = literal_args(methods_node), literal_args(formats_node)
    meta_path = f"vllm-{version}.dist-info/METADATA"
    mentions = [{"text": line, "source": f"{meta_path}:{i + 1}"}
                for i, line in enumerate(w.files.get(meta_path, "").split("\n")) if "gguf" in line.lower()]
    in_methods, in_formats = "gguf" in methods, "gguf" in formats
    if not in_methods and not in_formats:
        plugin = next((m["text"].split("Requires-Dist: ")[-1].split(">")[0].split(";")[0].strip()
                       for m in mentions if "gguf-plugin" in m["text"]), None)
        extra = re.search(r'extra == "([^"]+)"', next((m["text"] for m in mentions if "gguf-plugin" in m["text"]), ""))
        verdict = ("not built in: 'gguf' is neither a quantization method nor a load format in this wheel"
                   + (f"; METADATA lists the out-of-tree '{plugin}' under the '{extra.group(1)}' extra" if plugin and extra else ""))
    elif in_methods and in_formats:
        dep = next((m["text"].split("Requires-Dist: ")[-1] for m in mentions if m["text"].startswith("Requires-Dist: gguf")), None)
        verdict = "built in: 'gguf' is a quantization method and a load format in this wheel" + (
            f"; METADATA requires '{dep}'" if dep else "")
    else:
        verdict = "partly built in: 'gguf' is " + ("a quantization method but not a load format" if in_methods
                                                   else "a load format but not a quantization method")
    return {
        "gguf_in_QUANTIZATION_METHODS": in_methods,
        "gguf_in_LoadFormats": in_formats,
        "load_formats": {"values": formats, "source": full_span(LOADER_INIT, formats_st)},
        "metadata_mentions": mentions,
        "verdict": verdict,
    }


# ----------------------------------------------------------------------------------------------
# main


def wheel_version(w):
    infos = sorted({p.split("/")[0] for p in w.files if ".dist-info/" in p})
    m = re.fullmatch(r"vllm-(.+)\.dist-info", infos[0]) if infos else None
    if not m:
        sys.exit("extract_vllm: no vllm-*.dist-info in the wheel")
    return m.group(1)


def extract(wheel_path, extracted_by=EXTRACTED_BY):
    w = Wheel(wheel_path)
    idx = Index(w)
    version = wheel_version(w)
    backends, by_package = extract_attention(w, idx)
    quant, shorthands = extract_quantization(w, idx)
    extras = extract_registry_extras(w)
    return {
        "engine": "vllm",
        "version": version,
        "package": Path(wheel_path).name,
        "package_sha256": sha256(wheel_path),
        "extracted_by": extracted_by,
        "source_convention": "path inside the wheel:line[-end]",
        "architectures": extract_architectures(w, idx, by_package),
        "previously_supported_architectures": extras["previously_supported_architectures"],
        "out_of_tree_architectures": extras["out_of_tree_architectures"],
        "quantization_methods": quant,
        "online_quant_shorthands": shorthands,
        "linear_kernels": extract_linear_kernels(w, idx),
        "fused_moe": extract_fused_moe(w),
        "attention_backends": backends,
        "attention_backend_priority_cuda": extract_priority(w, idx),
        "cache_dtypes": extract_cache_dtypes(w),
        "gguf": extract_gguf(w, version),
    }


def render(data):
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("wheel", help="a vLLM wheel (pip download --no-deps vllm==X -d DIR)")
    ap.add_argument("out", help="output JSON")
    ap.add_argument("--extracted-by", default=EXTRACTED_BY,
                    help="the `extracted_by` string to record (default: this script)")
    args = ap.parse_args()
    text = render(extract(args.wheel, args.extracted_by))
    Path(args.out).write_text(text, encoding="utf-8")
    print(f"wrote {args.out} ({len(text.encode())} bytes)")


if __name__ == "__main__":
    main()

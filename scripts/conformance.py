#!/usr/bin/env python3
"""Conformance: the real `huggingface_hub` client against preflight-testhub.

Starts the testhub binary on free loopback ports, points huggingface_hub at it (HF_ENDPOINT,
a temporary HF_HOME, telemetry off, no ambient token) and checks, for every repo in
fixtures/expected.json that has a commit and is in the plain fixtures/hub tree (the packed
repos are not served by the fixture Hub), that the client sees what the fixture says:

  - model_info(repo).sha == commit, also when asked at that commit;
  - get_safetensors_metadata(repo) per-dtype parameter counts == "elements_by_dtype";
  - list_repo_files(repo) == the files in the fixture tree;
  - model_info's card_data.license, gated, and (files_metadata=True, the `blobs=true` preflight
    asks for) every sibling's size are the README's licence, repo.json's gating and the sizes
    the fixture serves;
  - hf_hub_download(repo, "config.json") returns the fixture's bytes;
  - a ranged read through HfFileSystem returns the fixture's first bytes;
  - gated repos raise GatedRepoError without a token and work with it;
plus the error mapping for missing repos, revisions and files, the GGUF file's size, and
that no request to the CDN origin carried an Authorization header.

Usage: scripts/conformance.py [--testhub PATH] [--root DIR]
  PATH defaults to $PREFLIGHT_TESTHUB_BIN, else target/debug/preflight-testhub.
Prints a table; exits 1 on any mismatch, 2 if the hub could not be started.
Needs the packages in scripts/requirements.txt.
"""

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import traceback
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT_S = 30


def start_testhub(binary, root, token):
    proc = subprocess.Popen(
        [binary, "--root", str(root), "--listen", "127.0.0.1:0",
         "--cdn-listen", "127.0.0.1:0", "--token", token],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    line = {}
    reader = threading.Thread(target=lambda: line.setdefault("url", proc.stdout.readline().strip()))
    reader.start()
    reader.join(STARTUP_TIMEOUT_S)
    url = line.get("url", "")
    if not url.startswith("http://127.0.0.1:"):
        proc.kill()
        raise RuntimeError(f"testhub did not report an endpoint: {url!r} {proc.stderr.read()}")
    return proc, url


class Table:
    def __init__(self):
        self.rows = []

    def check(self, repo, what, expected, got):
        self.rows.append((repo, what, expected, got, expected == got))

    def run(self, repo, what, expected, thunk):
        """Record `thunk()` against `expected`; an exception becomes its class name."""
        try:
            got = thunk()
        except Exception as e:  # noqa: BLE001 - the class is the result being checked
            got = type(e).__name__
            if not isinstance(expected, str) or expected != got:
                traceback.print_exc(file=sys.stderr)
        self.check(repo, what, expected, got)

    def print(self):
        def short(v):
            s = json.dumps(v, sort_keys=True) if not isinstance(v, str) else v
            return s if len(s) <= 60 else s[:57] + "..."

        widths = [max(len(r[0]) for r in self.rows), max(len(r[1]) for r in self.rows)]
        print(f"{'repo':<{widths[0]}}  {'check':<{widths[1]}}  result  got")
        for repo, what, expected, got, ok in self.rows:
            mark = "ok" if ok else "FAIL"
            detail = short(got) if ok else f"{short(got)}  (expected {short(expected)})"
            print(f"{repo:<{widths[0]}}  {what:<{widths[1]}}  {mark:<6}  {detail}")
        failed = sum(1 for r in self.rows if not r[4])
        print(f"\nconformance: {len(self.rows) - failed} passed, {failed} failed")
        return failed


def fixture_files(root, repo, commit):
    base = root / repo / commit
    return sorted(
        str(p.relative_to(base)) for p in base.rglob("*")
        if p.is_file() and p.name != ".stubs.json"
    )


def fixture_sizes(root, repo, commit):
    """Each file's size as the Hub serves it: a stub's full size, else its bytes."""
    base = root / repo / commit
    stubs_path = base / ".stubs.json"
    stubs = json.loads(stubs_path.read_text()) if stubs_path.exists() else {}
    return {f: stubs.get(f, (base / f).stat().st_size) for f in fixture_files(root, repo, commit)}


def card_license(root, repo, commit):
    """`license:` from the README's YAML front matter, as the Hub's cardData has it."""
    readme = root / repo / commit / "README.md"
    if not readme.exists():
        return None
    text = readme.read_text()
    if not text.startswith("---\n"):
        return None
    for line in text[4:].split("\n---")[0].splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "license":
            return value.strip()
    return None


def check_repo(api, endpoint, root, token, table, repo, commit, facts):
    """The per-repo rows: identity, parameters, files, download, ranged read, gating."""
    import huggingface_hub as hf
    from huggingface_hub import HfFileSystem
    from huggingface_hub.errors import GatedRepoError

    gated = json.loads((root / repo / "repo.json").read_text()).get("gated", False)
    auth = token if gated else False

    table.run(repo, "model_info.sha", commit, lambda: api.model_info(repo, token=False).sha)
    table.run(repo, "model_info@commit.sha", commit,
              lambda: api.model_info(repo, revision=commit, token=False).sha)
    table.run(repo, "safetensors parameters", facts["elements_by_dtype"],
              lambda: api.get_safetensors_metadata(repo, token=auth).parameter_count)
    table.run(repo, "list_repo_files", fixture_files(root, repo, commit),
              lambda: sorted(api.list_repo_files(repo, token=False)))
    # What preflight reads out of the one model-info request it makes (blobs=true): the
    # card's licence, the gating, every file's size.
    table.run(repo, "model_info.card_data.license", card_license(root, repo, commit),
              lambda: api.model_info(repo, token=False).card_data.license)
    table.run(repo, "model_info.gated", {False: False, True: "manual"}.get(gated, gated),
              lambda: api.model_info(repo, token=False).gated)
    table.run(repo, "model_info(files_metadata) sizes", fixture_sizes(root, repo, commit),
              lambda: {s.rfilename: s.size for s in api.model_info(
                  repo, revision=commit, files_metadata=True, token=False).siblings})

    config = (root / repo / commit / "config.json").read_bytes()
    with tempfile.TemporaryDirectory() as cache:
        table.run(repo, "hf_hub_download config.json", len(config),
                  lambda: len(Path(hf.hf_hub_download(
                      repo, "config.json", cache_dir=cache, token=auth)).read_bytes()))

    shard = sorted(p for p in fixture_files(root, repo, commit) if p.endswith(".safetensors"))[0]
    head = (root / repo / commit / shard).read_bytes()[:16]

    def ranged_read():
        fs = HfFileSystem(endpoint=endpoint, token=auth)
        with fs.open(f"{repo}/{shard}", "rb", block_size=0) as f:
            f.seek(0)
            return f.read(16).hex()

    table.run(repo, f"ranged read {shard[:24]}", head.hex(), ranged_read)

    if gated:
        table.run(repo, "gated: metadata without token", GatedRepoError.__name__,
                  lambda: api.get_safetensors_metadata(repo, token=False))
        with tempfile.TemporaryDirectory() as cache:
            table.run(repo, "gated: download without token", GatedRepoError.__name__,
                      lambda: hf.hf_hub_download(repo, "config.json", cache_dir=cache,
                                                 token=False))
        table.run(repo, "gated: file_exists with token", True,
                  lambda: api.file_exists(repo, "config.json", token=token))


def run_checks(endpoint, root, token, expected):
    # Imported only now: huggingface_hub reads HF_ENDPOINT and HF_HOME at import time.
    import huggingface_hub as hf
    from huggingface_hub import HfApi
    from huggingface_hub.errors import (
        RemoteEntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError,
    )

    api = HfApi(endpoint=endpoint)
    table = Table()

    for repo, facts in sorted(expected.items()):
        commit = facts.get("commit")
        if not commit or not (root / repo).is_dir():
            continue
        try:
            check_repo(api, endpoint, root, token, table, repo, commit, facts)
        except Exception as e:  # noqa: BLE001 - a broken fixture is a failed row, not a crash
            table.check(repo, "fixture readable", "yes", f"{type(e).__name__}: {e}")
    gguf_repo, gguf_file = "Qwen/Qwen3-8B-GGUF", "Qwen3-8B-Q4_K_M.gguf"
    gguf = expected.get(f"{gguf_repo}/{gguf_file}")
    if gguf:
        url = hf.hf_hub_url(gguf_repo, gguf_file, endpoint=endpoint)
        table.run(gguf_repo, "gguf size via HEAD", gguf["file_bytes"],
                  lambda: hf.get_hf_file_metadata(url, token=False).size)

    probe = "Qwen/Qwen3-0.6B"
    table.run("nobody/nothing", "missing repo", RepositoryNotFoundError.__name__,
              lambda: api.model_info("nobody/nothing", token=False))
    table.run(probe, "missing revision", RevisionNotFoundError.__name__,
              lambda: api.model_info(probe, revision="no-such-branch", token=False))
    with tempfile.TemporaryDirectory() as cache:
        table.run(probe, "missing file", RemoteEntryNotFoundError.__name__,
                  lambda: hf.hf_hub_download(probe, "nope.json", cache_dir=cache, token=False))
    table.run(probe, "file_exists(missing)", False,
              lambda: api.file_exists(probe, "nope.json", token=False))

    with urllib.request.urlopen(f"{endpoint}/_testhub/requests") as resp:
        log = json.load(resp)
    leaked = [r["path"] for r in log if r["origin"] == "cdn" and r["authorization"]]
    table.check("(all)", "no Authorization on the CDN", [], leaked)
    table.check("(all)", "CDN requests seen", True, any(r["origin"] == "cdn" for r in log))
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--testhub", default=os.environ.get(
        "PREFLIGHT_TESTHUB_BIN", str(REPO_ROOT / "target/debug/preflight-testhub")))
    parser.add_argument("--root", default=str(REPO_ROOT / "fixtures/hub"))
    args = parser.parse_args()

    root = Path(args.root)
    expected = json.loads((REPO_ROOT / "fixtures/expected.json").read_text())
    token = "hf_conformance_" + secrets.token_hex(8)
    try:
        proc, endpoint = start_testhub(args.testhub, root, token)
    except (OSError, RuntimeError) as e:
        print(f"conformance: cannot start {args.testhub}: {e}", file=sys.stderr)
        return 2
    try:
        with tempfile.TemporaryDirectory() as hf_home:
            for var in ("HF_HUB_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_CACHE"):
                os.environ.pop(var, None)
            os.environ.update({
                "HF_ENDPOINT": endpoint,
                "HF_HOME": hf_home,
                "HF_HUB_DISABLE_TELEMETRY": "1",
                "HF_HUB_DISABLE_PROGRESS_BARS": "1",
                "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
            })
            import huggingface_hub
            print(f"huggingface_hub {huggingface_hub.__version__} against {endpoint}\n")
            table = run_checks(endpoint, root, token, expected)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return 1 if table.print() else 0


if __name__ == "__main__":
    sys.exit(main())

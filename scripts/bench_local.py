#!/usr/bin/env python3
"""`preflight plan` on a local checkpoint, end to end: process start, reading every header
from disk, planning, rendering the verdict.

Each repo's fixture tree (fixtures/hub/ORG/NAME, or a fixtures/packed/ORG--NAME.tar.gz) is laid
out as a download would leave it — headers in files of their full size (sparse) — in a temp
dir, then `target/release/preflight plan --json DIR` runs --runs times (after one warm-up, so
the headers are in the page cache) and the table gives the wall time and the CPU time of the
process. Local sources never touch the staged-facts cache.

Usage: scripts/bench_local.py [--runs 10] [REPO ...]
Needs: cargo build --release -p preflight
"""
import argparse, json, os, resource, shutil, statistics, subprocess, sys, tarfile, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(ROOT, "target/release/preflight")
REPOS = ["deepseek-ai/DeepSeek-V3", "zai-org/GLM-5.2"]


def repo_tree(repo, scratch):
    """The fixture tree of `repo` (refs.json, <commit>/…), unpacking a packed one."""
    plain = os.path.join(ROOT, "fixtures/hub", repo)
    if os.path.isdir(plain):
        return plain
    packed = os.path.join(ROOT, "fixtures/packed", repo.replace("/", "--") + ".tar.gz")
    with tarfile.open(packed) as tar:
        tar.extractall(scratch, filter="data")
    return os.path.join(scratch, repo)


def materialize(repo, scratch):
    """The main commit's files in a directory, stubs extended (sparse) to their full size."""
    tree = repo_tree(repo, os.path.join(scratch, "tree"))
    commit = json.load(open(os.path.join(tree, "refs.json")))["main"]
    src = os.path.join(tree, commit)
    stubs_path = os.path.join(src, ".stubs.json")
    stubs = json.load(open(stubs_path)) if os.path.exists(stubs_path) else {}
    out = os.path.join(scratch, "checkpoint", repo)
    os.makedirs(out)
    tensors = 0
    for name in os.listdir(src):
        if name == ".stubs.json":
            continue
        target = os.path.join(out, name)
        shutil.copyfile(os.path.join(src, name), target)
        if name in stubs:
            os.truncate(target, stubs[name])
        if name.endswith(".safetensors"):
            with open(target, "rb") as f:
                n = int.from_bytes(f.read(8), "little")
                tensors += sum(1 for k in json.loads(f.read(n)) if k != "__metadata__")
    return out, tensors


def run(directory):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run([BINARY, "plan", "--json", directory], capture_output=True, timeout=120)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode not in (0, 1):
        raise SystemExit(f"preflight failed on {directory}: {r.stderr.decode()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("repos", nargs="*", default=REPOS)
    args = ap.parse_args()
    if not os.path.exists(BINARY):
        raise SystemExit("build it first: cargo build --release -p preflight")
    print(f"`preflight plan --json DIR` on a local checkpoint, {args.runs} runs after a warm-up\n")
    print("| checkpoint | headers | tensors | wall s (median) | wall s (min) | CPU s (median) |")
    print("|---|---|---|---|---|---|")
    for repo in args.repos:
        with tempfile.TemporaryDirectory() as scratch:
            directory, tensors = materialize(repo, scratch)
            headers = sum(1 for n in os.listdir(directory) if n.endswith(".safetensors"))
            run(directory)
            walls, cpus = zip(*(run(directory) for _ in range(args.runs)))
            print(f"| {repo} | {headers} | {tensors:,} | {statistics.median(walls):.3f} | {min(walls):.3f} "
                  f"| {statistics.median(cpus):.3f} |")


if __name__ == "__main__":
    main()

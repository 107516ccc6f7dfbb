#!/usr/bin/env python3
"""Cold Hub planning, preflight beside huggingface_hub, on the fixture Hub at added latency.

For each fixture repo: wall time, requests (as the fixture Hub's log counts them, both
origins, and the Hub origin alone) and body bytes, for
  - `preflight plan hf://REPO --json --no-cache` (the release binary, a fresh HF_HOME: nothing cached), and
  - `huggingface_hub.HfApi().get_safetensors_metadata(REPO)` (a fresh HF_HOME each run).
Both run against the same fixture Hub in the same run. Loopback only; bounded.

Usage: scripts/bench_hub.py [--latency-ms 20] [--runs 3] [REPO ...]
Needs: cargo build --release -p preflight -p preflight-testhub; pip install -r scripts/requirements.txt
"""
import argparse, json, os, socket, statistics, subprocess, sys, tempfile, time, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPOS = ["Qwen/Qwen3-0.6B", "Qwen/Qwen3-8B", "Qwen/Qwen3-30B-A3B", "mistralai/Mixtral-8x7B-v0.1",
         "openai/gpt-oss-20b", "deepseek-ai/DeepSeek-V3"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def admin(endpoint, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(endpoint + path, data=data, method=method, headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        text = r.read()
        return json.loads(text) if text else None


def counts(endpoint):
    log = admin(endpoint, "GET", "/_testhub/requests")
    return len(log), sum(1 for r in log if r["origin"] == "hub"), sum(r["body_bytes"] for r in log)


def run_preflight(endpoint, repo):
    env = dict(os.environ, HF_ENDPOINT=endpoint, HF_HOME=tempfile.mkdtemp(), HF_HUB_OFFLINE="0")
    env.pop("HF_TOKEN", None)
    t = time.perf_counter()
    r = subprocess.run([os.path.join(ROOT, "target/release/preflight"), "plan", "--json", "--no-cache", f"hf://{repo}"],
                       env=env, capture_output=True, timeout=300)
    wall = time.perf_counter() - t
    if r.returncode not in (0, 1):
        raise SystemExit(f"preflight failed on {repo}: {r.stderr.decode()}")
    return wall


HF_CHILD = r'''
import sys, time
from huggingface_hub import HfApi
t = time.perf_counter()
HfApi().get_safetensors_metadata(sys.argv[1])
print(time.perf_counter() - t)
'''


def run_hf(endpoint, repo):
    env = dict(os.environ, HF_ENDPOINT=endpoint, HF_HOME=tempfile.mkdtemp(), HF_HUB_DISABLE_TELEMETRY="1",
               HF_HUB_DISABLE_PROGRESS_BARS="1")
    env.pop("HF_TOKEN", None)
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", HF_CHILD, repo], env=env, capture_output=True, timeout=300)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"huggingface_hub failed on {repo}: {r.stderr.decode()[-2000:]}")
    return wall, float(r.stdout.decode().strip())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency-ms", type=int, default=20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("repos", nargs="*", default=REPOS)
    args = ap.parse_args()

    port = free_port()
    hub = subprocess.Popen([os.path.join(ROOT, "target/release/preflight-testhub"), "--listen", f"127.0.0.1:{port}"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        endpoint = hub.stdout.readline().strip()
        admin(endpoint, "POST", "/_testhub/faults", {"kind": "latency", "ms": args.latency_ms})
        print(f"fixture Hub {endpoint}, {args.latency_ms} ms added to every request, median of {args.runs} cold runs\n")
        head = f"| repo | tool | wall s | requests (hub+cdn) | hub requests | bytes |"
        print(head)
        print("|---|---|---|---|---|---|")
        for repo in args.repos:
            for tool in ("preflight", "huggingface_hub"):
                walls, last = [], None
                for _ in range(args.runs):
                    admin(endpoint, "DELETE", "/_testhub/requests")
                    if tool == "preflight":
                        walls.append(run_preflight(endpoint, repo))
                    else:
                        # in-process time excludes the interpreter's start; report both
                        wall, inner = run_hf(endpoint, repo)
                        walls.append(inner)
                    last = counts(endpoint)
                total, hub_only, nbytes = last
                print(f"| {repo} | {tool} | {statistics.median(walls):.3f} | {total} | {hub_only} | {nbytes:,} |")
        print("\npreflight's wall time includes process start; huggingface_hub's is the call alone (interpreter start excluded).")
    finally:
        hub.terminate()
        hub.wait(timeout=10)


if __name__ == "__main__":
    main()

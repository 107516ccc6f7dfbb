#!/usr/bin/env python3
"""The service's memory: peak RSS while it stages DeepSeek-V3 cold, then RSS across what-if
requests planned from the cached facts (every one a new option set: a verdict miss, a facts
hit — no staging).

Starts the release fixture Hub and `preflight serve` (public profile, a fresh data dir) on
loopback, samples the server's VmRSS from /proc every 5 ms, and reads its own counters from
/metrics so the table says what the requests cost. Loopback only; bounded.

Every what-if verdict is stored, so the verdict memory tier grows until --memory-cache-bytes
(the server's default unless given); the table shows it beside the RSS, so growth that is the
cache filling can be told from growth that is not.

Usage: scripts/bench_service_rss.py [--requests 10000] [--clients 2] [--memory-cache-bytes N]
                                    [--repo deepseek-ai/DeepSeek-V3]
Needs: cargo build --release -p preflight -p preflight-testhub (Linux: reads /proc)
"""
import argparse, json, os, subprocess, sys, tempfile, threading, time, urllib.error, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def spawn(args):
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    url = next(w for w in line.split() if w.startswith("http://"))
    return p, url


def mib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    return 0.0


def post(url, body):
    req = urllib.request.Request(url + "/v1/plan", data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, None


def metrics(url):
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        out = {}
        for line in r.read().decode().splitlines():
            if line and not line.startswith("#") and "{" not in line:
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out


class Sampler(threading.Thread):
    """The highest VmRSS seen since the last `take()`."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak, self.lock, self.stop = pid, 0.0, threading.Lock(), False

    def run(self):
        while not self.stop:
            rss = mib(self.pid, "VmRSS:")
            with self.lock:
                self.peak = max(self.peak, rss)
            time.sleep(0.005)

    def take(self):
        with self.lock:
            peak, self.peak = self.peak, 0.0
        return peak


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--repo", default="deepseek-ai/DeepSeek-V3")
    ap.add_argument("--memory-cache-bytes", type=int, default=None)
    args = ap.parse_args()
    release = os.path.join(ROOT, "target/release")
    hub, hub_url = spawn([os.path.join(release, "preflight-testhub"), "--listen", "127.0.0.1:0"])
    data = tempfile.mkdtemp()
    server = None
    try:
        with urllib.request.urlopen(hub_url + "/_testhub/info", timeout=10) as r:
            cdn = json.loads(r.read())["cdn"].removeprefix("http://")
        server, url = spawn([os.path.join(release, "preflight"), "serve", "--listen", "127.0.0.1:0",
                             "--hub-endpoint", hub_url, "--hub-redirect-hosts", cdn, "--data-dir", data,
                             "--max-plans-in-flight", str(max(2, args.clients))]
                            + ([] if args.memory_cache_bytes is None
                               else ["--memory-cache-bytes", str(args.memory_cache_bytes)]))
        pid = server.pid
        sampler = Sampler(pid)
        sampler.start()
        time.sleep(0.2)
        def cached():
            return f"{metrics(url).get('preflight_cache_memory_bytes', 0) / 2**20:.1f}"

        rows = [("after start", mib(pid, "VmRSS:"), sampler.take(), cached())]
        source = f"hf://{args.repo}"
        t = time.perf_counter()
        status, verdict = post(url, {"sources": [source]})
        cold = time.perf_counter() - t
        if status != 200:
            raise SystemExit(f"cold plan of {source}: HTTP {status}")
        staging = verdict["staging"][0]
        rows.append((f"cold plan of {args.repo} ({staging['requests']} requests, "
                     f"{staging['header_bytes'] / 1e6:.1f} MB of headers, {cold:.2f} s)",
                     mib(pid, "VmRSS:"), sampler.take(), cached()))

        done, failed, lock = [0], [0], threading.Lock()
        checkpoints = max(1, args.requests // 10)

        def client(k):
            i = k
            while i < args.requests:
                # A context no one asked for before: the verdict misses, the facts hit.
                status, _ = post(url, {"sources": [source], "options": {"context": 1024 + i}})
                with lock:
                    done[0] += 1
                    failed[0] += status != 200
                i += args.clients

        threads = [threading.Thread(target=client, args=(k,)) for k in range(args.clients)]
        t = time.perf_counter()
        for th in threads:
            th.start()
        reported = 0
        while any(th.is_alive() for th in threads):
            time.sleep(0.05)
            with lock:
                n = done[0]
            if n // checkpoints > reported // checkpoints or (n == args.requests and reported != n):
                reported = n
                rows.append((f"after {n:,} what-if requests", mib(pid, "VmRSS:"), sampler.take(), cached()))
        for th in threads:
            th.join()
        elapsed = time.perf_counter() - t
        m = metrics(url)
        sampler.stop = True
        limit = "the default" if args.memory_cache_bytes is None else f"{args.memory_cache_bytes / 2**20:.0f} MiB"
        print(f"`preflight serve` (release) on the fixture Hub; {args.requests:,} what-if requests on {source} "
              f"from {args.clients} clients, each a new --context; verdict memory tier bounded at {limit}\n")
        print("| point | RSS MiB | peak RSS since previous row, MiB | verdict memory tier MiB |")
        print("|---|---|---|---|")
        for name, rss, peak, tier in rows:
            print(f"| {name} | {rss:.1f} | {peak:.1f} | {tier} |")
        print(f"\nVmHWM (the process's peak RSS): {mib(pid, 'VmHWM:'):.1f} MiB")
        print(f"what-if requests: {done[0]:,} in {elapsed:.1f} s ({done[0] / elapsed:.0f}/s), non-200: {failed[0]}")
        keys = ["preflight_staging_passes_total", "preflight_planner_invocations_total", "preflight_facts_hits_total",
                "preflight_cache_hits_total", "preflight_probes_total"]
        print("counters: " + ", ".join(f"{k.removeprefix('preflight_')} {m.get(k, 0):.0f}" for k in keys))
    finally:
        for p in (server, hub):
            if p:
                p.terminate()
                p.wait(timeout=10)


if __name__ == "__main__":
    main()

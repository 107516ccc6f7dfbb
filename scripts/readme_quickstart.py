#!/usr/bin/env python3
"""Run the README's offline quick start exactly as written.

Finds the one fenced block after the `<!-- quickstart: ... -->` marker in README.md and runs
it with bash under `set -euo pipefail` (each command echoed, `set -x`) from the repository
root, so a command the README shows that fails, or a repo name that is wrong, fails CI.

The block is not edited. Only its surroundings are: the loopback ports it names must be free
before it starts; its environment has no Hub token, HF_ENDPOINT or HF_HUB_OFFLINE of the
caller's, a facts cache and HF_HOME of its own (a temporary directory) and NO_COLOR; it runs in
a process group of its own, and whatever is left in that group (the fixture Hub and the
service it starts in the background) is stopped at the end, whether the block passed, failed
or timed out. A block that passes but leaves a process running fails: a reader who pastes it
should be left with nothing running.

Usage: scripts/readme_quickstart.py [--readme PATH] [--timeout SECONDS]
"""

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!-- quickstart:.*-->\s*$")


def extract(readme: str) -> str:
    """The fenced block right after the marker; exactly one marker."""
    lines = readme.splitlines()
    at = [i for i, line in enumerate(lines) if MARKER.match(line)]
    if len(at) != 1:
        raise SystemExit(f"readme quickstart: expected one `<!-- quickstart: ... -->` marker, found {len(at)}")
    fence = at[0] + 1
    if fence >= len(lines) or lines[fence].strip() not in ("```sh", "```bash"):
        raise SystemExit("readme quickstart: the marker must be followed by a ```sh block")
    body = []
    for line in lines[fence + 1:]:
        if line.strip() == "```":
            return "\n".join(body) + "\n"
        body.append(line)
    raise SystemExit("readme quickstart: the block after the marker is never closed")


def busy_ports(block: str) -> list:
    """Loopback ports the block names that something already listens on."""
    busy = []
    for port in sorted({int(p) for p in re.findall(r"127\.0\.0\.1:(\d+)", block)}):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                busy.append(port)
    return busy


def live_members(pgid: int) -> list:
    """`pid (name)` of every process still running in the group: /proc, zombies left out (a
    process whose parent exited may wait a while for init to reap it)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        state, _ppid, pgrp = text[text.rindex(")") + 2:].split()[:3]
        if int(pgrp) == pgid and state != "Z":
            members.append(f"{stat.parent.name} ({name})")
    return members


def wait_empty(pgid: int, seconds: float) -> list:
    """The group's live members after waiting up to `seconds` for it to empty."""
    deadline = time.monotonic() + seconds
    while (members := live_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return members


def stop_group(pgid: int) -> None:
    """SIGTERM every process left in the block's group, then SIGKILL what outlives 5 s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not live_members(pgid):
            return
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        wait_empty(pgid, 5.0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readme", default=str(ROOT / "README.md"))
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds the whole block may take (default 600: room for a cold build)")
    args = parser.parse_args()

    block = extract(Path(args.readme).read_text())
    busy = busy_ports(block)
    if busy:
        print(f"readme quickstart: ports the block uses are taken: {busy}", file=sys.stderr)
        return 1
    print(f"readme quickstart: running the block from {args.readme} (commands echoed with +)", flush=True)

    with tempfile.TemporaryDirectory(prefix="preflight-quickstart-") as tmp:
        env = {k: v for k, v in os.environ.items()
               if k not in ("HF_TOKEN", "HF_HUB_OFFLINE", "HF_ENDPOINT", "PREFLIGHT_CACHE")}
        env.update(PREFLIGHT_CACHE=str(Path(tmp, "cache")), HF_HOME=str(Path(tmp, "hf")), NO_COLOR="1")
        script = "set -euo pipefail -x\n" + block
        started = time.monotonic()
        proc = subprocess.Popen(["bash", "-c", script], cwd=ROOT, env=env, start_new_session=True)
        try:
            status = proc.wait(timeout=args.timeout)
            outcome = "passed" if status == 0 else f"failed (exit {status})"
            # The block stops what it starts: a reader who pastes it is left with nothing running.
            left = wait_empty(proc.pid, 5.0) if status == 0 else []
            if left:
                status, outcome = 1, f"failed: the block left processes running: {', '.join(left)}"
        except subprocess.TimeoutExpired:
            status, outcome = 1, f"timed out after {args.timeout:.0f} s"
        finally:
            stop_group(proc.pid)
            proc.wait()
        print(f"readme quickstart: {outcome} in {time.monotonic() - started:.1f} s", flush=True)
        return 0 if status == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

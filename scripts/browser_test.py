#!/usr/bin/env python3
"""Browser test of the Explorer (`GET /` on `preflight serve`), in headless Chromium.

Starts its own fixture Hub and two `preflight serve` processes on loopback (a `public` one, and
a `local` one whose allowed root holds a tiny checkpoint with an unknown config key and
mis-shaped KV projections), starts Chromium headless, and drives it over the Chrome DevTools
Protocol: a websocket to the page, spoken with Python's standard library only (no pip, no
Node). Each case loads the page as a person would — types into the form and presses Enter, or
opens a shareable URL — and asserts on what is rendered: the verdict, the memory bar, the
cached marker on a repeat, findings blocking-first, the service's errors (gated, not
found, over capacity with Retry-After), and a workload with latency targets: the deployments
ranked on device types, the performance estimate with its range, and a bad workload's 400
beside its field. Throughout, it records every request the page makes
and every script exception or console error: a request to another origin, or a Content-
Security-Policy violation, fails the run.

With `--screenshots DIR` it also writes the three states of docs/ (admissible, inadmissible,
error) with Chromium's own `--screenshot`, at the height the page actually takes, and the
ranked deployments with the estimate under them, clipped to those two cards over CDP.

Every wait is bounded; the exit status is non-zero on any failure; the last line reads
`browser: N passed, M failed`.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "hf_browser_test_token"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--mute-audio",
    "--force-color-profile=srgb",
]
# Generous bounds: a cold plan of the largest case here takes well under a second on loopback.
START_TIMEOUT_S = 30
PLAN_TIMEOUT_S = 60
OVERALL_TIMEOUT_S = 600


class Failure(Exception):
    pass


def check(condition, message: str) -> None:
    if not condition:
        raise Failure(message)


# ---------------------------------------------------------------- processes


class Process:
    """A child started by this script, stopped by its own id (and its process group)."""

    def __init__(self, name: str, argv: list[str], log_dir: Path, cwd: Path | None = None, group: bool = False):
        self.name = name
        self.log = open(log_dir / f"{name}.log", "wb")
        self.proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=self.log,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            start_new_session=group,
        )
        self.group = group

    def first_line(self, timeout: float) -> str:
        """The first stdout line (the URL the child prints), then keep draining stdout."""
        deadline = time.monotonic() + timeout
        line = b""
        fd = self.proc.stdout.fileno()
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                raise Failure(f"{self.name} printed no first line within {timeout}s (exit {self.proc.poll()}); see {self.log.name}")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1)
                if not chunk:
                    raise Failure(f"{self.name} closed stdout before its first line; see {self.log.name}")
                line += chunk
        threading.Thread(target=self._drain, daemon=True).start()
        return line.decode().strip()

    def _drain(self) -> None:
        try:
            for chunk in iter(lambda: self.proc.stdout.read(4096), b""):
                self.log.write(chunk)
        except (OSError, ValueError):
            pass

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                if self.group:
                    os.killpg(self.proc.pid, signal.SIGTERM)
                else:
                    self.proc.terminate()
                self.proc.wait(timeout=10)
            except (subprocess.TimeoutExpired, ProcessLookupError, PermissionError):
                try:
                    if self.group:
                        os.killpg(self.proc.pid, signal.SIGKILL)
                    else:
                        self.proc.kill()
                    self.proc.wait(timeout=10)
                except (subprocess.TimeoutExpired, ProcessLookupError, PermissionError):
                    pass
        self.log.close()


def http(method: str, url: str, body=None, timeout: float = 30, headers: dict | None = None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


# ---------------------------------------------------------------- a minimal websocket (RFC 6455)


class WebSocket:
    GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    def __init__(self, url: str, timeout: float):
        parsed = urllib.parse.urlparse(url)
        self.sock = socket.create_connection((parsed.hostname, parsed.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16))
        # No Origin header: Chromium admits origin-less DevTools clients on loopback.
        self.sock.sendall(
            b"GET " + parsed.path.encode() + b" HTTP/1.1\r\nHost: " + f"{parsed.hostname}:{parsed.port}".encode()
            + b"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: " + key
            + b"\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        buffer = b""
        while b"\r\n\r\n" not in buffer:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise Failure("DevTools closed the websocket handshake")
            buffer += chunk
        head, self.buffer = buffer.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        check(b" 101 " in lines[0] + b" ", f"DevTools refused the websocket: {lines[0]!r}")
        accept = base64.b64encode(hashlib.sha1(key + self.GUID).digest())
        check(any(l.lower().startswith(b"sec-websocket-accept:") and l.split(b":", 1)[1].strip() == accept for l in lines),
              "bad Sec-WebSocket-Accept")

    def _exact(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buffer)))
            if not chunk:
                raise Failure("DevTools closed the websocket")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def _frame(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            header = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 1 << 16:
            header = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            header = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def send(self, text: str) -> None:
        self._frame(0x1, text.encode())

    def recv(self, timeout: float) -> str:
        self.sock.settimeout(timeout)
        message = b""
        while True:
            b0, b1 = self._exact(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                (n,) = struct.unpack("!H", self._exact(2))
            elif n == 127:
                (n,) = struct.unpack("!Q", self._exact(8))
            mask = self._exact(4) if b1 & 0x80 else None
            payload = self._exact(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x8:
                raise Failure("DevTools closed the websocket")
            if opcode == 0x9:
                self._frame(0xA, payload)
                continue
            if opcode in (0x0, 0x1, 0x2):
                message += payload
                if b0 & 0x80:
                    return message.decode()

    def close(self) -> None:
        try:
            self._frame(0x8, b"")
        except OSError:
            pass
        self.sock.close()


# ---------------------------------------------------------------- Chrome DevTools Protocol


class Page:
    """One page target, driven over CDP: evaluate, wait for a condition, type, press keys."""

    def __init__(self, ws_url: str):
        self.ws = WebSocket(ws_url, timeout=START_TIMEOUT_S)
        self.next_id = 0
        self.requests: list[str] = []
        self.problems: list[str] = []
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.call(f"{domain}.enable")

    def _event(self, message: dict) -> None:
        method, params = message.get("method"), message.get("params", {})
        if method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.problems.append("exception: " + details.get("exception", {}).get("description", details.get("text", "?")))
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.problems.append("console.error: " + " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
        elif method == "Log.entryAdded":
            entry = params["entry"]
            # A 4xx/5xx the page asked for is logged as a network error: expected in the error
            # cases, and asserted on through the page itself. Anything else (a CSP violation,
            # a script error) is a problem.
            if entry.get("level") == "error" and entry.get("source") != "network":
                self.problems.append(f"{entry.get('source')}: {entry.get('text')}")

    def call(self, method: str, params: dict | None = None, timeout: float = 30):
        self.next_id += 1
        ident = self.next_id
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failure(f"no answer to {method} within {timeout}s")
            try:
                message = json.loads(self.ws.recv(left))
            except socket.timeout:
                raise Failure(f"no answer to {method} within {timeout}s") from None
            if message.get("id") == ident:
                if "error" in message:
                    raise Failure(f"{method}: {message['error']}")
                return message.get("result", {})
            self._event(message)

    def js(self, expression: str):
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise Failure(f"evaluating {expression!r}: {result['exceptionDetails'].get('exception', {}).get('description', result['exceptionDetails'])}")
        return result["result"].get("value")

    def wait(self, expression: str, what: str, timeout: float = PLAN_TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.js(expression)
            if value:
                return value
            time.sleep(0.05)
        raise Failure(f"timed out after {timeout}s waiting for {what}; the page shows: {self.text('#result')[:600]!r}")

    def open(self, url: str) -> None:
        self.js("window.__previous = true")
        self.call("Page.navigate", {"url": url})
        self.wait("!window.__previous && document.readyState === 'complete'", f"{url} to load", timeout=START_TIMEOUT_S)

    def text(self, selector: str) -> str:
        return self.js(f"(document.querySelector({json.dumps(selector)}) || {{}}).innerText || ''") or ""

    def attr(self, selector: str, name: str):
        return self.js(f"(e => e && e.getAttribute({json.dumps(name)}))(document.querySelector({json.dumps(selector)}))")

    def type_into(self, selector: str, text: str) -> None:
        """Focus a field and type into it, as a keyboard would (replacing what it held)."""
        check(self.js(f"(e => (e && (e.focus(), e.select && e.select(), document.activeElement === e)))(document.querySelector({json.dumps(selector)}))"),
              f"cannot focus {selector}")
        self.call("Input.insertText", {"text": text})

    def press_enter(self) -> None:
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", {"type": kind, "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13,
                                                 "nativeVirtualKeyCode": 13, **({"text": "\r"} if kind == "keyDown" else {})})

    def close(self) -> None:
        self.ws.close()


class Chromium:
    def __init__(self, binary: str, work: Path):
        self.binary = binary
        self.work = work
        self.profile = work / "chromium-profile"
        self.process = Process("chromium", [binary, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}",
                                            "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
                                            "--window-size=1200,900", "about:blank"], work, group=True)
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            if time.monotonic() > deadline or self.process.proc.poll() is not None:
                raise Failure(f"Chromium did not start DevTools within {START_TIMEOUT_S}s; see {work / 'chromium.log'}")
            time.sleep(0.05)
        self.port = int(port_file.read_text().split("\n")[0])

    def new_page(self) -> Page:
        status, body = http("PUT", f"http://127.0.0.1:{self.port}/json/new?about:blank", timeout=START_TIMEOUT_S)
        check(status == 200, f"DevTools /json/new answered {status}")
        return Page(json.loads(body)["webSocketDebuggerUrl"])

    def screenshot(self, url: str, path: Path, width: int, height: int) -> None:
        """Chromium's own `--screenshot`, in a fresh profile, at the size the page takes."""
        profile = tempfile.mkdtemp(prefix="shot-", dir=self.work)
        argv = [self.binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--screenshot={path}",
                f"--window-size={width},{height}", "--virtual-time-budget=15000", url]
        result = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120, start_new_session=True)
        check(result.returncode == 0 and path.exists(), f"chromium --screenshot {url} failed ({result.returncode})")

    def stop(self) -> None:
        self.process.stop()


# ---------------------------------------------------------------- the fixtures and servers


def expected_commit(repo: str) -> str:
    """What `main` points at in the fixture Hub (fixtures/hub/ORG/NAME/refs.json)."""
    return json.loads((ROOT / "fixtures" / "hub" / repo / "refs.json").read_text())["main"]


def inadmissible_checkpoint(root: Path) -> Path:
    """tiny-llama with a config key Llama's reference implementations read and the planner
    does not model (chunked attention), and KV heads that disagree with the tensors. Returned
    relative to `root`, the local server's working directory."""
    relative = Path("checkpoints") / "tiny-llama-unknown-key"
    target = root / relative
    shutil.copytree(ROOT / "fixtures" / "local" / "tiny-llama", target)
    config_path = target / "config.json"
    config = json.loads(config_path.read_text())
    config["attention_chunk_size"] = 8192
    config["num_key_value_heads"] = config["num_attention_heads"]
    config_path.write_text(json.dumps(config, indent=2))
    return relative


def serve(preflight: str, hub_url: str, work: Path, name: str, extra: list[str], cwd: Path | None = None) -> tuple[Process, str]:
    # The fixture Hub's CDN listens on another loopback port: allow redirects to exactly it.
    _, info = http("GET", hub_url + "/_testhub/info")
    cdn = json.loads(info)["cdn"].removeprefix("http://")
    process = Process(name, [preflight, "serve", "--listen", "127.0.0.1:0", "--hub-endpoint", hub_url,
                             "--hub-redirect-hosts", cdn,
                             "--data-dir", str(work / f"data-{name}"), *extra], work, cwd=cwd)
    line = process.first_line(START_TIMEOUT_S)
    match = re.search(r"listening on (http://\S+)", line)
    check(match, f"{name}: unexpected first line {line!r}")
    return process, match.group(1).rstrip("/")


def metric(base: str, name: str) -> float:
    _, body = http("GET", base + "/metrics")
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


# ---------------------------------------------------------------- the cases


class Suite:
    def __init__(self, page: Page, public: str, local: str, hub: str, checkpoint: Path):
        self.page, self.public, self.local, self.hub, self.checkpoint = page, public, local, hub, checkpoint
        self.shared_url = None
        self.ranked_url, self.ranked_rows = None, None

    def done(self):
        self.page.wait("['done', 'error'].includes(document.body.dataset.state)", "the plan to finish")
        return self.page.js("document.body.dataset.state")

    def case_plans_qwen3_moe_typed_into_the_form(self):
        p = self.page
        p.open(self.public + "/")
        check(p.js("document.title") == "preflight Explorer", "title")
        p.wait("(document.getElementById('profile') || {}).textContent === 'public'", "capabilities (profile public)", timeout=10)
        check(p.js("document.body.dataset.state") == "idle", "a bare / must not plan anything")
        # Labels are wired to their fields (what a screen reader announces).
        for field, label in [("source-1", "Source 1"), ("devices", "Devices"), ("context", "Context"), ("sequences", "Sequences"), ("kv_dtype", "KV cache dtype")]:
            check(label in (p.js(f"(document.querySelector('label[for={field}]') || {{}}).textContent") or ""), f"label of #{field}")
        p.type_into("#source-1", "hf://Qwen/Qwen3-30B-A3B")
        p.type_into("#devices", "h100-80gb:1")
        p.type_into("#context", "32768")
        p.press_enter()
        check(self.done() == "done", f"expected a verdict, got: {p.text('#result')[:400]!r}")
        commit = expected_commit("Qwen/Qwen3-30B-A3B")
        check(p.attr("#admissible", "data-admissible") == "true", "verdict admissible")
        check("Admissible" in p.text("#admissible"), "admissible badge text")
        check("Qwen/Qwen3-30B-A3B" in p.text("#verdict-heading"), "repo in the heading")
        check(p.text("code.commit") == commit[:12] and p.attr("code.commit", "title") == commit, f"commit {commit[:12]} shown")
        check(p.attr("[data-pinned]", "data-pinned") == "false", "an unpinned source says so")
        # Before a download: the card's licence, the gating, remote code, the size.
        check(p.text("#licence") == "other" and p.attr("#gated", "data-gated") == "false", "licence and gating shown")
        check(p.attr("#remote-code", "data-required") == "false", "no remote code")
        check(p.text("#download").endswith("GiB"), f"download size shown: {p.text('#download')!r}")
        check(p.attr("#cached-marker", "data-cached") == "false" and p.text("#cached-marker") == "Planned now", "a first plan is not cached")
        article = p.text("#result")
        for expected in ["qwen3_moe", "48", "128 experts, 8 active per token", "48 full", "40,960 tokens", "151,936"]:
            check(expected in article, f"architecture shows {expected!r}")
        check(p.text("#params-total").startswith("30.53 B"), f"parameters total: {p.text('#params-total')!r}")
        components = p.text("#components")
        check(all(c in components for c in ["experts", "attention", "embedding", "lm_head", "router"]), "parameters by component")
        # The memory bar: one device, three segments against capacity, the fit line, and fit.
        check(p.js("document.querySelectorAll('.membar').length") == 1, "one memory bar for one device")
        check(p.attr(".membar", "data-device") == "h100-80gb" and p.attr(".membar", "data-fits") == "true", "bar for h100-80gb that fits")
        widths = p.js("['w','kv','act'].map(k => document.querySelector('.membar .seg.' + k).getBoundingClientRect().width)")
        bar = p.js("document.querySelector('.membar .bar').getBoundingClientRect().width")
        check(all(w > 0 for w in widths), f"weights, KV and activation segments all drawn: {widths}")
        check(0.6 < sum(widths) / bar < 0.9, f"64.6 GB of 80 GiB fills ~75% of the bar: {sum(widths)}/{bar}")
        fit_line = p.js("(e => parseFloat(e.style.left))(document.querySelector('.membar .fitline'))")
        # vLLM budgets 90% of what CUDA shows of an H100 80GB: 79.19 GiB of the 80 GiB bar.
        expected = 90.0 * 85_029_615_042 / 85_899_345_920
        check(abs(fit_line - expected) < 0.01, f"the fit line at 90% of the CUDA-visible total: {fit_line}")
        # ... and the words say so: 71.27 GiB is 90% of what CUDA sees, not of the 80 GiB.
        legend = p.text("#usable-legend")
        check(legend == "┆ usable: 90% of the 79.19 GiB CUDA sees of 80.00 GiB", f"the usable share names what it is of: {legend!r}")
        check("71.27 GiB usable (90% of the 79.19 GiB CUDA sees of 80.00 GiB)" in p.text(".membar .usable"), f"bar caption: {p.text('.membar .usable')!r}")
        check(p.attr(".membar .bar", "role") == "img" and "fits" in (p.attr(".membar .bar", "aria-label") or ""), "the bar is described for screen readers")
        check(p.attr("#fits", "data-fits") == "true", "fits")
        check("40,960" in p.text("#max-context"), f"largest context that fits: {p.text('#max-context')!r}")
        check(int(p.text("#staging-requests").replace(",", "")) > 0, "staging requests shown")
        # Will it run there: one row per engine, one column per device, the reasons on hover.
        cell = "document.querySelector('table.runtimes tr[data-engine=%s] td[data-device=\"h100-80gb\"]')"
        check(p.js((cell % "vllm") + ".dataset.supported") == "yes", "vLLM runs Qwen3 MoE on an H100")
        check(p.js((cell % "llama_cpp") + ".dataset.supported") == "no", "llama.cpp does not load safetensors")
        check("runtime.format_unsupported" in (p.js((cell % "llama_cpp") + ".querySelector('.badge').title") or ""), "the reason is on hover")
        check(p.text("#decode-bound").startswith("≤ ") and "tokens/s" in p.text("#decode-bound"), f"decode bound: {p.text('#decode-bound')!r}")
        check(p.text("#prefill-bound").startswith("≤ ") and "tokens/s" in p.text("#prefill-bound"), f"prefill bound: {p.text('#prefill-bound')!r}")
        check("Upper bounds, not predictions" in p.text("#memory"), "bounds are labelled as bounds")
        # Keyboard users land on the verdict; the live region says it in one line.
        check(p.js("document.activeElement && document.activeElement.id") == "verdict-heading", "focus moves to the verdict")
        check(p.text("#status").startswith("Admissible: Qwen/Qwen3-30B-A3B; fits"), f"status announces the verdict: {p.text('#status')!r}")
        # The shareable URL encodes what was asked.
        query = urllib.parse.parse_qs(urllib.parse.urlparse(p.js("location.href")).query)
        check(query == {"source": ["hf://Qwen/Qwen3-30B-A3B"], "devices": ["h100-80gb:1"], "context": ["32768"]}, f"shareable URL: {query}")
        check(p.js("document.getElementById('share').hidden") is False, "a link to this plan is offered")
        self.shared_url = p.js("location.href")

    def case_the_shareable_url_replays_the_plan_from_the_cache(self):
        p = self.page
        check(self.shared_url, "needs the first case's URL")
        p.open(self.shared_url)
        check(p.js("document.getElementById('source-1').value") == "hf://Qwen/Qwen3-30B-A3B", "the URL fills the form")
        check(p.js("document.getElementById('devices').value") == "h100-80gb:1", "devices from the URL")
        check(self.done() == "done", "verdict on the repeat")
        check(p.attr("#cached-marker", "data-cached") == "true" and p.text("#cached-marker") == "Cached verdict", "the repeat is marked cached")
        check("(cached verdict)" in p.text("#status"), "the live region says cached")
        check(p.attr("#admissible", "data-admissible") == "true", "same verdict")
        check(p.attr(".membar", "data-fits") == "true", "the memory bar again")
        check("came from the cache and read nothing" in p.text("#result"), "staging cost labelled as from the first plan")
        check(p.js("document.activeElement && document.activeElement.id") != "verdict-heading", "an auto-run does not steal focus")

    def case_the_engine_table_shows_a_fallback_and_its_reason(self):
        p = self.page
        p.open(self.public + "/?" + urllib.parse.urlencode({"source": "hf://openai/gpt-oss-20b", "devices": "l4"}))
        check(self.done() == "done", f"expected a verdict, got: {p.text('#result')[:400]!r}")
        cell = "document.querySelector('table.runtimes tr[data-engine=vllm] td[data-device=\"l4\"]')"
        check(p.js(cell + ".dataset.supported") == "fallback", "gpt-oss MXFP4 on an L4 runs through a fallback kernel")
        check("runtime.fallback_kernel" in p.js(cell + ".dataset.codes"), "with its reason code")
        check("Marlin" in (p.js(cell + ".querySelector('.badge').title") or ""), "and the kernel named on hover")

    def case_a_gated_repo_shows_the_gated_error(self):
        p = self.page
        p.open(self.public + "/?source=" + urllib.parse.quote("hf://meta-llama/Llama-3.1-8B", safe=""))
        check(self.done() == "error", f"expected an error, got {p.text('#result')[:300]!r}")
        check(p.attr("#error", "data-code") == "gated" and p.attr("#error", "data-status") == "401", "401 gated")
        check(p.attr("#error", "role") == "alert", "errors are announced (role=alert)")
        check(p.text("#error h2") == "This repo is gated", f"heading: {p.text('#error h2')!r}")
        check("gated repo" in p.text("#error-message"), f"the service's message: {p.text('#error-message')!r}")
        check(p.js("!document.getElementById('progress')"), "no spinner left behind")
        check(p.js("document.getElementById('plan-button').disabled") is False, "the form is usable again")

    def case_a_token_opens_the_gated_repo_and_stays_out_of_the_url(self):
        p = self.page
        p.js("[...document.querySelectorAll('#error button')].find(b => b.textContent === 'Add a token').click()")
        check(p.js("document.getElementById('more').open && document.activeElement.id === 'token'"), "Add a token opens the field")
        p.type_into("#token", TOKEN)
        p.press_enter()
        check(self.done() == "done", f"expected a verdict with the token, got {p.text('#result')[:300]!r}")
        check(p.attr("#admissible", "data-admissible") == "true", "Llama-3.1-8B admissible with a token")
        check(TOKEN not in p.js("location.href") and TOKEN not in p.js("document.body.innerHTML").replace(p.js("document.getElementById('token').value"), ""),
              "the token is never in the URL or the page")
        p.js("document.getElementById('token').value = ''")

    def case_a_missing_repo_shows_not_found(self):
        p = self.page
        p.open(self.public + "/?source=hf%3A%2F%2Fno-such-org%2Fno-such-model")
        check(self.done() == "error", "expected an error")
        check(p.attr("#error", "data-code") == "repo_not_found" and p.attr("#error", "data-status") == "404", "404 repo_not_found")
        check("no-such-org/no-such-model" in p.text("#error-message"), "the message names the repo")

    def case_progress_then_over_capacity_with_retry_after(self):
        """One planning permit, held by a slow cold plan: the page shows progress while it
        waits, then the service's 429 with its Retry-After, and a Retry button."""
        p = self.page
        status, _ = http("POST", self.hub + "/_testhub/faults", {"kind": "latency", "ms": 1500, "path_contains": "Qwen3-8B"})
        check(status < 300, f"arming latency: {status}")
        holder = threading.Thread(target=lambda: http("POST", self.public + "/v1/plan", {"sources": ["hf://Qwen/Qwen3-8B"]}, timeout=PLAN_TIMEOUT_S), daemon=True)
        try:
            holder.start()
            deadline = time.monotonic() + 20
            while metric(self.public, "preflight_plans_in_flight") < 1:
                check(time.monotonic() < deadline, "the slow plan never took its permit")
                time.sleep(0.05)
            # A cold, slow plan of its own first: progress is on screen while it runs.
            p.open(self.public + "/?source=hf%3A%2F%2FQwen%2FQwen3-8B-GGUF")
            p.wait("document.body.dataset.state === 'planning' && !!document.getElementById('progress')", "the progress panel", timeout=5)
            check(p.text("#status").startswith("Planning hf://Qwen/Qwen3-8B-GGUF"), f"progress announced: {p.text('#status')!r}")
            check(p.js("document.getElementById('result').getAttribute('aria-busy')") == "true", "result marked busy")
            check(p.js("!document.getElementById('cancel').hidden"), "a Cancel button while planning")
            check(self.done() == "error", f"expected 429, got {p.text('#result')[:300]!r}")
            check(p.attr("#error", "data-code") == "over_capacity" and p.attr("#error", "data-status") == "429", "429 over_capacity")
            check(int(p.text("#retry-after") or "0") >= 0 and "Retry-After" in p.text("#error"), "Retry-After shown")
            check(p.js("!!document.getElementById('retry')"), "a Retry button")
            check(p.js("document.getElementById('result').getAttribute('aria-busy')") is None, "not busy any more")
        finally:
            http("DELETE", self.hub + "/_testhub/faults")
            holder.join(PLAN_TIMEOUT_S)

    def case_the_verdict_fits_a_phone(self):
        """Small enough to load fast, and laid out without sideways scrolling at 390 px."""
        p = self.page
        status, body = http("GET", self.public + "/")
        check(status == 200 and len(body) < 64 * 1024, f"the page is {len(body)} bytes")
        p.call("Emulation.setDeviceMetricsOverride", {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
        try:
            p.open(self.shared_url or self.public + "/?source=hf%3A%2F%2FQwen%2FQwen3-30B-A3B&devices=h100-80gb%3A1")
            check(self.done() == "done", "verdict on a phone")
            overflow = p.js("document.documentElement.scrollWidth - document.documentElement.clientWidth")
            check(overflow <= 0, f"the page scrolls sideways by {overflow}px at 390px")
            check(p.js("document.querySelector('.membar .bar').getBoundingClientRect().right") <= 390, "the memory bar fits the screen")
        finally:
            p.call("Emulation.clearDeviceMetricsOverride")

    def case_an_inadmissible_local_checkpoint_lists_blocking_findings_first(self):
        p = self.page
        p.open(self.local + "/?source=" + urllib.parse.quote(str(self.checkpoint), safe="") + "&devices=4GB%3A1")
        p.wait("(document.getElementById('profile') || {}).textContent === 'local'", "capabilities (profile local)", timeout=10)
        check("/path/to/checkpoint" in (p.attr("#source-1", "placeholder") or ""), "the local profile invites a path")
        check(self.done() == "done", f"expected a verdict, got {p.text('#result')[:300]!r}")
        check(p.attr("#admissible", "data-admissible") == "false" and "Not admissible" in p.text("#admissible"), "not admissible")
        check("3 blocking findings" in p.text("#why"), f"why: {p.text('#why')!r}")
        severities = p.js("[...document.querySelectorAll('.finding')].map(f => f.dataset.severity)")
        check(severities and severities == sorted(severities, key=["blocking", "warning", "info"].index), f"blocking first: {severities}")
        codes = p.js("[...document.querySelectorAll('.finding')].map(f => f.dataset.code)")
        check("config.unknown_key" in codes and "config.shape_mismatch" in codes, f"codes: {codes}")
        findings = p.text("#findings")
        check("config.attention_chunk_size" in findings, "the unmodelled key is the subject")
        check(re.search(r"declared\s*64", findings) and re.search(r"observed\s*32", findings), "declared/observed shown")
        check(p.attr("#cached-marker", "data-cached") == "false" and "not cacheable" in p.text("#verdict"), "a local source is never cached")
        check(p.attr(".membar", "data-fits") == "true", "memory bar on a 4 GiB device (vLLM's runtime needs more than the model)")

    def case_a_bad_option_is_reported_on_its_field(self):
        p = self.page
        p.open(self.public + "/?source=" + urllib.parse.quote("hf://Qwen/Qwen3-0.6B", safe="") + "&gpu_utilization=1.5")
        check(self.done() == "error", f"expected an error, got {p.text('#result')[:300]!r}")
        check(p.attr("#error", "data-code") == "invalid_options", f"code: {p.attr('#error', 'data-code')!r}")
        check(p.attr("#gpu_utilization", "aria-invalid") == "true", "the field is marked invalid")
        note = p.text("#gpu_utilization-error")
        check(note and "gpu_utilization" not in note and "(0, 1]" in note, f"the note beside the field: {note!r}")
        check("gpu_utilization-error" in (p.attr("#gpu_utilization", "aria-describedby") or ""), "the note describes the field")
        p.open(self.public + "/?source=" + urllib.parse.quote("hf://Qwen/Qwen3-0.6B", safe=""))
        check(self.done() == "done", "a good request clears it")
        check(p.js("!document.querySelector('.field-error') && !document.querySelector('[aria-invalid=true]')"), "no stale field error")

    # ---- workload, targets and prices: the performance estimate and the ranked deployments

    RANKED = {"source": "hf://Qwen/Qwen3-30B-A3B", "devices": "h100-80gb,h200,l4"}
    RANKED_OPTIONS = {"workload": "isl=4000,osl=1000,concurrency=64", "slo": "ttft=2s,tpot=20ms", "gpu_price": "h100-80gb=2.5,h200=3.5"}

    def open_perf(self):
        """Open "Workload and latency targets" as a person would, by its summary."""
        p = self.page
        if not p.js("document.getElementById('perf').open"):
            p.js("document.querySelector('#perf > summary').click()")
        check(p.js("document.getElementById('perf').open"), "the workload section opens")

    def rows(self):
        return self.page.js("""[...document.querySelectorAll('#recommendations tbody tr')].map(r => ({
            devices: r.dataset.devices, meets: r.dataset.meets, fits: r.dataset.fits, replicas: Number(r.dataset.replicas),
            cells: [...r.children].map(c => c.innerText.trim()),
            name: r.querySelector('th .name').innerText, layout: r.querySelector('th small').innerText,
            badge: r.querySelector('td .badge').innerText, reason: r.querySelector('td.why').innerText.trim()}))""")

    def case_workload_targets_and_device_types_rank_every_deployment(self):
        p = self.page
        p.open(self.public + "/")
        p.wait("(document.getElementById('profile') || {}).textContent === 'public'", "capabilities", timeout=10)
        check(p.js("document.getElementById('perf').open") is False, "the workload section starts closed")
        p.type_into("#source-1", self.RANKED["source"])
        p.type_into("#devices", self.RANKED["devices"])
        self.open_perf()
        for field, label in [("isl", "Input tokens"), ("osl", "Output tokens"), ("concurrency", "Concurrency"), ("rate", "Rate"),
                             ("ttft", "Time to first token"), ("tpot", "Time per output token"), ("e2e", "End to end"), ("gpu_price", "GPU prices")]:
            check(label in (p.js(f"(document.querySelector('label[for={field}]') || {{}}).textContent") or ""), f"label of #{field}")
        for field, value in [("isl", "4000"), ("osl", "1000"), ("concurrency", "64"), ("ttft", "2s"), ("tpot", "20ms"), ("gpu_price", "h100-80gb=2.5,h200=3.5")]:
            p.type_into("#" + field, value)
        p.press_enter()
        check(self.done() == "done", f"expected a verdict, got: {p.text('#result')[:400]!r}")
        query = urllib.parse.parse_qs(urllib.parse.urlparse(p.js("location.href")).query)
        for option, value in self.RANKED_OPTIONS.items():
            check(query.get(option) == [value], f"the link carries {option}={value}: {query}")
        # The table is the planner's list, in the planner's order.
        status, body = http("POST", self.public + "/v1/plan", {"sources": [self.RANKED["source"]], "options": {"devices": self.RANKED["devices"], **self.RANKED_OPTIONS}},
                            timeout=PLAN_TIMEOUT_S)
        check(status == 200, f"the API answered {status}")
        expected = json.loads(body)["recommendations"]
        rows = self.rows()
        check([(r["devices"], r["meets"]) for r in rows] == [(e["devices"], str(e["meets"]).lower()) for e in expected],
              f"rows as the planner ranks them: {[(r['devices'], r['meets']) for r in rows]}")
        meets = [r["meets"] == "true" for r in rows]
        check(any(meets) and not all(meets) and meets == sorted(meets, reverse=True), f"meeting deployments first: {meets}")
        heads = p.js("[...document.querySelectorAll('#recommendations thead th')].map(t => t.innerText.trim())")
        check(heads == ["Deployment", "Targets", "Output", "Per GPU", "TTFT", "TPOT", "$ / M tokens", "Why not"], f"columns: {heads}")
        first, best = rows[0], expected[0]
        check(first["name"] == "2 × h200" and first["layout"] == "TP 2" and first["badge"] == "✓ meets", f"first row: {first['cells']}")
        check(first["cells"][2] == f"{round(best['output_tokens_per_s']):,} tok/s", f"tok/s as the planner's: {first['cells'][2]} vs {best['output_tokens_per_s']}")
        check(first["cells"][6] == f"${best['cost_per_million_output_tokens']:.2f}" and first["reason"] == "", f"priced, not rejected: {first['cells']}")
        check(any(r["layout"] == "TP 4 · EP" for r in rows), "expert parallelism shown")
        slow = next(r for r in rows if r["devices"] == "h200:1")
        check(slow["badge"] == "✕ rejected" and slow["reason"].startswith("misses tpot=20ms"), f"a rejected row says why: {slow['cells']}")
        small = next(r for r in rows if r["devices"] == "l4:1")
        check(small["fits"] == "false" and small["reason"].startswith("does not fit") and small["cells"][2] == "—", f"too small: {small['cells']}")
        check(small["cells"][6] == "no price", f"an unpriced type says so: {small['cells'][6]!r}")
        met = sum(meets)
        check(f"{met} of {len(rows)} deployments tried meet the targets" in p.text("#recommendations-summary"), "the summary counts them")
        check(f"{met} of {len(rows)} deployments meet the targets" in p.text("#status"), f"the live region says so: {p.text('#status')!r}")
        # The rest of the verdict is the first deployment's.
        check(p.attr("#perf-meets", "data-meets") == "true" and "the first deployment ranked above" in p.text("#performance"), "the estimate below is the first's")
        check(p.attr(".membar", "data-device") == "h200" and p.js("document.querySelectorAll('.membar').length") == 1, "its memory: 2 × h200 drawn once")
        self.ranked_url = p.js("location.href")
        self.ranked_rows = rows

    def case_a_counted_deployment_shows_its_performance_estimate(self):
        p = self.page
        p.open(self.public + "/")
        p.type_into("#source-1", "hf://Qwen/Qwen3-30B-A3B")
        p.type_into("#devices", "h200:8")
        self.open_perf()
        for field, value in [("isl", "1024"), ("osl", "1024"), ("concurrency", "64")]:
            p.type_into("#" + field, value)
        p.press_enter()
        check(self.done() == "done", f"expected a verdict, got: {p.text('#result')[:400]!r}")
        status, body = http("POST", self.public + "/v1/plan", {"sources": ["hf://Qwen/Qwen3-30B-A3B"],
                            "options": {"devices": "h200:8", "workload": "isl=1024,osl=1024,concurrency=64"}}, timeout=PLAN_TIMEOUT_S)
        check(status == 200, f"the API answered {status}")
        perf = json.loads(body)["performance"]
        check(p.js("!document.getElementById('recommendations')"), "counted devices: no ranking")
        check(p.text("#perf-estimate") == "estimate" and p.attr("#perf-estimate", "data-estimate") == "true", "labelled an estimate")
        check(p.text("#perf-workload") == "isl=1024,osl=1024,concurrency=64", f"the workload estimated: {p.text('#perf-workload')!r}")

        def shows_range(text: str, rng: dict) -> bool:
            """`(0.84–1.55×)`: the planner's multiples to two places (either rounding of a tie)."""
            m = re.search(r"\((\d\.\d\d)–(\d\.\d\d)×\)$", text)
            return bool(m) and all(abs(float(m.group(i + 1)) - rng[k]) <= 0.0051 for i, k in enumerate(["low", "high"]))

        text = p.text("#perf-throughput")
        check(text.startswith(f"≈ {round(perf['output_tokens_per_s']):,} tok/s (") and shows_range(text, perf["range"]), f"throughput with its range: {text!r}")
        check(p.text("#perf-per-gpu").startswith(f"≈ {round(perf['output_tokens_per_s_per_gpu']):,} tok/s ("), f"per GPU: {p.text('#perf-per-gpu')!r}")
        for key, selector in [("ttft", "#perf-ttft"), ("tpot", "#perf-tpot")]:
            text = p.text(selector)
            check(re.fullmatch(r"≈ [\d.]+ m?s \(.*\)", text) and shows_range(text, perf[key + "_range"]), f"{key} with its range: {text!r}")
        check(re.fullmatch(r"≈ [\d.]+ m?s", p.text("#perf-e2e")), f"end to end: {p.text('#perf-e2e')!r}")
        check(p.attr("#perf-limit", "data-limit") == perf["limited_by"] and p.text("#perf-limit"), f"what limits it: {p.text('#perf-limit')!r}")
        check("on 8 × h200 (TP 8)" in p.text("#performance"), "on which deployment")
        check(p.attr("#perf-calibration", "data-matches") == "true" and "vllm × h200 × bf16" in p.text("#perf-calibration"), "calibrated on this engine × device × type")
        check(p.js("!document.getElementById('perf-meets')"), "no targets, no verdict on them")
        check("an estimated " in p.text("#status"), f"the live region says so: {p.text('#status')!r}")

    def case_the_estimate_s_findings_render_as_findings(self):
        p = self.page
        # No calibration on an L4: an estimate, with the set it borrows named.
        p.open(self.public + "/?" + urllib.parse.urlencode({"source": "hf://Qwen/Qwen3-0.6B", "devices": "l4:1", "workload": "isl=1024,osl=1024,concurrency=4"}))
        check(self.done() == "done", f"expected a verdict, got: {p.text('#result')[:400]!r}")
        check(p.js("document.getElementById('perf').open"), "a link with a workload opens its section")
        codes = p.js("[...document.querySelectorAll('.finding')].map(f => f.dataset.code)")
        check("performance.uncalibrated" in codes, f"performance.uncalibrated among the findings: {codes}")
        check(p.attr("#perf-calibration", "data-matches") == "false" and "performance.uncalibrated" in p.text("#performance"), "the estimate points at it")
        # A device by size alone: no bandwidth known, so no estimate, and a finding says why.
        p.open(self.public + "/?" + urllib.parse.urlencode({"source": "hf://Qwen/Qwen3-0.6B", "devices": "80GiB:1", "workload": "isl=1024,osl=1024,concurrency=4"}))
        check(self.done() == "done", f"expected a verdict, got: {p.text('#result')[:400]!r}")
        check(p.js("!document.getElementById('performance')"), "no estimate")
        finding = "document.querySelector('.finding[data-code=\"performance.unavailable\"]')"
        check(p.js(finding + " && " + finding + ".dataset.severity") == "warning", "performance.unavailable as a warning")
        check("not in the device catalogue" in p.js(finding + ".innerText"), "with its reason")

    def case_a_shared_link_restores_the_workload_and_targets(self):
        p = self.page
        check(getattr(self, "ranked_url", None), "needs the ranking case's URL")
        p.open(self.ranked_url)
        check(self.done() == "done", f"expected a verdict, got: {p.text('#result')[:400]!r}")
        values = p.js("Object.fromEntries(['isl','osl','concurrency','rate','ttft','tpot','e2e','gpu_price','devices'].map(k => [k, document.getElementById(k).value]))")
        check(values == {"isl": "4000", "osl": "1000", "concurrency": "64", "rate": "", "ttft": "2s", "tpot": "20ms", "e2e": "",
                         "gpu_price": "h100-80gb=2.5,h200=3.5", "devices": "h100-80gb,h200,l4"}, f"the form restored: {values}")
        check(p.js("document.getElementById('perf').open"), "and its section open")
        check(p.attr("#cached-marker", "data-cached") == "true", "the same plan, from the cache")
        check(self.rows() == self.ranked_rows, "the same table")
        check(p.attr("#share", "href") == "?" + urllib.parse.urlparse(self.ranked_url).query, "the link to this plan is the same")
        p.call("Emulation.setDeviceMetricsOverride", {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
        try:
            overflow = p.js("document.documentElement.scrollWidth - document.documentElement.clientWidth")
            check(overflow <= 0, f"the table scrolls in its box, not the page: {overflow}px at 390px")
        finally:
            p.call("Emulation.clearDeviceMetricsOverride")
        # An open loop, spread over copies, and a target the form has no field for: said, not silently sent.
        p.open(self.public + "/?" + urllib.parse.urlencode({"source": "hf://Qwen/Qwen3-0.6B", "devices": "h100-80gb",
                                                            "workload": "isl=512,osl=256,rate=200", "slo": "ttft=1s,ttft_p99=3s"}))
        check(self.done() == "done", f"expected a verdict, got: {p.text('#result')[:400]!r}")
        check(p.js("[document.getElementById('rate').value, document.getElementById('concurrency').value, document.getElementById('ttft').value]") == ["200", "", "1s"],
              "rate and ttft restored")
        check(p.js("!document.getElementById('perf-dropped').hidden") and "ttft_p99=3s" in p.text("#perf-dropped"), f"the dropped target named: {p.text('#perf-dropped')!r}")
        first = self.rows()[0]
        check(first["replicas"] == 2 and first["layout"] == "TP 1 · × 2 copies = 2 GPUs", f"copies of a deployment: {first}")
        check(p.text("#perf-workload") == "isl=512,osl=256,rate=100" and "(one copy of it)" in p.text("#performance"),
              f"the estimate below is one copy's, at its share of the rate: {p.text('#perf-workload')!r}")
        targets = p.js("[...document.querySelectorAll('#perf-targets li')].map(l => l.dataset.target)")
        check(targets == ["ttft=1000ms"], f"only the target the form holds was asked for: {targets}")

    def case_a_bad_workload_is_reported_on_its_field(self):
        p = self.page
        p.open(self.public + "/?" + urllib.parse.urlencode({"source": "hf://Qwen/Qwen3-0.6B", "devices": "h100-80gb:1"}))
        check(self.done() == "done", "a verdict first")
        self.open_perf()
        for field, value in [("isl", "abc"), ("osl", "1024"), ("concurrency", "4")]:
            p.type_into("#" + field, value)
        p.press_enter()
        check(self.done() == "error", f"expected an error, got {p.text('#result')[:300]!r}")
        check(p.attr("#error", "data-status") == "400" and p.attr("#error", "data-code") == "invalid_options", "HTTP 400 invalid_options")
        check(p.text("#error-message").startswith("workload: isl: `abc`"), f"the message names the field: {p.text('#error-message')!r}")
        check(p.attr("#isl", "aria-invalid") == "true" and p.js("!document.getElementById('osl').hasAttribute('aria-invalid')"), "the part at fault is marked")
        note = p.text("#workload-error")
        check(note.startswith("`abc` is not a token count"), f"the note beside it: {note!r}")
        check("workload-error" in (p.attr("#isl", "aria-describedby") or ""), "the note describes the field")
        # A target without its unit, on the targets' own field.
        p.type_into("#isl", "1024")
        p.type_into("#ttft", "2")
        p.press_enter()
        check(self.done() == "error", f"expected an error, got {p.text('#result')[:300]!r}")
        check(p.text("#error-message").startswith("slo: ttft:") and p.attr("#ttft", "aria-invalid") == "true", f"slo named: {p.text('#error-message')!r}")
        check(p.js("!document.getElementById('isl').hasAttribute('aria-invalid')"), "the fixed field is no longer marked")
        # A workload missing a part: the whole workload is at fault.
        p.type_into("#ttft", "2s")
        p.js("document.getElementById('osl').value = ''")
        p.press_enter()
        check(self.done() == "error", f"expected an error, got {p.text('#result')[:300]!r}")
        check(p.attr("#workload-error", "data-field") == "workload" and "both isl and osl" in p.text("#workload-error"), f"group note: {p.text('#workload-error')!r}")
        check(p.js("[...document.querySelectorAll('#workload input')].every(i => i.getAttribute('aria-invalid') === 'true')"), "every workload field marked")
        p.type_into("#osl", "1024")
        p.press_enter()
        check(self.done() == "done", f"fixed, a verdict: {p.text('#result')[:300]!r}")
        check(p.js("!document.querySelector('.field-error') && !document.querySelector('[aria-invalid=true]')"), "no stale field error")
        check(p.js("!!document.getElementById('performance')") and p.attr("#perf-meets", "data-meets") == "true", "the estimate, meeting ttft=2s")


def run_cases(suite: Suite, page: Page, public: str) -> tuple[int, int]:
    passed = failed = 0
    cases = [name for name in Suite.__dict__ if name.startswith("case_")]
    for name in cases:
        started = time.monotonic()
        before = len(page.problems)
        try:
            getattr(suite, name)()
            check(len(page.problems) == before, f"page problems: {page.problems[before:]}")
            passed += 1
            print(f"ok    {name[5:]} ({time.monotonic() - started:.1f}s)", flush=True)
        except Exception as e:  # noqa: BLE001 — every failure is reported, then the next case runs
            failed += 1
            print(f"FAIL  {name[5:]}: {e}", flush=True)
            if not isinstance(e, Failure):
                traceback.print_exc()
    # No third-party requests: every request the page made went to one of our servers.
    origins = {urllib.parse.urlparse(u).netloc for u in page.requests if u.startswith("http")}
    allowed = {urllib.parse.urlparse(public).netloc, urllib.parse.urlparse(suite.local).netloc}
    if origins <= allowed and all(u.startswith(("http://127.0.0.1", "about:", "data:")) for u in page.requests):
        passed += 1
        print(f"ok    the page made requests to this server only ({len(page.requests)} requests)", flush=True)
    else:
        failed += 1
        print(f"FAIL  requests outside the server: {sorted(set(page.requests))}", flush=True)
    return passed, failed


def screenshots(chromium: Chromium, page: Page, public: str, local: str, checkpoint: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    shots = [
        ("explorer-admissible.png", public + "/?source=hf%3A%2F%2FQwen%2FQwen3-30B-A3B&devices=h100-80gb%3A1&context=32768"),
        ("explorer-inadmissible.png", local + "/?source=" + urllib.parse.quote(str(checkpoint), safe="") + "&devices=4GB%3A1"),
        ("explorer-error.png", public + "/?source=hf%3A%2F%2Fmeta-llama%2FLlama-3.1-8B"),
    ]
    width = 1000
    for name, url in shots:
        page.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False})
        page.open(url)
        page.wait("['done', 'error'].includes(document.body.dataset.state)", f"{name} to render")
        height = int(page.js("Math.ceil(document.documentElement.scrollHeight)")) + 8
        chromium.screenshot(url, out / name, width, height)
        print(f"wrote {out / name} ({width}×{height})", flush=True)
    # The ranking: only its table and the estimate under it, clipped over DevTools (the whole
    # page would repeat the form and the verdict the shots above show).
    name = "explorer-recommendations.png"
    page.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False})
    page.open(public + "/?" + urllib.parse.urlencode({"source": "hf://Qwen/Qwen3-30B-A3B", "devices": "h200,l4",
                                                      "workload": "isl=4000,osl=1000,concurrency=64", "slo": "ttft=2s,tpot=20ms", "gpu_price": "h200=3.5"}))
    page.wait("!!document.getElementById('performance')", f"{name} to render")
    clip = page.js("""(([a, b]) => ({x: a.left + scrollX, y: a.top + scrollY, width: a.width, height: b.bottom - a.top}))(
        ['recommendations', 'performance'].map(id => document.getElementById(id).getBoundingClientRect()))""")
    shot = page.call("Page.captureScreenshot", {"format": "png", "clip": {**clip, "scale": 1}, "captureBeyondViewport": True})
    (out / name).write_bytes(base64.b64decode(shot["data"]))
    page.call("Emulation.clearDeviceMetricsOverride")
    print(f"wrote {out / name} ({clip['width']:.0f}×{clip['height']:.0f})", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preflight", default=str(ROOT / "target" / "debug" / "preflight"))
    parser.add_argument("--testhub", default=str(ROOT / "target" / "debug" / "preflight-testhub"))
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--screenshots", metavar="DIR", help="also write the three states' screenshots and the ranking's to DIR")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs) after the run")
    args = parser.parse_args()
    # Absolute, since the local server runs in the work directory.
    args.preflight, args.testhub = str(Path(args.preflight).resolve()), str(Path(args.testhub).resolve())

    def overall_timeout(*_):
        raise Failure(f"the whole run took over {OVERALL_TIMEOUT_S}s")

    signal.signal(signal.SIGALRM, overall_timeout)
    signal.alarm(OVERALL_TIMEOUT_S)
    work = Path(tempfile.mkdtemp(prefix="preflight-browser-"))
    processes: list = []
    passed = failed = 0
    try:
        hub = Process("testhub", [args.testhub, "--listen", "127.0.0.1:0", "--token", TOKEN], work)
        processes.append(hub)
        hub_url = hub.first_line(START_TIMEOUT_S).rstrip("/")
        check(hub_url.startswith("http://127.0.0.1:"), f"testhub URL: {hub_url!r}")
        public_proc, public = serve(args.preflight, hub_url, work, "serve-public", ["--max-plans-in-flight", "1"])
        processes.append(public_proc)
        checkpoint = inadmissible_checkpoint(work)
        local_proc, local = serve(args.preflight, hub_url, work, "serve-local",
                                  ["--profile", "local", "--local-root", str(work / "checkpoints")], cwd=work)
        processes.append(local_proc)
        chromium = Chromium(args.chromium, work)
        processes.append(chromium)
        page = chromium.new_page()
        suite = Suite(page, public, local, hub_url, checkpoint)
        passed, failed = run_cases(suite, page, public)
        if args.screenshots:
            screenshots(chromium, page, public, local, checkpoint, Path(args.screenshots))
        page.close()
    except Exception as e:  # noqa: BLE001
        failed += 1
        print(f"FAIL  setup: {e}", flush=True)
        if not isinstance(e, Failure):
            traceback.print_exc()
        print(f"logs in {work}", flush=True)
        args.keep = True
    finally:
        signal.alarm(0)
        for process in reversed(processes):
            process.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"browser: {passed} passed, {failed} failed", flush=True)
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())

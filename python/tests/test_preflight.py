"""The installed `preflight` package (`pip install .`): the module's `plan()` and the console
script, against the fixture Hub on loopback and the bundled local fixtures.

Run from the repository, in the venv the package was installed into:

    pytest python/tests

The fixture Hub is the `preflight-testhub` binary: $PREFLIGHT_TESTHUB_BIN, else
target/debug/preflight-testhub (`cargo build -p preflight-testhub`). The tests import the
installed module, never python/preflight (which has no compiled extension beside it).
"""

import json
import os
import secrets
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

import preflight

REPO = Path(__file__).resolve().parents[2]
LOCAL_MOE = REPO / "fixtures" / "local" / "tiny-qwen3-moe-sharded"
EXPECTED = json.loads((REPO / "fixtures" / "expected.json").read_text())
# The console script pip installed beside this interpreter.
CONSOLE = Path(sys.executable).parent / "preflight"
STARTUP_TIMEOUT_S = 30
# Exit statuses, as `preflight plan --help` documents them.
ADMISSIBLE, BAD_INPUT, UNREADABLE, DOES_NOT_FIT = 0, 2, 3, 4


def fixture_hub_binary():
    if os.environ.get("PREFLIGHT_TESTHUB_BIN"):
        return Path(os.environ["PREFLIGHT_TESTHUB_BIN"])
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    return target / "debug" / "preflight-testhub"


@pytest.fixture(scope="session")
def hub():
    """The fixture Hub on free loopback ports: (its URL, the token it grants gated repos to)."""
    binary = fixture_hub_binary()
    assert binary.is_file(), f"{binary} missing: cargo build -p preflight-testhub, or set PREFLIGHT_TESTHUB_BIN"
    token = "hf_" + secrets.token_hex(8)
    proc = subprocess.Popen(
        [binary, "--root", REPO / "fixtures" / "hub", "--listen", "127.0.0.1:0",
         "--cdn-listen", "127.0.0.1:0", "--token", token],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    line = {}
    reader = threading.Thread(target=lambda: line.setdefault("url", proc.stdout.readline().strip()))
    reader.start()
    reader.join(STARTUP_TIMEOUT_S)
    url = line.get("url", "")
    if not url.startswith("http://127.0.0.1:"):
        proc.kill()
        pytest.fail(f"the fixture Hub did not report an endpoint: {url!r}")
    yield url, token
    proc.kill()
    proc.wait()


@pytest.fixture()
def env(hub, tmp_path, monkeypatch):
    """Hub access as huggingface_hub reads it, pointed at the fixture Hub with no token, and a
    facts cache of this test's own. Returns the environment (for the console script)."""
    url, _ = hub
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("PREFLIGHT_CACHE", str(tmp_path / "cache"))
    return dict(os.environ)


def admin(url, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method=method,
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status


def console(args, env):
    """The installed `preflight` command: (exit status, stdout)."""
    done = subprocess.run([CONSOLE, *args], env=env, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout


def test_plans_a_hub_repo_with_the_flags_as_keywords(env):
    v = preflight.plan("hf://Qwen/Qwen3-8B", devices="h100-80gb:1", context="32k")
    assert isinstance(v, dict)
    [artifact] = v["artifacts"]
    assert artifact["architecture"]["model_type"] == "qwen3"
    assert artifact["parameters"]["total"] == EXPECTED["Qwen/Qwen3-8B"]["transformers_num_parameters"]
    assert artifact["source"]["spec"] == "hf://Qwen/Qwen3-8B"
    assert v["admissible"] is True
    assert v["memory"]["fits"] is True
    # context="32k" meant what --context 32k means: 32,768 tokens.
    assert artifact["memory"]["context"] == 32768


def test_plans_a_bundled_local_checkpoint(env):
    v = preflight.plan(LOCAL_MOE, devices="l4", context=4096, sequences=8)
    [artifact] = v["artifacts"]
    assert artifact["architecture"]["model_type"] == "qwen3_moe"
    expected = EXPECTED["local/tiny-qwen3-moe-sharded"]["transformers_num_parameters"]
    assert artifact["parameters"]["total"] == expected
    assert v["admissible"] is True and v["memory"]["fits"] is True


def test_the_document_is_the_one_plan_json_prints(env):
    for flags, keywords in [
        ([], {}),
        (["--devices", "l4:1", "--context", "2k", "--kv-dtype", "fp8"],
         {"devices": "l4:1", "context": "2k", "kv_dtype": "fp8"}),
        # A switch is True; an int is its digits; an unset switch is False or None.
        (["--sequences", "2", "--enforce-eager", "--engine", "vllm"],
         {"sequences": 2, "enforce_eager": True, "include_mtp": False, "engine": "vllm", "dtype": None}),
        (["--engine", "llama.cpp", "--flash-attn", "off", "--context", "1024"],
         {"engine": "llama.cpp", "flash_attn": False, "context": 1024}),
    ]:
        status, out = console(["plan", str(LOCAL_MOE), "--json", *flags], env)
        # llama.cpp loads no safetensors checkpoint: exit 4, and still a verdict.
        assert status in (ADMISSIBLE, DOES_NOT_FIT), out
        assert preflight.plan(LOCAL_MOE, **keywords) == json.loads(out), flags


def test_not_fitting_is_an_answer_not_an_exception(env):
    v = preflight.plan("hf://Qwen/Qwen3-8B", devices="8GiB:1", context="4k")
    assert v["admissible"] is True
    assert v["memory"]["fits"] is False


def test_a_missing_repo_raises_with_the_error_documents_code(env):
    with pytest.raises(preflight.PreflightError) as raised:
        preflight.plan("hf://Qwen/No-Such-Model")
    assert raised.value.code == "repo_not_found"
    assert raised.value.exit_code == UNREADABLE
    assert isinstance(raised.value, Exception)


def test_a_gated_repo_needs_the_token_hf_token_carries(env, hub, monkeypatch):
    with pytest.raises(preflight.PreflightError) as raised:
        preflight.plan("hf://meta-llama/Llama-3.1-8B")
    assert raised.value.code == "gated"
    monkeypatch.setenv("HF_TOKEN", hub[1])
    v = preflight.plan("hf://meta-llama/Llama-3.1-8B")
    assert v["artifacts"][0]["architecture"]["model_type"] == "llama"


def test_bad_options_raise_invalid_options_and_unknown_keywords_type_error(env):
    with pytest.raises(preflight.PreflightError) as raised:
        preflight.plan(LOCAL_MOE, context="lots")
    assert (raised.value.code, raised.value.exit_code) == ("invalid_options", BAD_INPUT)
    with pytest.raises(preflight.PreflightError) as raised:
        preflight.plan(LOCAL_MOE, devices="h900")
    assert raised.value.code == "invalid_options"
    with pytest.raises(TypeError):
        preflight.plan(LOCAL_MOE, contxt="4k")
    with pytest.raises(TypeError):
        preflight.plan(LOCAL_MOE, json=True)


def test_the_gil_is_released_while_planning(env, hub):
    """A plan waiting on a slow Hub leaves other Python threads running."""
    url, _ = hub
    admin(url, "POST", "/_testhub/faults", {"kind": "latency", "ms": 600, "times": 1, "origin": "hub"})
    try:
        answer = {}
        worker = threading.Thread(
            target=lambda: answer.setdefault("v", preflight.plan("hf://Qwen/Qwen3-8B", no_cache=True)))
        started = last = time.monotonic()
        worker.start()
        longest_stall = 0.0
        while worker.is_alive():
            now = time.monotonic()
            longest_stall, last = max(longest_stall, now - last), now
        took = time.monotonic() - started
    finally:
        admin(url, "DELETE", "/_testhub/faults")
    assert answer["v"]["admissible"] is True
    assert took >= 0.5
    # Holding the GIL through the call would stall this loop for the whole slow request.
    assert longest_stall < 0.25, (longest_stall, took)


def test_the_console_script_is_the_command_line(env):
    status, out = console(["plan", "hf://Qwen/Qwen3-8B", "--devices", "8GiB:1", "--context", "4k"], env)
    assert status == DOES_NOT_FIT
    assert out.startswith("DOES NOT FIT")
    status, out = console(["plan", "hf://Qwen/No-Such-Model", "--json"], env)
    assert status == UNREADABLE
    assert json.loads(out)["error"]["code"] == "repo_not_found"
    status, out = console(["--version"], env)
    assert (status, out.strip()) == (ADMISSIBLE, f"preflight {preflight.__version__}")
    status, out = console(["plan", "--context", "4k"], env)
    assert status == BAD_INPUT

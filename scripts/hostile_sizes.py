#!/usr/bin/env python3
"""Peak memory and verdict size of `preflight plan --json` on hostile headers at the readers'
limits: a GGUF with 2^20 empty tensor entries and a safetensors header with 2^20 tensors no
family places. Prints a table with each input's header size and the bound the project holds
itself to — peak RSS at most 4 × the header plus 64 MiB, a verdict of at most 1 MiB — and
whether it held. Measured, not asserted: RSS depends on the allocator and the machine.

Usage: scripts/hostile_sizes.py [--preflight target/release/preflight]
"""
import argparse, json, os, struct, subprocess, sys, tempfile

N = 1 << 20


def gguf(path):
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, N, 1))
        key = b"general.architecture"
        f.write(struct.pack("<Q", len(key)) + key + struct.pack("<IQ", 8, 5) + b"llama")
        f.write(struct.pack("<QIIQ", 0, 0, 0, 0) * N)


def safetensors(directory):
    header = {f"t{i}x": {"dtype": "BF16", "shape": [1], "data_offsets": [2 * i, 2 * i + 2]} for i in range(N)}
    raw = json.dumps(header, separators=(",", ":")).encode()
    with open(os.path.join(directory, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + 2 * N)
    config = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
              "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 256, "max_position_embeddings": 4096}
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f)


def measure(preflight, source):
    """Peak RSS (KiB), verdict bytes and exit code of one `preflight plan`, from the child's own
    rusage (wait4): not RUSAGE_CHILDREN, which would also count what the forked child shared
    with this process before it ran preflight."""
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen([preflight, "plan", source, "--json"], stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        return usage.ru_maxrss, out.tell(), child.returncode


def write_inputs(directory):
    """The hostile inputs, written by a process of their own so building them (Python holds the
    million-entry header in memory) never inflates what is measured."""
    gguf(os.path.join(directory, "empty-entries.gguf"))
    st = os.path.join(directory, "st")
    os.mkdir(st)
    safetensors(st)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preflight", default="target/release/preflight")
    parser.add_argument("--write-inputs", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_inputs:
        write_inputs(args.write_inputs)
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, __file__, "--write-inputs", tmp], check=True)
        g = os.path.join(tmp, "empty-entries.gguf")
        rows.append(("GGUF, 2^20 empty tensor entries", os.path.getsize(g), *measure(args.preflight, g)))
        st = os.path.join(tmp, "st")
        with open(os.path.join(st, "model.safetensors"), "rb") as f:
            header = 8 + struct.unpack("<Q", f.read(8))[0]
        rows.append(("safetensors, 2^20 unplaced tensors", header, *measure(args.preflight, st)))
    mib = 1 << 20
    print(f"{'input':<38} {'header':>10} {'peak RSS':>12} {'bound':>12} {'verdict':>12} {'exit':>5}  held")
    for name, header, rss_kib, verdict, code in rows:
        bound = 4 * header + 64 * mib
        held = rss_kib * 1024 <= bound and verdict <= mib
        print(
            f"{name:<38} {header / mib:>6.1f} MiB {rss_kib / 1024:>8.1f} MiB {bound / mib:>8.1f} MiB "
            f"{verdict / 1024:>8.1f} KiB {code:>5}  {'yes' if held else 'NO'}"
        )


if __name__ == "__main__":
    main()

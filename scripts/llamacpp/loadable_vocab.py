#!/usr/bin/env python3
"""Rewrite a header-stub GGUF's sentencepiece ("llama") vocabulary so llama.cpp can load it.

    PYTHONPATH=<llama-cpp-python 0.3.36>/vendor/llama.cpp/gguf-py \
      python3 scripts/llamacpp/loadable_vocab.py IN.gguf OUT.gguf

The fixture writer (`fixtures/tools/mkgguf_release.py`) names every token `tokNNNNNN`;
llama.cpp's sentencepiece loader looks up the byte token `<0x0A>` for its line feed
(`llama_vocab::byte_to_token`, src/llama-vocab.cpp:4001-4014) and, for a model named Phi-3,
the tokens `<unk>`, `<s>`, `</s>` and `<|endoftext|>` (llama-vocab.cpp:3118-3127); it fails
without them. This names tokens 0..2 `<unk>`, `<s>`, `</s>`, tokens 3..258 `<0x00>`..`<0xFF>`
with type BYTE, as a real sentencepiece vocabulary does, and the EOS token `<|endoftext|>`
(Phi-3's), and changes nothing else: every other key, every tensor's name, shape, type and offset, and the vocabulary's size
(so llama.cpp's output buffer and logits see the same `n_vocab`). OUT is a header stub grown to
its full size (a sparse file): the weights are holes, mapped by llama.cpp and never read.
"""

import os
import sys

import gguf

BYTE_TOKENS = range(3, 3 + 256)
TOKEN_TYPE_BYTE = 6
SPECIAL = {0: "<unk>", 1: "<s>", 2: "</s>"}


def token_name(i, old, eos):
    if i in SPECIAL:
        return SPECIAL[i]
    if i in BYTE_TOKENS:
        return f"<0x{i - 3:02X}>"
    return "<|endoftext|>" if i == eos else old


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    source, target = sys.argv[1], sys.argv[2]
    reader = gguf.GGUFReader(source)
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    if reader.fields[gguf.Keys.Tokenizer.MODEL].contents() != "llama":
        sys.exit(f"{source}: not a sentencepiece vocabulary; nothing to do")
    eos = reader.fields[gguf.Keys.Tokenizer.EOS_ID].contents()
    writer = gguf.GGUFWriter(target, arch)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        value = field.contents()
        if field.name == gguf.Keys.Tokenizer.LIST:
            value = [token_name(i, t, eos) for i, t in enumerate(value)]
        elif field.name == gguf.Keys.Tokenizer.TOKEN_TYPE:
            value = [TOKEN_TYPE_BYTE if i in BYTE_TOKENS else t for i, t in enumerate(value)]
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, value, kind, sub_type=sub)
    for tensor in reader.tensors:
        writer.add_tensor_info(tensor.name, tensor.data.shape, tensor.data.dtype, tensor.data.nbytes, tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    header = os.path.getsize(target)
    alignment = reader.alignment
    data_start = (header + alignment - 1) // alignment * alignment
    os.truncate(target, data_start + os.path.getsize(source) - reader.data_offset)


if __name__ == "__main__":
    main()

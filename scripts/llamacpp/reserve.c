// Creates one llama.cpp context the way fixtures/oracles/llamacpp/ was measured (CPU backend,
// mmap, no extra buffer types) and prints the buffers llama.cpp logs: what
// fixtures/llamacpp-gpt-oss-settings.jsonl holds. Build against the tree llama-cpp-python
// 0.3.36 vendors (commit 0c1e570):
//
//   tar -xzf llama_cpp_python-0.3.36.tar.gz && cd llama_cpp_python-0.3.36/vendor/llama.cpp
//   cmake -B build -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF \
//         -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF \
//         -DLLAMA_BUILD_SERVER=OFF && make -C build -j llama
//   g++ -O1 reserve.c -Iinclude -Iggml/include build/src/libllama.a build/ggml/src/libggml.a \
//       build/ggml/src/libggml-cpu.a build/ggml/src/libggml-base.a -fopenmp -lpthread -ldl
//   ./a.out MODEL.gguf N_CTX N_SEQ_MAX KV_UNIFIED FLASH_ATTN SWA_FULL [N_UBATCH]
//
// MODEL.gguf can be a header stub grown to its full size (`truncate -s`): weights are mapped,
// never read. Setting AT_PRINTF in ggml/src/ggml-alloc.c to print gives ggml-alloc's own
// trace of every placement, which is what engines/llama_cpp/memory.rs's graphs were checked against.
#include "llama.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void log_buffers(enum ggml_log_level level, const char * text, void * user) {
    (void) level;
    (void) user;
    if (strstr(text, "compute buffer size =") || strstr(text, "output buffer size") || strstr(text, "KV buffer")) {
        fputs(text, stdout);
    }
}

int main(int argc, char ** argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: %s MODEL.gguf N_CTX N_SEQ_MAX KV_UNIFIED FLASH_ATTN SWA_FULL [N_UBATCH]\n", argv[0]);
        return 2;
    }
    llama_log_set(log_buffers, NULL);
    llama_backend_init();
    struct llama_model_params model_params = llama_model_default_params();
    model_params.n_gpu_layers = 0;
    model_params.use_extra_bufts = false;
    struct llama_model * model = llama_model_load_from_file(argv[1], model_params);
    if (!model) {
        fprintf(stderr, "%s: cannot load\n", argv[1]);
        return 1;
    }
    struct llama_context_params params = llama_context_default_params();
    params.n_ctx = atoi(argv[2]);
    params.n_seq_max = atoi(argv[3]);
    params.kv_unified = atoi(argv[4]);
    params.flash_attn_type = atoi(argv[5]) ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    params.swa_full = atoi(argv[6]);
    params.n_batch = 2048;
    params.n_ubatch = argc > 7 ? atoi(argv[7]) : 512;
    struct llama_context * ctx = llama_init_from_model(model, params);
    if (!ctx) {
        fprintf(stderr, "cannot create the context\n");
        return 1;
    }
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}

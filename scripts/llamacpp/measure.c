// Measures what llama.cpp allocates for one GGUF over many contexts, the way
// fixtures/oracles/llamacpp/ was measured (CPU backend, mmap, no extra buffer types), loading
// the model once: scripts/llamacpp/measure.py drives it and writes the oracle's JSON lines.
// It replaces reserve.c (one context a run), with which fixtures/llamacpp-gpt-oss-settings.jsonl
// was measured: the same settings, given on stdin. Build against the tree llama-cpp-python
// 0.3.36 vendors (commit 0c1e570):
//
//   tar -xzf llama_cpp_python-0.3.36.tar.gz && cd llama_cpp_python-0.3.36/vendor/llama.cpp
//   cmake -B build -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF \
//         -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF \
//         -DLLAMA_BUILD_SERVER=OFF && make -C build -j llama
//   g++ -O1 measure.c -Iinclude -Iggml/include build/src/libllama.a build/ggml/src/libggml.a \
//       build/ggml/src/libggml-cpu.a build/ggml/src/libggml-base.a -fopenmp -lpthread -ldl
//   printf '4096 1 0 1 0 512\n' | ./a.out MODEL.gguf
//
// Each stdin line is one context: N_CTX N_SEQ_MAX KV_UNIFIED FLASH_ATTN SWA_FULL N_UBATCH.
// Before each, a line `run N_CTX …` marks where its log lines start; llama.cpp's own lines
// about sizes follow verbatim. MODEL.gguf can be a header stub grown to its full size
// (`truncate -s`): weights are mapped, never read. Setting AT_PRINTF in
// ggml/src/ggml-alloc.c to print gives ggml-alloc's own trace of every placement, which is
// what engines/llama_cpp/graphs/ were checked against.
#include "llama.h"
#include <stdio.h>
#include <string.h>

static const char * const KEPT[] = {
    "model buffer size", "KV buffer size", "RS buffer size", "output buffer size",
    "compute buffer size =", "llama_kv_cache: size", "llama_memory_recurrent: size",
    "n_ctx_seq", "n_ctx   ", "print_info: arch", "failed", "error",
};

static void log_sizes(enum ggml_log_level level, const char * text, void * user) {
    (void) level;
    (void) user;
    for (size_t i = 0; i < sizeof(KEPT) / sizeof(KEPT[0]); i++) {
        if (strstr(text, KEPT[i])) {
            fputs(text, stdout);
            fflush(stdout);
            return;
        }
    }
}

int main(int argc, char ** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL.gguf < runs (N_CTX N_SEQ_MAX KV_UNIFIED FLASH_ATTN SWA_FULL N_UBATCH)\n", argv[0]);
        return 2;
    }
    llama_log_set(log_sizes, NULL);
    llama_backend_init();
    struct llama_model_params model_params = llama_model_default_params();
    model_params.n_gpu_layers = 0;
    model_params.use_extra_bufts = false;
    struct llama_model * model = llama_model_load_from_file(argv[1], model_params);
    if (!model) {
        fprintf(stderr, "%s: cannot load\n", argv[1]);
        return 1;
    }
    int n_ctx, n_seq, unified, flash, swa_full, ubatch;
    while (scanf("%d %d %d %d %d %d", &n_ctx, &n_seq, &unified, &flash, &swa_full, &ubatch) == 6) {
        printf("run %d %d %d %d %d %d\n", n_ctx, n_seq, unified, flash, swa_full, ubatch);
        fflush(stdout);
        struct llama_context_params params = llama_context_default_params();
        params.n_ctx = n_ctx;
        params.n_seq_max = n_seq;
        params.kv_unified = unified;
        params.flash_attn_type = flash ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
        params.swa_full = swa_full;
        params.n_batch = 2048;
        params.n_ubatch = ubatch;
        struct llama_context * ctx = llama_init_from_model(model, params);
        printf(ctx ? "done\n" : "failed\n");
        fflush(stdout);
        if (ctx) {
            llama_free(ctx);
        }
    }
    llama_model_free(model);
    return 0;
}

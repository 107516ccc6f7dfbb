//! The planner's tests: one binary, a module per area (as ripgrep's). Reading checkpoints
//! (`bounded`, `findings`, `quant`, `qwen2_moe`, `wrappers`), hostile input never panicking
//! (`no_panic`, with the stable fuzz runner), the findings catalogue's doc (`catalogue_doc`),
//! and memory and fit — held against hand-worked figures on the bundled checkpoints, against
//! llama.cpp's own allocations and vLLM's startup logs, and against the properties the plan
//! must keep — with the throughput bounds and each engine's runtime verdict on named devices.

mod apple_silicon;
mod bounded;
mod catalogue_doc;
mod deepseek_v2;
mod deployment;
mod engines;
mod fail_closed;
mod findings;
mod fit;
mod gemma_granite;
mod gguf_hybrid;
mod gguf_mla_phi3;
mod glm_nemotron;
mod grading;
mod hostile;
mod hybrid;
mod kv;
mod kv_gemma4_llama4;
mod llamacpp;
mod llamacpp_offload;
mod llamacpp_oracle;
mod no_panic;
mod performance_oracle;
mod properties;
mod quant;
mod qwen2_moe;
mod recommend;
mod release_day;
mod rope;
mod runtimes;
mod sglang_oracle;
mod sglang_rules;
mod source;
mod speculative;
mod support;
mod throughput;
mod vllm_oracle;
mod weights;
mod widths;
mod wrappers;

//! Memory and fit, held against hand-worked figures on the bundled checkpoints, against
//! llama.cpp's own allocations, and against the properties the plan must keep; with them the
//! throughput bounds and each engine's runtime verdict on named devices.
//! One test binary, a module per area.

mod engines;
mod fail_closed;
mod fit;
mod gguf_hybrid;
mod gguf_mla_phi3;
mod glm_nemotron;
mod grading;
mod hostile;
mod hybrid;
mod kv;
mod kv_gemma4_llama4;
mod llamacpp;
mod llamacpp_oracle;
mod properties;
mod release_day;
mod rope;
mod runtimes;
mod support;
mod throughput;
mod vllm_oracle;
mod weights;

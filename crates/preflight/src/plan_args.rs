//! `preflight plan`'s memory flags and their conversion to [`PlanOptions`]. Each flag is the
//! option of the same name in `POST /v1/plan` (dashes for underscores); values are parsed by
//! the planner's own types, so the CLI and the service accept exactly the same things.

use clap::Args;
use preflight_plan::{
    ComputeDtype, Devices, Fraction, GpuLayers, KvDtype, MemoryEngine, OptionsError, PlanOptions, Speculative,
    SplitMode, TensorOverride, TensorSplit, WeightsDtype,
};

/// Memory and fit (see docs/memory.md). Giving any of these adds the memory plan
/// (`--sequences 1` asks for it with every default).
#[derive(Debug, Clone, Default, Args)]
pub struct MemoryArgs {
    /// Tokens per sequence: a number, or with k / M as people write context windows
    /// (32k = 32,768; 128K = 131,072; 1M = 1,048,576) [default: each model's maximum context;
    /// under llama.cpp on devices it cannot fit, the lower one llama.cpp's --fit picks].
    #[arg(long, value_name = "TOKENS", value_parser = parse_tokens, help_heading = "Memory")]
    pub context: Option<u64>,
    /// Sequences served at once, each holding --context tokens of KV cache [default: 1].
    #[arg(long, value_name = "N", help_heading = "Memory")]
    pub sequences: Option<u64>,
    /// KV cache type: auto, bf16, f16, f32, fp8, q8_0, q4_0 [default: auto = the model's
    /// dtype; f16 for GGUF, as llama.cpp].
    #[arg(long, value_name = "DTYPE", value_parser = parse_kv_dtype, help_heading = "Memory")]
    pub kv_dtype: Option<KvChoice>,
    /// Plan the weights as if stored as: bf16, f16, f32 (cast everything), or fp8, int8,
    /// int4, mxfp4, nvfp4 (quantize linear layers) [default: as stored].
    #[arg(long, value_name = "DTYPE", help_heading = "Memory")]
    pub weights_dtype: Option<WeightsDtype>,
    /// vLLM/SGLang --dtype: bfloat16, float16 or float32, the dtype the model computes in
    /// and an unquantized checkpoint's weights load in [default: the config's].
    #[arg(long, value_name = "DTYPE", help_heading = "Memory")]
    pub dtype: Option<ComputeDtype>,
    /// Devices to place the system on: NAME[:COUNT],… (see the list below).
    #[arg(long, value_name = "DEVICES", help_heading = "Memory", long_help = devices_help())]
    pub devices: Option<Devices>,
    /// Tensor-parallel degree; with --data-parallel it must divide the device count (the
    /// rest are independent replicas) [default: the device count over --data-parallel].
    #[arg(long, value_name = "N", help_heading = "Memory")]
    pub tensor_parallel: Option<u64>,
    /// vLLM --data-parallel-size: engine replicas of --tensor-parallel ranks acting as one
    /// deployment, each serving --sequences of its own; with --expert-parallel the experts
    /// spread over all their ranks. SGLang: --attn-dp-size N (the deprecated --dp-size N
    /// --enable-dp-attention) with --tp-size = --tensor-parallel × N: attention and the
    /// embedding split by --tensor-parallel, the MLP, LM head and experts over all the ranks
    /// (Qwen3-MoE only) [default: 1].
    #[arg(long, value_name = "N", help_heading = "Memory")]
    pub data_parallel: Option<u64>,
    /// Expert parallelism (vLLM --enable-expert-parallel over tensor × data parallel ranks,
    /// SGLang --ep-size equal to its --tp-size, tensor × data parallel ranks): each rank holds
    /// whole experts, an even share of them, instead of a slice of every expert.
    #[arg(long, help_heading = "Memory")]
    pub expert_parallel: bool,
    /// Count multi-token-prediction layers (weights and KV cache) [default: excluded].
    #[arg(long, help_heading = "Memory")]
    pub include_mtp: bool,
    /// Speculative decoding, METHOD:K (vLLM and SGLang): `mtp:3` drafts 3 tokens a step with
    /// the checkpoint's own multi-token-prediction layers (one source); `eagle3:3` with an
    /// EAGLE-3 draft head given as the second source (`preflight plan TARGET DRAFT
    /// --speculative eagle3:3`). The drafter's weights, KV cache layers, lookahead and
    /// profile-run terms join the target's memory (docs/memory.md § Speculative decoding).
    #[arg(long, value_name = "METHOD:K", help_heading = "Memory")]
    pub speculative: Option<Speculative>,
    /// Plan once per value and print them side by side: OPTION=A,B,… with OPTION one of
    /// weights-dtype, kv-dtype, engine, devices (e.g. `--compare weights-dtype=bf16,fp8,int4`,
    /// `--compare devices=h100-80gb:8,h200:8,b200:8`, `--compare engine=vllm,sglang`). With
    /// --workload each row adds its performance estimate. The sources are read once.
    #[arg(long, value_name = "OPTION=A,B", value_parser = crate::compare::parse, help_heading = "Memory")]
    pub compare: Option<crate::compare::Compare>,
    /// The engine whose memory accounting and runtime rules to follow: vllm (0.19.0), sglang
    /// (0.5.23) or llama.cpp (0.3.36), optionally pinned as ENGINE@VERSION (`vllm@0.19.0`);
    /// one release of each is modelled, and another is refused [default: the engine its own
    /// flags below name, else llama.cpp for GGUF files and vllm otherwise].
    #[arg(long, value_name = "ENGINE[@VERSION]", help_heading = "Engine")]
    pub engine: Option<MemoryEngine>,
    /// vLLM: share of each device's memory it may fill, in (0, 1] [default: 0.9].
    #[arg(long, value_name = "SHARE", help_heading = "Engine")]
    pub gpu_utilization: Option<Fraction>,
    /// vLLM: requests scheduled at once; its sampler warm-up holds logits for this many
    /// [default: 1024 on ≥ 70 GiB devices other than A100, else 256].
    #[arg(long, value_name = "N", help_heading = "Engine")]
    pub max_num_seqs: Option<u64>,
    /// vLLM: tokens per forward pass, which sizes its profile run
    /// [default: 8192 on ≥ 70 GiB devices other than A100, else 2048].
    #[arg(long, value_name = "TOKENS", help_heading = "Engine")]
    pub max_num_batched_tokens: Option<u64>,
    /// vLLM: tokens per KV cache page: 1, 8, 16, 32, 64, 128 or 256 [default: 16; 64 for MLA].
    #[arg(long, value_name = "TOKENS", help_heading = "Engine")]
    pub block_size: Option<u64>,
    /// vLLM: no CUDA graphs. Changes no figure under vLLM 0.19, which captures its graphs
    /// after the KV cache is sized, outside the budget (accepted so a serving command's
    /// flags can be passed as they are).
    #[arg(long, help_heading = "Engine")]
    pub enforce_eager: bool,
    /// SGLang: share of each device for weights and KV pool, in (0, 1] [default: SGLang's
    /// own for the device, e.g. 0.835 on an 80 GB H100 below TP 4].
    #[arg(long, value_name = "SHARE", value_parser = parse_mem_fraction, help_heading = "Engine")]
    pub mem_fraction_static: Option<Fraction>,
    /// llama.cpp: tokens per decode call (n_batch) [default: 2048].
    #[arg(long, value_name = "TOKENS", help_heading = "Engine")]
    pub batch: Option<u64>,
    /// llama.cpp: tokens per forward pass (n_ubatch), which sizes the compute buffer
    /// [default: 512].
    #[arg(long, value_name = "TOKENS", help_heading = "Engine")]
    pub ubatch: Option<u64>,
    /// llama.cpp: flash attention, on or off [default: on, as its `auto` resolves].
    #[arg(long, value_name = "on|off", value_parser = parse_on_off, help_heading = "Engine")]
    pub flash_attn: Option<bool>,
    /// llama.cpp -ngl: layers on the devices, a number or `all`, counting the output layer
    /// as llama.cpp does (48 layers + output = 49); the first layers and their KV cache stay
    /// in host RAM [default: auto — llama.cpp's --fit picks them; all with --fit off].
    #[arg(long, value_name = "N|all", help_heading = "Engine")]
    pub gpu_layers: Option<GpuLayers>,
    /// llama.cpp -ncmoe: keep the routed experts of the first N layers in host RAM, the rest of
    /// those layers on their device (what people do with a MoE too big for the card).
    #[arg(long, value_name = "N", help_heading = "Engine")]
    pub n_cpu_moe: Option<u64>,
    /// llama.cpp -ot: PATTERN=DEVICE, tensors whose name the regex matches go to CPU (host
    /// RAM) or the i-th of --devices as its backend names it: CUDA<i>, ROCm<i> (AMD) or MTL0
    /// (Apple silicon); repeat or comma-separate; the first match
    /// wins, these before --n-cpu-moe's. E.g. `blk\.(1[0-9])\.ffn_.*_exps=CPU`.
    #[arg(long, value_name = "PATTERN=DEVICE", value_delimiter = ',', help_heading = "Engine")]
    pub override_tensor: Vec<TensorOverride>,
    /// llama.cpp -nkvo: every layer's KV cache in host RAM, whatever device holds the layer.
    #[arg(long, help_heading = "Engine")]
    pub no_kv_offload: bool,
    /// llama.cpp -sm: layer (whole layers over the devices) or none (the first device only);
    /// row is refused, as llama.cpp 0.3.36 cannot load it on CUDA, ROCm or Metal [default: layer].
    #[arg(long, value_name = "layer|none", help_heading = "Engine")]
    pub split_mode: Option<SplitMode>,
    /// llama.cpp -ts: the share of the offloaded layers each device takes, in --devices order,
    /// e.g. 3,1 [default: in proportion to each device's memory].
    #[arg(long, value_name = "A,B,…", help_heading = "Engine")]
    pub tensor_split: Option<TensorSplit>,
    /// llama.cpp --fit: let llama.cpp lower a context not given (down to 4,096 tokens), then
    /// pick the layers (and MoE experts kept in host RAM) that leave 1 GiB free on each device;
    /// the layers only unless --gpu-layers, --tensor-split (several devices), --override-tensor
    /// or --n-cpu-moe is given [default: on, as llama.cpp].
    #[arg(long, value_name = "on|off", value_parser = parse_on_off, help_heading = "Engine")]
    pub fit: Option<bool>,
    /// llama.cpp: host RAM for its host buffers (mapped weights, CPU KV cache, host compute and
    /// output buffers), e.g. 64GiB: checked like a device [default: not checked].
    #[arg(long, value_name = "SIZE", value_parser = parse_host_memory, help_heading = "Engine")]
    pub host_memory: Option<u64>,
    /// Apple silicon: the GPU's working set, what macOS lets Metal hold of the unified memory
    /// (llama.cpp prints it as recommendedMaxWorkingSetSize; `sudo sysctl
    /// iogpu.wired_limit_mb=N` raises it), e.g. 400GiB [default: preflight's rule for macOS's
    /// default, 2/3 of the memory up to 32 GiB, 3/4 above (docs/memory.md § Apple silicon)].
    #[arg(long, value_name = "SIZE", value_parser = parse_working_set, help_heading = "Engine")]
    pub working_set: Option<u64>,
    /// llama.cpp: one KV stream shared by every sequence instead of one each.
    #[arg(long, help_heading = "Engine")]
    pub kv_unified: bool,
    /// llama.cpp: sliding-window layers cache the whole context, not the window.
    #[arg(long, help_heading = "Engine")]
    pub swa_full: bool,
    /// Estimate serving performance for this traffic (an estimate, with a range; needs
    /// --devices): isl=TOKENS,osl=TOKENS and concurrency=N (N clients, a closed loop) or
    /// rate=R (R requests a second, an open loop), e.g. isl=1024,osl=1024,concurrency=64.
    #[arg(long, value_name = "SPEC", value_parser = parse_workload, help_heading = "Performance")]
    pub workload: Option<preflight_plan::workload::Workload>,
    /// Latency targets the estimate is held to: ttft, tpot, e2e with a unit (ms, s), the
    /// median unless a percentile is named: ttft=2s,tpot=50ms,ttft_p99=4s. Needs --workload.
    #[arg(long, value_name = "TARGETS", value_parser = parse_slo, help_heading = "Performance")]
    pub slo: Option<preflight_plan::workload::Slo>,
    /// Dollars an hour per GPU type, to cost recommendations: h100-80gb=2.5,h200=3.5.
    /// (Recommendations: --workload on --devices named without counts, e.g. --devices
    /// h100-80gb,h200,b200, plans every deployment of 1, 2, 4 or 8 of each and ranks them.)
    #[arg(long, value_name = "PRICES", value_parser = parse_prices, help_heading = "Performance")]
    pub gpu_price: Option<preflight_plan::workload::GpuPrices>,
    /// Exit 4 unless every source runs on this engine (`yes` or `fallback` in its runtime
    /// verdict, on --devices when named): vllm, sglang, llama.cpp or transformers.
    #[arg(long, value_name = "ENGINE", value_parser = parse_engine, help_heading = "Engines")]
    pub require_engine: Option<preflight_plan::Engine>,
}

fn parse_mem_fraction(s: &str) -> Result<Fraction, OptionsError> {
    s.parse::<Fraction>().map_err(|e| OptionsError {
        option: "mem_fraction_static",
        message: e.message,
    })
}

fn parse_on_off(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "on" | "true" | "1" => Ok(true),
        "off" | "false" | "0" => Ok(false),
        _ => Err(format!("`{s}` is not on or off")),
    }
}

fn parse_host_memory(s: &str) -> Result<u64, OptionsError> {
    preflight_plan::options::parse_host_memory(s)
}

fn parse_working_set(s: &str) -> Result<u64, OptionsError> {
    preflight_plan::options::parse_working_set(s)
}

fn parse_workload(s: &str) -> Result<preflight_plan::workload::Workload, OptionsError> {
    s.parse().map_err(|message| OptionsError {
        option: "workload",
        message,
    })
}

fn parse_slo(s: &str) -> Result<preflight_plan::workload::Slo, OptionsError> {
    s.parse().map_err(|message| OptionsError { option: "slo", message })
}

fn parse_prices(s: &str) -> Result<preflight_plan::workload::GpuPrices, OptionsError> {
    s.parse().map_err(|message| OptionsError {
        option: "gpu_price",
        message,
    })
}

fn parse_engine(s: &str) -> Result<preflight_plan::Engine, String> {
    s.parse()
}

/// `--devices`' help, listed from the planner's catalogue so it cannot drift from what
/// `--devices` accepts.
fn devices_help() -> String {
    let mut help = String::from(
        "Devices to place the system on: NAME[:COUNT],… with NAME a catalogued device, NAME=SIZE for a \
         catalogued device whose memory the catalogue does not know (a10g=24GiB), or a capacity \
         (85899345920, 80GiB, or 24GB — a device's GB is read as GiB everywhere, as vendors mean it). \
         Naming the part also judges each engine's kernels on it (compute capability). Apple silicon \
         is named by chip with the Mac's unified memory, once (m3-ultra=512GB), and planned with \
         llama.cpp (Metal).\n\nCatalogue:",
    );
    for d in preflight_plan::devices::catalogue() {
        let memory = match (d.memory_bytes, d.unified_memory) {
            (Some(b), _) => format!("{} GiB", b >> 30),
            (None, true) => "the Mac's memory: NAME=SIZE".to_owned(),
            (None, false) => "memory unknown: NAME=SIZE".to_owned(),
        };
        let capability = d
            .capability_text()
            .map(|c| format!("cc {c}"))
            .or_else(|| d.gfx_arch.clone())
            .or_else(|| d.unified_memory.then(|| "Metal".to_owned()))
            .unwrap_or_else(|| "capability unknown".to_owned());
        help.push_str(&format!(
            "\n  {:<11} {} ({memory}, {capability})",
            d.name, d.description
        ));
    }
    help
}

/// `--context`, read as the API reads `"context"`.
fn parse_tokens(s: &str) -> Result<u64, String> {
    preflight_plan::options::tokens(s)
}

/// `--kv-dtype`: `auto` is the absence of a choice.
#[derive(Debug, Clone, Copy)]
pub enum KvChoice {
    Auto,
    Dtype(KvDtype),
}

fn parse_kv_dtype(s: &str) -> Result<KvChoice, OptionsError> {
    if s.eq_ignore_ascii_case("auto") {
        Ok(KvChoice::Auto)
    } else {
        s.parse().map(KvChoice::Dtype)
    }
}

impl MemoryArgs {
    /// The options these flags ask for, validated: an `Err` is bad usage (exit 2).
    pub fn options(&self) -> Result<PlanOptions, OptionsError> {
        let options = PlanOptions {
            context: self.context,
            sequences: self.sequences,
            kv_dtype: match self.kv_dtype {
                Some(KvChoice::Dtype(dtype)) => Some(dtype),
                Some(KvChoice::Auto) | None => None,
            },
            weights_dtype: self.weights_dtype,
            dtype: self.dtype,
            devices: self.devices.clone(),
            tensor_parallel: self.tensor_parallel,
            data_parallel: self.data_parallel,
            expert_parallel: self.expert_parallel,
            gpu_utilization: self.gpu_utilization,
            include_mtp: self.include_mtp,
            speculative: self.speculative,
            engine: self.engine,
            max_num_seqs: self.max_num_seqs,
            max_num_batched_tokens: self.max_num_batched_tokens,
            block_size: self.block_size,
            enforce_eager: self.enforce_eager,
            mem_fraction_static: self.mem_fraction_static,
            batch: self.batch,
            ubatch: self.ubatch,
            flash_attn: self.flash_attn,
            gpu_layers: self.gpu_layers,
            n_cpu_moe: self.n_cpu_moe,
            override_tensor: self.override_tensor.clone(),
            no_kv_offload: self.no_kv_offload,
            split_mode: self.split_mode,
            tensor_split: self.tensor_split.clone(),
            fit: self.fit,
            fitted_context: None,
            host_memory: self.host_memory,
            working_set: self.working_set,
            kv_unified: self.kv_unified,
            swa_full: self.swa_full,
            workload: self.workload,
            slo: self.slo.clone(),
            gpu_price: self.gpu_price.clone(),
            require_engine: self.require_engine,
        };
        match &self.compare {
            // Each row's options are whole only with the compared option set (a workload
            // compared over devices has none without it): every row is checked, before any I/O.
            Some(compare) => {
                compare.variants(&options).map_err(|message| OptionsError {
                    option: "compare",
                    message,
                })?;
            }
            None => options.validate()?,
        }
        Ok(options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        memory: MemoryArgs,
    }

    fn parse(args: &[&str]) -> Result<PlanOptions, String> {
        let cli =
            Cli::try_parse_from(std::iter::once("preflight").chain(args.iter().copied())).map_err(|e| e.to_string())?;
        cli.memory.options().map_err(|e| e.to_string())
    }

    #[test]
    fn flags_become_the_same_options_as_json() {
        let o = parse(&[
            "--context",
            "8192",
            "--sequences",
            "4",
            "--kv-dtype",
            "fp8",
            "--weights-dtype",
            "int4",
            "--devices",
            "h100-80gb:2",
            "--gpu-utilization",
            "0.95",
        ])
        .expect("parse");
        let json: PlanOptions = serde_json::from_str(
            r#"{"context":8192,"sequences":4,"kv_dtype":"fp8","weights_dtype":"int4","devices":"h100-80gb:2","gpu_utilization":0.95}"#,
        )
        .expect("json");
        assert_eq!(o, json);
    }

    #[test]
    fn context_takes_k_and_m_as_people_write_them() {
        for (text, tokens) in [
            ("32768", 32_768),
            ("32k", 32_768),
            ("32K", 32_768),
            ("128k", 131_072),
            ("1M", 1_048_576),
        ] {
            assert_eq!(parse(&["--context", text]).expect(text).context, Some(tokens), "{text}");
        }
        for bad in ["32kb", "k", "1.5k", "-1k", "99999999999999999999k"] {
            assert!(parse(&["--context", bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn no_flags_ask_for_nothing_and_auto_is_no_choice() {
        assert!(!parse(&[]).expect("parse").asks_for_memory());
        assert!(!parse(&["--kv-dtype", "auto"]).expect("parse").asks_for_memory());
        assert!(parse(&["--sequences", "1"]).expect("parse").asks_for_memory());
    }

    #[test]
    fn bad_values_are_errors_naming_the_flag_or_option() {
        for (args, needle) in [
            (&["--context", "0"][..], "context"),
            (&["--context", "-5"][..], "-5"),
            (&["--sequences", "0"][..], "sequences"),
            (&["--devices", "h900"][..], "h900"),
            (
                &["--devices", "h100-80gb:4", "--tensor-parallel", "3"][..],
                "tensor_parallel",
            ),
            (&["--gpu-utilization", "1.2"][..], "gpu_utilization"),
            (&["--kv-dtype", "int3"][..], "int3"),
            (&["--weights-dtype", "q9"][..], "q9"),
        ] {
            let err = parse(args).expect_err("must fail");
            assert!(err.contains(needle), "{args:?}: {err}");
        }
    }
}

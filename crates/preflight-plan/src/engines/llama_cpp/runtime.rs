//! llama.cpp as vendored by llama-cpp-python 0.3.36: the `general.architecture` names it
//! loads (and which are hybrid or recurrent), and the HF architectures its converter takes.
//! It loads GGUF only; its CUDA backend has no capability gate in the data, so devices do not
//! change its verdict.

use crate::findings::Code;
use crate::runtimes::data::Engines;
use crate::runtimes::{Judgement, Outcome, Subject, refused};
use crate::verdict::{Format, Support};

pub fn judge(engines: &Engines, subject: &Subject) -> Outcome {
    let data = &engines.llama_cpp;
    let mut general = Judgement::default();
    let kind_of = |arch: &str| data.architectures.get(arch).map(|a| a.kind == "hybrid");
    let hybrid = match subject.format {
        Format::Safetensors => {
            general.set(
                Support::No,
                Code::RuntimeFormatUnsupported,
                "format",
                "llama.cpp loads GGUF only; a safetensors checkpoint must be converted first",
            );
            let conversion = subject.class.and_then(|c| Some((c, data.converter.get(c)?)));
            match conversion {
                Some((class, conversion)) => {
                    general.note(
                        Code::RuntimeConvertible,
                        "architecture",
                        format!(
                            "convert_hf_to_gguf.py takes `{class}` and writes a `{}` GGUF ({})",
                            conversion.writes, conversion.source
                        ),
                    );
                    kind_of(&conversion.writes)
                }
                None => None,
            }
        }
        Format::Gguf => {
            let arch = subject.gguf_architecture.unwrap_or("");
            match data.architectures.get(arch) {
                Some(_) if subject.model.is_none() => refused(&mut general, "llama.cpp"),
                Some(_) => {}
                None => general.set(
                    Support::No,
                    Code::RuntimeArchitectureUnregistered,
                    "architecture",
                    format!("llama.cpp ({}) has no `{arch}` architecture", data.version),
                ),
            }
            kind_of(arch)
        }
    };
    Outcome {
        general,
        hybrid,
        devices: Vec::new(),
    }
}

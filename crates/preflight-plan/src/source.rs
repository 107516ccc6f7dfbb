//! The verdict's `source` block past where the artifact came from: what its card and the Hub
//! say (licence, gating), whether loading it runs the repo's own code, and the bytes an engine
//! fetches to serve it — the questions asked before a download. Read from the staged facts
//! alone; nothing here changes a figure of the plan, and nothing here is blocking.

use std::collections::BTreeMap;

use preflight_formats::facts::{ArtifactFacts, Content, ListedFile};
use serde_json::Value;

use crate::findings::{Code, Findings};
use crate::verdict::{RemoteCode, RemoteModule, Source};

/// The files beside its weights an engine fetches to serve a safetensors checkpoint — what
/// vLLM and SGLang read through transformers' `AutoConfig`, `GenerationConfig`,
/// `AutoTokenizer` and `AutoProcessor`: config and quantization record, the shard index,
/// generation defaults, the tokenizer in each of its forms, a multimodal model's processor. A
/// GGUF carries all of it in its header: llama.cpp fetches nothing else.
pub const ENGINE_FILES: &[&str] = &[
    "config.json",
    "hf_quant_config.json",
    "model.safetensors.index.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "tiktoken.model",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "chat_template.jinja",
    "chat_template.json",
    "preprocessor_config.json",
    "processor_config.json",
    "video_preprocessor_config.json",
];

/// The `source` block of `facts`; a checkpoint whose loading runs its own code gets a
/// `source.remote_code` warning in `findings`.
pub(crate) fn describe(facts: &ArtifactFacts, findings: &mut Findings) -> Source {
    let listed = facts.meta.files.as_deref();
    let remote_code = remote_code(facts, listed);
    if remote_code.required {
        findings.push(
            Code::SourceRemoteCode,
            "config.auto_map",
            remote_code_detail(&remote_code),
        );
    }
    Source {
        reference: facts.source.clone(),
        license: facts.meta.license.clone(),
        license_name: facts.meta.license_name.clone(),
        gated: facts.meta.gated,
        download_bytes: download_bytes(facts, listed, &remote_code),
        remote_code,
    }
}

/// config.json's `auto_map`: each auto class names `module.Class` (or `other/repo--module.Class`,
/// code kept in another repo), a tokenizer's a `[slow, fast]` pair that may hold `null`s.
/// transformers imports `module.py` from the repo when loading with `trust_remote_code`.
fn remote_code(facts: &ArtifactFacts, listed: Option<&[ListedFile]>) -> RemoteCode {
    let Some(auto_map) = facts
        .config
        .as_ref()
        .and_then(|c| c.raw.get("auto_map"))
        .and_then(Value::as_object)
    else {
        return RemoteCode::default();
    };
    // (repo, file) → the auto classes naming it.
    let mut modules: BTreeMap<(Option<String>, String), Vec<String>> = BTreeMap::new();
    for (class, value) in auto_map {
        let references = match value {
            Value::String(s) => vec![s.as_str()],
            Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        for reference in references {
            let (repo, reference) = match reference.split_once("--") {
                Some((repo, rest)) => (Some(repo.to_owned()), rest),
                None => (None, reference),
            };
            let Some((module, _)) = reference
                .rsplit_once('.')
                .filter(|(m, c)| !m.is_empty() && !c.is_empty())
            else {
                continue;
            };
            let classes = modules.entry((repo, format!("{module}.py"))).or_default();
            if !classes.contains(class) {
                classes.push(class.clone());
            }
        }
    }
    let present = |file: &str| listed.is_some_and(|files| files.iter().any(|f| f.name == file));
    RemoteCode {
        required: !modules.is_empty(),
        modules: modules
            .into_iter()
            .map(|((repo, file), classes)| RemoteModule {
                present: repo.is_none() && present(&file),
                file,
                repo,
                classes,
            })
            .collect(),
    }
}

fn remote_code_detail(code: &RemoteCode) -> String {
    let named = code.named_modules();
    let missing = code.missing_files();
    let missing = match missing.as_slice() {
        [] => String::new(),
        files => format!("; not among the source's files: {}", files.join(", ")),
    };
    format!(
        "config.json's auto_map points transformers at the repo's own code: loading it with trust_remote_code=True imports and runs {} and what they import — read them first{missing}",
        named.join(", ")
    )
}

/// The bytes an engine fetches to serve the artifact: the weight files the plan read (the
/// shards the index names, or the GGUF's parts — never another copy the repo holds, such as
/// `original/` or a GGUF beside safetensors), plus, for safetensors, the [`ENGINE_FILES`] the
/// listing has and the remote-code modules it has. `None` when a size is unknown.
fn download_bytes(facts: &ArtifactFacts, listed: Option<&[ListedFile]>, remote: &RemoteCode) -> Option<u64> {
    match &facts.content {
        Content::Gguf { parts, .. } => sum(parts.iter().map(|p| p.size)),
        Content::Safetensors { files, .. } => {
            let weights = sum(files.iter().map(|f| f.size))?;
            let beside = listed?.iter().filter(|f| {
                ENGINE_FILES.contains(&f.name.as_str()) || remote.modules.iter().any(|m| m.present && m.file == f.name)
            });
            Some(weights.saturating_add(sum(beside.map(|f| f.size))?))
        }
    }
}

/// The sum of sizes, `None` when any is unknown.
fn sum(mut sizes: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    sizes.try_fold(0u64, |acc, size| Some(acc.saturating_add(size?)))
}

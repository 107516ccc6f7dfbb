//! Source specs (SPEC §1): `hf://ORG/NAME[@REV][/path/file.gguf]` or a local path.
//! Validation here is pure: no network, no filesystem.

use std::fmt;
use std::path::PathBuf;

/// A repo id segment may not exceed this (the Hub's own limit).
pub const MAX_SEGMENT_LEN: usize = 96;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceSpec {
    Hub(HubSpec),
    Local(PathBuf),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubSpec {
    /// `org/name`.
    pub repo: String,
    /// Branch, tag, `refs/pr/N`, `refs/convert/NAME` or a 40-hex commit; `None` means `main`.
    pub revision: Option<String>,
    /// One file in the repo (a GGUF), when named.
    pub file: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid source {spec:?}: {reason}")]
pub struct SpecError {
    pub spec: String,
    pub reason: String,
}

impl HubSpec {
    /// A 40-hex commit names exactly one tree: no probe is needed.
    pub fn is_pinned(&self) -> bool {
        self.revision.as_deref().is_some_and(is_commit)
    }

    pub fn revision_or_main(&self) -> &str {
        self.revision.as_deref().unwrap_or("main")
    }
}

pub fn is_commit(rev: &str) -> bool {
    rev.len() == 40 && rev.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

impl fmt::Display for HubSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "hf://{}", self.repo)?;
        if let Some(rev) = &self.revision {
            write!(f, "@{}", encode_revision(rev))?;
        }
        if let Some(file) = &self.file {
            write!(f, "/{file}")?;
        }
        Ok(())
    }
}

/// A revision as one path segment: `refs/pr/1` → `refs%2Fpr%2F1` (what the Hub's URLs expect).
pub fn encode_revision(rev: &str) -> String {
    rev.replace('%', "%25").replace('/', "%2F")
}

pub fn parse(spec: &str) -> Result<SourceSpec, SpecError> {
    let err = |reason: &str| SpecError {
        spec: spec.to_owned(),
        reason: reason.to_owned(),
    };
    let Some(rest) = spec.strip_prefix("hf://") else {
        if spec.is_empty() {
            return Err(err("empty source"));
        }
        if spec.contains("://") {
            return Err(err("only hf:// URLs and local paths are sources"));
        }
        return Ok(SourceSpec::Local(PathBuf::from(spec)));
    };
    let mut parts = rest.splitn(3, '/');
    let org = parts.next().unwrap_or_default();
    let name_rev = parts.next().ok_or_else(|| err("expected hf://ORG/NAME"))?;
    let mut tail = parts.next();
    let (name, mut revision) = match name_rev.split_once('@') {
        Some((name, rev)) => (name, Some(rev.to_owned())),
        None => (name_rev, None),
    };
    for segment in [org, name] {
        validate_segment(segment).map_err(|r| err(&r))?;
    }
    // refs/pr/N and refs/convert/NAME span path segments; anything else with '/' is encoded.
    if let Some(rev) = revision.as_mut() {
        if rev == "refs"
            && let Some(t) = tail
        {
            let mut seg = t.splitn(3, '/');
            let (kind, id) = (
                seg.next().unwrap_or_default(),
                seg.next()
                    .ok_or_else(|| err("refs/ revision needs refs/pr/N or refs/convert/NAME"))?,
            );
            match kind {
                "pr" if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) => {}
                "convert" if !id.is_empty() => {}
                _ => {
                    return Err(err(
                        "the only revisions with '/' are refs/pr/N and refs/convert/NAME (write others percent-encoded)",
                    ));
                }
            }
            *rev = format!("refs/{kind}/{id}");
            tail = seg.next();
        } else {
            *rev = percent_decode(rev).ok_or_else(|| err("revision has a bad percent-escape"))?;
        }
        if rev.is_empty() {
            return Err(err("empty revision after '@'"));
        }
        if rev.chars().any(|c| c.is_control() || c == ' ') || rev.split('/').any(|s| s == ".." || s == ".") {
            return Err(err("revision contains a forbidden character or segment"));
        }
    }
    let file = match tail {
        None => None,
        Some("") => None,
        Some(path) => {
            if path.split('/').any(|s| s.is_empty() || s == ".." || s == ".") || path.contains('\\') {
                return Err(err("file path has an empty, '.' or '..' segment"));
            }
            Some(path.to_owned())
        }
    };
    Ok(SourceSpec::Hub(HubSpec {
        repo: format!("{org}/{name}"),
        revision,
        file,
    }))
}

fn validate_segment(segment: &str) -> Result<(), String> {
    if segment.is_empty() {
        return Err("repo id needs ORG/NAME".into());
    }
    if segment.len() > MAX_SEGMENT_LEN {
        return Err(format!("repo id segment longer than {MAX_SEGMENT_LEN} characters"));
    }
    let first_ok = segment.as_bytes()[0].is_ascii_alphanumeric();
    let rest_ok = segment
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !first_ok || !rest_ok || segment.contains("..") {
        return Err(format!(
            "repo id segment {segment:?} must match [A-Za-z0-9][A-Za-z0-9._-]* without '..'"
        ));
    }
    Ok(())
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hub(spec: &str) -> HubSpec {
        match parse(spec) {
            Ok(SourceSpec::Hub(h)) => h,
            other => panic!("{spec}: {other:?}"),
        }
    }

    #[test]
    fn hub_forms() {
        let h = hub("hf://Qwen/Qwen3-8B");
        assert_eq!((h.repo.as_str(), h.revision, h.file), ("Qwen/Qwen3-8B", None, None));
        let h = hub("hf://Qwen/Qwen3-8B-GGUF@v1/Qwen3-8B-Q4_K_M.gguf");
        assert_eq!(
            (h.revision.as_deref(), h.file.as_deref()),
            (Some("v1"), Some("Qwen3-8B-Q4_K_M.gguf"))
        );
        let h = hub("hf://a/b@refs/pr/12/sub/x.gguf");
        assert_eq!(
            (h.revision.as_deref(), h.file.as_deref()),
            (Some("refs/pr/12"), Some("sub/x.gguf"))
        );
        assert_eq!(h.to_string(), "hf://a/b@refs%2Fpr%2F12/sub/x.gguf");
        let h = hub("hf://a/b@feature%2Fx/m.gguf");
        assert_eq!(
            (h.revision.as_deref(), h.file.as_deref()),
            (Some("feature/x"), Some("m.gguf"))
        );
        let h = hub("hf://a/b@0123456789abcdef0123456789abcdef01234567");
        assert!(h.is_pinned());
        assert!(!hub("hf://a/b@main").is_pinned());
    }

    #[test]
    fn bad_specs_are_refused() {
        for bad in [
            "hf://",
            "hf://org",
            "hf://org/",
            "hf://-org/name",
            "hf://org/na..me",
            "hf://org/name@",
            "hf://org/name@refs/heads/x",
            "hf://org/name/../x.gguf",
            "hf://org/name//x.gguf",
            "hf://org/na me",
            "https://huggingface.co/org/name",
            "",
        ] {
            assert!(parse(bad).is_err(), "{bad} should be refused");
        }
        let long = format!("hf://{}/x", "a".repeat(97));
        assert!(parse(&long).is_err());
    }

    #[test]
    fn paths_are_local() {
        assert_eq!(
            parse("./models/x").unwrap(),
            SourceSpec::Local(PathBuf::from("./models/x"))
        );
    }
}

//! Source specs (design §1): `hf://ORG/NAME[@REV][/path/file.gguf]` or a local path.
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
            // `%` re-encoded, so the display parses back to the same (decoded) path.
            write!(f, "/{}", file.replace('%', "%25"))?;
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
        if let Some(hf) = from_web_url(spec) {
            return parse(&hf.map_err(|r| err(&r))?).map_err(|e| SpecError {
                spec: spec.to_owned(),
                ..e
            });
        }
        if spec.contains("://") {
            return Err(err("only hf:// URLs, Hub model pages and local paths are sources"));
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
        Some(path) => Some(file_path(path).map_err(|r| err(&r))?),
    };
    Ok(SourceSpec::Hub(HubSpec {
        repo: format!("{org}/{name}"),
        revision,
        file,
    }))
}

/// A file path in a repo, percent-decoded **segment by segment** and each decoded segment
/// checked: `%2e%2e` is `..` to every URL library, so it must be refused here, not only the
/// literal `..`. A decoded `/` inside a segment (`%2F`) would change the path's shape and is
/// refused too. The result holds only plain segments joined by `/`.
pub fn file_path(path: &str) -> Result<String, String> {
    let mut segments = Vec::new();
    for raw in path.split('/') {
        let segment =
            percent_decode(raw).ok_or_else(|| format!("file path segment {raw:?} has a bad percent-escape"))?;
        check_path_segment(&segment)?;
        segments.push(segment);
    }
    Ok(segments.join("/"))
}

/// One path segment that means only itself: not empty, not `.` or `..`, no `/`, backslash or
/// control characters. Shared by file paths from specs and names from the Hub's listings.
pub fn check_path_segment(segment: &str) -> Result<(), String> {
    if segment.is_empty() || segment == "." || segment == ".." {
        return Err("file path has an empty, '.' or '..' segment (percent-encoded or not)".into());
    }
    if segment.contains(|c: char| c == '/' || c == '\\' || c.is_control()) {
        return Err(format!(
            "file path segment {segment:?} contains '/', '\\' or a control character"
        ));
    }
    Ok(())
}

/// Model pages on the Hub's website, as people paste them from a browser.
const HUB_WEB_PREFIXES: &[&str] = &[
    "https://huggingface.co/",
    "https://hf.co/",
    "https://www.huggingface.co/",
];

/// A pasted Hub web URL as the hf:// spec it shows: `…/ORG/NAME` → `hf://ORG/NAME`,
/// `…/tree/REV` → `@REV`, `…/blob/REV/file.gguf` (or `/resolve/`) → `@REV/file.gguf`.
/// `None` when `url` is not on the Hub's website; `Some(Err)` when it is but names no model.
fn from_web_url(url: &str) -> Option<Result<String, String>> {
    let rest = HUB_WEB_PREFIXES.iter().find_map(|p| url.strip_prefix(p))?;
    let rest = rest.split(['?', '#']).next().unwrap_or_default().trim_end_matches('/');
    let mut parts = rest.splitn(5, '/');
    let (org, name) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    if matches!(org, "datasets" | "spaces") {
        return Some(Err(format!(
            "a Hub {org} page is not a model; give a model page or hf://ORG/NAME"
        )));
    }
    if name.is_empty() {
        return Some(Err("a Hub model page is https://huggingface.co/ORG/NAME".into()));
    }
    let hf = match (parts.next(), parts.next(), parts.next()) {
        (None, ..) => format!("hf://{org}/{name}"),
        (Some("tree"), Some(rev), None) => format!("hf://{org}/{name}@{rev}"),
        (Some("blob" | "resolve"), Some(rev), Some(file)) => format!("hf://{org}/{name}@{rev}/{file}"),
        (Some("tree"), Some(_), Some(_)) => {
            return Some(Err(
                "a folder of a repo is not a source; name the repo or one file".into()
            ));
        }
        _ => {
            return Some(Err(
                "expected https://huggingface.co/ORG/NAME[/tree/REV | /blob/REV/FILE]".into(),
            ));
        }
    };
    Some(Ok(hf))
}

/// What a person most likely meant by `text` that is not an hf:// source: `ORG/NAME` (as
/// the Hub shows repo ids) → `hf://ORG/NAME`. `None` unless `text` is a valid repo id.
pub fn hub_suggestion(text: &str) -> Option<String> {
    let (org, name) = text.split_once('/')?;
    let name = name.strip_suffix('/').unwrap_or(name);
    let (name_only, _) = name.split_once('@').unwrap_or((name, ""));
    (validate_segment(org).is_ok() && validate_segment(name_only).is_ok()).then(|| format!("hf://{org}/{name}"))
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
            "hf://org/name/a%2Fb.gguf",
            "hf://org/name/%zz.gguf",
            "hf://org/na me",
            "https://example.com/org/name",
            "https://huggingface.co/datasets/org/name",
            "https://huggingface.co/org",
            "https://huggingface.co/org/name/tree/main/sub",
            "",
        ] {
            assert!(parse(bad).is_err(), "{bad} should be refused");
        }
        let long = format!("hf://{}/x", "a".repeat(97));
        assert!(parse(&long).is_err());
    }

    /// Issue 14, hole 1: `%2e%2e` in a file path is `..` once a URL library normalises it,
    /// and walked out of the repo into another one (planned at a branch, cached under ours).
    #[test]
    fn encoded_dot_dot_in_an_hf_file_path_escapes_the_repo() {
        for hostile in [
            "hf://Qwen/Qwen3-0.6B/%2e%2e/%2e%2e/%2e%2e/%2e%2e/Qwen/Qwen3-8B-GGUF/resolve/main/Qwen3-8B-Q4_K_M.gguf",
            "hf://Qwen/Qwen3-0.6B/%2E%2E/x.gguf",
            "hf://Qwen/Qwen3-0.6B/.%2e/x.gguf",
            "hf://Qwen/Qwen3-0.6B/%2e/x.gguf",
            "hf://Qwen/Qwen3-0.6B@main/sub/%2e%2e/%2e%2e/x.gguf",
        ] {
            assert!(parse(hostile).is_err(), "{hostile} should be refused");
        }
        // An escaped name that decodes to a plain segment is that segment, and displays back.
        let h = hub("hf://a/b/dir/Q4%20K.gguf");
        assert_eq!(h.file.as_deref(), Some("dir/Q4 K.gguf"));
        let h = hub("hf://a/b/100%25.gguf");
        assert_eq!(h.file.as_deref(), Some("100%.gguf"));
        assert_eq!(parse(&h.to_string()), Ok(SourceSpec::Hub(h)));
    }

    #[test]
    fn pasted_hub_pages_are_hf_sources() {
        let commit = "0123456789abcdef0123456789abcdef01234567";
        for (pasted, expected) in [
            ("https://huggingface.co/Qwen/Qwen3-8B", "hf://Qwen/Qwen3-8B"),
            ("https://huggingface.co/Qwen/Qwen3-8B/", "hf://Qwen/Qwen3-8B"),
            ("https://hf.co/Qwen/Qwen3-8B?library=transformers", "hf://Qwen/Qwen3-8B"),
            ("https://huggingface.co/Qwen/Qwen3-8B/tree/v1", "hf://Qwen/Qwen3-8B@v1"),
            (
                "https://huggingface.co/Qwen/Qwen3-8B/tree/refs%2Fpr%2F3",
                "hf://Qwen/Qwen3-8B@refs%2Fpr%2F3",
            ),
            (
                "https://huggingface.co/Qwen/Qwen3-8B-GGUF/blob/main/Qwen3-8B-Q4_K_M.gguf",
                "hf://Qwen/Qwen3-8B-GGUF@main/Qwen3-8B-Q4_K_M.gguf",
            ),
        ] {
            assert_eq!(parse(pasted), parse(expected), "{pasted}");
        }
        let h = hub(&format!("https://huggingface.co/a/b/tree/{commit}"));
        assert!(h.is_pinned());
    }

    #[test]
    fn a_repo_id_without_hf_is_suggested_as_one() {
        assert_eq!(hub_suggestion("Qwen/Qwen3-8B").as_deref(), Some("hf://Qwen/Qwen3-8B"));
        assert_eq!(hub_suggestion("./models/x"), None);
        assert_eq!(hub_suggestion("/abs/x"), None);
        assert_eq!(hub_suggestion("a/b/c"), None);
        assert_eq!(hub_suggestion("model.gguf"), None);
    }

    #[test]
    fn paths_are_local() {
        assert_eq!(
            parse("./models/x").unwrap(),
            SourceSpec::Local(PathBuf::from("./models/x"))
        );
    }
}

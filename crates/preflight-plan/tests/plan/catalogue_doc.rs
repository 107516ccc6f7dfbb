//! `docs/findings.md` is generated from the catalogue in `src/findings.rs`, so the two never
//! drift. Regenerate with `UPDATE_DOCS=1 cargo test -p preflight-plan --test plan catalogue_doc`.

use preflight_plan::{Code, Severity};

fn render() -> String {
    let mut out = String::from(
        "# Findings\n\nEvery code the planner can emit. Codes are stable: match on them, not on message text.\n\
         Blocking findings make a verdict inadmissible.\n\n\
         <!-- generated from crates/preflight-plan/src/findings.rs by tests/plan/catalogue_doc.rs -->\n\n\
         | code | severity | meaning |\n|---|---|---|\n",
    );
    for code in Code::ALL {
        let severity = match code.severity() {
            Severity::Blocking => "blocking",
            Severity::Warning => "warning",
            Severity::Info => "info",
        };
        let meaning = code
            .meaning()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .replace('|', "\\|");
        out.push_str(&format!("| `{}` | {severity} | {meaning} |\n", code.as_str()));
    }
    out
}

#[test]
fn findings_doc_matches_the_catalogue() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/findings.md");
    let want = render();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, &want).expect("write docs/findings.md");
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/findings.md is stale: run UPDATE_DOCS=1 cargo test -p preflight-plan --test plan catalogue_doc"
    );
}

//! The bigger fixture repos are committed as one tarball each (`fixtures/packed/<org>--<name>.tar.gz`,
//! the Hub tree format inside) so the repository stays lean; tests unpack them here, once per
//! tarball content, into a directory under the build's target dir.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Every packed repo (`org/name`) and the directory of its unpacked tree (`refs.json`,
/// `repo.json`, `<commit>/…`), unpacking what is not there yet under `root`.
pub fn unpack_all(fixtures: &Path, root: &Path) -> io::Result<BTreeMap<String, PathBuf>> {
    let mut repos = BTreeMap::new();
    let dir = fixtures.join("packed");
    let Ok(entries) = fs::read_dir(&dir) else {
        return Ok(repos);
    };
    for entry in entries {
        let path = entry?.path();
        let Some(stem) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".tar.gz"))
        else {
            continue;
        };
        let Some((org, name)) = stem.split_once("--") else {
            continue;
        };
        let bytes = fs::read(&path)?;
        // Keyed by content, so an updated tarball is unpacked afresh, never mixed with the old.
        let target = root.join(format!("{stem}-{:016x}", fnv1a(&bytes)));
        if !target.exists() {
            let partial = root.join(format!(".{stem}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&partial);
            fs::create_dir_all(&partial)?;
            tar::Archive::new(flate2::read::GzDecoder::new(&bytes[..])).unpack(&partial)?;
            // Another test process may have won the race; its copy is identical.
            if fs::rename(&partial, &target).is_err() {
                let _ = fs::remove_dir_all(&partial);
            }
        }
        repos.insert(format!("{org}/{name}"), target.join(org).join(name));
    }
    Ok(repos)
}

/// FNV-1a: a content key, not a security boundary.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

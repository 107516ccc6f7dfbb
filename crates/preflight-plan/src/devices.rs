//! The device catalogue: common accelerators and their memory, so `--devices h100-80gb:2`
//! means something exact. Capacities are the vendor's figure read as **GiB** (2^30 bytes):
//! HBM and GDDR are built in binary units (an H100's 80 GB is five 16 GiB HBM3 stacks), and
//! the driver reports close to that (nvidia-smi: 81,559 MiB of 81,920 on an H100 80GB; the
//! gap is driver reservation, which `gpu_utilization` exists to leave room for). A device
//! not listed is given by its capacity instead (`85899345920`, `80GiB`, `24GB`), and its
//! `GB` means what a vendor's does: **`24GB` is 24 GiB**, the same as `l4`. Write bytes for
//! an exact decimal figure.

/// 2^30: vendors' "GB" of device memory.
const GIB: u64 = 1 << 30;

/// `(name, capacity in bytes, what it is)`. Names are lower-case, vendor-model-memory.
pub const CATALOGUE: &[(&str, u64, &str)] = &[
    ("a100-40gb", 40 * GIB, "NVIDIA A100 40GB (HBM2)"),
    ("a100-80gb", 80 * GIB, "NVIDIA A100 80GB (HBM2e)"),
    ("h100-80gb", 80 * GIB, "NVIDIA H100 SXM or PCIe 80GB (HBM3)"),
    ("h100-94gb", 94 * GIB, "NVIDIA H100 NVL 94GB (HBM3)"),
    ("h200", 141 * GIB, "NVIDIA H200 141GB (HBM3e)"),
    ("b200", 180 * GIB, "NVIDIA B200 as in DGX B200, 180GB each (HBM3e)"),
    ("l40s", 48 * GIB, "NVIDIA L40S 48GB (GDDR6)"),
    ("l4", 24 * GIB, "NVIDIA L4 24GB (GDDR6)"),
    ("a10g", 24 * GIB, "NVIDIA A10G 24GB (GDDR6), AWS g5"),
    ("rtx-4090", 24 * GIB, "NVIDIA GeForce RTX 4090 24GB (GDDR6X)"),
    ("mi300x", 192 * GIB, "AMD Instinct MI300X 192GB (HBM3)"),
    ("mi325x", 256 * GIB, "AMD Instinct MI325X 256GB (HBM3e)"),
];

/// Units a device capacity may carry. Device memory is sold in binary units under decimal
/// names (an "80 GB" H100 holds 80 GiB), so `GB` reads as GiB here as in the catalogue —
/// one reading everywhere a device size is typed.
const UNITS: &[(&str, u64)] = &[
    ("tib", 1 << 40),
    ("gib", 1 << 30),
    ("mib", 1 << 20),
    ("kib", 1 << 10),
    ("tb", 1 << 40),
    ("gb", 1 << 30),
    ("mb", 1 << 20),
    ("kb", 1 << 10),
    ("b", 1),
];

/// A device's canonical name and capacity: a catalogue name, or a capacity whose canonical
/// name is its byte count.
pub fn capacity(name: &str) -> Result<(String, u64), String> {
    let lower = name.trim().to_ascii_lowercase();
    if let Some((name, bytes, _)) = CATALOGUE.iter().find(|(n, _, _)| *n == lower) {
        return Ok(((*name).to_owned(), *bytes));
    }
    if lower.starts_with(|c: char| c.is_ascii_digit()) {
        let split = lower.find(|c: char| !c.is_ascii_digit()).unwrap_or(lower.len());
        let (digits, unit) = lower.split_at(split);
        let scale = match unit.trim() {
            "" => Some(1),
            unit => UNITS.iter().find(|(u, _)| *u == unit).map(|(_, s)| *s),
        };
        let bytes = scale.and_then(|s| digits.parse::<u64>().ok()?.checked_mul(s));
        return match bytes {
            Some(0) => Err(format!("`{name}`: a device needs more than 0 bytes")),
            Some(bytes) => Ok((bytes.to_string(), bytes)),
            None => Err(format!(
                "`{name}` is not a capacity: whole bytes, optionally with a unit (KiB MiB GiB TiB; KB MB GB TB read the same, as device vendors mean them), below 2^64"
            )),
        };
    }
    // A bare family name (`h100`, `a100`) is ambiguous — SXM or PCIe, 40 or 80 GB — so it is
    // answered with the parts it could mean, never guessed.
    let close: Vec<&str> = CATALOGUE
        .iter()
        .map(|(n, _, _)| *n)
        .filter(|n| !lower.is_empty() && n.starts_with(lower.as_str()))
        .collect();
    if !close.is_empty() {
        return Err(format!("`{name}` is ambiguous: did you mean {}?", close.join(" or ")));
    }
    let known = CATALOGUE.iter().map(|(n, _, _)| *n).collect::<Vec<_>>().join(", ");
    Err(format!(
        "`{name}` is not a known device ({known}); give a capacity such as 80GiB instead"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_names_and_capacities() {
        assert_eq!(capacity("H100-80GB"), Ok(("h100-80gb".to_owned(), 85_899_345_920)));
        assert_eq!(capacity("h200").map(|c| c.1), Ok(141 * GIB));
        assert_eq!(capacity("80GiB"), Ok(("85899345920".to_owned(), 85_899_345_920)));
        // A vendor's "24 GB" of device memory is 24 GiB: typed as a size, the same as `l4`.
        assert_eq!(capacity("24GB").map(|c| c.1), capacity("l4").map(|c| c.1));
        assert_eq!(capacity("24GB").map(|c| c.1), Ok(24 * GIB));
        assert_eq!(capacity("1024").map(|c| c.1), Ok(1024));
        for bad in ["h900", "0", "12XB", "99999999999999999999", "20000000000TB", ""] {
            assert!(capacity(bad).is_err(), "{bad}");
        }
        let h100 = capacity("h100").expect_err("ambiguous");
        assert!(h100.contains("did you mean h100-80gb or h100-94gb"), "{h100}");
        assert!(
            capacity("A100")
                .expect_err("ambiguous")
                .contains("a100-40gb or a100-80gb")
        );
    }

    #[test]
    fn catalogue_names_are_canonical_and_unique() {
        let mut seen = std::collections::HashSet::new();
        for (name, _, _) in CATALOGUE {
            assert_eq!(*name, name.to_ascii_lowercase());
            assert!(seen.insert(*name));
            assert!(!name.contains([':', ',']));
        }
    }
}

//! How a figure reads in text: counts grouped by thousands and byte sizes in binary units. Its
//! own module because the verdict (`render.rs`), `--compare`'s table and the staging progress
//! line (`term.rs`) all print figures, and `render` already depends on `term` for colour.

/// `8190735360` → `8,190,735,360`: the planner's grouping, so findings and tables agree.
pub use preflight_plan::findings::grouped as thousands;

/// A size in the largest binary unit it reaches (TiB past 1,024 GiB): the planner's, so
/// findings and tables agree.
pub use preflight_plan::findings::size as bytes;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(20914757184), "20,914,757,184");
    }
}

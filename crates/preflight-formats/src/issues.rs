//! A bounded log of header issues. A hostile header can make every one of a million tensors
//! wrong; the readers keep the first few issues of each kind one by one and count the rest,
//! so what they return stays small while every issue is still accounted for.

use std::collections::BTreeMap;

/// Issues of one kind kept one by one; the rest are counted in one `Repeated` issue.
pub const KEPT_PER_KIND: usize = 64;

/// An issue type the log can bound: each issue names its kind, and a count of more issues
/// of a kind is itself an issue.
pub trait Issue: Sized {
    /// The issue's kind as a type, so a reader of `Repeated` matches every kind exhaustively.
    type Kind: Copy + Ord;
    fn kind(&self) -> Self::Kind;
    fn repeated(of: Self::Kind, count: u64) -> Self;
}

#[derive(Debug)]
pub struct IssueLog<I: Issue> {
    kept: Vec<I>,
    seen: BTreeMap<I::Kind, u64>,
}

impl<I: Issue> Default for IssueLog<I> {
    fn default() -> Self {
        Self {
            kept: Vec::new(),
            seen: BTreeMap::new(),
        }
    }
}

impl<I: Issue> IssueLog<I> {
    pub fn push(&mut self, issue: I) {
        let seen = self.seen.entry(issue.kind()).or_default();
        *seen += 1;
        if *seen as usize <= KEPT_PER_KIND {
            self.kept.push(issue);
        }
    }

    /// The kept issues, then one `Repeated` per kind past the bound.
    pub fn finish(mut self) -> Vec<I> {
        for (kind, seen) in self.seen {
            let more = seen.saturating_sub(KEPT_PER_KIND as u64);
            if more > 0 {
                self.kept.push(I::repeated(kind, more));
            }
        }
        self.kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    enum Toy {
        A(u64),
        B,
        More(&'static str, u64),
    }

    impl Issue for Toy {
        type Kind = &'static str;
        fn kind(&self) -> &'static str {
            match self {
                Toy::A(_) => "a",
                Toy::B => "b",
                Toy::More(..) => "more",
            }
        }
        fn repeated(of: &'static str, count: u64) -> Self {
            Toy::More(of, count)
        }
    }

    #[test]
    fn each_kind_keeps_a_bounded_few_and_counts_the_rest() {
        let mut log = IssueLog::default();
        for i in 0..1000 {
            log.push(Toy::A(i));
        }
        log.push(Toy::B);
        let issues = log.finish();
        assert_eq!(issues.len(), KEPT_PER_KIND + 2);
        assert_eq!(issues[0], Toy::A(0));
        assert!(issues.contains(&Toy::B));
        assert_eq!(issues.last(), Some(&Toy::More("a", 1000 - KEPT_PER_KIND as u64)));
    }
}

//! `Range` header semantics (RFC 9110 §14), as S3/CloudFront and the Hub apply them.
//!
//! A header that is not a single well-formed byte range is ignored (200, whole body), as the
//! RFC allows and as the real origins do; multi-range requests are ignored the same way,
//! since neither origin answers `multipart/byteranges`.

/// What to send for a request on a file of `total` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RangeReply {
    /// 200 with the whole body.
    Full,
    /// 206 with bytes `start..=end` (`end` already clamped to `total - 1`).
    Partial { start: u64, end: u64 },
    /// 416 with `Content-Range: bytes */total`.
    Unsatisfiable,
}

pub(crate) fn resolve(header: Option<&str>, total: u64) -> RangeReply {
    let Some(spec) = header.and_then(strip_bytes_unit) else {
        return RangeReply::Full;
    };
    if spec.contains(',') {
        return RangeReply::Full;
    }
    let Some((first, last)) = spec.trim().split_once('-') else {
        return RangeReply::Full;
    };
    let (first, last) = (first.trim(), last.trim());
    match (first.is_empty(), last.is_empty()) {
        // `bytes=-n`: the last n bytes.
        (true, false) => {
            let Some(n) = digits(last) else {
                return RangeReply::Full;
            };
            if n == 0 || total == 0 {
                return RangeReply::Unsatisfiable;
            }
            RangeReply::Partial {
                start: total.saturating_sub(n),
                end: total - 1,
            }
        }
        // `bytes=a-` or `bytes=a-b`.
        (false, open_ended) => {
            let Some(start) = digits(first) else {
                return RangeReply::Full;
            };
            let end = if open_ended {
                u64::MAX
            } else {
                match digits(last) {
                    Some(end) if end >= start => end,
                    _ => return RangeReply::Full,
                }
            };
            if start >= total {
                return RangeReply::Unsatisfiable;
            }
            RangeReply::Partial {
                start,
                end: end.min(total - 1),
            }
        }
        (true, true) => RangeReply::Full,
    }
}

fn strip_bytes_unit(header: &str) -> Option<&str> {
    let (unit, spec) = header.trim().split_once('=')?;
    unit.trim().eq_ignore_ascii_case("bytes").then_some(spec)
}

/// A run of ASCII digits; values past `u64::MAX` saturate (they are past any file's end).
fn digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(s.parse().unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::{RangeReply::*, resolve};

    #[test]
    fn forms() {
        let cases = [
            (Some("bytes=0-9"), 100, Partial { start: 0, end: 9 }),
            (Some("bytes=90-200"), 100, Partial { start: 90, end: 99 }),
            (Some("bytes=50-"), 100, Partial { start: 50, end: 99 }),
            (Some("bytes=-10"), 100, Partial { start: 90, end: 99 }),
            (Some("bytes=-1000"), 100, Partial { start: 0, end: 99 }),
            (
                Some("bytes=0-99999999999999999999999"),
                100,
                Partial { start: 0, end: 99 },
            ),
            (Some("BYTES = 1-2"), 100, Partial { start: 1, end: 2 }),
            (Some("bytes=100-"), 100, Unsatisfiable),
            (Some("bytes=100-200"), 100, Unsatisfiable),
            (Some("bytes=-0"), 100, Unsatisfiable),
            (Some("bytes=0-0"), 0, Unsatisfiable),
            (Some("bytes=5-2"), 100, Full),
            (Some("bytes=0-1,5-6"), 100, Full),
            (Some("bytes=abc"), 100, Full),
            (Some("items=0-1"), 100, Full),
            (Some("bytes=-"), 100, Full),
            (None, 100, Full),
        ];
        for (header, total, want) in cases {
            assert_eq!(resolve(header, total), want, "{header:?} of {total}");
        }
    }
}

//! Writes `***` in place of the project secrets a task was given ([`TaskSpec::masked`]),
//! in its log, its output parameters and its messages, whether the worker or the master
//! writes them: a task that prints a secret, or an outside system that echoes one to a
//! callback request, does not publish it.
//!
//! [`TaskSpec::masked`]: crate::proto::TaskSpec

use crate::redact;
use std::borrow::Cow;
use std::sync::Arc;

const MASK: &[u8] = redact::MASK.as_bytes();
/// Shorter values are not masked: they would blank ordinary text, and cannot be secret.
const MIN_LEN: usize = 3;

/// The values to hide. Cheap to clone.
#[derive(Clone, Default)]
pub struct Mask(Arc<[Vec<u8>]>);

impl Mask {
    pub fn new(values: &[String]) -> Mask {
        let mut values: Vec<Vec<u8>> = values
            .iter()
            .filter(|v| v.len() >= MIN_LEN)
            .map(|v| v.as_bytes().to_vec())
            .collect();
        // Longest first, so a secret containing another is hidden whole.
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        Mask(values.into())
    }

    /// `bytes` with every value replaced.
    pub fn bytes<'a>(&self, bytes: &'a [u8]) -> Cow<'a, [u8]> {
        let mut out = Cow::Borrowed(bytes);
        for value in self.0.iter() {
            if let Some(replaced) = replace(&out, value) {
                out = Cow::Owned(replaced);
            }
        }
        out
    }

    pub fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match self.bytes(text.as_bytes()) {
            Cow::Borrowed(_) => Cow::Borrowed(text),
            Cow::Owned(b) => Cow::Owned(String::from_utf8_lossy(&b).into_owned()),
        }
    }

    /// A task's message as people read it: the values replaced, and the password of every
    /// URL in it masked ([`redact::passwords_in`]).
    pub fn message(&self, text: &str) -> String {
        redact::passwords_in(&self.text(text)).into_owned()
    }

    /// A masker for output that arrives in pieces: a value split across two pieces is
    /// still hidden.
    pub fn stream(&self) -> MaskStream {
        MaskStream {
            keep: self.0.first().map_or(0, |v| v.len() - 1),
            whole_lines: !self.0.iter().any(|v| v.contains(&b'\n')),
            mask: self.clone(),
            held: Vec::new(),
        }
    }
}

/// `haystack` with `needle` replaced by `***`; None when it does not occur.
fn replace(haystack: &[u8], needle: &[u8]) -> Option<Vec<u8>> {
    let first = haystack.windows(needle.len()).position(|w| w == needle)?;
    let mut out = Vec::with_capacity(haystack.len());
    out.extend_from_slice(&haystack[..first]);
    let mut rest = &haystack[first..];
    while !rest.is_empty() {
        if rest.starts_with(needle) {
            out.extend_from_slice(MASK);
            rest = &rest[needle.len()..];
        } else {
            out.push(rest[0]);
            rest = &rest[1..];
        }
    }
    Some(out)
}

/// Holds back the last (longest value − 1) bytes of what it was fed, which may be the
/// start of a value the next piece completes; none up to a line's end when no value spans
/// lines, so that a line is written as soon as it is whole.
pub struct MaskStream {
    mask: Mask,
    held: Vec<u8>,
    keep: usize,
    /// No value holds a newline: none continues past one.
    whole_lines: bool,
}

impl MaskStream {
    /// What may be written of `piece` now.
    pub fn feed(&mut self, piece: &[u8]) -> Vec<u8> {
        if self.keep == 0 {
            return piece.to_vec();
        }
        self.held.extend_from_slice(piece);
        let masked = self.mask.bytes(&self.held).into_owned();
        let mut split = masked.len().saturating_sub(self.keep);
        if self.whole_lines
            && let Some(end) = masked.iter().rposition(|b| *b == b'\n')
        {
            split = split.max(end + 1);
        }
        self.held = masked[split..].to_vec();
        masked[..split].to_vec()
    }

    /// The rest, at the end of the output.
    pub fn finish(self) -> Vec<u8> {
        self.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_hidden_whole_and_short_ones_left() {
        let mask = Mask::new(&["hunter2".into(), "hunter2-long".into(), "ab".into()]);
        assert_eq!(mask.text("pw=hunter2-long;hunter2 ab"), "pw=***;*** ab");
        assert!(matches!(mask.text("nothing here"), Cow::Borrowed(_)));
        assert_eq!(Mask::default().text("hunter2"), "hunter2");
        assert_eq!(
            mask.message("GET http://u:pw@h/?k=hunter2 answered: hunter2"),
            "GET http://u:***@h/?k=*** answered: ***"
        );
    }

    #[test]
    fn a_value_split_across_pieces_is_hidden() {
        let mask = Mask::new(&["s3cr3t-value".into()]);
        let text = b"before s3cr3t-value middle s3cr3t-value after";
        for size in 1..text.len() {
            let mut stream = mask.stream();
            let mut out = Vec::new();
            for piece in text.chunks(size) {
                out.extend(stream.feed(piece));
            }
            out.extend(stream.finish());
            assert_eq!(
                String::from_utf8(out).unwrap(),
                "before *** middle *** after",
                "pieces of {size}"
            );
        }
        // A whole line is not held back; a value spanning lines is hidden all the same.
        let mut stream = mask.stream();
        assert_eq!(stream.feed(b"a s3cr3t-val"), b"a");
        assert_eq!(stream.feed(b"ue\n"), b" ***\n");
        let mask = Mask::new(&["two\nlines".into()]);
        let mut stream = mask.stream();
        let mut out = stream.feed(b"one two\n");
        out.extend(stream.feed(b"lines\n"));
        out.extend(stream.finish());
        assert_eq!(out, b"one ***\n");
    }
}

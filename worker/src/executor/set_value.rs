//! Output parameters: stdout lines of the form `${setValue(key=value)}` (DolphinScheduler's
//! convention; `#{setValue(key=value)}` is accepted too) become the task's output map.

use std::collections::HashMap;

/// Longer lines cannot carry an output parameter; they are skipped without buffering.
const MAX_LINE: usize = 64 * 1024;
/// Total bytes of keys and values kept per task; further setValue lines are ignored.
pub(crate) const MAX_OUTPUT: usize = 1024 * 1024;

const MARKERS: [&str; 2] = ["${setValue(", "#{setValue("];

/// Parses one line. Returns every `key=value` pair when the line (leading whitespace aside)
/// starts with a setValue marker; several markers may follow each other on one line.
pub(crate) fn parse_line(line: &str) -> Vec<(String, String)> {
    let mut rest = line.trim();
    let mut pairs = Vec::new();
    while let Some(marker) = MARKERS.iter().find(|m| rest.starts_with(**m)) {
        let body = &rest[marker.len()..];
        let Some(end) = body.find(")}") else { break };
        if let Some((key, value)) = body[..end].split_once('=') {
            let key = key.trim();
            if !key.is_empty() {
                pairs.push((key.to_string(), value.trim().to_string()));
            }
        }
        rest = body[end + 2..].trim_start();
    }
    pairs
}

/// Collects output parameters from a stream of stdout chunks, split at arbitrary points.
#[derive(Default)]
pub(crate) struct OutputScanner {
    line: Vec<u8>,
    /// The current line is longer than [`MAX_LINE`]; skip to its end.
    skipping: bool,
    output: HashMap<String, String>,
    bytes: usize,
    truncated: bool,
}

impl OutputScanner {
    pub(crate) fn feed(&mut self, mut chunk: &[u8]) {
        while !chunk.is_empty() {
            let (part, complete) = match chunk.iter().position(|b| *b == b'\n') {
                Some(i) => (&chunk[..i], true),
                None => (chunk, false),
            };
            if !self.skipping {
                if self.line.len() + part.len() > MAX_LINE {
                    self.skipping = true;
                    self.line.clear();
                } else {
                    self.line.extend_from_slice(part);
                }
            }
            if complete {
                self.end_line();
                chunk = &chunk[part.len() + 1..];
            } else {
                chunk = &[];
            }
        }
    }

    fn end_line(&mut self) {
        if !self.skipping
            && let Ok(line) = std::str::from_utf8(&self.line)
        {
            for (key, value) in parse_line(line) {
                let size = key.len() + value.len();
                if self.bytes + size > MAX_OUTPUT {
                    self.truncated = true;
                    continue;
                }
                self.bytes += size;
                self.output.insert(key, value);
            }
        }
        self.line.clear();
        self.skipping = false;
    }

    /// The output map (later values win) and whether some parameters were dropped for size.
    pub(crate) fn finish(mut self) -> (HashMap<String, String>, bool) {
        if !self.line.is_empty() {
            self.end_line();
        }
        (self.output, self.truncated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(line: &str) -> Option<(String, String)> {
        let mut pairs = parse_line(line);
        assert!(pairs.len() <= 1, "{pairs:?}");
        pairs.pop()
    }

    fn pair(k: &str, v: &str) -> Option<(String, String)> {
        Some((k.to_string(), v.to_string()))
    }

    #[test]
    fn parses_set_value_lines() {
        assert_eq!(one("${setValue(x=1)}"), pair("x", "1"));
        assert_eq!(one("#{setValue(x=1)}"), pair("x", "1"));
        assert_eq!(
            one("  ${setValue( dt = 2026-01-01 )}\r"),
            pair("dt", "2026-01-01")
        );
        assert_eq!(one("${setValue(url=a=b&c=d)}"), pair("url", "a=b&c=d"));
        assert_eq!(one("${setValue(empty=)}"), pair("empty", ""));
        assert_eq!(
            one("${setValue(msg=hello (world))}"),
            pair("msg", "hello (world)")
        );
    }

    #[test]
    fn ignores_lines_that_are_not_set_value() {
        assert_eq!(one("x=1"), None);
        assert_eq!(one("echo ${setValue(x=1)}"), None);
        assert_eq!(one("${setValue(x=1"), None);
        assert_eq!(one("${setValue(=1)}"), None);
        assert_eq!(one("${setValue(novalue)}"), None);
        assert_eq!(one("${setvalue(x=1)}"), None);
        assert_eq!(one(""), None);
    }

    #[test]
    fn parses_several_markers_on_one_line() {
        assert_eq!(
            parse_line("${setValue(a=1)} ${setValue(b=2)}"),
            vec![
                ("a".to_string(), "1".to_string()),
                ("b".to_string(), "2".to_string())
            ]
        );
    }

    #[test]
    fn scanner_joins_chunks_and_later_values_win() {
        let mut s = OutputScanner::default();
        s.feed(b"hello\n${setVa");
        s.feed(b"lue(x=1)}\nnoise\n${setValue(y=2)}\n");
        s.feed(b"${setValue(x=3)}");
        let (out, truncated) = s.finish();
        assert!(!truncated);
        assert_eq!(out.len(), 2);
        assert_eq!(out["x"], "3");
        assert_eq!(out["y"], "2");
    }

    #[test]
    fn scanner_skips_overlong_lines_and_caps_output() {
        let mut s = OutputScanner::default();
        let mut long = b"${setValue(big=".to_vec();
        long.extend(std::iter::repeat_n(b'a', MAX_LINE));
        long.extend_from_slice(b")}\n${setValue(ok=1)}\n");
        s.feed(&long);
        s.feed(&[0xff, 0xfe, b'\n']);
        let (out, truncated) = s.finish();
        assert_eq!(out.keys().collect::<Vec<_>>(), ["ok"]);
        assert!(!truncated);

        let mut s = OutputScanner::default();
        let value = "v".repeat(60 * 1024);
        for i in 0..20 {
            s.feed(format!("${{setValue(k{i}={value})}}\n").as_bytes());
        }
        let (out, truncated) = s.finish();
        assert!(truncated);
        assert!(out.len() < 20 && !out.is_empty());
        assert!(out.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>() <= MAX_OUTPUT);
    }
}

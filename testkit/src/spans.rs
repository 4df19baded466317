//! When task runs happened, from `<tag> start|end <nanoseconds>` lines in a file, and how
//! many ran at once.

use std::collections::HashMap;
use std::path::Path;

/// A shell command that records when it started and ended under `tag`.
pub fn timed(file: &Path, tag: &str, seconds: &str) -> String {
    let f = file.display();
    format!(
        "echo \"{tag} start $(date +%s%N)\" >> {f}; sleep {seconds}; echo \"{tag} end $(date +%s%N)\" >> {f}"
    )
}

/// (tag, start, end) per tag, from the lines `timed` wrote, earliest start first.
pub fn intervals(file: &Path) -> Vec<(String, u128, u128)> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut spans: HashMap<String, (u128, u128)> = HashMap::new();
    for line in text.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [tag, edge, at] = parts[..] else {
            panic!("bad line {line:?}")
        };
        let at: u128 = at.parse().unwrap();
        let span = spans.entry(tag.to_string()).or_default();
        match edge {
            "start" => span.0 = at,
            _ => span.1 = at,
        }
    }
    let mut out: Vec<_> = spans.into_iter().map(|(t, (s, e))| (t, s, e)).collect();
    out.sort_by_key(|(_, s, _)| *s);
    out
}

/// Most spans (label, start, end) open at the same moment.
pub fn max_overlap(spans: &[(String, u128, u128)]) -> usize {
    let mut edges: Vec<(u128, i32)> = spans
        .iter()
        .flat_map(|(_, s, e)| [(*s, 1), (*e, -1)])
        .collect();
    // An end before a start at the same instant: touching is not overlapping.
    edges.sort();
    let (mut open, mut most) = (0, 0);
    for (_, d) in edges {
        open += d;
        most = most.max(open);
    }
    most as usize
}

//! The results table, the facts that make it reproducible (date, machine, commit,
//! command) and the section of BENCHMARKS.md it replaces.

use crate::scenarios::{Metric, Target};
use crate::stats::Summary;
use anyhow::{Context, Result};
use std::fmt::Write;
use std::path::Path;

pub struct Row {
    pub scenario: &'static str,
    pub metric: &'static Metric,
    pub summary: Summary,
}

/// The markdown table: one line per metric, the median held against its design target.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| scenario | metric | median | min | max | runs | target | median / target |\n\
         |---|---|--:|--:|--:|--:|--:|--:|\n",
    );
    for r in rows {
        let s = r.summary;
        let (target, ratio) = match r.metric.target {
            None => ("—".to_string(), "—".to_string()),
            Some(t) => {
                let (sign, goal, met) = match t {
                    Target::AtMost(g) => ("≤", g, s.median <= g),
                    Target::AtLeast(g) => ("≥", g, s.median >= g),
                };
                let verdict = if met { "met" } else { "missed" };
                (
                    format!("{sign} {}", num(goal)),
                    format!("{:.2} ({verdict})", s.median / goal),
                )
            }
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {target} | {ratio} |",
            r.scenario,
            r.metric.name,
            num(s.median),
            num(s.min),
            num(s.max),
            s.n
        );
    }
    out
}

pub fn num(v: f64) -> String {
    match v.abs() {
        x if x >= 1000.0 => format!("{v:.0}"),
        x if x >= 10.0 => format!("{v:.1}"),
        _ => format!("{v:.2}"),
    }
}

/// The section `key` of BENCHMARKS.md, between its markers, for a shoal run as `mode`.
pub fn section(key: &str, title: &str, mode: &str, table: &str, notes: &str) -> String {
    let date = chrono::Utc::now().format("%Y-%m-%d %H:%M UTC");
    format!(
        "<!-- bench:{key}:start -->\n\
         ## {title}\n\n\
         - date: {date}\n\
         - machine: {}\n\
         - commit: {}\n\
         - mode: {mode}\n\
         - reproduce: `{}`\n\n\
         {table}\n\
         {notes}\n\
         <!-- bench:{key}:end -->\n",
        machine(),
        commit(),
        command(),
    )
}

/// Replaces the section `key` in `path`, keeping everything else; a new one goes under the
/// title and its opening paragraphs, above the older sections.
pub fn write_section(path: &Path, key: &str, section: &str) -> Result<()> {
    let old = match std::fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "# Benchmarks\n".into(),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let new = replace_section(&old, key, section);
    std::fs::write(path, new).with_context(|| format!("cannot write {}", path.display()))
}

fn replace_section(old: &str, key: &str, section: &str) -> String {
    let start = format!("<!-- bench:{key}:start -->");
    let end = format!("<!-- bench:{key}:end -->");
    if let Some(a) = old.find(&start)
        && let Some(b) = old[a..].find(&end).map(|b| a + b + end.len())
    {
        let rest = old[b..].strip_prefix('\n').unwrap_or(&old[b..]);
        return format!("{}{section}{rest}", &old[..a]);
    }
    // The first heading or section marker after the title's line.
    let title_end = old.find('\n').map_or(old.len(), |i| i + 1);
    let mut at = title_end;
    for line in old[title_end..].split_inclusive('\n') {
        if line.starts_with('#') || line.starts_with("<!-- bench:") {
            return format!("{}{section}\n{}", &old[..at], &old[at..]);
        }
        at += line.len();
    }
    format!("{}\n\n{section}", old.trim_end())
}

/// `N × model` from /proc/cpuinfo and the CPUs this process may use.
fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!("{cpus} CPUs (nproc), {model}")
}

fn commit() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "--short", "HEAD"]) {
        None => "unknown".into(),
        // Changed docs (BENCHMARKS.md itself, being written section by section) do not
        // change what was measured.
        Some(c)
            if git(&["status", "--porcelain", "--", ".", ":(exclude)*.md"])
                .is_some_and(|s| !s.is_empty()) =>
        {
            format!("{c} (with uncommitted changes)")
        }
        Some(c) => c,
    }
}

/// The command line that reproduces this run, from the repository root.
fn command() -> String {
    let args: Vec<String> = std::env::args().skip(1).map(|a| quote(&a)).collect();
    format!(
        "cargo build --release -p shoal -p shoal-bench && target/release/shoal-bench {}",
        args.join(" ")
    )
}

fn quote(a: &str) -> String {
    let plain = !a.is_empty()
        && a.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:=,@".contains(c));
    if plain {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_section_is_replaced_in_place_and_others_are_kept() {
        let doc = "# Benchmarks\n\nintro\n\n<!-- bench:cluster:start -->\nold\n<!-- bench:cluster:end -->\n\
                   <!-- bench:standalone:start -->\nold\n<!-- bench:standalone:end -->\ntail\n";
        let new = "<!-- bench:standalone:start -->\nnew\n<!-- bench:standalone:end -->\n";
        let out = replace_section(doc, "standalone", new);
        assert_eq!(
            out,
            "# Benchmarks\n\nintro\n\n<!-- bench:cluster:start -->\nold\n<!-- bench:cluster:end -->\n\
             <!-- bench:standalone:start -->\nnew\n<!-- bench:standalone:end -->\ntail\n"
        );
        let appended = replace_section("# Benchmarks\n", "cluster", "<!-- c -->\n");
        assert_eq!(appended, "# Benchmarks\n\n<!-- c -->\n");
        let under_title = replace_section(doc, "airflow", "<!-- a -->\n");
        assert_eq!(
            under_title,
            doc.replace("intro\n\n", "intro\n\n<!-- a -->\n\n")
        );
    }
}

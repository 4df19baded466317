//! A unified diff of two texts by lines, as `shoal workflow diff` prints it: the lines
//! both share at the start and end are matched first, the rest by a longest common
//! subsequence (definitions differ in a few places).

/// Lines of unchanged context around each change.
const CONTEXT: usize = 3;
/// Above this many cells (changed lines of one side times the other's) the middle is
/// shown as removed and added whole rather than matched line by line.
const MAX_CELLS: usize = 16_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line<'a> {
    Same(&'a str),
    Del(&'a str),
    Add(&'a str),
}

/// The unified diff of `old` and `new` with headers `--- from` and `+++ to`; None when
/// they are equal.
pub fn unified(old: &str, new: &str, from: &str, to: &str) -> Option<String> {
    let lines = diff(old, new);
    let changed: Vec<usize> = (0..lines.len())
        .filter(|&i| !matches!(lines[i], Line::Same(_)))
        .collect();
    let first = *changed.first()?;
    let mut out = format!("--- {from}\n+++ {to}\n");
    // Changes closer than twice the context share a hunk.
    let mut start = first;
    let mut end = first;
    for &i in &changed[1..] {
        if i - end > 2 * CONTEXT {
            hunk(&lines, start, end, &mut out);
            start = i;
        }
        end = i;
    }
    hunk(&lines, start, end, &mut out);
    Some(out)
}

/// Writes the hunk of the changes from `first` to `last` (indexes into `lines`) with
/// their context.
fn hunk(lines: &[Line], first: usize, last: usize, out: &mut String) {
    let from = first.saturating_sub(CONTEXT);
    let to = (last + CONTEXT + 1).min(lines.len());
    let old_before = lines[..from]
        .iter()
        .filter(|l| !matches!(l, Line::Add(_)))
        .count();
    let new_before = lines[..from]
        .iter()
        .filter(|l| !matches!(l, Line::Del(_)))
        .count();
    let part = &lines[from..to];
    let old_len = part.iter().filter(|l| !matches!(l, Line::Add(_))).count();
    let new_len = part.iter().filter(|l| !matches!(l, Line::Del(_))).count();
    // An empty side is numbered by the line before it, as diff(1) does.
    let start = |before: usize, len: usize| if len == 0 { before } else { before + 1 };
    out.push_str(&format!(
        "@@ -{},{old_len} +{},{new_len} @@\n",
        start(old_before, old_len),
        start(new_before, new_len)
    ));
    for line in part {
        let (mark, text) = match line {
            Line::Same(t) => (' ', t),
            Line::Del(t) => ('-', t),
            Line::Add(t) => ('+', t),
        };
        out.push(mark);
        out.push_str(text);
        out.push('\n');
    }
}

fn diff<'a>(old: &'a str, new: &'a str) -> Vec<Line<'a>> {
    let x: Vec<&str> = old.lines().collect();
    let y: Vec<&str> = new.lines().collect();
    let head = x.iter().zip(&y).take_while(|(a, b)| a == b).count();
    let tail = x[head..]
        .iter()
        .rev()
        .zip(y[head..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let mut out: Vec<Line> = x[..head].iter().map(|l| Line::Same(l)).collect();
    middle(&x[head..x.len() - tail], &y[head..y.len() - tail], &mut out);
    out.extend(x[x.len() - tail..].iter().map(|l| Line::Same(l)));
    out
}

/// The lines of `x` and `y`, matched by their longest common subsequence.
fn middle<'a>(x: &[&'a str], y: &[&'a str], out: &mut Vec<Line<'a>>) {
    let (n, m) = (x.len(), y.len());
    if n.saturating_mul(m) > MAX_CELLS {
        out.extend(x.iter().map(|l| Line::Del(l)));
        out.extend(y.iter().map(|l| Line::Add(l)));
        return;
    }
    // lcs[i][j]: the length of the longest common subsequence of x[i..] and y[j..].
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if x[i] == y[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        if x[i] == y[j] {
            out.push(Line::Same(x[i]));
            (i, j) = (i + 1, j + 1);
        } else if lcs[i + 1][j] >= lcs[i][j + 1] {
            out.push(Line::Del(x[i]));
            i += 1;
        } else {
            out.push(Line::Add(y[j]));
            j += 1;
        }
    }
    out.extend(x[i..].iter().map(|l| Line::Del(l)));
    out.extend(y[j..].iter().map(|l| Line::Add(l)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_have_no_diff() {
        assert_eq!(unified("a\nb\n", "a\nb\n", "v1", "v2"), None);
    }

    #[test]
    fn a_changed_line_is_shown_with_its_context() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n";
        let new = "1\n2\n3\n4\nfive\n6\n7\n8\n";
        let d = unified(old, new, "v1", "v2").unwrap();
        assert_eq!(
            d,
            "--- v1\n+++ v2\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"
        );
    }

    #[test]
    fn far_apart_changes_get_hunks_of_their_own() {
        let old: String = (1..=20).map(|i| format!("{i}\n")).collect();
        let new: String = (1..=20)
            .filter(|&i| i != 19)
            .map(|i| match i {
                2 => "two\n".to_string(),
                i => format!("{i}\n"),
            })
            .collect();
        let d = unified(&old, &new, "a", "b").unwrap();
        assert_eq!(d.matches("@@ -").count(), 2, "{d}");
        assert!(d.contains("@@ -1,5 +1,5 @@\n 1\n-2\n+two\n"), "{d}");
        assert!(
            d.contains("@@ -16,5 +16,4 @@\n 16\n 17\n 18\n-19\n 20\n"),
            "{d}"
        );
    }

    #[test]
    fn lines_added_to_an_empty_text_count_from_zero() {
        let d = unified("", "a\n", "a", "b").unwrap();
        assert_eq!(d, "--- a\n+++ b\n@@ -0,0 +1,1 @@\n+a\n");
    }
}

//! Plain aligned text tables for terminal output.

use serde_json::Value;

/// Left-aligned columns separated by two spaces; the last column is not padded.
pub fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = headers.iter().map(|h| h.to_uppercase()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let last = row.len().saturating_sub(1);
        for (i, cell) in row.iter().enumerate() {
            if i == last {
                out.push_str(cell);
            } else {
                let pad = widths[i] - cell.chars().count();
                out.push_str(cell);
                out.push_str(&" ".repeat(pad + 2));
            }
        }
        out.push('\n');
    }
    out
}

/// A JSON field as a table cell: strings bare, null as "-".
pub fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// An RFC 3339 time without its milliseconds, e.g. `2026-01-01T10:00:00Z`.
pub fn time(v: &Value) -> String {
    match v.as_str() {
        Some(s) => match (s.find('.'), s.strip_suffix('Z')) {
            (Some(dot), Some(_)) => format!("{}Z", &s[..dot]),
            _ => s.to_string(),
        },
        None => cell(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn columns_line_up() {
        let rows = vec![
            vec![
                "1".to_string(),
                "etl_daily".to_string(),
                "running".to_string(),
            ],
            vec!["12".to_string(), "x".to_string(), "-".to_string()],
        ];
        let t = render(&["id", "workflow", "state"], &rows);
        assert_eq!(
            t,
            "ID  WORKFLOW   STATE\n1   etl_daily  running\n12  x          -\n"
        );
    }

    #[test]
    fn cells_and_times() {
        assert_eq!(cell(&json!(null)), "-");
        assert_eq!(cell(&json!("w1:7000")), "w1:7000");
        assert_eq!(cell(&json!(3)), "3");
        assert_eq!(
            time(&json!("2026-01-01T10:00:00.123Z")),
            "2026-01-01T10:00:00Z"
        );
        assert_eq!(time(&json!(null)), "-");
    }
}

//! The HTML of form pages: plain, server-rendered and usable without JavaScript or the
//! web UI. Every label is bound to its control, an error sits under its field and is
//! named by the control's `aria-describedby`, and the first answer after a submit says
//! what happened at the top. No template engine is in the dependency tree, so the few
//! pages are written here, and every value from a definition, a submission or the store
//! goes through [`escape`].

use shoal_common::trigger::{FieldType, FormField};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// `text` with the characters that mean something in HTML text and in quoted attribute
/// values replaced by their references.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A whole page: `title` (escaped here) and `body` (HTML built by this module).
fn document(title: &str, body: &str) -> String {
    format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · shoal</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 40rem; margin: 2rem auto; padding: 0 1rem; color: #1d2230; }}
label {{ display: block; font-weight: 600; margin-top: 1rem; }}
input, select {{ display: block; font: inherit; padding: .4rem; margin-top: .25rem; width: 100%; box-sizing: border-box; }}
[aria-invalid="true"] {{ border: 2px solid #b3261e; }}
.error {{ color: #b3261e; margin: .25rem 0 0; }}
.summary {{ border: 2px solid #b3261e; padding: .5rem 1rem; }}
button {{ font: inherit; margin-top: 1.5rem; padding: .5rem 1.5rem; }}
.muted {{ color: #5b6375; }}
</style>
</head>
<body>
<main>
{body}
</main>
</body>
</html>
"#,
        title = escape(title),
    )
}

/// What a form page shows: its fields with the values submitted and their errors.
pub(super) struct FormPage<'a> {
    pub title: &'a str,
    pub fields: &'a [FormField],
    pub values: &'a BTreeMap<String, String>,
    pub errors: &'a BTreeMap<String, String>,
    /// Who is signed in, when someone is.
    pub user: Option<&'a str>,
}

/// The form, or the form again with what was wrong.
pub(super) fn form(p: &FormPage<'_>) -> String {
    let mut body = format!("<h1>{}</h1>\n", escape(p.title));
    if let Some(user) = p.user {
        let _ = writeln!(
            body,
            "<p class=\"muted\">Signed in as {}.</p>",
            escape(user)
        );
    }
    if !p.errors.is_empty() {
        // First in the page, so a reader meets it before the fields; each item leads to
        // its field.
        body.push_str("<div class=\"summary\" role=\"alert\" aria-labelledby=\"problems\">\n");
        let _ = writeln!(
            body,
            "<h2 id=\"problems\">Nothing was started: {} to correct</h2>\n<ul>",
            match p.errors.len() {
                1 => "1 field".to_string(),
                n => format!("{n} fields"),
            }
        );
        for f in p.fields {
            if let Some(e) = p.errors.get(&f.name) {
                let _ = writeln!(
                    body,
                    "<li><a href=\"#{}\">{}</a></li>",
                    control_id(f),
                    escape(e)
                );
            }
        }
        body.push_str("</ul>\n</div>\n");
    }
    body.push_str("<form method=\"post\" novalidate>\n");
    for f in p.fields {
        field(&mut body, f, p.values.get(&f.name), p.errors.get(&f.name));
    }
    body.push_str("<button type=\"submit\">Start</button>\n</form>\n");
    document(p.title, &body)
}

/// The id of a field's control (field names are parameter names: letters, digits, `_`).
fn control_id(f: &FormField) -> String {
    format!("field-{}", escape(&f.name))
}

fn field(out: &mut String, f: &FormField, value: Option<&String>, error: Option<&String>) {
    let id = control_id(f);
    let name = escape(&f.name);
    let value = value.map_or(String::new(), |v| escape(v));
    let required = if f.required {
        " <span class=\"muted\">(required)</span>"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "<label for=\"{id}\">{}{required}</label>",
        escape(f.label())
    );
    let mut attrs = format!("id=\"{id}\" name=\"{name}\"");
    if f.required {
        attrs.push_str(" required");
    }
    if error.is_some() {
        let _ = write!(
            attrs,
            " aria-invalid=\"true\" aria-describedby=\"{id}-error\""
        );
    }
    match f.field_type {
        FieldType::Select => {
            let _ = writeln!(out, "<select {attrs}>");
            let _ = writeln!(out, "<option value=\"\">Choose…</option>");
            for o in &f.options {
                let o = escape(o);
                let selected = if o == value { " selected" } else { "" };
                let _ = writeln!(out, "<option value=\"{o}\"{selected}>{o}</option>");
            }
            out.push_str("</select>\n");
        }
        kind => {
            let input = match kind {
                FieldType::Number => "number\" step=\"any",
                FieldType::Date => "date",
                _ => "text",
            };
            let _ = writeln!(out, "<input type=\"{input}\" {attrs} value=\"{value}\">");
        }
    }
    if let Some(e) = error {
        let _ = writeln!(
            out,
            "<p class=\"error\" id=\"{id}-error\">{}</p>",
            escape(e)
        );
    }
}

/// The answer to a submit that started a run.
pub(super) struct Started<'a> {
    pub title: &'a str,
    pub command_id: i64,
    /// None when no master claimed the run yet.
    pub instance: Option<i64>,
    /// Whether to link to the run in the web UI (the submitter may see it there).
    pub link: bool,
}

pub(super) fn started(s: &Started<'_>) -> String {
    let mut body = format!("<h1>{}</h1>\n", escape(s.title));
    body.push_str("<div role=\"status\">\n");
    match s.instance {
        Some(id) => {
            let _ = writeln!(
                body,
                "<p>Run started: workflow instance <strong>{id}</strong>.</p>"
            );
            if s.link {
                let _ = writeln!(
                    body,
                    "<p><a href=\"/instances/{id}\">See run {id} in shoal</a></p>"
                );
            }
        }
        None => {
            let _ = writeln!(
                body,
                "<p>Run requested: command <strong>{}</strong>. It starts as soon as a master takes it.</p>",
                s.command_id
            );
        }
    }
    body.push_str("</div>\n<p><a href=\"\">Fill in the form again</a></p>\n");
    document(s.title, &body)
}

/// A page that only says something: a refusal or an error.
pub(super) fn message(title: &str, text: &str) -> String {
    let body = format!(
        "<h1>{}</h1>\n<p role=\"alert\">{}</p>\n",
        escape(title),
        escape(text)
    );
    document(title, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_replaces_what_html_reads_as_markup() {
        assert_eq!(
            escape(r#"<script>alert("x&y")</script> it's"#),
            "&lt;script&gt;alert(&quot;x&amp;y&quot;)&lt;/script&gt; it&#39;s"
        );
        assert_eq!(escape("plain ünïcode"), "plain ünïcode");
        assert_eq!(
            escape("&amp;"),
            "&amp;amp;",
            "escaped once more, never decoded"
        );
    }

    fn field(yaml: &str) -> FormField {
        serde_norway::from_str(yaml).unwrap()
    }

    #[test]
    fn a_form_binds_labels_and_errors_to_its_controls_and_escapes_values() {
        let fields = [
            field("{name: who, label: 'Name <b>', required: true}"),
            field("{name: colour, type: select, options: ['red\"', blue]}"),
            field("{name: day, type: date}"),
        ];
        let values: BTreeMap<String, String> =
            [("who", "\"><script>x</script>"), ("colour", "red\"")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into();
        let errors: BTreeMap<String, String> =
            [("who".to_string(), "Bad <value>".to_string())].into();
        let html = form(&FormPage {
            title: "p/w <t>",
            fields: &fields,
            values: &values,
            errors: &errors,
            user: Some("ann<"),
        });
        assert!(
            html.contains("<title>p/w &lt;t&gt; · shoal</title>"),
            "{html}"
        );
        assert!(html.contains("Signed in as ann&lt;."));
        assert!(html.contains(
            "<label for=\"field-who\">Name &lt;b&gt; <span class=\"muted\">(required)</span></label>"
        ));
        assert!(html.contains(
            "<input type=\"text\" id=\"field-who\" name=\"who\" required aria-invalid=\"true\" aria-describedby=\"field-who-error\" value=\"&quot;&gt;&lt;script&gt;x&lt;/script&gt;\">"
        ), "{html}");
        assert!(html.contains("<p class=\"error\" id=\"field-who-error\">Bad &lt;value&gt;</p>"));
        assert!(html.contains("<li><a href=\"#field-who\">Bad &lt;value&gt;</a></li>"));
        assert!(html.contains("<option value=\"red&quot;\" selected>red&quot;</option>"));
        assert!(html.contains("<option value=\"blue\">blue</option>"));
        assert!(html.contains("<input type=\"date\" id=\"field-day\" name=\"day\" value=\"\">"));
        assert!(!html.contains("<script>"));
        assert!(!html.contains("<b>"));
    }

    #[test]
    fn a_started_run_is_named_and_linked_only_when_asked() {
        let s = |instance, link| {
            started(&Started {
                title: "t",
                command_id: 4,
                instance,
                link,
            })
        };
        assert!(s(Some(9), true).contains("<a href=\"/instances/9\">See run 9 in shoal</a>"));
        assert!(!s(Some(9), false).contains("/instances/9"));
        assert!(s(None, true).contains("command <strong>4</strong>"));
    }
}

//! Form triggers over the real `shoal standalone` with auth on: the page a browser gets,
//! a submit that starts a run with the fields as parameters, a refused field shown next to
//! it with nothing started, bad definitions refused at apply, and who may use a form
//! (members, any signed-in user, anyone at a rate; never a page of another site).

mod support;

use reqwest::blocking::{Client, RequestBuilder, Response};
use serde_json::{Value, json};
use support::{API_TOKEN, Env, Standalone};

fn server() -> Env {
    Env::Standalone(Standalone::start_with(&[
        ("SHOAL_TOKEN", API_TOKEN),
        ("SHOAL_SINGLE_TEAM", "true"),
    ]))
}

const WORKFLOW: &str = r#"
name: orders
params: { amount: "0", day: none, colour: none, note: none }
triggers:
  - name: order
    type: form
    fields:
      - { name: amount, label: "Amount (EUR)", type: number, required: true }
      - { name: day, type: date }
      - { name: colour, type: select, options: [red, blue], required: true }
      - { name: note }
  - { name: signed, type: form, access: login, fields: [{ name: note, required: true }] }
  - { name: open, type: form, access: public, rate: 2/m, fields: [{ name: note }] }
tasks:
  - { name: t, type: noop }
  - { name: echo, type: shell, command: 'echo "note=${note}"' }
"#;

fn client() -> Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Client::builder().build().unwrap()
}

fn url(e: &Env, trigger: &str) -> String {
    format!("{}/forms/default/orders/{trigger}", e.api().base)
}

/// A form-encoded POST of `fields`, from the form's own page (its `Origin`).
fn submit(e: &Env, trigger: &str, token: Option<&str>, fields: &[(&str, &str)]) -> Response {
    let mut req = post(url(e, trigger), fields).header("origin", &e.api().base);
    if let Some(token) = token {
        // As a browser sends it once asked: the user's token as the Basic password.
        req = req.basic_auth("someone", Some(token));
    }
    req.send().unwrap()
}

/// A POST of `fields` form-encoded, as a browser sends a form.
fn post(url: String, fields: &[(&str, &str)]) -> RequestBuilder {
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish();
    client()
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
}

fn runs(e: &Env) -> Vec<Value> {
    let list = e.api().get("/instances?workflow=orders");
    list.as_array().unwrap().clone()
}

/// The instance id a started page names.
fn started_instance(page: &str) -> i64 {
    let at = page.find("workflow instance <strong>").expect(page) + 26;
    page[at..].split('<').next().unwrap().parse().expect(page)
}

/// A user with `role` in project default (none: no role), and their token.
fn user(e: &Env, name: &str, role: Option<&str>) -> String {
    let (status, body) = e.api().post("/users", &json!({ "name": name }).to_string());
    assert_eq!(status, 201, "{body}");
    let (status, token) = e
        .api()
        .post("/tokens", &json!({"name": "t", "user": name}).to_string());
    assert_eq!(status, 201, "{token}");
    if let Some(role) = role {
        let (status, body) = e.api().put(
            &format!("/projects/default/members/{name}"),
            &json!({ "role": role }).to_string(),
        );
        assert_eq!(status, 200, "{body}");
    }
    token["token"].as_str().unwrap().to_string()
}

#[test]
fn a_form_starts_a_run_with_its_fields_and_shows_a_refused_field_beside_it() {
    let e = server();
    e.apply(WORKFLOW);
    let page = client()
        .get(url(&e, "order"))
        .bearer_auth(API_TOKEN)
        .send()
        .unwrap();
    assert_eq!(page.status(), 200);
    assert!(
        page.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let page = page.text().unwrap();
    assert!(
        page.contains("<label for=\"field-amount\">Amount (EUR)"),
        "{page}"
    );
    assert!(page.contains(
        "<input type=\"number\" step=\"any\" id=\"field-amount\" name=\"amount\" required"
    ));
    assert!(page.contains("<select id=\"field-colour\" name=\"colour\" required>"));

    // A missing required field and a bad date: both named beside their field, no run.
    let refused = submit(
        &e,
        "order",
        Some(API_TOKEN),
        &[("day", "31/12/2026"), ("colour", "blue")],
    );
    assert_eq!(refused.status(), 400);
    let page = refused.text().unwrap();
    assert!(
        page.contains("aria-describedby=\"field-amount-error\""),
        "{page}"
    );
    assert!(
        page.contains("<p class=\"error\" id=\"field-amount-error\">Amount (EUR) is required.</p>"),
        "{page}"
    );
    assert!(page.contains("id=\"field-day-error\""), "{page}");
    assert!(
        page.contains("value=\"31/12/2026\""),
        "what was typed stays: {page}"
    );
    assert!(runs(&e).is_empty(), "nothing started");

    // A field's value is data: shell syntax in it reaches the task as text, never as code.
    let mark = std::env::temp_dir().join(format!("shoal-form-{}", std::process::id()));
    let note = format!("<b>fast</b>$(touch {})", mark.display());
    let ok = submit(
        &e,
        "order",
        Some(API_TOKEN),
        &[
            ("amount", "12.5"),
            ("day", "2026-12-31"),
            ("colour", "red"),
            ("note", &note),
        ],
    );
    assert_eq!(ok.status(), 200);
    let page = ok.text().unwrap();
    let id = started_instance(&page);
    assert!(
        page.contains(&format!("<a href=\"/instances/{id}\">")),
        "a member gets a link: {page}"
    );
    let inst = e.end(id);
    assert_eq!(inst["state"], "success", "{inst}");
    assert_eq!(
        inst["params"],
        json!({"amount": "12.5", "day": "2026-12-31", "colour": "red", "note": note})
    );
    let echo = support::attempts(&inst, "echo")[0]["id"].as_i64().unwrap();
    let (_, log) = e.api().log(echo);
    assert!(log.contains(&format!("note={note}")), "{log}");
    assert!(!mark.exists(), "a form value ran as a command");

    // Bad definitions are refused at apply, naming the field.
    for (fields, says) in [
        ("[{ name: c, type: select }]", "a select needs options"),
        (
            "[{ name: c }, { name: c }]",
            "the name is used more than once",
        ),
        ("[{ name: c, type: colour }]", "unknown variant `colour`"),
    ] {
        let yaml = format!(
            "name: bad\ntriggers:\n  - {{ name: f, type: form, fields: {fields} }}\ntasks:\n  - {{ name: t, type: noop }}\n"
        );
        let (status, body) = e.api().post("/projects/default/workflows", &yaml);
        assert_eq!(status, 400, "{fields}: {body}");
        assert!(
            body["error"].as_str().unwrap().contains(says),
            "{fields}: {body}"
        );
    }
    let public = "name: bad\ntriggers:\n  - { name: f, type: form, access: public, fields: [{ name: c }] }\ntasks:\n  - { name: t, type: noop }\n";
    let (status, body) = e.api().post("/projects/default/workflows", public);
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("allow_ips, or give a rate"),
        "{body}"
    );
}

#[test]
fn members_login_and_public_forms_let_in_whom_they_say_and_no_other_site() {
    let e = server();
    e.apply(WORKFLOW);
    let viewer = user(&e, "vic", Some("viewer"));
    let operator = user(&e, "opal", Some("operator"));
    let stranger = user(&e, "lou", None);
    let note = [("note", "hi")];

    // members: asked to sign in (a browser then asks for a user and password), a viewer
    // is refused, an operator is in.
    let asked = client().get(url(&e, "order")).send().unwrap();
    assert_eq!(asked.status(), 401);
    let challenge = asked.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        challenge.starts_with("Basic realm=\"shoal form default/orders/order\""),
        "{challenge}"
    );
    assert!(asked.text().unwrap().contains("API tokens"));
    let as_viewer = client()
        .get(url(&e, "order"))
        .basic_auth("vic", Some(&viewer))
        .send()
        .unwrap();
    assert_eq!(as_viewer.status(), 403);
    let as_operator = client()
        .get(url(&e, "order"))
        .basic_auth("opal", Some(&operator))
        .send()
        .unwrap();
    assert_eq!(as_operator.status(), 200);
    let fields = [("amount", "1"), ("colour", "blue")];
    assert_eq!(submit(&e, "order", Some(&viewer), &fields).status(), 403);
    assert_eq!(submit(&e, "order", Some(&stranger), &fields).status(), 403);
    assert_eq!(
        submit(&e, "order", Some("wrong-token"), &fields).status(),
        401
    );

    // A page of another site cannot post it with the user's credentials.
    let forged = post(url(&e, "order"), &fields)
        .header("origin", "http://evil.example")
        .basic_auth("opal", Some(&operator))
        .send()
        .unwrap();
    assert_eq!(forged.status(), 403);
    assert!(forged.text().unwrap().contains("another site"));
    assert!(runs(&e).is_empty(), "nothing started");
    let ok = submit(&e, "order", Some(&operator), &fields);
    assert_eq!(ok.status(), 200);
    started_instance(&ok.text().unwrap());

    // login: any signed-in user, none without.
    assert_eq!(submit(&e, "signed", None, &note).status(), 401);
    let ok = submit(&e, "signed", Some(&stranger), &note);
    assert_eq!(ok.status(), 200);
    let page = ok.text().unwrap();
    let id = started_instance(&page);
    assert!(
        !page.contains("/instances/"),
        "no link for who cannot see the run: {page}"
    );
    assert_eq!(e.end(id)["params"]["note"], "hi");

    // public: anyone, at its rate; a form of another type is not found here.
    let page = client().get(url(&e, "open")).send().unwrap();
    assert_eq!(page.status(), 200);
    for _ in 0..2 {
        let ok = post(url(&e, "open"), &note).send().unwrap();
        assert_eq!(ok.status(), 200);
        assert!(!ok.text().unwrap().contains("/instances/"));
    }
    let limited = post(url(&e, "open"), &note).send().unwrap();
    assert_eq!(limited.status(), 429);
    assert!(limited.headers().contains_key("retry-after"));
    assert_eq!(runs(&e).len(), 4);
    let status = client()
        .get(format!("{}/forms/default/orders/nope", e.api().base))
        .send()
        .unwrap()
        .status();
    assert_eq!(status, 404);
}

use super::*;

fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn holds(text: &str, vars: &Vars) -> bool {
    parse(text).unwrap().holds(vars).unwrap()
}

#[test]
fn arithmetic_parentheses_strings_and_lists() {
    let vars = Vars::with_params(&params(&[("n", "4"), ("region", "eu-west")]));
    assert!(holds("(n + 2) * 3 == 18", &vars));
    assert!(holds("n % 3 == 1 && !(n > 10)", &vars));
    assert!(holds(
        "region.startsWith('eu') && region.size() == 7",
        &vars
    ));
    assert!(
        holds("region.split('-')[1] == 'west'", &vars),
        "strings extension"
    );
    assert!(holds("[1, 2, 3].exists(x, x == n - 2)", &vars));
    assert!(holds("'eu' in ['us', 'eu']", &vars));
    assert!(
        holds("math.greatest(1, n, 2) == 4", &vars),
        "math extension"
    );
    let files = Vars::with_params(&params(&[("files", r#"["a.csv","tmp","b.csv"]"#)]));
    assert!(holds(
        "files.filter(f, f.endsWith('.csv')).map(f, f.size()) == [5, 5]",
        &files
    ));
    assert!(holds("files[0].matches('^[a-z]+\\\\.csv$')", &files));
    assert!(holds(
        "(size(files) > 2 ? 'many' : 'few') == 'many'",
        &files
    ));
}

#[test]
fn parameters_read_as_json_are_typed_and_the_rest_are_strings() {
    let vars = Vars::with_params(&params(&[
        ("count", "12"),
        ("ratio", "0.5"),
        ("flag", "true"),
        ("files", r#"["a.csv","b.csv"]"#),
        ("code", "007"),
        ("error.message", "disk full"),
        ("system.task.instance.id", "9"),
    ]));
    assert!(
        holds("count > 10", &vars),
        "numbers compare as numbers, not text"
    );
    assert!(holds("ratio < 1.0 && flag", &vars));
    assert!(holds("size(files) == 2 && files[1] == 'b.csv'", &vars));
    assert!(holds("code == '007'", &vars), "not JSON: stays text");
    assert!(
        holds("error.message.contains('full')", &vars),
        "dotted names are fields"
    );
    assert!(holds("params['system.task.instance.id'] == 9", &vars));
}

#[test]
fn outputs_are_reachable_by_task_and_json_path() {
    let load = params(&[
        ("rows", r#"[{"count": 11}, {"count": 3}]"#),
        ("ready", "yes"),
    ]);
    let vars = Vars::with_params(&BTreeMap::new()).outputs([("load", &load)]);
    assert!(holds("outputs.load.rows[0].count > 10", &vars));
    assert!(holds("outputs.load.ready == 'yes'", &vars));
    assert!(!holds("has(outputs.check)", &vars));
}

#[test]
fn old_switch_cases_keep_their_meaning() {
    let vars = Vars::with_params(&params(&[("region", "eu"), ("n", "10")]));
    assert!(holds("${region} == 'eu'", &vars));
    assert!(
        holds("${n} > 9 && ${region} != 'us'", &vars),
        "numeric, not lexical"
    );
    let bare = parse("region == eu").unwrap().holds(&vars).unwrap_err();
    assert!(
        bare.contains("'eu' is not a parameter") && bare.contains("quote"),
        "{bare}"
    );
    for old in [
        "${region} == eu",
        "us != ${region}",
        "${n} > 9 && ${region} == e_u",
    ] {
        let refused = parse(old).err().unwrap_or_else(|| panic!("{old}: parsed"));
        assert!(
            refused.contains("bare word") && refused.contains("quoted"),
            "{refused}"
        );
    }
    for new in [
        "${n} > limit.max",
        "${n} == size(xs)",
        "${region} == 'eu' && count > 3",
    ] {
        parse(new).unwrap_or_else(|e| panic!("{new}: {e}"));
    }
}

#[test]
fn items_and_values_come_back_as_json() {
    let item = serde_json::json!({"name": "a.csv", "size": 3});
    let vars = Vars::with_params(&BTreeMap::new()).with("item", &item);
    let got = parse("[item.name, item.size * 2]")
        .unwrap()
        .eval(&vars)
        .unwrap();
    assert_eq!(got, serde_json::json!(["a.csv", 6]));
}

#[test]
fn errors_name_the_column_and_the_problem() {
    let e = parse("n > > 3").err().unwrap();
    assert!(e.starts_with("column "), "{e}");
    let e = parse("${region == 'eu'").err().unwrap();
    assert!(e.contains("not closed"), "{e}");
    let vars = Vars::with_params(&params(&[("n", "4")]));
    let e = parse("n + 1").unwrap().holds(&vars).unwrap_err();
    assert!(e.contains("true or false"), "{e}");
    let e = parse("n + 'x' == 1").unwrap().holds(&vars).unwrap_err();
    assert!(!e.is_empty());
    assert!(parse(&"1 + ".repeat(2000)).is_err(), "too long");
}

/// A small deterministic generator (xorshift), so a failure reproduces from its seed.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[(self.next() % from.len() as u64) as usize]
    }
}

/// Property: no input, however malformed or deeply nested, panics the parser or the
/// evaluator; each one parses and evaluates, or is refused with a message.
#[test]
fn no_input_panics() {
    const TOKENS: &[&str] = &[
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        ".",
        ",",
        ":",
        "?",
        "!",
        "-",
        "+",
        "*",
        "/",
        "%",
        "==",
        "!=",
        "<",
        "<=",
        ">",
        ">=",
        "&&",
        "||",
        "in",
        "n",
        "s",
        "xs",
        "m",
        "outputs",
        "params",
        "1",
        "0",
        "-9223372036854775808",
        "9223372036854775807",
        "1.5e308",
        "'a'",
        "\"b\"",
        "'",
        "\"",
        "\\",
        "${n}",
        "${",
        "}",
        "size(",
        "matches(",
        ".exists(x,",
        ".map(x,",
        "x",
        "int(",
        "string(",
        "double(",
        "has(",
        "true",
        "null",
        "b'z'",
        "r'\\d'",
        "'🦀'",
        " ",
        "\n",
        "\u{0}",
        "1u",
        "0x10",
        ".split(",
        ".join(",
        "math.abs(",
        "'(['",
        "e",
    ];
    let vars = Vars::with_params(&params(&[
        ("n", "3"),
        ("s", "text"),
        ("xs", "[1,2,3]"),
        ("m", r#"{"k":{"v":[1]}}"#),
    ]));
    for seed in 1..=3_000u64 {
        let mut g = Gen(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let len = 1 + (g.next() % 24) as usize;
        let text: String = (0..len).map(|_| g.pick(TOKENS)).collect();
        if let Ok(expr) = parse(&text) {
            let _ = expr.eval(&vars);
        }
    }
    for depth in [50usize, 200, 2_000] {
        let nested = format!("{}1{}", "(".repeat(depth), ")".repeat(depth));
        let _ = parse(&nested).map(|e| e.eval(&vars));
        let lists = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        let _ = parse(&lists).map(|e| e.eval(&vars));
        let chain = format!("1{}", " + 1".repeat(depth));
        let _ = parse(&chain).map(|e| e.eval(&vars));
        let _ = parse(&format!("{}true", "!".repeat(depth))).map(|e| e.eval(&vars));
    }
}

/// `[1, 2, ..., n]` as CEL source.
fn list_of(n: usize) -> String {
    let items: Vec<String> = (1..=n).map(|i| i.to_string()).collect();
    format!("[{}]", items.join(","))
}

fn refused_as_too_costly<T>(result: Result<T, String>) {
    let Err(error) = result else {
        panic!("a too costly expression is refused")
    };
    assert!(
        error.contains("steps to evaluate") && error.contains("fewer"),
        "{error}"
    );
}

#[test]
fn nested_loops_over_literal_lists_are_refused_when_checked() {
    // 40^4 = 2.6 million innermost steps (none finds a match, so none stops early): fine
    // for a machine, not for a condition. It reads no value, so it is refused when checked.
    let l = list_of(40);
    let text =
        format!("{l}.exists(a, {l}.exists(b, {l}.exists(c, {l}.exists(d, a + b + c + d == 0))))");
    refused_as_too_costly(parse(&text));
    // The same loops stopped by their first element (`all` of false) do little: charged as
    // they run, they pass.
    let text = format!("!{l}.all(a, {l}.all(b, {l}.all(c, {l}.exists(d, a + b + c + d == 0))))");
    assert!(holds(&text, &Vars::default()));
    // One level less is a quick expression, and it evaluates.
    let text = format!("{l}.all(a, {l}.exists(b, a + b == 41))");
    assert!(holds(&text, &Vars::default()));
}

#[test]
fn strings_grown_by_repeated_replace_are_refused_when_checked() {
    // Each replace doubles the string: 2^40 bytes if it ran.
    let text = format!("'ab'{}.size() > 0", ".replace('a', 'aa')".repeat(40));
    refused_as_too_costly(parse(&text));
    // Inserting 4 bytes between every two multiplies the length by 5: 5^12 bytes.
    let text = format!("'x'{}.size() > 0", ".replace('', 'yyyy')".repeat(12));
    refused_as_too_costly(parse(&text));
    // A few replaces on short text are what replace is for.
    let vars = Vars::with_params(&params(&[("path", "/data/in/2026-11-26.csv")]));
    assert!(holds(
        "path.replace('/in/', '/out/').replace('.csv', '.parquet').endsWith('.parquet')",
        &vars
    ));
}

#[test]
fn loops_over_large_outputs_are_refused_when_evaluated() {
    let ids: Vec<String> = (0..3000).map(|i| i.to_string()).collect();
    let load = params(&[("ids", &format!("[{}]", ids.join(",")))]);
    let vars = Vars::with_params(&BTreeMap::new()).outputs([("load", &load)]);
    // A single pass over 3,000 ids evaluates...
    assert!(holds("outputs.load.ids.exists(i, i == 2999)", &vars));
    assert_eq!(
        eval("outputs.load.ids.filter(i, i % 1000 == 0)", &vars).unwrap(),
        serde_json::json!([0, 1000, 2000])
    );
    // ...all pairs of them (9 million) do not; the text alone could not tell.
    let pairs = "outputs.load.ids.exists(a, outputs.load.ids.exists(b, a + b == -1))";
    let checked = parse(pairs).expect("the text alone is acceptable");
    refused_as_too_costly(checked.holds(&vars));
    // The same expression over a short list is fine.
    let load = params(&[("ids", "[1, 2, 3]")]);
    let vars = Vars::with_params(&BTreeMap::new()).outputs([("load", &load)]);
    assert!(!holds(pairs, &vars));
}

#[test]
fn a_bound_too_large_to_count_is_refused_not_overflowed() {
    // Nested loops over strings multiplied by replace: the bound passes any float.
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"];
    let mut text = "true".to_string();
    for k in (0..9).rev() {
        let (v, w) = (names[k], names[k + 1]);
        text = format!("[{v}.replace('', {v})].all({w}, {text})");
    }
    let text = format!("['xxxxxxxxxx'].all(a, {text})");
    refused_as_too_costly(parse(&text));
    // Nor does an empty loop around it hide the rest.
    refused_as_too_costly(parse(&format!(
        "[].all(z, {text}) && {l}.exists(a, {l}.exists(b, {l}.exists(c, {l}.exists(d, a == -d))))",
        l = list_of(40),
        text = text
    )));
}

#[test]
fn outputs_are_measured_however_they_are_named() {
    let ids: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
    let ids = format!("[{}]", ids.join(","));
    let load = params(&[("ids", ids.as_str())]);
    let vars = Vars::with_params(&BTreeMap::new()).outputs([("load", &load)]);
    // From the top (`.outputs`) and with an index for a field.
    for path in [
        ".outputs.load.ids",
        "outputs['load'].ids",
        "outputs.load['ids']",
    ] {
        let text = format!("{path}.exists(a, {path}.exists(b, {path}.exists(c, a + b + c == -1)))");
        refused_as_too_costly(eval(&text, &vars));
    }
    // A parameter named `a.b` is what `a.b` reads, even beside a parameter `a`.
    let vars = Vars::with_params(&params(&[("a", "x"), ("a.b", ids.as_str())]));
    refused_as_too_costly(eval(
        "a.b.exists(x, a.b.exists(y, a.b.exists(z, x + y + z == -1)))",
        &vars,
    ));
}

#[test]
fn regular_expressions_and_searches_are_priced_by_their_size() {
    // A pattern that compiles to megabytes is refused before it compiles.
    let error = parse(r"'x'.matches('\\w{200}')").err().expect("refused");
    assert!(error.contains("too large"), "{error}");
    let vars = Vars::with_params(&params(&[("p", r"\w{200}")]));
    assert!(eval("'x'.matches(p)", &vars).is_err());
    // Ordinary patterns are what matches is for.
    let vars = Vars::with_params(&params(&[("file", "sales_2026-11-26.csv")]));
    assert!(holds(
        r"file.matches('^sales_\\d{4}-\\d{2}-\\d{2}\\.csv$')",
        &vars
    ));
    // indexOf searches in linear time: a needle that nearly matches at every place of the
    // text costs no more than reading both.
    let text = "a".repeat(40_000);
    let vars = Vars::with_params(&params(&[
        ("t", text.as_str()),
        ("n", &format!("{}b", &text[..20_000])),
    ]));
    assert!(holds("t.indexOf(n) == -1 && t.lastIndexOf(n) == -1", &vars));
    assert!(holds("t.indexOf('b') == -1", &vars));
    // A search repeated over a loop is charged each time it reads them.
    refused_as_too_costly(eval(
        &format!("{}.all(i, t.indexOf(n) == -1)", list_of(200)),
        &vars,
    ));
}

#[test]
fn a_foreach_over_ten_thousand_rows_builds_its_items() {
    let rows: Vec<String> = (0..10_000)
        .map(|i| {
            format!(
                r#"{{"id": {i}, "region": "eu-west-{}", "ok": true}}"#,
                i % 3
            )
        })
        .collect();
    let rows = format!("[{}]", rows.join(","));
    let load = params(&[("rows", rows.as_str())]);
    let vars = Vars::with_params(&params(&[("env", "prod")])).outputs([("load", &load)]);
    for text in [
        "outputs.load.rows.map(r, 'id-' + string(r.id))",
        "outputs.load.rows.filter(r, r.region == 'eu-west-1').map(r, r.id)",
        "outputs.load.rows.map(r, '%s/%d'.format([env, r.id]))",
    ] {
        let items = eval(text, &vars).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert!(items.as_array().is_some_and(|a| a.len() > 3000), "{text}");
    }
}

#[test]
fn what_hides_a_value_behind_a_name_is_measured_as_the_evaluator_reads_it() {
    // `strings.quote(s)`: the namespace is no operand; its argument is.
    let big = format!("'{}'", "x".repeat(1000));
    refused_as_too_costly(parse(&format!(
        "[strings.quote({big})].all(a, [a.replace('', a)].all(b, b.replace('', b) != ''))"
    )));
    // An index is never part of a dotted name: `outputs['load']` is the output, not a
    // parameter called `outputs.load`.
    let ids: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
    let ids = format!("[{}]", ids.join(","));
    let load = params(&[("rows", ids.as_str())]);
    let decoy = params(&[("outputs", "0"), ("outputs.load.rows", "[]")]);
    let vars = Vars::with_params(&decoy).outputs([("load", &load)]);
    let rows = "outputs['load']['rows']";
    refused_as_too_costly(eval(
        &format!("{rows}.all(a, {rows}.all(b, {rows}.all(c, a + b + c != -1)))"),
        &vars,
    ));
    // A loop variable written `.x` is never what `.x` reads.
    let vars = Vars::with_params(&params(&[("l", r#"[{"load": {"rows": []}}]"#)]))
        .outputs([("load", &load)]);
    let rows = ".outputs.load.rows";
    refused_as_too_costly(eval(
        &format!("l.all(.outputs, {rows}.all(a, {rows}.all(b, {rows}.all(c, a != c || true))))"),
        &vars,
    ));
    // `strings.quote` is the function even where a variable is called `strings`.
    refused_as_too_costly(parse(&format!(
        "[0].exists(strings, [strings.quote({big})].all(a, [a.replace('', a)].all(b, b.replace('', b) != '')))"
    )));
    // has() is a boolean, whatever it looks into.
    assert!(holds(
        &format!("{}.all(i, !has(outputs.load.nothing))", list_of(300)),
        &vars
    ));
}

#[test]
fn a_pattern_is_known_and_small_before_it_is_matched() {
    let error = parse(r"'ab'.matches('[ab]*a[ab]{10000}')")
        .err()
        .expect("refused");
    assert!(error.contains("too large"), "{error}");
    // One computed by the expression is checked when it is compiled, as any other.
    let vars = Vars::with_params(&params(&[("prefix", "sales"), ("wide", r"\w{200}")]));
    assert!(holds("'sales_1.csv'.matches('^' + prefix + '_')", &vars));
    let error = eval("'x'.matches('^' + wide)", &vars).expect_err("refused");
    assert!(error.contains("too large"), "{error}");
    // Nor does a leading dot (`.matches(text, pattern)` is `matches`) get around it.
    let error = parse(r"'x'.split('').exists(i, .matches('', '\\w{200}'))")
        .err()
        .expect("refused");
    assert!(
        error.contains("too large") || error.contains("compiles larger"),
        "{error}"
    );
    // A pattern per file, over many files, is what matches is for.
    let files: Vec<String> = (0..500).map(|i| format!("\"sales_{i}.csv\"")).collect();
    let files = format!("[{}]", files.join(","));
    let vars = Vars::with_params(&params(&[("files", files.as_str())]));
    assert!(holds(
        r"files.all(f, f.matches('^sales_[0-9]+\\.csv$'))",
        &vars
    ));
    let vars = Vars::with_params(&params(&[("pattern", "^sales_")]));
    assert!(holds("'sales_1.csv'.matches(pattern)", &vars));
}

#[test]
fn long_names_and_many_patterns_count_the_work_of_reading_them() {
    // Each dotted name is looked up prefix by prefix in each loop's scope.
    let l = format!("[{}]", ["0"; 10].join(","));
    let name = vec!["z"; 700].join(".");
    let text = format!("{l}.all(a, {l}.all(b, {l}.all(c, {l}.all(d, {name} || true))))");
    refused_as_too_costly(parse(&text));
    // Patterns named by a loop over a given list are each checked (once each).
    let pats: Vec<String> = (0..200).map(|i| format!("\"^f{i}$\"")).collect();
    let vars = Vars::with_params(&params(&[("pats", &format!("[{}]", pats.join(",")))]));
    assert!(holds("pats.exists(p, 'f7'.matches(p))", &vars));
    let vars = Vars::with_params(&params(&[("pats", r#"["ok", "\\w{999}"]"#)]));
    let error = parse("pats.exists(p, 'x'.matches(p))")
        .unwrap()
        .holds(&vars)
        .expect_err("refused");
    assert!(error.contains("too large"), "{error}");
}

#[test]
fn a_case_insensitive_class_is_priced_by_the_characters_it_folds() {
    // `(?i)` folds every character of a class at each compile, however small the program
    // it compiles to: a hundred compiles of `\P{Any}` (the empty class, folded first)
    // would take most of a second. A pattern is compiled once per evaluation, so only
    // distinct ones add up.
    let ten = list_of(10);
    let text = format!(
        r"{ten}.exists(a, {ten}.exists(b, {ten}.exists(c, 'x'.matches('(?i)\\P{{Any}}'))))"
    );
    assert!(!holds(&text, &Vars::default()));
    let text = format!(
        r"{}.exists(i, 'x'.matches('(?i)\\P{{Any}}' + string(i)))",
        list_of(100)
    );
    refused_as_too_costly(parse(&text));
    // So is a pattern folding so much that compiling it once to size it would take long,
    // refused before it is compiled; and a set operation folds its operands again.
    let many = vec![r"\\P{Any}"; 200].join("|");
    let error = parse(&format!("'x'.matches('(?i)(?:{many})')"))
        .err()
        .expect("refused");
    assert!(error.contains("folds the case"), "{error}");
    let error = parse(r"'x'.matches('(?i)[[[[[\\p{Any}--a]--b]--c]--d]--e]')")
        .err()
        .expect("refused");
    assert!(error.contains("folds the case"), "{error}");
    // A negated class is folded small, then each bracket around it folds its complement.
    let nested = format!("(?i){}^a]{}", "[".repeat(25), "b]".repeat(24));
    let error = parse(&format!("'x'.matches('{nested}')"))
        .err()
        .expect("refused");
    assert!(error.contains("folds the case"), "{error}");
    refused_as_too_costly(parse(&format!(
        r"{}.all(a, !'x'.matches('(?i)[[^a]b]' + string(a)))",
        list_of(100)
    )));
    // Without the flag nothing is folded; with it, what ordinary patterns use passes, in
    // loops too: letters named (`[a-z]`), Perl classes (`\w`), a script.
    let none = Vars::default();
    assert!(holds(
        &format!(r"{ten}.all(a, !'x'.matches('\\P{{Any}}'))"),
        &none
    ));
    assert!(holds(
        &format!(
            r"{}.all(a, 'Sales_1.CSV'.matches('(?i)^sales_[a-z0-9_]+\\.csv$'))",
            list_of(300)
        ),
        &none
    ));
    assert!(holds(
        &format!(r"{ten}.all(a, 'Sales_1'.matches('(?i)^sales_\\w+$'))"),
        &none
    ));
    assert!(holds(
        &format!(r"{ten}.all(a, 'αβ'.matches('(?i)^[\\p{{Greek}}a-z]+$'))"),
        &none
    ));
}

#[test]
fn brackets_in_raw_and_tripled_strings_are_not_read_as_nesting() {
    // A raw string's backslash escapes nothing: the quote after it ends the string, so
    // the brackets that follow count.
    let deep = format!("{}1{}", "[".repeat(40), "]".repeat(40));
    let error = parse(&format!(r"r'\' + {deep} + r'\' == 1"))
        .err()
        .expect("refused");
    assert!(error.contains("nested deeper"), "{error}");
    let error = parse(&format!("'''a'b''' + {deep} == 1"))
        .err()
        .expect("refused");
    assert!(error.contains("nested deeper"), "{error}");
    // Brackets inside strings, raw or tripled, are text.
    let text = format!("r'{deep}' != '''{deep}''' || true");
    assert!(holds(&text, &Vars::default()));
}

#[test]
fn what_a_function_builds_is_charged_before_it_is_built() {
    // A separator between each two of a thousand strings: ten megabytes from a few KiB.
    let xs = format!("[{}]", vec!["\"a\""; 1000].join(","));
    let sep = "-".repeat(10_000);
    let vars = Vars::with_params(&params(&[("xs", xs.as_str()), ("sep", sep.as_str())]));
    refused_as_too_costly(eval("xs.join(sep).size() > 0", &vars));
    assert!(holds("xs.join('-').size() == 1999", &vars));
    // A value hidden in an optional is measured as the value.
    let big = format!("'{}'", "x".repeat(2000));
    refused_as_too_costly(parse(&format!(
        "[optional.of({big})].all(o, {}.all(i, {}.all(j, o.value().size() > 0)))",
        list_of(40),
        list_of(40)
    )));
    // A refusal is not swallowed by `||`, which would otherwise answer true.
    let grown = format!("'ab'{}.size() > 0", ".replace('a', 'aa')".repeat(40));
    refused_as_too_costly(parse(&format!("{grown} || true")));
}

#[test]
fn the_metered_string_functions_answer_as_the_extension_does() {
    let none = Vars::default();
    for text in [
        "'héllo héllo'.indexOf('llo') == 2",
        "'héllo héllo'.indexOf('llo', 3) == 8",
        "'héllo héllo'.lastIndexOf('llo') == 8",
        "'héllo héllo'.lastIndexOf('llo', 7) == 2",
        "'aaa'.lastIndexOf('aa') == 1 && 'aaa'.lastIndexOf('aa', 0) == 0",
        "'abc'.indexOf('') == 0 && 'abc'.lastIndexOf('') == 3",
        "'abc'.indexOf('', 2) == 2 && 'abc'.indexOf('d') == -1",
        "'ab'.lastIndexOf('abc') == -1",
        "'aaa'.replace('a', 'b', 2) == 'bba' && 'aaa'.replace('a', 'b', -1) == 'bbb'",
        "'abc'.replace('', '-') == '-a-b-c-'",
        "['a', 'b'].join('-') == 'a-b' && ['a', 'b'].join() == 'ab'",
        "matches('abc', '^a') && 'abc'.matches('c$')",
    ] {
        assert!(holds(text, &none), "{text}");
    }
    for text in [
        "'abc'.indexOf('a', 3)",
        "'abc'.lastIndexOf('a', -1)",
        "[1].join()",
    ] {
        assert!(eval(text, &none).is_err(), "{text}");
    }
}

#[test]
fn a_failing_metered_call_names_the_function_written() {
    let none = Vars::default();
    let error = |text: &str| eval(text, &none).unwrap_err();
    assert_eq!(
        error("'abc'.replace(1, 2)"),
        "found no matching overload for 'replace' applied to 'string.(int, int)'"
    );
    // As for any function called in a form it does not have (`upperAscii` is a method).
    assert_eq!(
        error("replace('abc', 'a', 'b')"),
        "'replace' is not a parameter or output here (quote text: 'replace')"
    );
    assert_eq!(
        error("upperAscii('abc')"),
        "'upperAscii' is not a parameter or output here (quote text: 'upperAscii')"
    );
    assert_eq!(
        error("'abc'.matches(1)"),
        "found no matching overload for 'matches' applied to 'string.(int)'"
    );
    for (text, function) in [
        ("[1].join()", "join"),
        ("'abc'.indexOf(1)", "indexOf"),
        ("'abc'.lastIndexOf('a', -1)", "lastIndexOf"),
    ] {
        let error = error(text);
        assert!(
            error.contains(&format!("'{function}'")) && !error.contains('@'),
            "{text}: {error}"
        );
    }
}

//! Where a place in a SQL query stands (in a quoted literal or not), read far enough to put
//! an outside value there without changing the statement: in `'...'`, `"..."` or `` `...` ``
//! each quote of the value is doubled (the one escape Postgres, SQLite and MySQL share); a
//! value with a backslash is refused there (an `E'...'` string or a server setting gives it
//! a meaning); outside a literal only a number or a name goes.

/// What the query read so far is in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum State {
    #[default]
    Code,
    /// A literal or quoted name opened by this quote character; `backslash`: an `E'...'`
    /// string, where `\` escapes.
    Quoted {
        quote: char,
        backslash: bool,
    },
    LineComment,
    BlockComment,
    /// A Postgres dollar-quoted string `$tag$...$tag$`, with the text read in it.
    Dollar {
        tag: String,
        body: String,
    },
}

/// Reads a query piece by piece and places values where it ends.
#[derive(Default)]
pub(super) struct Sql {
    state: State,
    prev: char,
    /// Before `prev`.
    prev2: char,
    escaped: bool,
    /// A `$tag` being read in code that may open a dollar-quoted string.
    tag: Option<String>,
}

/// A value that may stand outside a literal: a number or a name (letters, digits, `_`,
/// `.`), with a leading `-` for a negative number.
fn is_sql_word(value: &str) -> bool {
    let rest = value.strip_prefix('-').unwrap_or(value);
    !rest.is_empty()
        && rest
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
}

impl Sql {
    pub(super) fn read(&mut self, text: &str) {
        for c in text.chars() {
            self.step(c);
            self.prev2 = self.prev;
            self.prev = c;
        }
    }

    fn step(&mut self, c: char) {
        match &mut self.state {
            State::Code => self.code(c),
            State::Quoted { quote, backslash } => {
                if std::mem::take(&mut self.escaped) {
                    return;
                }
                if *backslash && c == '\\' {
                    self.escaped = true;
                } else if c == *quote {
                    // A doubled quote closes and opens again.
                    self.state = State::Code;
                }
            }
            State::LineComment => {
                if c == '\n' {
                    self.state = State::Code;
                }
            }
            State::BlockComment => {
                if self.prev == '*' && c == '/' {
                    self.state = State::Code;
                }
            }
            State::Dollar { tag, body } => {
                body.push(c);
                if c == '$' && body.ends_with(&format!("${tag}$")) {
                    self.state = State::Code;
                }
            }
        }
    }

    fn code(&mut self, c: char) {
        if let Some(tag) = self.tag.as_mut() {
            let first = tag.is_empty();
            match c {
                '$' => {
                    let tag = self.tag.take().unwrap_or_default();
                    self.state = State::Dollar {
                        tag,
                        body: String::new(),
                    };
                    return;
                }
                c if c == '_' || c.is_alphabetic() || (!first && c.is_ascii_digit()) => {
                    tag.push(c);
                    return;
                }
                _ => self.tag = None,
            }
        }
        match c {
            '\'' | '"' | '`' => {
                let e_string = c == '\''
                    && matches!(self.prev, 'e' | 'E')
                    && !(self.prev2.is_alphanumeric() || self.prev2 == '_');
                self.state = State::Quoted {
                    quote: c,
                    backslash: e_string,
                };
            }
            '-' if self.prev == '-' => self.state = State::LineComment,
            '*' if self.prev == '/' => self.state = State::BlockComment,
            '$' if !(self.prev.is_alphanumeric() || self.prev == '_') => {
                self.tag = Some(String::new())
            }
            _ => {}
        }
    }

    /// Appends an outside value where the query read so far ends, or says why it cannot go
    /// there.
    pub(super) fn place(&self, value: &str, out: &mut String) -> Result<(), String> {
        match &self.state {
            State::Quoted { quote, .. } => {
                if self.escaped {
                    return Err("follows a backslash in a SQL literal".into());
                }
                if value.contains('\\') {
                    return Err("holds a backslash, which is not put into a SQL literal \
                        (its meaning there depends on the server's settings)"
                        .into());
                }
                for c in value.chars() {
                    out.push(c);
                    if c == *quote {
                        out.push(c);
                    }
                }
                Ok(())
            }
            _ if is_sql_word(value) && self.tag.is_none() => {
                out.push_str(value);
                Ok(())
            }
            _ => Err(
                "stands outside a quoted SQL literal, where only a number or a name \
                (letters, digits, '_', '.') may go: write it inside quotes to use it as a string"
                    .into(),
            ),
        }
    }
}

//! Where a place in a SQL query stands (in a quoted literal or not), read far enough to put
//! an outside value there without changing the statement: in `'...'`, `"..."` or `` `...` ``
//! each quote of the value is doubled (the one escape Postgres, SQLite and MySQL share); a
//! value with a backslash is refused there (an `E'...'` string or a server setting gives it
//! a meaning); outside a literal only a number or a name goes.
//!
//! The master expands a query before it knows which server runs it, so the query is read
//! twice: as Postgres and SQLite read it, and as MySQL/MariaDB do (a backslash escapes in
//! `'...'` and `"..."`, `#` and `-- ` start comments, `/*!...*/` is code, no dollar quotes).
//! A value goes into a literal only where both readings see the same one: after `'a\''` or
//! in `# don't`, one would put it in a literal that is code to the other server.

/// What the query read so far is in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum State {
    #[default]
    Code,
    /// A literal or quoted name opened by this quote character; `backslash`: one where `\`
    /// escapes (an `E'...'` string; any string to MySQL).
    Quoted {
        quote: char,
        backslash: bool,
    },
    LineComment,
    BlockComment,
    /// MySQL: `--` read, a comment if a space follows.
    Dashes,
    /// MySQL: `/*` read (`M`: and an `M`), code if `!` follows.
    CommentStart {
        m: bool,
    },
    /// A Postgres dollar-quoted string `$tag$...$tag$`, with the text read in it.
    Dollar {
        tag: String,
        body: String,
    },
}

/// Reads a query piece by piece, as each kind of server does, and places values where it
/// ends.
pub(super) struct Sql {
    standard: Reading,
    mysql: Reading,
}

impl Default for Sql {
    fn default() -> Self {
        Sql {
            standard: Reading::default(),
            mysql: Reading {
                mysql: true,
                ..Reading::default()
            },
        }
    }
}

/// One server's reading of the query so far.
#[derive(Default)]
struct Reading {
    /// MySQL's rules rather than Postgres's and SQLite's.
    mysql: bool,
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
        self.standard.read(text);
        self.mysql.read(text);
    }

    /// Appends an outside value where the query read so far ends, or says why it cannot go
    /// there.
    pub(super) fn place(&self, value: &str, out: &mut String) -> Result<(), String> {
        let quoted = |r: &Reading| match r.state {
            State::Quoted { quote, .. } => Some(quote),
            _ => None,
        };
        match (quoted(&self.standard), quoted(&self.mysql)) {
            (Some(quote), Some(other)) if quote == other => {
                if self.standard.escaped || self.mysql.escaped {
                    return Err("follows a backslash in a SQL literal".into());
                }
                if value.contains('\\') {
                    return Err("holds a backslash, which is not put into a SQL literal \
                        (its meaning there depends on the server's settings)"
                        .into());
                }
                for c in value.chars() {
                    out.push(c);
                    if c == quote {
                        out.push(c);
                    }
                }
                Ok(())
            }
            _ if is_sql_word(value) && self.standard.tag.is_none() => {
                out.push_str(value);
                Ok(())
            }
            (None, None) => Err(
                "stands outside a quoted SQL literal, where only a number or a name \
                (letters, digits, '_', '.') may go: write it inside quotes to use it as a string"
                    .into(),
            ),
            _ => Err(
                "stands outside a quoted SQL literal for MySQL or for Postgres (they read a \
                backslash before a quote, '#', '--' and '/*!' differently), where only a \
                number or a name (letters, digits, '_', '.') may go"
                    .into(),
            ),
        }
    }
}

impl Reading {
    fn read(&mut self, text: &str) {
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
            State::Dashes => match c {
                '\n' => self.state = State::Code,
                c if c.is_whitespace() || c.is_control() => self.state = State::LineComment,
                c => {
                    self.state = State::Code;
                    self.code(c);
                }
            },
            State::CommentStart { m } => match c {
                '!' => self.state = State::Code,
                'M' if !*m => self.state = State::CommentStart { m: true },
                _ => self.state = State::BlockComment,
            },
            State::Dollar { tag, body } => {
                body.push(c);
                if c == '$' && body.ends_with(&format!("${tag}$")) {
                    self.state = State::Code;
                }
            }
        }
    }

    fn code(&mut self, c: char) {
        if self.mysql {
            return self.mysql_code(c);
        }
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

    /// Code as MySQL reads it: no dollar quotes; `#`, and `--` with a space after, start
    /// line comments; `/*!` and `/*M!` open executable comments, which are code.
    fn mysql_code(&mut self, c: char) {
        match c {
            '\'' | '"' | '`' => {
                self.state = State::Quoted {
                    quote: c,
                    backslash: c != '`',
                }
            }
            '#' => self.state = State::LineComment,
            '-' if self.prev == '-' => self.state = State::Dashes,
            '*' if self.prev == '/' => self.state = State::CommentStart { m: false },
            _ => {}
        }
    }
}

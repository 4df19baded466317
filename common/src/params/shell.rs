//! Where a place in a bash script stands (in quotes, in arithmetic, in a comment, in a
//! here-document), read far enough to put an outside value there as data: a reference to the
//! environment variable holding it, quoted so that it stays one word.

/// What a place in a script is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum At {
    /// Commands, unquoted.
    Bare,
    Double,
    Single,
    /// `$'...'`.
    Ansi,
    /// `((...))` or `$((...))`: bash evaluates an expanded value there as an expression, and
    /// `a[$(cmd)]` runs `cmd`.
    Arith,
    /// A comment or an unquoted here-document's body: no word splitting, nothing to
    /// break out of.
    Inert,
    /// A quoted here-document's body (`<<'EOF'`): bash expands nothing there.
    Verbatim,
}

/// Appends a reference to environment variable `var` for a place `at`, so that bash reads
/// the variable's value as one word of data; refuses arithmetic and a quoted
/// here-document, saying why.
pub(super) fn reference(at: At, var: &str, out: &mut String) -> Result<(), String> {
    let text = match at {
        At::Bare => format!("\"${{{var}}}\""),
        At::Double | At::Inert => format!("${{{var}}}"),
        // Close the quotes, expand in double quotes, open them again.
        At::Single => format!("'\"${{{var}}}\"'"),
        At::Ansi => format!("'\"${{{var}}}\"$'"),
        At::Arith => {
            return Err(format!(
                "stands inside (( )) or $(( )), where bash would run it as code: check it is \
                 a number first ([[ ${var} =~ ^[0-9]+$ ]]) and use ${var}"
            ));
        }
        At::Verbatim => {
            return Err(format!(
                "stands in a quoted here-document (<<'EOF'), where bash expands nothing: \
                 read it there from ${var}"
            ));
        }
    };
    out.push_str(&text);
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Frame {
    /// Commands: inside `(...)`/`$(...)` (closed by `)`) or backticks (closed by `` ` ``).
    Code(char),
    Double,
    Single,
    Ansi,
    /// Arithmetic, with the parentheses open inside it.
    Arith(u32),
    Comment,
    /// A here-document's body, up to the line that is its delimiter.
    Heredoc {
        delim: String,
        strip_tabs: bool,
        quoted: bool,
    },
}

/// The delimiter of a here-document being read after `<<`.
#[derive(Default)]
struct HereWord {
    strip_tabs: bool,
    word: String,
    started: bool,
    quote: Option<char>,
    /// Part of the word was quoted or escaped: the body expands nothing.
    quoted: bool,
}

/// Reads a script piece by piece and tells where its end stands.
#[derive(Default)]
pub(super) struct Shell {
    /// Open frames; none: the script's own commands.
    stack: Vec<Frame>,
    prev: char,
    escaped: bool,
    /// The top frame was opened by the previous character (`((` is arithmetic).
    just_opened: bool,
    /// The `)` after the one that closed arithmetic is part of `))`.
    skip_paren: bool,
    here_word: Option<HereWord>,
    /// Here-documents whose bodies start at the next newline.
    pending: Vec<Frame>,
    /// The line read so far in a here-document's body.
    line: String,
}

impl Shell {
    pub(super) fn at(&self) -> At {
        match self.stack.last() {
            None | Some(Frame::Code(_)) => At::Bare,
            Some(Frame::Double) => At::Double,
            Some(Frame::Single) => At::Single,
            Some(Frame::Ansi) => At::Ansi,
            Some(Frame::Arith(_)) => At::Arith,
            Some(Frame::Heredoc { quoted: true, .. }) => At::Verbatim,
            Some(Frame::Comment | Frame::Heredoc { .. }) => At::Inert,
        }
    }

    pub(super) fn read(&mut self, text: &str) {
        for c in text.chars() {
            self.step(c);
            self.prev = c;
        }
    }

    fn step(&mut self, c: char) {
        let opened = std::mem::take(&mut self.just_opened);
        if std::mem::take(&mut self.skip_paren) && c == ')' {
            return;
        }
        if std::mem::take(&mut self.escaped) {
            return;
        }
        match self.stack.last_mut() {
            Some(Frame::Single) => {
                if c == '\'' {
                    self.stack.pop();
                }
            }
            Some(Frame::Ansi) => match c {
                '\\' => self.escaped = true,
                '\'' => drop(self.stack.pop()),
                _ => {}
            },
            Some(Frame::Comment) => {
                if c == '\n' {
                    self.stack.pop();
                    self.step(c);
                }
            }
            Some(Frame::Heredoc {
                delim, strip_tabs, ..
            }) => {
                if c != '\n' {
                    self.line.push(c);
                    return;
                }
                let line = std::mem::take(&mut self.line);
                let line = match strip_tabs {
                    true => line.trim_start_matches('\t'),
                    false => &line,
                };
                if line == delim {
                    self.stack.pop();
                }
            }
            Some(Frame::Arith(open)) => match c {
                '(' => *open += 1,
                ')' if *open > 0 => *open -= 1,
                ')' => {
                    self.stack.pop();
                    self.skip_paren = true;
                }
                _ => {}
            },
            Some(Frame::Double) => match c {
                '\\' => self.escaped = true,
                '"' => drop(self.stack.pop()),
                '`' => self.stack.push(Frame::Code('`')),
                '(' if self.prev == '$' => self.open_paren(),
                _ => {}
            },
            None | Some(Frame::Code(_)) => self.code(c, opened),
        }
    }

    /// `(` in commands: a subshell or `$(`, or with the `(` just before, arithmetic.
    fn open_paren(&mut self) {
        self.stack.push(Frame::Code(')'));
        self.just_opened = true;
    }

    fn code(&mut self, c: char, opened: bool) {
        if self.here_word.is_some() && self.here_word_step(c) {
            return;
        }
        let closer = match self.stack.last() {
            Some(Frame::Code(closer)) => Some(*closer),
            _ => None,
        };
        match c {
            '\\' => self.escaped = true,
            '\'' if self.prev == '$' => self.stack.push(Frame::Ansi),
            '\'' => self.stack.push(Frame::Single),
            '"' => self.stack.push(Frame::Double),
            '`' if closer == Some('`') => drop(self.stack.pop()),
            '`' => self.stack.push(Frame::Code('`')),
            '(' if opened => {
                self.stack.pop();
                self.stack.push(Frame::Arith(0));
            }
            '(' => self.open_paren(),
            ')' if closer == Some(')') => drop(self.stack.pop()),
            '#' if matches!(self.prev, '\0' | ';' | '&' | '|' | '(')
                || self.prev.is_whitespace() =>
            {
                self.stack.push(Frame::Comment)
            }
            '<' if self.prev == '<' => self.here_word = Some(HereWord::default()),
            '\n' => {
                let bodies = std::mem::take(&mut self.pending);
                self.stack.extend(bodies.into_iter().rev());
            }
            _ => {}
        }
    }

    /// Reads `c` into the delimiter after `<<`; false when `c` ends it (and is read as
    /// commands).
    fn here_word_step(&mut self, c: char) -> bool {
        let Some(w) = self.here_word.as_mut() else {
            return false;
        };
        if !w.started && w.quote.is_none() {
            match c {
                // `<<<` is a here-string.
                '<' if self.prev == '<' && !w.strip_tabs => {
                    self.here_word = None;
                    return true;
                }
                '-' if self.prev == '<' => {
                    w.strip_tabs = true;
                    return true;
                }
                ' ' | '\t' => return true,
                _ => {}
            }
        }
        match w.quote {
            Some(q) if c == q => w.quote = None,
            Some(_) => w.word.push(c),
            None if c == '\'' || c == '"' => {
                w.quote = Some(c);
                w.quoted = true;
            }
            None if c == '\\' => w.quoted = true,
            None if c.is_whitespace() || ";|&<>()".contains(c) => {
                let w = self.here_word.take().unwrap_or_default();
                if w.started {
                    self.pending.push(Frame::Heredoc {
                        delim: w.word,
                        strip_tabs: w.strip_tabs,
                        quoted: w.quoted,
                    });
                }
                return false;
            }
            None => w.word.push(c),
        }
        if let Some(w) = self.here_word.as_mut() {
            w.started = true;
        }
        true
    }
}

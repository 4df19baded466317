//! What case-insensitive matching costs a pattern's compile. With `(?i)`, the regex crate
//! folds the case of every character a class names, one by one, before it builds the
//! program, so `(?i)\p{Any}` takes milliseconds to compile into a few hundred bytes: the
//! compiled size does not price it. The characters are counted from the pattern's syntax,
//! without folding anything.

use regex_syntax::ast::{self, Ast, ClassSetItem, Flag, Flags, Visitor};
use regex_syntax::hir::{Class, HirKind};
use std::collections::HashMap;

/// Every character a class can name: what a negated class covers once it is folded again.
const ALL_CHARS: f64 = 1_112_064.0;

/// Characters whose case the compile of `pattern` may fold (0 when no `i` flag is set;
/// None when the pattern does not parse). A class is folded by itself, and a bracket or
/// set operation folds what it holds again, so an item counts once for each of those
/// around it; a negated one (`[^a]`, `\P{Greek}`) is folded before it is negated, and
/// then each fold around it walks its complement: nearly every character.
pub(super) fn folded_chars(pattern: &str) -> Option<f64> {
    let parsed = ast::parse::Parser::new().parse(pattern).ok()?;
    let count = ast::visit(&parsed, Count::new(pattern)).ok()?;
    Some(if count.case_insensitive {
        count.chars
    } else {
        0.0
    })
}

struct Count<'p> {
    pattern: &'p str,
    case_insensitive: bool,
    chars: f64,
    /// Brackets and set operations around the item being visited.
    depth: u32,
    /// Characters of each class written alone, looked up once per pattern.
    sizes: HashMap<String, f64>,
}

impl<'p> Count<'p> {
    fn new(pattern: &'p str) -> Self {
        Count {
            pattern,
            case_insensitive: false,
            chars: 0.0,
            depth: 0,
            sizes: HashMap::new(),
        }
    }

    fn flags(&mut self, flags: &Flags) {
        self.case_insensitive |= flags.flag_state(Flag::CaseInsensitive) == Some(true);
    }

    /// `chars` folded `times` times.
    fn fold(&mut self, chars: f64, times: u32) {
        self.chars += chars * f64::from(times);
    }

    fn size(&mut self, class: String) -> f64 {
        *self.sizes.entry(class).or_insert_with_key(|c| chars_of(c))
    }
}

impl<'p> Visitor for Count<'p> {
    type Output = Count<'p>;
    type Err = ();

    fn finish(self) -> Result<Count<'p>, ()> {
        Ok(self)
    }

    fn visit_pre(&mut self, ast: &Ast) -> Result<(), ()> {
        match ast {
            Ast::Flags(set) => self.flags(&set.flags),
            Ast::Group(group) => {
                if let ast::GroupKind::NonCapturing(flags) = &group.kind {
                    self.flags(flags);
                }
            }
            Ast::ClassUnicode(class) => {
                let chars = self.size(positive(&class.kind));
                self.fold(chars, 1);
            }
            Ast::ClassBracketed(_) => self.depth += 1,
            // Perl classes outside brackets are not folded (closed under folding already).
            _ => {}
        }
        Ok(())
    }

    fn visit_post(&mut self, ast: &Ast) -> Result<(), ()> {
        if let Ast::ClassBracketed(_) = ast {
            self.depth -= 1;
        }
        Ok(())
    }

    fn visit_class_set_item_pre(&mut self, item: &ClassSetItem) -> Result<(), ()> {
        let around = self.depth;
        match item {
            ClassSetItem::Bracketed(_) => self.depth += 1,
            ClassSetItem::Literal(_) => self.fold(1.0, around),
            ClassSetItem::Range(range) => {
                let chars = f64::from(range.end.c as u32 - range.start.c as u32) + 1.0;
                self.fold(chars, around);
            }
            ClassSetItem::Ascii(class) if class.negated => self.fold(ALL_CHARS, around),
            ClassSetItem::Ascii(_) => self.fold(128.0, around + 1),
            ClassSetItem::Unicode(class) => {
                let chars = self.size(positive(&class.kind));
                self.fold(chars, 1);
                let held = if class.is_negated() { ALL_CHARS } else { chars };
                self.fold(held, around);
            }
            // Not folded by itself; as written (`\W`: most characters) by what holds it.
            ClassSetItem::Perl(class) => {
                let written = &self.pattern[class.span.start.offset..class.span.end.offset];
                let chars = self.size(written.to_string());
                self.fold(chars, around);
            }
            ClassSetItem::Empty(_) | ClassSetItem::Union(_) => {}
        }
        Ok(())
    }

    fn visit_class_set_item_post(&mut self, item: &ClassSetItem) -> Result<(), ()> {
        if let ClassSetItem::Bracketed(bracket) = item {
            self.depth -= 1;
            // Its contents were counted inside it; negated, what holds it folds the rest.
            if bracket.negated {
                self.fold(ALL_CHARS, self.depth);
            }
        }
        Ok(())
    }

    fn visit_class_set_binary_op_pre(&mut self, _: &ast::ClassSetBinaryOp) -> Result<(), ()> {
        self.depth += 1;
        Ok(())
    }

    fn visit_class_set_binary_op_post(&mut self, _: &ast::ClassSetBinaryOp) -> Result<(), ()> {
        self.depth -= 1;
        Ok(())
    }
}

/// A Unicode class written without its negation.
fn positive(kind: &ast::ClassUnicodeKind) -> String {
    match kind {
        ast::ClassUnicodeKind::OneLetter(c) => format!("\\p{{{c}}}"),
        ast::ClassUnicodeKind::Named(name) => format!("\\p{{{name}}}"),
        ast::ClassUnicodeKind::NamedValue { name, value, .. } => format!("\\p{{{name}={value}}}"),
    }
}

/// Characters of a class written alone (case-sensitive: nothing folded); 0 for one that
/// does not compile, which the compile refuses anyway.
fn chars_of(class: &str) -> f64 {
    let Ok(hir) = regex_syntax::Parser::new().parse(class) else {
        return 0.0;
    };
    match hir.kind() {
        HirKind::Class(Class::Unicode(class)) => class
            .ranges()
            .iter()
            .map(|r| f64::from(r.end() as u32 - r.start() as u32) + 1.0)
            .sum(),
        _ => 0.0,
    }
}

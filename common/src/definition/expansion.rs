//! A bound on what a definition's YAML aliases expand to.
//!
//! An alias (`*deps`) repeats the node its anchor (`&deps`) names, so a few hundred KB of
//! aliases can stand for gigabytes: a 5,000-item `depends_on` reused by 8,000 tasks is 40
//! million names. serde_norway (serde_yaml 0.9's code) bounds nesting and the number of
//! alias jumps (relative to the document's length), not what they expand to, and
//! materializes every copy. So before a definition is built, one pass walks the document
//! as the parser replays it, keeping nothing, and stops as soon as its expanded size passes
//! the limit: time and memory stay bounded whatever the aliases say.
//!
//! The expanded size counts what the text would take written out without aliases: each
//! scalar's bytes plus one per node (its separator), so a text without aliases measures
//! at most about its own length.

use super::DefinitionError;
use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};
use std::cell::Cell;
use std::fmt;

/// Refuses `text` when its expanded size passes `limit` bytes.
pub(super) fn check(text: &str, limit: usize) -> Result<(), DefinitionError> {
    let budget = Budget {
        left: Cell::new(limit),
        spent: Cell::new(false),
    };
    match Walk(&budget).deserialize(serde_norway::Deserializer::from_str(text)) {
        Err(_) if budget.spent.get() => Err(DefinitionError::TooLarge { limit }),
        // Syntax errors are the real parse's to report, with their location.
        _ => Ok(()),
    }
}

struct Budget {
    left: Cell<usize>,
    /// The walk stopped because the budget ran out (not for a syntax error).
    spent: Cell<bool>,
}

impl Budget {
    fn spend<E: de::Error>(&self, bytes: usize) -> Result<(), E> {
        match self.left.get().checked_sub(bytes.saturating_add(1)) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => {
                self.spent.set(true);
                Err(E::custom("the definition's expanded size passes the limit"))
            }
        }
    }
}

/// Visits every node of a document, spending its size.
#[derive(Clone, Copy)]
struct Walk<'b>(&'b Budget);

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML node")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.0.spend(0)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.0.spend(0)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.0.spend(0)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.0.spend(0)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.0.spend(v.len())
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<(), E> {
        self.0.spend(v.len())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.0.spend(0)
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.0.spend(0)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.0.spend(0)?;
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.0.spend(0)?;
        while map.next_key_seed(self)?.is_some() {
            map.next_value_seed(self)?;
        }
        Ok(())
    }

    /// A tagged node (`!tag value`): the tag, then its value.
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        let ((), value) = data.variant_seed(self)?;
        value.newtype_variant_seed(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definition::WorkflowDef;

    #[test]
    fn aliases_count_as_often_as_they_repeat() {
        let text = "a: &x [one, two]\nb: *x\nc: *x\n";
        // 3 keys (2 each), 3 lists (1 each) of "one" (4) and "two" (4), the root (1).
        let size = 3 * 2 + 3 * (1 + 4 + 4) + 1;
        assert!(check(text, size).is_ok());
        assert_eq!(
            check(text, size - 1),
            Err(DefinitionError::TooLarge { limit: size - 1 })
        );
    }

    #[test]
    fn a_text_without_aliases_measures_about_its_length() {
        let text = "name: w\ntasks:\n- {name: a, type: shell, command: 'echo hi', depends_on: []}\n- !!str tagged\n";
        assert!(check(text, text.len() + 1).is_ok());
    }

    #[test]
    fn syntax_errors_are_left_to_the_parse() {
        assert!(check("a: [unclosed", 1000).is_ok());
        assert!(check("a: *undefined", 1000).is_ok());
        let err = WorkflowDef::parse_within("a: [unclosed", 1000).unwrap_err();
        assert!(matches!(err, DefinitionError::Syntax { .. }), "{err}");
    }
}

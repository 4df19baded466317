//! A trigger's token or basic password as the definition holds it, and how a presented
//! one is checked.
//!
//! A literal is never stored: [`seal`] turns it into a salted PBKDF2-HMAC-SHA256 hash when
//! the definition is applied, and the API shows a stored hash as [`MASKED`], which applies
//! back as "keep the stored one". The hash is slow on purpose (a viewer who once saw an
//! unsalted SHA-256 could guess a short password offline); checking a call is the API's
//! job (`api-server/src/hooks/auth.rs`), off the async threads.

use ring::pbkdf2;
use std::num::NonZeroU32;

/// What a stored credential shows as when a definition is read.
pub const MASKED: &str = "***";
/// How a salted hash starts: `pbkdf2-sha256$<iterations>$<salt hex>$<hash hex>`.
const PBKDF2_PREFIX: &str = "pbkdf2-sha256$";
/// How an unsalted hash of an earlier release starts; still checked, never written.
const LEGACY_PREFIX: &str = "sha256:";
/// About 40 ms on one core of this project's machines: slow for a guesser, fine for a
/// caller, whose success is remembered by the API.
const ITERATIONS: u32 = 100_000;
const SALT_BYTES: usize = 16;
const HASH_BYTES: usize = 32;

/// A credential of a trigger, as the definition holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential<'a> {
    /// A hash [`seal`] stored (or an earlier release's unsalted one).
    Sealed(&'a str),
    /// The project secret holding the value (`${secret.NAME}`).
    Secret(&'a str),
    /// `***`: the stored hash, as a read definition shows it.
    Masked,
    /// Not sealed yet (a definition being applied).
    Literal(&'a str),
}

impl<'a> Credential<'a> {
    pub fn of(value: &'a str) -> Credential<'a> {
        if value == MASKED {
            Credential::Masked
        } else if value.starts_with(PBKDF2_PREFIX) || value.starts_with(LEGACY_PREFIX) {
            Credential::Sealed(value)
        } else if let Some(name) = value
            .strip_prefix("${secret.")
            .and_then(|rest| rest.strip_suffix('}'))
        {
            Credential::Secret(name)
        } else {
            Credential::Literal(value)
        }
    }
}

/// A new salted hash of `value`.
pub fn hash(value: &str) -> String {
    let mut salt = [0u8; SALT_BYTES];
    // The kernel's generator; failing it, nothing else in the server could run either.
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut salt)
        .expect("the system's random generator works");
    let mut out = [0u8; HASH_BYTES];
    pbkdf2::derive(
        pbkdf2::PBKDF2_HMAC_SHA256,
        NonZeroU32::new(ITERATIONS).expect("non-zero"),
        &salt,
        value.as_bytes(),
        &mut out,
    );
    format!(
        "{PBKDF2_PREFIX}{ITERATIONS}${}${}",
        hex::encode(salt),
        hex::encode(out)
    )
}

/// Whether `presented` is the value `sealed` was made from. Constant time in what matched;
/// slow (PBKDF2): call it off the async threads.
pub fn verify(presented: &str, sealed: &str) -> bool {
    if let Some(hex_hash) = sealed.strip_prefix(LEGACY_PREFIX) {
        let digest = crate::access::token_hash(presented);
        return subtle::ConstantTimeEq::ct_eq(digest.as_bytes(), hex_hash.as_bytes()).into();
    }
    let Some((iterations, salt, hash)) = parse(sealed) else {
        return false;
    };
    pbkdf2::verify(
        pbkdf2::PBKDF2_HMAC_SHA256,
        iterations,
        &salt,
        presented.as_bytes(),
        &hash,
    )
    .is_ok()
}

/// The parts of a `pbkdf2-sha256$…` string, if it is one.
fn parse(sealed: &str) -> Option<(NonZeroU32, Vec<u8>, Vec<u8>)> {
    let mut parts = sealed.strip_prefix(PBKDF2_PREFIX)?.split('$');
    let iterations = parts.next()?.parse::<NonZeroU32>().ok()?;
    let salt = hex::decode(parts.next()?).ok()?;
    let hash = hex::decode(parts.next()?).ok()?;
    let complete = parts.next().is_none() && !salt.is_empty() && hash.len() == HASH_BYTES;
    complete.then_some((iterations, salt, hash))
}

/// Whether a sealed value is well formed (a definition stored by shoal holds only these).
pub fn is_well_formed(sealed: &str) -> bool {
    match sealed.strip_prefix(LEGACY_PREFIX) {
        Some(hex_hash) => {
            hex_hash.len() == 64
                && hex_hash
                    .bytes()
                    .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        }
        None => parse(sealed).is_some(),
    }
}

/// What a credential of a definition being applied is stored as, given what the same
/// trigger's same field holds in the stored version (`kept`): a literal that is the kept
/// value's keeps it (so applying the same definition again stores no new version), other
/// literals are hashed anew; `***` keeps the stored hash; a hash can only be the one kept
/// (hashes are not written by hand). `field` names it in the error.
pub fn seal(field: &str, value: &str, kept: Option<&str>) -> Result<String, String> {
    let kept = kept.filter(|k| matches!(Credential::of(k), Credential::Sealed(_)));
    match (Credential::of(value), kept) {
        (Credential::Secret(_), _) => Ok(value.to_string()),
        (Credential::Masked, Some(kept)) => Ok(kept.to_string()),
        (Credential::Masked, None) => Err(format!(
            "{field} is '{MASKED}' (a hidden stored credential), but the stored workflow has \
             none for it to keep: give the token itself or ${{secret.NAME}}"
        )),
        (Credential::Sealed(_), Some(kept)) if value == kept => Ok(value.to_string()),
        (Credential::Sealed(_), _) => Err(format!(
            "{field} is a hash, which is not the one stored: give the token itself (it is \
             hashed when applied), '{MASKED}' to keep the stored one, or ${{secret.NAME}}"
        )),
        (Credential::Literal(literal), Some(kept)) if verify(literal, kept) => Ok(kept.to_string()),
        (Credential::Literal(literal), _) => Ok(hash(literal)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef-token";

    #[test]
    fn a_hash_is_salted_and_checks_only_its_value() {
        let (one, two) = (hash(TOKEN), hash(TOKEN));
        assert_ne!(one, two, "salted");
        assert!(one.starts_with("pbkdf2-sha256$100000$") && is_well_formed(&one));
        assert!(verify(TOKEN, &one) && verify(TOKEN, &two));
        for wrong in ["0123456789abcdef-tokeN", "", "0123456789abcdef-token "] {
            assert!(!verify(wrong, &one), "{wrong}");
        }
        assert!(!verify(TOKEN, "pbkdf2-sha256$100000$00$00"));
        assert!(!is_well_formed("pbkdf2-sha256$0$00$00") && !is_well_formed("sha256:abc"));
        let legacy = format!("sha256:{}", crate::access::token_hash(TOKEN));
        assert!(is_well_formed(&legacy) && verify(TOKEN, &legacy) && !verify("x", &legacy));
    }

    #[test]
    fn applying_keeps_what_is_stored_unless_the_value_changes() {
        let stored = hash(TOKEN);
        let kept = Some(stored.as_str());
        assert_eq!(seal("auth.token", TOKEN, kept).unwrap(), stored);
        assert_eq!(seal("auth.token", MASKED, kept).unwrap(), stored);
        assert_eq!(seal("auth.token", &stored, kept).unwrap(), stored);
        let changed = seal("auth.token", "another-token-of-16", kept).unwrap();
        assert!(changed != stored && verify("another-token-of-16", &changed));
        let new = seal("auth.token", TOKEN, None).unwrap();
        assert!(new != stored && verify(TOKEN, &new));
        assert_eq!(
            seal("auth.token", "${secret.hook}", kept).unwrap(),
            "${secret.hook}"
        );

        let e = seal("auth.basic.password", MASKED, None).unwrap_err();
        assert!(
            e.starts_with("auth.basic.password is '***'") && e.contains("none"),
            "{e}"
        );
        let e = seal("auth.token", &hash(TOKEN), kept).unwrap_err();
        assert!(e.contains("is a hash, which is not the one stored"), "{e}");
        // A secret reference stored before keeps nothing for `***`.
        let e = seal("auth.token", MASKED, Some("${secret.hook}")).unwrap_err();
        assert!(e.contains("none for it to keep"), "{e}");
    }
}

//! The key that encrypts stored secrets (AES-256-GCM). The api-server seals a value when
//! it is set; a master opens it when a task names the secret. The key never reaches the
//! database: `SHOAL_SECRET_KEY` (64 hex digits, e.g. `openssl rand -hex 32`) on the
//! api-server and every master, or, for `shoal standalone`, a file in its data directory.

use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use std::fmt;
use std::sync::Arc;

/// The environment variable the CLI reads the key from (`--secret-key`).
pub const ENV: &str = "SHOAL_SECRET_KEY";

#[derive(Clone)]
pub struct SecretKey(Arc<LessSafeKey>);

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl SecretKey {
    /// A key given as 64 hex digits.
    pub fn from_hex(text: &str) -> Result<SecretKey, String> {
        let bytes = (hex::decode(text.trim()).ok())
            .filter(|b| b.len() == 32)
            .ok_or_else(|| {
            format!("the secret key must be 64 hex digits (32 bytes), e.g. the output of `openssl rand -hex 32`; set {ENV}")
        })?;
        let key = UnboundKey::new(&AES_256_GCM, &bytes).map_err(|_| "invalid key".to_string())?;
        Ok(SecretKey(Arc::new(LessSafeKey::new(key))))
    }

    /// A new random key, as 64 hex digits.
    pub fn generate() -> Result<String, String> {
        let mut bytes = [0u8; 32];
        SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| "the system's random generator failed".to_string())?;
        Ok(hex::encode(bytes))
    }

    /// Encrypts `value`, bound to `context` (the secret's project and name: a sealed value
    /// copied to another secret does not open). Hex of nonce, ciphertext and tag.
    pub fn seal(&self, context: &str, value: &str) -> Result<String, String> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| "the system's random generator failed".to_string())?;
        let mut data = value.as_bytes().to_vec();
        self.0
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(context.as_bytes()),
                &mut data,
            )
            .map_err(|_| "encryption failed".to_string())?;
        Ok(hex::encode(nonce) + &hex::encode(data))
    }

    /// Decrypts what [`SecretKey::seal`] made for `context`; an error for another key, another
    /// context or altered bytes.
    pub fn open(&self, context: &str, sealed: &str) -> Result<String, String> {
        let refused =
            || format!("secret {context} does not decrypt with this key (another {ENV}?)");
        let bytes = (hex::decode(sealed).ok())
            .filter(|b| b.len() >= NONCE_LEN)
            .ok_or_else(refused)?;
        let (nonce, data) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| refused())?;
        let mut data = data.to_vec();
        let plain = self
            .0
            .open_in_place(nonce, Aad::from(context.as_bytes()), &mut data)
            .map_err(|_| refused())?;
        String::from_utf8(plain.to_vec()).map_err(|_| refused())
    }
}

/// The context an external task's params are sealed under (they name a secret): bound to
/// the attempt, so sealed params copied to another do not open.
pub fn external_params_context(task_instance_id: i64) -> String {
    format!("external task {task_instance_id} params")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_only_with_its_key_and_context() {
        let key = SecretKey::from_hex(&SecretKey::generate().unwrap()).unwrap();
        let sealed = key.seal("p/db", "postgres://u:pw@h/db").unwrap();
        assert!(!sealed.contains("pw"));
        assert_ne!(
            sealed,
            key.seal("p/db", "postgres://u:pw@h/db").unwrap(),
            "fresh nonce"
        );
        assert_eq!(key.open("p/db", &sealed).unwrap(), "postgres://u:pw@h/db");
        assert!(
            key.open("p/other", &sealed)
                .unwrap_err()
                .contains("p/other")
        );
        let other = SecretKey::from_hex(&SecretKey::generate().unwrap()).unwrap();
        assert!(other.open("p/db", &sealed).is_err());
        let mut altered = sealed.clone();
        altered.replace_range(40..41, if &sealed[40..41] == "0" { "1" } else { "0" });
        assert!(key.open("p/db", &altered).is_err());
        assert!(key.open("p/db", "zz").is_err());
    }

    #[test]
    fn a_key_is_64_hex_digits() {
        assert!(SecretKey::from_hex(&"ab".repeat(32)).is_ok());
        assert!(
            SecretKey::from_hex("abc")
                .unwrap_err()
                .contains("64 hex digits")
        );
        assert!(SecretKey::from_hex(&"zz".repeat(32)).is_err());
        assert!(SecretKey::from_hex(&"AB".repeat(32)).is_ok(), "either case");
        assert!(SecretKey::from_hex(&"ab".repeat(33)).is_err(), "33 bytes");
        assert!(
            SecretKey::from_hex(&"+f".repeat(32)).is_err(),
            "digits only"
        );
    }
}

//! Accounts: passwords stored as Argon2id hashes, exchanged for random API tokens of which only
//! a SHA-256 digest is stored (a stolen database does not hand out working tokens).

use crate::error::ApiError;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use axum::http::HeaderMap;
use rand::RngCore;
use rusqlite::{params, Connection, OptionalExtension};
use sha2::{Digest, Sha256};

/// Who made a request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub id: i64,
    pub name: String,
    pub admin: bool,
}

impl Caller {
    pub fn require_admin(&self, what: &str) -> Result<(), ApiError> {
        if self.admin {
            Ok(())
        } else {
            Err(ApiError::Forbidden(format!(
                "forbidden: only an administrator may {what}; {} is not an administrator",
                self.name
            )))
        }
    }
}

pub fn hash_password(password: &str) -> Result<String, ApiError> {
    let mut salt = [0u8; 16];
    rand::rng().fill_bytes(&mut salt);
    let salt = SaltString::encode_b64(&salt).map_err(|e| ApiError::Internal(e.to_string()))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| ApiError::Internal(e.to_string()))
}

pub fn verify_password(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|h| Argon2::default().verify_password(password.as_bytes(), &h).is_ok())
}

pub fn new_token() -> String {
    let mut b = [0u8; 24];
    rand::rng().fill_bytes(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub fn token_digest(token: &str) -> String {
    Sha256::digest(token.as_bytes()).iter().map(|x| format!("{x:02x}")).collect()
}

pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers.get("authorization")?.to_str().ok()?.strip_prefix("Bearer ").map(str::trim)
}

pub fn caller(conn: &Connection, headers: &HeaderMap) -> Result<Caller, ApiError> {
    let token = bearer(headers).ok_or_else(|| {
        ApiError::Unauthorized("not logged in: run `libra login` (no API token was sent)".into())
    })?;
    conn.prepare_cached(
        "SELECT u.id, u.name, u.admin FROM tokens t JOIN users u ON u.id = t.user_id WHERE t.hash = ?1",
    )?
    .query_row(params![token_digest(token)], |r| {
        Ok(Caller { id: r.get(0)?, name: r.get(1)?, admin: r.get(2)? })
    })
    .optional()?
    .ok_or_else(|| ApiError::Unauthorized("the API token is not valid: run `libra login` again".into()))
}

/// Constant-time comparison, so the join token cannot be guessed byte by byte from timings.
pub fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub fn user_id(conn: &Connection, name: &str) -> rusqlite::Result<Option<(i64, bool)>> {
    conn.query_row("SELECT id, admin FROM users WHERE name = ?1", params![name], |r| {
        Ok((r.get(0)?, r.get(1)?))
    })
    .optional()
}

pub fn valid_user_name(name: &str) -> Result<(), ApiError> {
    if name.is_empty()
        || name.len() > 64
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(ApiError::BadRequest(format!(
            "name: '{name}' is not accepted: give 1 to 64 letters, digits, '-', '_' or '.'"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_and_tokens() {
        let h = hash_password("s3cret").unwrap();
        assert!(verify_password("s3cret", &h));
        assert!(!verify_password("wrong", &h));
        assert!(!verify_password("s3cret", "not a hash"));
        let t = new_token();
        assert_eq!(t.len(), 48);
        assert_ne!(token_digest(&t), t);
        assert!(same_secret("abc", "abc") && !same_secret("abc", "abd") && !same_secret("abc", "ab"));
        assert!(valid_user_name("demo").is_ok() && valid_user_name("a b").is_err());
    }
}

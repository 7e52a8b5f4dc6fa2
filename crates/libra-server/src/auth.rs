//! Accounts: passwords stored as Argon2id hashes, exchanged for random API tokens of which only
//! a SHA-256 digest is stored (a stolen database does not hand out working tokens).

use crate::error::ApiError;
use argon2::password_hash::{PasswordHash, SaltString};
use argon2::Argon2;
use axum::http::HeaderMap;
use rand::RngCore;
use rusqlite::Connection;
use sha2::{Digest, Sha256};

/// Who made a request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub id: i64,
    pub name: String,
    pub admin: bool,
    /// The hosted sweep whose credential made the request (`None`: the user's own login). A
    /// sweep's credential acts for its owner on jobs only: it cannot change the account.
    pub sweep: Option<i64>,
    /// When the token stops working (Unix seconds).
    pub expires: f64,
}

impl Caller {
    pub fn require_admin(&self, what: &str) -> Result<(), ApiError> {
        // A hosted sweep's credential never carries its owner's administrator rights.
        if self.admin && self.sweep.is_none() {
            Ok(())
        } else {
            Err(ApiError::Forbidden(format!(
                "forbidden: only an administrator may {what}; {} is not an administrator",
                self.name
            )))
        }
    }
}

/// Argon2's working memory (about 19 MiB with the default parameters), kept by a hashing
/// thread and reused for each hash: a flood of logins costs no allocation, and so leaves no
/// freed-but-kept memory behind in the allocator (`crate::login_guard`).
#[derive(Default)]
pub struct HashMemory(Vec<argon2::Block>);

/// The most memory a stored hash may ask for (256 MiB): a damaged or hostile hash must not
/// make a check allocate without bound.
const MAX_HASH_BLOCKS: usize = 256 * 1024;

impl HashMemory {
    fn blocks(&mut self, n: usize) -> &mut [argon2::Block] {
        if self.0.len() < n {
            self.0.resize(n, argon2::Block::new());
        }
        &mut self.0[..n]
    }
}

pub fn hash_password(password: &str) -> Result<String, ApiError> {
    hash_password_in(password, &mut HashMemory::default())
}

/// An Argon2id hash (the default parameters) in PHC string form, computed in `mem`.
pub fn hash_password_in(password: &str, mem: &mut HashMemory) -> Result<String, ApiError> {
    let internal = |e: &dyn std::fmt::Display| ApiError::Internal(e.to_string());
    let mut salt = [0u8; 16];
    rand::rng().fill_bytes(&mut salt);
    let salt = SaltString::encode_b64(&salt).map_err(|e| internal(&e))?;
    let params = argon2::Params::default();
    let a = Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params.clone());
    let mut raw = [0u8; 64];
    let salt_bytes = salt.decode_b64(&mut raw).map_err(|e| internal(&e))?;
    let mut out = [0u8; argon2::Params::DEFAULT_OUTPUT_LEN];
    a.hash_password_into_with_memory(
        password.as_bytes(),
        salt_bytes,
        &mut out,
        mem.blocks(params.block_count()),
    )
    .map_err(|e| internal(&e))?;
    let hash = PasswordHash {
        algorithm: argon2::Algorithm::Argon2id.ident(),
        version: Some(argon2::Version::V0x13.into()),
        params: argon2::password_hash::ParamsString::try_from(&params).map_err(|e| internal(&e))?,
        salt: Some(salt.as_salt()),
        hash: Some(argon2::password_hash::Output::new(&out).map_err(|e| internal(&e))?),
    };
    Ok(hash.to_string())
}

pub fn verify_password(password: &str, hash: &str) -> bool {
    verify_password_in(password, hash, &mut HashMemory::default())
}

/// Whether `password` matches the PHC string `hash`, computed in `mem`.
pub fn verify_password_in(password: &str, hash: &str, mem: &mut HashMemory) -> bool {
    let Ok(h) = PasswordHash::new(hash) else { return false };
    let Ok(algorithm) = argon2::Algorithm::try_from(h.algorithm) else { return false };
    let version = match h.version.map(argon2::Version::try_from) {
        None => argon2::Version::default(),
        Some(Ok(v)) => v,
        Some(Err(_)) => return false,
    };
    let Ok(params) = argon2::Params::try_from(&h) else { return false };
    let (Some(salt), Some(expected)) = (h.salt, h.hash) else { return false };
    let mut raw = [0u8; 64];
    let Ok(salt) = salt.decode_b64(&mut raw) else { return false };
    if params.block_count() > MAX_HASH_BLOCKS {
        return false;
    }
    let expected = expected.as_bytes();
    let mut out = vec![0u8; expected.len()];
    Argon2::new(algorithm, version, params.clone())
        .hash_password_into_with_memory(password.as_bytes(), salt, &mut out, mem.blocks(params.block_count()))
        .is_ok()
        && out.len() == expected.len()
        && out.iter().zip(expected).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
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

/// The caller a token names, if it is a valid token of a user who may still use it: not
/// revoked (logout, a password change, the end of its sweep), not expired, its user neither
/// disabled nor removed. Each refusal says which, so that a user knows what to do.
pub fn caller(conn: &Connection, headers: &HeaderMap, now: f64) -> Result<Caller, ApiError> {
    let token = bearer(headers).ok_or_else(|| {
        ApiError::Unauthorized("not logged in: run `libra login` (no API token was sent)".into())
    })?;
    let row = crate::store::users::token_caller(conn, &token_digest(token))?;
    let (c, disabled, removed) = row.ok_or_else(|| {
        ApiError::Unauthorized(
            "the API token is not valid (logged out, revoked or never issued): run `libra login` again"
                .into(),
        )
    })?;
    if removed || disabled {
        return Err(ApiError::Unauthorized(format!(
            "the account {} is {}: an administrator can {}",
            c.name,
            if removed { "removed" } else { "disabled" },
            if removed { "add it again under a new name" } else { "enable it (`libra admin user enable`)" }
        )));
    }
    if c.expires <= now {
        return Err(ApiError::Unauthorized(
            "the API token has expired: run `libra login` again for a new one".into(),
        ));
    }
    Ok(c)
}

/// Stores a new token for `user` (its digest only) valid for `ttl` seconds; `sweep`: the hosted
/// sweep it belongs to.
pub fn issue_token(
    conn: &Connection,
    user: i64,
    ttl: f64,
    sweep: Option<i64>,
    now: f64,
) -> rusqlite::Result<String> {
    let token = new_token();
    crate::store::users::insert_token(conn, &token_digest(&token), user, now, now + ttl, sweep)?;
    Ok(token)
}

/// Constant-time comparison, so the join token cannot be guessed byte by byte from timings.
pub fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub use crate::store::users::id_of as user_id;

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
        // Hashes made the library's own way (stores from earlier versions) still verify.
        use argon2::password_hash::PasswordHasher;
        let salt = SaltString::encode_b64(b"0123456789abcdef").unwrap();
        let theirs = Argon2::default().hash_password(b"old", &salt).unwrap().to_string();
        let mut mem = HashMemory::default();
        assert!(
            verify_password_in("old", &theirs, &mut mem) && !verify_password_in("new", &theirs, &mut mem)
        );
        assert!(h.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{h}");
        let t = new_token();
        assert_eq!(t.len(), 48);
        assert_ne!(token_digest(&t), t);
        assert!(same_secret("abc", "abc") && !same_secret("abc", "abd") && !same_secret("abc", "ab"));
        assert!(valid_user_name("demo").is_ok() && valid_user_name("a b").is_err());
    }
}

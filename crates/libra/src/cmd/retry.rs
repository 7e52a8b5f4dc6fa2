//! A request that changes something (a job, a sweep, credit), sent so that a lost answer costs
//! nothing: one idempotency key for the invocation, and the same request with the same key again
//! when the connection fails. The server acts once per key and answers a repeat with what the
//! first request did, so a retry that reaches a server which already acted (the answer was lost
//! on the way, or the server was restarting) never makes a second one.

/// Sends with one idempotency key, again with the same key when the connection fails (with
/// backoff, a few times).
pub fn keyed<T>(send: impl Fn(&str) -> Result<T, libra_api::ClientError>) -> anyhow::Result<T> {
    let key = libra_api::new_idempotency_key();
    let mut wait = std::time::Duration::from_millis(200);
    let mut tries = 0;
    loop {
        match send(&key) {
            Err(e @ libra_api::ClientError::Transport { .. }) if tries < 6 => {
                tries += 1;
                eprintln!("libra: {e}; trying again in {:.1} s", wait.as_secs_f64());
                std::thread::sleep(wait);
                wait = (wait * 2).min(std::time::Duration::from_secs(5));
            }
            r => return Ok(r?),
        }
    }
}

//! A child's output read as it comes, and picking values out of it.

use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// A child's output, line by line, as it comes (read on a thread of its own, so that a child
/// that prints nothing cannot hang the test past its deadline).
pub struct Lines {
    rx: Receiver<String>,
    /// Everything read so far.
    pub seen: String,
}

impl Lines {
    pub fn new(r: impl Read + Send + 'static) -> Lines {
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(r).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Lines { rx, seen: String::new() }
    }

    /// Reads until a line contains `want`; says why not, with the output so far, if the output
    /// ends first or `timeout` passes.
    pub fn until(&mut self, want: &str, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push_str(&line);
                    self.seen.push('\n');
                    if line.contains(want) {
                        return Ok(());
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!("no '{want}' after {timeout:?}; output so far:\n{}", self.seen))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(format!("the output ended without '{want}':\n{}", self.seen))
                }
            }
        }
    }

    /// Reads until the output ends (every writer has closed it: the child has exited); panics
    /// with `what` if that takes longer than `timeout`.
    pub fn until_end(&mut self, timeout: Duration, what: &str) {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push_str(&line);
                    self.seen.push('\n');
                }
                Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("{what}: still writing after {timeout:?}; output so far:\n{}", self.seen)
                }
            }
        }
    }

    /// Whatever else arrives within `wait` (for error messages).
    pub fn rest(&mut self, wait: Duration) -> String {
        while let Ok(line) = self.rx.recv_timeout(wait) {
            self.seen.push_str(&line);
            self.seen.push('\n');
        }
        self.seen.clone()
    }
}

/// The value after `key` on the line that has it, up to the next space.
pub fn word_after<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let at = text.find(key)? + key.len();
    text[at..].split_whitespace().next()
}

//! A loopback TCP proxy that does one thing wrong, once: what a dropped network or an untimely
//! administrator does to a client whose request is on its way.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Passes everything between its clients and the server on loopback port `to`, except at the
/// first request that starts with the proxy's prefix (say `POST /api/sweeps `), where it does
/// its one fault (`FaultyProxy::losing`, `FaultyProxy::before`). Lives as long as the test.
pub struct FaultyProxy {
    /// `http://127.0.0.1:PORT`, to give the client in place of the server's address.
    pub url: String,
    done: Arc<AtomicBool>,
}

/// Something to do just before the first matching request goes on to the server.
type Hook = Box<dyn FnOnce() + Send>;

impl FaultyProxy {
    /// Loses the server's answer to the first matching request: the server gets that request
    /// and carries it out, then the client's connection is closed before the answer reaches it.
    pub fn losing(to: u16, prefix: &'static [u8]) -> FaultyProxy {
        FaultyProxy::start(to, prefix, None)
    }

    /// Runs `hook` before the first matching request goes on to the server (which then answers
    /// it as usual): whatever the hook changes has happened between the client's sending and
    /// the server's reading.
    pub fn before(to: u16, prefix: &'static [u8], hook: impl FnOnce() + Send + 'static) -> FaultyProxy {
        FaultyProxy::start(to, prefix, Some(Box::new(hook)))
    }

    fn start(to: u16, prefix: &'static [u8], hook: Option<Hook>) -> FaultyProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let done = Arc::new(AtomicBool::new(false));
        let lose = hook.is_none();
        let hook = Arc::new(Mutex::new(hook));
        let done_here = done.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(("127.0.0.1", to)) else { continue };
                // Set before the request goes on, read when its answer comes back.
                let losing = Arc::new(AtomicBool::new(false));
                let requests = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (flag, done, hook) = (losing.clone(), done_here.clone(), hook.clone());
                std::thread::spawn(move || {
                    let (mut from, mut to) = requests;
                    let mut buf = [0u8; 65536];
                    while let Ok(n @ 1..) = from.read(&mut buf) {
                        if buf[..n].starts_with(prefix) && !done.load(Ordering::SeqCst) {
                            if lose {
                                flag.store(true, Ordering::SeqCst);
                            } else if let Some(hook) = hook.lock().unwrap_or_else(|p| p.into_inner()).take() {
                                hook();
                                done.store(true, Ordering::SeqCst);
                            }
                        }
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(Shutdown::Write);
                });
                let done = done_here.clone();
                std::thread::spawn(move || {
                    let (mut from, mut to) = (server, client);
                    let mut buf = [0u8; 65536];
                    while let Ok(n @ 1..) = from.read(&mut buf) {
                        if losing.load(Ordering::SeqCst) {
                            done.store(true, Ordering::SeqCst);
                            let _ = to.shutdown(Shutdown::Both);
                            return;
                        }
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(Shutdown::Write);
                });
            }
        });
        FaultyProxy { url, done }
    }

    /// Whether it has done its fault yet (lost the answer, or run the hook).
    pub fn done(&self) -> bool {
        self.done.load(Ordering::SeqCst)
    }
}

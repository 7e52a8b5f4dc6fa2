//! A loopback TCP proxy that loses one answer: what a dropped network does to a client that
//! sent a request the server carried out.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Passes everything between its clients and the server on loopback port `to`, except the
/// server's answer to the first request that starts with the proxy's prefix (say
/// `POST /api/sweeps `): the server gets that request and carries it out, then the client's
/// connection is closed before the answer reaches it. Lives as long as the test.
pub struct LosingProxy {
    /// `http://127.0.0.1:PORT`, to give the client in place of the server's address.
    pub url: String,
    lost: Arc<AtomicBool>,
}

impl LosingProxy {
    pub fn start(to: u16, prefix: &'static [u8]) -> LosingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let lost = Arc::new(AtomicBool::new(false));
        let lost_here = lost.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(("127.0.0.1", to)) else { continue };
                // Set before the request goes on, read when its answer comes back.
                let losing = Arc::new(AtomicBool::new(false));
                let requests = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (flag, lost) = (losing.clone(), lost_here.clone());
                std::thread::spawn(move || {
                    let (mut from, mut to) = requests;
                    let mut buf = [0u8; 65536];
                    while let Ok(n @ 1..) = from.read(&mut buf) {
                        if buf[..n].starts_with(prefix) && !lost.load(Ordering::SeqCst) {
                            flag.store(true, Ordering::SeqCst);
                        }
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(Shutdown::Write);
                });
                let lost = lost_here.clone();
                std::thread::spawn(move || {
                    let (mut from, mut to) = (server, client);
                    let mut buf = [0u8; 65536];
                    while let Ok(n @ 1..) = from.read(&mut buf) {
                        if losing.load(Ordering::SeqCst) {
                            lost.store(true, Ordering::SeqCst);
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
        LosingProxy { url, lost }
    }

    /// Whether it has lost the answer yet.
    pub fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }
}

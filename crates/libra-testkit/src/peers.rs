//! Peers of a test's own on loopback: TCP connections from a source address it chooses
//! (anything in 127.0.0.0/8 is this machine), so that a test can be several hosts at once to a
//! server that counts connections by address.

use std::io::{self, Read};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::time::{Duration, Instant};

/// A connection to `to` from `from` (port chosen by the kernel).
pub fn connect_from(from: Ipv4Addr, to: SocketAddr) -> io::Result<TcpStream> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    s.bind(&SocketAddr::V4(SocketAddrV4::new(from, 0)).into())?;
    s.connect_timeout(&to.into(), Duration::from_secs(5))?;
    Ok(s.into())
}

/// Whether the other end closes `s` (end of file or a reset) within `within`, reading and
/// dropping whatever it sends before.
pub fn closed_within(s: &TcpStream, within: Duration) -> bool {
    let mut reader = s;
    let end = Instant::now() + within;
    let mut buf = [0u8; 4096];
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        if s.set_read_timeout(Some(left)).is_err() {
            return true;
        }
        match reader.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                return false
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return true,
        }
    }
}

/// Waits up to `within` for the other end to have closed all but at most `most` of `conns`
/// (a server refusing them as it takes them, however slowly it takes them on a busy machine);
/// returns how many were open at the last look.
pub fn open_at_most(conns: &[TcpStream], most: usize, within: Duration) -> usize {
    let end = Instant::now() + within;
    loop {
        let open = conns.iter().filter(|s| !closed_within(s, Duration::from_millis(10))).count();
        if open <= most || Instant::now() >= end {
            return open;
        }
    }
}

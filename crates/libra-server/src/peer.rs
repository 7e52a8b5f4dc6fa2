//! Who is at the other end of a connection, for the limits counted per peer (open connections,
//! password guesses).
//!
//! A remote peer is its address (an IPv6 host by its /64: one host is usually given a whole
//! /64). A peer on this machine is not: every address in 127.0.0.0/8 is this machine, and any
//! local user may bind any of them, so counted by address one local user would be sixteen
//! million peers, free to hold every connection the server has or to guess passwords without
//! ever backing off. So a connection from a loopback address (or from the server's own address)
//! is counted against the Unix account that owns the peer's socket, as the kernel records it
//! ([`local_owner`]), whatever address it came from. Root's and the server's own account's
//! connections (node agents, hosted sweeps, the administrator's tools on this machine) are still
//! counted by address: they are the server's own side, and a test or a site may stand several
//! hosts up on loopback under them.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

/// Whom a connection is counted against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Peer {
    /// An IPv4 address, or an IPv6 /64.
    Address(IpAddr),
    /// A Unix account of this machine (its user id), whatever local address it came from.
    Account(u32),
}

impl Peer {
    /// The peer counted by its address alone.
    pub fn of(addr: IpAddr) -> Peer {
        match addr {
            IpAddr::V4(_) => Peer::Address(addr),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Peer::Address(IpAddr::V4(v4)),
                None => {
                    let s = v6.segments();
                    Peer::Address(IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0)))
                }
            },
        }
    }

    /// The peer of a connection from `peer` to the server's `local` address: the account that
    /// owns the peer's socket when the peer is on this machine and that account is not one of
    /// `by_address` (root, the server's own), its address otherwise (and when the kernel cannot
    /// say: a socket closed at once is owned by no one any more).
    pub fn identify(peer: SocketAddr, local: SocketAddr, by_address: &[u32]) -> Peer {
        if is_local(peer.ip(), local.ip()) {
            if let Some(uid) = local_owner(peer, local) {
                if !by_address.contains(&uid) {
                    return Peer::Account(uid);
                }
            }
        }
        Peer::of(peer.ip())
    }
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Peer::Address(IpAddr::V4(a)) => write!(f, "{a}"),
            Peer::Address(IpAddr::V6(a)) => write!(f, "{a}/64"),
            Peer::Account(uid) => write!(f, "local account {uid}"),
        }
    }
}

/// The accounts whose local connections are counted by address: root and the server's own.
pub fn counted_by_address() -> Vec<u32> {
    // SAFETY: geteuid has no memory effects.
    let me = unsafe { libc::geteuid() };
    if me == 0 {
        vec![0]
    } else {
        vec![0, me]
    }
}

/// Whether a connection from `peer` to `local` comes from this machine: a loopback address, or
/// the very address it reached (a local process connecting to the machine's own address).
fn is_local(peer: IpAddr, local: IpAddr) -> bool {
    let canon = |a: IpAddr| match a {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(a, IpAddr::V4),
        v4 => v4,
    };
    let (peer, local) = (canon(peer), canon(local));
    peer.is_loopback() || peer == local
}

/// The user id that owns the socket at `peer` connected to `local` on this machine, as the
/// kernel's socket diagnostics report it (what `ss -e` shows as `uid:`): one exact lookup by the
/// connection's addresses and ports, answered from the kernel's table of connections, not a
/// scan of every socket. `None` when it is not there (closed already, or another network
/// namespace's) or the kernel has no socket diagnostics.
pub fn local_owner(peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    // A client of an IPv4 address reaches a dual-stack listener as an IPv4-mapped address, but
    // its own socket is IPv4: ask in IPv4 terms first, then as it was seen.
    let v4 = |a: SocketAddr| match a {
        SocketAddr::V6(s) => s.ip().to_ipv4_mapped().map(|ip| SocketAddr::new(IpAddr::V4(ip), s.port())),
        SocketAddr::V4(_) => Some(a),
    };
    if let (Some(p), Some(l)) = (v4(peer), v4(local)) {
        if let Ok(Some(uid)) = libra_api::local::socket_owner(p, l) {
            return Some(uid);
        }
    }
    libra_api::local::socket_owner(peer, local).ok().flatten()
}

pub use libra_api::local::listener_owner;

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, TcpListener};

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_ipv6_host_is_its_64_and_a_mapped_ipv4_is_itself() {
        assert_eq!(Peer::of(ip("2001:db8:1:2::1")), Peer::of(ip("2001:db8:1:2:ffff::9")));
        assert_ne!(Peer::of(ip("2001:db8:1:2::1")), Peer::of(ip("2001:db8:1:3::1")));
        assert_eq!(Peer::of(ip("::ffff:192.0.2.7")), Peer::of(ip("192.0.2.7")));
        assert_eq!(Peer::of(ip("2001:db8:1:2::1")).to_string(), "2001:db8:1:2::/64");
        assert_eq!(Peer::Account(1003).to_string(), "local account 1003");
    }

    #[test]
    fn a_local_peer_is_a_loopback_address_or_the_address_it_reached() {
        assert!(is_local(ip("127.0.0.1"), ip("127.0.0.1")));
        assert!(is_local(ip("127.9.8.7"), ip("0.0.0.0")));
        assert!(is_local(ip("::ffff:127.0.0.5"), ip("::")));
        assert!(is_local(ip("::1"), ip("::1")));
        assert!(is_local(ip("192.0.2.7"), ip("::ffff:192.0.2.7")));
        assert!(!is_local(ip("192.0.2.7"), ip("192.0.2.8")));
        assert!(!is_local(ip("2001:db8::1"), ip("2001:db8::2")));
    }

    /// The kernel names the owner of a connection's far end, from any loopback address, and
    /// only of the connection asked about: the server's own end of it, or a connection that is
    /// gone, is not taken for it.
    #[test]
    fn the_owner_of_a_loopback_peer_is_the_account_of_its_socket() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let server = listener.local_addr().unwrap();
        // SAFETY: geteuid has no memory effects.
        let me = unsafe { libc::geteuid() };
        for from in [Ipv4Addr::new(127, 0, 0, 1), Ipv4Addr::new(127, 3, 2, 1)] {
            let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            s.bind(&SocketAddr::new(IpAddr::V4(from), 0).into()).unwrap();
            s.connect(&server.into()).unwrap();
            let (accepted, peer) = listener.accept().unwrap();
            assert_eq!(peer.ip(), IpAddr::V4(from));
            let local = accepted.local_addr().unwrap();
            assert_eq!(local_owner(peer, local), Some(me), "the owner of {peer}");
            // Seen from a dual-stack listener, the same peer is an IPv4-mapped address.
            let mapped = |a: SocketAddr| match a {
                SocketAddr::V4(v4) => SocketAddr::new(IpAddr::V6(v4.ip().to_ipv6_mapped()), v4.port()),
                v6 => v6,
            };
            assert_eq!(local_owner(mapped(peer), mapped(local)), Some(me));
            // A four-tuple no socket has (the peer's port, another server port) is no one's.
            let elsewhere = SocketAddr::new(local.ip(), local.port().wrapping_add(1).max(1));
            assert_eq!(local_owner(peer, elsewhere), None);
            drop(s);
            drop(accepted);
        }
        // A socket made by another account (here: made while this thread's file-system user id
        // is `nobody`'s, which is what the kernel records as a socket's owner): the owner of
        // the peer's end is that account, and of the server's end this one's. So the lookup
        // names the end asked about, not the other.
        if me == 0 {
            let nobody = 65534;
            let s = std::thread::spawn(move || {
                // SAFETY: setfsuid changes this thread's credentials only, and is put back.
                unsafe { libc::setfsuid(nobody) };
                let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None);
                unsafe { libc::setfsuid(0) };
                let s = s.unwrap();
                s.bind(&SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 9)), 0).into()).unwrap();
                s.connect(&server.into()).unwrap();
                s
            })
            .join()
            .unwrap();
            let (accepted, peer) = listener.accept().unwrap();
            let local = accepted.local_addr().unwrap();
            assert_eq!(local_owner(peer, local), Some(nobody));
            assert_eq!(local_owner(local, peer), Some(0), "the server's own end");
            assert_eq!(Peer::identify(peer, local, &counted_by_address()), Peer::Account(nobody));
            drop(s);
        }
        // Over IPv6 loopback, where the machine has it.
        if let Ok(l6) = TcpListener::bind((std::net::Ipv6Addr::LOCALHOST, 0)) {
            let s6 = std::net::TcpStream::connect(l6.local_addr().unwrap()).unwrap();
            let (accepted, peer) = l6.accept().unwrap();
            assert!(peer.is_ipv6());
            assert_eq!(local_owner(peer, accepted.local_addr().unwrap()), Some(me), "over ::1");
            drop(s6);
        }
        // A listener's owner, by its address (or the wildcard's), and no one's on a free port.
        assert_eq!(listener_owner(server), Some(me));
        let wild = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0)).unwrap();
        let port = wild.local_addr().unwrap().port();
        assert_eq!(listener_owner(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)), Some(me));
        drop(wild);
        assert_eq!(listener_owner(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)), None);
        // Owned by root or by this account: counted by address, as `identify` is told.
        let s = std::net::TcpStream::connect(server).unwrap();
        let (accepted, peer) = listener.accept().unwrap();
        let local = accepted.local_addr().unwrap();
        assert_eq!(Peer::identify(peer, local, &[me]), Peer::Address(peer.ip()));
        assert_eq!(Peer::identify(peer, local, &[]), Peer::Account(me));
        drop(s);
    }
}

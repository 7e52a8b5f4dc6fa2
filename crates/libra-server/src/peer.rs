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
        if let Ok(Some(uid)) = sock_diag::owner(p, l) {
            return Some(uid);
        }
    }
    sock_diag::owner(peer, local).ok().flatten()
}

/// The user id that owns the TCP socket listening at `addr` on this machine (a listener bound to
/// the wildcard address counts for every address), as the kernel's socket diagnostics report
/// it; `None` when nothing listens there or the kernel cannot say. What a client checks before
/// it sends a password or a token to a server on loopback, whose port any local account could
/// have taken while the server was down.
pub fn listener_owner(addr: SocketAddr) -> Option<u32> {
    // No connection has a remote of port 0: the kernel's lookup falls through to the listeners.
    let nowhere = match addr {
        SocketAddr::V4(_) => SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0),
        SocketAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
    };
    sock_diag::owner(addr, nowhere).ok().flatten()
}

/// The kernel's socket diagnostics over netlink (`NETLINK_SOCK_DIAG`, `linux/inet_diag.h`):
/// one request naming a TCP socket by its four-tuple, one answer with its owner.
mod sock_diag {
    use std::io;
    use std::mem::size_of;
    use std::net::{IpAddr, SocketAddr};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    const NLMSG_ERROR: u16 = 2;
    /// `INET_DIAG_NOCOOKIE`: the socket is named by its addresses alone.
    const NO_COOKIE: u32 = !0;

    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct NlMsgHdr {
        len: u32,
        kind: u16,
        flags: u16,
        seq: u32,
        pid: u32,
    }

    /// `struct inet_diag_sockid`: ports and addresses in network byte order.
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct SockId {
        sport: [u8; 2],
        dport: [u8; 2],
        src: [u8; 16],
        dst: [u8; 16],
        interface: u32,
        cookie: [u32; 2],
    }

    /// `struct inet_diag_req_v2`.
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Request {
        family: u8,
        protocol: u8,
        ext: u8,
        pad: u8,
        states: u32,
        id: SockId,
    }

    /// `struct inet_diag_msg`.
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Message {
        family: u8,
        state: u8,
        timer: u8,
        retrans: u8,
        id: SockId,
        expires: u32,
        rqueue: u32,
        wqueue: u32,
        uid: u32,
        inode: u32,
    }

    fn put(addr: IpAddr, into: &mut [u8; 16]) {
        match addr {
            IpAddr::V4(a) => into[..4].copy_from_slice(&a.octets()),
            IpAddr::V6(a) => *into = a.octets(),
        }
    }

    /// The owner of the TCP socket whose own address is `sock` and whose remote end is `remote`.
    pub fn owner(sock: SocketAddr, remote: SocketAddr) -> io::Result<Option<u32>> {
        let family = match sock {
            SocketAddr::V4(_) => libc::AF_INET,
            SocketAddr::V6(_) => libc::AF_INET6,
        };
        if sock.is_ipv4() != remote.is_ipv4() {
            return Ok(None);
        }
        // The kernel finds the socket whose local end is `src:sport` and whose remote end is
        // `dst:dport` (inet_diag_find_one_icsk).
        let mut id = SockId {
            sport: sock.port().to_be_bytes(),
            dport: remote.port().to_be_bytes(),
            cookie: [NO_COOKIE; 2],
            ..SockId::default()
        };
        put(sock.ip(), &mut id.src);
        put(remote.ip(), &mut id.dst);
        #[repr(C)]
        struct Packet {
            head: NlMsgHdr,
            req: Request,
        }
        let packet = Packet {
            head: NlMsgHdr {
                len: size_of::<Packet>() as u32,
                kind: SOCK_DIAG_BY_FAMILY,
                flags: libc::NLM_F_REQUEST as u16,
                seq: 1,
                pid: 0,
            },
            req: Request {
                family: family as u8,
                protocol: libc::IPPROTO_TCP as u8,
                states: !0,
                id,
                ..Request::default()
            },
        };
        // SAFETY: a new socket; its descriptor is owned from here on.
        let fd = unsafe {
            libc::socket(libc::AF_NETLINK, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, libc::NETLINK_SOCK_DIAG)
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a descriptor this function just opened and nothing else holds.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // The kernel answers at once; a second is the bound on an accept loop's wait if not.
        let wait = libc::timeval { tv_sec: 1, tv_usec: 0 };
        // SAFETY: the option's value is the timeval given, of its own size.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&wait as *const libc::timeval).cast(),
                size_of::<libc::timeval>() as libc::socklen_t,
            );
        }
        // SAFETY: a zeroed sockaddr_nl is the kernel's address (pid 0, no groups).
        let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: sends `packet`, of its own size, to the address given, of its own size.
        let sent = unsafe {
            libc::sendto(
                fd.as_raw_fd(),
                (&packet as *const Packet).cast(),
                size_of::<Packet>(),
                0,
                (&kernel as *const libc::sockaddr_nl).cast(),
                size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut buf = [0u8; 1024];
        // SAFETY: receives at most `buf.len()` bytes into `buf`.
        let got = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if got < 0 {
            return Err(io::Error::last_os_error());
        }
        let got = got as usize;
        if got < size_of::<NlMsgHdr>() {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "a short answer from the kernel"));
        }
        // SAFETY: `buf` holds at least a header's bytes; read unaligned, as plain integers.
        let head: NlMsgHdr = unsafe { std::ptr::read_unaligned(buf.as_ptr().cast()) };
        match head.kind {
            // An error message carries the errno, negated: no such socket is ENOENT.
            NLMSG_ERROR => Ok(None),
            SOCK_DIAG_BY_FAMILY if got >= size_of::<NlMsgHdr>() + size_of::<Message>() => {
                // SAFETY: `buf` holds a header and a message's bytes after it.
                let msg: Message =
                    unsafe { std::ptr::read_unaligned(buf.as_ptr().add(size_of::<NlMsgHdr>()).cast()) };
                Ok(Some(msg.uid))
            }
            other => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("an answer of kind {other} from the kernel"),
            )),
        }
    }
}

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

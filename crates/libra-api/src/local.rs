//! Who runs a socket on this machine, from the kernel's socket diagnostics: what the server
//! counts a local peer by (`libra_server::peer`), and what a client or a node agent checks before
//! it sends a password, a token or a credential to a server on loopback, whose port any local
//! account could have taken while the server was down.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

pub use sock_diag::owner as socket_owner;

/// The Unix account (user id) running the server at `server` (a URL) when it listens on this
/// machine's loopback; `None` for any other server, or when the kernel cannot say.
pub fn loopback_server_owner(server: &str) -> Option<u32> {
    let url = url::Url::parse(server).ok()?;
    let port = url.port_or_known_default()?;
    let ips: Vec<IpAddr> = match url.host()? {
        url::Host::Domain(d) if d.eq_ignore_ascii_case("localhost") => {
            vec![IpAddr::V4(Ipv4Addr::LOCALHOST), IpAddr::V6(Ipv6Addr::LOCALHOST)]
        }
        url::Host::Ipv4(a) if a.is_loopback() => vec![IpAddr::V4(a)],
        url::Host::Ipv6(a) if a.is_loopback() => vec![IpAddr::V6(a)],
        _ => return None,
    };
    ips.into_iter().find_map(|ip| listener_owner(SocketAddr::new(ip, port)))
}

/// The user id that owns the TCP socket listening at `addr` on this machine (a listener bound to
/// the wildcard address counts for every address), as the kernel's socket diagnostics report
/// it; `None` when nothing listens there or the kernel cannot say. What a client checks before
/// it sends a password or a token to a server on loopback, whose port any local account could
/// have taken while the server was down.
pub fn listener_owner(addr: SocketAddr) -> Option<u32> {
    // No connection has a remote of port 0: the kernel's lookup falls through to the listeners.
    let nowhere = match addr {
        SocketAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        SocketAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
    };
    socket_owner(addr, nowhere).ok().flatten()
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

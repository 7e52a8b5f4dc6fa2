//! The connections the API takes. Each open connection holds a file descriptor of the server's,
//! and before its first request nothing says who is at the other end: a peer that opens
//! connections and sends nothing (or a header a byte at a time) used to hold them for good, and
//! once the server's descriptors were used up no one could reach it: not the users, not the
//! node agents, whose nodes were then marked down and their jobs lost. So:
//!
//! - a peer address may hold at most `max_connections_per_address` open connections, and the
//!   server at most `max_connections` in all (by default what its open-file limit leaves after
//!   [`RESERVED_FILES`] for the store and the sweeps); a connection past either is closed as soon
//!   as it is taken, counted, and logged at most every [`WARN_EVERY`];
//! - a connection must send a request's header within `header_timeout` of opening or of its
//!   last answer (hyper's header read timeout), a TLS handshake within as long ([`serve`], the
//!   accept loop), and a request's body within as long of its header ([`Timed`]);
//! - the server raises its soft open-file limit to the hard one as it starts ([`raise_open_files`]).
//!
//! A peer is an address (IPv6 by its /64), or on this machine the Unix account of the peer's
//! socket, whatever loopback address it came from ([`Peer`]).

pub use crate::peer::Peer;
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Open files the default `max_connections` leaves to the rest of the server: the store and its
/// readers, the hosted sweeps' databases and keepers, logs, the listener.
pub const RESERVED_FILES: u64 = 256;

/// A refused connection is logged at most this often (each line says how many since the last).
pub const WARN_EVERY: Duration = Duration::from_secs(10);

/// Why a connection was closed as it was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Its address already held `max_connections_per_address`.
    Address,
    /// The server already held `max_connections`.
    Total,
}

impl Refused {
    pub fn label(self) -> &'static str {
        match self {
            Refused::Address => "address",
            Refused::Total => "total",
        }
    }
}

/// Counts the open connections, by peer and in all, and admits or refuses new ones.
#[derive(Debug)]
pub struct Gate {
    per_address: usize,
    total: usize,
    state: Mutex<State>,
    refused_address: AtomicU64,
    refused_total: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    open: HashMap<Peer, usize>,
    total: usize,
    /// For each reason (`Refused as usize`): when a refusal was last logged, and those not
    /// logged since.
    warned: [Option<Instant>; 2],
    unlogged: [u64; 2],
}

impl Gate {
    pub fn new(per_address: usize, total: usize) -> Gate {
        Gate {
            per_address,
            total,
            state: Mutex::new(State::default()),
            refused_address: AtomicU64::new(0),
            refused_total: AtomicU64::new(0),
        }
    }

    /// Takes a connection from `peer`: a ticket that counts it until dropped, or why not.
    pub fn admit(self: &Arc<Self>, peer: Peer) -> Result<Ticket, Refused> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let held = s.open.get(&peer).copied().unwrap_or(0);
        let refused = if held >= self.per_address {
            Some(Refused::Address)
        } else if s.total >= self.total {
            Some(Refused::Total)
        } else {
            None
        };
        if let Some(why) = refused {
            match why {
                Refused::Address => self.refused_address.fetch_add(1, Ordering::Relaxed),
                Refused::Total => self.refused_total.fetch_add(1, Ordering::Relaxed),
            };
            let k = why as usize;
            s.unlogged[k] += 1;
            let now = Instant::now();
            if s.warned[k].is_none_or(|t| now.duration_since(t) >= WARN_EVERY) {
                let n = std::mem::take(&mut s.unlogged[k]);
                s.warned[k] = Some(now);
                let open = s.total;
                drop(s);
                match why {
                    Refused::Address => tracing::warn!(
                        peer = %peer,
                        refused = n,
                        "connections refused: {peer} already holds {held} open connections, the most one peer may (max_connections_per_address = {}); {n} refused since the last such line",
                        self.per_address
                    ),
                    Refused::Total => tracing::warn!(
                        peer = %peer,
                        refused = n,
                        "connections refused: the server already holds {open} open connections, the most it takes (max_connections = {}); {n} refused since the last such line",
                        self.total
                    ),
                }
            }
            return Err(why);
        }
        *s.open.entry(peer).or_insert(0) += 1;
        s.total += 1;
        Ok(Ticket { gate: self.clone(), peer })
    }

    /// Connections open now, in all.
    pub fn open(&self) -> usize {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).total
    }

    /// Connections open now from `addr`'s address (or /64), counted by address.
    pub fn open_from(&self, addr: std::net::IpAddr) -> usize {
        self.open_of(Peer::of(addr))
    }

    /// Connections open now counted against `peer`.
    pub fn open_of(&self, peer: Peer) -> usize {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.open.get(&peer).copied().unwrap_or(0)
    }

    /// Connections refused since the start, by reason.
    pub fn refused(&self, why: Refused) -> u64 {
        match why {
            Refused::Address => self.refused_address.load(Ordering::Relaxed),
            Refused::Total => self.refused_total.load(Ordering::Relaxed),
        }
    }
}

/// One admitted connection, counted until dropped (when the connection closes).
#[derive(Debug)]
pub struct Ticket {
    gate: Arc<Gate>,
    peer: Peer,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut s = self.gate.state.lock().unwrap_or_else(|p| p.into_inner());
        s.total = s.total.saturating_sub(1);
        if let Some(n) = s.open.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                s.open.remove(&self.peer);
            }
        }
    }
}

/// How long a graceful stop waits for the requests in flight.
const STOP_WAIT: Duration = Duration::from_secs(5);

/// Serves `router` on `listener` (TLS when `tls` is given) until `shutdown` resolves, every
/// connection through `gate`, each as HTTP/1 with hyper's header read timeout (`header_timeout`:
/// it runs from the connection's opening, or the end of its TLS handshake, and again from each
/// answer, so a peer that sends nothing, or a header a byte at a time, or lets a kept-alive
/// connection idle, is closed). A TLS handshake has `header_timeout` too.
/// Then it stops taking connections and gives those with a request in flight `STOP_WAIT` (5 s).
///
/// The accept loop is Libra's own rather than axum's or axum-server's: both serve through
/// hyper-util's version-sniffing builder, which waits for a connection's first bytes before
/// any timeout starts, so a silent connection was kept for ever.
pub async fn serve(
    listener: tokio::net::TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    router: axum::Router,
    gate: Arc<Gate>,
    header_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let tls = tls.map(tokio_rustls::TlsAcceptor::from);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(header_timeout);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut accept_failed: Option<Instant> = None;
    let by_address = crate::peer::counted_by_address();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(v) => v,
                Err(e) => {
                    // Out of descriptors (EMFILE, ENFILE) or a connection reset before it was
                    // taken: the loop goes on, and says so at most every WARN_EVERY.
                    if accept_failed.is_none_or(|t| t.elapsed() >= WARN_EVERY) {
                        accept_failed = Some(Instant::now());
                        tracing::warn!("taking a connection: {e}");
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        // Who it is: its address, or on this machine its account (one lookup in the kernel's
        // table of connections). Past the gate's limits the stream is dropped here: the peer
        // sees it closed at once.
        let who = match stream.local_addr() {
            Ok(local) => Peer::identify(peer, local, &by_address),
            Err(_) => Peer::of(peer.ip()),
        };
        let Ok(ticket) = gate.admit(who) else { continue };
        let _ = stream.set_nodelay(true);
        let service = {
            let router = router.clone();
            hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
                // The peer's address reaches the handlers, and whom it counts as (login
                // throttling is per peer).
                req.extensions_mut().insert(axum::extract::ConnectInfo(peer));
                req.extensions_mut().insert(who);
                let req = req.map(|body| Timed::new(body, header_timeout));
                tower_service::Service::call(&mut router.clone(), req)
            })
        };
        let (http, tls, watcher) = (http.clone(), tls.clone(), graceful.watcher());
        tokio::spawn(async move {
            let _ticket = ticket;
            let served = match tls {
                None => watcher.watch(http.serve_connection(TokioIo::new(stream), service)).await,
                Some(tls) => match tokio::time::timeout(header_timeout, tls.accept(stream)).await {
                    Ok(Ok(stream)) => {
                        watcher.watch(http.serve_connection(TokioIo::new(stream), service)).await
                    }
                    // A failed or slow handshake: nothing was asked, nothing to say.
                    _ => return,
                },
            };
            if let Err(e) = served {
                tracing::debug!(%peer, "connection: {e}");
            }
        });
    }
    // Stop taking connections (the kernel refuses them once the listener is closed), close the
    // idle ones, and let those with a request in flight finish.
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(STOP_WAIT) => {}
    }
    Ok(())
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

pin_project_lite::pin_project! {
    /// A request's body that must arrive within `limit` of its header, or its reading fails
    /// (and the handler answers 400, and the connection closes): the header timeout's bound on
    /// a peer that sends a header in time and then its body a byte at a time. The largest body
    /// the API takes (2 MiB) in the default 30 s is 70 KB/s.
    pub struct Timed<B> {
        #[pin]
        inner: B,
        #[pin]
        deadline: tokio::time::Sleep,
        limit: Duration,
    }
}

impl<B> Timed<B> {
    pub fn new(inner: B, limit: Duration) -> Self {
        Timed { inner, deadline: tokio::time::sleep(limit), limit }
    }
}

impl<B> http_body::Body for Timed<B>
where
    B: http_body::Body,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<B::Data>, BoxError>>> {
        use std::task::Poll;
        let this = self.project();
        match this.inner.poll_frame(cx) {
            Poll::Ready(frame) => Poll::Ready(frame.map(|r| r.map_err(Into::into))),
            Poll::Pending => match this.deadline.poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(format!(
                    "not received within {} s of the request's header (header_timeout)",
                    this.limit.as_secs_f64()
                )
                .into()))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Raises this process's soft limit of open files to its hard limit (as Go's runtime does):
/// the default soft limit of 1,024 would be the server's ceiling of connections otherwise.
/// Returns the soft limit in force after.
pub fn raise_open_files() -> u64 {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit only read and write the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
    }
    if lim.rlim_cur == libc::RLIM_INFINITY {
        u64::MAX
    } else {
        lim.rlim_cur
    }
}

/// The `max_connections` in force: the configured one, or what `open_files` leaves after
/// [`RESERVED_FILES`] (at least 64).
pub fn total_limit(configured: Option<u32>, open_files: u64) -> usize {
    match configured {
        Some(n) => n as usize,
        None => open_files.saturating_sub(RESERVED_FILES).clamp(64, 1 << 20) as usize,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> std::net::IpAddr {
        s.parse().unwrap()
    }

    fn peer(s: &str) -> Peer {
        Peer::of(ip(s))
    }

    #[test]
    fn an_address_past_its_limit_is_refused_and_others_are_not() {
        let gate = Arc::new(Gate::new(2, 3));
        let a1 = gate.admit(peer("10.0.0.1")).unwrap();
        let _a2 = gate.admit(peer("10.0.0.1")).unwrap();
        assert_eq!(gate.admit(peer("10.0.0.1")).unwrap_err(), Refused::Address);
        let _b = gate.admit(peer("10.0.0.2")).unwrap();
        // Three open: the server's limit, whoever asks.
        assert_eq!(gate.admit(peer("10.0.0.3")).unwrap_err(), Refused::Total);
        assert_eq!((gate.refused(Refused::Address), gate.refused(Refused::Total)), (1, 1));
        drop(a1);
        assert_eq!(gate.open(), 2);
        assert_eq!(gate.open_from(ip("10.0.0.1")), 1);
        let _a3 = gate.admit(peer("10.0.0.1")).expect("a closed connection frees its place");
    }

    #[test]
    fn an_ipv6_host_is_counted_by_its_64_and_a_mapped_ipv4_as_itself() {
        let gate = Arc::new(Gate::new(1, 100));
        let _a = gate.admit(peer("2001:db8:1:2::1")).unwrap();
        // Another address of the same /64: the same host, as far as anyone can tell.
        assert_eq!(gate.admit(peer("2001:db8:1:2:ffff::9")).unwrap_err(), Refused::Address);
        let _b = gate.admit(peer("2001:db8:1:3::1")).unwrap();
        let _c = gate.admit(peer("192.0.2.7")).unwrap();
        assert_eq!(gate.admit(peer("::ffff:192.0.2.7")).unwrap_err(), Refused::Address);
        assert_eq!(Peer::of(ip("2001:db8:1:2::1")).to_string(), "2001:db8:1:2::/64");
    }

    #[test]
    fn a_local_account_is_one_peer_apart_from_the_addresses() {
        let gate = Arc::new(Gate::new(2, 100));
        let _m = [gate.admit(Peer::Account(1003)).unwrap(), gate.admit(Peer::Account(1003)).unwrap()];
        assert_eq!(gate.admit(Peer::Account(1003)).unwrap_err(), Refused::Address);
        assert_eq!(gate.open_of(Peer::Account(1003)), 2);
        // Another account, and the loopback address itself (root's tools, node agents), are
        // not held back by it.
        let _o = gate.admit(Peer::Account(1004)).unwrap();
        let _r = gate.admit(peer("127.0.0.1")).unwrap();
        assert_eq!(gate.open_from(ip("127.0.0.1")), 1);
    }

    #[test]
    fn the_default_total_is_what_the_open_file_limit_leaves() {
        assert_eq!(total_limit(None, 20_000), 20_000 - RESERVED_FILES as usize);
        assert_eq!(total_limit(None, 100), 64);
        assert_eq!(total_limit(None, u64::MAX), 1 << 20);
        assert_eq!(total_limit(Some(10), 20_000), 10);
    }
}

//! The API's connections under TLS, attacked from addresses of the test's own on loopback: a
//! peer keeps at most `max_connections_per_address` open, a silent connection or a handshake
//! begun and left is closed after `header_timeout`, and a client that speaks properly is
//! answered all along. (The plain-HTTP side, with real `libra` processes, is in the `libra`
//! crate's `security_e2e`.)

use libra_api::Client;
use libra_server::peer::Peer;
use libra_testkit::{closed_within, connect_from, open_at_most, TestServer, TEST_ADMIN_PW};
use std::io::Write;
use std::net::Ipv4Addr;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

#[test]
fn over_tls_one_address_keeps_its_share_and_no_silent_connection_outlives_the_timeout() {
    let ts = TestServer::start_with(|c| {
        c.tls_self_signed = true;
        c.max_connections_per_address = 4;
        c.max_connections = Some(32);
        c.header_timeout = 3.0;
    });
    let url = format!("https://{}", ts.bg.addr);
    let ca = ts.dir.path().join("tls").join("cert.pem");
    let client = || Client::connect(&url, None, Some(&ca), false).unwrap();
    let gate = ts.bg.app.connections.get().expect("the server counts its connections").clone();
    let mallory = Ipv4Addr::new(127, 0, 0, 2);

    // Ten connections that never begin a handshake, and one that begins and stops.
    let silent: Vec<_> = (0..10).map(|_| connect_from(mallory, ts.bg.addr).unwrap()).collect();
    let kept = open_at_most(&silent, 4, Duration::from_secs(2));
    assert!(kept <= 4, "kept {kept} of one address's 10 connections (at most 4)");
    assert!(gate.open_from(mallory.into()) <= 4, "{} open from one address", gate.open_from(mallory.into()));
    // Another address is not held back by it, and an honest client is answered.
    let mut begun = connect_from(Ipv4Addr::new(127, 0, 0, 3), ts.bg.addr).unwrap();
    begun.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00]).unwrap(); // a TLS record header, no more
    assert!(client().login("admin", TEST_ADMIN_PW).is_ok());

    // The header timeout (3 s) closes the silent ones and the stalled handshake.
    let t0 = Instant::now();
    let left = silent.iter().filter(|s| !closed_within(s, Duration::from_secs(10))).count();
    assert_eq!(left, 0, "silent connections still open {:?} after a 3 s timeout", t0.elapsed());
    assert!(closed_within(&begun, Duration::from_secs(10)), "a handshake begun and left was kept");
    assert!(gate.refused(libra_server::connections::Refused::Address) >= 6);
    // Nothing the attack held is counted any more.
    libra_testkit::wait_until("the connections' count back down", || {
        (gate.open_from(mallory.into()) == 0).then_some(())
    });
    assert!(client().login("admin", TEST_ADMIN_PW).is_ok());
}

/// What the hostile local user of the test below runs, as their own Unix account (the test binary
/// re-run with `LIBRA_TEST_LOCAL_PEER` naming the server): wrong passwords for the
/// administrator, each from an address not used before, then connections from twenty loopback
/// addresses that never send a request. It reports each step on a line and holds its connections until
/// its input closes. Without that variable it does nothing.
#[test]
fn a_local_peer_on_many_addresses() {
    let Ok(server) = std::env::var("LIBRA_TEST_LOCAL_PEER") else { return };
    let server: std::net::SocketAddr = server.parse().unwrap();
    for i in 0..10u8 {
        let mut s = connect_from(Ipv4Addr::new(127, 0, 1, 10 + i), server).unwrap();
        let body = r#"{"user":"admin","password":"a guess"}"#;
        write!(
            s,
            "POST /api/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        let _ = std::io::Read::read_to_string(&mut s, &mut answer);
        let status = answer.split_whitespace().nth(1).unwrap_or("none").to_string();
        println!("guess {i} {status}");
    }
    let held: Vec<_> = (10..30u8)
        .flat_map(|h| (0..4).map(move |_| connect_from(Ipv4Addr::new(127, 0, 0, h), server).unwrap()))
        .collect();
    println!("held {}", open_at_most(&held, 4, Duration::from_secs(20)));
    println!("ready");
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
    drop(held);
}

/// A local user is one peer whatever loopback address they connect from (any of 127.0.0.0/8 is
/// theirs to bind): a real process of a real Unix account holding connections from twenty
/// addresses keeps `max_connections_per_address` of them, not twenty times as many (which here
/// would be every connection the server takes, and lock everyone out), and guessing the
/// administrator's password from a new address each time backs off as from one address. The
/// administrator, from loopback as root, is answered all along and is not locked out by the
/// guesses.
#[test]
fn a_local_user_is_one_peer_whatever_loopback_address_they_bind() {
    let Some(mallory) = local_account("lcp") else { return };
    let ts = TestServer::start_with(|c| {
        c.max_connections_per_address = 4;
        c.max_connections = Some(64);
        c.header_timeout = 60.0;
        c.audit_repeat_window = 3600.0;
    });
    let gate = ts.bg.app.connections.get().expect("the server counts its connections").clone();
    let (_dir, mut child) =
        run_as(&mallory, "a_local_peer_on_many_addresses", ("LIBRA_TEST_LOCAL_PEER", ts.bg.addr.to_string()));
    let mut lines = libra_testkit::Lines::new(child.stdout.take().unwrap());
    lines.until("ready", Duration::from_secs(60)).unwrap_or_else(|e| panic!("her process: {e}"));
    let seen = lines.seen.clone();
    // Her guesses: the first five are judged (401), and then she waits (429), wherever from.
    // (The wait after the fifth is 1 s, doubling: a guess that a stalled machine sends later
    // than that is judged again, so not every one after the fifth need be refused; from new
    // addresses counted as addresses, none would be.)
    let statuses: Vec<&str> =
        seen.lines().filter_map(|l| l.split("guess ").nth(1)?.split(" ").nth(1)).collect();
    assert_eq!(statuses.len(), 10, "{seen}");
    assert!(statuses[..5].iter().all(|s| *s == "401"), "{statuses:?}");
    let waited = statuses[5..].iter().filter(|s| **s == "429").count();
    assert!(waited >= 3, "guessing from new addresses did not back off: {statuses:?}");
    // The audit log names her account beside the address she chose, and counts her refusals
    // alike as one peer's: the first of each answer written (401, 429), the rest counted in the
    // window, not one entry per address.
    let mark = format!("(local uid {})", mallory.uid);
    let entries: Vec<(String, i64)> = ts
        .db()
        .prepare(
            "SELECT address, status FROM audit WHERE path = '/api/login' AND address LIKE ?1 ORDER BY id",
        )
        .unwrap()
        .query_map([format!("127.0.1.% {mark}")], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let statuses_written: Vec<i64> = entries.iter().map(|e| e.1).collect();
    assert_eq!(statuses_written, [401, 429], "{entries:?}");
    let held: usize = libra_testkit::word_after(&seen, "held ").and_then(|w| w.parse().ok()).unwrap();
    assert!(held <= 4, "she kept {held} of 80 connections from 20 addresses (at most 4): {seen}");
    assert!(gate.open_of(Peer::Account(mallory.uid)) <= 4, "{}", gate.open_of(Peer::Account(mallory.uid)));
    // Meanwhile the administrator, from loopback as root, logs in and is answered.
    assert!(Client::connect(&ts.url, None, None, false).unwrap().login("admin", TEST_ADMIN_PW).is_ok());
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    libra_testkit::wait_until("her connections' count back down", || {
        (gate.open_of(Peer::Account(mallory.uid)) == 0).then_some(())
    });
}

/// A Unix account made for the test (`None`, having said why, where none can be made or its
/// processes run: not root, no useradd).
fn local_account(prefix: &str) -> Option<libra_testkit::Account> {
    // SAFETY: geteuid has no memory effects.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: cannot run a process as another account here, not tested");
        return None;
    }
    let made = libra_testkit::Account::create(&format!("{prefix}{}", std::process::id() % 100_000));
    if made.is_none() {
        eprintln!("useradd is not available: not tested");
    }
    made
}

/// Runs this test binary's `test` as `account` (a copy of the binary where the account can run
/// it), with `env` set, its input and output piped; the copy's directory goes when dropped.
fn run_as(
    account: &libra_testkit::Account,
    test: &str,
    env: (&str, String),
) -> (libra_testkit::Scratch, std::process::Child) {
    let dir = libra_testkit::Scratch::new(test);
    std::fs::set_permissions(&*dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = dir.join("test-binary");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let child = std::process::Command::new(&exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(env.0, env.1)
        .uid(account.uid)
        .gid(account.gid)
        .current_dir(&*dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    (dir, child)
}

/// What the local user of the test below runs as her own account: eight threads logging in
/// with her own password (a right password never backs off) for four seconds, counting the
/// answers. Without `LIBRA_TEST_LOGIN_FLOOD` it does nothing.
#[test]
fn a_local_user_logging_in_over_and_over() {
    let Ok(url) = std::env::var("LIBRA_TEST_LOGIN_FLOOD") else { return };
    println!("flooding");
    let end = Instant::now() + Duration::from_secs(4);
    let counts: Vec<(u32, u32)> = (0..8)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || {
                let (mut ok, mut refused) = (0, 0);
                while Instant::now() < end {
                    match Client::connect(&url, None, None, false).unwrap().login("mallory", "pw-mallory") {
                        Ok(_) => ok += 1,
                        Err(_) => refused += 1,
                    }
                }
                (ok, refused)
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    let ok: u32 = counts.iter().map(|c| c.0).sum();
    let refused: u32 = counts.iter().map(|c| c.1).sum();
    println!("logins ok {ok} refused {refused}");
}

/// The server checks a few passwords at a time, and a right password never backs off: one local
/// user logging in over and over from eight connections at once, as a real process of her own
/// account, takes one hashing thread, not all of them, so the administrator's logins meanwhile
/// are all answered (none "the server is checking too many passwords at once").
#[test]
fn one_user_logging_in_over_and_over_does_not_lock_out_everyone_elses_logins() {
    let Some(mallory) = local_account("lcf") else { return };
    let ts = TestServer::start();
    ts.user("mallory", 0);
    let (_dir, mut child) =
        run_as(&mallory, "a_local_user_logging_in_over_and_over", ("LIBRA_TEST_LOGIN_FLOOD", ts.url.clone()));
    let mut lines = libra_testkit::Lines::new(child.stdout.take().unwrap());
    lines.until("flooding", Duration::from_secs(60)).unwrap_or_else(|e| panic!("her process: {e}"));
    std::thread::sleep(Duration::from_millis(500));
    let mut answers = Vec::new();
    for _ in 0..10 {
        answers.push(
            Client::connect(&ts.url, None, None, false)
                .unwrap()
                .login("admin", TEST_ADMIN_PW)
                .map(|_| ())
                .map_err(|e| e.to_string()),
        );
    }
    lines.until("logins ok", Duration::from_secs(60)).unwrap_or_else(|e| panic!("her process: {e}"));
    assert!(child.wait().unwrap().success());
    let ok: u32 = libra_testkit::word_after(&lines.seen, "logins ok ").and_then(|w| w.parse().ok()).unwrap();
    assert!(ok >= 2, "her flood did not run: {}", lines.seen);
    let refused: Vec<&String> = answers.iter().filter_map(|a| a.as_ref().err()).collect();
    assert!(refused.is_empty(), "the administrator's logins refused during her flood: {refused:?}");
}

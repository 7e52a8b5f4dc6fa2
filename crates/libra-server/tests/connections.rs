//! The API's connections under TLS, attacked from addresses of the test's own on loopback: a
//! peer keeps at most `max_connections_per_address` open, a silent connection or a handshake
//! begun and left is closed after `header_timeout`, and a client that speaks properly is
//! answered all along. (The plain-HTTP side, with real `libra` processes, is in the `libra`
//! crate's `security_e2e`.)

use libra_api::Client;
use libra_testkit::{closed_within, connect_from, open_at_most, TestServer, TEST_ADMIN_PW};
use std::io::Write;
use std::net::Ipv4Addr;
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

//! The Debian package: built with cargo-deb (`crates/libra/debian/build-deb.sh`), unpacked with
//! `dpkg-deb -x` into an empty directory tree, and checked as an administrator would find it:
//! the binary, man pages, shell completions, systemd units, the site configuration and the
//! maintainer script that creates the `libra` account; the unpacked binary runs and reads the
//! packaged configuration.
//!
//! Without cargo-deb the test says so and passes, unless LIBRA_REQUIRE_PACKAGE_TEST=1 (CI sets
//! it after installing cargo-deb), where it fails.
//!
//! In this crate, with the README test, so that it runs after every other test (see readme.rs).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    std::fs::canonicalize(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).unwrap()
}

fn cargo_deb_available() -> bool {
    Command::new("cargo").args(["deb", "--version"]).output().is_ok_and(|o| o.status.success())
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).permissions().mode() & 0o7777
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The unit's settings (`Key=value` lines that are not comments).
fn settings(unit: &str) -> Vec<&str> {
    unit.lines().map(str::trim).filter(|l| !l.starts_with('#') && l.contains('=')).collect()
}

#[test]
fn the_debian_package_holds_what_a_site_needs_and_its_binary_runs() {
    if !cargo_deb_available() {
        assert_ne!(
            std::env::var("LIBRA_REQUIRE_PACKAGE_TEST").as_deref(),
            Ok("1"),
            "LIBRA_REQUIRE_PACKAGE_TEST=1 but cargo-deb is not installed (cargo install cargo-deb --locked)"
        );
        eprintln!(
            "SKIPPED the_debian_package_holds_what_a_site_needs_and_its_binary_runs: cargo-deb is not installed \
             (cargo install cargo-deb --locked; LIBRA_REQUIRE_PACKAGE_TEST=1 makes this a failure)"
        );
        return;
    }
    // Run as an administrator would run it from a shell (and so reusing a release build made
    // there, as CI's is).
    let out = libra_testkit::as_from_a_shell(&mut Command::new(
        workspace().join("crates/libra/debian/build-deb.sh"),
    ))
    .output()
    .unwrap();
    assert!(out.status.success(), "build-deb.sh: {}", String::from_utf8_lossy(&out.stderr));
    let deb = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    let deb = if deb.is_absolute() { deb } else { workspace().join(deb) };
    assert!(deb.is_file(), "no package at {}", deb.display());

    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    let x = Command::new("dpkg-deb").arg("-x").arg(&deb).arg(r).status().unwrap();
    assert!(x.success());
    let control = r.join("DEBIAN");
    assert!(Command::new("dpkg-deb").arg("-e").arg(&deb).arg(&control).status().unwrap().success());

    // The binary.
    let bin = r.join("usr/bin/libra");
    assert_eq!(mode(&bin), 0o755);
    let v = Command::new(&bin).arg("--version").output().unwrap();
    assert!(v.status.success());
    assert!(String::from_utf8_lossy(&v.stdout).starts_with(&format!("libra {}", env!("CARGO_PKG_VERSION"))));

    // The site configuration, as shipped, read by the unpacked binary for both daemons.
    let toml = r.join("etc/libra/libra.toml");
    assert_eq!(mode(&toml), 0o644);
    assert_eq!(read(&toml), read(&workspace().join("crates/libra/debian/libra.toml")));
    assert!(read(&control.join("conffiles")).lines().any(|l| l == "/etc/libra/libra.toml"));
    let p = Command::new(&bin)
        .args(["server", "--print-config", "--config"])
        .arg(&toml)
        .env_remove("LIBRA_JOIN_TOKEN")
        .output()
        .unwrap();
    assert!(p.status.success(), "{}", String::from_utf8_lossy(&p.stderr));
    let text = String::from_utf8_lossy(&p.stdout);
    assert!(
        text.contains(&format!("db = \"/var/lib/libra/server/server.db\"  # file {}", toml.display())),
        "{text}"
    );
    let p = Command::new(&bin).args(["node", "--print-config", "--config"]).arg(&toml).output().unwrap();
    assert!(p.status.success(), "{}", String::from_utf8_lossy(&p.stderr));
    assert!(String::from_utf8_lossy(&p.stdout).contains("workdir = \"/var/lib/libra/node\""));

    // systemd units: the server as `libra` with the hardening options, the agent as root.
    let server = read(&r.join("usr/lib/systemd/system/libra-server.service"));
    let s = settings(&server);
    for want in [
        "User=libra",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ReadWritePaths=/var/lib/libra",
        "PrivateTmp=yes",
        "ProtectHome=yes",
        "ExecStart=/usr/bin/libra server --config /etc/libra/libra.toml",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "EnvironmentFile=-/etc/libra/libra.env",
    ] {
        assert!(s.contains(&want), "libra-server.service lacks {want}:\n{server}");
    }
    let node = read(&r.join("usr/lib/systemd/system/libra-node.service"));
    let n = settings(&node);
    for want in [
        "User=root",
        "Delegate=yes",
        "KillMode=process",
        "TasksMax=infinity",
        "ExecStart=/usr/bin/libra node --config /etc/libra/libra.toml",
    ] {
        assert!(n.contains(&want), "libra-node.service lacks {want}:\n{node}");
    }
    // Jobs inherit the agent's sandbox: these would break them.
    for never in ["NoNewPrivileges=yes", "ProtectHome=yes", "ProtectSystem=strict", "PrivateTmp=yes"] {
        assert!(!n.contains(&never), "libra-node.service has {never}");
    }
    assert!(node.contains("# Fewer hardening options than the server, on purpose"));

    // Man pages for the commands, shell completions for three shells.
    let man = r.join("usr/share/man/man1");
    for page in [
        "libra.1.gz",
        "libra-server.1.gz",
        "libra-node.1.gz",
        "libra-admin-backup.1.gz",
        "libra-admin-node-drain.1.gz",
    ] {
        assert_eq!(mode(&man.join(page)), 0o644, "{page}");
    }
    let manpage = Command::new("gzip").arg("-dc").arg(man.join("libra-server.1.gz")).output().unwrap();
    assert!(String::from_utf8_lossy(&manpage.stdout).contains("print\\-config"));
    for (path, mark) in [
        ("usr/share/bash-completion/completions/libra", "complete"),
        ("usr/share/zsh/vendor-completions/_libra", "#compdef libra"),
        ("usr/share/fish/vendor_completions.d/libra.fish", "complete -c libra"),
    ] {
        let text = read(&r.join(path));
        assert!(text.contains(mark) && text.contains("drain"), "{path}");
    }
    assert!(r.join("usr/share/doc/libra/CONFIGURATION.md").is_file());

    // The maintainer script creates the account and the state directories, keeps secrets private.
    let postinst = control.join("postinst");
    assert_eq!(mode(&postinst) & 0o111, 0o111);
    let script = read(&postinst);
    for want in
        ["useradd --system", "/var/lib/libra/server", "chmod 0640 /etc/libra/libra.env", "LIBRA_JOIN_TOKEN="]
    {
        assert!(script.contains(want), "postinst lacks {want}");
    }
    assert!(
        Command::new("sh").arg("-n").arg(&postinst).status().unwrap().success(),
        "postinst is not valid sh"
    );
    let c = read(&control.join("control"));
    assert!(c.contains("Package: libra") && c.contains("passwd"), "{c}");
}

//! The site configuration: every setting of the server and the node agent is documented in
//! CONFIGURATION.md and present in the packaged /etc/libra/libra.toml (read from the binary's
//! own --print-config, so a new setting cannot be left out of either); --print-config names each
//! value's source; SIGHUP reloads what is safe and says what needs a restart; --log-format json
//! writes JSON lines with the job's id on the lines about a job.

mod common;

use common::*;
use libra_api::{Client, JobState};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn workspace() -> PathBuf {
    std::fs::canonicalize(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).unwrap()
}

fn packaged_toml() -> PathBuf {
    workspace().join("crates/libra/debian/libra.toml")
}

/// `libra <what> --print-config --json [args]`: the settings, as key -> {value, source}.
fn print_config(what: &str, args: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(EXE)
        .arg(what)
        .args(["--print-config", "--json"])
        .args(args)
        .env_remove("LIBRA_JOIN_TOKEN")
        .env_remove("LIBRA_SERVER")
        .env_remove("LIBRA_ADMIN_PASSWORD")
        .env("LIBRA_DATA_DIR", dir.path())
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v
}

fn keys(v: &serde_json::Value) -> BTreeSet<String> {
    v["settings"].as_object().unwrap().keys().cloned().collect()
}

/// The packaged file with its commented-out settings (`# key = value`) put back, flattened to
/// dotted keys per section.
fn packaged_keys(section: &str) -> BTreeSet<String> {
    let text = std::fs::read_to_string(packaged_toml()).unwrap();
    let uncommented: String = text
        .lines()
        .map(|l| match l.strip_prefix("# ") {
            Some(rest) if rest.split_once(" = ").is_some_and(|(k, _)| !k.contains(' ')) => rest,
            _ => l,
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let doc: toml::Table =
        toml::from_str(&uncommented).expect("the packaged file with its settings uncommented");
    fn walk(t: &toml::Table, prefix: &str, out: &mut BTreeSet<String>) {
        for (k, v) in t {
            let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
            match v {
                toml::Value::Table(t) => walk(t, &key, out),
                _ => {
                    out.insert(key);
                }
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(doc[section].as_table().unwrap(), "", &mut out);
    out
}

/// The keys of CONFIGURATION.md's table for `section`.
fn documented_keys(section: &str) -> BTreeSet<String> {
    let doc = std::fs::read_to_string(workspace().join("CONFIGURATION.md")).unwrap();
    let heading = format!("\n## `[{section}]`\n");
    let start =
        doc.find(&heading).unwrap_or_else(|| panic!("CONFIGURATION.md has no {heading:?}")) + heading.len();
    let body = &doc[start..];
    let body = &body[..body.find("\n## ").unwrap_or(body.len())];
    body.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(k, _)| k.to_string()))
        .collect()
}

#[test]
fn every_setting_is_documented_and_in_the_packaged_file() {
    for section in ["server", "node"] {
        let real = keys(&print_config(section, &[], &[]));
        assert!(real.len() >= 8, "{section}: {real:?}");
        let documented = documented_keys(section);
        let packaged = packaged_keys(section);
        assert_eq!(
            real, documented,
            "CONFIGURATION.md's [{section}] table and libra {section}'s settings differ: document each setting, remove stale ones"
        );
        assert_eq!(
            real, packaged,
            "crates/libra/debian/libra.toml's [{section}] and libra {section}'s settings differ: list each (commented out where it has no value)"
        );
        // The packaged file as shipped is read by both daemons.
        let v = print_config(section, &["--config", &packaged_toml().display().to_string()], &[]);
        assert!(v["settings"]
            .as_object()
            .unwrap()
            .values()
            .any(|s| s["source"].as_str().unwrap().starts_with("file ")));
    }
}

#[test]
fn print_config_names_where_each_value_came_from_and_refuses_unknown_keys() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("libra.toml");
    std::fs::write(
        &file,
        "[server]\npolicy = \"libra\"\ndb = \"/srv/libra.db\"\n[server.pricing]\nalpha = 2.5\n[node]\ncpus = 3.0\nserver = \"http://10.1.2.3:7878\"\n",
    )
    .unwrap();
    let f = file.display().to_string();
    let v = print_config(
        "server",
        &["--config", &f, "--beta", "0.7", "--listen", "127.0.0.1:9999"],
        &[("LIBRA_JOIN_TOKEN", "from-the-environment")],
    );
    let s = &v["settings"];
    let file_src = format!("file {f}");
    assert_eq!(
        (s["policy"]["value"].as_str(), s["policy"]["source"].as_str()),
        (Some("libra"), Some(file_src.as_str()))
    );
    assert_eq!(s["pricing.alpha"]["value"], 2.5);
    assert_eq!(s["pricing.alpha"]["source"], file_src.as_str());
    assert_eq!(
        (s["pricing.beta"]["value"].as_f64(), s["pricing.beta"]["source"].as_str()),
        (Some(0.7), Some("flag --beta"))
    );
    assert_eq!(s["listen"]["source"], "flag --listen");
    assert_eq!(s["node_timeout"]["source"], "default");
    assert_eq!(s["join_token"]["source"], "env LIBRA_JOIN_TOKEN");
    // Secrets are never printed.
    assert_eq!(s["join_token"]["value"], "(hidden: 20 characters)");
    assert!(!v.to_string().contains("from-the-environment"));
    assert!(v["problems"].is_null(), "{v}");
    let n = print_config("node", &["--config", &f, "--name", "n9"], &[("LIBRA_JOIN_TOKEN", "tok-tok-tok")]);
    let s = &n["settings"];
    assert_eq!(
        (s["cpus"]["value"].as_f64(), s["cpus"]["source"].as_str()),
        (Some(3.0), Some(file_src.as_str()))
    );
    assert_eq!(s["name"]["source"], "flag --name");
    assert_eq!(s["mechanism"]["source"], "default");
    // The human form: TOML lines with the source in a comment.
    let out = Command::new(EXE).args(["server", "--print-config", "--config", &f]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(&format!("pricing.alpha = 2.5  # file {f}")), "{text}");
    assert!(text.contains("NOT VALID as it stands: join_token"), "{text}");

    // A misspelt key is refused with its name; so is a section that does not exist.
    std::fs::write(&file, "[server]\npolcy = \"libra\"\n").unwrap();
    let out = Command::new(EXE).args(["server", "--print-config", "--config", &f]).output().unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("polcy") && e.contains(&f), "{e}");
    std::fs::write(&file, "[server]\npolicy = \"libra\"\n[nodes]\ncpus = 1\n").unwrap();
    let out = Command::new(EXE).args(["node", "--print-config", "--config", &f]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("'nodes' is not a section"), "{out:?}");
}

fn server_config(dir: &std::path::Path, port: u16, alpha: f64, listen_port: u16) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:{listen_port}\"\ndb = \"{}\"\njoin_token = \"{JOIN}\"\nadmin_password = \"{ADMIN_PW}\"\nperiod = 0.5\nsync_full = false\nnode_timeout = 20.0\n[server.pricing]\nalpha = {alpha:?}\n# port {port}\n",
        dir.join("server.db").display()
    )
}

#[test]
fn sighup_reloads_what_is_safe_and_json_logs_carry_the_job_id() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = Scratch::new(&format!("config-e2e-{}", free_port()));
    let _cleanup = Cleanup(dir.display().to_string());
    let port = free_port();
    let file = dir.join("libra.toml");
    std::fs::write(&file, server_config(&dir, port, 1.0, port)).unwrap();
    let log = dir.join("server.log");
    let mut server = Command::new(EXE)
        .args(["server", "--config", &file.display().to_string(), "--log-format", "json"])
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let token = wait_until("the server", || Client::new(&url, None).login("admin", ADMIN_PW).ok()).token;
    let admin = Client::new(&url, Some(token));
    assert_eq!(admin.pricing().unwrap().params.alpha, 1.0);

    let node_log = dir.join("node.log");
    let mut node = Command::new(EXE)
        .args(["node", "--server", &url, "--cpus", "1", "--name", "cfg-n1"])
        .env("LIBRA_JOIN_TOKEN", JOIN)
        .args([
            "--workdir",
            // Named as the agent, so that `Cleanup` finds its control groups.
            &dir.join("cfg-n1").display().to_string(),
            "--period",
            "0.5",
            "--log-format",
            "json",
        ])
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&node_log).unwrap())
        .spawn()
        .unwrap();
    wait_until("the node", || admin.nodes().ok().filter(|n| n.iter().any(|x| x.up)));
    admin.user_add(&as_me("cfg", "pw-cfg")).unwrap();
    admin.credit("cfg", libra_core::Money::from_credits(100)).unwrap();
    let u = Client::new(&url, Some(Client::new(&url, None).login("cfg", "pw-cfg").unwrap().token));
    let j = u.submit(&burn(0.1, 1.0, 60.0, 20)).unwrap();
    assert_eq!(j.state, JobState::Pending);
    assert_eq!(wait_done(&u, j.id).state, JobState::Completed);

    // Change a reloadable setting and one that needs a restart, then SIGHUP.
    std::fs::write(&file, server_config(&dir, port, 3.0, free_port())).unwrap();
    // SAFETY: kill(2) on the server this test started.
    unsafe { libc::kill(server.id() as i32, libc::SIGHUP) };
    wait_until("the pricing reloaded", || (admin.pricing().ok()?.params.alpha == 3.0).then_some(()));
    let text = wait_until("the reload logged", || {
        let t = std::fs::read_to_string(&log).ok()?;
        t.contains("not applied until a restart").then_some(t)
    });
    assert!(text.contains("pricing.alpha: 1.0 -> 3.0"), "{text}");
    assert!(text.lines().any(|l| l.contains("not applied until a restart: listen")), "{text}");
    // The server still listens where it did.
    assert!(admin.nodes().is_ok());

    // A broken file changes nothing, and the log says so.
    std::fs::write(&file, "[server]\nlisten = \n").unwrap();
    unsafe { libc::kill(server.id() as i32, libc::SIGHUP) };
    wait_until("the refusal logged", || {
        std::fs::read_to_string(&log).ok()?.contains("was not reloaded, nothing changed").then_some(())
    });
    assert_eq!(admin.pricing().unwrap().params.alpha, 3.0);

    // JSON lines, every one; the lines about the job carry its id as a field.
    let _ = node.kill();
    let _ = node.wait();
    let _ = server.kill();
    let _ = server.wait();
    for (what, path, needle) in [("server", &log, "submitted"), ("node", &node_log, "exited")] {
        let text = std::fs::read_to_string(path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {l}")))
            .collect();
        assert!(!lines.is_empty(), "{what}: no JSON lines: {text}");
        let about: Vec<_> = lines.iter().filter(|l| l["message"] == needle).collect();
        assert!(!about.is_empty(), "{what}: no '{needle}' line: {text}");
        for l in about {
            assert_eq!(l["job"].as_u64(), Some(j.id), "{what}: {l}");
        }
    }
}

/// A duration in the file is written as on the command line: `node_timeout = "30s"` was refused
/// as "invalid type: string, expected f64", though `--node-timeout 30s` was taken. Numbers still
/// are seconds; a string that is not a duration names the field and the forms.
#[test]
fn durations_in_the_file_are_written_as_on_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("libra.toml");
    std::fs::write(
        &file,
        "[server]\nnode_timeout = \"30s\"\nperiod = \"500ms\"\ntoken_ttl = \"30d\"\naudit_repeat_window = 20\n\
         [server.executor]\njobcomp_grace = \"1m\"\n[node]\nperiod = \"1.5s\"\n",
    )
    .unwrap();
    let f = file.display().to_string();
    let v = print_config("server", &["--config", &f], &[("LIBRA_JOIN_TOKEN", "long-enough-token")]);
    let s = &v["settings"];
    for (key, secs) in [
        ("node_timeout", 30.0),
        ("period", 0.5),
        ("token_ttl", 30.0 * 86_400.0),
        ("audit_repeat_window", 20.0),
        ("executor.jobcomp_grace", 60.0),
    ] {
        assert_eq!(s[key]["value"].as_f64(), Some(secs), "{key}: {v}");
    }
    let n = print_config("node", &["--config", &f], &[("LIBRA_JOIN_TOKEN", "long-enough-token")]);
    assert_eq!(n["settings"]["period"]["value"].as_f64(), Some(1.5), "{n}");
    // The flag takes the same forms.
    let v = print_config(
        "server",
        &["--config", &f, "--audit-repeat-window", "1m"],
        &[("LIBRA_JOIN_TOKEN", "long-enough-token")],
    );
    assert_eq!(v["settings"]["audit_repeat_window"]["value"].as_f64(), Some(60.0), "{v}");

    for (what, text, key) in [
        ("server", "[server]\nnode_timeout = \"30 parsecs\"\n", "node_timeout"),
        ("server", "[server]\ntoken_ttl = \"1y\"\n", "token_ttl"),
        ("node", "[node]\nperiod = true\n", "period"),
    ] {
        std::fs::write(&file, text).unwrap();
        let out = Command::new(EXE).args([what, "--print-config", "--config", &f]).output().unwrap();
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && e.contains(key) && (e.contains("90s") || e.contains("days")),
            "{text}: {e}"
        );
    }
}

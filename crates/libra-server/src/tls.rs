//! TLS for the API: a certificate and key given by the administrator, or a self-signed pair
//! made on the first start and kept beside the store. Private files are created 0600 and
//! their directories 0700.

use crate::config::Config;
use crate::error::ServerError;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where `--tls-self-signed` keeps its certificate (the file clients give as `--ca`) and key.
pub fn self_signed_paths(config: &Config) -> (PathBuf, PathBuf) {
    let dir = config.db.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).join("tls");
    (dir.join("cert.pem"), dir.join("key.pem"))
}

/// The TLS configuration the server answers with, if it speaks TLS.
pub fn server_config(config: &Config) -> Result<Option<Arc<rustls::ServerConfig>>, ServerError> {
    let (cert, key) = match (&config.tls_cert, &config.tls_key) {
        (Some(c), Some(k)) => (c.clone(), k.clone()),
        _ if config.tls_self_signed => {
            let (c, k) = self_signed_paths(config);
            if !(c.exists() && k.exists()) {
                make_self_signed(&c, &k, &config.listen)?;
            }
            (c, k)
        }
        _ => return Ok(None),
    };
    let bad = |what: &str, p: &Path, e: String| ServerError::Invalid(format!("{what}: {}: {e}", p.display()));
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert)
        .map_err(|e| bad("tls_cert", &cert, e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| bad("tls_cert", &cert, e.to_string()))?;
    if chain.is_empty() {
        return Err(bad("tls_cert", &cert, "no PEM certificate in it".into()));
    }
    let key_der = PrivateKeyDer::from_pem_file(&key)
        .map_err(|e| bad("tls_key", &key, format!("{e} (give the PEM private key of the certificate)")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut sc = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ServerError::Invalid(format!("TLS: {e}")))?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| {
            bad("tls_key", &key, format!("does not go with the certificate {}: {e}", cert.display()))
        })?;
    sc.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Some(Arc::new(sc)))
}

/// A self-signed certificate for the names this server is reached by: localhost, the loopback
/// addresses, the host's name, and the address it listens on (unless that is a wildcard).
fn make_self_signed(cert: &Path, key: &Path, listen: &str) -> Result<(), ServerError> {
    let mut names = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
    if let Ok(h) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        let h = h.trim();
        if !h.is_empty() && !names.iter().any(|n| n == h) {
            names.push(h.to_string());
        }
    }
    let host = match listen.rsplit_once(':') {
        Some((h, _)) => h.trim_start_matches('[').trim_end_matches(']'),
        None => listen,
    };
    let wildcard = host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_unspecified());
    if !host.is_empty() && !wildcard && !names.iter().any(|n| n == host) {
        names.push(host.to_string());
    }
    let made = rcgen::generate_simple_self_signed(names)
        .map_err(|e| ServerError::Invalid(format!("making a self-signed certificate: {e}")))?;
    if let Some(dir) = cert.parent() {
        private_dir(dir)?;
    }
    write_private(key, made.key_pair.serialize_pem().as_bytes())?;
    // The certificate is public (clients need it), but it lives in the private directory:
    // copy it to the clients.
    write_private(cert, made.cert.pem().as_bytes())?;
    tracing::info!("made a self-signed TLS certificate: {}", cert.display());
    Ok(())
}

/// Creates `dir` (and its parents) with mode 0700, and closes one left more open.
pub fn private_dir(dir: &Path) -> Result<(), ServerError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    Ok(())
}

/// Writes a file only its owner can read (0600 from its creation), replacing it whole.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), ServerError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("new");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// Makes a database file (and its WAL companions, which SQLite creates with the main file's
/// mode) readable by its owner only: created empty with mode 0600 if absent, closed if older
/// versions left it 0644.
pub fn private_db_file(path: &Path) -> Result<(), ServerError> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    if !path.exists() {
        std::fs::OpenOptions::new().write(true).create(true).truncate(false).mode(0o600).open(path)?;
    }
    for p in [path.to_path_buf(), with_suffix(path, "-wal"), with_suffix(path, "-shm")] {
        if p.exists() {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600))?;
        }
    }
    Ok(())
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_certificate_is_made_once_and_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            db: dir.path().join("state/server.db"),
            tls_self_signed: true,
            join_token: "long enough".into(),
            ..Config::default()
        };
        assert!(server_config(&config).unwrap().is_some());
        let (cert, key) = self_signed_paths(&config);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&key), 0o600);
        assert_eq!(mode(cert.parent().unwrap()), 0o700);
        let first = std::fs::read(&cert).unwrap();
        server_config(&config).unwrap();
        assert_eq!(std::fs::read(&cert).unwrap(), first, "a restart keeps the certificate clients trust");
        // A key that is not the certificate's is refused, naming the field.
        let other = dir.path().join("other.pem");
        std::fs::write(
            &other,
            rcgen::generate_simple_self_signed(vec!["x".into()]).unwrap().key_pair.serialize_pem(),
        )
        .unwrap();
        let c = Config { tls_self_signed: false, tls_cert: Some(cert), tls_key: Some(other), ..config };
        let e = server_config(&c).unwrap_err().to_string();
        assert!(e.starts_with("tls_key"), "{e}");
    }
}

//! The local certificate authority of forward-proxy mode: created once in the user's data
//! directory (`$XDG_DATA_HOME/mcpscope`, else `~/.local/share/mcpscope`), its key a 0600 file
//! written without following links, and a leaf certificate issued on the fly (and cached) for
//! each name a client connects to. The key is never logged, recorded or shown; only the
//! certificate's path and SHA-256 fingerprint are.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use sha2::{Digest, Sha256};

use mcpscope_engine::record::writer::{Create, open_private};

/// The CA certificate's file name in the data directory.
pub const CERT_FILE: &str = "ca.pem";
/// The CA key's file name in the data directory (mode 0600).
pub const KEY_FILE: &str = "ca-key.pem";
/// The CA's common name.
const COMMON_NAME: &str = "mcpscope local CA";

/// Why the CA could not be loaded, created or used.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// A certificate or key could not be made or read.
    #[error("certificate authority: {0}")]
    Cert(String),
    /// The CA's directory or key is not the user's alone: another user could read the key, or
    /// plant a CA of their own for this user's clients to trust.
    #[error("refusing the local CA: {0}")]
    NotPrivate(String),
}

impl From<rcgen::Error> for CaError {
    fn from(e: rcgen::Error) -> Self {
        CaError::Cert(e.to_string())
    }
}

/// Where mcpscope keeps its data: `$XDG_DATA_HOME/mcpscope`, else `~/.local/share/mcpscope`.
pub fn data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("mcpscope");
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".local").join("share").join("mcpscope")
}

/// The local certificate authority, and the leaves it issued this run.
pub struct Ca {
    cert_path: PathBuf,
    cert_der: CertificateDer<'static>,
    issuer: rcgen::Certificate,
    key: KeyPair,
    leaves: Mutex<HashMap<String, Arc<rustls::ServerConfig>>>,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Ca")
            .field("cert_path", &self.cert_path)
            .finish_non_exhaustive()
    }
}

/// The CA's own parameters: the same every time, so that the issuer rebuilt from the saved key
/// names the saved certificate (same subject, same key identifier).
fn ca_params() -> Result<CertificateParams, CaError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, COMMON_NAME);
    name.push(DnType::OrganizationName, "mcpscope");
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let (y, m, d) = today();
    params.not_before = rcgen::date_time_ymd(y - 1, 1, 1);
    params.not_after = rcgen::date_time_ymd(y + 10, m, d.min(28));
    Ok(params)
}

/// Today's date (UTC), as rcgen wants it.
fn today() -> (i32, u8, u8) {
    use chrono::Datelike;
    let now = chrono::Utc::now();
    (now.year(), now.month() as u8, now.day() as u8)
}

impl Ca {
    /// Loads the CA from `dir`, creating it there when it does not exist yet.
    pub fn load_or_create(dir: &Path) -> Result<Self, CaError> {
        check_private(dir, None)?;
        let key_path = dir.join(KEY_FILE);
        if key_path.exists() || std::fs::symlink_metadata(&key_path).is_ok() {
            return Self::load(dir);
        }
        Self::create(dir)
    }

    /// Makes a new CA in `dir`, replacing one that is there (`mcpscope ca --regenerate`).
    pub fn create(dir: &Path) -> Result<Self, CaError> {
        check_private(dir, None)?;
        let key = KeyPair::generate()?;
        let cert = ca_params()?.self_signed(&key)?;
        let key_path = dir.join(KEY_FILE);
        let cert_path = dir.join(CERT_FILE);
        write(&key_path, &key.serialize_pem(), Create::Replace)?;
        write(&cert_path, &cert.pem(), Create::Replace)?;
        Self::from_parts(cert_path, cert.der().clone(), key)
    }

    /// Loads the CA saved in `dir`.
    pub fn load(dir: &Path) -> Result<Self, CaError> {
        let key_path = dir.join(KEY_FILE);
        let cert_path = dir.join(CERT_FILE);
        check_private(dir, Some(&key_path))?;
        let key_text = read_regular(&key_path)?;
        let key = KeyPair::from_pem(&key_text)
            .map_err(|e| CaError::Cert(format!("{}: {e}", key_path.display())))?;
        let cert_text = read_regular(&cert_path)?;
        use rustls::pki_types::pem::PemObject;
        let cert_der = CertificateDer::from_pem_slice(cert_text.as_bytes())
            .map_err(|e| CaError::Cert(format!("{}: {e}", cert_path.display())))?;
        Self::from_parts(cert_path, cert_der, key)
    }

    fn from_parts(
        cert_path: PathBuf,
        cert_der: CertificateDer<'static>,
        key: KeyPair,
    ) -> Result<Self, CaError> {
        // The issuer as rcgen needs it to sign leaves: same subject and key as the saved one.
        let issuer = ca_params()?.self_signed(&key)?;
        Ok(Self {
            cert_path,
            cert_der,
            issuer,
            key,
            leaves: Mutex::new(HashMap::new()),
        })
    }

    /// The CA certificate's file (PEM), the one clients are told to trust.
    pub fn cert_path(&self) -> &Path {
        &self.cert_path
    }

    /// The CA certificate (DER).
    pub fn cert_der(&self) -> &CertificateDer<'static> {
        &self.cert_der
    }

    /// The CA certificate's SHA-256 fingerprint, as `AB:CD:…`.
    pub fn fingerprint(&self) -> String {
        fingerprint(&self.cert_der)
    }

    /// A TLS server configuration presenting a leaf for `name` (a DNS name or an IP address)
    /// signed by the CA, offering h2 and http/1.1; issued once per name and cached.
    pub fn server_config(&self, name: &str) -> Result<Arc<rustls::ServerConfig>, CaError> {
        let name = name.trim_start_matches('[').trim_end_matches(']');
        let key = name.to_ascii_lowercase();
        if let Ok(leaves) = self.leaves.lock()
            && let Some(config) = leaves.get(&key)
        {
            return Ok(config.clone());
        }
        let config = Arc::new(self.issue(&key)?);
        if let Ok(mut leaves) = self.leaves.lock() {
            leaves.insert(key, config.clone());
        }
        Ok(config)
    }

    fn issue(&self, name: &str) -> Result<rustls::ServerConfig, CaError> {
        let mut params = CertificateParams::new(vec![name.to_string()])?;
        let mut subject = DistinguishedName::new();
        subject.push(DnType::CommonName, name);
        params.distinguished_name = subject;
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let (y, m, d) = today();
        params.not_before = rcgen::date_time_ymd(y - 1, m, d.min(28));
        params.not_after = rcgen::date_time_ymd(y + 1, m, d.min(28));
        let leaf_key = KeyPair::generate()?;
        let leaf = params.signed_by(&leaf_key, &self.issuer, &self.key)?;
        let chain = vec![leaf.der().clone(), self.cert_der.clone()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| CaError::Cert(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| CaError::Cert(e.to_string()))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// A certificate (DER).
pub type Certificate = CertificateDer<'static>;

/// The certificates of PEM files (`--ca-file`), each file holding at least one.
pub fn read_roots(files: &[PathBuf]) -> Result<Vec<Certificate>, CaError> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = Vec::new();
    for file in files {
        let bad = |e: String| CaError::Cert(format!("{}: {e}", file.display()));
        let certs = CertificateDer::pem_file_iter(file)
            .map_err(|e| bad(e.to_string()))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(e.to_string()))?;
        if certs.is_empty() {
            return Err(bad("no PEM certificate in it".into()));
        }
        roots.extend(certs);
    }
    Ok(roots)
}

/// A certificate's SHA-256 fingerprint, as `AB:CD:…`.
pub fn fingerprint(der: &[u8]) -> String {
    Sha256::digest(der)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Writes `text` to a private file (0600, never through a link).
fn write(path: &Path, text: &str, how: Create) -> Result<(), CaError> {
    use std::io::Write as _;
    let io = |source| CaError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = open_private(path, how).map_err(io)?;
    #[cfg(unix)]
    {
        // A file replaced in place keeps its mode: make it the user's alone again.
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(io)?;
    }
    file.write_all(text.as_bytes()).map_err(io)?;
    file.flush().map_err(io)
}

/// Refuses, as ssh does a private key, a CA directory (when it exists) or key that another
/// user owns or that group or others may use: the directory must be the user's and writable by
/// the user alone, the key the user's and readable by the user alone. Says how to fix it.
fn check_private(dir: &Path, key: Option<&Path>) -> Result<(), CaError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if let Ok(meta) = std::fs::symlink_metadata(dir) {
            let shown = dir.display();
            if meta.uid() != me {
                return Err(CaError::NotPrivate(format!(
                    "{shown} belongs to user {} (you are {me}): another user's CA would be \
                     trusted; set XDG_DATA_HOME to a directory of your own, or remove {shown}",
                    meta.uid()
                )));
            }
            if meta.mode() & 0o022 != 0 {
                return Err(CaError::NotPrivate(format!(
                    "{shown} is writable by group or others (mode {:04o}): anyone could plant a \
                     CA in it; fix it with: chmod 700 {shown}",
                    meta.mode() & 0o7777
                )));
            }
        }
        if let Some(key) = key
            && let Ok(meta) = std::fs::symlink_metadata(key)
        {
            let shown = key.display();
            if meta.uid() != me {
                return Err(CaError::NotPrivate(format!(
                    "{shown} belongs to user {} (you are {me}); remove it and run `mcpscope ca \
                     --regenerate`",
                    meta.uid()
                )));
            }
            if meta.mode() & 0o077 != 0 {
                return Err(CaError::NotPrivate(format!(
                    "{shown} is open to group or others (mode {:04o}): the key that signs every \
                     intercepted certificate must be yours alone; fix it with: chmod 600 {shown} \
                     (and, since others may have read it, `mcpscope ca --regenerate`)",
                    meta.mode() & 0o7777
                )));
            }
        }
    }
    #[cfg(not(unix))]
    let _ = (dir, key);
    Ok(())
}

/// Reads a regular file, refusing a link.
fn read_regular(path: &Path) -> Result<String, CaError> {
    let io = |source| CaError::Io {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::symlink_metadata(path).map_err(io)?;
    if !meta.is_file() {
        return Err(io(std::io::Error::other(
            "not a regular file (a link or a directory is refused)",
        )));
    }
    std::fs::read_to_string(path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ca_is_made_once_kept_private_and_reloaded_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let made = Ca::load_or_create(dir.path()).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let again = Ca::load_or_create(dir.path()).unwrap();
        assert_eq!(made.fingerprint(), again.fingerprint());
        assert_eq!(made.fingerprint().len(), 32 * 3 - 1);
        // A leaf issued by the reloaded CA verifies against the saved certificate.
        let config = again.server_config("127.0.0.2").unwrap();
        assert_eq!(config.alpn_protocols[0], b"h2");
        let regenerated = Ca::create(dir.path()).unwrap();
        assert_ne!(regenerated.fingerprint(), made.fingerprint());
        assert!(!format!("{regenerated:?}").contains("PRIVATE"));
    }

    #[test]
    fn a_linked_key_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let other = dir.path().join("elsewhere");
        std::fs::write(&other, "x").unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&other, dir.path().join(KEY_FILE)).unwrap();
            assert!(Ca::load_or_create(dir.path()).is_err());
        }
    }
}

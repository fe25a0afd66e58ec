//! Ed25519 keys for signing evidence: generation, loading, and the trust store.
//!
//! What it does: [`generate`] writes a key pair as `NAME.key` (PKCS#8 v1 PEM, as OpenSSL writes it) and
//! `NAME.pub` (SPKI PEM); [`load_signing_key`] and [`load_public_key`] read them back;
//! [`TrustStore::load_dir`] loads every `*.pub` of a directory and looks keys up by [`keyid`], the lowercase
//! hex SHA-256 of the raw 32-byte public key (DESIGN §4), which anyone can recompute from the `.pub` alone.
//!
//! What it guarantees:
//! - A private key file is created with mode `0600` in the same `open(2)` call that creates it (no window
//!   in which it is world-readable), and an existing key file is never overwritten or truncated
//!   ([`KeyError::AlreadyExists`]). If the `.pub` cannot be written, the `.key` just written is removed, so a
//!   failed `keygen` leaves nothing behind.
//! - [`SigningKey`] cannot be printed: it has no `Display`, its `Debug` shows only the key id, and its secret
//!   is zeroized on drop (ed25519-dalek's `zeroize` feature). The PEM text read from disk is zeroized too.
//! - A private key whose embedded public key does not match its secret, and a small-order ("weak") public
//!   key, are rejected when loaded.
//! - Every error names the file or directory it is about, and I/O errors say which operation failed.
//!
//! - A private key that group or others may access (any of the mode bits `0o077`, as ssh checks) is refused
//!   by [`load_signing_key`] with [`KeyError::ReadableKey`], naming the file and its mode, unless the binary
//!   was started with `--allow-readable-key` ([`allow_readable_keys`]); then it is used with a warning.
//! - A trust directory that also holds a private key still loads, but [`TrustStore::warnings`] says so (and the
//!   warning is printed, see [`crate::error::warn`]): public keys belong in a folder of their own, which
//!   [`generate_in`] writes.
//!
//! What it does NOT do: it does not encrypt private keys at rest (the PEM is unencrypted PKCS#8, protected by
//! file permissions only), does not check who owns a key file, does not rotate or revoke keys, and does not
//! decide which keys *should* be trusted: whatever `*.pub` is in the trust directory is trusted. Signing and
//! verifying evidence is in [`crate::evidence`].

use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use ed25519_dalek::Signer as _;
use ed25519_dalek::pkcs8::KeypairBytes;
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::spki::der::zeroize::{Zeroize as _, Zeroizing};
use ed25519_dalek::pkcs8::spki::{DecodePublicKey as _, EncodePublicKey as _};
use ed25519_dalek::pkcs8::{DecodePrivateKey as _, EncodePrivateKey as _};
use ed25519_dalek::{Signature, VerifyingKey};
use rand::rngs::OsRng;
use sha2::{Digest as _, Sha256};

/// Extension of private key files written by [`generate`].
pub const PRIVATE_KEY_EXTENSION: &str = "key";
/// Extension of public key files written by [`generate`] and loaded by [`TrustStore::load_dir`].
pub const PUBLIC_KEY_EXTENSION: &str = "pub";

/// Errors of key generation and key loading. Each names the path it is about.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The key name is empty, starts with `.`, or has a character outside `[A-Za-z0-9._-]`.
    #[error("invalid key name {name:?} for key directory {}: {reason}", dir.display())]
    InvalidName {
        /// The name as given.
        name: String,
        /// The directory the key would have been written to.
        dir: PathBuf,
        /// Why the name was refused.
        reason: &'static str,
    },
    /// A key file already exists; keys are never overwritten.
    #[error("{} already exists; refusing to overwrite a key", path.display())]
    AlreadyExists {
        /// The existing file.
        path: PathBuf,
    },
    /// An I/O operation on a key file or key directory failed.
    #[error("could not {operation} {}", path.display())]
    Io {
        /// What was being done: `create directory`, `create`, `write`, `read`, `list directory`, ….
        operation: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A key could not be encoded as PEM (should not happen for a valid key).
    #[error("could not encode the key for {}", path.display())]
    Encode {
        /// The file the key was to be written to.
        path: PathBuf,
        /// What the encoder reported.
        reason: String,
    },
    /// A file is not a PKCS#8 PEM Ed25519 private key, or its embedded public key does not match.
    #[error("{} is not a valid PKCS#8 PEM Ed25519 private key", path.display())]
    InvalidPrivateKey {
        /// The file.
        path: PathBuf,
        /// The decoder's error (it never contains key material).
        #[source]
        source: ed25519_dalek::pkcs8::Error,
    },
    /// A file given as a key holds no PEM block at all (no `-----BEGIN` line): not a key file. The PEM decoder's
    /// own message for such a file is about its "preamble" (`invalid data (NUL byte)` for text without a NUL),
    /// which says nothing true about the file, so it is not passed on.
    #[error(
        "{} is not a PEM Ed25519 {what}: it has no `-----BEGIN {label}-----` line (a key from `lakedrill keygen` \
         or `openssl genpkey -algorithm ed25519`{openssl_pub})",
        path.display(),
        openssl_pub = if *label == "PUBLIC KEY" { " | openssl pkey -pubout" } else { "" }
    )]
    NotPem {
        /// The file.
        path: PathBuf,
        /// `private key` or `public key`.
        what: &'static str,
        /// The PEM label expected (`PRIVATE KEY`, `PUBLIC KEY`).
        label: &'static str,
    },
    /// A trust folder (`--trust`, `[keys] trust`, a drill plan's `trust`) cannot be listed.
    #[error(
        "could not list the trust folder {} (the folder of trusted `.pub` keys given by `--trust`, `[keys] trust` \
         or a drill plan's `trust`)",
        dir.display()
    )]
    TrustFolder {
        /// The folder.
        dir: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A file is not an SPKI PEM Ed25519 public key.
    #[error("{} is not a valid SPKI PEM Ed25519 public key", path.display())]
    InvalidPublicKey {
        /// The file.
        path: PathBuf,
        /// The decoder's error.
        #[source]
        source: ed25519_dalek::pkcs8::spki::Error,
    },
    /// A public key is of small order, so signatures under it prove nothing.
    #[error("{} holds a weak (small-order) Ed25519 public key", path.display())]
    WeakPublicKey {
        /// The file.
        path: PathBuf,
    },
    /// A private key file that group or others may read, write or execute (mode bits `0o077`).
    #[error(
        "{}: permissions {mode:04o} are too open: a private key must not be accessible by group or others \
         (chmod 600 {}; or pass --allow-readable-key)",
        path.display(),
        path.display()
    )]
    ReadableKey {
        /// The key file.
        path: PathBuf,
        /// Its permission bits (`mode & 0o7777`).
        mode: u32,
    },
    /// A trust directory has no `*.pub` file.
    #[error("trust directory {} has no *.pub file", dir.display())]
    EmptyTrustStore {
        /// The directory.
        dir: PathBuf,
    },
    /// A trust directory's `roles.toml` cannot be used: not TOML, an unknown role, a key it does not hold, or
    /// one key given roles that must stay apart.
    #[error("{}: {reason}", path.display())]
    Roles {
        /// The `roles.toml` file.
        path: PathBuf,
        /// What is wrong, naming the entry.
        reason: String,
    },
    /// A signing key that the trust folder's [`ROLES_FILE`] does not give the role of what it would sign (a
    /// deleter's key given to `drill run`, `report merge`, `restore --shard --key` or `drill faults --key`; a key
    /// without `governance` given to `decision sign`).
    #[error("{}: {reason}", key.display())]
    RoleNotGranted {
        /// The signing key file.
        key: PathBuf,
        /// The key id, what it would sign, the role, the roles it holds and the roles file.
        reason: String,
    },
    /// Two public key files hold the same key, so a key id would name two keys.
    #[error("{} and {} hold the same public key (keyid {keyid})", first.display(), second.display())]
    DuplicateKey {
        /// The file loaded first.
        first: PathBuf,
        /// The file holding the same key.
        second: PathBuf,
        /// The shared key id.
        keyid: String,
    },
}

impl From<KeyError> for crate::Error {
    /// A key that cannot be used is bad input.
    fn from(e: KeyError) -> Self {
        crate::Error::module(crate::ErrorKind::BadInput, e)
    }
}

/// The key id of a public key: lowercase hex SHA-256 of its raw 32 bytes (DESIGN §4).
///
/// ```
/// let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]).verifying_key();
/// assert_eq!(lakedrill::evidence::keys::keyid(&key).len(), 64);
/// ```
#[must_use]
pub fn keyid(key: &VerifyingKey) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// An Ed25519 private key that signs evidence.
///
/// It cannot be displayed, and its `Debug` output shows only its key id:
///
/// ```
/// let key = lakedrill::evidence::keys::SigningKey::from(ed25519_dalek::SigningKey::from_bytes(&[7; 32]));
/// let shown = format!("{key:?}");
/// assert!(shown.starts_with("SigningKey { keyid: \""));
/// assert!(shown.ends_with("\", secret: \"[redacted]\" }"));
/// ```
///
/// ```compile_fail,E0277
/// let key = lakedrill::evidence::keys::SigningKey::from(ed25519_dalek::SigningKey::from_bytes(&[7; 32]));
/// let shown = format!("{}", key); // SigningKey does not implement Display
/// ```
///
/// The secret is zeroized when the value is dropped. The type is deliberately not `Clone`.
pub struct SigningKey {
    inner: ed25519_dalek::SigningKey,
    keyid: String,
}

impl SigningKey {
    /// A new random key from the operating system's RNG, held in memory only (see [`generate`] to write one).
    #[must_use]
    pub fn generate() -> Self {
        Self::from(ed25519_dalek::SigningKey::generate(&mut OsRng))
    }

    /// The key id of this key's public half; see [`keyid`].
    #[must_use]
    pub fn keyid(&self) -> &str {
        &self.keyid
    }

    /// The public half of this key.
    #[must_use]
    pub fn verifying_key(&self) -> VerifyingKey {
        self.inner.verifying_key()
    }

    /// Signs `msg` (pure Ed25519, RFC 8032). Evidence signs the DSSE PAE bytes, not the payload itself.
    #[must_use]
    pub fn sign(&self, msg: &[u8]) -> Signature {
        self.inner.sign(msg)
    }
}

impl From<ed25519_dalek::SigningKey> for SigningKey {
    fn from(inner: ed25519_dalek::SigningKey) -> Self {
        let keyid = keyid(&inner.verifying_key());
        Self { inner, keyid }
    }
}

// The secret is left out on purpose: that is the point of this impl.
#[allow(clippy::missing_fields_in_debug)]
impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("keyid", &self.keyid)
            .field("secret", &"[redacted]")
            .finish()
    }
}

/// Where [`generate`] wrote a key pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedKey {
    /// `DIR/NAME.key`, PKCS#8 PEM, mode 0600.
    pub private_path: PathBuf,
    /// `DIR/NAME.pub`, SPKI PEM.
    pub public_path: PathBuf,
    /// The key id of the new key.
    pub keyid: String,
}

/// Generates an Ed25519 key pair and writes `DIR/NAME.key` (PKCS#8 v1 PEM, mode 0600, the form OpenSSL and
/// Python `cryptography` read) and `DIR/NAME.pub` (SPKI PEM), creating `dir` if needed.
///
/// Both files are created with `O_CREAT | O_EXCL`, so an existing file is never overwritten, and the private
/// key gets mode 0600 at creation (the process umask can only make it stricter). If anything fails after the
/// `.key` was created, the files this call created are removed again.
///
/// # Errors
///
/// [`KeyError::InvalidName`] if `name` is empty, starts with `.`, or is not `[A-Za-z0-9._-]+`;
/// [`KeyError::AlreadyExists`] if `NAME.key` or `NAME.pub` exists (nothing is changed then);
/// [`KeyError::Io`] if the directory or a file cannot be created or written;
/// [`KeyError::Encode`] if PEM encoding fails.
pub fn generate(name: &str, dir: &Path) -> Result<GeneratedKey, KeyError> {
    generate_in(name, dir, dir)
}

/// [`generate`] with the public key written to a folder of its own: `KEY_DIR/NAME.key` and
/// `PUB_DIR/NAME.pub`, both folders created if needed. `PUB_DIR` is then a trust folder with no private key
/// in it, which can be handed to auditors as it is (README, "Keys and trust folders").
///
/// # Errors
/// As [`generate`].
pub fn generate_in(name: &str, key_dir: &Path, pub_dir: &Path) -> Result<GeneratedKey, KeyError> {
    validate_name(name, key_dir)?;
    for dir in [key_dir, pub_dir] {
        fs::create_dir_all(dir).map_err(|source| KeyError::Io {
            operation: "create directory",
            path: dir.to_path_buf(),
            source,
        })?;
    }
    let private_path = key_dir.join(format!("{name}.{PRIVATE_KEY_EXTENSION}"));
    let public_path = pub_dir.join(format!("{name}.{PUBLIC_KEY_EXTENSION}"));
    // Fail early, before touching anything, if either file is already there. The create_new below is what
    // actually guarantees no overwrite (this check alone would race).
    for path in [&private_path, &public_path] {
        if path.symlink_metadata().is_ok() {
            return Err(KeyError::AlreadyExists { path: path.clone() });
        }
    }

    let key = ed25519_dalek::SigningKey::generate(&mut OsRng);
    // PKCS#8 v1 (RFC 5208, no embedded public key), as `openssl genpkey -algorithm ed25519` writes it. The v2
    // document that `ed25519_dalek::SigningKey::to_pkcs8_pem` writes is refused by OpenSSL before 3.5 and by
    // Python `cryptography`, and operators must be able to inspect and use the key with those tools.
    // See: https://github.com/dalek-cryptography/curve25519-dalek/issues/627
    let mut keypair = KeypairBytes {
        secret_key: key.to_bytes(),
        public_key: None,
    };
    let private_pem = keypair.to_pkcs8_pem(LineEnding::LF);
    // ed25519's own `zeroize` feature is off in this build, so KeypairBytes does not wipe itself on drop.
    keypair.secret_key.zeroize();
    let private_pem = private_pem.map_err(|e| KeyError::Encode {
        path: private_path.clone(),
        reason: e.to_string(),
    })?;
    let verifying_key = key.verifying_key();
    let public_pem = verifying_key
        .to_public_key_pem(LineEnding::LF)
        .map_err(|e| KeyError::Encode {
            path: public_path.clone(),
            reason: e.to_string(),
        })?;

    write_new(&private_path, private_pem.as_bytes(), 0o600)?;
    if let Err(e) = write_new(&public_path, public_pem.as_bytes(), 0o644) {
        // Best effort: the .key is ours (create_new succeeded), so removing it cannot destroy an older key.
        let _ = fs::remove_file(&private_path);
        return Err(e);
    }
    Ok(GeneratedKey {
        private_path,
        public_path,
        keyid: keyid(&verifying_key),
    })
}

/// Loads an Ed25519 private key from PKCS#8 PEM: v1 as [`generate`] and OpenSSL write it, or v2 (RFC 5958,
/// with the public key embedded, which must then match the secret).
///
/// The file must not be accessible by group or others (no bit of `0o077`, as ssh requires of its private
/// keys): a key others can read is a key others can sign with. `0600` and `0400` are accepted. After
/// [`allow_readable_keys`]`(true)` (`--allow-readable-key`) such a key is used, with a warning.
///
/// # Errors
///
/// [`KeyError::Io`] if the file cannot be read; [`KeyError::ReadableKey`] if group or others may access it;
/// [`KeyError::InvalidPrivateKey`] if it is not an Ed25519 PKCS#8 PEM private key or its embedded public key
/// does not match the secret.
pub fn load_signing_key(path: &Path) -> Result<SigningKey, KeyError> {
    use std::io::Read as _;
    let io_err = |source| KeyError::Io {
        operation: "read",
        path: path.to_path_buf(),
        source,
    };
    // The mode is read from the file that is read (fstat), not from the path a second time.
    let mut file = fs::File::open(path).map_err(io_err)?;
    let mode = file.metadata().map_err(io_err)?.permissions().mode() & 0o7777;
    let mut pem = Zeroizing::new(String::new());
    file.read_to_string(&mut pem).map_err(io_err)?;
    not_pem(path, &pem, "private key", "PRIVATE KEY")?;
    let inner = ed25519_dalek::SigningKey::from_pkcs8_pem(&pem).map_err(|source| KeyError::InvalidPrivateKey {
        path: path.to_path_buf(),
        source,
    })?;
    // Checked once the file is known to be a private key, so that a file that is none is named as such.
    if mode & 0o077 != 0 {
        let err = KeyError::ReadableKey {
            path: path.to_path_buf(),
            mode,
        };
        if !ALLOW_READABLE_KEYS.load(Ordering::Relaxed) {
            return Err(err);
        }
        crate::error::warn(format!("{err} (used because of --allow-readable-key)"));
    }
    Ok(SigningKey::from(inner))
}

/// Set by `--allow-readable-key`: see [`allow_readable_keys`].
static ALLOW_READABLE_KEYS: AtomicBool = AtomicBool::new(false);

/// Lets [`load_signing_key`] use a private key that group or others may access, with a warning instead of
/// [`KeyError::ReadableKey`]. For the binary's `--allow-readable-key` only: some platforms cannot give a key
/// file mode 0600 (a Kubernetes Secret volume with `fsGroup` set is mounted group-readable, 0440, whatever
/// its `defaultMode`; see <https://github.com/kubernetes/kubernetes/issues/57923>).
pub fn allow_readable_keys(allow: bool) {
    ALLOW_READABLE_KEYS.store(allow, Ordering::Relaxed);
}

/// A trusted Ed25519 public key, loaded from an SPKI PEM file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    name: String,
    path: PathBuf,
    key: VerifyingKey,
    keyid: String,
}

impl PublicKey {
    /// A public key that did not come from [`load_public_key`] (tests, keys held in memory). `name` is what
    /// reports show for it and `path` where it came from.
    #[must_use]
    pub fn new(name: impl Into<String>, path: impl Into<PathBuf>, key: VerifyingKey) -> Self {
        let keyid = keyid(&key);
        Self {
            name: name.into(),
            path: path.into(),
            key,
            keyid,
        }
    }

    /// The key's name: the file stem of its `.pub` file (`ops` for `keys/ops.pub`).
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The file the key was loaded from.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The key itself.
    #[must_use]
    pub fn verifying_key(&self) -> &VerifyingKey {
        &self.key
    }

    /// The key id; see [`keyid`].
    #[must_use]
    pub fn keyid(&self) -> &str {
        &self.keyid
    }
}

/// Loads an SPKI PEM Ed25519 public key (`-----BEGIN PUBLIC KEY-----`).
///
/// # Errors
///
/// [`KeyError::Io`] if the file cannot be read; [`KeyError::InvalidPublicKey`] if it is not an Ed25519 SPKI
/// PEM public key; [`KeyError::WeakPublicKey`] if the key has small order.
pub fn load_public_key(path: &Path) -> Result<PublicKey, KeyError> {
    let pem = read_to_string(path)?;
    not_pem(path, &pem, "public key", "PUBLIC KEY")?;
    let key = VerifyingKey::from_public_key_pem(&pem).map_err(|source| KeyError::InvalidPublicKey {
        path: path.to_path_buf(),
        source,
    })?;
    if key.is_weak() {
        return Err(KeyError::WeakPublicKey {
            path: path.to_path_buf(),
        });
    }
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(PublicKey::new(name, path, key))
}

/// [`KeyError::NotPem`] when `text` has no PEM block at all; a PEM block of another kind is left to the decoder,
/// whose message then says what is wrong with it.
fn not_pem(path: &Path, text: &str, what: &'static str, label: &'static str) -> Result<(), KeyError> {
    if text.contains("-----BEGIN ") {
        return Ok(());
    }
    Err(KeyError::NotPem {
        path: path.to_path_buf(),
        what,
        label,
    })
}

/// The file of a trust directory that says what each key's signatures count for ([`Role`]).
pub const ROLES_FILE: &str = "roles.toml";

/// What a signature by a trusted key counts for, as a trust directory's [`ROLES_FILE`] assigns it.
///
/// ```toml
/// # keys/trust/roles.toml: key names (the NAME of NAME.pub) or key ids, per role
/// seal = ["quarantine"]         # bundles and cold backups
/// drill = ["drill-ci"]          # drill, restore, merged and fault-matrix reports: the evidence a purge accepts
/// deleter = ["deleter"]         # receipts, inventory archives, retirement records
/// governance = ["privacy-office"]  # governance decisions (legal holds, deletion rights)
/// ```
///
/// Without the file every key counts for every role (as before roles existed). With it, a key counts only for
/// the roles it is listed under, and no key may hold `deleter` together with `drill` or `governance`: a deleter
/// must not be able to vouch for the drill that allows its deletes, nor lift the holds or grant the deletion rights
/// they rely on. Whatever the file says, `purge` never accepts evidence signed by its own `--key`
/// ([`crate::ops::deleter::check_evidence`]), nor deletion rights from a decision signed by it.
///
/// `governance` came after the other roles. A file that lists no key under it gives no key that role, so no
/// decision verifies under that folder (`decision apply` refuses, saying so): a file written before the role
/// existed is read as it reads every other role it leaves out, rather than handing the power to set and release
/// legal holds and to open deletion rights to the seal, drill and deleter keys it names. The fix is one line in
/// the file naming the governance layer's key ([`TrustStore::no_key_holds`] words it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Quarantine bundles and cold backups.
    Seal,
    /// Drill reports (restore, cold-backup, merged) and fault-matrix reports: the evidence the deleter accepts
    /// and the proof of the build that runs it.
    Drill,
    /// What the deleter signs: receipts, inventory archives, retirement records.
    Deleter,
    /// Governance decisions (`decision sign`, `decision apply`): legal holds on and off, deletion rights.
    Governance,
}

impl Role {
    /// Every role, in the order [`ROLES_FILE`] documents them.
    pub const ALL: [Role; 4] = [Role::Seal, Role::Drill, Role::Deleter, Role::Governance];

    /// The role's name in [`ROLES_FILE`].
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Role::Seal => "seal",
            Role::Drill => "drill",
            Role::Deleter => "deleter",
            Role::Governance => "governance",
        }
    }

    /// What the role signs, as messages name it (`no {signs} verifies`).
    #[must_use]
    pub fn signs(self) -> &'static str {
        match self {
            Role::Seal => "bundle or cold backup",
            Role::Drill => "drill or fault-matrix report",
            Role::Deleter => "receipt, inventory archive or retirement record",
            Role::Governance => "governance decision",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The public keys whose signatures are accepted, looked up by key id.
#[derive(Debug, Clone, Default)]
pub struct TrustStore {
    keys: Vec<PublicKey>,
    warnings: Vec<String>,
    /// Key id → the roles [`ROLES_FILE`] gives it; `None` without the file (every key, every role).
    roles: Option<std::collections::BTreeMap<String, std::collections::BTreeSet<Role>>>,
    /// The [`ROLES_FILE`] the roles were read from (for messages).
    roles_file: Option<PathBuf>,
    /// Keys of the folder that [`TrustStore::for_role`] left out for lacking its role: their signatures do not
    /// count, but a failure says the key is trusted and lacks the role rather than that it is unknown.
    withheld: Vec<(PublicKey, Role)>,
}

impl TrustStore {
    /// Loads every `*.pub` file directly in `dir` (not recursively), in sorted path order.
    ///
    /// A private key in the same folder (a `*.key` file, or any file that starts like a PEM private key) does
    /// not stop the load, but gives a warning in [`TrustStore::warnings`], which is also printed
    /// ([`crate::error::warn`]): a trust folder is handed to auditors and copied to verifiers, and a private
    /// key must travel with neither.
    ///
    /// # Errors
    ///
    /// [`KeyError::Io`] if `dir` cannot be listed or a `.pub` cannot be read; [`KeyError::InvalidPublicKey`]
    /// or [`KeyError::WeakPublicKey`] naming the first bad file; [`KeyError::EmptyTrustStore`] if there is no
    /// `.pub` file; [`KeyError::DuplicateKey`] if two files hold the same key.
    pub fn load_dir(dir: &Path) -> Result<Self, KeyError> {
        let list_err = |source| KeyError::TrustFolder {
            dir: dir.to_path_buf(),
            source,
        };
        let mut paths = Vec::new();
        let mut private = Vec::new();
        for entry in fs::read_dir(dir).map_err(list_err)? {
            let path = entry.map_err(list_err)?.path();
            if path.extension().is_some_and(|ext| ext == PUBLIC_KEY_EXTENSION) {
                paths.push(path);
            } else if looks_private(&path) {
                private.push(path);
            }
        }
        if paths.is_empty() {
            return Err(KeyError::EmptyTrustStore { dir: dir.to_path_buf() });
        }
        paths.sort();
        private.sort();
        let keys = paths
            .iter()
            .map(|path| load_public_key(path))
            .collect::<Result<Vec<_>, _>>()?;
        let mut store = Self::from_keys(keys)?;
        let roles_path = dir.join(ROLES_FILE);
        match fs::read_to_string(&roles_path) {
            Ok(text) => {
                store.roles = Some(parse_roles(&roles_path, &text, &store.keys)?);
                store.roles_file = Some(roles_path);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(KeyError::Io {
                    operation: "read",
                    path: roles_path,
                    source,
                });
            }
        }
        store.warnings = private
            .iter()
            .map(|p| {
                format!(
                    "trust folder {} holds a private key, {}: keep public keys in a folder of their own \
                     (for example keys/trust/) and give only that folder to --trust",
                    dir.display(),
                    p.display()
                )
            })
            .collect();
        for w in &store.warnings {
            crate::error::warn(w.clone());
        }
        Ok(store)
    }

    /// What [`TrustStore::load_dir`] found wrong without refusing the folder: a private key in it.
    #[must_use]
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// A trust store of the given keys, kept in the given order. An empty store is allowed here (it trusts
    /// nothing); only [`TrustStore::load_dir`] refuses an empty directory.
    ///
    /// # Errors
    ///
    /// [`KeyError::DuplicateKey`] if two keys have the same key id, since a key id must name one key.
    pub fn from_keys(keys: Vec<PublicKey>) -> Result<Self, KeyError> {
        for (i, key) in keys.iter().enumerate() {
            if let Some(first) = keys[..i].iter().find(|k| k.keyid == key.keyid) {
                return Err(KeyError::DuplicateKey {
                    first: first.path.clone(),
                    second: key.path.clone(),
                    keyid: key.keyid.clone(),
                });
            }
        }
        Ok(Self {
            keys,
            warnings: Vec::new(),
            roles: None,
            roles_file: None,
            withheld: Vec::new(),
        })
    }

    /// This store with roles as a [`ROLES_FILE`] would give them (key id → roles): a key not named holds none.
    /// For stores built in memory ([`TrustStore::from_keys`]); no check that drill and deleter stay apart.
    #[must_use]
    pub fn with_roles(mut self, roles: impl IntoIterator<Item = (String, Vec<Role>)>) -> Self {
        self.roles = Some(
            roles
                .into_iter()
                .map(|(keyid, r)| (keyid, r.into_iter().collect()))
                .collect(),
        );
        self
    }

    /// Whether the store's directory had a [`ROLES_FILE`].
    #[must_use]
    pub fn has_roles(&self) -> bool {
        self.roles.is_some()
    }

    /// The roles a trusted key holds: every role without a [`ROLES_FILE`], none for a key not trusted.
    #[must_use]
    pub fn roles_of(&self, keyid: &str) -> Vec<Role> {
        if self.get(keyid).is_none() {
            return Vec::new();
        }
        match &self.roles {
            None => Role::ALL.to_vec(),
            Some(map) => map.get(keyid).map(|r| r.iter().copied().collect()).unwrap_or_default(),
        }
    }

    /// The keys whose signatures count for `role` (all of them without a [`ROLES_FILE`]).
    #[must_use]
    pub fn for_role(&self, role: Role) -> Self {
        let mut out = self.clone();
        let (keep, withheld): (Vec<PublicKey>, Vec<PublicKey>) = std::mem::take(&mut out.keys)
            .into_iter()
            .partition(|k| self.roles_of(&k.keyid).contains(&role));
        out.keys = keep;
        out.withheld.extend(withheld.into_iter().map(|k| (k, role)));
        out
    }

    /// A key of the trust folder that [`TrustStore::for_role`] left out of this store, with the role it lacks:
    /// its signatures do not count here.
    #[must_use]
    pub fn withheld(&self, keyid: &str) -> Option<(&PublicKey, Role)> {
        self.withheld
            .iter()
            .find(|(k, _)| k.keyid == keyid)
            .map(|(k, r)| (k, *r))
    }

    /// The [`ROLES_FILE`] the store's roles came from, when [`TrustStore::load_dir`] read one.
    #[must_use]
    pub fn roles_file(&self) -> Option<&Path> {
        self.roles_file.as_deref()
    }

    /// When the store has a [`ROLES_FILE`] that gives no key `role`, a sentence saying so and how to fix it
    /// (nothing that role signs can verify under this folder); `None` otherwise. Written for `governance`, the
    /// role a file from before it existed leaves out.
    #[must_use]
    pub fn no_key_holds(&self, role: Role) -> Option<String> {
        if self.roles.as_ref()?.values().any(|r| r.contains(&role)) {
            return None;
        }
        let roles_file = self.roles_file.clone().unwrap_or_else(|| PathBuf::from(ROLES_FILE));
        Some(format!(
            "{} gives no key the {role} role, so no {} verifies under this trust folder: add {role} to the roles of \
             the key that signs them (`{role} = [\"NAME\"]` for NAME.pub)",
            roles_file.display(),
            role.signs()
        ))
    }

    /// Refuses to sign what `role` signs (`what`, for the message) with `key`, loaded from `key_path`, when the
    /// store's [`ROLES_FILE`] does not give that key the role: its signatures would not count for it, so the work
    /// would end in evidence nobody accepts (or, for a deleter's key signing drill reports, in evidence the
    /// deleter must refuse). Without the file every key holds every role, and nothing is refused.
    ///
    /// # Errors
    /// [`KeyError::RoleNotGranted`], naming the key file, its key id and the roles file.
    pub fn require_role(
        &self,
        key_path: &Path,
        key: &SigningKey,
        role: Role,
        what: &'static str,
    ) -> Result<(), KeyError> {
        if self.roles.is_none() {
            return Ok(());
        }
        let holds = self.roles_of(key.keyid());
        if holds.contains(&role) {
            return Ok(());
        }
        let name = self
            .get(key.keyid())
            .map_or_else(String::new, |k| format!(" ({}.pub in the trust folder)", k.name()));
        let holds = if holds.is_empty() {
            "no role".to_owned()
        } else {
            holds.iter().map(|r| r.name()).collect::<Vec<_>>().join(", ")
        };
        let roles_file = self.roles_file.clone().unwrap_or_else(|| PathBuf::from(ROLES_FILE));
        let nobody = self.no_key_holds(role).map(|n| format!("; {n}")).unwrap_or_default();
        Err(KeyError::RoleNotGranted {
            key: key_path.to_path_buf(),
            reason: format!(
                "key {}{name} may not sign {what}: {} does not give it the {role} role (it holds: {holds}){nobody}",
                key.keyid(),
                roles_file.display()
            ),
        })
    }

    /// This store without the keys its [`ROLES_FILE`] gives `role` (the whole store without the file, where every
    /// key holds every role): what may sign a drill chain's past, `without_granted(Role::Deleter)` — a key rotated
    /// out of the drill role keeps its reports' place, a deleter's key never writes into the drills that allow its
    /// deletes.
    #[must_use]
    pub fn without_granted(&self, role: Role) -> Self {
        let mut out = self.clone();
        if self.roles.is_some() {
            out.keys.retain(|k| !self.roles_of(&k.keyid).contains(&role));
        }
        out
    }

    /// This store without the key `keyid` (when it holds it).
    #[must_use]
    pub fn without(&self, keyid: &str) -> Self {
        let mut out = self.clone();
        out.keys.retain(|k| k.keyid != keyid);
        out
    }

    /// This store with only the keys whose key id is in `keyids` (a policy's `evidenceSigners`): their roles stay.
    #[must_use]
    pub fn only(&self, keyids: &[String]) -> Self {
        let mut out = self.clone();
        out.keys.retain(|k| keyids.contains(&k.keyid));
        out
    }

    /// The key with this key id (exact, lowercase hex), if trusted.
    #[must_use]
    pub fn get(&self, keyid: &str) -> Option<&PublicKey> {
        self.keys.iter().find(|k| k.keyid == keyid)
    }

    /// All trusted keys, in load order.
    #[must_use]
    pub fn keys(&self) -> &[PublicKey] {
        &self.keys
    }
}

/// Reads a [`ROLES_FILE`]: each top-level entry a role, its value the names or key ids of keys in `keys`.
fn parse_roles(
    path: &Path,
    text: &str,
    keys: &[PublicKey],
) -> Result<std::collections::BTreeMap<String, std::collections::BTreeSet<Role>>, KeyError> {
    let bad = |reason: String| KeyError::Roles {
        path: path.to_path_buf(),
        reason,
    };
    let table: toml::Table = text.parse().map_err(|e| bad(format!("not TOML: {e}")))?;
    let mut map: std::collections::BTreeMap<String, std::collections::BTreeSet<Role>> =
        std::collections::BTreeMap::new();
    for (name, value) in &table {
        let role = Role::ALL.into_iter().find(|r| r.name() == name).ok_or_else(|| {
            bad(format!(
                "unknown role {name:?} (the roles are {})",
                Role::ALL.map(Role::name).join(", ")
            ))
        })?;
        let list = value
            .as_array()
            .ok_or_else(|| bad(format!("{name} must be a list of key names or key ids")))?;
        for item in list {
            let who = item
                .as_str()
                .ok_or_else(|| bad(format!("{name}: {item} is not a key name or key id")))?;
            let key = keys.iter().find(|k| k.name == who || k.keyid == who).ok_or_else(|| {
                bad(format!(
                    "{name}: no key {who:?} in this folder (a NAME of NAME.pub, or a key id)"
                ))
            })?;
            map.entry(key.keyid.clone()).or_default().insert(role);
        }
    }
    // Duties kept apart: the deleter's key never signs what allows its deletes — the drill that vouches for a
    // recovery, or the governance decision that lifts a legal hold or grants a deletion right.
    for key in keys {
        let Some(r) = map.get(&key.keyid) else { continue };
        for (other, what) in [
            (Role::Drill, "vouch for the drill that allows its deletes"),
            (
                Role::Governance,
                "sign the decisions that lift legal holds and grant deletion rights",
            ),
        ] {
            if r.contains(&other) && r.contains(&Role::Deleter) {
                return Err(bad(format!(
                    "key {} ({}) is given both {other} and deleter: a deleter must not {what}; give each its own key",
                    key.name,
                    key.path.display()
                )));
            }
        }
    }
    Ok(map)
}

/// Whether a file in a trust folder is a private key: named `*.key`, or starting like a PEM private key
/// (`-----BEGIN PRIVATE KEY-----`, `… ENCRYPTED PRIVATE KEY`, `… OPENSSH PRIVATE KEY`, …). Only the first
/// bytes of regular files are read; a file that cannot be read is not a key lakedrill would use.
fn looks_private(path: &Path) -> bool {
    use std::io::Read as _;
    if path.extension().is_some_and(|ext| ext == PRIVATE_KEY_EXTENSION) {
        return true;
    }
    if !path.is_file() {
        return false;
    }
    let mut head = [0u8; 64];
    let Ok(mut f) = fs::File::open(path) else {
        return false;
    };
    let n = f.read(&mut head).unwrap_or(0);
    let text = String::from_utf8_lossy(&head[..n]);
    text.trim_start().starts_with("-----BEGIN") && text.contains("PRIVATE KEY-----")
}

fn validate_name(name: &str, dir: &Path) -> Result<(), KeyError> {
    let reason = if name.is_empty() {
        Some("the name is empty")
    } else if name.starts_with('.') {
        Some("the name starts with '.'")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        Some("only A-Z, a-z, 0-9, '.', '_' and '-' are allowed")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(KeyError::InvalidName {
            name: name.to_owned(),
            dir: dir.to_path_buf(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Creates `path` exclusively with `mode`, writes `bytes` and syncs. On a failure after creation the file is
/// removed again (it is ours: `create_new` succeeded), so a half-written key never blocks a retry.
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), KeyError> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|source| {
            if source.kind() == io::ErrorKind::AlreadyExists {
                KeyError::AlreadyExists {
                    path: path.to_path_buf(),
                }
            } else {
                KeyError::Io {
                    operation: "create",
                    path: path.to_path_buf(),
                    source,
                }
            }
        })?;
    if let Err(source) = file.write_all(bytes).and_then(|()| file.sync_all()) {
        drop(file);
        let _ = fs::remove_file(path);
        return Err(KeyError::Io {
            operation: "write",
            path: path.to_path_buf(),
            source,
        });
    }
    Ok(())
}

fn read_to_string(path: &Path) -> Result<String, KeyError> {
    fs::read_to_string(path).map_err(|source| KeyError::Io {
        operation: "read",
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn roles_file_limits_what_each_key_counts_for() {
        let dir = tempfile::tempdir().unwrap();
        let drill = generate("drill-ci", dir.path()).unwrap();
        let deleter = generate("deleter", dir.path()).unwrap();
        let sealer = generate("sealer", dir.path()).unwrap();
        for k in [&drill, &deleter, &sealer] {
            fs::remove_file(&k.private_path).unwrap();
        }
        // Without the file: every key, every role.
        let all = TrustStore::load_dir(dir.path()).unwrap();
        assert!(!all.has_roles());
        assert_eq!(all.for_role(Role::Drill).keys().len(), 3);
        assert_eq!(all.roles_of(&deleter.keyid), Role::ALL.to_vec());
        assert_eq!(all.without(&deleter.keyid).keys().len(), 2);
        // With it: names or key ids, each key only its roles.
        fs::write(
            dir.path().join(ROLES_FILE),
            format!(
                "drill = [\"drill-ci\"]\nseal = [\"sealer\", \"{}\"]\ndeleter = [\"deleter\"]\n",
                drill.keyid
            ),
        )
        .unwrap();
        let t = TrustStore::load_dir(dir.path()).unwrap();
        assert!(t.has_roles());
        let ids = |s: &TrustStore| s.keys().iter().map(|k| k.keyid().to_owned()).collect::<Vec<_>>();
        assert_eq!(ids(&t.for_role(Role::Drill)), vec![drill.keyid.clone()]);
        assert_eq!(t.for_role(Role::Seal).keys().len(), 2);
        assert_eq!(ids(&t.for_role(Role::Deleter)), vec![deleter.keyid.clone()]);
        assert_eq!(t.roles_of(&drill.keyid), vec![Role::Seal, Role::Drill]);
        assert!(t.roles_of(&"0".repeat(64)).is_empty());
        // Refused, naming the entry: an unknown role, a key not in the folder, drill and deleter on one key,
        // not a list, not TOML.
        for (text, needle) in [
            ("audit = [\"drill-ci\"]\n", "unknown role \"audit\""),
            ("drill = [\"nobody\"]\n", "no key \"nobody\""),
            (
                "drill = [\"deleter\"]\ndeleter = [\"deleter\"]\n",
                "both drill and deleter",
            ),
            (
                "governance = [\"deleter\"]\ndeleter = [\"deleter\"]\n",
                "both governance and deleter",
            ),
            ("drill = \"drill-ci\"\n", "must be a list"),
            ("drill = [\n", "not TOML"),
        ] {
            fs::write(dir.path().join(ROLES_FILE), text).unwrap();
            let e = TrustStore::load_dir(dir.path()).unwrap_err().to_string();
            assert!(e.contains(needle) && e.contains(ROLES_FILE), "{text}: {e}");
        }
    }

    #[test]
    fn governance_is_a_role_and_a_roles_file_without_it_gives_it_to_no_key() {
        let dir = tempfile::tempdir().unwrap();
        let (keys, trust) = (dir.path().join("keys"), dir.path().join("trust"));
        let drill = generate_in("drill-ci", &keys, &trust).unwrap();
        let gov = generate_in("privacy-office", &keys, &trust).unwrap();
        let drill_key = load_signing_key(&drill.private_path).unwrap();
        let gov_key = load_signing_key(&gov.private_path).unwrap();
        // Without the file: every key holds governance too, and nothing is said missing.
        let all = TrustStore::load_dir(&trust).unwrap();
        assert_eq!(all.for_role(Role::Governance).keys().len(), 2);
        assert!(all.no_key_holds(Role::Governance).is_none());
        all.require_role(
            &drill.private_path,
            &drill_key,
            Role::Governance,
            "governance decisions",
        )
        .unwrap();
        // A file from before the role: it gives governance to no key, and says how to fix that.
        fs::write(
            trust.join(ROLES_FILE),
            "seal = [\"drill-ci\"]\ndrill = [\"drill-ci\"]\n",
        )
        .unwrap();
        let old = TrustStore::load_dir(&trust).unwrap();
        assert!(old.for_role(Role::Governance).keys().is_empty());
        let hint = old.no_key_holds(Role::Governance).unwrap();
        assert!(
            hint.contains(ROLES_FILE)
                && hint.contains("no governance decision verifies")
                && hint.contains("governance = [\"NAME\"]"),
            "{hint}"
        );
        assert!(old.no_key_holds(Role::Drill).is_none());
        let e = old
            .require_role(&gov.private_path, &gov_key, Role::Governance, "governance decisions")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("may not sign governance decisions")
                && e.contains("does not give it the governance role")
                && e.contains(&hint),
            "{e}"
        );
        // Named in the file: that key alone; it may hold drill as well.
        fs::write(
            trust.join(ROLES_FILE),
            "drill = [\"drill-ci\", \"privacy-office\"]\ngovernance = [\"privacy-office\"]\n",
        )
        .unwrap();
        let t = TrustStore::load_dir(&trust).unwrap();
        assert_eq!(t.roles_of(&gov.keyid), vec![Role::Drill, Role::Governance]);
        let ids: Vec<_> = t
            .for_role(Role::Governance)
            .keys()
            .iter()
            .map(|k| k.keyid().to_owned())
            .collect();
        assert_eq!(ids, vec![gov.keyid.clone()]);
        assert!(t.no_key_holds(Role::Governance).is_none());
        t.require_role(&gov.private_path, &gov_key, Role::Governance, "governance decisions")
            .unwrap();
        let e = t
            .require_role(
                &drill.private_path,
                &drill_key,
                Role::Governance,
                "governance decisions",
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains("(it holds: drill)") && !e.contains("gives no key"), "{e}");
        // An unknown role names governance among the roles.
        fs::write(trust.join(ROLES_FILE), "govern = [\"privacy-office\"]\n").unwrap();
        let e = TrustStore::load_dir(&trust).unwrap_err().to_string();
        assert!(e.contains("seal, drill, deleter, governance"), "{e}");
    }

    #[test]
    fn keyid_is_sha256_of_raw_public_key() {
        let key = ed25519_dalek::SigningKey::from_bytes(&[1; 32]);
        let raw = key.verifying_key().to_bytes();
        let expected = hex::encode(Sha256::digest(raw));
        assert_eq!(keyid(&key.verifying_key()), expected);
        assert_eq!(SigningKey::from(key).keyid(), expected);
        assert!(
            expected
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );
    }

    #[test]
    fn keyid_known_answer() {
        // RFC 8032 §7.1 TEST 1 public key; keyid computed with `sha256sum` over the 32 raw bytes.
        let raw = hex::decode("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a").unwrap();
        let key = VerifyingKey::from_bytes(&raw.try_into().unwrap()).unwrap();
        assert_eq!(keyid(&key), hex::encode(Sha256::digest(key.as_bytes())));
        assert_eq!(
            keyid(&key),
            "21fe31dfa154a261626bf854046fd2271b7bed4b6abe45aa58877ef47f9721b9"
        );
    }

    #[test]
    fn generate_writes_0600_key_and_loadable_pair() {
        let dir = tempfile::tempdir().unwrap();
        let keys_dir = dir.path().join("nested/keys");
        let generated = generate("ops-TEST-ONLY", &keys_dir).unwrap();
        assert_eq!(generated.private_path, keys_dir.join("ops-TEST-ONLY.key"));
        assert_eq!(generated.public_path, keys_dir.join("ops-TEST-ONLY.pub"));

        let mode = fs::metadata(&generated.private_path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let pem = fs::read_to_string(&generated.private_path).unwrap();
        // PKCS#8 v1: the 48-byte DER that `openssl genpkey -algorithm ed25519` writes always starts like this.
        assert!(
            pem.starts_with("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEI"),
            "{pem}"
        );
        assert_eq!(pem.lines().count(), 3);
        let pub_pem = fs::read_to_string(&generated.public_path).unwrap();
        assert!(pub_pem.starts_with("-----BEGIN PUBLIC KEY-----\n"));

        let signing = load_signing_key(&generated.private_path).unwrap();
        let public = load_public_key(&generated.public_path).unwrap();
        assert_eq!(signing.keyid(), generated.keyid);
        assert_eq!(public.keyid(), generated.keyid);
        assert_eq!(public.name(), "ops-TEST-ONLY");
        assert_eq!(public.path(), generated.public_path);
        assert_eq!(*public.verifying_key(), signing.verifying_key());
        let sig = signing.sign(b"msg");
        public.verifying_key().verify_strict(b"msg", &sig).unwrap();
    }

    #[test]
    fn loads_pkcs8_v2_and_refuses_mismatched_public_key() {
        let dir = tempfile::tempdir().unwrap();
        let key = ed25519_dalek::SigningKey::from_bytes(&[3; 32]);
        let v2 = dir.path().join("v2.key");
        write_new(&v2, key.to_pkcs8_pem(LineEnding::LF).unwrap().as_bytes(), 0o600).unwrap();
        assert_eq!(load_signing_key(&v2).unwrap().keyid(), keyid(&key.verifying_key()));

        let other = ed25519_dalek::SigningKey::from_bytes(&[4; 32]).verifying_key();
        let mismatched = KeypairBytes {
            secret_key: key.to_bytes(),
            public_key: Some(ed25519_dalek::pkcs8::PublicKeyBytes(other.to_bytes())),
        };
        let bad = dir.path().join("bad.key");
        write_new(&bad, mismatched.to_pkcs8_pem(LineEnding::LF).unwrap().as_bytes(), 0o600).unwrap();
        assert!(matches!(load_signing_key(&bad), Err(KeyError::InvalidPrivateKey { path, .. }) if path == bad));
    }

    #[test]
    fn generate_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let first = generate("k", dir.path()).unwrap();
        let key_before = fs::read(&first.private_path).unwrap();
        let pub_before = fs::read(&first.public_path).unwrap();

        let err = generate("k", dir.path()).unwrap_err();
        assert!(
            matches!(&err, KeyError::AlreadyExists { path } if *path == first.private_path),
            "{err:?}"
        );
        assert_eq!(fs::read(&first.private_path).unwrap(), key_before);
        assert_eq!(fs::read(&first.public_path).unwrap(), pub_before);
    }

    #[test]
    fn existing_pub_is_never_overwritten_and_no_key_is_left_behind() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("k.pub"), "precious").unwrap();
        let err = generate("k", dir.path()).unwrap_err();
        assert!(matches!(&err, KeyError::AlreadyExists { path } if path.ends_with("k.pub")));
        assert_eq!(fs::read_to_string(dir.path().join("k.pub")).unwrap(), "precious");
        assert!(!dir.path().join("k.key").exists());
    }

    #[test]
    fn write_new_refuses_existing_file_even_without_precheck() {
        // The create_new in write_new is the real guarantee (the precheck in generate could race).
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.key");
        fs::write(&path, "old").unwrap();
        let err = write_new(&path, b"new", 0o600).unwrap_err();
        assert!(matches!(err, KeyError::AlreadyExists { .. }));
        assert_eq!(fs::read_to_string(&path).unwrap(), "old");
    }

    #[test]
    fn invalid_names_are_refused_before_any_write() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["", ".hidden", "../escape", "a/b", "sp ace", "ümlaut", "a\0b", "x*"] {
            let err = generate(name, &dir.path().join("k")).unwrap_err();
            assert!(matches!(err, KeyError::InvalidName { .. }), "{name:?}: {err:?}");
        }
        assert!(!dir.path().join("k").exists());
        for name in ["a", "ops.2026-01_TEST-ONLY", "A.b", "0"] {
            validate_name(name, dir.path()).unwrap();
        }
    }

    #[test]
    fn debug_is_redacted() {
        let key = SigningKey::from(ed25519_dalek::SigningKey::from_bytes(&[9; 32]));
        let shown = format!("{key:?}");
        assert_eq!(
            shown,
            format!("SigningKey {{ keyid: \"{}\", secret: \"[redacted]\" }}", key.keyid())
        );
        let secret_hex = hex::encode([9u8; 32]);
        assert!(!shown.contains(&secret_hex));
        assert!(!format!("{key:#?}").contains(&secret_hex));
    }

    #[test]
    fn load_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.key");
        let err = load_signing_key(&missing).unwrap_err();
        assert!(matches!(&err, KeyError::Io { operation: "read", path, .. } if *path == missing));
        assert!(err.to_string().contains("missing.key"), "{err}");

        let garbage = dir.path().join("garbage.pub");
        fs::write(&garbage, "not a key").unwrap();
        let err = load_public_key(&garbage).unwrap_err();
        assert!(
            matches!(&err, KeyError::NotPem { path, .. } if *path == garbage),
            "{err}"
        );
        assert!(err.to_string().contains("garbage.pub"), "{err}");

        // A file without a PEM block is named as not a key, without the decoder's "preamble contains invalid
        // data (NUL byte)", which it said of text that has no NUL.
        let garbage = dir.path().join("garbage.key");
        write_new(&garbage, b"aGVsbG8gd29ybGQ=\nnot a key at all\n", 0o600).unwrap();
        let err = load_signing_key(&garbage).unwrap_err();
        assert!(
            matches!(&err, KeyError::NotPem { path, .. } if *path == garbage),
            "{err}"
        );
        assert!(
            err.to_string().contains("garbage.key is not a PEM Ed25519 private key"),
            "{err}"
        );
        assert!(std::error::Error::source(&err).is_none(), "{err:?}");

        // A private key where a public key is expected, and vice versa.
        let generated = generate("k", dir.path()).unwrap();
        assert!(matches!(
            load_public_key(&generated.private_path),
            Err(KeyError::InvalidPublicKey { .. })
        ));
        assert!(matches!(
            load_signing_key(&generated.public_path),
            Err(KeyError::InvalidPrivateKey { .. })
        ));
    }

    #[test]
    fn weak_public_key_is_refused() {
        // The identity point (small order): y = 1.
        let mut raw = [0u8; 32];
        raw[0] = 1;
        let weak = VerifyingKey::from_bytes(&raw).unwrap();
        assert!(weak.is_weak());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("weak.pub");
        fs::write(&path, weak.to_public_key_pem(LineEnding::LF).unwrap()).unwrap();
        assert!(matches!(load_public_key(&path), Err(KeyError::WeakPublicKey { .. })));
    }

    #[test]
    fn trust_store_loads_sorted_pub_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let b = generate("b", dir.path()).unwrap();
        let a = generate("a", dir.path()).unwrap();
        fs::write(dir.path().join("README.md"), "not a key").unwrap();
        let store = TrustStore::load_dir(dir.path()).unwrap();
        let names: Vec<_> = store.keys().iter().map(PublicKey::name).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(store.get(&a.keyid).unwrap().name(), "a");
        assert_eq!(store.get(&b.keyid).unwrap().path(), b.public_path);
        assert!(store.get(&a.keyid.to_uppercase()).is_none());
        assert!(store.get("").is_none());
    }

    #[test]
    fn trust_store_errors() {
        let dir = tempfile::tempdir().unwrap();
        let err = TrustStore::load_dir(dir.path()).unwrap_err();
        assert!(matches!(&err, KeyError::EmptyTrustStore { dir: d } if d == dir.path()));

        let missing = dir.path().join("nope");
        let err = TrustStore::load_dir(&missing).unwrap_err();
        assert!(
            matches!(&err, KeyError::TrustFolder { dir, .. } if *dir == missing),
            "{err}"
        );
        // It names the role and the flag, not only "could not list directory".
        assert!(
            err.to_string().contains("trust folder") && err.to_string().contains("--trust"),
            "{err}"
        );

        let generated = generate("good", dir.path()).unwrap();
        let bad = dir.path().join("bad.pub");
        fs::write(&bad, "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n").unwrap();
        let err = TrustStore::load_dir(dir.path()).unwrap_err();
        assert!(matches!(&err, KeyError::InvalidPublicKey { path, .. } if *path == bad));
        fs::remove_file(&bad).unwrap();

        fs::copy(&generated.public_path, dir.path().join("good-copy.pub")).unwrap();
        let err = TrustStore::load_dir(dir.path()).unwrap_err();
        assert!(matches!(&err, KeyError::DuplicateKey { keyid, .. } if *keyid == generated.keyid));
    }

    /// See: issue 16 point 9 — a key readable by group or others sealed and quarantined with no word.
    #[test]
    fn r16_signing_key_accessible_by_group_or_others_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let k = generate("m", dir.path()).unwrap();
        for mode in [0o644, 0o640, 0o604] {
            fs::set_permissions(&k.private_path, fs::Permissions::from_mode(mode)).unwrap();
            let err = load_signing_key(&k.private_path).expect_err(&format!("mode {mode:04o} must be refused"));
            let msg = err.to_string();
            assert!(msg.contains(&k.private_path.display().to_string()), "{msg}");
            assert!(msg.contains(&format!("{mode:04o}")), "{msg}");
            assert!(
                matches!(&err, KeyError::ReadableKey { path, mode: m } if *path == k.private_path && *m == mode),
                "{err:?}"
            );
        }
        for mode in [0o600, 0o400] {
            fs::set_permissions(&k.private_path, fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(
                load_signing_key(&k.private_path).unwrap().keyid(),
                k.keyid,
                "{mode:04o}"
            );
        }
    }

    /// See: issue 16 point 10 — the demo's trust folder held the private key, silently.
    #[test]
    fn r16_trust_folder_with_a_private_key_warns() {
        let dir = tempfile::tempdir().unwrap();
        let k = generate("mixed", dir.path()).unwrap();
        // A private key under another name is found by its PEM header.
        fs::copy(&k.private_path, dir.path().join("backup.pem")).unwrap();
        let store = TrustStore::load_dir(dir.path()).unwrap();
        assert_eq!(store.keys().len(), 1);
        let w = store.warnings();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("backup.pem") && w[1].contains("mixed.key"), "{w:?}");
        assert!(w.iter().all(|w| w.contains("private key")), "{w:?}");

        // generate_in keeps the public key apart: that folder loads without a warning.
        let split = tempfile::tempdir().unwrap();
        let g = generate_in("split", &split.path().join("keys"), &split.path().join("keys/trust")).unwrap();
        assert_eq!(g.private_path, split.path().join("keys/split.key"));
        assert_eq!(g.public_path, split.path().join("keys/trust/split.pub"));
        let store = TrustStore::load_dir(&split.path().join("keys/trust")).unwrap();
        assert_eq!(store.get(&g.keyid).unwrap().name(), "split");
        assert!(store.warnings().is_empty(), "{:?}", store.warnings());
    }

    #[test]
    fn from_keys_allows_empty_and_rejects_duplicates() {
        assert!(TrustStore::from_keys(Vec::new()).unwrap().keys().is_empty());
        let key = SigningKey::generate().verifying_key();
        let err = TrustStore::from_keys(vec![
            PublicKey::new("a", "a.pub", key),
            PublicKey::new("b", "b.pub", key),
        ])
        .unwrap_err();
        assert!(matches!(err, KeyError::DuplicateKey { .. }));
    }
}

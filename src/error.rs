//! The crate's error type.
//!
//! An [`Error`] means "lakedrill could not decide": bad input, an unreachable or
//! unreadable object, an internal fault. Every such outcome exits with code 2 and
//! means "do not delete". Problems found *in* a table or a bundle (a digest that
//! differs, a missing data file during a drill) are not errors but findings
//! (see [`crate::model::findings`]); they are collected and reported, and exit with 1.
//! One variant is a finding carried as an error: [`Error::BundleNotVerified`], a bundle that was read and does
//! not verify. It is an error so that every reader refuses it by `?`; the commands whose subject is that bundle
//! answer it with exit 1 (see `DESIGN.md`, "A bundle that does not verify"), the others keep it as exit 2.
//!
//! Every variant names the object it is about (a storage URI, a snapshot id, a
//! configuration field). Messages never interpolate their `source`; the binary
//! prints the whole chain once.

use std::path::PathBuf;

/// `Result` with [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Broad classes of errors, for callers that branch on the cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The input given by the user (arguments, configuration, a document) is invalid.
    BadInput,
    /// An object does not exist.
    NotFound,
    /// Storage could not be reached or answered with an error.
    Storage,
    /// Table metadata, a manifest list or a manifest is malformed.
    Corrupt,
    /// An object or key would be overwritten.
    AlreadyExists,
    /// A bug or an unexpected state inside lakedrill.
    Internal,
    /// An object was read and does not verify (a bad or untrusted signature, a digest or root that differs):
    /// a finding about it, not a failure to read it.
    NotVerified,
}

/// Everything that makes lakedrill unable to decide.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A storage URI or local path could not be understood.
    #[error("invalid storage location {uri:?}: {reason}")]
    BadUri {
        /// The URI as given.
        uri: String,
        /// Why it was refused.
        reason: String,
    },
    /// An object that must exist does not.
    #[error("{uri} does not exist")]
    NotFound {
        /// The storage URI.
        uri: String,
    },
    /// Reading, listing or writing an object failed.
    #[error("cannot {op} {uri}")]
    Storage {
        /// The operation (`read`, `stat`, `list`, `write`, `delete`).
        op: &'static str,
        /// The storage URI.
        uri: String,
        /// The storage layer's error.
        #[source]
        source: Box<object_store::Error>,
    },
    /// An object would be overwritten by a write-once operation.
    #[error("{uri} already exists and is never overwritten")]
    AlreadyExists {
        /// The storage URI.
        uri: String,
    },
    /// A metadata file, manifest list or manifest is malformed.
    #[error("{uri}: {reason}")]
    Corrupt {
        /// The storage URI of the object.
        uri: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The iceberg parser rejected an object.
    #[error("{uri}: {what} cannot be parsed")]
    Parse {
        /// The storage URI of the object.
        uri: String,
        /// Which layer (`table metadata`, `manifest list`, `manifest`).
        what: &'static str,
        /// The parser's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A path written in table metadata does not fall under the table location.
    #[error("PATH_OUTSIDE_TABLE: {path} is not under the table location {location}; it was not opened")]
    PathOutsideTable {
        /// The path as written in the metadata.
        path: String,
        /// The table location as written in the metadata.
        location: String,
    },
    /// A snapshot id that the table does not have.
    #[error("snapshot {snapshot_id} does not exist in table {table}")]
    SnapshotNotFound {
        /// The snapshot id asked for.
        snapshot_id: i64,
        /// The table (metadata URI or name).
        table: String,
    },
    /// A ref name that the table does not have.
    #[error("ref {name:?} does not exist in table {table}{hint}")]
    RefNotFound {
        /// The ref asked for.
        name: String,
        /// The table.
        table: String,
        /// A hint about refs that differ only by case.
        hint: String,
    },
    /// Refs whose names collide under case folding.
    #[error(
        "ref {name:?} is ambiguous: refs {others:?} differ from it only by case; lakedrill never picks one silently"
    )]
    AmbiguousRef {
        /// The ref asked for.
        name: String,
        /// The refs it collides with.
        others: Vec<String>,
    },
    /// An instant (`--as-of`, `--at`) that cannot be read or answered.
    #[error("{flag} {input}: {reason}")]
    AsOf {
        /// The flag it was given with (`--as-of`, `--at`).
        flag: &'static str,
        /// The instant as given.
        input: String,
        /// Why it cannot be answered.
        reason: String,
    },
    /// The configuration file or a document given on the command line is invalid.
    #[error("{file}: {reason}")]
    Config {
        /// The file (or `--flag`) at fault.
        file: String,
        /// The field and the rule that failed.
        reason: String,
    },
    /// A catalog could not be opened or queried.
    #[error("catalog {catalog}: {reason}")]
    Catalog {
        /// The catalog's name in the configuration.
        catalog: String,
        /// What failed.
        reason: String,
        /// The underlying error, if any.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A catalog commit was sent, but whether the catalog applied it is unknown (a REST server answered 5xx,
    /// the connection broke after the request went out, or the answer to it could not be read), and reading the
    /// table again did not settle it. Unlike [`Error::Catalog`] it never means "nothing changed": the table may
    /// carry the commit, now or later, so nothing the commit was to make safe may be discarded or deleted.
    #[error("catalog {catalog}: the commit to {table} was sent but its outcome is unknown: {reason}")]
    CommitUnknown {
        /// The catalog's name in the configuration.
        catalog: String,
        /// The table committed to.
        table: String,
        /// What was answered (or not) and what the table showed when read again.
        reason: String,
    },
    /// A local file operation failed.
    #[error("cannot {op} {}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The local path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Invalid input that is not a file (an argument, a value).
    #[error("{what}: {reason}")]
    Invalid {
        /// The argument or value.
        what: String,
        /// The rule it breaks.
        reason: String,
    },
    /// An error of a module with an error type of its own (the retention policy, the registry, keys),
    /// mapped in by that module (`impl From<ItsError> for crate::Error`) with the kind it chooses.
    #[error(transparent)]
    Module(Box<ModuleError>),
    /// An operation of the iceberg crate failed.
    #[error("{context}")]
    Iceberg {
        /// What lakedrill was doing.
        context: String,
        /// The iceberg crate's error.
        #[source]
        source: Box<iceberg::Error>,
    },
    /// A bundle that was read and does not verify: its signature is not by a trusted key with the seal role, the
    /// signed statement is not a bundle, its inventory is not the one signed (root, subject) or a member it names
    /// is missing or differs. Unlike [`Error::Storage`] or [`Error::NotFound`] of its envelope, the bundle could be
    /// read and is wrong: a command whose subject is the bundle reports it as a finding (exit 1).
    #[error("{bundle}: {reason}")]
    BundleNotVerified {
        /// The bundle folder.
        bundle: String,
        /// What does not verify.
        reason: String,
    },
    /// A delete request that failed before any byte of it went out (its URI could not be resolved, its headers
    /// or signature could not be made, its client could not be built, or its keys were refused locally): the
    /// provider never saw it, so it cannot have taken effect. Only errors raised provably before sending are
    /// wrapped in it; any error after the request may have left stays what it was ("may have taken effect").
    #[error("the {op} request for {uri} was not sent")]
    NotSent {
        /// The request (`delete`, `DeleteObjects`).
        op: &'static str,
        /// The object (or bucket) it was for.
        uri: String,
        /// Why it could not be sent.
        #[source]
        source: Box<Error>,
    },
    /// Something lakedrill did not expect; a bug.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// The broad class of this error.
    #[must_use]
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::BadUri { .. }
            | Error::SnapshotNotFound { .. }
            | Error::RefNotFound { .. }
            | Error::AmbiguousRef { .. }
            | Error::AsOf { .. }
            | Error::Config { .. }
            | Error::Invalid { .. }
            | Error::PathOutsideTable { .. } => ErrorKind::BadInput,
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::Module(e) => e.kind,
            Error::Storage { .. } | Error::Io { .. } | Error::Catalog { .. } | Error::CommitUnknown { .. } => {
                ErrorKind::Storage
            }
            Error::Corrupt { .. } | Error::Parse { .. } => ErrorKind::Corrupt,
            Error::AlreadyExists { .. } => ErrorKind::AlreadyExists,
            Error::Iceberg { .. } | Error::Internal(_) => ErrorKind::Internal,
            Error::BundleNotVerified { .. } => ErrorKind::NotVerified,
            Error::NotSent { source, .. } => source.kind(),
        }
    }

    /// `e`, raised before any byte of the `op` request for `uri` went out, marked as never sent ([`Error::NotSent`]).
    #[must_use]
    pub fn not_sent(op: &'static str, uri: &str, e: Error) -> Self {
        match e {
            Error::NotSent { .. } => e,
            e => Error::NotSent {
                op,
                uri: uri.to_owned(),
                source: Box::new(e),
            },
        }
    }

    /// Whether this error was raised before its request was sent ([`Error::NotSent`]): the request cannot have
    /// taken effect.
    #[must_use]
    pub fn was_not_sent(&self) -> bool {
        matches!(self, Error::NotSent { .. })
    }

    /// The message with every cause under it (`cannot get … s3://b: HTTP 403: …`): where an error becomes the
    /// text of a finding or a refusal, so that the provider's own answer is not lost.
    #[must_use]
    pub fn with_causes(&self) -> String {
        let mut s = self.to_string();
        let mut src = std::error::Error::source(self);
        while let Some(x) = src {
            s.push_str(": ");
            s.push_str(&x.to_string());
            src = x.source();
        }
        s
    }

    /// Shorthand for [`Error::Invalid`]: `what` (an argument or value) breaks a rule.
    #[must_use]
    pub fn invalid(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Invalid {
            what: what.into(),
            reason: reason.into(),
        }
    }

    /// Shorthand for [`Error::Corrupt`].
    pub(crate) fn corrupt(uri: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Corrupt {
            uri: uri.into(),
            reason: reason.into(),
        }
    }

    /// Shorthand for [`Error::BundleNotVerified`].
    pub(crate) fn not_verified(bundle: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::BundleNotVerified {
            bundle: bundle.into(),
            reason: reason.into(),
        }
    }

    /// Shorthand for [`Error::Io`].
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// Shorthand for [`Error::Iceberg`].
    pub(crate) fn iceberg(context: impl Into<String>, source: iceberg::Error) -> Self {
        Error::Iceberg {
            context: context.into(),
            source: Box::new(source),
        }
    }

    /// An error of a module with its own error type, as that module classifies it ([`Error::Module`]).
    pub(crate) fn module(kind: ErrorKind, error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Error::Module(Box::new(ModuleError {
            kind,
            error: Box::new(error),
        }))
    }
}

/// A module's own error inside [`Error::Module`]: displays as that error and has its source.
#[derive(Debug)]
pub struct ModuleError {
    kind: ErrorKind,
    error: Box<dyn std::error::Error + Send + Sync>,
}

impl ModuleError {
    /// The module's error, for callers that downcast to it.
    #[must_use]
    pub fn inner(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self.error.as_ref()
    }
}

impl std::fmt::Display for ModuleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for ModuleError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

/// Warnings given while a command runs (see [`warn`]), for the binary to add to the JSON document.
static WARNINGS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Gives the user a warning that does not change the command's verdict (a trust folder holding a private
/// key, a signing key used although others can read it): printed on stderr at once as
/// `lakedrill: warning: …` (also with `-q`: it is not progress), and kept for [`take_warnings`], with which
/// the binary adds it to the `warnings` array of the `--json` document. The same text is given once per
/// process.
pub fn warn(message: impl Into<String>) {
    let message = message.into();
    let mut all = WARNINGS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if !all.contains(&message) {
        eprintln!("lakedrill: warning: {message}");
        all.push(message);
    }
}

/// The warnings given so far (see [`warn`]), in order; the list is emptied.
pub fn take_warnings() -> Vec<String> {
    std::mem::take(&mut *WARNINGS.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
}

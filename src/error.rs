//! The crate's error type.
//!
//! An [`Error`] means "lakedrill could not decide": bad input, an unreachable or
//! unreadable object, an internal fault. Every such outcome exits with code 2 and
//! means "do not delete". Problems found *in* a table or a bundle (a digest that
//! differs, a missing data file during a drill) are not errors but findings
//! (see [`crate::model::findings`]); they are collected and reported, and exit with 1.
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
    /// A time-travel request that cannot be answered.
    #[error("--as-of {input}: {reason}")]
    AsOf {
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
    /// A retention policy document is invalid or does not match the table.
    #[error(transparent)]
    Policy(Box<crate::govern::policy::PolicyError>),
    /// The registry (leases, holds, writers, checkpoints, states) refused a change or failed.
    #[error(transparent)]
    Registry(Box<crate::registry::RegistryError>),
    /// A signing or trust key could not be used.
    #[error(transparent)]
    Key(Box<crate::evidence::keys::KeyError>),
    /// An operation of the iceberg crate failed.
    #[error("{context}")]
    Iceberg {
        /// What lakedrill was doing.
        context: String,
        /// The iceberg crate's error.
        #[source]
        source: Box<iceberg::Error>,
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
            | Error::PathOutsideTable { .. }
            | Error::Key(_)
            | Error::Policy(_) => ErrorKind::BadInput,
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::Registry(e) => match **e {
                crate::registry::RegistryError::NotFound { .. } => ErrorKind::NotFound,
                crate::registry::RegistryError::AlreadyEnded { .. }
                | crate::registry::RegistryError::Invalid { .. } => ErrorKind::BadInput,
                _ => ErrorKind::Storage,
            },
            Error::Storage { .. } | Error::Io { .. } | Error::Catalog { .. } => ErrorKind::Storage,
            Error::Corrupt { .. } | Error::Parse { .. } => ErrorKind::Corrupt,
            Error::AlreadyExists { .. } => ErrorKind::AlreadyExists,
            Error::Iceberg { .. } | Error::Internal(_) => ErrorKind::Internal,
        }
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
}

impl From<crate::evidence::keys::KeyError> for Error {
    fn from(e: crate::evidence::keys::KeyError) -> Self {
        Error::Key(Box::new(e))
    }
}

impl From<crate::govern::policy::PolicyError> for Error {
    fn from(e: crate::govern::policy::PolicyError) -> Self {
        Error::Policy(Box::new(e))
    }
}

impl From<crate::registry::RegistryError> for Error {
    fn from(e: crate::registry::RegistryError) -> Self {
        Error::Registry(Box::new(e))
    }
}

//! A table's name in a catalog: namespace levels and table name (`db.orders`, `a.b.orders`).

use std::str::FromStr;

use crate::error::{Error, Result};

/// A namespace + table name, as `ns1.ns2.table`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableIdent {
    /// Namespace levels joined by `.` as the JDBC catalog stores them.
    pub namespace: String,
    /// The table name.
    pub name: String,
}

impl FromStr for TableIdent {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.rsplit_once('.') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() => Ok(TableIdent {
                namespace: ns.to_owned(),
                name: name.to_owned(),
            }),
            _ => Err(Error::invalid(
                format!("--table {s}"),
                "expected NAMESPACE.TABLE (for example db.orders)",
            )),
        }
    }
}

impl std::fmt::Display for TableIdent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.namespace, self.name)
    }
}

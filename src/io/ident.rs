//! A table's name in a catalog: namespace levels and table name (`db.orders`, `a.b.orders`,
//! `` `q3.2026`.orders ``).

use std::str::FromStr;

use crate::error::{Error, Result};

/// A namespace + table name, written `ns1.ns2.table`.
///
/// A level or a name that itself contains a `.` is written between backticks, as Spark SQL writes it:
/// `` `q3.2026`.orders `` is the table `orders` in the one-level namespace `q3.2026`, while
/// `q3.2026.orders` is the table `orders` in the two-level namespace `q3` → `2026`. A backtick inside
/// backticks is doubled. REST catalogs address each level on its own (joined by `%1F`); SQL catalogs
/// store the levels joined by `.` (as Iceberg's JDBC catalog does), where the two spellings name one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableIdent {
    /// The namespace levels, outermost first; never empty.
    pub namespace: Vec<String>,
    /// The table name.
    pub name: String,
}

impl TableIdent {
    /// The namespace as the JDBC catalog's `table_namespace` column holds it: the levels joined by `.`.
    #[must_use]
    pub fn jdbc_namespace(&self) -> String {
        self.namespace.join(".")
    }

    /// The namespace levels as written on the command line (each quoted when it must be), joined by `.`.
    #[must_use]
    pub fn namespace_display(&self) -> String {
        self.namespace.iter().map(|l| quoted(l)).collect::<Vec<_>>().join(".")
    }
}

/// One level or name as written: between backticks when it contains `.` or `` ` `` or is empty.
fn quoted(part: &str) -> String {
    if part.is_empty() || part.contains(['.', '`']) {
        format!("`{}`", part.replace('`', "``"))
    } else {
        part.to_owned()
    }
}

/// Splits `s` into its dot-separated parts, honouring backtick quoting; `None` when a quote is not closed
/// or a quoted part is followed by anything but `.` or the end.
fn parts(s: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        let mut part = String::new();
        if chars.peek() == Some(&'`') {
            chars.next();
            loop {
                match chars.next()? {
                    '`' if chars.peek() == Some(&'`') => {
                        chars.next();
                        part.push('`');
                    }
                    '`' => break,
                    c => part.push(c),
                }
            }
            match chars.next() {
                None => {
                    out.push(part);
                    return Some(out);
                }
                Some('.') => out.push(part),
                Some(_) => return None,
            }
        } else {
            loop {
                match chars.next() {
                    None => {
                        if part.is_empty() {
                            return None;
                        }
                        out.push(part);
                        return Some(out);
                    }
                    Some('.') => break,
                    Some('`') => return None,
                    Some(c) => part.push(c),
                }
            }
            if part.is_empty() {
                return None;
            }
            out.push(part);
        }
    }
}

impl FromStr for TableIdent {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match parts(s) {
            Some(mut p) if p.len() >= 2 && p.iter().all(|l| !l.is_empty()) => {
                let name = p.pop().unwrap_or_default();
                Ok(TableIdent { namespace: p, name })
            }
            _ => Err(Error::invalid(
                format!("--table {s}"),
                "expected NAMESPACE.TABLE (for example db.orders; a level containing a dot between backticks, \
                 as `q3.2026`.orders)",
            )),
        }
    }
}

impl std::fmt::Display for TableIdent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.namespace_display(), quoted(&self.name))
    }
}

#[cfg(test)]
mod tests {
    use super::TableIdent;

    fn ident(s: &str) -> TableIdent {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn plain_names_split_on_every_dot() {
        let t = ident("a.b.orders");
        assert_eq!(t.namespace, ["a", "b"]);
        assert_eq!(t.name, "orders");
        assert_eq!(t.jdbc_namespace(), "a.b");
        assert_eq!(t.to_string(), "a.b.orders");
    }

    #[test]
    fn a_level_between_backticks_keeps_its_dots_and_prints_back_the_same() {
        let t = ident("`q3.2026`.orders");
        assert_eq!(t.namespace, ["q3.2026"]);
        assert_eq!(t.name, "orders");
        assert_eq!(t.to_string(), "`q3.2026`.orders");
        let t = ident("sales.`a``b.c`.`t.x`");
        assert_eq!(t.namespace, ["sales", "a`b.c"]);
        assert_eq!(t.name, "t.x");
        assert_eq!(ident(&t.to_string()), t);
        // The JDBC column cannot tell the two spellings apart; the REST address can.
        assert_eq!(t.jdbc_namespace(), "sales.a`b.c");
        assert_ne!(ident("q3.2026.orders").namespace, ident("`q3.2026`.orders").namespace);
    }

    #[test]
    fn malformed_names_are_refused_naming_the_input() {
        for bad in [
            "orders",
            "",
            ".orders",
            "db.",
            "a..b",
            "`db.orders",
            "`db`x.orders",
            "d`b.orders",
            "``.t",
        ] {
            let e = bad.parse::<TableIdent>().expect_err(bad).to_string();
            assert!(e.contains(&format!("--table {bad}")), "{bad}: {e}");
        }
    }
}

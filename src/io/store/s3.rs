//! The S3 requests object_store does not offer, sent as requests object_store presigns with the store's own
//! credentials (one client stack, CRATE-NOTES): version listings, version deletes, conditional single deletes
//! (`If-Match`), batch deletes (`DeleteObjects` with each key's expected ETag), writes under Object Lock and
//! reading an object's lock. Every answer the provider gives is returned as it said it (status, error code,
//! delete-marker and version fields, request id), never inferred: receipts quote it.
//!
//! They go around a [`super::Layer`] (the fault layer of `drill faults` wraps object_store clients, not these
//! requests); the test failpoints of [`super::Failpoints`] do apply to the deletes here.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use http::{HeaderMap, HeaderName, HeaderValue};
use object_store::path::Path;

use super::{ObjectInfo, ObjectVersion, Storage};
use crate::error::{Error, Result};
use crate::io::fault_store::KeyFault;

/// The bucket and the key of an `s3://` URI; `None` for any other URI.
#[must_use]
pub fn bucket_and_key(uri: &str) -> Option<(&str, &str)> {
    let rest = uri.strip_prefix("s3://")?;
    Some(rest.split_once('/').unwrap_or((rest, "")))
}

/// Most keys S3 accepts in one `DeleteObjects` request.
pub const MAX_DELETE_OBJECTS_KEYS: usize = 1000;

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ListVersionsResult {
    #[serde(default)]
    is_truncated: bool,
    next_key_marker: Option<String>,
    next_version_id_marker: Option<String>,
    #[serde(rename = "Version", default)]
    versions: Vec<XmlVersion>,
    #[serde(rename = "DeleteMarker", default)]
    delete_markers: Vec<XmlVersion>,
}

/// One page of `ListObjectsV2`: only the keys (the completeness check reads nothing else).
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ListV2Page {
    #[serde(rename = "Contents", default)]
    contents: Vec<ListV2Key>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ListV2Key {
    key: String,
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct XmlVersion {
    key: String,
    version_id: String,
    #[serde(default)]
    is_latest: bool,
    #[serde(default)]
    size: u64,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct DeleteResult {
    #[serde(rename = "Deleted", default)]
    deleted: Vec<XmlDeleted>,
    #[serde(rename = "Error", default)]
    errors: Vec<XmlDeleteError>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct XmlDeleted {
    key: String,
    version_id: Option<String>,
    delete_marker: Option<bool>,
    delete_marker_version_id: Option<String>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct XmlDeleteError {
    key: String,
    version_id: Option<String>,
    code: Option<String>,
    message: Option<String>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct XmlError {
    code: Option<String>,
    message: Option<String>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct VersioningConfiguration {
    status: Option<String>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ObjectLockConfiguration {
    object_lock_enabled: Option<String>,
}

/// `GetBucketLifecycleConfiguration`'s answer. Every element S3 defines for a rule is named here and any other is
/// an error (`deny_unknown_fields`): a rule lakedrill does not understand must make the configuration unknown, never
/// read as no rule.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct LifecycleConfiguration {
    #[serde(rename = "Rule", default)]
    rules: Vec<XmlRule>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
struct XmlRule {
    #[serde(rename = "ID")]
    id: Option<String>,
    status: Option<String>,
    /// The rule's prefix as the first lifecycle API wrote it (outside any `Filter`).
    prefix: Option<String>,
    filter: Option<XmlFilter>,
    expiration: Option<XmlExpiration>,
    noncurrent_version_expiration: Option<XmlNoncurrentExpiration>,
    #[serde(rename = "Transition", default)]
    transitions: Vec<XmlTransition>,
    #[serde(rename = "NoncurrentVersionTransition", default)]
    noncurrent_transitions: Vec<XmlTransition>,
    // Known, so that `deny_unknown_fields` accepts it; it does not shorten or lengthen a hold.
    #[allow(dead_code)]
    abort_incomplete_multipart_upload: Option<serde::de::IgnoredAny>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
struct XmlFilter {
    prefix: Option<String>,
    #[serde(rename = "Tag", default)]
    tags: Vec<serde::de::IgnoredAny>,
    object_size_greater_than: Option<u64>,
    object_size_less_than: Option<u64>,
    and: Option<Box<XmlFilter>>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
struct XmlExpiration {
    days: Option<u32>,
    date: Option<String>,
    // Known, so that `deny_unknown_fields` accepts it; it does not shorten or lengthen a hold.
    #[allow(dead_code)]
    expired_object_delete_marker: Option<serde::de::IgnoredAny>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
struct XmlNoncurrentExpiration {
    noncurrent_days: Option<u32>,
    // Known, so that `deny_unknown_fields` accepts it; it does not shorten or lengthen a hold.
    #[allow(dead_code)]
    newer_noncurrent_versions: Option<serde::de::IgnoredAny>,
}

/// A `Transition` or `NoncurrentVersionTransition`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
struct XmlTransition {
    days: Option<u32>,
    noncurrent_days: Option<u32>,
    date: Option<String>,
    storage_class: Option<String>,
    // Known, so that `deny_unknown_fields` accepts it; it does not shorten or lengthen a hold.
    #[allow(dead_code)]
    newer_noncurrent_versions: Option<serde::de::IgnoredAny>,
}

/// How lakedrill holds an object a lifecycle rule may end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// A version behind a delete marker (non-current from the marker on).
    BehindMarker,
    /// A current object (a write-once copy).
    Current,
}

/// A move to another storage class by a lifecycle rule.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LifecycleTransition {
    /// Days after the object was written (current) or became non-current.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub days: Option<u32>,
    /// The date of a date-based transition, as the bucket wrote it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    /// The storage class the objects move to.
    pub storage_class: String,
}

/// One enabled rule of a bucket's lifecycle configuration, as far as it ends or archives what lakedrill holds.
/// Its filter is kept as far as lakedrill can evaluate it without reading the objects: the prefix and the size
/// bounds narrow it, tags do not (a rule filtered by tags is taken to apply to every object under its prefix, since
/// an object's tags can change).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LifecycleRule {
    /// The rule's `ID` (empty when the bucket gave it none).
    pub rule_id: String,
    /// The key prefix the rule applies to (empty: the whole bucket).
    pub prefix: String,
    /// `ObjectSizeGreaterThan`: the rule applies only to larger objects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_greater_than: Option<u64>,
    /// `ObjectSizeLessThan`: the rule applies only to smaller objects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_less_than: Option<u64>,
    /// The rule also filters by tags (not evaluated: it is taken to apply).
    pub tag_filtered: bool,
    /// `NoncurrentVersionExpiration`: a version is removed this many days after it became non-current (0 when the
    /// rule names no number of days).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noncurrent_days: Option<u32>,
    /// `Expiration` `Days`: a current object expires this many days after it was written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expiration_days: Option<u32>,
    /// `Expiration` `Date`: current objects expire from this date on (as the bucket wrote it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expiration_date: Option<String>,
    /// `NoncurrentVersionTransition`s: non-current versions move to another storage class.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub noncurrent_transitions: Vec<LifecycleTransition>,
    /// `Transition`s: current objects move to another storage class.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub transitions: Vec<LifecycleTransition>,
}

impl LifecycleRule {
    /// Whether the rule may act on the object at `key` (in the bucket) of `size` bytes.
    #[must_use]
    pub fn may_apply(&self, key: &str, size: u64) -> bool {
        key.starts_with(&self.prefix)
            && self.size_greater_than.is_none_or(|n| size > n)
            && self.size_less_than.is_none_or(|n| size < n)
    }

    /// The earliest moment the rule removes an object held as `held` since `since` (the marker written, or the copy
    /// written); `None` when it never does. S3 counts whole days and rounds up to the next midnight UTC, so this is
    /// a lower bound. A date that does not parse counts as `since`. A number of days whose end is past the last
    /// time chrono represents (year 262143; `Days` may be up to 2³²−1) never comes: such a rule ends no hold (and
    /// this is no panic on a bucket's crafted answer).
    #[must_use]
    pub fn removes_at(&self, held: Held, since: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let days = |d: u32| after_days(since, d);
        match held {
            Held::BehindMarker => self.noncurrent_days.and_then(days),
            Held::Current => {
                let by_date = self
                    .expiration_date
                    .as_deref()
                    .map(|d| DateTime::parse_from_rfc3339(d).map_or(since, |t| t.with_timezone(&Utc).max(since)));
                [self.expiration_days.and_then(days), by_date]
                    .into_iter()
                    .flatten()
                    .min()
            }
        }
    }

    /// The earliest move of an object held as `held` since `since` to another storage class, with the class. A
    /// transition whose number of days ends past the last representable time never comes (as in [`Self::removes_at`]).
    #[must_use]
    pub fn archives_at(&self, held: Held, since: DateTime<Utc>) -> Option<(DateTime<Utc>, &str)> {
        let list = match held {
            Held::BehindMarker => &self.noncurrent_transitions,
            Held::Current => &self.transitions,
        };
        list.iter()
            .filter_map(|t| {
                let at = match (t.days, t.date.as_deref()) {
                    (Some(d), _) => after_days(since, d)?,
                    (None, Some(d)) => {
                        DateTime::parse_from_rfc3339(d).map_or(since, |x| x.with_timezone(&Utc).max(since))
                    }
                    (None, None) => since,
                };
                Some((at, t.storage_class.as_str()))
            })
            .min_by_key(|(at, _)| *at)
    }

    /// The rule's name for messages: its ID, or `(no ID)`.
    #[must_use]
    pub fn name(&self) -> &str {
        if self.rule_id.is_empty() {
            "(no ID)"
        } else {
            &self.rule_id
        }
    }
}

/// `days` days after `since`; `None` when that lies past the last time chrono represents (year 262143): a
/// lifecycle rule's `Days` is any 32-bit number, and `DateTime + Duration` panics past that end. Such a rule acts
/// later than any time lakedrill can name, which for a hold means never before its purge: treating it as "never"
/// ends no hold sooner than it would.
fn after_days(since: DateTime<Utc>, days: u32) -> Option<DateTime<Utc>> {
    since.checked_add_signed(chrono::TimeDelta::try_days(i64::from(days))?)
}

/// What a lifecycle rule does to held objects, found by [`soonest`].
#[derive(Debug, Clone)]
pub struct LifecycleEnd<'a> {
    /// The rule.
    pub rule: &'a LifecycleRule,
    /// When it acts at the earliest.
    pub at: DateTime<Utc>,
    /// How many of the objects it may act on.
    pub objects: usize,
    /// The first of them (its URI).
    pub first: String,
    /// The storage class it moves them to (`None`: it removes them).
    pub storage_class: Option<&'a str>,
}

/// Of `rules`, the one that acts soonest on one of `objects` (each its `s3://bucket/key` URI and size) held as
/// `held` since `since`: by removing them (`archive` false) or by moving them to another storage class (`archive`
/// true).
#[must_use]
pub fn soonest<'a, 'o>(
    rules: &'a [LifecycleRule],
    held: Held,
    since: DateTime<Utc>,
    archive: bool,
    objects: impl IntoIterator<Item = (&'o str, u64)> + Clone,
) -> Option<LifecycleEnd<'a>> {
    let key = |uri: &'o str| bucket_and_key(uri).map_or(uri, |(_, k)| k);
    rules
        .iter()
        .filter_map(|r| {
            let (at, storage_class) = if archive {
                let (at, c) = r.archives_at(held, since)?;
                (at, Some(c))
            } else {
                (r.removes_at(held, since)?, None)
            };
            let mut hits = objects
                .clone()
                .into_iter()
                .filter(|(uri, size)| r.may_apply(key(uri), *size));
            let first = hits.next()?.0.to_owned();
            Some(LifecycleEnd {
                rule: r,
                at,
                objects: 1 + hits.count(),
                first,
                storage_class,
            })
        })
        .min_by_key(|e| e.at)
}

/// The enabled rules of a lifecycle configuration (every status but `Disabled` counts as enabled), each reduced to
/// what ends or archives held objects; rules that do neither are left out.
fn lifecycle_rules(c: LifecycleConfiguration) -> Vec<LifecycleRule> {
    let transitions = |list: Vec<XmlTransition>| -> Vec<LifecycleTransition> {
        list.into_iter()
            .map(|t| LifecycleTransition {
                days: t.days.or(t.noncurrent_days),
                date: t.date,
                storage_class: t.storage_class.unwrap_or_default(),
            })
            .collect()
    };
    c.rules
        .into_iter()
        .filter(|r| r.status.as_deref() != Some("Disabled"))
        .filter_map(|r| {
            let f = r.filter.unwrap_or_default();
            let inner = f.and.as_deref();
            let rule = LifecycleRule {
                rule_id: r.id.unwrap_or_default(),
                prefix: f
                    .prefix
                    .clone()
                    .or_else(|| inner.and_then(|a| a.prefix.clone()))
                    .or(r.prefix)
                    .unwrap_or_default(),
                size_greater_than: f
                    .object_size_greater_than
                    .or(inner.and_then(|a| a.object_size_greater_than)),
                size_less_than: f.object_size_less_than.or(inner.and_then(|a| a.object_size_less_than)),
                tag_filtered: !f.tags.is_empty() || inner.is_some_and(|a| !a.tags.is_empty()),
                noncurrent_days: r.noncurrent_version_expiration.map(|n| n.noncurrent_days.unwrap_or(0)),
                expiration_days: r.expiration.as_ref().and_then(|e| e.days),
                expiration_date: r.expiration.and_then(|e| e.date),
                noncurrent_transitions: transitions(r.noncurrent_transitions),
                transitions: transitions(r.transitions),
            };
            let acts = rule.noncurrent_days.is_some()
                || rule.expiration_days.is_some()
                || rule.expiration_date.is_some()
                || !rule.noncurrent_transitions.is_empty()
                || !rule.transitions.is_empty();
            acts.then_some(rule)
        })
        .collect()
}

/// Reads a lifecycle configuration: the document's root must be `LifecycleConfiguration` (serde does not check a
/// root's name, and another document read as one would have no rules) and every element known.
fn parse_lifecycle(body: &[u8]) -> std::result::Result<Vec<LifecycleRule>, String> {
    let mut reader = quick_xml::Reader::from_reader(body);
    let mut buf = Vec::new();
    loop {
        match reader.read_event_into(&mut buf) {
            Ok(quick_xml::events::Event::Start(e) | quick_xml::events::Event::Empty(e)) => {
                let name = e.local_name();
                if name.as_ref() != b"LifecycleConfiguration" {
                    return Err(format!(
                        "the answer is a <{}> document, not a LifecycleConfiguration",
                        String::from_utf8_lossy(name.as_ref())
                    ));
                }
                break;
            }
            Ok(quick_xml::events::Event::Eof) => return Err("the answer is empty".into()),
            Ok(_) => buf.clear(),
            Err(e) => return Err(format!("unreadable answer: {e}")),
        }
    }
    let c: LifecycleConfiguration =
        quick_xml::de::from_reader(body).map_err(|e| format!("unreadable or unknown rule element: {e}"))?;
    Ok(lifecycle_rules(c))
}

/// How a delete was sent (receipts name it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeleteMethod {
    /// S3 `DeleteObjects` (a batch, each key with its expected ETag and, in permanent mode, version id).
    S3DeleteObjects,
    /// S3 `DeleteObject` with `If-Match` (and `versionId` in permanent mode): one key.
    S3DeleteObjectIfMatch,
    /// S3 `DeleteObject` of one version (`versionId`), without an ETag condition (none was recorded).
    S3DeleteVersion,
    /// An unconditional object_store delete (local filesystem, memory, or an S3 object without any recorded
    /// ETag): only after a HEAD showed the recorded size.
    Unconditional,
}

/// The body of a `DeleteObjects` request, not quiet (the provider answers for every key): each key with its
/// version id and expected ETag, when given.
fn delete_objects_body<'a>(objects: impl IntoIterator<Item = (&'a str, Option<&'a str>, Option<&'a str>)>) -> Bytes {
    let mut xml = String::from(
        r#"<?xml version="1.0" encoding="UTF-8"?><Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Quiet>false</Quiet>"#,
    );
    for (key, version_id, e_tag) in objects {
        xml.push_str("<Object><Key>");
        xml.push_str(&quick_xml::escape::escape(key));
        xml.push_str("</Key>");
        if let Some(v) = version_id {
            xml.push_str("<VersionId>");
            xml.push_str(&quick_xml::escape::escape(v));
            xml.push_str("</VersionId>");
        }
        if let Some(e) = e_tag {
            xml.push_str("<ETag>");
            xml.push_str(&quick_xml::escape::escape(e));
            xml.push_str("</ETag>");
        }
        xml.push_str("</Object>");
    }
    xml.push_str("</Delete>");
    Bytes::from(xml)
}

/// What [`crate::io::store::Storage::s3_delete_conditions`] found: whether the provider spared an object whose
/// ETag differs from the one a delete named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct DeleteConditions {
    /// `DeleteObjects` with a per-key `<ETag>` (true also where the request is not implemented).
    pub delete_objects: bool,
    /// `DeleteObject` with `If-Match`.
    pub if_match: bool,
}

impl DeleteConditions {
    /// Whether both ways of deleting honour the condition.
    #[must_use]
    pub fn honoured(&self) -> bool {
        self.delete_objects && self.if_match
    }
}

/// One key of a delete request: the object and what it must still be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteKey {
    /// The object's canonical `s3://` URI.
    pub uri: String,
    /// The ETag it must still have (`If-Match`); the provider refuses the key otherwise.
    pub e_tag: Option<String>,
    /// The exact version to remove for good (permanent mode); `None` writes a delete marker on a versioned bucket.
    pub version_id: Option<String>,
}

/// What the provider answered for one key, in its own words.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeleteAnswer {
    /// How the request was sent.
    pub method: DeleteMethod,
    /// The provider reported the key deleted.
    pub deleted: bool,
    /// The HTTP status of the request that carried the key (`None` off S3).
    pub http_status: Option<u16>,
    /// The provider's error code for the key (`PreconditionFailed`, `NoSuchKey`, `AccessDenied`, …).
    pub code: Option<String>,
    /// The provider's error message.
    pub message: Option<String>,
    /// `DeleteMarker` as the provider returned it (absent when it did not say).
    pub delete_marker: Option<bool>,
    /// `DeleteMarkerVersionId`: the version id of the marker it wrote.
    pub delete_marker_version_id: Option<String>,
    /// `VersionId`: the version the provider says it deleted (permanent mode, or the marker on a single delete).
    pub version_id: Option<String>,
    /// `x-amz-request-id` of the request.
    pub request_id: Option<String>,
}

impl DeleteAnswer {
    /// The provider refused the key because its ETag no longer matches: the object changed.
    #[must_use]
    pub fn precondition_failed(&self) -> bool {
        self.http_status == Some(412) || self.code.as_deref() == Some("PreconditionFailed")
    }
}

/// An object's Object Lock state, as the provider reports it on HEAD.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ObjectLock {
    /// `GOVERNANCE` or `COMPLIANCE`; `None` when the object carries no retention.
    pub mode: Option<String>,
    /// Retain-until date (RFC 3339 as the provider wrote it).
    pub retain_until: Option<String>,
    /// `ON` when a legal hold is set.
    pub legal_hold: Option<String>,
}

/// The answer of one presigned request.
struct Answer {
    status: u16,
    headers: HeaderMap,
    body: Bytes,
}

impl Answer {
    fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(ToOwned::to_owned)
    }

    fn error(&self) -> XmlError {
        quick_xml::de::from_reader(self.body.as_ref()).unwrap_or_default()
    }

    fn describe(&self) -> String {
        format!("HTTP {}: {}", self.status, String::from_utf8_lossy(&self.body))
    }
}

/// How long one presigned S3 request (a conditional or batch delete, a version listing) may take, answer
/// included, unless `[storage.s3] timeout` says otherwise.
pub const PRESIGNED_TIMEOUT: Duration = Duration::from_secs(120);

/// The most bytes read of one presigned S3 request's answer: a `DeleteObjects` answer of 1,000 keys of 1 KiB, a page
/// of 1,000 versions or a bucket's lifecycle rules hold a few MiB at most. A provider (or a gateway) answering more —
/// an object's bytes after a redirect, say — is an error naming the request, never read whole.
pub const MAX_S3_ANSWER_BYTES: usize = 16 << 20;

/// How long connecting for a presigned S3 request may take, unless `[storage.s3] connect_timeout` says otherwise.
pub const PRESIGNED_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// `30`, `30s` or `2m` as a duration; `None` for anything else.
fn parse_seconds(v: &str) -> Option<Duration> {
    let v = v.trim();
    let (n, unit) = match v.strip_suffix('m') {
        Some(n) => (n, 60),
        None => (v.strip_suffix('s').unwrap_or(v), 1),
    };
    n.trim()
        .parse::<u64>()
        .ok()
        .filter(|n| *n > 0)
        .map(|n| Duration::from_secs(n * unit))
}

fn s3_error(op: &'static str, uri: &str, reason: String) -> Error {
    Error::Storage {
        op,
        uri: uri.to_owned(),
        source: Box::new(object_store::Error::Generic {
            store: "S3",
            source: reason.into(),
        }),
    }
}

fn header(name: &'static str, value: &str, uri: &str) -> Result<(HeaderName, HeaderValue)> {
    let v = HeaderValue::from_str(value).map_err(|e| Error::invalid(uri, format!("header {name}: {e}")))?;
    Ok((HeaderName::from_static(name), v))
}

fn content_md5(body: &[u8]) -> String {
    use base64::Engine as _;
    use md5::Digest as _;
    base64::engine::general_purpose::STANDARD.encode(md5::Md5::digest(body))
}

/// The answer for a key the fault layer refused before sending (`drill faults`).
fn injected_refusal(method: DeleteMethod) -> DeleteAnswer {
    DeleteAnswer {
        method,
        deleted: false,
        http_status: Some(503),
        code: Some("ServiceUnavailable".into()),
        message: Some("injected 503 Service Unavailable by the fault layer (nothing was deleted)".into()),
        delete_marker: None,
        delete_marker_version_id: None,
        version_id: None,
        request_id: None,
    }
}

impl Storage {
    /// The fault for the next key deleted around object_store (always none outside `drill faults`).
    fn key_fault(&self) -> KeyFault {
        self.faults.as_ref().map_or(KeyFault::None, |f| f.next_delete())
    }

    /// With a lagging-replica fault, reads `uri` before its delete so the fault layer can keep serving it.
    async fn stale_copy(&self, uri: &str) -> Option<(Path, object_store::ObjectMeta, Option<Bytes>)> {
        self.faults.as_ref().filter(|f| f.lagging())?;
        let (_, path) = self.resolve(uri).ok()?;
        let got = self.get(uri).await.ok()?;
        let meta = object_store::ObjectMeta {
            location: path.clone(),
            last_modified: got.info.last_modified,
            size: got.info.size,
            e_tag: got.info.e_tag,
            version: got.info.version,
        };
        Some((path, meta, Some(got.bytes)))
    }

    fn remember_deleted(&self, copy: Option<(Path, object_store::ObjectMeta, Option<Bytes>)>) {
        if let (Some(f), Some((p, meta, bytes))) = (&self.faults, copy) {
            f.remember_deleted(p, meta, bytes);
        }
    }

    /// The concrete S3 client and key of an `s3://` URI (for the requests object_store lacks).
    fn s3_client(&self, uri: &str) -> Result<(Arc<object_store::aws::AmazonS3>, Path)> {
        let (_, path) = self.resolve(uri)?;
        let (bucket, _) =
            bucket_and_key(uri).ok_or_else(|| Error::invalid(uri, "this S3 request needs an s3:// object"))?;
        let m = self
            .s3
            .lock()
            .map_err(|_| Error::Internal("S3 client cache poisoned".into()))?;
        let c = m
            .get(&format!("s3://{bucket}"))
            .cloned()
            .ok_or_else(|| Error::Internal(format!("no S3 client for {uri}")))?;
        Ok((c, path))
    }

    /// Sends one presigned request: object_store signs the method, path, query and `signed` headers with the
    /// store's own credentials; the body is sent as is (presigned requests carry `UNSIGNED-PAYLOAD`, which is
    /// why bodies S3 checks carry a signed `Content-MD5`).
    async fn s3_send(
        &self,
        uri: &str,
        method: http::Method,
        path: &Path,
        query: Vec<(String, String)>,
        signed: Vec<(HeaderName, HeaderValue)>,
        body: Option<Bytes>,
    ) -> Result<Answer> {
        let req = self.s3_request(uri, method, path, query, signed, body).await?;
        self.s3_dispatch(uri, req).await
    }

    /// The presigned request [`Storage::s3_send`] sends, made and signed but not sent: an error here is raised
    /// before any byte of the request goes out.
    async fn s3_request(
        &self,
        uri: &str,
        method: http::Method,
        path: &Path,
        query: Vec<(String, String)>,
        signed: Vec<(HeaderName, HeaderValue)>,
        body: Option<Bytes>,
    ) -> Result<reqwest::RequestBuilder> {
        use object_store::signer::Signer;
        let (client, _) = self.s3_client(uri)?;
        let mut opts = object_store::signer::SignedUrlOptions::new().with_query(query);
        for (k, v) in &signed {
            opts = opts.with_signed_header(k.clone(), v.clone());
        }
        let url = client
            .signed_url_opts(method.clone(), path, Duration::from_secs(300), &opts)
            .await
            .map_err(|e| super::map_err("sign", uri, e))?;
        let mut req = self.presign_client(uri)?.request(method, url);
        for (k, v) in signed {
            req = req.header(k, v);
        }
        if let Some(b) = body {
            req = req.body(b);
        }
        Ok(req)
    }

    /// Sends a request [`Storage::s3_request`] made, under the storage's request limit, and reads its answer.
    async fn s3_dispatch(&self, uri: &str, req: reqwest::RequestBuilder) -> Result<Answer> {
        let _permit = self.permit().await?;
        let resp = req
            .send()
            .await
            .map_err(|e| s3_error("S3 request", uri, e.to_string()))?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let mut resp = resp;
        let mut body = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| s3_error("S3 request", uri, e.to_string()))?
        {
            if body.len() + chunk.len() > MAX_S3_ANSWER_BYTES {
                return Err(s3_error(
                    "S3 request",
                    uri,
                    format!(
                        "the answer (HTTP {status}) is over {MAX_S3_ANSWER_BYTES} bytes, more than any S3 control answer \
                         (a delete, a version listing, a bucket setting) holds: it is not read further"
                    ),
                ));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Answer {
            status,
            headers,
            body: Bytes::from(body),
        })
    }

    /// The HTTP client of the presigned requests (no redirect followed), built on first use with the S3 settings' `timeout` and
    /// `connect_timeout` (object_store's own client reads the same keys), else [`PRESIGNED_TIMEOUT`] and
    /// [`PRESIGNED_CONNECT_TIMEOUT`]. A purge sends its deletes while it holds the registry's write lock: a request
    /// that never answers must end (as "no answer": the objects go to `DELETE_UNKNOWN`) before the lock's waiters
    /// — `hold set`, `deleter stop` — give up.
    fn presign_client(&self, uri: &str) -> Result<&reqwest::Client> {
        if let Some(c) = self.http.get() {
            return Ok(c);
        }
        let setting = |key: &str, default: Duration| -> Result<Duration> {
            match self.options.s3.get(key) {
                None => Ok(default),
                Some(v) => parse_seconds(v).ok_or_else(|| {
                    Error::invalid(
                        format!("storage.s3.{key}"),
                        format!("{v:?}: give whole seconds (\"30s\", \"2m\" or \"30\") for the presigned S3 requests"),
                    )
                }),
            }
        };
        // Redirects are answers, never followed: a client following a `303` to a DELETE or a `DeleteObjects` POST
        // sends a GET of the same URL, whose `200` (the object's bytes) read as "deleted" (review V3).
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(setting("timeout", PRESIGNED_TIMEOUT)?)
            .connect_timeout(setting("connect_timeout", PRESIGNED_CONNECT_TIMEOUT)?)
            .build()
            .map_err(|e| s3_error("build the HTTP client for", uri, e.to_string()))?;
        Ok(self.http.get_or_init(|| client))
    }

    /// One setting of the bucket of `uri` (`GET /?versioning`, `?lifecycle`, `?object-lock`), answered as the provider
    /// said it.
    async fn s3_bucket_setting(&self, uri: &str, setting: &str) -> Result<Answer> {
        self.s3_send(
            uri,
            http::Method::GET,
            &Path::from(""),
            vec![(setting.to_owned(), String::new())],
            vec![],
            None,
        )
        .await
    }

    /// Every version and delete marker of one S3 object, newest first as S3 lists them.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a non-S3 URI; [`Error::Storage`] when S3 refuses or answers garbage.
    pub async fn s3_versions(&self, uri: &str) -> Result<Vec<ObjectVersion>> {
        let (_, key) = self.s3_client(uri)?;
        let mut out = Vec::new();
        let mut markers: Option<(String, String)> = None;
        let mut seen = std::collections::HashSet::new();
        loop {
            let mut q = vec![
                ("versions".to_owned(), String::new()),
                ("prefix".to_owned(), key.to_string()),
            ];
            if let Some((k, v)) = &markers {
                q.push(("key-marker".into(), k.clone()));
                q.push(("version-id-marker".into(), v.clone()));
            }
            let a = self
                .s3_send(uri, http::Method::GET, &Path::from(""), q, vec![], None)
                .await?;
            if a.status != 200 {
                return Err(s3_error("list versions", uri, a.describe()));
            }
            let page: ListVersionsResult = quick_xml::de::from_reader(a.body.as_ref())
                .map_err(|e| s3_error("list versions", uri, format!("unreadable answer: {e}")))?;
            let k = key.to_string();
            out.extend(page.versions.into_iter().filter(|v| v.key == k).map(|v| ObjectVersion {
                version_id: v.version_id,
                is_latest: v.is_latest,
                is_delete_marker: false,
                size: v.size,
            }));
            out.extend(
                page.delete_markers
                    .into_iter()
                    .filter(|v| v.key == k)
                    .map(|v| ObjectVersion {
                        version_id: v.version_id,
                        is_latest: v.is_latest,
                        is_delete_marker: true,
                        size: 0,
                    }),
            );
            match (page.is_truncated, page.next_key_marker, page.next_version_id_marker) {
                (false, _, _) => break,
                (true, Some(k), Some(v)) => {
                    // A provider repeating its markers (at once or after others) would be listed for ever; one
                    // that gives none has cut the listing short. Either way the versions seen are not all of them.
                    if !seen.insert((k.clone(), v.clone())) {
                        return Err(s3_error(
                            "list versions",
                            uri,
                            format!("the answer repeated its markers (key {k}, version {v}): the listing cannot end"),
                        ));
                    }
                    markers = Some((k, v));
                }
                (true, _, _) => {
                    return Err(s3_error(
                        "list versions",
                        uri,
                        "the answer says the listing is truncated but names no next key and version marker: the \
                         versions after it cannot be listed"
                            .to_owned(),
                    ));
                }
            }
        }
        Ok(out)
    }

    /// Whether listings under `uri` are S3's and checked for completeness ([`Storage::s3_first_key_after`]): an
    /// `s3://` URI on a storage without a fault layer (`drill faults` plays its own store).
    pub(super) fn s3_listing_checked(&self, uri: &str) -> bool {
        bucket_and_key(uri).is_some() && self.layer.is_none()
    }

    /// The error for an S3 listing that yielded `key` after `last` (pages repeated or went back).
    pub(super) fn s3_listing_went_back(prefix_uri: &str, last: &str, key: &str) -> Error {
        s3_error(
            "list",
            prefix_uri,
            format!(
                "the provider listed {key} after {last}: its pages repeat or go back, so the listing cannot be \
                 trusted to be complete"
            ),
        )
    }

    /// Checks that a listing of `prefix_uri` (keys under `listed_prefix`) that ended at `last` left nothing
    /// beyond it.
    ///
    /// # Errors
    /// [`Error::Storage`] naming the prefix and the first key beyond, or when the check cannot be made.
    pub(super) async fn s3_listing_reached_its_end(
        &self,
        prefix_uri: &str,
        listed_prefix: &str,
        last: Option<&str>,
    ) -> Result<()> {
        match self.s3_first_key_after(prefix_uri, listed_prefix, last).await? {
            None => Ok(()),
            Some(beyond) => Err(s3_error(
                "list",
                prefix_uri,
                format!(
                    "the listing ended {} but the bucket holds {beyond} after it: the provider cut the listing \
                     short (a page marked truncated without a continuation token), so nothing can be concluded \
                     from what it did not list",
                    last.map_or_else(|| "before its first key".to_owned(), |l| format!("at {l}"))
                ),
            )),
        }
    }

    /// The first key after `after` (or the first key, with `None`) among the keys of the bucket of `uri` that
    /// start with `prefix`, asked with one `ListObjectsV2` request of one key: the check that a listing
    /// object_store ended really reached the end. (object_store ends an S3 listing at the first page without a
    /// continuation token and never reads `IsTruncated`: a provider that answers a truncated page without a
    /// token, as ListObjects V1 providers do, cuts every listing at its first page, silently.)
    ///
    /// # Errors
    /// [`Error::Storage`] when S3 refuses or answers garbage.
    pub(super) async fn s3_first_key_after(
        &self,
        uri: &str,
        prefix: &str,
        after: Option<&str>,
    ) -> Result<Option<String>> {
        let mut q = vec![
            ("list-type".to_owned(), "2".to_owned()),
            ("max-keys".to_owned(), "1".to_owned()),
            ("prefix".to_owned(), prefix.to_owned()),
        ];
        if let Some(a) = after {
            q.push(("start-after".to_owned(), a.to_owned()));
        }
        let a = self
            .s3_send(uri, http::Method::GET, &Path::from(""), q, vec![], None)
            .await?;
        if a.status != 200 {
            return Err(s3_error("check the listing reached its end", uri, a.describe()));
        }
        let page: ListV2Page = quick_xml::de::from_reader(a.body.as_ref()).map_err(|e| {
            s3_error(
                "check the listing reached its end",
                uri,
                format!("unreadable answer: {e}"),
            )
        })?;
        match page.contents.into_iter().next() {
            None => Ok(None),
            Some(k) if k.key.starts_with(prefix) && after.is_none_or(|a| k.key.as_str() > a) => Ok(Some(k.key)),
            // A provider that ignores `start-after` or `prefix` cannot say whether the listing was complete.
            Some(k) => Err(s3_error(
                "check the listing reached its end",
                uri,
                format!(
                    "asked for the first key after {:?} under {prefix:?}, the provider answered {:?}: it ignores \
                     start-after or prefix, so whether its listings are complete cannot be checked",
                    after.unwrap_or_default(),
                    k.key
                ),
            )),
        }
    }

    /// Deletes one version (or delete marker) of an S3 object for good (`undelete` removing a marker).
    ///
    /// # Errors
    /// [`Error::Storage`] when S3 does not confirm with 204/200.
    pub async fn s3_delete_version(&self, uri: &str, version_id: &str) -> Result<()> {
        let (_, key) = self.s3_client(uri)?;
        let q = vec![("versionId".to_owned(), version_id.to_owned())];
        let a = self.s3_send(uri, http::Method::DELETE, &key, q, vec![], None).await?;
        if a.status == 204 || a.status == 200 {
            Ok(())
        } else {
            Err(s3_error(
                "delete version",
                uri,
                format!("deleting version {version_id}: {}", a.describe()),
            ))
        }
    }

    /// The test failpoints before a delete request is sent: a delay, an injected failure (nothing sent).
    pub(super) async fn delete_failpoint_before(&self, uri: &str) -> Result<u64> {
        let n = self.deletes.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        let fp = &self.failpoints;
        if let Some(ms) = fp.delay_ms {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        if fp.error_every.is_some_and(|k| n.is_multiple_of(k)) {
            return Err(Error::Storage {
                op: "delete",
                uri: uri.to_owned(),
                source: Box::new(object_store::Error::Generic {
                    store: "failpoint",
                    source: "injected 503 Service Unavailable (nothing was deleted)".into(),
                }),
            });
        }
        Ok(n)
    }

    /// The test failpoints after a delete request took effect: a lost response, an abort.
    pub(super) fn delete_failpoint_after(&self, uri: &str, n: u64) -> Result<()> {
        let fp = &self.failpoints;
        if fp.lose_every.is_some_and(|k| n.is_multiple_of(k)) {
            return Err(Error::Storage {
                op: "delete",
                uri: uri.to_owned(),
                source: Box::new(object_store::Error::Generic {
                    store: "failpoint",
                    source: "injected lost response (the delete took effect)".into(),
                }),
            });
        }
        if fp.abort_after.is_some_and(|k| n >= k) {
            eprintln!("lakedrill: failpoint abort-after={n}: aborting the process");
            std::process::abort();
        }
        Ok(())
    }

    /// Deletes one S3 object only if it still has `key.e_tag` (`If-Match`), and in permanent mode exactly
    /// `key.version_id`. Returns the provider's answer whatever it is: a precondition failure (the object
    /// changed) is an answer, not an error.
    ///
    /// # Errors
    /// [`Error::NotSent`] when the request could not be made (its URI, header or signature, or the HTTP client):
    /// nothing was sent; [`Error::Storage`] when no answer came back (the delete may or may not have taken effect).
    pub async fn s3_delete_one(&self, key: &DeleteKey) -> Result<DeleteAnswer> {
        // The request made and signed first: whatever fails up to here failed before anything was sent.
        let req = async {
            let (_, path) = self.s3_client(&key.uri)?;
            let mut q = Vec::new();
            if let Some(v) = &key.version_id {
                q.push(("versionId".to_owned(), v.clone()));
            }
            let mut signed = Vec::new();
            if let Some(e) = &key.e_tag {
                signed.push(header("if-match", e, &key.uri)?);
            }
            self.s3_request(&key.uri, http::Method::DELETE, &path, q, signed, None)
                .await
        }
        .await
        .map_err(|e| Error::not_sent("delete", &key.uri, e))?;
        let method = match (&key.e_tag, &key.version_id) {
            (Some(_), _) => DeleteMethod::S3DeleteObjectIfMatch,
            (None, Some(_)) => DeleteMethod::S3DeleteVersion,
            (None, None) => DeleteMethod::Unconditional,
        };
        let fault = self.key_fault();
        if fault == KeyFault::Refuse {
            return Ok(injected_refusal(method));
        }
        let copy = self.stale_copy(&key.uri).await;
        let n = self.delete_failpoint_before(&key.uri).await?;
        self.requests
            .single_deletes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let a = self.s3_dispatch(&key.uri, req).await?;
        self.delete_failpoint_after(&key.uri, n)?;
        let deleted = a.status == 204 || a.status == 200;
        if deleted {
            self.remember_deleted(copy);
        }
        if fault == KeyFault::LoseAnswer {
            return Err(s3_error(
                "delete",
                &key.uri,
                "injected lost response by the fault layer (the delete took effect)".into(),
            ));
        }
        let err = if deleted { XmlError::default() } else { a.error() };
        Ok(DeleteAnswer {
            method,
            deleted,
            http_status: Some(a.status),
            code: err.code.or_else(|| (!deleted).then(|| format!("HTTP {}", a.status))),
            message: err.message,
            delete_marker: a.header("x-amz-delete-marker").map(|v| v == "true"),
            delete_marker_version_id: None,
            version_id: a.header("x-amz-version-id"),
            request_id: a.header("x-amz-request-id"),
        })
    }

    /// One `DeleteObjects` request over at most [`MAX_DELETE_OBJECTS_KEYS`] keys of one bucket, each with its
    /// expected ETag and (permanent mode) version id, not quiet: the provider answers for every key. Returns
    /// each key's answer by URI; a key the provider did not mention is absent from the map (the caller treats
    /// it as uncertain). `Ok(None)`: the provider does not implement `DeleteObjects` (HTTP 501 or
    /// `NotImplemented`); nothing was deleted and the caller falls back to single conditional deletes.
    ///
    /// # Errors
    /// [`Error::NotSent`] when the request failed before it was sent (keys of different buckets or too many keys,
    /// a key or signature that cannot be made: none of its keys was deleted); [`Error::Storage`] when the request
    /// failed or the answer is unreadable (then any of its keys may or may not be deleted).
    pub async fn s3_delete_objects(&self, keys: &[DeleteKey]) -> Result<Option<BTreeMap<String, DeleteAnswer>>> {
        let Some(first) = keys.first() else {
            return Ok(Some(BTreeMap::new()));
        };
        if keys.len() > MAX_DELETE_OBJECTS_KEYS {
            let e = Error::invalid(
                &first.uri,
                format!(
                    "{} keys in one DeleteObjects request (at most {MAX_DELETE_OBJECTS_KEYS})",
                    keys.len()
                ),
            );
            return Err(Error::not_sent("DeleteObjects", &first.uri, e));
        }
        let bucket_of = |u: &str| bucket_and_key(u).map(|(b, _)| b.to_owned());
        let bucket = bucket_of(&first.uri);
        // `drill faults`: keys refused before sending, answers lost after, copies kept by a lagging replica.
        let mut out = BTreeMap::new();
        let mut lost = std::collections::BTreeSet::new();
        let mut copies = BTreeMap::new();
        let mut sending = Vec::with_capacity(keys.len());
        for k in keys {
            match self.key_fault() {
                KeyFault::Refuse => {
                    out.insert(k.uri.clone(), injected_refusal(DeleteMethod::S3DeleteObjects));
                    continue;
                }
                KeyFault::LoseAnswer => {
                    lost.insert(k.uri.clone());
                }
                KeyFault::None => {}
            }
            if let Some(c) = self.stale_copy(&k.uri).await {
                copies.insert(k.uri.clone(), c);
            }
            sending.push(k);
        }
        if sending.is_empty() {
            return Ok(Some(out));
        }
        let keys = sending;
        let first = keys[0];
        let bucket_uri = format!("s3://{}", bucket.clone().unwrap_or_default());
        // The request made and signed first: whatever fails up to here failed before anything was sent.
        let (by_key, req) = async {
            let mut named: Vec<(String, &DeleteKey)> = Vec::with_capacity(keys.len());
            for &k in &keys {
                if bucket_of(&k.uri) != bucket {
                    return Err(Error::invalid(
                        &k.uri,
                        "keys of one DeleteObjects request must share one bucket",
                    ));
                }
                let (_, path) = self.s3_client(&k.uri)?;
                named.push((path.to_string(), k));
            }
            let body = delete_objects_body(
                named
                    .iter()
                    .map(|(key, k)| (key.as_str(), k.version_id.as_deref(), k.e_tag.as_deref())),
            );
            let by_key: BTreeMap<String, &DeleteKey> = named.into_iter().collect();
            let req = self.delete_objects_request(&first.uri, body).await?;
            Ok((by_key, req))
        }
        .await
        .map_err(|e| Error::not_sent("DeleteObjects", &bucket_uri, e))?;
        let n = self.delete_failpoint_before(&bucket_uri).await?;
        self.requests
            .delete_objects
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let a = self.s3_dispatch(&first.uri, req).await?;
        self.delete_failpoint_after(&bucket_uri, n)?;
        if a.status == 501 || (a.status != 200 && a.error().code.as_deref() == Some("NotImplemented")) {
            return Ok(None);
        }
        if a.status != 200 {
            return Err(s3_error("DeleteObjects", &bucket_uri, a.describe()));
        }
        let result: DeleteResult = quick_xml::de::from_reader(a.body.as_ref())
            .map_err(|e| s3_error("DeleteObjects", &bucket_uri, format!("unreadable answer: {e}")))?;
        let request_id = a.header("x-amz-request-id");
        for d in result.deleted {
            if let Some(k) = by_key.get(&d.key) {
                self.remember_deleted(copies.remove(&k.uri));
                out.insert(
                    k.uri.clone(),
                    DeleteAnswer {
                        method: DeleteMethod::S3DeleteObjects,
                        deleted: true,
                        http_status: Some(a.status),
                        code: None,
                        message: None,
                        delete_marker: d.delete_marker,
                        delete_marker_version_id: d.delete_marker_version_id,
                        version_id: d.version_id,
                        request_id: request_id.clone(),
                    },
                );
            }
        }
        for e in result.errors {
            if let Some(k) = by_key.get(&e.key) {
                out.insert(
                    k.uri.clone(),
                    DeleteAnswer {
                        method: DeleteMethod::S3DeleteObjects,
                        deleted: false,
                        http_status: Some(a.status),
                        code: e.code,
                        message: e.message,
                        delete_marker: None,
                        delete_marker_version_id: None,
                        version_id: e.version_id,
                        request_id: request_id.clone(),
                    },
                );
            }
        }
        for l in &lost {
            out.remove(l);
        }
        Ok(Some(out))
    }

    /// Sends one `DeleteObjects` request with `body` ([`delete_objects_body`]) to the bucket of `uri`.
    async fn post_delete_objects(&self, uri: &str, body: Bytes) -> Result<Answer> {
        let req = self.delete_objects_request(uri, body).await?;
        self.s3_dispatch(uri, req).await
    }

    /// The `DeleteObjects` request of [`Storage::post_delete_objects`], made and signed but not sent.
    async fn delete_objects_request(&self, uri: &str, body: Bytes) -> Result<reqwest::RequestBuilder> {
        let signed = vec![
            header("content-md5", &content_md5(&body), uri)?,
            header("content-type", "application/xml", uri)?,
        ];
        self.s3_request(
            uri,
            http::Method::POST,
            &Path::from(""),
            vec![("delete".to_owned(), String::new())],
            signed,
            Some(body),
        )
        .await
    }

    /// Whether the S3 provider behind `probe_uri` honours the ETag condition of a delete, in `DeleteObjects`
    /// (a per-key `<ETag>`) and in `DeleteObject` (`If-Match`). Some do not (moto 5.2.5 deletes a key whose
    /// ETag differs; providers without conditional deletes ignore the header); there the deleter cannot rely on
    /// the request alone to spare an object overwritten since it was sealed. Writes a small object at
    /// `probe_uri`, asks for its delete with a wrong ETag each way, reads whether it is still there, and removes
    /// it (every version and delete marker on a versioned bucket). Sent directly: no failpoint, fault or request
    /// count of the deleter sees it.
    ///
    /// # Errors
    /// [`Error::Storage`] when the provider refuses or does not answer a step (the caller cannot tell, and reads
    /// every object before its delete).
    pub async fn s3_delete_conditions(&self, probe_uri: &str) -> Result<DeleteConditions> {
        const WRONG: &str = "\"00000000000000000000000000000000\"";
        let (_, path) = self.s3_client(probe_uri)?;
        let put = || async {
            let a = self
                .s3_send(
                    probe_uri,
                    http::Method::PUT,
                    &path,
                    vec![],
                    vec![],
                    Some(Bytes::from_static(
                        b"lakedrill: does this store honour a delete's ETag condition?",
                    )),
                )
                .await?;
            if a.status != 200 {
                return Err(s3_error("put the delete-condition probe", probe_uri, a.describe()));
            }
            Ok(())
        };
        let present = || async {
            let a = self
                .s3_send(probe_uri, http::Method::HEAD, &path, vec![], vec![], None)
                .await?;
            match a.status {
                200 => Ok(true),
                404 => Ok(false),
                _ => Err(s3_error("read the delete-condition probe", probe_uri, a.describe())),
            }
        };
        let checked = async {
            put().await?;
            let body = delete_objects_body([(path.as_ref(), None, Some(WRONG))]);
            let a = self.post_delete_objects(probe_uri, body).await?;
            let delete_objects = if a.status == 501 || a.error().code.as_deref() == Some("NotImplemented") {
                // Not implemented: the deleter sends single deletes there.
                true
            } else if a.status == 200 {
                let result: DeleteResult = quick_xml::de::from_reader(a.body.as_ref())
                    .map_err(|e| s3_error("DeleteObjects (probe)", probe_uri, format!("unreadable answer: {e}")))?;
                let said_deleted = result.deleted.iter().any(|d| d.key == path.as_ref());
                !said_deleted && present().await?
            } else {
                return Err(s3_error("DeleteObjects (probe)", probe_uri, a.describe()));
            };
            if !present().await? {
                put().await?;
            }
            let a = self
                .s3_send(
                    probe_uri,
                    http::Method::DELETE,
                    &path,
                    vec![],
                    vec![header("if-match", WRONG, probe_uri)?],
                    None,
                )
                .await?;
            let if_match = !(a.status == 204 || a.status == 200) && present().await?;
            Ok::<_, Error>(DeleteConditions {
                delete_objects,
                if_match,
            })
        }
        .await;
        // Removed whatever the answers were: every version and marker where the bucket keeps them.
        let versions = self.s3_versions(probe_uri).await.unwrap_or_default();
        for v in versions
            .iter()
            .filter(|v| !v.version_id.is_empty() && v.version_id != "null")
        {
            let _ = self.s3_delete_version(probe_uri, &v.version_id).await;
        }
        if present().await.unwrap_or(true) {
            let _ = self
                .s3_send(probe_uri, http::Method::DELETE, &path, vec![], vec![], None)
                .await;
        }
        if self.failpoints.s3_conditions_ignored.is_some() {
            return checked.map(|_| DeleteConditions {
                delete_objects: false,
                if_match: false,
            });
        }
        checked
    }

    /// Whether the bucket of `uri` keeps every version (`GetBucketVersioning` says `Enabled`; a suspended or
    /// never-enabled bucket does not: a plain delete there removes the object for good).
    ///
    /// # Errors
    /// [`Error::Storage`] when the provider does not answer the request.
    pub async fn s3_versioning_enabled(&self, uri: &str) -> Result<bool> {
        let a = self.s3_bucket_setting(uri, "versioning").await?;
        if a.status != 200 {
            return Err(s3_error("get bucket versioning", uri, a.describe()));
        }
        let c: VersioningConfiguration = quick_xml::de::from_reader(a.body.as_ref())
            .map_err(|e| s3_error("get bucket versioning", uri, format!("unreadable answer: {e}")))?;
        Ok(c.status.as_deref() == Some("Enabled"))
    }

    /// The enabled lifecycle rules of the bucket of `uri` that end or archive objects
    /// (`GetBucketLifecycleConfiguration`); empty when the bucket has no lifecycle configuration.
    ///
    /// # Errors
    /// [`Error::Storage`] when the provider answers neither a configuration lakedrill understands whole nor "none
    /// configured" (not implemented, access denied — it needs `s3:GetLifecycleConfiguration` —, another document,
    /// an element it does not know): whether such rules exist is then unknown.
    pub async fn s3_lifecycle_rules(&self, uri: &str) -> Result<Vec<LifecycleRule>> {
        let a = self.s3_bucket_setting(uri, "lifecycle").await?;
        if a.status == 200 {
            return parse_lifecycle(&a.body).map_err(|why| s3_error("get bucket lifecycle configuration", uri, why));
        }
        if a.status == 404 && a.error().code.as_deref() == Some("NoSuchLifecycleConfiguration") {
            return Ok(Vec::new());
        }
        Err(s3_error("get bucket lifecycle configuration", uri, a.describe()))
    }

    /// Whether the bucket of `uri` has Object Lock enabled (`GetObjectLockConfiguration`).
    ///
    /// # Errors
    /// [`Error::Storage`] when the provider answers neither a configuration nor "none configured".
    pub async fn s3_bucket_lock_enabled(&self, uri: &str) -> Result<bool> {
        let a = self.s3_bucket_setting(uri, "object-lock").await?;
        if a.status == 200 {
            let c: ObjectLockConfiguration = quick_xml::de::from_reader(a.body.as_ref()).unwrap_or_default();
            return Ok(c.object_lock_enabled.as_deref() == Some("Enabled"));
        }
        let code = a.error().code.unwrap_or_default();
        if a.status == 404 || code.contains("ObjectLockConfigurationNotFound") {
            return Ok(false);
        }
        Err(s3_error("get object lock configuration", uri, a.describe()))
    }

    /// Writes an object once (`If-None-Match: *`) under Object Lock: `mode` (`GOVERNANCE` or `COMPLIANCE`)
    /// until `retain_until`. The bucket must have Object Lock enabled.
    ///
    /// # Errors
    /// [`Error::AlreadyExists`] when the object exists; [`Error::Storage`] when the provider refuses (a bucket
    /// without Object Lock among the reasons), naming the object.
    pub async fn s3_put_locked(
        &self,
        uri: &str,
        bytes: Bytes,
        mode: &str,
        retain_until: DateTime<Utc>,
    ) -> Result<ObjectInfo> {
        let (_, path) = self.s3_client(uri)?;
        let until = retain_until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let signed = vec![
            header("content-md5", &content_md5(&bytes), uri)?,
            header("if-none-match", "*", uri)?,
            header("x-amz-object-lock-mode", mode, uri)?,
            header("x-amz-object-lock-retain-until-date", &until, uri)?,
        ];
        let size = bytes.len() as u64;
        let a = self
            .s3_send(uri, http::Method::PUT, &path, vec![], signed, Some(bytes))
            .await?;
        if a.status == 412 {
            return Err(Error::AlreadyExists { uri: uri.to_owned() });
        }
        if a.status != 200 {
            return Err(s3_error(
                "write under Object Lock",
                uri,
                format!("{mode} until {until}: {}", a.describe()),
            ));
        }
        Ok(ObjectInfo {
            uri: uri.to_owned(),
            size,
            e_tag: a.header("etag"),
            version: a.header("x-amz-version-id"),
            last_modified: crate::clock::Clock::now(&crate::clock::SystemClock),
        })
    }

    /// An object's Object Lock state (HEAD: `x-amz-object-lock-*`); `None` when the object is absent.
    ///
    /// # Errors
    /// [`Error::Storage`] when the provider answers neither the object nor "not found".
    pub async fn s3_object_lock(&self, uri: &str) -> Result<Option<ObjectLock>> {
        let (_, path) = self.s3_client(uri)?;
        let a = self
            .s3_send(uri, http::Method::HEAD, &path, vec![], vec![], None)
            .await?;
        match a.status {
            200 => Ok(Some(ObjectLock {
                mode: a.header("x-amz-object-lock-mode"),
                retain_until: a.header("x-amz-object-lock-retain-until-date"),
                legal_hold: a.header("x-amz-object-lock-legal-hold"),
            })),
            404 => Ok(None),
            _ => Err(s3_error("read object lock", uri, format!("HTTP {}", a.status))),
        }
    }
}

impl Storage {
    /// One call of the S3 Tables API (`POST /` with `X-Amz-Target: S3Tables.<op>`, a JSON 1.1 body, SigV4 for the
    /// service `s3tables`) at the S3 endpoint of the settings (`[storage.s3]`, `AWS_ENDPOINT_URL`), or
    /// `https://s3tables.<region>.amazonaws.com`, with the S3 credentials. Returns the status and the body.
    ///
    /// # Errors
    /// [`Error::Invalid`] for unusable S3 settings or credentials; [`Error::Storage`] when the endpoint cannot
    /// be reached.
    pub async fn s3tables(&self, op: &str, body: &serde_json::Value) -> Result<(u16, Bytes)> {
        use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey, AwsAuthorizer};
        let what = format!("S3 Tables {op}");
        let bad = |reason: String| Error::invalid(&what, reason);
        let mut builder = AmazonS3Builder::from_env().with_bucket_name("s3tables");
        for (k, v) in &self.options().s3 {
            let cfg: AmazonS3ConfigKey = k
                .parse()
                .map_err(|e: object_store::Error| bad(format!("S3 setting {k}: {e}")))?;
            builder = builder.with_config(cfg, v.clone());
        }
        let region = builder
            .get_config_value(&AmazonS3ConfigKey::Region)
            .unwrap_or_else(|| "us-east-1".to_owned());
        let endpoint = builder
            .get_config_value(&AmazonS3ConfigKey::Endpoint)
            .unwrap_or_else(|| format!("https://s3tables.{region}.amazonaws.com"));
        let client = builder.build().map_err(|e| bad(format!("S3 client: {e}")))?;
        let credential = client
            .credentials()
            .get_credential()
            .await
            .map_err(|e| bad(format!("S3 credentials: {e}")))?;
        let bytes = Bytes::from(serde_json::to_vec(body).map_err(|e| Error::Internal(format!("{what}: {e}")))?);
        let url = format!("{}/", endpoint.trim_end_matches('/'));
        let mut req: object_store::client::HttpRequest = http::Request::builder()
            .method(http::Method::POST)
            .uri(&url)
            .header("x-amz-target", format!("S3Tables.{op}"))
            .header("content-type", "application/x-amz-json-1.1")
            .body(bytes.clone().into())
            .map_err(|e| bad(format!("request to {url}: {e}")))?;
        AwsAuthorizer::new(&credential, "s3tables", &region)
            .try_authorize(&mut req, None)
            .map_err(|e| bad(format!("sign the request to {url}: {e}")))?;
        let mut send = reqwest::Client::new().post(&url);
        for (k, v) in req.headers() {
            send = send.header(k, v);
        }
        let _permit = self.permit().await?;
        let resp = send
            .body(bytes)
            .send()
            .await
            .map_err(|e| s3_error("S3 Tables request", &url, e.to_string()))?;
        let status = resp.status().as_u16();
        let body = resp
            .bytes()
            .await
            .map_err(|e| s3_error("S3 Tables request", &url, e.to_string()))?;
        Ok((status, body))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A delete request that the server takes and never answers ends after `[storage.s3] timeout` as an error
    /// ("no answer": the deleter records the object `DELETE_UNKNOWN`) instead of holding the purge — and the
    /// registry's write lock it sends under — for ever: the client had no timeout at all.
    #[test]
    fn a_delete_the_server_never_answers_ends_at_the_timeout_as_no_answer() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for c in listener.incoming() {
                held.push(c);
            }
        });
        let mut options = crate::config::StorageOptions::default();
        for (k, v) in [
            ("endpoint", format!("http://127.0.0.1:{port}")),
            ("allow_http", "true".into()),
            ("region", "us-east-1".into()),
            ("access_key_id", "k".into()),
            ("secret_access_key", "s".into()),
            ("timeout", "1s".into()),
        ] {
            options.s3.insert(k.into(), v);
        }
        let storage = crate::io::store::Storage::new(options);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let started = std::time::Instant::now();
        let key = DeleteKey {
            uri: "s3://b/t/data/x.parquet".into(),
            e_tag: Some("\"e\"".into()),
            version_id: None,
        };
        let r = rt.block_on(async { tokio::time::timeout(Duration::from_secs(60), storage.s3_delete_one(&key)).await });
        let r = r.expect("the request must end by itself, long before 60 s");
        let e = r.expect_err("no answer is an error");
        assert!(started.elapsed() < Duration::from_secs(30), "{:?}", started.elapsed());
        assert!(
            matches!(e, Error::Storage { .. }) && e.to_string().contains("s3://b/t/data/x.parquet"),
            "{e}"
        );
        // Sent and never answered: it may have taken effect, never "not sent".
        assert!(!e.was_not_sent(), "{e}");
        assert_eq!(parse_seconds("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_seconds("30"), Some(Duration::from_secs(30)));
        assert_eq!(parse_seconds("1 min"), None);
    }

    /// Review of 2026-12-07 (R2-7): a delete whose request could not even be made (here: the presigned requests'
    /// HTTP client, whose `timeout` is not in whole seconds) was an error like a request sent and never answered,
    /// so the deleter recorded it as a delete that may have taken effect. It is now [`Error::NotSent`], and the
    /// server saw no connection at all.
    #[test]
    fn a_delete_that_fails_before_it_is_sent_is_marked_not_sent() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = std::sync::Arc::clone(&seen);
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for c in listener.incoming() {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                held.push(c);
            }
        });
        let mut options = crate::config::StorageOptions::default();
        for (k, v) in [
            ("endpoint", format!("http://127.0.0.1:{port}")),
            ("allow_http", "true".into()),
            ("region", "us-east-1".into()),
            ("access_key_id", "k".into()),
            ("secret_access_key", "s".into()),
            // object_store reads it; the presigned requests' client takes whole seconds only.
            ("timeout", "1500ms".into()),
        ] {
            options.s3.insert(k.into(), v);
        }
        let storage = crate::io::store::Storage::new(options);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let key = DeleteKey {
            uri: "s3://b/t/data/x.parquet".into(),
            e_tag: Some("\"e\"".into()),
            version_id: None,
        };
        let one = rt.block_on(storage.s3_delete_one(&key)).unwrap_err();
        assert!(one.was_not_sent(), "{}", one.with_causes());
        assert!(one.to_string().contains("s3://b/t/data/x.parquet"), "{one}");
        assert!(
            one.with_causes().contains("storage.s3.timeout"),
            "{}",
            one.with_causes()
        );
        let many = rt
            .block_on(storage.s3_delete_objects(std::slice::from_ref(&key)))
            .unwrap_err();
        assert!(many.was_not_sent(), "{}", many.with_causes());
        // A bad key is refused before sending too: keys of two buckets in one request.
        let other = DeleteKey {
            uri: "s3://c/t/data/y.parquet".into(),
            e_tag: None,
            version_id: None,
        };
        let mixed = rt
            .block_on(storage.s3_delete_objects(&[key.clone(), other]))
            .unwrap_err();
        assert!(mixed.was_not_sent(), "{}", mixed.with_causes());
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            seen.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "nothing reached the server"
        );
    }

    #[test]
    fn a_delete_objects_answer_is_read_key_by_key() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Deleted><Key>a/x</Key><DeleteMarker>true</DeleteMarker><DeleteMarkerVersionId>m1</DeleteMarkerVersionId></Deleted><Deleted><Key>a/v</Key><VersionId>v9</VersionId></Deleted><Error><Key>a/y</Key><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did not hold</Message></Error></DeleteResult>"#;
        let r: DeleteResult = quick_xml::de::from_reader(xml.as_bytes()).unwrap();
        assert_eq!(r.deleted.len(), 2);
        assert_eq!(r.deleted[0].key, "a/x");
        assert_eq!(r.deleted[0].delete_marker, Some(true));
        assert_eq!(r.deleted[0].delete_marker_version_id.as_deref(), Some("m1"));
        assert_eq!(r.deleted[1].version_id.as_deref(), Some("v9"));
        assert_eq!(r.deleted[1].delete_marker, None);
        assert_eq!(r.errors.len(), 1);
        assert_eq!(r.errors[0].code.as_deref(), Some("PreconditionFailed"));
        let empty: DeleteResult = quick_xml::de::from_reader(b"<DeleteResult/>".as_ref()).unwrap();
        assert!(empty.deleted.is_empty() && empty.errors.is_empty());
    }

    #[test]
    fn lifecycle_rules_are_read_with_their_filters_and_what_they_do() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<LifecycleConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
<Rule>
  <ID>nc</ID>
  <Filter>
    <Prefix>wh/</Prefix>
  </Filter>
  <Status>Enabled</Status>
  <NoncurrentVersionExpiration>
    <NoncurrentDays>1</NoncurrentDays>
  </NoncurrentVersionExpiration>
</Rule>
<Rule><ID>tagged</ID><Filter><And><Prefix>x/</Prefix><Tag><Key>a</Key><Value>b</Value></Tag><ObjectSizeGreaterThan>100</ObjectSizeGreaterThan></And></Filter><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>3</NoncurrentDays><NewerNoncurrentVersions>2</NewerNoncurrentVersions></NoncurrentVersionExpiration></Rule>
<Rule><ID>off</ID><Filter><Prefix></Prefix></Filter><Status>Disabled</Status><NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays></NoncurrentVersionExpiration></Rule>
<Rule><ID>current</ID><Filter></Filter><Status>Enabled</Status><Expiration><Days>5</Days></Expiration><AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>
<Rule><ID>legacy</ID><Prefix>old/</Prefix><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>9</NoncurrentDays></NoncurrentVersionExpiration></Rule>
<Rule><ID>small</ID><Filter><ObjectSizeLessThan>10</ObjectSizeLessThan></Filter><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>2</NoncurrentDays></NoncurrentVersionExpiration></Rule>
<Rule><ID>cold</ID><Filter><Prefix>wh/</Prefix></Filter><Status>Enabled</Status><NoncurrentVersionTransition><NoncurrentDays>0</NoncurrentDays><StorageClass>GLACIER</StorageClass></NoncurrentVersionTransition><Transition><Date>2020-01-01T00:00:00.000Z</Date><StorageClass>DEEP_ARCHIVE</StorageClass></Transition></Rule>
<Rule><ID>markers-only</ID><Filter/><Status>Enabled</Status><Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration></Rule>
<Rule><ID>odd-status</ID><Prefix>wh/</Prefix><Status>enabled</Status><Expiration><Date>2030-01-01T00:00:00Z</Date></Expiration></Rule>
</LifecycleConfiguration>"#;
        let r = parse_lifecycle(xml.as_bytes()).unwrap();
        let ids: Vec<&str> = r.iter().map(|x| x.rule_id.as_str()).collect();
        // Disabled rules and rules that act on neither versions nor objects (only expired delete markers) are left
        // out; any status but `Disabled` counts as enabled.
        assert_eq!(
            ids,
            ["nc", "tagged", "current", "legacy", "small", "cold", "odd-status"]
        );
        assert_eq!((r[0].prefix.as_str(), r[0].noncurrent_days), ("wh/", Some(1)));
        assert!(r[0].may_apply("wh/t/data/a.parquet", 5) && !r[0].may_apply("other/a", 5));
        // Tags are not evaluated (the rule is taken to apply); prefix and size narrow it.
        assert!(r[1].tag_filtered && r[1].prefix == "x/" && r[1].size_greater_than == Some(100));
        assert!(r[1].may_apply("x/a", 101) && !r[1].may_apply("x/a", 100) && !r[1].may_apply("y/a", 101));
        // An empty filter is the whole bucket.
        assert!(r[2].prefix.is_empty() && r[2].expiration_days == Some(5) && r[2].noncurrent_days.is_none());
        assert_eq!((r[3].prefix.as_str(), r[3].noncurrent_days), ("old/", Some(9)));
        assert!(r[4].may_apply("any/key", 9) && !r[4].may_apply("any/key", 10));

        // What ends a hold: behind a marker, the non-current expiry; a current copy, the expiration.
        let t0 = DateTime::parse_from_rfc3339("2026-12-01T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let day = chrono::Duration::days(1);
        assert_eq!(r[0].removes_at(Held::BehindMarker, t0), Some(t0 + day));
        assert_eq!(r[0].removes_at(Held::Current, t0), None);
        assert_eq!(r[2].removes_at(Held::Current, t0), Some(t0 + day * 5));
        assert_eq!(r[2].removes_at(Held::BehindMarker, t0), None);
        let date = DateTime::parse_from_rfc3339("2030-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(r[6].removes_at(Held::Current, t0), Some(date));
        let objects = [("s3://b/x/a", 200_u64), ("s3://b/old/z", 1), ("s3://b/wh/t/f", 50)];
        let marker = soonest(&r, Held::BehindMarker, t0, false, objects.iter().map(|(u, n)| (*u, *n))).unwrap();
        assert_eq!(
            (marker.rule.rule_id.as_str(), marker.at, marker.objects),
            ("nc", t0 + day, 1)
        );
        assert_eq!(marker.first, "s3://b/wh/t/f");
        let copy = soonest(&r, Held::Current, t0, false, [("s3://b/q/c", 50_u64)]).unwrap();
        assert_eq!((copy.rule.rule_id.as_str(), copy.at), ("current", t0 + day * 5));
        assert!(soonest(&r, Held::BehindMarker, t0, false, [("s3://b/elsewhere/a", 200_u64)]).is_none());
        // A number of days past the last time chrono represents (S3 takes any 32-bit `Days`) never comes: no
        // panic, and such a rule ends no hold.
        let far = LifecycleRule {
            noncurrent_days: Some(u32::MAX),
            expiration_days: Some(u32::MAX),
            expiration_date: Some("+262143-12-31T23:59:59Z".into()),
            noncurrent_transitions: vec![LifecycleTransition {
                days: Some(u32::MAX),
                date: None,
                storage_class: "GLACIER".into(),
            }],
            transitions: vec![LifecycleTransition {
                days: Some(u32::MAX),
                date: None,
                storage_class: "GLACIER".into(),
            }],
            ..r[0].clone()
        };
        assert_eq!(far.removes_at(Held::BehindMarker, t0), None);
        assert_eq!(
            far.removes_at(Held::Current, t0),
            Some(t0),
            "an unreadable date counts from the hold"
        );
        assert_eq!(far.archives_at(Held::BehindMarker, t0), None);
        assert_eq!(far.archives_at(Held::Current, t0), None);
        let far = [LifecycleRule {
            expiration_date: None,
            ..far
        }];
        assert!(soonest(&far, Held::BehindMarker, t0, false, [("s3://b/wh/t/f", 50_u64)]).is_none());
        assert!(soonest(&far, Held::Current, t0, true, [("s3://b/wh/t/f", 50_u64)]).is_none());
        let end = DateTime::<Utc>::MAX_UTC - chrono::Duration::days(1);
        assert_eq!(
            r[0].removes_at(Held::BehindMarker, end),
            Some(DateTime::<Utc>::MAX_UTC - chrono::Duration::days(1) + day)
        );
        assert_eq!(r[0].removes_at(Held::BehindMarker, DateTime::<Utc>::MAX_UTC), None);
        // Moves to another storage class: a past date counts from the hold.
        let cold = soonest(&r, Held::BehindMarker, t0, true, [("s3://b/wh/t/f", 50_u64)]).unwrap();
        assert_eq!(
            (cold.rule.rule_id.as_str(), cold.at, cold.storage_class),
            ("cold", t0, Some("GLACIER"))
        );
        let cold = soonest(&r, Held::Current, t0, true, [("s3://b/wh/t/f", 50_u64)]).unwrap();
        assert_eq!((cold.at, cold.storage_class), (t0, Some("DEEP_ARCHIVE")));

        assert!(parse_lifecycle(b"<LifecycleConfiguration/>").unwrap().is_empty());
    }

    #[test]
    fn a_lifecycle_answer_that_is_not_a_configuration_understood_whole_is_unknown() {
        // Another document answered with 200 (a provider or proxy that ignores `?lifecycle`), an error document, an
        // element lakedrill does not know (GCS's XML rules): never read as "no rules".
        for (body, needle) in [
            (
                &br#"<?xml version="1.0"?><ListBucketResult><Name>b</Name></ListBucketResult>"#[..],
                "ListBucketResult",
            ),
            (b"<Error><Code>AccessDenied</Code></Error>", "<Error>"),
            (
                b"<LifecycleConfiguration><Rule><Action><Delete/></Action><Condition><DaysSinceNoncurrentTime>1</DaysSinceNoncurrentTime></Condition></Rule></LifecycleConfiguration>",
                "unknown",
            ),
            (
                b"<LifecycleConfiguration><Rule><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays><Tomorrow/></NoncurrentVersionExpiration></Rule></LifecycleConfiguration>",
                "unknown",
            ),
            (b"", "empty"),
        ] {
            let e = parse_lifecycle(body).unwrap_err();
            assert!(e.contains(needle), "{}: {e}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn an_s3_uri_splits_into_bucket_and_key() {
        assert_eq!(bucket_and_key("s3://b/wh/t/x.parquet"), Some(("b", "wh/t/x.parquet")));
        assert_eq!(bucket_and_key("s3://b"), Some(("b", "")));
        assert_eq!(bucket_and_key("file:///tmp/x"), None);
    }

    #[test]
    fn content_md5_is_the_base64_md5_of_the_body() {
        // RFC 1321 test vector: MD5("abc") = 900150983cd24fb0d6963f7d28e17f72.
        assert_eq!(content_md5(b"abc"), "kAFQmDzST7DWlj99KOF/cg==");
    }
}

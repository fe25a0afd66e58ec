//! The `iceberg` crate's file IO on lakedrill's own storage layer (`object_store`), so that tables the
//! `iceberg` crate writes (the demo and `drill faults` lakehouses) can live on S3 as well as on a local
//! filesystem, with one storage stack and one set of credentials (CRATE-NOTES: core `iceberg` ships only
//! local and in-memory storage; S3 would otherwise need `iceberg-storage-opendal`).
//!
//! It reads and writes; it never deletes (the only code in lakedrill that removes objects is the deleter).

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::BoxStream;
use iceberg::io::{
    FileMetadata, FileRead, FileWrite, InputFile, OutputFile, Storage as IcebergStorage, StorageConfig, StorageFactory,
};
use serde::{Deserialize, Serialize};

use crate::io::store::Storage;
use crate::model::location;

fn io_err(e: impl std::fmt::Display) -> iceberg::Error {
    iceberg::Error::new(iceberg::ErrorKind::Unexpected, e.to_string())
}

fn uri(path: &str) -> iceberg::Result<String> {
    location::canonical_uri(path).map_err(io_err)
}

/// A [`StorageFactory`] whose storages are backed by a lakedrill [`Storage`].
///
/// The storage handle is not serialized (`typetag` requires the trait objects to be serializable): a
/// deserialized factory has no storage and refuses to build.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ObjectStoreFactory {
    #[serde(skip)]
    storage: Option<Arc<Storage>>,
    #[serde(skip)]
    write_once: bool,
}

impl ObjectStoreFactory {
    /// A factory over `storage`.
    #[must_use]
    pub fn new(storage: Arc<Storage>) -> Self {
        Self {
            storage: Some(storage),
            write_once: false,
        }
    }

    /// A factory over `storage` whose files are written only where nothing is (`PutMode::Create`): a write onto an
    /// existing object fails naming it instead of replacing it. For writers that must never overwrite what another
    /// process put there meanwhile (`restore --into` writes its manifests into a location it found empty).
    #[must_use]
    pub fn write_once(storage: Arc<Storage>) -> Self {
        Self {
            storage: Some(storage),
            write_once: true,
        }
    }
}

#[typetag::serde]
impl StorageFactory for ObjectStoreFactory {
    fn build(&self, _config: &StorageConfig) -> iceberg::Result<Arc<dyn IcebergStorage>> {
        let storage = self
            .storage
            .clone()
            .ok_or_else(|| io_err("lakedrill object store factory without a storage (deserialized?)"))?;
        Ok(Arc::new(ObjectStoreIo {
            storage: Some(storage),
            write_once: self.write_once,
        }))
    }
}

/// The `iceberg` crate's [`IcebergStorage`] on a lakedrill [`Storage`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ObjectStoreIo {
    #[serde(skip)]
    storage: Option<Arc<Storage>>,
    /// Writes with `PutMode::Create` ([`ObjectStoreFactory::write_once`]).
    #[serde(skip)]
    write_once: bool,
}

impl ObjectStoreIo {
    fn storage(&self) -> iceberg::Result<&Arc<Storage>> {
        self.storage
            .as_ref()
            .ok_or_else(|| io_err("lakedrill object store IO without a storage (deserialized?)"))
    }

    fn refuse_delete(path: &str) -> iceberg::Error {
        io_err(format!(
            "{path}: lakedrill's iceberg IO never deletes (only the deleter removes objects)"
        ))
    }
}

struct Reader {
    storage: Arc<Storage>,
    uri: String,
}

#[async_trait::async_trait]
impl FileRead for Reader {
    async fn read(&self, range: Range<u64>) -> iceberg::Result<Bytes> {
        self.storage.get_range(&self.uri, range).await.map_err(io_err)
    }
}

struct Writer {
    storage: Arc<Storage>,
    uri: String,
    buf: Vec<u8>,
    write_once: bool,
}

/// Writes `bytes` at `uri`: only where nothing is when `write_once`, otherwise replacing what is there.
async fn put(storage: &Storage, uri: &str, bytes: Bytes, write_once: bool) -> iceberg::Result<()> {
    if write_once {
        storage.put_new(uri, bytes).await.map_err(io_err)?;
    } else {
        storage.put(uri, bytes).await.map_err(io_err)?;
    }
    Ok(())
}

#[async_trait::async_trait]
impl FileWrite for Writer {
    async fn write(&mut self, bs: Bytes) -> iceberg::Result<()> {
        self.buf.extend_from_slice(&bs);
        Ok(())
    }

    async fn close(&mut self) -> iceberg::Result<()> {
        let bytes = Bytes::from(std::mem::take(&mut self.buf));
        put(&self.storage, &self.uri, bytes, self.write_once).await
    }
}

#[async_trait::async_trait]
#[typetag::serde]
impl IcebergStorage for ObjectStoreIo {
    async fn exists(&self, path: &str) -> iceberg::Result<bool> {
        Ok(self.storage()?.head(&uri(path)?).await.map_err(io_err)?.is_some())
    }

    async fn metadata(&self, path: &str) -> iceberg::Result<FileMetadata> {
        let u = uri(path)?;
        match self.storage()?.head(&u).await.map_err(io_err)? {
            Some(i) => Ok(FileMetadata { size: i.size }),
            None => Err(io_err(format!("{u}: not found"))),
        }
    }

    async fn read(&self, path: &str) -> iceberg::Result<Bytes> {
        Ok(self.storage()?.get(&uri(path)?).await.map_err(io_err)?.bytes)
    }

    async fn reader(&self, path: &str) -> iceberg::Result<Box<dyn FileRead>> {
        Ok(Box::new(Reader {
            storage: Arc::clone(self.storage()?),
            uri: uri(path)?,
        }))
    }

    async fn write(&self, path: &str, bs: Bytes) -> iceberg::Result<()> {
        put(self.storage()?, &uri(path)?, bs, self.write_once).await
    }

    async fn writer(&self, path: &str) -> iceberg::Result<Box<dyn FileWrite>> {
        Ok(Box::new(Writer {
            storage: Arc::clone(self.storage()?),
            uri: uri(path)?,
            buf: Vec::new(),
            write_once: self.write_once,
        }))
    }

    async fn delete(&self, path: &str) -> iceberg::Result<()> {
        Err(Self::refuse_delete(path))
    }

    async fn delete_prefix(&self, path: &str) -> iceberg::Result<()> {
        Err(Self::refuse_delete(path))
    }

    async fn delete_stream(&self, _paths: BoxStream<'static, String>) -> iceberg::Result<()> {
        Err(Self::refuse_delete("(stream)"))
    }

    fn new_input(&self, path: &str) -> iceberg::Result<InputFile> {
        Ok(InputFile::new(Arc::new(self.clone()), path.to_owned()))
    }

    fn new_output(&self, path: &str) -> iceberg::Result<OutputFile> {
        Ok(OutputFile::new(Arc::new(self.clone()), path.to_owned()))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::io::store::StorageOptions;

    /// The write-once IO (`restore --into`'s manifests) refuses to replace an object, by either of the crate's two
    /// write paths; the plain IO replaces it.
    #[tokio::test]
    async fn a_write_once_io_never_replaces_an_object_and_the_plain_one_does() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Arc::new(Storage::new(StorageOptions::default()));
        let at = format!(
            "{}/m.avro",
            location::canonical_uri(dir.path().to_str().unwrap()).unwrap()
        );
        let once =
            iceberg::io::FileIOBuilder::new(Arc::new(ObjectStoreFactory::write_once(Arc::clone(&storage)))).build();
        once.new_output(&at)
            .unwrap()
            .write(Bytes::from_static(b"first"))
            .await
            .unwrap();
        let err = once
            .new_output(&at)
            .unwrap()
            .write(Bytes::from_static(b"second"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("m.avro"), "{err}");
        let mut w = once.new_output(&at).unwrap().writer().await.unwrap();
        w.write(Bytes::from_static(b"third")).await.unwrap();
        assert!(w.close().await.is_err());
        assert_eq!(std::fs::read(dir.path().join("m.avro")).unwrap(), b"first");
        let plain = iceberg::io::FileIOBuilder::new(Arc::new(ObjectStoreFactory::new(storage))).build();
        plain
            .new_output(&at)
            .unwrap()
            .write(Bytes::from_static(b"fourth"))
            .await
            .unwrap();
        assert_eq!(std::fs::read(dir.path().join("m.avro")).unwrap(), b"fourth");
    }
}

//! The verdict cache: a size-aware in-memory LRU in front of an embedded persistent store
//! (SQLite under the data dir) that survives restarts and `kill -9`.
//!
//! Entries carry a SHA-256 of their body; **a corrupt entry is a miss, not an error** (and is
//! deleted). The persistent store failing never fails a request: it is counted and logged.

use std::path::Path;
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, params};
use sha2::{Digest, Sha256};

/// A cached verdict: its JSON body (without the per-response `serving` block).
#[derive(Debug)]
pub struct Entry {
    pub body: Arc<str>,
}

pub fn checksum(body: &[u8]) -> String {
    hex::encode(Sha256::digest(body))
}

#[derive(Clone)]
pub struct VerdictCache {
    memory: moka::future::Cache<String, Arc<Entry>>,
    store: Option<SqliteStore>,
    shared: Option<Arc<crate::shared::Shared>>,
}

impl VerdictCache {
    /// `memory_bytes` bounds the memory tier by the verdicts' JSON size.
    pub fn new(memory_bytes: u64, store: Option<SqliteStore>, shared: Option<Arc<crate::shared::Shared>>) -> Self {
        let memory = moka::future::Cache::builder()
            .max_capacity(memory_bytes)
            .weigher(|key: &String, entry: &Arc<Entry>| (key.len() + entry.body.len()).try_into().unwrap_or(u32::MAX))
            .build();
        Self { memory, store, shared }
    }

    pub fn shared(&self) -> Option<&crate::shared::Shared> {
        self.shared.as_deref()
    }

    /// The shared tier itself, for the staged-facts tier that stores beside it.
    pub fn shared_handle(&self) -> Option<Arc<crate::shared::Shared>> {
        self.shared.clone()
    }

    /// Memory first, then the persistent store, then the shared tier (promoting what they
    /// find into memory).
    pub async fn get(&self, key: &str) -> Result<Option<Arc<Entry>>, StoreError> {
        if let Some(entry) = self.memory.get(key).await {
            return Ok(Some(entry));
        }
        let mut found = match &self.store {
            Some(store) => store.get(key.to_owned()).await?,
            None => None,
        };
        if found.is_none()
            && let Some(shared) = &self.shared
        {
            found = shared.get(key).await;
        }
        let Some(body) = found else { return Ok(None) };
        Ok(Some(self.promote(key, body).await))
    }

    /// The shared tier alone (a replica waiting on another's plan polls it).
    pub async fn get_shared(&self, key: &str) -> Option<Arc<Entry>> {
        let body = self.shared.as_ref()?.get(key).await?;
        Some(self.promote(key, body).await)
    }

    async fn promote(&self, key: &str, body: String) -> Arc<Entry> {
        let entry = Arc::new(Entry { body: body.into() });
        self.memory.insert(key.to_owned(), entry.clone()).await;
        entry
    }

    /// Into memory always, then the shared tier and the store when configured (a store
    /// failure is returned for counting; the memory tier still holds the verdict).
    pub async fn put(&self, key: &str, body: Arc<str>) -> Result<(), StoreError> {
        self.memory
            .insert(key.to_owned(), Arc::new(Entry { body: body.clone() }))
            .await;
        if let Some(shared) = &self.shared {
            shared.put(key, &body).await;
        }
        match &self.store {
            Some(store) => store.put(key.to_owned(), body).await,
            None => Ok(()),
        }
    }

    /// Entries and bytes in the memory tier (its bookkeeping settled first: moka counts lazily).
    pub async fn memory_usage(&self) -> (u64, u64) {
        self.memory.run_pending_tasks().await;
        (self.memory.entry_count(), self.memory.weighted_size())
    }

    /// Drop the memory tier (tests use it to prove the persistent tier answers).
    pub fn clear_memory(&self) {
        self.memory.invalidate_all();
    }
}

#[derive(Debug, thiserror::Error)]
#[error("verdict store: {0}")]
pub struct StoreError(String);

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError(e.to_string())
    }
}

/// One SQLite file; calls run on the blocking pool. WAL mode: a `kill -9` loses at most
/// the write in progress, never a committed verdict.
#[derive(Clone)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
}

/// The store's file name under the data dir.
pub const STORE_FILE: &str = "verdicts.sqlite3";

impl SqliteStore {
    pub fn open(data_dir: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(data_dir).map_err(|e| StoreError(format!("{}: {e}", data_dir.display())))?;
        let conn = Connection::open(data_dir.join(STORE_FILE))?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = NORMAL;
             PRAGMA busy_timeout = 5000;
             CREATE TABLE IF NOT EXISTS verdicts (
                 key TEXT PRIMARY KEY,
                 body TEXT NOT NULL,
                 checksum TEXT NOT NULL,
                 stored_at INTEGER NOT NULL
             );",
        )?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let conn = conn
                .lock()
                .map_err(|_| StoreError("the store's lock is poisoned".into()))?;
            f(&conn)
        })
        .await
        .map_err(|e| StoreError(format!("store task failed: {e}")))?
    }

    /// The body under `key` if its checksum holds; a corrupt row is deleted and reads as absent.
    pub async fn get(&self, key: String) -> Result<Option<String>, StoreError> {
        self.blocking(move |conn| {
            let row: Option<(String, String)> = conn
                .query_row(
                    "SELECT body, checksum FROM verdicts WHERE key = ?1",
                    params![key],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            match row {
                Some((body, sum)) if checksum(body.as_bytes()) == sum => Ok(Some(body)),
                Some(_) => {
                    tracing::warn!(key, "corrupt verdict in the store: treated as a miss and deleted");
                    conn.execute("DELETE FROM verdicts WHERE key = ?1", params![key])?;
                    Ok(None)
                }
                None => Ok(None),
            }
        })
        .await
    }

    pub async fn put(&self, key: String, body: Arc<str>) -> Result<(), StoreError> {
        self.blocking(move |conn| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            conn.execute(
                "INSERT OR REPLACE INTO verdicts (key, body, checksum, stored_at) VALUES (?1, ?2, ?3, ?4)",
                params![key, &*body, checksum(body.as_bytes()), now as i64],
            )?;
            Ok(())
        })
        .await
    }
}

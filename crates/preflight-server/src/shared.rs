//! The shared tier for several replicas, in Redis: verdicts (same keys as the embedded store,
//! with a TTL), staged facts (so one replica's staging spares the others theirs), a lease per
//! key for cross-replica single flight, and a fleet-wide budget of Hub requests.
//!
//! **Redis write access alone cannot forge an answer.** Every stored verdict carries an
//! HMAC-SHA256 over its key and body under a secret the replicas share (`--cache-secret`); a
//! value whose tag does not verify — written by someone without the secret, corrupted, or
//! copied from another key (a token-scoped verdict replayed under the public key) — is a
//! miss, and is deleted.
//!
//! **Redis failing is not an outage.** Every call has a short timeout; a failure opens a
//! breaker that skips Redis for a backoff that doubles up to a ceiling, after which one call
//! tries again (the connection manager reconnects underneath). While open, replicas serve
//! from memory (and SQLite), single flight is per replica, and the budget is enforced per
//! replica. `/metrics` shows `preflight_redis_up` and the error count.

use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::AsyncCommands;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::metrics::{Metrics, inc};

/// Key prefix: bump the version if the value layout changes (v2: HMAC tags, not checksums).
const PREFIX: &str = "preflight:v2";
/// The shortest shared secret accepted: 32 characters of a random string are 128+ bits.
pub const MIN_SECRET_LEN: usize = 32;

type HmacSha256 = Hmac<Sha256>;
/// An HMAC-SHA256 tag, stored raw before a facts entry.
const TAG_BYTES: usize = 32;

/// The longest verdict value this tier writes: a verdict is at most 1 MiB whatever its input
/// (the planner bounds its findings), plus its hex tag.
const MAX_VERDICT_VALUE: usize = (2 << 20) + 2 * TAG_BYTES + 1;

/// The longest facts value this tier writes: compressed staged facts (Kimi-K2's 17.7 MB of
/// headers compress to ~4 MB), plus the tag. A longer value is planted, and not read.
const MAX_FACTS_VALUE: usize = (32 << 20) + TAG_BYTES;
/// The breaker's first and longest pause after a failure.
const BREAKER_MIN: Duration = Duration::from_millis(500);
const BREAKER_MAX: Duration = Duration::from_secs(5);

pub struct SharedConfig {
    pub url: String,
    pub ttl: Duration,
    pub lease: Duration,
    pub op_timeout: Duration,
    /// Hub requests per window for the whole fleet; `None`: no budget.
    pub budget: Option<(u64, Duration)>,
    /// The secret every replica authenticates stored values with.
    pub secret: Vec<u8>,
}

pub struct Shared {
    conn: ConnectionManager,
    config: SharedConfig,
    breaker: Mutex<Breaker>,
    metrics: std::sync::Arc<Metrics>,
    /// Identifies this replica's leases.
    replica: String,
    /// The budget while Redis is unreachable: enforced by this replica alone.
    local_budget: Mutex<(u64, u64)>,
    /// HMAC keyed with the shared secret, cloned for each tag.
    mac: HmacSha256,
}

#[derive(Default)]
struct Breaker {
    failures: u32,
    open_until: Option<Instant>,
}

/// Outcome of asking for the lease on a key.
pub enum Lease {
    Acquired,
    /// Another replica is planning this key.
    Held,
    /// Redis could not say: plan locally.
    Unavailable,
}

impl Shared {
    /// Connects lazily: a Redis that is down at start-up is retried in the background.
    pub fn new(config: SharedConfig, metrics: std::sync::Arc<Metrics>) -> Result<Self, redis::RedisError> {
        let client = redis::Client::open(config.url.as_str())?;
        let manager_config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(config.op_timeout))
            .set_response_timeout(Some(config.op_timeout))
            .set_number_of_retries(1)
            .set_max_delay(BREAKER_MAX);
        let conn = ConnectionManager::new_lazy_with_config(client, manager_config)?;
        let mac = HmacSha256::new_from_slice(&config.secret).map_err(|_| {
            redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "the cache secret is not a usable HMAC key",
            ))
        })?;
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        Ok(Self {
            conn,
            config,
            breaker: Mutex::new(Breaker::default()),
            metrics,
            replica: format!("{}-{nanos}", std::process::id()),
            local_budget: Mutex::new((0, 0)),
            mac,
        })
    }

    pub fn up(&self) -> bool {
        self.breaker.lock().map(|b| b.open_until.is_none()).unwrap_or(false)
    }

    /// Run one Redis call under the breaker and the timeout; `None` when skipped or failed.
    async fn call<T, F>(&self, what: &str, f: impl FnOnce(ConnectionManager) -> F) -> Option<T>
    where
        F: std::future::Future<Output = redis::RedisResult<T>>,
    {
        {
            let breaker = self.breaker.lock().ok()?;
            if breaker.open_until.is_some_and(|until| Instant::now() < until) {
                return None;
            }
        }
        let result = tokio::time::timeout(self.config.op_timeout, f(self.conn.clone())).await;
        let mut breaker = self.breaker.lock().ok()?;
        match result {
            Ok(Ok(value)) => {
                if breaker.failures > 0 {
                    tracing::info!("redis reachable again: shared tier restored");
                }
                *breaker = Breaker::default();
                self.metrics.redis_up.store(1, Ordering::Relaxed);
                Some(value)
            }
            failed => {
                let detail = match failed {
                    Ok(Err(e)) => e.to_string(),
                    _ => format!("no answer within {} ms", self.config.op_timeout.as_millis()),
                };
                breaker.failures = breaker.failures.saturating_add(1);
                let pause = BREAKER_MIN
                    .saturating_mul(1 << breaker.failures.min(6))
                    .min(BREAKER_MAX);
                breaker.open_until = Some(Instant::now() + pause);
                inc(&self.metrics.redis_errors);
                self.metrics.redis_up.store(0, Ordering::Relaxed);
                tracing::warn!(what, error = %detail, pause_ms = pause.as_millis() as u64, "redis unavailable: serving without the shared tier");
                None
            }
        }
    }

    /// One round trip through the breaker: true when Redis answers now.
    pub async fn ping(&self) -> bool {
        self.call("ping", |mut c| async move {
            redis::cmd("PING").query_async::<String>(&mut c).await
        })
        .await
        .is_some()
    }

    fn verdict_key(key: &str) -> String {
        format!("{PREFIX}:verdict:{key}")
    }

    fn lease_key(key: &str) -> String {
        format!("{PREFIX}:lease:{key}")
    }

    fn facts_key(id: &str) -> String {
        format!("{PREFIX}:facts:{id}")
    }

    /// The tag of `body` stored under `key`: bound to the key, so a value is valid only where
    /// it was written.
    fn mac(&self, key: &str, body: &[u8]) -> HmacSha256 {
        let mut mac = self.mac.clone();
        for part in [PREFIX.as_bytes(), b"\n", key.as_bytes(), b"\n", body] {
            mac.update(part);
        }
        mac
    }

    /// The string under `rkey` when it is one and at most `max` bytes long. Anything else
    /// there — another type, or a value larger than this tier ever writes — is deleted in the
    /// same round trip, never read into memory and never counted against the breaker: a
    /// planted value costs one miss, not every read after it.
    async fn fetch(&self, what: &str, rkey: String, max: usize) -> Option<Vec<u8>> {
        let script = redis::Script::new(
            "local t = redis.call('TYPE', KEYS[1])['ok']
             if t == 'none' then return {'miss', ''} end
             if t ~= 'string' or redis.call('STRLEN', KEYS[1]) > tonumber(ARGV[1]) then
               redis.call('DEL', KEYS[1])
               return {'removed', t}
             end
             return {'ok', redis.call('GET', KEYS[1])}",
        );
        let key = rkey.clone();
        let (status, value): (String, Vec<u8>) = self
            .call(what, |mut c| async move {
                script.key(key).arg(max).invoke_async(&mut c).await
            })
            .await?;
        match status.as_str() {
            "ok" => Some(value),
            "removed" => {
                let kind = String::from_utf8_lossy(&value).into_owned();
                tracing::warn!(
                    key = rkey,
                    kind,
                    max,
                    "a value this tier never writes was in redis: deleted, read as a miss"
                );
                None
            }
            _ => None,
        }
    }

    /// The verdict under `key`, its tag verified (in constant time). A value that fails —
    /// forged, corrupt, or moved from another key — is deleted and reads as a miss.
    pub async fn get(&self, key: &str) -> Option<String> {
        let rkey = Self::verdict_key(key);
        let value = self.fetch("get", rkey, MAX_VERDICT_VALUE).await?;
        let value = String::from_utf8(value).ok().unwrap_or_default();
        if let Some((tag, body)) = value.split_once('\n')
            && let Some(tag) = unhex(tag)
            && self.mac(key, body.as_bytes()).verify_slice(&tag).is_ok()
        {
            return Some(body.to_owned());
        }
        tracing::warn!(key, "unauthenticated verdict in redis: treated as a miss and deleted");
        let rkey = Self::verdict_key(key);
        let _: Option<()> = self.call("del", |mut c| async move { c.del(rkey).await }).await;
        None
    }

    pub async fn put(&self, key: &str, body: &str) {
        let value = format!(
            "{}\n{body}",
            hex::encode(self.mac(key, body.as_bytes()).finalize().into_bytes())
        );
        let (rkey, ttl) = (Self::verdict_key(key), self.config.ttl.as_secs().max(1));
        let _: Option<()> = self
            .call("set", |mut c| async move { c.set_ex(rkey, value, ttl).await })
            .await;
    }

    /// Staged facts under `id` (a facts key's id), as an encoded entry whose tag verified;
    /// one that does not — forged, corrupt, or moved from another key (a token's facts
    /// replayed under the public key) — is deleted and reads as a miss.
    pub async fn get_facts(&self, id: &str) -> Option<Vec<u8>> {
        let rkey = Self::facts_key(id);
        let value = self.fetch("get facts", rkey.clone(), MAX_FACTS_VALUE).await?;
        if value.len() >= TAG_BYTES {
            let (tag, entry) = value.split_at(TAG_BYTES);
            if self.mac(&rkey, entry).verify_slice(tag).is_ok() {
                return Some(entry.to_vec());
            }
        }
        tracing::warn!(id, "unauthenticated facts in redis: treated as a miss and deleted");
        let _: Option<()> = self.call("del facts", |mut c| async move { c.del(rkey).await }).await;
        None
    }

    /// Store an encoded facts entry under `id`, tagged, for as long as verdicts live.
    pub async fn put_facts(&self, id: &str, entry: &[u8]) {
        if entry.len() + TAG_BYTES > MAX_FACTS_VALUE {
            return;
        }
        let rkey = Self::facts_key(id);
        let mut value = self.mac(&rkey, entry).finalize().into_bytes().to_vec();
        value.extend_from_slice(entry);
        let ttl = self.config.ttl.as_secs().max(1);
        let _: Option<()> = self
            .call("set facts", |mut c| async move { c.set_ex(rkey, value, ttl).await })
            .await;
    }

    /// Take the lease on `key` for [`SharedConfig::lease`]; a holder that dies lets it expire.
    pub async fn try_lease(&self, key: &str) -> Lease {
        let (rkey, me, ms) = (
            Self::lease_key(key),
            self.replica.clone(),
            self.config.lease.as_millis() as u64,
        );
        let set: Option<Option<String>> = self
            .call("lease", |mut c| async move {
                redis::cmd("SET")
                    .arg(rkey)
                    .arg(me)
                    .arg("NX")
                    .arg("PX")
                    .arg(ms)
                    .query_async(&mut c)
                    .await
            })
            .await;
        match set {
            Some(Some(_)) => Lease::Acquired,
            Some(None) => Lease::Held,
            None => Lease::Unavailable,
        }
    }

    /// Whether anyone holds the lease on `key` (`None`: Redis could not say).
    pub async fn lease_held(&self, key: &str) -> Option<bool> {
        let rkey = Self::lease_key(key);
        self.call("exists", |mut c| async move { c.exists(rkey).await }).await
    }

    /// Give the lease back, if it is still ours.
    pub async fn release(&self, key: &str) {
        let (rkey, me) = (Self::lease_key(key), self.replica.clone());
        let script = redis::Script::new(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end",
        );
        let _: Option<i64> = self
            .call("release", |mut c| async move {
                script.key(rkey).arg(me).invoke_async(&mut c).await
            })
            .await;
    }

    /// Draw one Hub request from the fleet's budget: a fixed window of `limit` requests per
    /// `window` (a token bucket refilled whole at each window boundary), counted in Redis.
    pub async fn draw(&self) -> Result<(), Duration> {
        let Some((limit, window)) = self.config.budget else {
            return Ok(());
        };
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let window_ms = window.as_millis().max(1) as u64;
        let index = now.as_millis() as u64 / window_ms;
        let retry_after = Duration::from_millis(window_ms - now.as_millis() as u64 % window_ms);
        let rkey = format!("{PREFIX}:budget:{index}");
        let ttl = window.as_secs().max(1) * 2;
        let used: Option<u64> = self
            .call("budget", |mut c| async move {
                let (used, _): (u64, bool) = redis::pipe()
                    .atomic()
                    .incr(&rkey, 1)
                    .expire(&rkey, ttl as i64)
                    .query_async(&mut c)
                    .await?;
                Ok(used)
            })
            .await;
        let used = match used {
            Some(used) => used,
            None => {
                let mut local = self.local_budget.lock().map_err(|_| retry_after)?;
                if local.0 != index {
                    *local = (index, 0);
                }
                local.1 += 1;
                local.1
            }
        };
        if used > limit {
            inc(&self.metrics.budget_refusals);
            return Err(retry_after);
        }
        Ok(())
    }
}

impl preflight_source::hub::client::UpstreamBudget for Shared {
    fn draw(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), Duration>> + Send + '_>> {
        Box::pin(Shared::draw(self))
    }
}

/// Lower-case hex → bytes; `None` unless every pair is a hex byte.
fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

//! Slow clients on loopback: thousands of connections that drip a request header one byte a
//! second (reconnecting when the server closes them, as an attacker would), against a real
//! `preflight serve` process, while `/v1/health` is timed on fresh connections. Bounded in
//! connections and time; stops by itself. Prints a table.
//!
//! cargo build --release -p preflight
//! cargo run --release -p preflight-server --example slow_connections -- \
//!     [--connections 20000] [--seconds 40] [--max-connections N] [--preflight PATH]
//!
//! Each side of 20,000 connections needs 20,000 descriptors: the example raises its own limit
//! (and so the server's, a child process) to [`WANTED_DESCRIPTORS`] where it may (as root),
//! else holds as many connections as the limit allows and says so.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Descriptors asked for: 20,000 slow connections on each side, plus room.
const WANTED_DESCRIPTORS: u64 = 65_536;
/// Descriptors this process keeps for itself (health probes, the runtime, stdio).
const OWN_DESCRIPTORS: u64 = 256;
/// A health probe with no full answer within this counts as a failure.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// Time between health probes.
const PROBE_EVERY: Duration = Duration::from_millis(200);
/// The server's header timeout in this run: a dripping connection is closed after it.
const HEADER_TIMEOUT_SECS: &str = "10";

struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn arg<T: std::str::FromStr>(name: &str) -> Option<T> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
}

/// Raise the descriptor limit as far as allowed; returns the soft limit in force.
#[allow(unsafe_code)]
fn raise_descriptors() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed by pointer.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        let wanted = libc::rlimit {
            rlim_cur: WANTED_DESCRIPTORS.max(limit.rlim_cur),
            rlim_max: WANTED_DESCRIPTORS.max(limit.rlim_max),
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) == 0 {
            return wanted.rlim_cur;
        }
        let soft = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &soft) == 0 {
            return soft.rlim_cur;
        }
    }
    limit.rlim_cur
}

fn start_server(binary: &str, max_connections: Option<usize>) -> (Proc, SocketAddr) {
    let data = std::env::temp_dir().join(format!("preflight-slow-{}", std::process::id()));
    let mut args = vec![
        "serve".to_owned(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--no-store".into(),
        "--data-dir".into(),
        data.to_string_lossy().into_owned(),
        "--header-timeout-secs".into(),
        HEADER_TIMEOUT_SECS.into(),
    ];
    if let Some(n) = max_connections {
        args.extend(["--max-connections".into(), n.to_string()]);
    }
    let mut child = Command::new(binary)
        .args(&args)
        .env("PREFLIGHT_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start {binary}: {e} (build it first: cargo build --release -p preflight)"));
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("listening line");
    let url = line.trim().rsplit("http://").next().expect("url").to_owned();
    (Proc(child), url.parse().expect("address"))
}

/// One slow client until `stop`: connect, send a request line, then a header byte a second;
/// reconnect whenever the server closes the connection.
async fn drip(addr: SocketAddr, stop: Arc<AtomicBool>, open: Arc<AtomicU64>, reconnects: Arc<AtomicU64>) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut stream) = TcpStream::connect(addr).await else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        open.fetch_add(1, Ordering::Relaxed);
        let mut alive = stream
            .write_all(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Drip: ")
            .await
            .is_ok();
        let mut probe = [0u8; 64];
        while alive && !stop.load(Ordering::Relaxed) {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(1)) => {
                    alive = stream.write_all(b"a").await.is_ok();
                }
                read = stream.read(&mut probe) => alive = matches!(read, Ok(n) if n > 0),
            }
        }
        open.fetch_sub(1, Ordering::Relaxed);
        if !stop.load(Ordering::Relaxed) {
            reconnects.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One `/v1/health` round trip on a fresh connection; `None` on failure or timeout.
async fn health(addr: SocketAddr) -> Option<Duration> {
    let started = Instant::now();
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await.ok()?;
        stream
            .write_all(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .ok()?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.ok()?;
        answer.starts_with(b"HTTP/1.1 200").then_some(())
    };
    tokio::time::timeout(PROBE_TIMEOUT, exchange).await.ok()??;
    Some(started.elapsed())
}

async fn metric(addr: SocketAddr, name: &str) -> Option<u64> {
    let mut stream = TcpStream::connect(addr).await.ok()?;
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).await.ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1e3
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[tokio::main]
async fn main() {
    let wanted: u64 = arg("--connections").unwrap_or(20_000);
    let seconds: u64 = arg("--seconds").unwrap_or(40);
    let max_connections: Option<usize> = arg("--max-connections");
    let binary: String = arg("--preflight")
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/release/preflight").to_owned());
    let descriptors = raise_descriptors();
    let connections = wanted.min(descriptors.saturating_sub(OWN_DESCRIPTORS));
    if connections < wanted {
        eprintln!("descriptor limit {descriptors}: holding {connections} connections, not {wanted}");
    }
    let (_server, addr) = start_server(&binary, max_connections);
    let deadline = Instant::now() + Duration::from_secs(seconds);

    let stop = Arc::new(AtomicBool::new(false));
    let (open, reconnects) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut clients = Vec::new();
    let ramp = Instant::now();
    for i in 0..connections {
        clients.push(tokio::spawn(drip(addr, stop.clone(), open.clone(), reconnects.clone())));
        // Open in batches, so the listen backlog is not overrun.
        if i % 500 == 499 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    while open.load(Ordering::Relaxed) < connections * 99 / 100 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ramp = ramp.elapsed();
    let open_at_start = open.load(Ordering::Relaxed);
    let server_open_at_start = metric(addr, "preflight_connections_open").await;

    // Steady state: health timed on fresh connections while the slow ones drip.
    let mut latencies = Vec::new();
    let (mut failures, mut min_open) = (0u64, u64::MAX);
    while Instant::now() + PROBE_EVERY < deadline {
        min_open = min_open.min(open.load(Ordering::Relaxed));
        match health(addr).await {
            Some(took) => latencies.push(took),
            None => failures += 1,
        }
        tokio::time::sleep(PROBE_EVERY).await;
    }
    let server_open_at_end = metric(addr, "preflight_connections_open").await;
    let shed = metric(addr, "preflight_connections_shed_total").await;
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.abort();
    }
    latencies.sort();

    let or_dash = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), thousands);
    println!("| figure | value |");
    println!("|---|---|");
    println!(
        "| slow connections (client side, target) | {} |",
        thousands(connections)
    );
    println!(
        "| server `--max-connections` | {} |",
        max_connections.map_or_else(|| "default".to_owned(), |n| thousands(n as u64))
    );
    println!(
        "| open after the ramp: client / server gauge | {} / {} ({:.1} s ramp) |",
        thousands(open_at_start),
        or_dash(server_open_at_start),
        ramp.as_secs_f64()
    );
    println!(
        "| open during the probes, client side (min) | {} |",
        thousands(if min_open == u64::MAX { 0 } else { min_open })
    );
    println!("| server gauge at the end | {} |", or_dash(server_open_at_end));
    println!(
        "| slow connections closed by the server (header timeout {HEADER_TIMEOUT_SECS} s, or shed) | {} |",
        thousands(reconnects.load(Ordering::Relaxed))
    );
    println!("| shed at the cap (server) | {} |", or_dash(shed));
    println!(
        "| `/v1/health` probes / failures (> {} s) | {} / {} |",
        PROBE_TIMEOUT.as_secs(),
        latencies.len() as u64 + failures,
        failures
    );
    println!(
        "| `/v1/health` p50 / p99 / max | {:.1} / {:.1} / {:.1} ms |",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies.last().map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
    );
}

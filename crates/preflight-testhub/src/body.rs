//! Response bodies: file content streamed from disk then zeros, and the meter every response
//! passes through (byte counting for the log, truncation for the fault).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncSeekExt, ReadBuf};

const CHUNK: usize = 64 * 1024;

/// The tail of a stub: never allocated per request, just sliced.
static ZEROS: [u8; CHUNK] = [0; CHUNK];

/// `len` bytes of a file from `start`: the stored prefix read from disk, then zeros up to
/// the file's full size. Nothing is read before the client asks for it.
pub(crate) struct ContentBody {
    file: Option<tokio::fs::File>,
    file_left: u64,
    zeros_left: u64,
    buf: Vec<u8>,
}

impl ContentBody {
    pub async fn open(disk: &std::path::Path, stored: u64, start: u64, len: u64) -> io::Result<ContentBody> {
        let file_left = stored.saturating_sub(start).min(len);
        let file = if file_left > 0 {
            let mut file = tokio::fs::File::open(disk).await?;
            file.seek(io::SeekFrom::Start(start)).await?;
            Some(file)
        } else {
            None
        };
        Ok(ContentBody {
            file,
            file_left,
            zeros_left: len - file_left,
            buf: Vec::new(),
        })
    }
}

impl http_body::Body for ContentBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.get_mut();
        if this.file_left > 0 {
            let Some(file) = this.file.as_mut() else {
                return Poll::Ready(Some(Err(io::Error::other("content file not open"))));
            };
            let want = this.file_left.min(CHUNK as u64) as usize;
            this.buf.resize(want, 0);
            let mut read = ReadBuf::new(&mut this.buf);
            ready!(Pin::new(file).poll_read(cx, &mut read))?;
            let got = read.filled();
            if got.is_empty() {
                return Poll::Ready(Some(Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "fixture file shrank while being served",
                ))));
            }
            this.file_left -= got.len() as u64;
            if this.file_left == 0 {
                this.file = None;
            }
            return Poll::Ready(Some(Ok(Frame::data(Bytes::copy_from_slice(got)))));
        }
        if this.zeros_left > 0 {
            let n = this.zeros_left.min(CHUNK as u64) as usize;
            this.zeros_left -= n as u64;
            return Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(&ZEROS[..n])))));
        }
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        self.file_left == 0 && self.zeros_left == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.file_left + self.zeros_left)
    }
}

/// How long a truncated body stalls before the connection is dropped: hyper flushes what it
/// has while the body is pending, so the client really receives the partial body first.
const TRUNCATE_STALL: Duration = Duration::from_millis(20);

/// Counts the bytes handed to hyper into the request log and, for the truncation fault,
/// stops at `cut_at` with an error, which makes hyper drop the connection mid-body.
pub(crate) struct Metered {
    inner: Body,
    sent: Arc<AtomicU64>,
    cut_at: Option<u64>,
    sent_here: u64,
    stall: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Metered {
    pub fn new(inner: Body, sent: Arc<AtomicU64>, cut_at: Option<u64>) -> Metered {
        Metered {
            inner,
            sent,
            cut_at,
            sent_here: 0,
            stall: None,
        }
    }
}

impl http_body::Body for Metered {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if this.cut_at.is_some_and(|cut| this.sent_here >= cut) {
            let stall = this
                .stall
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(TRUNCATE_STALL)));
            ready!(stall.as_mut().poll(cx));
            return Poll::Ready(Some(Err(axum::Error::new(io::Error::other(
                "body truncated by fault switch",
            )))));
        }
        let frame = match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
            Some(Ok(frame)) => frame,
            other => return Poll::Ready(other),
        };
        let frame = match frame.into_data() {
            Ok(mut data) => {
                if let Some(cut) = this.cut_at {
                    let room = cut - this.sent_here;
                    if data.len() as u64 > room {
                        data.truncate(room as usize);
                    }
                }
                this.sent_here += data.len() as u64;
                this.sent.fetch_add(data.len() as u64, Ordering::Relaxed);
                Frame::data(data)
            }
            Err(frame) => frame,
        };
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.cut_at.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        match self.cut_at {
            Some(_) => SizeHint::default(),
            None => self.inner.size_hint(),
        }
    }
}

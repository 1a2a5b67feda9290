//! Chunked downloads shared by blocks, archives and persistent states (rpc.md §7.3 step 5, §7.5, §7.6): chunks
//! fetched from one neighbour with at most 10 in flight, each with the shared retry, handed in offset order
//! through a bounded channel to a blocking thread that checks the sizes and stream-decompresses into a sink.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use regolith_formats::archive::{ArchiveIndex, ArchiveLimits, ArchiveVerifier};

use super::error::ClientError;
use super::neighbour::Neighbour;
use super::overlay_client::{PublicOverlayClient, QueryHandle, QueryResponse};
use crate::proto;

/// Chunks in flight, and the capacity of the channel to the decompressing thread.
pub const MAX_IN_FLIGHT: usize = 10;
/// The smallest chunk size accepted for an object larger than one chunk: below it a download costs a query
/// per few bytes.
pub(crate) const MIN_CHUNK_SIZE: u64 = 64 << 10;
/// Pause between two attempts of one chunk.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// Queries one chunk from `neighbour` with no request history, retrying after errors (§7.5): it gives up after
/// `max_attempts` attempts, or at once when the neighbour is no longer reliable.
pub async fn download_with_retries(
    client: &PublicOverlayClient,
    neighbour: &Arc<Neighbour>,
    body: Bytes,
    max_attempts: usize,
) -> Result<QueryResponse<proto::Data>, ClientError> {
    let mut retries = 0;
    loop {
        match client
            .query_raw(neighbour, body.clone())
            .await
            .and_then(|(answer, rtt)| decode_data(neighbour, answer, rtt))
        {
            Ok(response) => return Ok(response),
            Err(e) => {
                retries += 1;
                if retries >= max_attempts.max(1) || !neighbour.is_reliable() {
                    return Err(e);
                }
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }
}

fn decode_data(
    neighbour: &Arc<Neighbour>,
    answer: Bytes,
    rtt: Duration,
) -> Result<QueryResponse<proto::Data>, ClientError> {
    let handle = QueryHandle::new(neighbour.clone(), rtt, None);
    match tl_proto::deserialize::<proto::OverlayResponse<proto::Data>>(&answer) {
        Ok(proto::OverlayResponse::Ok(data)) => Ok(QueryResponse { data, handle }),
        Ok(proto::OverlayResponse::Err(code)) => {
            handle.reject();
            Err(ClientError::RequestFailed(code))
        }
        Err(e) => {
            handle.reject();
            Err(ClientError::InvalidResponse(format!("a chunk: {e}")))
        }
    }
}

/// What one chunked download is.
pub(super) struct ChunkedDownload<F> {
    /// Compressed size.
    pub size: u64,
    /// Chunk size announced by the neighbour.
    pub chunk_size: u64,
    /// The first chunk when it came with the answer (blocks), with that answer's handle: rejected when the
    /// first chunk fails, accepted when the whole download succeeds, dropped unscored otherwise.
    pub first_chunk: Option<(Bytes, QueryHandle)>,
    /// The request body of the chunk at an offset.
    pub request: F,
    /// Attempts per chunk.
    pub retries: usize,
    /// Receives the compressed bytes as served, after their size checks and before decompression.
    pub compressed_tee: Option<Box<dyn Write + Send>>,
    /// Bounds on the download.
    pub limits: DownloadLimits,
}

/// Bounds on one download: what it may decompress to, and how slowly it may go.
#[derive(Debug, Clone, Copy)]
pub(super) struct DownloadLimits {
    /// The decompressor stops here: more is a lie about the object.
    pub max_decompressed: u64,
    /// Below this many bytes per second over a whole window the download is abandoned.
    pub min_rate: u64,
    /// The window of the rate floor.
    pub window: Duration,
}

/// The sink of a download, cut at the decompressed-size limit.
struct Limited<W> {
    inner: W,
    left: u64,
    limit: u64,
}

/// The marker of an over-limit write, told apart from the sink's own failures.
#[derive(Debug)]
struct OverLimit(u64);

impl std::fmt::Display for OverLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "it decompresses to more than {} bytes", self.0)
    }
}

impl std::error::Error for OverLimit {}

impl<W: Write> Write for Limited<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.len() as u64 > self.left {
            return Err(std::io::Error::other(OverLimit(self.limit)));
        }
        let n = self.inner.write(buf)?;
        self.left -= n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn is_over_limit(e: &std::io::Error) -> bool {
    matches!(e.get_ref(), Some(inner) if inner.is::<OverLimit>())
}

/// A finished download: the sink of the decompressed bytes and the compressed tee, if any.
pub(super) struct Downloaded<W> {
    /// The decompressed output.
    pub sink: W,
    /// The compressed tee.
    pub compressed_tee: Option<Box<dyn Write + Send>>,
}

/// Downloads `size` compressed bytes in chunks from `neighbour`, decompressing them into `sink` on a blocking
/// thread. Checks per chunk `len ≤ chunk_size` and `downloaded ≤ size`, and at the end `downloaded == size`.
/// A chunk that fails a check is rejected (−8), a good one accepted (+8). An object that came whole with the
/// answer, as one frame declaring at most 1 MiB, is decoded on the calling task instead.
pub(super) async fn download_chunks<W, F>(
    client: &PublicOverlayClient,
    neighbour: &Arc<Neighbour>,
    download: ChunkedDownload<F>,
    sink: W,
    on_progress: impl Fn(u64) + Send + Sync + 'static,
) -> Result<Downloaded<W>, ClientError>
where
    W: Write + Send + 'static,
    F: Fn(u64) -> Bytes,
{
    let ChunkedDownload {
        size,
        chunk_size,
        first_chunk,
        request,
        retries,
        mut compressed_tee,
        limits,
    } = download;
    if chunk_size == 0 || (chunk_size < MIN_CHUNK_SIZE && size > chunk_size) {
        // A stock node serves 1 MiB chunks; tiny ones only make the download cost a query per few bytes.
        neighbour.punish(super::neighbour::Punishment::Slow);
        return Err(ClientError::InvalidResponse(format!(
            "chunk size {chunk_size} for {size} bytes (below the minimum of {MIN_CHUNK_SIZE})"
        )));
    }
    let mut sink = sink;
    let first_chunk = match first_chunk {
        // The whole object in the first chunk, one small frame that declares its size (a block, mostly): decoded
        // here with this thread's decoder, without a blocking thread and a new decoder for it.
        Some((first, handle)) if first.len() as u64 == size && size <= chunk_size => {
            match decode_inline(&first, limits.max_decompressed) {
                Inline::Decoded(data) => {
                    if let Some(tee) = &mut compressed_tee {
                        tee.write_all(&first).map_err(|e| {
                            ClientError::Internal(format!("writing the compressed copy: {e}"))
                        })?;
                    }
                    sink.write_all(&data)
                        .map_err(|e| ClientError::Internal(format!("writing the download: {e}")))?;
                    handle.accept();
                    on_progress(size);
                    return Ok(Downloaded {
                        sink,
                        compressed_tee,
                    });
                }
                Inline::Invalid(e) => {
                    handle.reject();
                    return Err(ClientError::InvalidResponse(format!(
                        "invalid zstd stream or sink: {e}"
                    )));
                }
                Inline::Streamed => Some((first, handle)),
            }
        }
        other => other,
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(u64, Bytes, Option<Handle>)>(MAX_IN_FLIGHT);
    let limited = Limited {
        inner: sink,
        left: limits.max_decompressed,
        limit: limits.max_decompressed,
    };
    let decoder = tokio::task::spawn_blocking(move || -> Result<Decoded<W>, ClientError> {
        // The zio writer, not `write::Decoder`: only its `finish` tells a complete stream from a cut frame.
        let raw = zstd::stream::raw::Decoder::new()
            .map_err(|e| ClientError::Internal(format!("zstd decoder: {e}")))?;
        let mut decoder = zstd::stream::zio::Writer::new(limited, raw);
        let mut downloaded = 0u64;
        let mut initial = None;
        let mut last: Option<QueryHandle> = None;
        while let Some((offset, chunk, handle)) = rx.blocking_recv() {
            let fail = |handle: Option<Handle>, reason: String| {
                match handle {
                    Some(Handle::Chunk(h)) | Some(Handle::Initial(h)) => h.reject(),
                    None => {}
                }
                Err(ClientError::InvalidResponse(reason))
            };
            if chunk.len() as u64 > chunk_size {
                return fail(
                    handle,
                    format!(
                        "a chunk of {} bytes exceeds the chunk size {chunk_size}",
                        chunk.len()
                    ),
                );
            }
            downloaded += chunk.len() as u64;
            if downloaded > size {
                return fail(handle, format!("{downloaded} bytes exceed the size {size}"));
            }
            // Offsets are fixed multiples of the chunk size: a chunk shorter than its slot loses data.
            let expected = chunk_size.min(size.saturating_sub(offset));
            if chunk.len() as u64 != expected {
                return fail(
                    handle,
                    format!(
                        "the chunk at {offset} has {} bytes, not {expected}",
                        chunk.len()
                    ),
                );
            }
            if let Some(tee) = &mut compressed_tee {
                if let Err(e) = tee.write_all(&chunk) {
                    return Err(ClientError::Internal(format!(
                        "writing the compressed copy: {e}"
                    )));
                }
            }
            if let Err(e) = decoder.write_all(&chunk) {
                if is_over_limit(&e) {
                    // The decompressor stopped at the limit: a bomb, not a slow or broken peer.
                    if let Some(Handle::Chunk(h) | Handle::Initial(h)) = handle {
                        h.punish(super::neighbour::Punishment::Malicious);
                    }
                    return Err(ClientError::InvalidResponse(e.to_string()));
                }
                return fail(handle, format!("invalid zstd stream or sink: {e}"));
            }
            // The last chunk is scored once the stream is known to end well.
            match handle {
                Some(Handle::Chunk(h)) => {
                    if let Some(previous) = last.replace(h) {
                        previous.accept();
                    }
                }
                Some(Handle::Initial(h)) => initial = Some(h),
                None => {}
            }
            on_progress(downloaded);
        }
        if downloaded != size {
            if let Some(h) = last.take() {
                h.accept();
            }
            return Ok(Decoded::Short(downloaded));
        }
        // Every byte announced arrived: the stream must end with a whole frame (a cut one would hand on a
        // decoded prefix as if it were the object). The answer that ended it is the one to blame.
        if let Err(e) = decoder.finish() {
            if let Some(h) = last.take().or_else(|| initial.take()) {
                h.reject();
            }
            return Err(ClientError::InvalidResponse(format!(
                "invalid zstd stream or sink: {e}"
            )));
        }
        for h in [initial.take(), last.take()].into_iter().flatten() {
            h.accept();
        }
        Ok(Decoded::Complete(Downloaded {
            sink: decoder.into_inner().0.inner,
            compressed_tee,
        }))
    });

    let start = if let Some((first, handle)) = first_chunk {
        if tx
            .send((0, first, Some(Handle::Initial(handle))))
            .await
            .is_err()
        {
            return match finish(decoder).await? {
                Decoded::Complete(done) => Ok(done),
                Decoded::Short(downloaded) => Err(short(downloaded, size)),
            };
        }
        chunk_size
    } else {
        0
    };
    let offsets = (0..)
        .map(move |k| start + k * chunk_size)
        .take_while(move |o| *o < size);
    let mut chunks = stream::iter(offsets)
        .map(|offset| {
            let query = download_with_retries(client, neighbour, request(offset), retries);
            async move { (offset, query.await) }
        })
        .buffered(MAX_IN_FLIGHT);
    let mut error = None;
    // The rate floor: each window must bring `min_rate × window` bytes, or the download is abandoned.
    let floor = limits
        .min_rate
        .saturating_mul(limits.window.as_secs().max(1));
    let mut window_end = tokio::time::Instant::now() + limits.window;
    let mut window_bytes = 0u64;
    loop {
        let next = tokio::time::timeout_at(window_end, chunks.next()).await;
        let item = match next {
            Ok(Some(item)) => Some(item),
            Ok(None) => break,
            Err(_) => None,
        };
        if let Some((_, Ok(response))) = &item {
            window_bytes += response.data.data.len() as u64;
        }
        if tokio::time::Instant::now() >= window_end {
            if window_bytes < floor {
                neighbour.punish(super::neighbour::Punishment::Slow);
                error = Some(ClientError::Network(format!(
                    "the download brought {window_bytes} bytes in {:?}, below the floor of {} bytes/s",
                    limits.window, limits.min_rate
                )));
                break;
            }
            window_end = tokio::time::Instant::now() + limits.window;
            window_bytes = 0;
        }
        let Some((offset, result)) = item else {
            continue;
        };
        match result {
            Ok(response) => {
                let item = (
                    offset,
                    response.data.data,
                    Some(Handle::Chunk(response.handle)),
                );
                if tx.send(item).await.is_err() {
                    break;
                }
            }
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    drop(chunks);
    drop(tx);
    let result = finish(decoder).await;
    match (error, result) {
        // The decoder's error is about content; it wins over a later transport failure.
        (_, Err(e)) => Err(e),
        // A transport failure cut the stream short (a neighbour gone mid-download): that failure is the
        // cause, not the content of what did arrive.
        (Some(e), Ok(_)) => Err(e),
        (None, Ok(Decoded::Short(downloaded))) => Err(short(downloaded, size)),
        (None, Ok(Decoded::Complete(done))) => Ok(done),
    }
}

/// What the decompressing thread ends with, besides a content error.
enum Decoded<W> {
    /// Every byte arrived and decoded.
    Complete(Downloaded<W>),
    /// The stream ended after this many bytes, fewer than the size.
    Short(u64),
}

fn short(downloaded: u64, size: u64) -> ClientError {
    ClientError::InvalidResponse(format!("downloaded {downloaded} of {size} bytes"))
}

/// The largest object decoded on the task that downloaded it (a block, mostly): below it a blocking thread
/// and a fresh decoder cost more than the decoding.
const INLINE_MAX_DECOMPRESSED: u64 = 1 << 20;

thread_local! {
    /// A decompression context per thread, kept between downloads.
    static INLINE_DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// What [`decode_inline`] made of an object that came whole in one chunk.
enum Inline {
    /// Decoded: exactly the size its frame declares.
    Decoded(Vec<u8>),
    /// Not a valid frame of that size.
    Invalid(String),
    /// Not one frame that declares a size of at most [`INLINE_MAX_DECOMPRESSED`] and `max`: for the
    /// streaming decoder, which bounds what it writes as it goes.
    Streamed,
}

/// Decodes one zstd frame that declares its content size, when that size is small and within `max`.
fn decode_inline(frame: &[u8], max: u64) -> Inline {
    use zstd::zstd_safe;
    let Ok(Some(content)) = zstd_safe::get_frame_content_size(frame) else {
        return Inline::Streamed;
    };
    if content > INLINE_MAX_DECOMPRESSED.min(max)
        || zstd_safe::find_frame_compressed_size(frame) != Ok(frame.len())
    {
        return Inline::Streamed;
    }
    INLINE_DECOMPRESSOR.with(|cell| {
        let mut cell = cell.borrow_mut();
        let decompressor = match &mut *cell {
            Some(d) => d,
            None => match zstd::bulk::Decompressor::new() {
                Ok(d) => cell.insert(d),
                Err(_) => return Inline::Streamed,
            },
        };
        // The size is at most 1 MiB, checked above.
        let mut out = Vec::with_capacity(content as usize);
        match decompressor.decompress_to_buffer(frame, &mut out) {
            Ok(n) if n as u64 == content => Inline::Decoded(out),
            Ok(n) => Inline::Invalid(format!(
                "the frame declares {content} bytes and decodes to {n}"
            )),
            Err(e) => Inline::Invalid(e.to_string()),
        }
    })
}

/// Decodes a compressed object that came whole (an entry of a batch answer) into at most `max` bytes:
/// one small frame that declares its size on this task, anything else on a blocking thread with a
/// streaming decoder that stops past `max`. The error names what was wrong with the data.
pub(super) async fn decode_whole(data: Bytes, max: u64) -> Result<Vec<u8>, String> {
    if let Ok(Some(content)) = zstd::zstd_safe::get_frame_content_size(&data) {
        if content > max {
            return Err(format!(
                "its frame declares {content} bytes, more than the limit of {max}"
            ));
        }
    }
    match decode_inline(&data, max) {
        Inline::Decoded(out) => return Ok(out),
        Inline::Invalid(e) => return Err(e),
        Inline::Streamed => {}
    }
    tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let decoder =
            zstd::stream::read::Decoder::with_buffer(&data[..]).map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        decoder
            .take(max.saturating_add(1))
            .read_to_end(&mut out)
            .map_err(|e| e.to_string())?;
        if out.len() as u64 > max {
            return Err(format!("it decodes to more than the limit of {max} bytes"));
        }
        Ok(out)
    })
    .await
    .map_err(|e| format!("the decompressing thread failed: {e}"))?
}

/// The handle that came with a chunk.
enum Handle {
    /// The answer that carried the first chunk.
    Initial(QueryHandle),
    /// A chunk query.
    Chunk(QueryHandle),
}

async fn finish<W>(
    decoder: tokio::task::JoinHandle<Result<Decoded<W>, ClientError>>,
) -> Result<Decoded<W>, ClientError> {
    decoder
        .await
        .map_err(|e| ClientError::Internal(format!("the decompressing thread failed: {e}")))?
}

/// A sink that runs the archive verifier over the decompressed stream before passing it on; an indexing one
/// also records where each entry lies in the stream, so that what the sink wrote can be read entry by entry
/// without framing it again.
pub struct VerifyingSink<W> {
    verifier: ArchiveVerifier,
    inner: W,
}

impl<W: Write> VerifyingSink<W> {
    /// Verifies what is written into `inner`, entries within `limits`.
    pub fn new(inner: W, limits: ArchiveLimits) -> Self {
        Self {
            verifier: ArchiveVerifier::with_limits(limits),
            inner,
        }
    }

    /// Verifies and indexes what is written into `inner`, entries within `limits`.
    pub fn indexing(inner: W, limits: ArchiveLimits) -> Self {
        Self {
            verifier: ArchiveVerifier::indexing(limits),
            inner,
        }
    }

    /// The stream ended: it must end at an entry boundary. Returns the sink and the index of the entries
    /// (empty unless the sink indexes).
    pub fn finish(self) -> Result<(W, ArchiveIndex), ClientError> {
        let index = self
            .verifier
            .finish_index()
            .map_err(|e| ClientError::InvalidResponse(format!("archive: {e}")))?;
        Ok((self.inner, index))
    }
}

impl<W: Write> Write for VerifyingSink<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.verifier
            .write(buf)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
        self.inner.write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

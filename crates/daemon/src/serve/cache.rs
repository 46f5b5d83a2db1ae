//! /metrics rendered at most once per evaluation tick (docs/metrics.md#how-metrics-is-served).
//!
//! The report's families are the bulk of the body (megabytes at a hundred targets) and change
//! only when a report is published. Publishing stores a [`Rendered`] that has not rendered
//! anything yet; the first GET after it renders the families (off the async workers, see
//! super::metrics) and every later GET of that tick hands out references to the same bytes,
//! never rendering or copying them. A tick nobody fetches costs nothing, and GETs that arrive
//! together wait for one rendering ([`OnceLock`]). The bytes stay as the per-family buffers
//! they were written into, sent as the body's chunks, so the text is never joined into a
//! second copy. The counters that move between ticks (HTTP connections, alert delivery, OTLP,
//! taps, process) are a few kilobytes, rendered per GET and sent after the cached part, so
//! they stay as live as they were before the cache.
//!
//! The gzip body is one gzip member, not two concatenated ones (which some clients read only
//! the first of): the cached part is deflated once, across its chunks, ending in a sync flush
//! so that it stops on a byte boundary without closing the stream; per GET the live part
//! follows as stored (uncompressed) deflate blocks, the last one final, and the trailer's
//! CRC-32 is the cached part's combined with the live part's. The cached deflate is made on
//! the first gzip GET after a tick, so a daemon scraped less often than it evaluates
//! compresses only what is fetched.

use std::collections::VecDeque;
use std::io::Write;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use bytes::Bytes;
use crc32fast::Hasher as Crc;
use flate2::Compression;
use flate2::write::DeflateEncoder;
use hyper::body::{Frame, SizeHint};

/// Fast rather than small: at level 1 the body still shrinks about tenfold (docs/benchmarks.md),
/// and the deflate of a large report is the one cost of the first gzip GET after each tick.
const LEVEL: Compression = Compression::fast();

/// A gzip header: deflate, no flags, no mtime, no extra flags, OS unknown (RFC 1952 §2.3).
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

/// One tick's rendering of the report's families, made by its first GET.
pub struct Rendered {
    render: Box<dyn Fn() -> Vec<Bytes> + Send + Sync>,
    report: OnceLock<Cached>,
    gzip: OnceLock<GzipHead>,
}

/// The report's families as their chunks, and their length in all.
struct Cached {
    chunks: Vec<Bytes>,
    len: usize,
}

/// The gzip header and the cached part deflated up to a sync flush, with its CRC-32 and length.
struct GzipHead {
    bytes: Bytes,
    crc: Crc,
    len: usize,
}

impl Rendered {
    /// A rendering that `render` makes when it is first needed (super::render_report_chunks).
    pub fn new(render: impl Fn() -> Vec<Bytes> + Send + Sync + 'static) -> Rendered {
        Rendered { render: Box::new(render), report: OnceLock::new(), gzip: OnceLock::new() }
    }

    /// A rendering already made, for tests and benchmarks.
    pub fn of_text(text: String) -> Rendered {
        let r = Rendered::new(Vec::new);
        let _ = r.report.set(Cached { len: text.len(), chunks: vec![Bytes::from(text)] });
        r
    }

    /// Whether the report's families are rendered (the first GET after a tick renders them).
    pub fn is_rendered(&self) -> bool {
        self.report.get().is_some()
    }

    /// Whether the gzip copy is made (its first gzip GET after a tick makes it).
    pub fn has_gzip(&self) -> bool {
        self.gzip.get().is_some()
    }

    /// Renders the report's families, and deflates them if `gzip`, unless that is done:
    /// a large report takes milliseconds to seconds, so the first GET after a tick calls this
    /// off the async workers. GETs that call it together wait for one rendering.
    pub fn prepare(&self, gzip: bool) {
        self.cached();
        if gzip {
            self.head();
        }
    }

    fn cached(&self) -> &Cached {
        self.report.get_or_init(|| {
            let chunks: Vec<Bytes> = (self.render)().into_iter().filter(|c| !c.is_empty()).collect();
            Cached { len: chunks.iter().map(Bytes::len).sum(), chunks }
        })
    }

    /// The length of the cached part (rendering it if need be).
    pub fn report_len(&self) -> usize {
        self.cached().len
    }

    /// The cached part's chunks, one per family (rendering them if need be).
    pub fn report_chunks(&self) -> &[Bytes] {
        &self.cached().chunks
    }

    fn head(&self) -> &GzipHead {
        self.gzip.get_or_init(|| {
            let report = self.cached();
            let mut out = Vec::with_capacity(report.len / 8 + 64);
            out.extend_from_slice(&GZIP_HEADER);
            let mut enc = DeflateEncoder::new(out, LEVEL);
            let mut crc = Crc::new();
            for chunk in &report.chunks {
                // Writing to a Vec cannot fail.
                enc.write_all(chunk).expect("deflate into memory");
                crc.update(chunk);
            }
            enc.flush().expect("deflate into memory");
            let bytes = Bytes::from(std::mem::take(enc.get_mut()));
            GzipHead { bytes, crc, len: report.len }
        })
    }

    /// The plain body: the cached part, then `live`.
    pub fn plain(&self, live: String) -> Chunks {
        let report = self.cached();
        Chunks::new(report.chunks.iter().cloned().chain([Bytes::from(live)]))
    }

    /// The gzip body of the same bytes as [`Rendered::plain`], as one gzip member.
    pub fn gzip(&self, live: &str) -> Chunks {
        let head = self.head();
        let mut tail = stored_blocks(live.as_bytes());
        let mut live_crc = Crc::new();
        live_crc.update(live.as_bytes());
        let mut crc = head.crc.clone();
        crc.combine(&live_crc);
        tail.extend_from_slice(&crc.finalize().to_le_bytes());
        // ISIZE is the length modulo 2^32 (RFC 1952 §2.3.1).
        tail.extend_from_slice(&((head.len + live.len()) as u32).to_le_bytes());
        Chunks::new([head.bytes.clone(), Bytes::from(tail)])
    }
}

/// `data` as deflate stored blocks, the last one final (RFC 1951 §3.2.4). The live part is a
/// few kilobytes: storing it costs 5 bytes per 64 KiB, where a compressor would allocate a
/// few hundred kilobytes of state on every GET. The sync flush before it left the stream on a
/// byte boundary, so each block header is one whole byte.
fn stored_blocks(data: &[u8]) -> Vec<u8> {
    const MAX: usize = u16::MAX as usize;
    let mut out = Vec::with_capacity(data.len() + 5 * (data.len() / MAX + 1) + 8);
    let mut chunks = data.chunks(MAX).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(chunk) = chunks.next() {
        out.push(u8::from(chunks.peek().is_none()));
        let len = chunk.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    out
}

/// A response body sent as the chunks it is made of, without joining them: the cached part's
/// chunks are shared by reference with every GET of the tick. Its length is exact, so the response
/// carries a Content-Length.
pub struct Chunks {
    chunks: VecDeque<Bytes>,
    remaining: u64,
}

impl Chunks {
    fn new(chunks: impl IntoIterator<Item = Bytes>) -> Chunks {
        let chunks: VecDeque<Bytes> = chunks.into_iter().filter(|c| !c.is_empty()).collect();
        let remaining = chunks.iter().map(|c| c.len() as u64).sum();
        Chunks { chunks, remaining }
    }

    /// The body's length in bytes.
    pub fn len(&self) -> u64 {
        self.remaining
    }

    pub fn is_empty(&self) -> bool {
        self.remaining == 0
    }

    /// The whole body in one buffer, for tests and benchmarks (a GET never joins it).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.remaining as usize);
        for c in &self.chunks {
            out.extend_from_slice(c);
        }
        out
    }
}

impl hyper::body::Body for Chunks {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let next = self.chunks.pop_front();
        if let Some(c) = &next {
            self.remaining -= c.len() as u64;
        }
        Poll::Ready(next.map(|c| Ok(Frame::data(c))))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

/// Whether an `Accept-Encoding` value accepts gzip: a `gzip` coding, or failing that `*`,
/// whose `q` is not 0 (RFC 9110 §12.5.3).
pub fn accepts_gzip(accept_encoding: &str) -> bool {
    let mut star = None;
    for coding in accept_encoding.split(',') {
        let mut parts = coding.split(';');
        let name = parts.next().unwrap_or("").trim();
        let q = parts
            .find_map(|p| {
                let (k, v) = p.split_once('=')?;
                k.trim().eq_ignore_ascii_case("q").then(|| v.trim().parse::<f64>().unwrap_or(0.0))
            })
            .unwrap_or(1.0);
        if name.eq_ignore_ascii_case("gzip") {
            return q > 0.0;
        }
        if name == "*" {
            star = Some(q > 0.0);
        }
    }
    star.unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn gunzip(b: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        // GzDecoder reads one member and checks its CRC-32 and length.
        flate2::read::GzDecoder::new(b).read_to_end(&mut out).expect("a valid gzip member");
        out
    }

    #[test]
    fn gzip_is_one_member_of_the_plain_bytes() {
        let report: String = (0..5000).map(|i| format!("llm_slo_x{{target=\"t{i}\"}} {i}.5\n")).collect();
        // In several chunks, as families are rendered.
        let chunks: Vec<String> = report.split_inclusive("t4").map(str::to_string).collect();
        assert!(chunks.len() > 100);
        let r = Rendered::new(move || chunks.iter().map(|c| Bytes::from(c.clone())).collect());
        assert!(!r.is_rendered(), "rendered before it was asked for");
        for live in ["", "process_open_fds 12.0\n", "a\n".repeat(70_000).as_str()] {
            let plain = r.plain(live.to_string()).to_vec();
            assert_eq!(plain, [report.as_bytes(), live.as_bytes()].concat());
            let gz = r.gzip(live).to_vec();
            assert_eq!(gunzip(&gz), plain, "live part of {} bytes", live.len());
            // One member and nothing after it: a client that reads only the first member
            // gets the whole body.
            let mut dec = flate2::read::GzDecoder::new(&gz[..]);
            std::io::copy(&mut dec, &mut std::io::sink()).unwrap();
            assert!(dec.into_inner().is_empty(), "bytes after the gzip member");
            if live.len() < 1000 {
                assert!(gz.len() * 4 < plain.len(), "{} of {}", gz.len(), plain.len());
            }
        }
        assert!(r.has_gzip());
    }

    #[test]
    fn chunks_report_their_exact_length() {
        let r = Rendered::of_text("abc\n".into());
        let c = r.plain("de\n".into());
        assert_eq!(c.len(), 7);
        assert_eq!(hyper::body::Body::size_hint(&c).exact(), Some(7));
        assert_eq!(c.to_vec(), b"abc\nde\n");
        assert!(Rendered::of_text(String::new()).plain(String::new()).is_empty());
    }

    #[test]
    fn reads_accept_encoding_as_rfc_9110_does() {
        for yes in ["gzip", "deflate, gzip;q=1.0, *;q=0.5", "GZIP", "br, *", "gzip;q=0.001", " gzip ; q=1"] {
            assert!(accepts_gzip(yes), "{yes}");
        }
        for no in ["", "identity", "deflate, br", "gzip;q=0", "gzip; q=0.0", "x-gzip2", "gzip;q=0, *"] {
            assert!(!accepts_gzip(no), "{no}");
        }
    }
}

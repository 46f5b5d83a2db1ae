//! An incremental Server-Sent Events decoder (docs/request-path.md, "Wire formats").
//!
//! Bytes arrive in whatever pieces the network delivers: several events in one read, one
//! event across many. The decoder keeps only the unfinished line and the unfinished event's
//! data between calls, so any split of the same bytes yields the same events.
//!
//! It follows the SSE parsing rules engines rely on: lines end at `\n`, `\r\n` or `\r`; a
//! blank line ends an event; `data:` takes an optional single space (TGI writes none);
//! lines starting with `:` are comments (TGI's keep-alives); other fields are ignored.
//! Each blank line is reported as a [`Block`], with or without data, together with the
//! stream offset just past it, so that a caller can cut the stream at event boundaries.

/// One blank-line-terminated block of the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block<'a> {
    /// The event's `data` lines joined by `\n`; `None` for a block without a data line
    /// (only comments or other fields, or an extra blank line).
    pub data: Option<&'a [u8]>,
    /// Stream offset just past the blank line that ended the block. When a read ends
    /// between the `\r` and `\n` of a line end, the block is reported at once and the `\n`
    /// counts toward the next block.
    pub end: u64,
    /// The block was longer than the decoder's limit; `data` holds its first bytes only.
    pub overflow: bool,
}

/// Largest event the decoder keeps whole. An event is a few hundred bytes; a chunk with
/// logprobs of many tokens a few kilobytes.
pub const MAX_EVENT_BYTES: usize = 4 << 20;

/// The decoder's state between reads.
#[derive(Debug, Clone)]
pub struct Decoder {
    /// The current line, when a read ended inside it.
    line: Vec<u8>,
    /// The current event's data so far.
    data: Vec<u8>,
    has_data: bool,
    /// The previous read ended with `\r`: a `\n` starting this one belongs to that line end.
    skip_lf: bool,
    /// Bytes consumed so far.
    offset: u64,
    overflow: bool,
    max_event: usize,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new(MAX_EVENT_BYTES)
    }
}

impl Decoder {
    /// A decoder that keeps at most `max_event` bytes of one event.
    pub fn new(max_event: usize) -> Decoder {
        Decoder {
            line: Vec::new(),
            data: Vec::new(),
            has_data: false,
            skip_lf: false,
            offset: 0,
            overflow: false,
            max_event,
        }
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Whether bytes of an unfinished event (or line) are held: at the end of the stream
    /// this means the stream stopped inside an event.
    pub fn in_event(&self) -> bool {
        !self.line.is_empty() || self.has_data
    }

    /// Decodes `bytes`, calling `on_block` for each block they complete, in order.
    pub fn feed(&mut self, mut bytes: &[u8], mut on_block: impl FnMut(Block<'_>)) {
        if bytes.is_empty() {
            // An empty read must not forget a pending `\r`.
            return;
        }
        if self.skip_lf {
            self.skip_lf = false;
            if let Some((b'\n', rest)) = bytes.split_first() {
                self.offset += 1;
                bytes = rest;
            }
        }
        while !bytes.is_empty() {
            let Some(at) = memchr::memchr2(b'\n', b'\r', bytes) else {
                self.push_partial(bytes);
                self.offset += bytes.len() as u64;
                return;
            };
            let mut eol = at + 1;
            if bytes[at] == b'\r' {
                match bytes.get(at + 1) {
                    Some(b'\n') => eol += 1,
                    None => self.skip_lf = true,
                    Some(_) => {}
                }
            }
            self.offset += eol as u64;
            if self.line.is_empty() {
                self.line_done(&bytes[..at], &mut on_block);
            } else {
                self.push_partial(&bytes[..at]);
                let line = std::mem::take(&mut self.line);
                self.line_done(&line, &mut on_block);
                self.line = line;
                self.line.clear();
            }
            bytes = &bytes[eol..];
        }
    }

    fn push_partial(&mut self, bytes: &[u8]) {
        let room = self.max_event.saturating_sub(self.line.len() + self.data.len());
        if bytes.len() > room {
            self.overflow = true;
        }
        self.line.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn line_done(&mut self, line: &[u8], on_block: &mut impl FnMut(Block<'_>)) {
        if line.is_empty() {
            let block =
                Block { data: self.has_data.then_some(&self.data[..]), end: self.offset, overflow: self.overflow };
            on_block(block);
            self.data.clear();
            self.has_data = false;
            self.overflow = false;
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        if field != b"data" {
            return;
        }
        if self.has_data {
            self.data.push(b'\n');
        }
        let room = self.max_event.saturating_sub(self.data.len());
        if value.len() > room {
            self.overflow = true;
        }
        self.data.extend_from_slice(&value[..value.len().min(room)]);
        self.has_data = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (data, end, overflow) of each block, as owned values.
    fn blocks(d: &mut Decoder, bytes: &[u8]) -> Vec<(Option<String>, u64, bool)> {
        let mut out = Vec::new();
        d.feed(bytes, |b| out.push((b.data.map(|d| String::from_utf8_lossy(d).into_owned()), b.end, b.overflow)));
        out
    }

    fn datas(input: &[u8]) -> Vec<Option<String>> {
        blocks(&mut Decoder::default(), input).into_iter().map(|b| b.0).collect()
    }

    #[test]
    fn every_line_ending_and_the_optional_space() {
        let want = vec![Some("a".to_string()), Some("b".into()), Some("c".into()), Some(" d".into())];
        assert_eq!(datas(b"data: a\n\ndata:b\r\n\r\ndata: c\r\rdata:  d\n\n"), want);
    }

    #[test]
    fn comments_and_other_fields_make_no_data_and_multi_line_data_joins() {
        let got = datas(b": keep-alive\n\nevent: x\nid: 1\ndata: one\ndata\ndata: two\n\n\n");
        assert_eq!(got, vec![None, Some("one\n\ntwo".into()), None]);
    }

    #[test]
    fn offsets_are_just_past_each_blank_line() {
        let input = b"data: a\n\n: c\n\ndata: b\r\n\r\n";
        let ends: Vec<u64> = blocks(&mut Decoder::default(), input).iter().map(|b| b.1).collect();
        assert_eq!(ends, vec![9, 14, 25]);
        assert_eq!(ends.last().copied(), Some(input.len() as u64));
    }

    #[test]
    fn a_cr_at_the_end_of_a_read_and_lf_at_the_start_of_the_next_is_one_line_end() {
        let mut d = Decoder::default();
        assert!(blocks(&mut d, b"data: a\r\n\r").len() == 1);
        assert_eq!(d.offset(), 10);
        assert!(blocks(&mut d, b"\ndata: b\r").is_empty());
        assert_eq!(blocks(&mut d, b"\n\r\n"), vec![(Some("b".into()), 22, false)]);
        assert!(!d.in_event());
        let mut d = Decoder::default();
        assert!(blocks(&mut d, b"data: a\r").is_empty());
        assert!(blocks(&mut d, b"").is_empty(), "an empty read between the \\r and the \\n");
        assert_eq!(blocks(&mut d, b"\n\n").len(), 1, "the \\n still belongs to the line end");
    }

    #[test]
    fn an_event_past_the_limit_is_reported_cut_and_flagged() {
        let mut d = Decoder::new(8);
        let got = blocks(&mut d, b"data: 0123456789\n\ndata: ok\n\n");
        assert_eq!(got, vec![(Some("01234567".into()), 18, true), (Some("ok".into()), 28, false)]);
        let mut d = Decoder::new(8);
        assert!(blocks(&mut d, b"data: 0123").is_empty());
        assert!(blocks(&mut d, b"456789\n\n")[0].2);
    }

    #[test]
    fn an_unfinished_event_is_held() {
        let mut d = Decoder::default();
        assert!(blocks(&mut d, b"data: {\"a\"").is_empty());
        assert!(d.in_event());
        assert!(blocks(&mut d, b":1}\n").is_empty());
        assert!(d.in_event());
        assert_eq!(blocks(&mut d, b"\n")[0].0.as_deref(), Some("{\"a\":1}"));
        assert!(!d.in_event());
    }

    proptest::proptest! {
        #[test]
        fn any_split_gives_the_same_blocks(cuts in proptest::collection::vec(0usize..120, 0..8)) {
            let input: &[u8] = b"data: {\"x\":1}\n\n: ka\r\n\r\ndata:y\rdata: z \r\r\ndata: [DONE]\n\n";
            // Offsets may differ by the `\n` of a `\r\n` cut in two (see `Block::end`).
            let datas = |b: Vec<(Option<String>, u64, bool)>| b.into_iter().map(|b| (b.0, b.2)).collect::<Vec<_>>();
            let whole = datas(blocks(&mut Decoder::default(), input));
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(input.len())).collect();
            cuts.sort();
            let mut d = Decoder::default();
            let mut got = Vec::new();
            let mut from = 0;
            for c in cuts.into_iter().chain([input.len()]) {
                got.extend(datas(blocks(&mut d, &input[from..c])));
                from = c;
            }
            proptest::prop_assert_eq!(got, whole);
        }
    }
}

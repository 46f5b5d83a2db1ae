//! Removes the usage event that `inject_usage` caused, so that the client receives the
//! stream it would have received without the tap (docs/request-path.md, "inject_usage").
//!
//! The stripper cuts the stream at event boundaries: bytes of an unfinished event are held
//! until the event completes (a client cannot act on half an event anyway), and the first
//! event with `choices: []` and a `usage` is dropped whole. After that, everything passes
//! as it comes.

use super::event;
use super::sse::Decoder;

/// What to send on for one piece of the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Forward {
    /// The piece, unchanged.
    All,
    /// These bytes instead (possibly none).
    Bytes(Vec<u8>),
}

/// The stripper's state between pieces.
#[derive(Debug, Default)]
pub struct UsageStripper {
    sse: Decoder,
    /// Bytes received but not yet sent on, from stream offset `held_from`.
    held: Vec<u8>,
    held_from: u64,
    done: bool,
}

impl UsageStripper {
    pub fn new() -> UsageStripper {
        UsageStripper::default()
    }

    /// Whether the usage event has been removed (from then on every piece is [`Forward::All`]).
    pub fn stripped(&self) -> bool {
        self.done
    }

    /// Whether bytes are held back, waiting for the rest of their event.
    pub fn holding(&self) -> bool {
        !self.held.is_empty()
    }

    /// The next piece of the response body.
    pub fn feed(&mut self, piece: &[u8]) -> Forward {
        if self.done {
            return Forward::All;
        }
        let mut cuts: Vec<(u64, bool)> = Vec::new();
        self.sse.feed(piece, |b| {
            let usage = b.data.is_some_and(|d| event::parse(d).is_some_and(|e| e.is_usage_only()));
            cuts.push((b.end, usage));
        });
        let end = self.sse.offset();
        if self.held.is_empty() && !cuts.iter().any(|c| c.1) && cuts.last().map(|c| c.0) == Some(end) {
            // The common case: whole events, none to drop.
            self.held_from = end;
            return Forward::All;
        }
        self.held.extend_from_slice(piece);
        let mut out = Vec::new();
        let mut from = self.held_from;
        for (cut, usage) in cuts {
            let span = &self.held[(from - self.held_from) as usize..(cut - self.held_from) as usize];
            if usage && !self.done {
                self.done = true;
            } else {
                out.extend_from_slice(span);
            }
            from = cut;
        }
        if self.done {
            out.extend_from_slice(&self.held[(from - self.held_from) as usize..]);
            self.held = Vec::new();
            self.held_from = end;
        } else {
            self.held.drain(..(from - self.held_from) as usize);
            self.held_from = from;
        }
        Forward::Bytes(out)
    }

    /// The end of the body: whatever is still held (a stream cut inside an event).
    pub fn finish(&mut self) -> Vec<u8> {
        self.held_from += self.held.len() as u64;
        std::mem::take(&mut self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WITH_USAGE: &[u8] = b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n\
data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\n\
data: [DONE]\n\n";
    const WITHOUT: &[u8] = b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n";

    fn run(s: &mut UsageStripper, pieces: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in pieces {
            match s.feed(p) {
                Forward::All => out.extend_from_slice(p),
                Forward::Bytes(b) => out.extend(b),
            }
        }
        out.extend(s.finish());
        out
    }

    #[test]
    fn whole_events_pass_unchanged_and_the_usage_event_goes() {
        let mut s = UsageStripper::new();
        assert_eq!(s.feed(b"data: {\"choices\":[{\"text\":\"a\"}]}\n\n"), Forward::All);
        assert!(!s.stripped());
        assert_eq!(run(&mut UsageStripper::new(), &[WITH_USAGE]), WITHOUT);
    }

    #[test]
    fn only_the_first_usage_event_goes_and_a_cut_tail_is_given_back() {
        let twice = [WITH_USAGE, &WITH_USAGE[..WITH_USAGE.len() - 3]].concat();
        let want = [WITHOUT, &WITH_USAGE[..WITH_USAGE.len() - 3]].concat();
        assert_eq!(run(&mut UsageStripper::new(), &[&twice]), want);
    }

    proptest::proptest! {
        #[test]
        fn any_split_strips_the_same(cuts in proptest::collection::vec(0usize..200, 0..6)) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(WITH_USAGE.len())).collect();
            cuts.sort();
            let mut pieces = Vec::new();
            let mut from = 0;
            for c in cuts.into_iter().chain([WITH_USAGE.len()]) {
                pieces.push(&WITH_USAGE[from..c]);
                from = c;
            }
            proptest::prop_assert_eq!(run(&mut UsageStripper::new(), &pieces), WITHOUT);
        }
    }
}

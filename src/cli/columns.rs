//! Text for a terminal of [`WIDTH`] columns: names cut to their column, latencies in the
//! unit that reads best, and lists wrapped at the width instead of running past it.
//!
//! Widths count characters, not bytes: the summaries use `–`, `·` and `…`.

/// The width every line of the terminal summaries fits in.
pub const WIDTH: usize = 120;

/// `s` in at most `width` characters. A longer one keeps its start and its end with `…`
/// between them: model names differ at either end (`meta-llama/…`, `…-FP8-dynamic`), and so
/// do pod names (`vllm-…-x2k4p`).
pub fn ellipsize(s: &str, width: usize) -> String {
    let n = s.chars().count();
    if n <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let head = (width - 1).div_ceil(2);
    let tail = width - 1 - head;
    let mut out: String = s.chars().take(head).collect();
    out.push('…');
    out.extend(s.chars().skip(n - tail));
    out
}

/// A latency given in seconds: from 10 s in seconds with one decimal (`79.5 s`), below in
/// milliseconds (`250 ms`, and `4.2 ms` under 10 ms, where whole milliseconds would hide
/// the difference between two fast engines); `-` when unknown.
pub fn latency(seconds: Option<f64>) -> String {
    match seconds.filter(|v| v.is_finite()) {
        None => "-".into(),
        // The thresholds compare what is printed, so that 9.9996 s is not `10000 ms`.
        Some(v) if v >= 9.9995 => format!("{v:.1} s"),
        Some(v) if v >= 0.00995 => format!("{:.0} ms", v * 1000.0),
        Some(v) => format!("{:.1} ms", v * 1000.0),
    }
}

/// Lines no wider than a width, filled item by item: an item that does not fit on the
/// current line starts the next one, indented, and the separator before it ends the line
/// it leaves. An item wider than a whole line is ellipsized.
pub struct Wrapped {
    lines: Vec<String>,
    indent: usize,
    width: usize,
    /// No item on the first line yet: only its prefix.
    bare: bool,
}

/// Below this many free columns after a prefix, the first item goes to the next line
/// rather than being cut to nothing.
const MIN_ROOM: usize = 12;

impl Wrapped {
    /// A first line starting with `first` (itself ellipsized to the width).
    pub fn new(first: &str, indent: usize, width: usize) -> Wrapped {
        Wrapped { lines: vec![ellipsize(first, width)], indent, width, bare: true }
    }

    /// Appends `sep` and `item`, on the current line if both fit, else on a new one.
    pub fn push(&mut self, sep: &str, item: &str) -> &mut Wrapped {
        let bare = std::mem::replace(&mut self.bare, false);
        let line = self.lines.last_mut().expect("Wrapped always has a line");
        let used = line.chars().count() + sep.chars().count();
        if used + item.chars().count() <= self.width {
            line.push_str(sep);
            line.push_str(item);
            return self;
        }
        // A prefix alone on its line reads as a broken line: the item is cut to stay beside it.
        if bare && self.width.saturating_sub(used) >= MIN_ROOM {
            line.push_str(sep);
            line.push_str(&ellipsize(item, self.width - used));
            return self;
        }
        line.truncate(line.trim_end().len());
        // The separator ends the line it leaves (`… ·`, `…,`), where there is room for it.
        let sep_end = sep.trim_end();
        if !bare && line.chars().count() + sep_end.chars().count() <= self.width {
            line.push_str(sep_end);
        }
        let room = self.width.saturating_sub(self.indent);
        self.lines.push(format!("{}{}", " ".repeat(self.indent), ellipsize(item, room)));
        self
    }

    /// The lines, each ending with a newline.
    pub fn text(&self) -> String {
        self.lines.iter().map(|l| format!("{l}\n")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_name_keeps_its_start_and_end() {
        let name = "meta-llama/Llama-3.1-405B-Instruct-FP8-dynamic";
        let cut = ellipsize(name, 28);
        assert_eq!(cut.chars().count(), 28);
        assert_eq!(cut, "meta-llama/Lla…t-FP8-dynamic");
        assert_eq!(ellipsize("sim-llama-8b", 28), "sim-llama-8b");
        assert_eq!(ellipsize("abcdef", 6), "abcdef");
        assert_eq!(ellipsize("abcdefg", 6), "abc…fg");
        assert_eq!(ellipsize("abc", 1), "…");
        assert_eq!(ellipsize("abc", 0), "");
        // Characters, not bytes: a multibyte name is cut on a character boundary.
        assert_eq!(ellipsize("ééééééé", 4), "éé…é");
    }

    #[test]
    fn latencies_from_ten_seconds_print_in_seconds() {
        assert_eq!(latency(Some(79.5)), "79.5 s");
        assert_eq!(latency(Some(10.0)), "10.0 s");
        assert_eq!(latency(Some(9.9996)), "10.0 s");
        assert_eq!(latency(Some(9.99)), "9990 ms");
        assert_eq!(latency(Some(0.25)), "250 ms");
        assert_eq!(latency(Some(0.0042)), "4.2 ms");
        assert_eq!(latency(Some(0.00996)), "10 ms");
        assert_eq!(latency(None), "-");
        assert_eq!(latency(Some(f64::NAN)), "-");
        assert_eq!(latency(Some(f64::INFINITY)), "-");
    }

    #[test]
    fn wrapping_keeps_every_line_within_the_width() {
        let mut w = Wrapped::new("firing: ", 4, 30);
        w.push("", "LLMKVCacheSaturated{target=a}").push(", ", "LLMTargetDown{target=b}").push(", ", "x");
        assert_eq!(w.text(), "firing: LLMKVCacheS…{target=a}\n    LLMTargetDown{target=b}, x\n");
        // With too little room after its prefix, the first item starts the next line.
        let mut w = Wrapped::new("waiting for the first scrapes of ", 4, 40);
        w.push("", "a-target-with-a-long-name").push(", ", "b");
        assert_eq!(w.text(), "waiting for the first scrapes of\n    a-target-with-a-long-name, b\n");
        let mut short = Wrapped::new("SLO chat: ", 4, 120);
        short.push("", "1m 97.0%").push(" · ", "5m 98.0%").push("; ", "goodput 97 tok/s");
        assert_eq!(short.text(), "SLO chat: 1m 97.0% · 5m 98.0%; goodput 97 tok/s\n");
        let mut broken = Wrapped::new("SLO chat: ", 4, 20);
        broken.push("", "1m 97.0%").push(" · ", "5m 98.0%");
        assert_eq!(broken.text(), "SLO chat: 1m 97.0% ·\n    5m 98.0%\n");
    }
}

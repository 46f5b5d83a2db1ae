//! Sample values as Prometheus reads them (Go's `strconv.ParseFloat`).

/// Parses a Prometheus float: decimal and exponent forms, `NaN`, `+Inf`, `-Inf`, `Inf`
/// (any case), and Rust's long forms such as `0.00015000000000000001`.
///
/// Rust's own parser also accepts `infinity` and `nan` spelled out, which Go does too.
/// Rejected, as by Go: empty strings, `_` separators, a signed NaN, and finite-looking
/// numbers that overflow (`1e400`: Go returns a range error and Prometheus fails the
/// scrape). Go's hexadecimal floats (`0x1p-2`) are not accepted; no exporter writes them.
pub fn parse_f64(s: &str) -> Option<f64> {
    if let Some(v) = simple_decimal(s.as_bytes()) {
        return Some(v);
    }
    let b = s.as_bytes();
    let first = *b.first()?;
    // Fast path for the overwhelmingly common plain decimals.
    if first.is_ascii_digit() || first == b'-' || first == b'+' || first == b'.' {
        // Go rejects a signed NaN; Rust would accept it.
        if let Ok(v) = s.parse::<f64>() {
            let overflow = v.is_infinite() && !is_inf_spelling(s);
            return (!v.is_nan() && !overflow).then_some(v);
        }
    }
    if is_inf_spelling(s) {
        return Some(if first == b'-' { f64::NEG_INFINITY } else { f64::INFINITY });
    }
    if s.eq_ignore_ascii_case("nan") {
        return Some(f64::NAN);
    }
    None
}

fn is_inf_spelling(s: &str) -> bool {
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    unsigned.eq_ignore_ascii_case("inf") || unsigned.eq_ignore_ascii_case("infinity")
}

/// Powers of ten that are exact in an f64.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20,
    1e21, 1e22,
];

/// Clinger's fast path for the forms exporters write most (`12`, `0.25`, `1768264339.889`):
/// when the digits fit in 2^53 and the scale is an exact power of ten, one IEEE division
/// is correctly rounded, so the result equals the full parser's. Anything else (signs,
/// exponents, more digits) returns `None` and takes the general path.
#[inline]
fn simple_decimal(b: &[u8]) -> Option<f64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    let mut mantissa: u64 = 0;
    let mut frac: Option<usize> = None;
    let mut digits = 0usize;
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'0'..=b'9' => {
                mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(c - b'0'));
                digits += 1;
            }
            b'.' if frac.is_none() => frac = Some(i + 1),
            _ => return None,
        }
    }
    // 20 digits may wrap the u64; those, and a lone ".", take the general path.
    if digits == 0 || digits > 19 || mantissa > (1u64 << 53) {
        return None;
    }
    let scale = frac.map_or(0, |f| b.len() - f);
    Some(mantissa as f64 / *POW10.get(scale)?)
}

#[cfg(test)]
mod tests {
    use super::parse_f64;

    #[test]
    fn prometheus_forms() {
        assert_eq!(parse_f64("2"), Some(2.0));
        assert_eq!(parse_f64("2.0"), parse_f64("2"));
        assert_eq!(parse_f64("1.7682643398898673e+09"), Some(1.7682643398898673e9));
        assert_eq!(parse_f64("1.15891634176e+011"), Some(1.15891634176e11));
        assert_eq!(parse_f64("0.00015000000000000001"), Some(0.00015000000000000001));
        assert_eq!(parse_f64("+Inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64("-Inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64("inf"), Some(f64::INFINITY));
        assert!(parse_f64("NaN").unwrap().is_nan());
        assert_eq!(parse_f64("-1.0"), Some(-1.0));
        assert_eq!(parse_f64(".5"), Some(0.5));
        assert_eq!(parse_f64(""), None);
        assert_eq!(parse_f64("1_000"), None);
        assert_eq!(parse_f64("0x10"), None);
        assert_eq!(parse_f64("abc"), None);
        assert_eq!(parse_f64("+NaN"), None);
        assert_eq!(parse_f64("."), None);
        assert_eq!(parse_f64("1.2.3"), None);
        assert_eq!(parse_f64("5."), Some(5.0));
        assert_eq!(parse_f64("1e400"), None, "Go: value out of range");
        assert_eq!(parse_f64("-1e400"), None);
        assert_eq!(parse_f64("1e-400"), Some(0.0), "Go rounds underflow to zero without error");
        assert_eq!(parse_f64("-Infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64("+inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64("1.7976931348623157e308"), Some(f64::MAX));
    }

    #[test]
    fn fast_path_agrees_with_the_full_parser() {
        // Cases straddling the fast path's bounds: 2^53, 19/20 digits, 22 decimals.
        let cases = [
            "9007199254740992",
            "9007199254740993",
            "0.9007199254740993",
            "1234567890123456789",
            "12345678901234567890",
            "99999999999999999999",
            "0.0000000000000000000001",
            "0.00000000000000000000012",
            "1768264339.889",
            "0.4143967628479004",
            "0.1",
            "0.3",
            "123.456",
            "0",
            "0.0",
            "007",
        ];
        for c in cases {
            let want: f64 = c.parse().unwrap();
            assert_eq!(parse_f64(c).map(f64::to_bits), Some(want.to_bits()), "{c}");
        }
        let mut x: u64 = 0x1234_5678_9abc_def0;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let digits = (x % 1_000_000_000_000_000_000).to_string();
            let cut = (x >> 60) as usize % (digits.len() + 1);
            let s = format!("{}.{}", &digits[..cut], &digits[cut..]);
            let want: f64 = s.parse().unwrap();
            assert_eq!(parse_f64(&s).map(f64::to_bits), Some(want.to_bits()), "{s}");
        }
    }
}

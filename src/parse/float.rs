//! Sample values as Prometheus reads them (Go's `strconv.ParseFloat`).

/// Parses a Prometheus float: decimal and exponent forms, `NaN`, `+Inf`, `-Inf`, `Inf`
/// (any case), and Rust's long forms such as `0.00015000000000000001`.
///
/// Rust's own parser also accepts `infinity` and `nan` spelled out, which Go does too, so
/// the only thing to reject is what neither accepts: empty strings, hex, `_` separators.
pub fn parse_f64(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let first = *b.first()?;
    // Fast path for the overwhelmingly common plain decimals.
    if first.is_ascii_digit() || first == b'-' || first == b'+' || first == b'.' {
        // Go rejects a signed NaN; Rust would accept it.
        if let Ok(v) = s.parse::<f64>() {
            return (!v.is_nan()).then_some(v);
        }
    }
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    if unsigned.eq_ignore_ascii_case("inf") || unsigned.eq_ignore_ascii_case("infinity") {
        return Some(if first == b'-' { f64::NEG_INFINITY } else { f64::INFINITY });
    }
    if s.eq_ignore_ascii_case("nan") {
        return Some(f64::NAN);
    }
    None
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
    }
}

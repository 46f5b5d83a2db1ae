//! Byte sizes as users write them: `1048576`, `512KiB`, `16MiB`, `1GB`.

/// Why a written size is refused; each message ends with what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("invalid size {0:?}; {EXPECTED}")]
    Invalid(String),
    #[error("unknown size unit {unit:?} in {text:?}; {EXPECTED}")]
    UnknownUnit { unit: String, text: String },
    #[error("size {0:?} is out of range; {EXPECTED}")]
    OutOfRange(String),
}

const EXPECTED: &str = "write a byte count like 1048576, 512KiB or 16MiB";

/// Parses a byte count with an optional unit (B, KB, MB, GB: powers of 1000; KiB, MiB,
/// GiB: powers of 1024). Units are case-insensitive; whitespace between number and unit
/// is allowed.
pub fn parse_bytes(s: &str) -> Result<usize, SizeError> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim();
    if num.is_empty() {
        return Err(SizeError::Invalid(s.to_string()));
    }
    let mult: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" | "k" => 1e3,
        "mb" | "m" => 1e6,
        "gb" | "g" => 1e9,
        "kib" | "ki" => 1024.0,
        "mib" | "mi" => 1024.0 * 1024.0,
        "gib" | "gi" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(SizeError::UnknownUnit { unit: unit.to_string(), text: s.to_string() }),
    };
    let n: f64 = num.parse().map_err(|_| SizeError::Invalid(s.to_string()))?;
    let bytes = (n * mult).round();
    if !bytes.is_finite() || bytes < 1.0 || bytes > usize::MAX as f64 {
        return Err(SizeError::OutOfRange(s.to_string()));
    }
    Ok(bytes as usize)
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn units() {
        assert_eq!(parse_bytes("1048576"), Ok(1_048_576));
        assert_eq!(parse_bytes("16MiB"), Ok(16 * 1024 * 1024));
        assert_eq!(parse_bytes("16 mib"), Ok(16 * 1024 * 1024));
        assert_eq!(parse_bytes("1.5KiB"), Ok(1536));
        assert_eq!(parse_bytes("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_bytes("10kb"), Ok(10_000));
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("MiB").is_err());
        assert_eq!(
            parse_bytes("5 parsecs").unwrap_err().to_string(),
            "unknown size unit \"parsecs\" in \"5 parsecs\"; write a byte count like 1048576, 512KiB or 16MiB"
        );
        assert_eq!(
            parse_bytes("0").unwrap_err().to_string(),
            "size \"0\" is out of range; write a byte count like 1048576, 512KiB or 16MiB"
        );
        assert!(parse_bytes("-5").is_err());
    }
}

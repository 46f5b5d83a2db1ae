//! Byte sizes as users write them: `1048576`, `512KiB`, `16MiB`, `1GB`.

/// Parses a byte count with an optional unit (B, KB, MB, GB: powers of 1000; KiB, MiB,
/// GiB: powers of 1024). Units are case-insensitive; whitespace between number and unit
/// is allowed.
pub fn parse_bytes(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim();
    let expected = "write a byte count like 1048576, 512KiB or 16MiB";
    if num.is_empty() {
        return Err(format!("invalid size {s:?}; {expected}"));
    }
    let mult: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" | "k" => 1e3,
        "mb" | "m" => 1e6,
        "gb" | "g" => 1e9,
        "kib" | "ki" => 1024.0,
        "mib" | "mi" => 1024.0 * 1024.0,
        "gib" | "gi" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(format!("unknown size unit {unit:?} in {s:?}; {expected}")),
    };
    let n: f64 = num.parse().map_err(|_| format!("invalid size {s:?}; {expected}"))?;
    let bytes = (n * mult).round();
    if !bytes.is_finite() || bytes < 1.0 || bytes > usize::MAX as f64 {
        return Err(format!("size {s:?} is out of range; {expected}"));
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
        assert!(parse_bytes("5 parsecs").is_err());
        assert!(parse_bytes("-5").is_err());
    }
}

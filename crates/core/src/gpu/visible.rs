//! Which GPUs this process should report: `NVIDIA_VISIBLE_DEVICES` or the configured list.
//!
//! Values follow the NVIDIA container toolkit: `all`, `none`, `void`, empty/unset, or a comma
//! list of UUIDs (`GPU-…`) or indices. A configured list wins over the environment. Indices are
//! NVML indices as this process sees them; UUIDs are the safer join key (CUDA ordinals differ).

/// A device filter, parsed once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceFilter {
    /// Every device NVML reports.
    All,
    /// No device (`none`): the driver libraries are there but no GPU is meant for us.
    Nothing,
    /// Devices whose UUID or index is listed.
    Listed { uuids: Vec<String>, indices: Vec<u32> },
}

impl DeviceFilter {
    /// From the configured list (if non-empty) or else the `NVIDIA_VISIBLE_DEVICES` value.
    pub fn resolve(configured: &[String], env_value: Option<&str>) -> DeviceFilter {
        if !configured.is_empty() {
            return DeviceFilter::parse_list(configured.iter().map(String::as_str));
        }
        match env_value.map(str::trim) {
            None | Some("") | Some("all") | Some("void") => DeviceFilter::All,
            Some("none") => DeviceFilter::Nothing,
            // The device plugin's volume-mounts strategy puts a directory here; the UUIDs are not
            // in the value, so fall back to everything NVML shows (which the runtime limited).
            Some(v) if v.starts_with('/') => DeviceFilter::All,
            Some(v) => DeviceFilter::parse_list(v.split(',')),
        }
    }

    fn parse_list<'a>(items: impl Iterator<Item = &'a str>) -> DeviceFilter {
        let (mut uuids, mut indices) = (Vec::new(), Vec::new());
        for item in items.map(str::trim).filter(|s| !s.is_empty()) {
            if item.eq_ignore_ascii_case("all") {
                return DeviceFilter::All;
            }
            match item.parse::<u32>() {
                Ok(i) => indices.push(i),
                Err(_) => uuids.push(item.to_ascii_lowercase()),
            }
        }
        DeviceFilter::Listed { uuids, indices }
    }

    /// Whether the device with this NVML index and UUID is kept.
    pub fn keeps(&self, index: u32, uuid: &str) -> bool {
        match self {
            DeviceFilter::All => true,
            DeviceFilter::Nothing => false,
            DeviceFilter::Listed { uuids, indices } => {
                indices.contains(&index) || uuids.iter().any(|u| u.eq_ignore_ascii_case(uuid))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_values() {
        assert_eq!(DeviceFilter::resolve(&[], None), DeviceFilter::All);
        assert_eq!(DeviceFilter::resolve(&[], Some("all")), DeviceFilter::All);
        assert_eq!(DeviceFilter::resolve(&[], Some("")), DeviceFilter::All);
        assert_eq!(DeviceFilter::resolve(&[], Some("none")), DeviceFilter::Nothing);
        let f = DeviceFilter::resolve(&[], Some("GPU-AAA, 2"));
        assert!(f.keeps(0, "gpu-aaa"));
        assert!(f.keeps(2, "GPU-zzz"));
        assert!(!f.keeps(1, "GPU-bbb"));
        assert!(!DeviceFilter::Nothing.keeps(0, "GPU-AAA"));
    }

    #[test]
    fn config_wins_over_env() {
        let f = DeviceFilter::resolve(&["GPU-bbb".to_string()], Some("GPU-aaa"));
        assert!(f.keeps(5, "GPU-bbb"));
        assert!(!f.keeps(0, "GPU-aaa"));
    }
}

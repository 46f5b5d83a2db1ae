//! KV-cache usage over a window: last, mean, max and the share of scrapes in each band.

use std::collections::BTreeMap;

use super::KvThresholds;
use super::range::GaugeRange;
use crate::report::{KvBand, KvReport};

/// The index of a band in [`KvBand::ALL`].
pub fn band_index(b: KvBand) -> usize {
    KvBand::ALL.iter().position(|&x| x == b).unwrap_or(0)
}

/// The report of a range's KV-usage statistics: what [`report`] gives on its samples.
pub fn from_range(g: &GaugeRange, t: &KvThresholds) -> Option<KvReport> {
    let f = g.finite?;
    let n = f.samples as f64;
    // A count of samples over n: what adding 1.0 per sample then dividing gives, exactly.
    let band_time = KvBand::ALL.iter().map(|&b| (b, f.bands[band_index(b)] as f64 / n)).collect();
    Some(KvReport { last: f.last, mean: f.mean, max: f.max, band: band(f.last, t), band_time })
}

/// The band a usage value falls in:
/// underloaded < underloaded ≤ low < target_low ≤ target ≤ target_high < high ≤ critical < critical.
pub fn band(v: f64, t: &KvThresholds) -> KvBand {
    if v < t.underloaded {
        KvBand::Underloaded
    } else if v < t.target_low {
        KvBand::Low
    } else if v <= t.target_high {
        KvBand::Target
    } else if v <= t.critical {
        KvBand::High
    } else {
        KvBand::Critical
    }
}

/// Statistics of the usage samples of one window (oldest first). Each scrape stands for
/// an equal share of the window; non-finite samples are skipped. `None` without samples.
pub fn report(samples: &[f64], t: &KvThresholds) -> Option<KvReport> {
    let finite: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
    let last = *finite.last()?;
    let n = finite.len() as f64;
    let mean = finite.iter().sum::<f64>() / n;
    let max = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut band_time: BTreeMap<KvBand, f64> = KvBand::ALL.iter().map(|&b| (b, 0.0)).collect();
    for &v in &finite {
        *band_time.entry(band(v, t)).or_default() += 1.0;
    }
    for share in band_time.values_mut() {
        *share /= n;
    }
    Some(KvReport { last, mean, max, band: band(last, t), band_time })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bands_follow_the_inclusive_edges() {
        let t = KvThresholds::default();
        let cases = [
            (0.69, KvBand::Underloaded),
            (0.70, KvBand::Low),
            (0.7499, KvBand::Low),
            (0.75, KvBand::Target),
            (0.85, KvBand::Target),
            (0.8501, KvBand::High),
            (0.90, KvBand::High),
            (0.9001, KvBand::Critical),
        ];
        for (v, want) in cases {
            assert_eq!(band(v, &t), want, "{v}");
        }
    }

    #[test]
    fn statistics_and_shares() {
        let r = report(&[0.5, 0.8, f64::NAN, 0.95, 0.8], &KvThresholds::default()).unwrap();
        assert_eq!(r.last, 0.8);
        assert_eq!(r.max, 0.95);
        assert!((r.mean - (0.5 + 0.8 + 0.95 + 0.8) / 4.0).abs() < 1e-15);
        assert_eq!(r.band_time[&KvBand::Target], 0.5);
        assert_eq!(r.band_time[&KvBand::Underloaded], 0.25);
        assert_eq!(r.band_time[&KvBand::Critical], 0.25);
        assert_eq!(r.band_time[&KvBand::Low], 0.0);
        assert!(report(&[], &KvThresholds::default()).is_none());
    }
}

//! NVML through nvml-wrapper's real loading path, against a fake libnvidia-ml.so.1 compiled
//! from tests/it/fake_nvml/fake_nvml.c. Expected values are the fake's raw values converted to SI
//! units by hand (mW → W, MHz → Hz, %, KB/s → bytes/s with KB = 1024).

use crate::fake_nvml;
use crate::support::PATIENCE;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use goodput::export::ExportSample;
use goodput::export::gpu::gpu_samples;
use goodput::gpu::config::NvmlConfig;
use goodput::gpu::nvml::{GpmState, NvmlSampler, NvmlStatus, open, sample};
use goodput::gpu::reading::GpuReading;
use goodput::gpu::visible::DeviceFilter;

const H100: &str = "GPU-11111111-2222-3333-4444-555555555555";
const A10G: &str = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
const MIB: f64 = 1_048_576.0;

fn h100() -> GpuReading {
    GpuReading {
        index: "0".into(),
        uuid: H100.into(),
        name: "NVIDIA H100 80GB HBM3".into(),
        gpu_utilization_ratio: Some(0.87),
        memory_controller_utilization_ratio: Some(0.42),
        memory_used_bytes: Some(40960.0 * MIB),
        memory_total_bytes: Some(81559.0 * MIB),
        power_watts: Some(512.345),
        power_limit_watts: Some(700.0),
        sm_clock_hertz: Some(1980e6),
        memory_clock_hertz: Some(2619e6),
        temperature_celsius: Some(63.0),
        throttle_reasons: Some(0x44),
        pcie_tx_bytes_per_second: Some(123456.0 * 1024.0),
        pcie_rx_bytes_per_second: Some(654321.0 * 1024.0),
        dram_active_ratio: Some(0.615),
        tensor_active_ratio: Some(0.3325),
        sm_occupancy_ratio: Some(0.47),
    }
}

/// The A10G: power and PCIe NotSupported, throttle reasons FunctionNotFound, no GPM.
fn a10g() -> GpuReading {
    GpuReading {
        index: "1".into(),
        uuid: A10G.into(),
        name: "NVIDIA A10G".into(),
        gpu_utilization_ratio: Some(0.12),
        memory_controller_utilization_ratio: Some(0.03),
        memory_used_bytes: Some(1024.0 * MIB),
        memory_total_bytes: Some(23028.0 * MIB),
        power_limit_watts: Some(300.0),
        sm_clock_hertz: Some(1710e6),
        memory_clock_hertz: Some(6251e6),
        temperature_celsius: Some(35.0),
        ..GpuReading::default()
    }
}

/// Two passes 150 ms apart, so GPM has its pair of samples.
fn two_passes(library: &std::path::Path, filter: &DeviceFilter) -> Vec<GpuReading> {
    let nvml = open(Some(library)).expect("the fake NVML loads");
    let mut gpm = GpmState::default();
    let first = sample(&nvml, filter, &mut gpm);
    assert!(first.iter().all(|r| r.dram_active_ratio.is_none()), "GPM needs two samples");
    std::thread::sleep(Duration::from_millis(150));
    sample(&nvml, filter, &mut gpm)
}

fn close(a: &GpuReading, b: &GpuReading) {
    let fields = |r: &GpuReading| {
        [
            r.gpu_utilization_ratio,
            r.memory_controller_utilization_ratio,
            r.memory_used_bytes,
            r.memory_total_bytes,
            r.power_watts,
            r.power_limit_watts,
            r.sm_clock_hertz,
            r.memory_clock_hertz,
            r.temperature_celsius,
            r.pcie_tx_bytes_per_second,
            r.pcie_rx_bytes_per_second,
            r.dram_active_ratio,
            r.tensor_active_ratio,
            r.sm_occupancy_ratio,
        ]
    };
    assert_eq!((&a.index, &a.uuid, &a.name, a.throttle_reasons), (&b.index, &b.uuid, &b.name, b.throttle_reasons));
    for (i, (x, y)) in fields(a).into_iter().zip(fields(b)).enumerate() {
        match (x, y) {
            (Some(x), Some(y)) => {
                assert!((x - y).abs() <= 1e-12 * y.abs().max(1.0), "{} field {i}: {x} != {y}", a.uuid)
            }
            _ => assert_eq!(x, y, "{} field {i}", a.uuid),
        }
    }
}

#[test]
fn readings_equal_the_fake_and_missing_functions_drop_only_their_reading() {
    let Some(fake) = fake_nvml::build(&[]) else { return };
    let got = two_passes(&fake.library, &DeviceFilter::All);
    assert_eq!(got.len(), 2);
    close(&got[0], &h100());
    close(&got[1], &a10g());
}

fn value(samples: &[ExportSample], family: &str, uuid: &str) -> Option<f64> {
    let hits: Vec<f64> = samples
        .iter()
        .filter(|s| s.name == family && s.labels.iter().any(|(k, v)| *k == "uuid" && v == uuid))
        .map(|s| s.value)
        .collect();
    assert!(hits.len() <= 1, "{family} {uuid}: {hits:?}");
    hits.first().copied()
}

#[test]
fn exported_families_equal_the_fake() {
    let Some(fake) = fake_nvml::build(&[]) else { return };
    let samples = gpu_samples(&two_passes(&fake.library, &DeviceFilter::All), Some("llama"));
    let expect = [
        ("llm_slo_gpu_utilization_ratio", Some(0.87), Some(0.12)),
        ("llm_slo_gpu_memory_used_bytes", Some(40960.0 * MIB), Some(1024.0 * MIB)),
        ("llm_slo_gpu_memory_total_bytes", Some(81559.0 * MIB), Some(23028.0 * MIB)),
        ("llm_slo_gpu_power_watts", Some(512.345), None),
        ("llm_slo_gpu_power_limit_watts", Some(700.0), Some(300.0)),
        ("llm_slo_gpu_sm_clock_hertz", Some(1980e6), Some(1710e6)),
        ("llm_slo_gpu_memory_clock_hertz", Some(2619e6), Some(6251e6)),
        ("llm_slo_gpu_temperature_celsius", Some(63.0), Some(35.0)),
        ("llm_slo_gpu_pcie_tx_bytes_per_second", Some(126_418_944.0), None),
        ("llm_slo_gpu_pcie_rx_bytes_per_second", Some(670_024_704.0), None),
        ("llm_slo_gpu_dram_active_ratio", Some(0.615), None),
        ("llm_slo_gpu_tensor_active_ratio", Some(0.3325), None),
        ("llm_slo_gpu_sm_occupancy_ratio", Some(0.47), None),
    ];
    for (family, h, a) in expect {
        for (uuid, want) in [(H100, h), (A10G, a)] {
            let got = value(&samples, family, uuid);
            match (got, want) {
                (Some(g), Some(w)) => assert!((g - w).abs() <= 1e-12 * w.abs(), "{family} {uuid}: {g} != {w}"),
                _ => assert_eq!(got, want, "{family} {uuid}"),
            }
        }
    }
    let throttled: Vec<&str> = samples
        .iter()
        .filter(|s| s.name == "llm_slo_gpu_throttle_reasons" && s.value == 1.0)
        .map(|s| s.labels.iter().find(|(k, _)| *k == "reason").unwrap().1.as_str())
        .collect();
    assert_eq!(throttled, ["sw_power_cap", "hw_thermal_slowdown"]);
    assert!(
        !samples.iter().any(|s| s.name == "llm_slo_gpu_throttle_reasons" && s.labels.iter().any(|(_, v)| v == A10G))
    );
    let labels = &samples.iter().find(|s| s.name == "llm_slo_gpu_power_watts").unwrap().labels;
    assert_eq!(
        labels[..],
        [
            ("target", "llama".to_string()),
            ("gpu", "0".to_string()),
            ("uuid", H100.to_string()),
            ("model_name", "NVIDIA H100 80GB HBM3".to_string()),
        ]
    );
}

#[test]
fn symbols_missing_from_the_library_drop_only_their_readings() {
    let Some(fake) = fake_nvml::build(&["FAKE_MINIMAL"]) else { return };
    let got = two_passes(&fake.library, &DeviceFilter::All);
    let strip = |mut r: GpuReading| {
        r.power_limit_watts = None;
        r.temperature_celsius = None;
        r.dram_active_ratio = None;
        r.tensor_active_ratio = None;
        r.sm_occupancy_ratio = None;
        r
    };
    assert_eq!(got.len(), 2);
    close(&got[0], &strip(h100()));
    close(&got[1], &strip(a10g()));
}

#[test]
fn visible_devices_filter_by_uuid_index_and_none() {
    let Some(fake) = fake_nvml::build(&[]) else { return };
    let nvml = open(Some(&fake.library)).unwrap();
    let uuids = |f: DeviceFilter| -> Vec<String> {
        sample(&nvml, &f, &mut GpmState::default()).into_iter().map(|r| r.uuid).collect()
    };
    assert_eq!(uuids(DeviceFilter::resolve(&[], Some(A10G))), [A10G]);
    assert_eq!(uuids(DeviceFilter::resolve(&[], Some("0"))), [H100]);
    assert_eq!(uuids(DeviceFilter::resolve(&[], Some("none"))), Vec::<String>::new());
    assert_eq!(uuids(DeviceFilter::resolve(&[], Some("all"))), [H100, A10G]);
    assert_eq!(uuids(DeviceFilter::resolve(&[H100.to_string()], Some(A10G))), [H100]);
}

#[test]
fn sampler_thread_publishes_snapshots() {
    let Some(fake) = fake_nvml::build(&[]) else { return };
    let cfg = NvmlConfig {
        library: Some(fake.library.clone()),
        interval: Duration::from_millis(100),
        ..NvmlConfig::default()
    };
    let sampler = NvmlSampler::spawn(&cfg, Some(H100));
    let deadline = Instant::now() + PATIENCE;
    let snapshot = loop {
        let s = sampler.latest();
        if s.first().is_some_and(|r| r.dram_active_ratio.is_some()) || Instant::now() > deadline {
            break s;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(sampler.status(), NvmlStatus::Running);
    assert_eq!(snapshot.len(), 1);
    close(&snapshot[0], &h100());
    sampler.stop();
}

#[test]
fn without_a_driver_the_sampler_carries_on_empty() {
    let missing = PathBuf::from("/nonexistent/goodput-test/libnvidia-ml.so.1");
    assert!(open(Some(&missing)).is_err());
    let cfg = NvmlConfig { library: Some(missing), ..NvmlConfig::default() };
    let sampler = NvmlSampler::spawn(&cfg, None);
    let deadline = Instant::now() + PATIENCE;
    while sampler.status() == NvmlStatus::Starting && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        matches!(sampler.status(), NvmlStatus::Unavailable(ref m) if m.contains("nonexistent")),
        "{:?}",
        sampler.status()
    );
    assert!(sampler.latest().is_empty());
    let off = NvmlSampler::spawn(&NvmlConfig { enabled: false, ..NvmlConfig::default() }, None);
    assert_eq!(off.status(), NvmlStatus::Disabled);
}

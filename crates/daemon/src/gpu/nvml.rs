//! NVML through nvml-wrapper, on its own thread: NVML calls are blocking ioctls and must never
//! stall a scrape of /metrics. The thread publishes an immutable snapshot each interval.
//!
//! Without a driver (no `libnvidia-ml.so.1`, no kernel module, no permission) the sampler logs
//! once and publishes nothing. A function the driver lacks (`NotSupported`, `FunctionNotFound`,
//! or a symbol missing from the library) drops only that reading. GPM (Hopper and newer) needs
//! two samples, so its readings appear from the second tick on.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter, TemperatureSensor};
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::gpm::gpm_metrics_get;
use nvml_wrapper::{Device, GpmSample, Nvml};

use crate::gpu::config::NvmlConfig;
use crate::gpu::reading::GpuReading;
use crate::gpu::visible::DeviceFilter;

/// GPM needs its two samples at least this far apart (nvml.h: internal refresh rate).
const GPM_MIN_GAP: Duration = Duration::from_millis(100);

/// Loads NVML from `library` (or the loader's search path) and initializes it.
pub fn open(library: Option<&Path>) -> Result<Nvml, NvmlError> {
    match library {
        Some(p) => Nvml::builder().lib_path(OsStr::new(p)).init(),
        None => Nvml::init(),
    }
}

/// Previous GPM sample per device UUID, kept between ticks.
#[derive(Default)]
pub struct GpmState<'n> {
    prev: HashMap<String, (Instant, GpmSample<'n>)>,
}

/// Keeps a reading, or drops it when the driver cannot give it.
fn keep<T>(r: Result<T, NvmlError>, what: &str, uuid: &str) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e @ (NvmlError::NotSupported | NvmlError::FunctionNotFound | NvmlError::FailedToLoadSymbol(_))) => {
            tracing::trace!(gpu = uuid, reading = what, "not available: {e}");
            None
        }
        Err(e) => {
            tracing::debug!(gpu = uuid, reading = what, "NVML error: {e}");
            None
        }
    }
}

/// One pass over the devices the filter keeps. Devices whose UUID cannot be read are skipped:
/// without it they cannot be joined to anything.
pub fn sample<'n>(nvml: &'n Nvml, filter: &DeviceFilter, gpm: &mut GpmState<'n>) -> Vec<GpuReading> {
    let count = match nvml.device_count() {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!("NVML device count failed: {e}");
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for index in 0..count {
        let Ok(device) = nvml.device_by_index(index) else { continue };
        let Ok(uuid) = device.uuid() else { continue };
        if !filter.keeps(index, &uuid) {
            continue;
        }
        let mut r = read_device(&device, index, &uuid);
        read_gpm(nvml, &device, &uuid, gpm, &mut r);
        out.push(r);
    }
    out
}

fn read_device(d: &Device<'_>, index: u32, uuid: &str) -> GpuReading {
    let u = uuid;
    let util = keep(d.utilization_rates(), "utilization", u);
    let mem = keep(d.memory_info(), "memory", u);
    GpuReading {
        index: index.to_string(),
        uuid: uuid.to_string(),
        name: keep(d.name(), "name", u).unwrap_or_default(),
        gpu_utilization_ratio: util.as_ref().map(|x| f64::from(x.gpu) / 100.0),
        memory_controller_utilization_ratio: util.as_ref().map(|x| f64::from(x.memory) / 100.0),
        memory_used_bytes: mem.as_ref().map(|m| m.used as f64),
        memory_total_bytes: mem.as_ref().map(|m| m.total as f64),
        power_watts: keep(d.power_usage(), "power", u).map(|mw| f64::from(mw) / 1000.0),
        power_limit_watts: keep(d.enforced_power_limit(), "power_limit", u).map(|mw| f64::from(mw) / 1000.0),
        sm_clock_hertz: keep(d.clock_info(Clock::SM), "sm_clock", u).map(|mhz| f64::from(mhz) * 1e6),
        memory_clock_hertz: keep(d.clock_info(Clock::Memory), "memory_clock", u).map(|mhz| f64::from(mhz) * 1e6),
        temperature_celsius: keep(d.temperature(TemperatureSensor::Gpu), "temperature", u).map(f64::from),
        throttle_reasons: keep(d.current_throttle_reasons(), "throttle_reasons", u).map(|t| t.bits()),
        // NVML reports KB/s over a 20 ms window; NVIDIA's KB here is 1024 bytes.
        pcie_tx_bytes_per_second: keep(d.pcie_throughput(PcieUtilCounter::Send), "pcie_tx", u)
            .map(|kb| f64::from(kb) * 1024.0),
        pcie_rx_bytes_per_second: keep(d.pcie_throughput(PcieUtilCounter::Receive), "pcie_rx", u)
            .map(|kb| f64::from(kb) * 1024.0),
        dram_active_ratio: None,
        tensor_active_ratio: None,
        sm_occupancy_ratio: None,
    }
}

fn read_gpm<'n>(nvml: &'n Nvml, d: &Device<'n>, uuid: &str, state: &mut GpmState<'n>, r: &mut GpuReading) {
    // nvml-wrapper frees samples in Drop through a symbol it unwraps: without
    // nvmlGpmSampleFree in the library, taking a sample would later panic.
    if nvml.lib().nvmlGpmSampleFree.is_err() || !keep(d.gpm_support(), "gpm", uuid).unwrap_or(false) {
        return;
    }
    let now = Instant::now();
    if let Some((t, _)) = state.prev.get(uuid)
        && now.duration_since(*t) < GPM_MIN_GAP
    {
        return;
    }
    let Some(new) = keep(d.gpm_sample(), "gpm_sample", uuid) else { return };
    if let Some((_, old)) = state.prev.get(uuid) {
        let ids = [GpmMetricId::DramBwUtil, GpmMetricId::AnyTensorUtil, GpmMetricId::SmOccupancy];
        if let Some(results) = keep(gpm_metrics_get(nvml, old, &new, &ids), "gpm_metrics", uuid) {
            for (id, res) in ids.iter().zip(results) {
                // GPM utilizations are 0–100.
                let Some(v) = keep(res, "gpm_metric", uuid).map(|m| m.value / 100.0) else { continue };
                match id {
                    GpmMetricId::DramBwUtil => r.dram_active_ratio = Some(v),
                    GpmMetricId::AnyTensorUtil => r.tensor_active_ratio = Some(v),
                    _ => r.sm_occupancy_ratio = Some(v),
                }
            }
        }
    }
    state.prev.insert(uuid.to_string(), (now, new));
}

/// Whether NVML could be initialized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NvmlStatus {
    Starting,
    Running,
    /// Disabled in config.
    Disabled,
    /// No driver or library; the message says why.
    Unavailable(String),
}

/// The sampler thread and its latest snapshot. Dropping it tells the thread to stop without
/// waiting (a hung NVML call must not hang shutdown); [`NvmlSampler::stop`] waits.
pub struct NvmlSampler {
    latest: Arc<ArcSwap<Vec<GpuReading>>>,
    status: Arc<ArcSwap<NvmlStatus>>,
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl NvmlSampler {
    /// Starts sampling every `cfg.interval` (at least 100 ms, for GPM). `visible_devices` is
    /// the value of `NVIDIA_VISIBLE_DEVICES`, passed in so tests need not touch the environment.
    pub fn spawn(cfg: &NvmlConfig, visible_devices: Option<&str>) -> NvmlSampler {
        let latest = Arc::new(ArcSwap::from_pointee(Vec::new()));
        let status = Arc::new(ArcSwap::from_pointee(NvmlStatus::Starting));
        if !cfg.enabled {
            status.store(Arc::new(NvmlStatus::Disabled));
            return NvmlSampler { latest, status, stop: None, thread: None };
        }
        let filter = DeviceFilter::resolve(&cfg.devices, visible_devices);
        let interval = cfg.interval.max(GPM_MIN_GAP);
        let library = cfg.library.clone();
        let (tx, rx) = mpsc::channel::<()>();
        let (l, s) = (latest.clone(), status.clone());
        let thread = std::thread::Builder::new().name("nvml-sampler".into()).spawn(move || {
            let nvml = match open(library.as_deref()) {
                Ok(n) => n,
                Err(e) => {
                    let where_ = library.as_ref().map_or("libnvidia-ml.so.1".to_string(), |p| p.display().to_string());
                    tracing::warn!(
                        "GPU telemetry from NVML is off: cannot load {where_}: {e}. \
                         Give the container a GPU (or NVIDIA_VISIBLE_DEVICES=all with \
                         NVIDIA_DRIVER_CAPABILITIES=utility), set gpu.nvml.library, or use gpu.dcgm."
                    );
                    s.store(Arc::new(NvmlStatus::Unavailable(e.to_string())));
                    return;
                }
            };
            s.store(Arc::new(NvmlStatus::Running));
            let mut gpm = GpmState::default();
            loop {
                l.store(Arc::new(sample(&nvml, &filter, &mut gpm)));
                match rx.recv_timeout(interval) {
                    Err(RecvTimeoutError::Timeout) => continue,
                    _ => break,
                }
            }
        });
        match thread {
            Ok(t) => NvmlSampler { latest, status, stop: Some(tx), thread: Some(t) },
            Err(e) => {
                status.store(Arc::new(NvmlStatus::Unavailable(format!("cannot start the NVML thread: {e}"))));
                NvmlSampler { latest, status, stop: None, thread: None }
            }
        }
    }

    /// The latest snapshot (empty before the first tick or without a driver).
    pub fn latest(&self) -> Arc<Vec<GpuReading>> {
        self.latest.load_full()
    }

    /// A handle the report builder can keep to read snapshots without the sampler.
    pub fn shared(&self) -> Arc<ArcSwap<Vec<GpuReading>>> {
        self.latest.clone()
    }

    pub fn status(&self) -> NvmlStatus {
        (**self.status.load()).clone()
    }
}

impl NvmlSampler {
    /// Stops the thread and waits for it (and so for `nvmlShutdown`).
    pub fn stop(mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for NvmlSampler {
    fn drop(&mut self) {
        drop(self.stop.take());
    }
}

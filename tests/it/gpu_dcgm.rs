//! dcgm-exporter: the real fixture, label variants, 4.9 units, blank sentinels and the pod join.

use crate::tools;

use goodput::export::gpu::gpu_samples;
use goodput::gpu::config::DcgmConfig;
use goodput::gpu::dcgm::{self, PodSelector, own_gpus};
use goodput::parse::{Limits, parse};

const UUID: &str = "GPU-a8394b51-c086-568a-9f1a-c1e1c934c44c";
const MIB: f64 = 1_048_576.0;

fn fixture() -> String {
    let path = tools::real_fixture("dcgm-exporter-linode-lke-ai-conformance.prom");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The raw value of the one line whose name is `name`, read without the project's parser.
fn raw(body: &str, name: &str) -> f64 {
    let line = body.lines().find(|l| l.starts_with(&format!("{name}{{"))).unwrap();
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

fn cfg(uuids: &[&str]) -> DcgmConfig {
    DcgmConfig {
        url: "http://127.0.0.1:9400/metrics".into(),
        pod: None,
        namespace: None,
        uuids: uuids.iter().map(|s| s.to_string()).collect(),
    }
}

fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
}

#[test]
fn real_fixture_readings_in_si_units() {
    let body = fixture();
    let exp = parse(body.as_bytes(), &Limits::default()).unwrap();
    let gpus = dcgm::gpus(&exp);
    assert_eq!(gpus.len(), 1);
    let r = gpus[0].to_reading();
    assert_eq!((r.uuid.as_str(), r.index.as_str(), r.name.as_str()), (UUID, "0", "NVIDIA RTX 4000 Ada Generation"));
    assert_eq!(r.sm_clock_hertz, Some(raw(&body, "DCGM_FI_DEV_SM_CLOCK") * 1e6));
    assert_eq!(r.memory_clock_hertz, Some(raw(&body, "DCGM_FI_DEV_MEM_CLOCK") * 1e6));
    assert_eq!(r.power_watts, Some(raw(&body, "DCGM_FI_DEV_POWER_USAGE")));
    assert_eq!(r.temperature_celsius, Some(raw(&body, "DCGM_FI_DEV_GPU_TEMP")));
    assert_eq!(r.memory_used_bytes, Some(raw(&body, "DCGM_FI_DEV_FB_USED") * MIB));
    // No capacity field in 4.x defaults: total = used + free + reserved = 1 + 20015 + 457 MiB.
    assert_eq!(r.memory_total_bytes, Some(20473.0 * MIB));
    assert_eq!(r.dram_active_ratio, Some(raw(&body, "DCGM_FI_PROF_DRAM_ACTIVE")));
    assert_eq!(r.pcie_tx_bytes_per_second, Some(raw(&body, "DCGM_FI_PROF_PCIE_TX_BYTES")));
    assert_eq!(r.sm_occupancy_ratio, None, "not in the default CSV");
    assert_eq!(gpus[0].hostname.as_deref(), Some("lke529760-766837-0a634ab30000"));
    let pod = gpus[0].pod.as_ref().unwrap();
    assert_eq!(
        (pod.namespace.as_str(), pod.pod.as_str(), pod.container.as_deref()),
        ("default", "cuda-75454ffb9f-8ljq7", Some("cuda"))
    );
}

#[test]
fn real_fixture_pod_join() {
    let body = fixture();
    let exp = parse(body.as_bytes(), &Limits::default()).unwrap();
    let gpus = dcgm::gpus(&exp);
    let mine =
        PodSelector::resolve(&cfg(&[]), env(&[("POD_NAME", "cuda-75454ffb9f-8ljq7"), ("POD_NAMESPACE", "default")]));
    assert_eq!(own_gpus(&gpus, &mine).iter().map(|r| r.uuid.as_str()).collect::<Vec<_>>(), [UUID]);
    let other = PodSelector::resolve(&cfg(&[]), env(&[("POD_NAME", "vllm-0"), ("POD_NAMESPACE", "default")]));
    assert!(own_gpus(&gpus, &other).is_empty());
    let wrong_ns = PodSelector::resolve(
        &cfg(&[]),
        env(&[("POD_NAME", "cuda-75454ffb9f-8ljq7"), ("POD_NAMESPACE", "kube-system")]),
    );
    assert!(own_gpus(&gpus, &wrong_ns).is_empty());
    let container = PodSelector::resolve(
        &cfg(&[]),
        env(&[("POD_NAME", "cuda-75454ffb9f-8ljq7"), ("POD_NAMESPACE", "default"), ("CONTAINER_NAME", "sidecar")]),
    );
    assert!(own_gpus(&gpus, &container).is_empty());
    // Configured UUIDs win over the Downward API.
    let by_uuid = PodSelector::resolve(&cfg(&[UUID]), env(&[("POD_NAME", "vllm-0"), ("POD_NAMESPACE", "x")]));
    assert_eq!(own_gpus(&gpus, &by_uuid).len(), 1);
    assert_eq!(PodSelector::resolve(&cfg(&[]), env(&[])), PodSelector::Everything);
    // Exported families carry the fixture's values.
    let s = gpu_samples(&own_gpus(&gpus, &mine), Some("llama"));
    let clock = s.iter().find(|x| x.name == "llm_slo_gpu_sm_clock_hertz").unwrap();
    assert_eq!(clock.value, raw(&body, "DCGM_FI_DEV_SM_CLOCK") * 1e6);
    assert!(clock.labels.contains(&("uuid", UUID.to_string())));
}

/// `--use-old-namespace` labels, lowercase `hostname` (4.8.3+), an unallocated GPU, a
/// time-sliced GPU shared by two pods, and blank sentinels.
const OLD_LABELS: &str = r#"# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",uuid="GPU-0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",hostname="n1",container_name="vllm",pod_name="vllm-0",pod_namespace="serving"} 91
DCGM_FI_DEV_GPU_UTIL{gpu="1",uuid="GPU-1",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",hostname="n1",container_name="vllm",pod_name="vllm-0",pod_namespace="serving"} 89
DCGM_FI_DEV_GPU_UTIL{gpu="2",uuid="GPU-2",device="nvidia2",modelName="NVIDIA H100 80GB HBM3",hostname="n1"} 0
DCGM_FI_DEV_GPU_UTIL{gpu="3",uuid="GPU-3",device="nvidia3",modelName="NVIDIA L4",hostname="n1",container_name="a",pod_name="shared-a",pod_namespace="serving"} 40
DCGM_FI_DEV_GPU_UTIL{gpu="3",uuid="GPU-3",device="nvidia3",modelName="NVIDIA L4",hostname="n1",container_name="b",pod_name="shared-b",pod_namespace="serving"} 40
# HELP DCGM_FI_DEV_MEMORY_TEMP Memory temperature (in C).
# TYPE DCGM_FI_DEV_MEMORY_TEMP gauge
DCGM_FI_DEV_MEMORY_TEMP{gpu="0",uuid="GPU-0",modelName="NVIDIA H100 80GB HBM3",pod_name="vllm-0",pod_namespace="serving"} 9223372036854775794
# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{gpu="0",uuid="GPU-0",modelName="NVIDIA H100 80GB HBM3",pod_name="vllm-0",pod_namespace="serving"} 2147483632
DCGM_FI_DEV_GPU_TEMP{gpu="1",uuid="GPU-1",modelName="NVIDIA H100 80GB HBM3",pod_name="vllm-0",pod_namespace="serving"} 61
# HELP DCGM_FI_PROF_SM_OCCUPANCY The ratio of number of warps resident on an SM.
# TYPE DCGM_FI_PROF_SM_OCCUPANCY gauge
DCGM_FI_PROF_SM_OCCUPANCY{gpu="0",uuid="GPU-0",modelName="NVIDIA H100 80GB HBM3",pod_name="vllm-0",pod_namespace="serving"} 140737488355328
DCGM_FI_PROF_SM_OCCUPANCY{gpu="1",uuid="GPU-1",modelName="NVIDIA H100 80GB HBM3",pod_name="vllm-0",pod_namespace="serving"} 0.25
"#;

#[test]
fn old_namespace_labels_blanks_and_shared_gpus() {
    let exp = parse(OLD_LABELS.as_bytes(), &Limits::default()).unwrap();
    assert!(dcgm::is_dcgm(&exp));
    let gpus = dcgm::gpus(&exp);
    assert_eq!(gpus.iter().map(|g| g.uuid.as_str()).collect::<Vec<_>>(), ["GPU-0", "GPU-1", "GPU-2", "GPU-3"]);
    assert_eq!(gpus[0].hostname.as_deref(), Some("n1"));
    assert_eq!(gpus[0].pod.as_ref().unwrap().container.as_deref(), Some("vllm"));
    assert!(gpus[2].pod.is_none() && gpus[2].pods.is_empty());
    assert_eq!(gpus[3].pods.len(), 2);
    let r0 = gpus[0].to_reading();
    assert_eq!(r0.gpu_utilization_ratio, Some(0.91));
    // int64, int32 and FP64 blanks are dropped, not reported.
    assert!(!gpus[0].readings.contains_key("memory_temperature_celsius"));
    assert_eq!((r0.temperature_celsius, r0.sm_occupancy_ratio), (None, None));
    assert_eq!(gpus[1].to_reading().temperature_celsius, Some(61.0));
    assert_eq!(gpus[1].to_reading().sm_occupancy_ratio, Some(0.25));

    let serving = |pod: &str| {
        let sel = PodSelector::resolve(&cfg(&[]), env(&[("POD_NAME", pod), ("POD_NAMESPACE", "serving")]));
        own_gpus(&gpus, &sel).into_iter().map(|r| r.uuid).collect::<Vec<_>>()
    };
    assert_eq!(serving("vllm-0"), ["GPU-0", "GPU-1"]);
    assert_eq!(serving("shared-a"), ["GPU-3"]);
    assert_eq!(serving("shared-b"), ["GPU-3"]);
    let mut c = cfg(&[]);
    c.pod = Some("vllm-0".into());
    c.namespace = Some("serving".into());
    assert_eq!(own_gpus(&gpus, &PodSelector::resolve(&c, env(&[]))).len(), 2);
}

/// dcgm-exporter 4.9 reports SI units; HELP text says so, and the capacity field is new.
const V49_UNITS: &str = r#"# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in Hz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-9",modelName="NVIDIA H200"} 1980000000
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in B).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-9",modelName="NVIDIA H200"} 42949672960
# HELP DCGM_FI_DEV_FB_CAPACITY_BYTES Framebuffer memory capacity (in B).
# TYPE DCGM_FI_DEV_FB_CAPACITY_BYTES gauge
DCGM_FI_DEV_FB_CAPACITY_BYTES{gpu="0",UUID="GPU-9",modelName="NVIDIA H200"} 150754820096
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in ratio).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-9",modelName="NVIDIA H200"} 0.75
"#;

#[test]
fn units_stated_in_help_win() {
    let exp = parse(V49_UNITS.as_bytes(), &Limits::default()).unwrap();
    let r = dcgm::gpus(&exp)[0].to_reading();
    assert_eq!(r.sm_clock_hertz, Some(1.98e9));
    assert_eq!(r.memory_used_bytes, Some(42_949_672_960.0));
    assert_eq!(r.memory_total_bytes, Some(150_754_820_096.0));
    assert_eq!(r.gpu_utilization_ratio, Some(0.75));
    assert_eq!(dcgm::help_factor("SM clock frequency (in MHz)."), Some(1e6));
    assert_eq!(dcgm::help_factor("Framebuffer memory free (in MiB)."), Some(MIB));
    assert_eq!(dcgm::help_factor("Number of remapped rows"), None);
}

#[test]
fn read_joins_in_one_call() {
    let sel = PodSelector::Uuids(vec!["gpu-1".into()]);
    let got = dcgm::read(OLD_LABELS.as_bytes(), &Limits::default(), &sel).unwrap();
    assert_eq!(got.iter().map(|r| r.uuid.as_str()).collect::<Vec<_>>(), ["GPU-1"]);
    assert!(dcgm::read(b"DCGM_FI_DEV_GPU_UTIL{uuid=\"x\" 1\n", &Limits::default(), &sel).is_err());
}

proptest::proptest! {
    /// Arbitrary values (sentinels, negatives, huge, NaN) and label spellings never panic, and
    /// every reading that survives is finite.
    #[test]
    fn never_panics_on_odd_values(
        vals in proptest::collection::vec(proptest::prop_oneof![
            proptest::num::f64::ANY,
            proptest::strategy::Just(9.223_372_036_854_776e18),
            proptest::strategy::Just(2147483632.0),
            proptest::strategy::Just(140737488355328.0),
        ], 1..12),
        old in proptest::bool::ANY,
    ) {
        let (u, p, n) = if old { ("uuid", "pod_name", "pod_namespace") } else { ("UUID", "pod", "namespace") };
        let mut body = String::new();
        for (i, v) in vals.iter().enumerate() {
            let (name, _, _) = dcgm::READINGS[i % dcgm::READINGS.len()];
            body.push_str(&format!("{name}{{gpu=\"{i}\",{u}=\"GPU-{}\",{p}=\"x\",{n}=\"y\"}} {v:?}\n", i % 3));
        }
        if let Ok(exp) = parse(body.as_bytes(), &Limits::default()) {
            for g in dcgm::gpus(&exp) {
                proptest::prop_assert!(g.readings.values().all(|v| v.is_finite()));
                let _ = g.to_reading();
            }
        }
    }
}

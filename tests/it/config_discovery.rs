//! `discovery:` and `scrape.target_grace` in the config: every source read into the typed
//! config with its defaults, discovery standing in for `targets:`, and each mistake reported
//! at the line and column of the value that causes it. `kubernetes:` is read in a build
//! with the `kubernetes` feature and refused, where it is written, by `check`, `run` and a
//! reload of the real binary in a build without it.

use std::time::Duration;

use crate::support::PATIENCE;

use goodput::config::{self, Discovery, DnsRecord};

/// The 1-based column of `needle` in line `line` (1-based) of `yaml`.
fn col(yaml: &str, line: u32, needle: &str) -> u32 {
    let l = yaml.lines().nth(line as usize - 1).unwrap();
    l.find(needle).unwrap_or_else(|| panic!("{needle:?} not in {l:?}")) as u32 + 1
}

#[test]
fn every_source_is_read_with_its_defaults_and_targets_become_optional() {
    let yaml = "scrape: {target_grace: 2m}
discovery:
  - file_sd: {files: ['/etc/goodput/targets/*.json']}
  - dns: {names: [_metrics._tcp.vllm.llm.svc.cluster.local], refresh: 10s}
  - dns: {names: [vllm.llm.svc], type: a, port: 8000, nameserver: '10.96.0.10:53'}
";
    let c = config::from_str(yaml, "d.yaml").expect("valid").config;
    assert!(c.targets.is_empty());
    assert_eq!(c.scrape.target_grace, Duration::from_secs(120));
    let Discovery::FileSd(f) = &c.discovery[0] else { panic!("{:?}", c.discovery[0]) };
    assert_eq!(
        (f.files.as_slice(), f.refresh),
        (&["/etc/goodput/targets/*.json".to_string()][..], config::DEFAULT_REFRESH)
    );
    let Discovery::Dns(srv) = &c.discovery[1] else { panic!() };
    assert_eq!(
        (srv.record, srv.port, srv.refresh, srv.nameserver),
        (DnsRecord::Srv, None, Duration::from_secs(10), None)
    );
    let Discovery::Dns(a) = &c.discovery[2] else { panic!() };
    assert_eq!((a.record, a.port), (DnsRecord::A, Some(8000)));
    assert_eq!(a.nameserver, Some("10.96.0.10:53".parse().unwrap()));

    let defaults =
        config::from_str("targets: [{name: a, url: 'http://127.0.0.1:1/metrics'}]\n", "d.yaml").unwrap().config;
    assert_eq!(defaults.scrape.target_grace, config::DEFAULT_TARGET_GRACE);
    assert!(defaults.discovery.is_empty());
}

#[test]
fn each_mistake_is_reported_where_it_is_written() {
    let yaml = "discovery:
  - dns: {names: [a.b], type: A}
  - dns: {names: [a.b], type: MX}
  - {file_sd: {files: [x]}, dns: {names: [y]}}
  - file_sd: {files: ['[oops'], refresh: soon}
  - dns: {names: [], nameserver: here}
  - kubernetes: {namespace: ' ', port: metrics}
";
    let errs = match config::from_str(yaml, "config.yaml") {
        Ok(_) => panic!("expected errors"),
        Err(e) => e.0,
    };
    let shown: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
    let expect = [
        (2, col(yaml, 2, "{names"), "dns with type A or AAAA needs `port:`"),
        (3, col(yaml, 3, "MX"), "dns.type \"MX\" is not supported; expected A, AAAA or SRV"),
        (4, col(yaml, 4, "{file_sd"), "each discovery entry sets exactly one of file_sd, dns, kubernetes"),
        (5, col(yaml, 5, "'[oops'"), "file_sd.files: \"[oops\" is not a valid pattern"),
        (6, col(yaml, 6, "[]"), "dns.names is empty"),
        (7, col(yaml, 7, "' '"), "kubernetes.namespace is empty"),
    ];
    for (line, column, text) in expect {
        let at = format!("config.yaml:{line}:{column}: ");
        assert!(shown.iter().any(|s| s.starts_with(&at) && s.contains(text)), "no {at}{text} in {shown:#?}");
    }
}

#[test]
fn an_empty_targets_list_is_fine_beside_discovery_but_not_alone() {
    let with = "targets: []\ndiscovery:\n  - file_sd: {files: [/t/*.json]}\n";
    assert!(config::from_str(with, "d.yaml").is_ok());
    let errs = config::from_str("targets: []\n", "d.yaml").unwrap_err().0;
    assert!(errs[0].message.contains("or a `discovery:` source"), "{errs:?}");
}

const KUBERNETES: &str = "discovery:
  - file_sd: {files: ['/etc/goodput/targets/*.json']}
  - kubernetes: {namespace: llm, selector: 'app=vllm', port: metrics}
";

#[test]
#[cfg(feature = "kubernetes")]
fn kubernetes_discovery_is_read_in_a_build_with_it() {
    let c = config::from_str(KUBERNETES, "d.yaml").expect("valid").config;
    let Discovery::Kubernetes(k) = &c.discovery[1] else { panic!("{:?}", c.discovery[1]) };
    assert_eq!((k.namespace.as_str(), k.selector.as_str(), k.port.as_str()), ("llm", "app=vllm", "metrics"));
}

/// What a build without the feature says, wherever it refuses `kubernetes:`.
#[cfg(not(feature = "kubernetes"))]
fn refused_at(text: &str, file: &str, line: u32) {
    let at = format!("{file}:{line}:17: kubernetes discovery is not in this build of goodput");
    assert!(text.contains(&at), "no {at:?} in:\n{text}");
    assert!(text.contains("rebuild it with `cargo build --release --features kubernetes`"), "{text}");
    assert!(text.contains("the container image, which has it"), "{text}");
}

#[test]
#[cfg(not(feature = "kubernetes"))]
fn kubernetes_discovery_is_refused_where_it_is_written_in_a_build_without_it() {
    let errs = config::from_str(KUBERNETES, "d.yaml").unwrap_err().0;
    assert_eq!(errs.len(), 1, "{errs:?}");
    refused_at(&errs[0].to_string(), "d.yaml", 3);
}

#[test]
#[cfg(not(feature = "kubernetes"))]
fn check_and_run_refuse_kubernetes_discovery_in_a_build_without_it() {
    use std::process::Command;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("goodput.yaml");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    std::fs::write(&file, format!("listen: 127.0.0.1:{port}\n{KUBERNETES}")).unwrap();
    let shown = file.display().to_string();
    let check = Command::new(env!("CARGO_BIN_EXE_goodput")).arg("check").arg("--config").arg(&file).output().unwrap();
    assert_eq!(check.status.code(), Some(1), "goodput check accepted it");
    refused_at(&String::from_utf8_lossy(&check.stderr), &shown, 4);
    // `run` stops before it listens: nothing would have been scraped.
    let run = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["--log-format", "human", "run", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!run.status.success(), "goodput run started");
    let out = format!("{}{}", String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    refused_at(&out, &shown, 4);
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "goodput run listened on {port}");
}

/// A reload to a config with `kubernetes:` is refused like any invalid config: the running
/// one stays, `llm_slo_config_last_reload_successful` is 0, and the log says where.
#[test]
#[cfg(not(feature = "kubernetes"))]
fn a_reload_to_kubernetes_discovery_is_refused_in_a_build_without_it() {
    use std::io::Read as _;
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("goodput.yaml");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let head = format!("listen: 127.0.0.1:{port}\n");
    std::fs::write(&file, format!("{head}discovery:\n  - file_sd: {{files: ['/nonexistent/*.json']}}\n")).unwrap();
    let log = dir.path().join("daemon.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["--log-format", "human", "run", "--config"])
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    struct Kill(u32);
    impl Drop for Kill {
        fn drop(&mut self) {
            // SAFETY: kill(2) on this test's own child.
            unsafe { libc::kill(self.0 as i32, libc::SIGKILL) };
        }
    }
    let _guard = Kill(child.id());
    let reload_ok = || -> Option<f64> {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
        std::io::Write::write_all(&mut s, b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok()?;
        let mut body = String::new();
        s.read_to_string(&mut body).ok()?;
        let line = body.lines().find(|l| l.starts_with("llm_slo_config_last_reload_successful "))?;
        line.rsplit(' ').next()?.parse().ok()
    };
    let until = |want: f64| {
        let began = std::time::Instant::now();
        while began.elapsed() < PATIENCE {
            if reload_ok() == Some(want) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("llm_slo_config_last_reload_successful never {want}:\n{}", std::fs::read_to_string(&log).unwrap());
    };
    until(1.0);
    std::fs::write(&file, format!("{head}{KUBERNETES}")).unwrap();
    // SAFETY: kill(2) on this test's own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGHUP) }, 0);
    until(0.0);
    let shown = file.display().to_string();
    refused_at(&std::fs::read_to_string(&log).unwrap(), &shown, 4);
    assert!(child.try_wait().unwrap().is_none(), "the daemon stopped instead of keeping its config");
}

//! `discovery:` and `scrape.target_grace` in the config: every source read into the typed
//! config with its defaults, discovery standing in for `targets:`, and each mistake reported
//! at the line and column of the value that causes it.

use std::time::Duration;

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
  - kubernetes: {namespace: llm, selector: 'app=vllm', port: metrics}
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
    let Discovery::Kubernetes(k) = &c.discovery[3] else { panic!() };
    assert_eq!((k.namespace.as_str(), k.selector.as_str(), k.port.as_str()), ("llm", "app=vllm", "metrics"));

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

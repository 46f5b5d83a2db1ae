//! The integration tests, linked as one binary against the daemon: each module is a former
//! test file (`tests/it/<name>.rs`), the helpers they share are modules beside them, compiled
//! once. Run one file's tests with `cargo test --test it <name>::`, one test with
//! `cargo test --test it <name>::<test>`. libtest runs the tests of every module on as many
//! threads as the machine has cores, as it ran each former binary's.
//!
//! A few tests stand alone in tests/, each for a reason the module that checks the list says
//! (`binaries`): the layering check, the /metrics cache's allocation counts (its own global
//! allocator), and Kubernetes discovery (behind the `kubernetes` feature).

// The helpers, shared by the modules below.
mod accuracy_support;
mod capacity_support;
mod common;
mod common_am;
mod fake_nvml;
mod net;
mod proc_common;
mod reload_common;
mod render_support;
mod rules_common;
mod sim_api_common;
mod sim_common;
mod support;
mod tap_common;
mod tap_truth_support;
mod tools;

// The tests.
mod accuracy_divergence;
mod accuracy_ground_truth;
mod adapt_fixtures;
mod alert_alertmanager;
mod alert_coverage;
mod alert_delivery_metrics;
mod alert_e2e;
mod alert_engine;
mod alert_from_report;
mod alert_scope;
mod alert_target_down;
mod alert_webhook;
mod binaries;
mod brackets_sim;
mod budget_daemon;
mod build_info;
mod capacity_alert;
mod capacity_ground_truth;
mod check_probe;
mod cli_demo;
mod cli_flags;
mod cli_inspect;
mod cli_pipe;
mod cli_replay;
mod clock_step;
mod config_all_errors;
mod config_discovery;
mod config_errors;
mod config_reload;
mod config_reload_against;
mod config_reload_budget;
mod config_reload_listeners;
mod config_reload_sections;
mod config_valid;
mod config_wait;
mod daemon_cli;
mod daemon_connections;
mod daemon_coverage;
mod daemon_gpu;
mod daemon_isolation;
mod daemon_live;
mod daemon_logs;
mod daemon_scrape;
mod daemon_scrape_warnings;
mod daemon_shutdown;
mod demo_e2e;
mod demo_one_truth;
mod discovery_dns;
mod discovery_file_sd;
mod discovery_limits;
mod gpu_dcgm;
mod gpu_nvml;
mod identity_replicas;
mod ingest_reuse;
mod judgment_rules;
mod llamacpp_real;
mod metrics_limits;
mod metrics_lint;
mod metrics_render;
mod oracle_prometheus;
mod otlp_config;
mod otlp_hostile;
mod otlp_http;
mod otlp_python;
mod parse_fixtures;
mod parse_roundtrip;
mod readme;
mod request_exact;
mod request_hostile;
mod rules_exact;
mod rules_promtool;
mod rules_replay;
mod rules_scope;
mod rules_target_down;
mod runbooks;
mod secrets_redacted;
mod sim_api;
mod sim_api_wire;
mod sim_determinism;
mod sim_format;
mod sim_live;
mod sim_profiles;
mod sim_prometheus;
mod sim_truth;
mod state_faults;
mod state_restart;
mod status_page;
mod tap_daemon;
mod tap_ground_truth;
mod tap_hostile;
mod tap_openai_sdk;
mod tap_openai_sim;
mod tap_retry;
mod tap_status;
mod tap_wire;
mod tools_decide;
mod ttft_gap_paired;

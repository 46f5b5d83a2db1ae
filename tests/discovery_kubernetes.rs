//! Kubernetes pod discovery in the real binary (built with `--features kubernetes`),
//! against a stand-in API server on 127.0.0.1 — no API server can run here — that speaks
//! the real list/watch protocol with recorded responses: a PodList, then a watch stream of
//! ADDED, MODIFIED, BOOKMARK and DELETED events, then a `410 Gone` ERROR event that forces
//! a new list. The pods' IPs and named container ports point at real engines, so each pod
//! found is scraped; the daemon reaches the stand-in through KUBECONFIG, as kubectl would.

#[path = "it/common/mod.rs"]
mod common;
#[path = "it/tools/mod.rs"]
mod tools;

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use common::Fixture;
use tokio::sync::mpsc;

const BIN: &str = env!("CARGO_BIN_EXE_goodput");

/// How long a wait for the daemon may take: as `PATIENCE` in tests/it/support, which this
/// binary does not link. CI runs the tests on 2 cores beside the whole `it` harness, and a
/// wait ends as soon as its condition holds.
const PATIENCE: Duration = Duration::from_secs(90);

/// What the stand-in has been asked, and the open watch's event feed.
#[derive(Default)]
struct ApiServer {
    /// The query string of every request, in order (`LIST …` or `WATCH …`).
    requests: Vec<String>,
    /// The PodList each list returns, in turn (the last one repeats).
    lists: Vec<serde_json::Value>,
    lists_served: usize,
    watch: Option<mpsc::UnboundedSender<String>>,
}

type Shared = Arc<Mutex<ApiServer>>;

async fn pods(State(s): State<Shared>, RawQuery(q): RawQuery) -> axum::response::Response {
    let q = q.unwrap_or_default();
    let mut st = s.lock().unwrap();
    if q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1") {
        st.requests.push(format!("WATCH {q}"));
        let (tx, rx) = mpsc::unbounded_channel::<String>();
        st.watch = Some(tx);
        let stream = futures_util::stream::unfold(rx, |mut rx| async move {
            let line = rx.recv().await?;
            Some((Ok::<_, std::io::Error>(Bytes::from(line + "\n")), rx))
        });
        return axum::response::Response::builder()
            .header("content-type", "application/json")
            .body(Body::from_stream(stream))
            .unwrap();
    }
    st.requests.push(format!("LIST {q}"));
    let i = st.lists_served.min(st.lists.len() - 1);
    st.lists_served += 1;
    axum::response::Response::builder()
        .header("content-type", "application/json")
        .body(Body::from(st.lists[i].to_string()))
        .unwrap()
}

/// A running pod recorded as the API server returns it, its metrics port named `metrics`.
fn pod(name: &str, port: u16, rv: u32) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "llm", "uid": format!("uid-{name}"),
                     "resourceVersion": rv.to_string(), "labels": {"app": "vllm"}},
        "spec": {"nodeName": "gpu-node-1", "containers": [{"name": "vllm", "image": "vllm/vllm-openai",
                 "ports": [{"name": "http", "containerPort": 1}, {"name": "metrics", "containerPort": port}]}]},
        "status": {"phase": "Running", "podIP": "127.0.0.1"}
    })
}

fn pod_list(rv: u32, items: Vec<serde_json::Value>) -> serde_json::Value {
    serde_json::json!({"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": rv.to_string()}, "items": items})
}

fn event(kind: &str, object: serde_json::Value) -> String {
    serde_json::json!({"type": kind, "object": object}).to_string()
}

async fn report(client: &reqwest::Client, port: u16) -> Option<serde_json::Value> {
    let r = client.get(format!("http://127.0.0.1:{port}/api/v1/report")).send().await.ok()?;
    serde_json::from_str(&r.text().await.ok()?).ok()
}

fn present(r: &serde_json::Value, name: &str) -> bool {
    r["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| t["target"] == name && t["health"]["up"] == true && t["health"]["vanished_ms"].is_null())
}

fn vanished(r: &serde_json::Value, name: &str) -> bool {
    r["targets"].as_array().into_iter().flatten().any(|t| t["target"] == name && t["health"]["vanished_ms"].is_i64())
}

struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_are_listed_watched_and_listed_again_after_410_gone() {
    goodput::scrape::install_crypto_provider();
    let engines: Vec<Fixture> =
        futures_util::future::join_all((0..4).map(|_| Fixture::counting(|n| common::vllm_body(n, 1_700_000_000.0))))
            .await;
    let [a, b, c, d] = [0, 1, 2, 3].map(|i| engines[i].addr.port());

    let api: Shared = Arc::new(Mutex::new(ApiServer {
        lists: vec![
            pod_list(100, vec![pod("vllm-a", a, 90), pod("vllm-b", b, 91)]),
            pod_list(200, vec![pod("vllm-a", a, 90), pod("vllm-d", d, 199)]),
        ],
        ..Default::default()
    }));
    let router =
        axum::Router::new().route("/api/v1/namespaces/llm/pods", axum::routing::get(pods)).with_state(api.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: stand-in\nclusters:\n- name: stand-in\n  cluster: {{server: 'http://{server}'}}\n\
             contexts:\n- name: stand-in\n  context: {{cluster: stand-in, user: test, namespace: llm}}\nusers:\n- name: test\n  user: {{token: not-a-secret}}\n"
        ),
    )
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let cfg = dir.path().join("config.yaml");
    std::fs::write(
        &cfg,
        format!(
            "listen: 127.0.0.1:{port}\nevaluation_interval: 200ms\nscrape: {{interval: 200ms, timeout: 150ms}}\n\
             discovery:\n  - kubernetes: {{namespace: llm, selector: 'app=vllm', port: metrics}}\n"
        ),
    )
    .unwrap();
    let log = dir.path().join("daemon.log");
    let _child = Child(
        Command::new(BIN)
            .args(["run", "--config"])
            .arg(&cfg)
            .env("KUBECONFIG", &kubeconfig)
            .env("HOME", dir.path())
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let client = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(2)).build().unwrap();
    let until = |what: &'static str, ok: Box<dyn Fn(&serde_json::Value) -> bool>| {
        let (client, log) = (client.clone(), log.clone());
        async move {
            let began = std::time::Instant::now();
            while began.elapsed() < PATIENCE {
                if let Some(r) = report(&client, port).await
                    && ok(&r)
                {
                    return r;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            panic!("{what}: not seen within {PATIENCE:?}; log:\n{}", std::fs::read_to_string(&log).unwrap_or_default());
        }
    };

    // The list: both pods are targets, named namespace/pod, labelled, scraped.
    let r = until("the listed pods up", Box::new(|r| present(r, "llm/vllm-a") && present(r, "llm/vllm-b"))).await;
    let t = r["targets"].as_array().unwrap().iter().find(|t| t["target"] == "llm/vllm-a").unwrap();
    let labels = &t["health"]["labels"];
    assert_eq!(
        (labels["pod"].as_str(), labels["namespace"].as_str(), labels["node"].as_str()),
        (Some("vllm-a"), Some("llm"), Some("gpu-node-1"))
    );
    assert!(engines[0].served() > 0 && engines[1].served() > 0);
    {
        let st = api.lock().unwrap();
        assert!(
            st.requests[0].starts_with("LIST ") && st.requests[0].contains("labelSelector=app%3Dvllm"),
            "{:?}",
            st.requests
        );
    }

    // The watch, from the list's resourceVersion.
    let watch = async {
        let began = std::time::Instant::now();
        while began.elapsed() < PATIENCE {
            if let Some(tx) = api.lock().unwrap().watch.clone() {
                return tx;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no watch request: {:?}", api.lock().unwrap().requests);
    }
    .await;
    {
        let st = api.lock().unwrap();
        let w = st.requests.iter().find(|r| r.starts_with("WATCH ")).unwrap();
        assert!(w.contains("resourceVersion=100") && w.contains("allowWatchBookmarks=true"), "{w}");
    }
    watch.send(event("ADDED", pod("vllm-c", c, 101))).unwrap();
    until("the added pod up", Box::new(|r| present(r, "llm/vllm-c"))).await;

    // MODIFIED: the pod is terminating, so it is no longer a target.
    let mut terminating = pod("vllm-a", a, 102);
    terminating["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z".into();
    watch.send(event("MODIFIED", terminating)).unwrap();
    until("the terminating pod vanished", Box::new(|r| vanished(r, "llm/vllm-a") && present(r, "llm/vllm-c"))).await;
    // A bookmark changes nothing; DELETED removes.
    watch
        .send(event(
            "BOOKMARK",
            serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"resourceVersion": "150"}}),
        ))
        .unwrap();
    watch.send(event("DELETED", pod("vllm-b", b, 151))).unwrap();
    until("the deleted pod vanished", Box::new(|r| vanished(r, "llm/vllm-b") && present(r, "llm/vllm-c"))).await;

    // 410 Gone: the watcher lists again, and the new list is the truth: a is back, d is
    // new, c (not in it) is gone.
    let gone = serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                   "message": "too old resource version: 150 (190)", "reason": "Expired", "code": 410});
    watch.send(event("ERROR", gone)).unwrap();
    let r = until(
        "the re-listed pods",
        Box::new(|r| present(r, "llm/vllm-a") && present(r, "llm/vllm-d") && vanished(r, "llm/vllm-c")),
    )
    .await;
    assert!(vanished(&r, "llm/vllm-b"));
    let st = api.lock().unwrap();
    assert!(st.lists_served >= 2, "no second list after 410 Gone: {:?}", st.requests);
}

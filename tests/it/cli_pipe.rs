//! `goodput rules … | head -1` and friends end quietly when the reader goes away, as Unix
//! tools do, instead of panicking on the broken pipe (exit 101).

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

use crate::tools;

fn with_closed_stdout(args: &[&str]) -> (std::process::ExitStatus, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the read end before the command has printed anything: its first write fails.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    (out.status, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn printing_commands_end_quietly_on_a_closed_pipe() {
    let fixture = tools::real_fixture("vllm-v1-0.13ish-dynamo-worker-full.prom");
    let runs: [Vec<&str>; 2] =
        [vec!["rules", "--config", "deploy/kubernetes/base/goodput.yaml"], vec!["inspect", fixture.to_str().unwrap()]];
    for args in runs {
        let (status, stderr) = with_closed_stdout(&args);
        assert!(!stderr.contains("panicked"), "{args:?} panicked:\n{stderr}");
        assert_eq!(status.signal(), Some(libc::SIGPIPE), "{args:?} ended with {status:?}:\n{stderr}");
    }
}

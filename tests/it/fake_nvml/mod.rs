//! Builds tests/it/fake_nvml/fake_nvml.c into a temp dir as `libnvidia-ml.so.1` at test time.
//!
//! Needs a C compiler (`cc`, or `$FAKE_NVML_CC`, or `$CC`) and `nvml.h` from PyPI `nvidia-nvml-dev`
//! (`pip install nvidia-nvml-dev`), found through `$NVML_INCLUDE`, python3's site-packages,
//! or the usual CUDA include dirs. When either is missing the tests skip with a note, unless
//! GOODPUT_REQUIRE_TOOLS=1, where that is a failure.
//!
//! It reaches `crate::tools` (tests/it/tools), a module of every binary that includes it.

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct FakeNvml {
    _dir: tempfile::TempDir,
    pub library: PathBuf,
}

/// Skip (or fail under GOODPUT_REQUIRE_TOOLS=1, crate::tools) for want of `what`.
fn missing(what: &str) -> Option<FakeNvml> {
    crate::tools::missing(what, "install a C compiler and `pip install nvidia-nvml-dev` to run this test");
    None
}

fn header_dir() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("NVML_INCLUDE").map(PathBuf::from).into_iter().collect();
    let py = "import site,sysconfig\nfor p in [sysconfig.get_paths()['purelib'], site.getusersitepackages(), *site.getsitepackages()]: print(p)";
    for python in ["python3", "python"] {
        if let Ok(out) = Command::new(python).args(["-c", py]).output() {
            for site in String::from_utf8_lossy(&out.stdout).lines() {
                for cu in ["cu13", "cu12", "cu11"] {
                    dirs.push(Path::new(site).join("nvidia").join(cu).join("include"));
                }
                dirs.push(Path::new(site).join("nvidia").join("include"));
            }
            break;
        }
    }
    dirs.extend(["/usr/local/cuda/include", "/usr/include"].map(PathBuf::from));
    dirs.into_iter().find(|d| d.join("nvml.h").is_file())
}

/// Compiles the fake with extra `-D` defines; `None` (after a SKIP note) when tools are missing.
pub fn build(defines: &[&str]) -> Option<FakeNvml> {
    let Some(include) = header_dir() else { return missing("nvml.h was not found") };
    let cc = std::env::var("FAKE_NVML_CC").or_else(|_| std::env::var("CC")).unwrap_or_else(|_| "cc".to_string());
    let dir = tempfile::tempdir().expect("temp dir");
    let library = dir.path().join("libnvidia-ml.so.1");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fake_nvml/fake_nvml.c");
    let mut cmd = Command::new(&cc);
    cmd.args(["-shared", "-fPIC", "-O1", "-Wall", "-Wno-deprecated-declarations"]).arg("-I").arg(&include);
    for d in defines {
        cmd.arg(format!("-D{d}"));
    }
    cmd.arg("-o").arg(&library).arg(&source);
    match cmd.output() {
        Err(e) => missing(&format!("the C compiler {cc:?} could not run ({e})")),
        Ok(out) if !out.status.success() => {
            panic!("compiling the fake NVML failed:\n{}", String::from_utf8_lossy(&out.stderr))
        }
        Ok(_) => Some(FakeNvml { _dir: dir, library }),
    }
}

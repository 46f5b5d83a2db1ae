#!/usr/bin/env bash
# Makes a real llama.cpp `llama-server` and a small model for tests/it/llamacpp_real.rs:
#   $CACHE/bin/llama-server   built from the llama.cpp source that the llama-cpp-python
#                              source distribution on PyPI vendors (no model hub, no prebuilt UI)
#   $CACHE/model.gguf          a small llama-architecture model with seeded random weights,
#                              written with the `gguf` package; vocabulary from llama.cpp's
#                              models/ggml-vocab-llama-spm.gguf
# CACHE is $GOODPUT_LLAMACPP_CACHE, else .ci-cache/llamacpp. Each step is skipped when its
# output exists (the model is written again when tests/py/make_gguf.py changed), so only the
# first run builds (4 to 15 minutes on 2 cores, idle to busy).
# Installs what it lacks: cmake and a C++ compiler from apt (as root or through sudo), the
# openai SDK through scripts/py-clients.sh, and the `gguf` package into the same virtualenv.
# Needs python3 with venv, and PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=${GOODPUT_LLAMACPP_CACHE:-$ROOT/.ci-cache/llamacpp}
VERSION=${GOODPUT_LLAMACPP_PY_VERSION:-0.3.36}
JOBS=${GOODPUT_LLAMACPP_JOBS:-$(nproc)}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)

fail() { echo "llamacpp.sh: $*" >&2; exit 2; }

# cmake and a C++ compiler from Debian packages rather than pip, which would build cmake.
if ! command -v cmake >/dev/null || ! command -v c++ >/dev/null || ! command -v make >/dev/null; then
  command -v apt-get >/dev/null || fail "cmake, make or a C++ compiler is missing and there is no apt-get: install them"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "llamacpp.sh: apt-get install cmake build-essential" >&2
  { DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends cmake build-essential ||
    { $sudo apt-get -o DPkg::Lock::Timeout=600 update &&
      DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends cmake build-essential; }
  } >"$CACHE/apt.log" 2>&1 || { tail -20 "$CACHE/apt.log" >&2; fail "could not apt-get install cmake build-essential"; }
fi

# The Python that runs the openai client and writes the model: the request-path clients'
# virtualenv (scripts/py-clients.sh), plus gguf.
PY=$ROOT/.ci-cache/py/bin/python
if ! { [ -f "$PY" ] && "$PY" -c 'import openai' 2>/dev/null; }; then scripts/py-clients.sh; fi
"$PY" -c 'import gguf, numpy' 2>/dev/null ||
  "$PY" -m pip install -q --disable-pip-version-check 'gguf>=0.10,<1' 'numpy>=1.24'

SRC=$CACHE/llama_cpp_python-$VERSION/vendor/llama.cpp
if [ ! -f "$SRC/CMakeLists.txt" ]; then
  mkdir -p "$CACHE/sdist"
  [ -f "$CACHE/sdist/llama_cpp_python-$VERSION.tar.gz" ] ||
    "$PY" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
      "llama-cpp-python==$VERSION" -d "$CACHE/sdist"
  tar xzf "$CACHE/sdist/llama_cpp_python-$VERSION.tar.gz" -C "$CACHE"
fi

if [ ! -x "$CACHE/bin/llama-server" ]; then
  # Static libraries so that the binary runs from bin/ without the build tree; no curl,
  # OpenSSL or prebuilt web UI, which would need the network or libraries not installed here.
  cmake -S "$SRC" -B "$CACHE/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF >"$CACHE/cmake.log" 2>&1 ||
    { tail -30 "$CACHE/cmake.log" >&2; exit 1; }
  cmake --build "$CACHE/build" --target llama-server -j "$JOBS" >"$CACHE/build.log" 2>&1 ||
    { tail -30 "$CACHE/build.log" >&2; exit 1; }
  mkdir -p "$CACHE/bin"
  cp "$CACHE/build/bin/llama-server" "$CACHE/bin/llama-server.tmp"
  mv "$CACHE/bin/llama-server.tmp" "$CACHE/bin/llama-server"
fi

# The model is written again when the script that writes it changed.
STAMP=$(sha256sum tests/py/make_gguf.py | cut -d' ' -f1)
if [ ! -f "$CACHE/model.gguf" ] || [ "$(cat "$CACHE/model.gguf.source" 2>/dev/null)" != "$STAMP" ]; then
  "$PY" tests/py/make_gguf.py "$SRC/models/ggml-vocab-llama-spm.gguf" "$CACHE/model.gguf.tmp"
  mv "$CACHE/model.gguf.tmp" "$CACHE/model.gguf"
  echo "$STAMP" >"$CACHE/model.gguf.source"
fi
echo "$CACHE"

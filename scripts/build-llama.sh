#!/usr/bin/env bash
# Build llama-cpp-python portably and install it into the given Python environment.
#   scripts/build-llama.sh .venv/bin/python
#
# pip's default build detects the build machine's CPU (GGML_NATIVE). On a VM whose processor advertises AMX
# but does not grant AMX tile state, every decode of such a build dies with SIGSEGV (general protection
# fault at `ldtilecfg` in libggml-cpu). This script instead:
#   - picks explicit flags: AVX2/FMA/F16C when this CPU has them (nearly every x86-64 server since 2015),
#     plain SSE otherwise; never native detection, AVX-512 or AMX. SYNTRA_LLAMA_CMAKE_ARGS overrides them;
#   - builds the wheel with pip's cache off and keeps it in a folder keyed by version + flags + Python +
#     architecture, so a rebuild with other flags never reuses an earlier (native) build and a reinstall
#     with the same flags takes seconds;
#   - refuses a built library that contains AMX instructions;
#   - reinstalls when the environment holds a build with other flags (recorded in <venv>/.llama-build).
set -euo pipefail
py="${1:?usage: $0 PATH/TO/python}"
version="${SYNTRA_LLAMA_CPP_VERSION:-0.3.36}"
arch=$(uname -m)

if [ -n "${SYNTRA_LLAMA_CMAKE_ARGS:-}" ]; then
  cmake_args="$SYNTRA_LLAMA_CMAKE_ARGS"
elif [ "$arch" = x86_64 ] || [ "$arch" = amd64 ]; then
  flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
  has() { case " $flags " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
  off="-DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_AVX_VNNI=OFF"
  if has avx2 && has fma && has f16c; then
    cmake_args="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON $off"
  else
    echo "note: this CPU lacks AVX2/FMA/F16C: building llama.cpp for plain SSE (slower)" >&2
    cmake_args="-DGGML_NATIVE=OFF -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_BMI2=OFF $off"
  fi
else
  cmake_args="-DGGML_NATIVE=OFF"
fi

pyver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
key=$(printf '%s\n' "$version" "$cmake_args" "$pyver" "$arch" | sha256sum | cut -c1-12)
marker="$(dirname "$(dirname "$py")")/.llama-build"
if [ -f "$marker" ] && [ "$(cat "$marker")" = "$key" ] && "$py" -c 'import llama_cpp' 2>/dev/null; then
  exit 0
fi

cache="${SYNTRA_CACHE_DIR:-$HOME/.cache/syntra-dspy}/wheels/llama-cpp-python-$version-$key"
wheel=$(ls "$cache"/llama_cpp_python-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
  echo "== building llama-cpp-python $version portably (about 6 minutes on 2 cores, once per flag set) =="
  echo "   CMAKE_ARGS=$cmake_args"
  mkdir -p "$cache.tmp"
  CMAKE_ARGS="$cmake_args" FORCE_CMAKE=1 "$py" -m pip wheel -q --no-deps --no-cache-dir \
    --no-binary llama-cpp-python -w "$cache.tmp" "llama-cpp-python==$version"
  rm -rf "$cache" && mv "$cache.tmp" "$cache"
  printf '%s\n' "$cmake_args" >"$cache/CMAKE_ARGS"
  wheel=$(ls "$cache"/llama_cpp_python-*.whl | head -n 1)
fi

# The wheel holds the shared libraries: check them for AMX tile instructions before installing.
if command -v objdump >/dev/null 2>&1; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  "$py" -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); [z.extract(n, sys.argv[2]) for n in z.namelist() if "libggml-cpu" in n]' "$wheel" "$tmp"
  for lib in $(find "$tmp" -name 'libggml-cpu*.so*'); do
    if objdump -d "$lib" | grep -q ldtilecfg; then
      echo "error: $wheel contains AMX instructions (ldtilecfg in $(basename "$lib")): it would crash on" >&2
      echo "       machines whose VM does not grant AMX. Delete $cache and check SYNTRA_LLAMA_CMAKE_ARGS." >&2
      exit 1
    fi
  done
fi

# Uninstall first: pip would keep another build of the same version as "already satisfied".
"$py" -m pip uninstall -q -y llama-cpp-python >/dev/null 2>&1 || true
"$py" -m pip install -q "$wheel"
printf '%s\n' "$key" >"$marker"
echo "llama-cpp-python $version installed (portable build $key: $cmake_args)"

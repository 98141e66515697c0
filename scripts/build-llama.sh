#!/usr/bin/env bash
# Build llama-cpp-python portably and install it into the given Python environment.
#   scripts/build-llama.sh .venv/bin/python
#   scripts/build-llama.sh .venv/bin/python --variant avx512   # a faster build's libraries, beside the package
#   scripts/build-llama.sh .venv/bin/python --variant amx      # the same with AMX (needs clang; Intel Xeon 4th gen on)
#
# pip's default build detects the build machine's CPU (GGML_NATIVE). On a VM whose processor advertises AMX
# but does not grant AMX tile state, every decode of such a build dies with SIGSEGV (general protection
# fault at `ldtilecfg` in libggml-cpu). This script instead:
#   - picks explicit flags: AVX2/FMA/F16C when this CPU has them (nearly every x86-64 server since 2015),
#     plain SSE otherwise; never native detection, AVX-512 or AMX. SYNTRA_LLAMA_CMAKE_ARGS overrides them;
#   - builds the wheel with pip's cache off and keeps it in a folder keyed by version + flags + Python +
#     architecture, so a rebuild with other flags never reuses an earlier (native) build and a reinstall
#     with the same flags takes seconds;
#   - refuses a built library that contains AMX instructions (the amx variant must contain them);
#   - reinstalls when the environment holds a build with other flags (recorded in <venv>/.llama-build).
#
# --variant avx512 builds the same version with AVX-512 (still no AMX) and installs only its shared libraries into
# <venv>/llama-cpp-variants/avx512/lib, with variant.json naming the CPU flags its instructions need. It is built
# only on a CPU that advertises them; the engine loads it only where the CPU advertises them and a smoke decode with
# it passes (syntra_dspy/lm/llamacpp/variants.py), so the environment still runs on any x86-64 host.
set -euo pipefail
py="${1:?usage: $0 PATH/TO/python [--variant avx512]}"
variant=""
build_env=()  # compiler settings of a variant that needs its own (amx)
if [ "${2:-}" = --variant ]; then variant="${3:?usage: $0 PATH/TO/python --variant avx512|amx}"; fi
version="${SYNTRA_LLAMA_CPP_VERSION:-0.3.36}"
arch=$(uname -m)
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { case " $flags " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
venv="$(dirname "$(dirname "$py")")"

if [ -n "$variant" ]; then
  case "$variant" in
    avx512)
      # what -DGGML_AVX512 (f cd vl dq bw), _VBMI, _VNNI and _BF16 compile for, on top of the portable set
      needs="avx2 fma f16c bmi2 avx512f avx512cd avx512vl avx512dq avx512bw avx512vbmi avx512_vnni avx512_bf16"
      cmake_args="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" ;;
    amx)
      # the avx512 set plus AMX's tile and int8 instructions: llama.cpp's AMX kernels (ggml-cpu/amx) multiply the
      # Q4_K/Q6_K weights of the embedded models. Built with clang: GCC 12's _tile_loadconfig tells the compiler it
      # reads 8 bytes of the tile configuration, so the row and column sizes are dropped as dead stores and the first
      # tile instruction dies with SIGILL (experiments/amx_build/). clang 14 spells the feature macros __AMXINT8__ and
      # __AMXTILE__, where llama.cpp tests __AMX_INT8__ and __AMX_TILE__: both are defined for it.
      needs="avx2 fma f16c bmi2 avx512f avx512cd avx512vl avx512dq avx512bw avx512vbmi avx512_vnni avx512_bf16 amx_tile amx_int8 amx_bf16"
      cmake_args="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=ON -DGGML_AMX_INT8=ON -DGGML_AMX_BF16=ON"
      if ! command -v clang >/dev/null 2>&1 || ! command -v clang++ >/dev/null 2>&1; then
        echo "note: the amx build needs clang (e.g. apt-get install clang): skipped (GCC 12 miscompiles AMX's tile setup)"
        exit 0
      fi
      amx_macros="-D__AMX_INT8__=1 -D__AMX_TILE__=1"
      build_env=(CC=clang CXX=clang++ "CFLAGS=$amx_macros" "CXXFLAGS=$amx_macros")
      compiler_version=$(clang --version | head -n 1) ;;
    *) echo "error: unknown variant '$variant' (known: avx512, amx)" >&2; exit 2 ;;
  esac
  for f in $needs; do
    if ! has "$f"; then
      echo "note: this CPU does not advertise $f: the $variant build is skipped (the portable one is used)"
      exit 0
    fi
  done
elif [ -n "${SYNTRA_LLAMA_CMAKE_ARGS:-}" ]; then
  cmake_args="$SYNTRA_LLAMA_CMAKE_ARGS"
elif [ "$arch" = x86_64 ] || [ "$arch" = amd64 ]; then
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
key_lines=("$version" "$cmake_args" "$pyver" "$arch")
# a build with another compiler is another build (the portable and avx512 keys stay as they were)
if [ ${#build_env[@]} -gt 0 ]; then key_lines+=("${build_env[*]}" "${compiler_version:-}"); fi
key=$(printf '%s\n' "${key_lines[@]}" | sha256sum | cut -c1-12)
marker="$venv/.llama-build"
target="$venv/llama-cpp-variants/$variant"
if [ -n "$variant" ]; then
  marker="$target/.key"
  if [ -f "$marker" ] && [ "$(cat "$marker")" = "$key" ] && [ -d "$target/lib" ]; then
    exit 0
  fi
elif [ -f "$marker" ] && [ "$(cat "$marker")" = "$key" ] && "$py" -c 'import llama_cpp' 2>/dev/null; then
  exit 0
fi

cache="${SYNTRA_CACHE_DIR:-$HOME/.cache/syntra-dspy}/wheels/llama-cpp-python-$version-$key"
wheel=$(ls "$cache"/llama_cpp_python-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
  echo "== building llama-cpp-python $version ${variant:-portable} (about 6 minutes on 2 cores, once per flag set) =="
  echo "   CMAKE_ARGS=$cmake_args"
  mkdir -p "$cache.tmp"
  if [ ${#build_env[@]} -gt 0 ]; then echo "   ${build_env[*]}"; fi
  env ${build_env[@]+"${build_env[@]}"} CMAKE_ARGS="$cmake_args" FORCE_CMAKE=1 "$py" -m pip wheel -q --no-deps \
    --no-cache-dir --no-binary llama-cpp-python -w "$cache.tmp" "llama-cpp-python==$version"
  rm -rf "$cache" && mv "$cache.tmp" "$cache"
  printf '%s\n' "$cmake_args" >"$cache/CMAKE_ARGS"
  wheel=$(ls "$cache"/llama_cpp_python-*.whl | head -n 1)
fi

# The wheel holds the shared libraries: check them for AMX tile instructions before installing.
if command -v objdump >/dev/null 2>&1; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  "$py" -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); [z.extract(n, sys.argv[2]) for n in z.namelist() if "libggml-cpu" in n]' "$wheel" "$tmp"
  tiles=0
  for lib in $(find "$tmp" -name 'libggml-cpu*.so*'); do
    # grep -c reads all of objdump's output: with `grep -q`, objdump dies of SIGPIPE after an early match and, under
    # pipefail, the pipeline reads as "no match" (an AMX build passed this check so)
    if [ "$(objdump -d "$lib" | grep -c ldtilecfg || true)" != 0 ]; then
      tiles=1
      if [ "$variant" != amx ]; then
        echo "error: $wheel contains AMX instructions (ldtilecfg in $(basename "$lib")): it would crash on" >&2
        echo "       machines whose VM does not grant AMX. Delete $cache and check SYNTRA_LLAMA_CMAKE_ARGS." >&2
        exit 1
      fi
    fi
  done
  if [ "$variant" = amx ] && [ "$tiles" = 0 ]; then
    echo "error: the amx build in $cache holds no AMX instructions (the compiler did not build llama.cpp's AMX" >&2
    echo "       kernels): it would be the avx512 build under another name. Delete $cache and check clang." >&2
    exit 1
  fi
fi

if [ -n "$variant" ]; then
  rm -rf "$target.tmp" && mkdir -p "$target.tmp"
  "$py" -c 'import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
for n in z.namelist():
    if n.startswith("llama_cpp/lib/") and not n.endswith("/"):
        z.extract(n, sys.argv[2])' "$wheel" "$target.tmp"
  mv "$target.tmp/llama_cpp/lib" "$target.tmp/lib" && rm -rf "$target.tmp/llama_cpp"
  "$py" -c 'import json, sys
name, version, cmake_args, needs, out = sys.argv[1:]
json.dump({"name": name, "llama_cpp_version": version, "cmake_args": cmake_args, "cpu_flags": needs.split()},
          open(out, "w"), indent=2)' "$variant" "$version" "$cmake_args" "$needs" "$target.tmp/variant.json"
  printf '%s\n' "$key" >"$target.tmp/.key"
  rm -rf "$target" && mv "$target.tmp" "$target"
  echo "llama-cpp-python $version $variant libraries installed in $target (used where the CPU runs them)"
  exit 0
fi

# Uninstall first: pip would keep another build of the same version as "already satisfied".
"$py" -m pip uninstall -q -y llama-cpp-python >/dev/null 2>&1 || true
"$py" -m pip install -q "$wheel"
printf '%s\n' "$key" >"$marker"
echo "llama-cpp-python $version installed (portable build $key: $cmake_args)"

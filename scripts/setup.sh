#!/usr/bin/env bash
# Sets up ds4spec in a virtual environment and optionally runs the demo or the test suite.
#
#   scripts/setup.sh install   create .venv, build llama.cpp for this machine, install ds4spec, self-check
#   scripts/setup.sh demo      install, pull the default models, open `ds4spec chat` on them (on a terminal;
#                              otherwise complete a code prompt, so that scripts and CI still work)
#   scripts/setup.sh test      install, pull the models of the default and qwen-drafter pairs, run the whole
#                              test suite (both tiers)
#
# Environment:
#   DS4SPEC_VENV           virtual environment path (default: .venv in the repository)
#   DS4SPEC_PYTHON         interpreter used to create it (default: python3.11, else python3)
#   DS4SPEC_LLAMA_BACKEND  cpu | cuda | metal (default: metal on Apple silicon, cpu elsewhere)
#   DS4SPEC_CPU_FEATURES   x86-64 extensions llama.cpp is built for (Linux): native (default, what /proc/cpuinfo
#                          lists), avx2 (an AVX2-only machine's kernels: avx avx2 fma f16c bmi2), avx512 (avx2 plus
#                          AVX-512 with VNNI and BF16), or a list of /proc/cpuinfo flag names; each must be one
#                          this CPU has
#   DS4SPEC_TORCH_INDEX    a pip index for torch (for example https://download.pytorch.org/whl/cpu)
#   DS4SPEC_CUDA_ARCH      with cuda: the one GPU architecture to build for, as CMake names it (90 for H100/H200,
#                          89 for RTX 40xx, 86 for RTX 30xx, 80 for A100; default: what nvidia-smi reports, else 90)
#   CMAKE_ARGS             extra CMake flags for llama.cpp, appended to the ones chosen here
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${DS4SPEC_VENV:-$ROOT/.venv}"
LLAMA_CPP_PYTHON_VERSION="0.3.36"
TORCH_VERSION="2.13.0"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/ds4spec"

say() { printf '[setup] %s\n' "$*" >&2; }

pick_python() {
    if [[ -n "${DS4SPEC_PYTHON:-}" ]]; then echo "$DS4SPEC_PYTHON"; return; fi
    if command -v python3.11 >/dev/null 2>&1; then echo python3.11; else echo python3; fi
}

# The CPU flags to build for, space-padded: this CPU's, or the subset DS4SPEC_CPU_FEATURES names. The override
# reproduces another machine's kernels (an AVX2-only build runs here; a build for an extension this CPU lacks
# would die at its first evaluation, so that is refused).
cpu_features() {
    local have wanted f
    have=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
    case "${DS4SPEC_CPU_FEATURES:-native}" in
        native) echo "$have"; return ;;
        avx2) wanted="avx avx2 fma f16c bmi2" ;;
        avx512) wanted="avx avx2 fma f16c bmi2 avx512f avx512bw avx512dq avx512vl avx512_vnni avx512_bf16" ;;
        *) wanted="${DS4SPEC_CPU_FEATURES//,/ }" ;;
    esac
    for f in $wanted; do
        if [[ "$have" != *" $f "* ]]; then
            say "DS4SPEC_CPU_FEATURES=$DS4SPEC_CPU_FEATURES names $f, which this CPU does not report (/proc/cpuinfo)"
            return 2
        fi
    done
    echo " $wanted "
}

# CUDA: one architecture keeps the build to tens of minutes on 2 cores (each adds as much again). A toolkit
# without cuBLAS (nvcc alone) gets it from PyPI's nvidia-cublas of the toolkit's version, kept in the cache; with
# no driver library (libcuda), ggml's virtual-memory pool, which links it, is left out.
cuda_cmake_args() {
    local arch version prefix
    command -v nvcc >/dev/null 2>&1 || { say "DS4SPEC_LLAMA_BACKEND=cuda needs the CUDA toolkit (nvcc on PATH)"; return 2; }
    arch="${DS4SPEC_CUDA_ARCH:-}"
    if [[ -z "$arch" ]] && command -v nvidia-smi >/dev/null 2>&1; then
        arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d '. ')"
    fi
    printf -- '-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=%s' "${arch:-90}"
    if ! printf '#include <cublas_v2.h>\n' | nvcc -x cu -E - -o /dev/null >/dev/null 2>&1; then
        version="$(nvcc --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')"
        prefix="$(cublas_prefix "$version")" || return 2
        printf -- ' -DCUDA_cublas_LIBRARY=%s -DCUDA_cublasLt_LIBRARY=%s -DCMAKE_CUDA_FLAGS=-I%s -DCMAKE_CXX_FLAGS=-I%s' \
            "$prefix/lib/libcublas.so" "$prefix/lib/libcublasLt.so" "$prefix/include" "$prefix/include"
    fi
    if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then printf -- ' -DGGML_CUDA_NO_VMM=ON'; fi
}

# cuBLAS's headers and libraries from PyPI's nvidia-cublas wheel for CUDA $1, unpacked once into the cache.
cublas_prefix() {
    local prefix="$CACHE/cublas-$1" tmp lib
    if [[ ! -e "$prefix/include/cublas_v2.h" ]]; then
        say "the CUDA toolkit has no cuBLAS: fetching nvidia-cublas==$1.* from PyPI"
        tmp="$(mktemp -d)"
        python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "nvidia-cublas==$1.*" >&2 || return 2
        rm -rf "$prefix.tmp" && mkdir -p "$prefix.tmp/include" "$prefix.tmp/lib"
        (cd "$tmp" && python3 -m zipfile -e nvidia_cublas-*.whl unpacked) >&2
        cp "$tmp"/unpacked/nvidia/cu*/include/* "$prefix.tmp/include/"
        cp "$tmp"/unpacked/nvidia/cu*/lib/* "$prefix.tmp/lib/"
        for lib in "$prefix.tmp"/lib/*.so.*; do ln -sf "$(basename "$lib")" "${lib%%.so.*}.so"; done
        rm -rf "$tmp" "$prefix" && mv "$prefix.tmp" "$prefix"
    fi
    echo "$prefix"
}

# CMake flags for llama.cpp. The default native build enables every instruction set the CPU
# reports, AMX included, and AMX faults on machines whose kernel does not grant it to the process.
# So we name the x86 extensions we use explicitly and never enable AMX.
llama_cmake_args() {
    local backend="${DS4SPEC_LLAMA_BACKEND:-}"
    if [[ -z "$backend" ]]; then
        if [[ "$(uname -s)" == "Darwin" && "$(uname -m)" == "arm64" ]]; then backend=metal; else backend=cpu; fi
    fi
    local args="-DGGML_NATIVE=OFF"
    case "$backend" in
        metal) args="-DGGML_METAL=ON" ;;
        cuda) args="$args $(cuda_cmake_args)" || exit 2 ;;
        cpu) ;;
        *) say "unknown DS4SPEC_LLAMA_BACKEND=$backend (cpu, cuda or metal)"; exit 2 ;;
    esac
    if [[ "$(uname -s)" == "Linux" && "$(uname -m)" == "x86_64" && -r /proc/cpuinfo ]]; then
        local flags
        flags="$(cpu_features)" || exit 2
        has() { [[ "$flags" == *" $1 "* ]]; }
        has avx && args="$args -DGGML_AVX=ON"
        has avx2 && args="$args -DGGML_AVX2=ON"
        has fma && args="$args -DGGML_FMA=ON"
        has f16c && args="$args -DGGML_F16C=ON"
        has bmi2 && args="$args -DGGML_BMI2=ON"
        if has avx512f && has avx512bw && has avx512dq && has avx512vl; then
            args="$args -DGGML_AVX512=ON"
            has avx512_vnni && args="$args -DGGML_AVX512_VNNI=ON"
            has avx512_bf16 && args="$args -DGGML_AVX512_BF16=ON"
        fi
        has avx_vnni && args="$args -DGGML_AVX_VNNI=ON"
    elif [[ -n "${DS4SPEC_CPU_FEATURES:-}" && "${DS4SPEC_CPU_FEATURES}" != native ]]; then
        say "DS4SPEC_CPU_FEATURES applies to Linux x86-64 only"; exit 2
    fi
    echo "$args ${CMAKE_ARGS:-}"
}

# Builds the llama-cpp-python wheel once per (version, flags) and keeps it in the user cache:
# a rebuild costs minutes, and pip's own cache would hand back a wheel built with other flags.
# The venv remembers which build it holds, so that changing the backend or CPU features reinstalls.
install_llama_cpp() {
    local pip="$VENV/bin/pip" args="$1" key="$2" dir
    dir="$CACHE/wheels/llama-cpp-python-$key"
    if ! ls "$dir"/llama_cpp_python-*.whl >/dev/null 2>&1; then
        local how_long="a few minutes"
        [[ "$args" == *GGML_CUDA=ON* ]] && how_long="tens of minutes on a few cores: CUDA kernels"
        say "building llama-cpp-python $LLAMA_CPP_PYTHON_VERSION with: $args ($how_long)"
        mkdir -p "$dir.tmp"
        CMAKE_ARGS="$args" FORCE_CMAKE=1 "$pip" wheel --no-deps --no-cache-dir --no-binary llama-cpp-python \
            -w "$dir.tmp" "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"
        rm -rf "$dir" && mv "$dir.tmp" "$dir"
    fi
    "$pip" install --no-deps --force-reinstall "$dir"/llama_cpp_python-*.whl >/dev/null
    link_cublas "$args"
    "$pip" install "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" >/dev/null  # its pure-Python dependencies
    printf '%s\n%s\n' "$key" "$args" > "$VENV/llama-cpp-build.txt"
}

# A cuBLAS from the cache (cublas_prefix) is linked beside llama.cpp's libraries, where their RPATH ($ORIGIN)
# finds it, so that loading llama.cpp needs no LD_LIBRARY_PATH.
link_cublas() {
    local lib dest
    lib="$(sed -n 's/.*-DCUDA_cublas_LIBRARY=\([^ ]*\)\/libcublas\.so.*/\1/p' <<<"$1")"
    [[ -n "$lib" ]] || return 0
    dest="$("$VENV/bin/python" -c 'import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec("llama_cpp").origin).parent / "lib")')"
    ln -sf "$lib"/*.so.* "$dest/"
}

install_all() {
    local py
    py="$(pick_python)"
    if [[ ! -x "$VENV/bin/python" ]]; then
        say "creating $VENV with $py"
        "$py" -m venv "$VENV"
    fi
    local pip="$VENV/bin/pip"
    "$pip" install -q --upgrade pip >/dev/null 2>&1 || true
    if ! "$VENV/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
        say "installing torch $TORCH_VERSION"
        if [[ -n "${DS4SPEC_TORCH_INDEX:-}" ]]; then
            "$pip" install -q "torch==$TORCH_VERSION" --index-url "$DS4SPEC_TORCH_INDEX"
        else
            "$pip" install -q "torch==$TORCH_VERSION"
        fi
    fi
    local args key
    args="$(llama_cmake_args)"
    key="$(printf '%s|%s|%s' "$LLAMA_CPP_PYTHON_VERSION" "$args" "$("$VENV/bin/python" -c 'import sys;print(sys.version_info[:2])')" | sha256sum | cut -c1-16)"
    if [[ "$(head -n1 "$VENV/llama-cpp-build.txt" 2>/dev/null)" != "$key" ]] \
        || ! "$VENV/bin/python" -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$LLAMA_CPP_PYTHON_VERSION')" 2>/dev/null; then
        install_llama_cpp "$args" "$key"
    fi
    say "llama.cpp build flags: $args"
    say "installing ds4spec and its dependencies"
    "$pip" install -q -e "$ROOT[test]"
    say "checking that llama.cpp really evaluates tokens"
    "$VENV/bin/ds4spec" doctor
}

# The editor-client test drives a headless Neovim. Install it where apt-get can (quietly, as root or with
# password-less sudo); never fail the set-up over it: without nvim that test is skipped and says why.
install_test_tools() {
    # Real terminals and real editors for the client tests: tmux (chat), Neovim and Vim (editor clients); cmake
    # and a C++ compiler for the llama-server peer the real tier builds.
    local missing=() cmd
    for cmd in tmux:tmux nvim:neovim vim:vim cmake:cmake c++:g++; do
        command -v "${cmd%%:*}" >/dev/null 2>&1 || missing+=("${cmd##*:}")
    done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    local sudo=""
    if ! command -v apt-get >/dev/null 2>&1; then
        say "${missing[*]} not found and no apt-get: the tests that need them will be skipped"; return 0
    fi
    if [[ "$(id -u)" != 0 ]]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; else
            say "${missing[*]} not found and apt-get needs root: the tests that need them will be skipped"; return 0
        fi
    fi
    say "installing ${missing[*]} (apt-get) for the terminal and editor-client tests"
    export DEBIAN_FRONTEND=noninteractive
    if ! { $sudo apt-get install -y -qq "${missing[@]}" || { $sudo apt-get update -qq && $sudo apt-get install -y -qq "${missing[@]}"; }; } \
            >/dev/null 2>&1; then
        say "could not install ${missing[*]}: the tests that need them will be skipped"
    fi
    return 0
}

main() {
    local cmd="${1:-install}"
    shift || true
    case "$cmd" in
        install) install_all ;;
        demo)
            install_all
            "$VENV/bin/ds4spec" models pull default
            if [[ -t 0 && -t 1 ]]; then
                say "opening the chat on the default pair (Enter sends, Ctrl-Q quits, /help lists commands)"
                exec "$VENV/bin/ds4spec" chat "$@"
            fi
            # Not a terminal (a script, CI): the full-screen chat cannot run, the completion demo can.
            say "completing examples/demo.py with the default target (greedy, up to 200 tokens)"
            "$VENV/bin/ds4spec" complete --max-tokens 200 --stats "$@" < "$ROOT/examples/demo.py"
            ;;
        test)
            install_all
            # The real tier runs the default pair, the Qwen-0.5B transformers drafter and the F16 pair (its target
            # and drafter derived from the default pair's files, about a minute).
            "$VENV/bin/ds4spec" models pull default qwen-drafter f16
            install_test_tools
            cd "$ROOT"
            "$VENV/bin/python" -m pytest "$@"
            ;;
        *) say "usage: scripts/setup.sh [install|demo|test] [extra args]"; exit 2 ;;
    esac
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then main "$@"; fi

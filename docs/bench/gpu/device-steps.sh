#!/bin/bash
# Device-side steps for the GPU bench of issue 16 (not part of the product; kept in an ignored folder).
#   gpu.sh take          move the pieces this call carried into /tmp/p
#   gpu.sh setup         unpack libs.tar, put llama.cpp's CUDA build where ds4spec and its llama-server peer find it
#   gpu.sh models        join the model pieces into DS4SPEC_HOME/models
#   gpu.sh bench ARGS    ds4spec bench ARGS, with the environment set
# What travels (run 40): .x/a00 .. a23, the target and SmolLM2 joined and cut by `split -b 50M -d -a 2`, one piece a
# call; .x/libs.tar, llama.cpp's CUDA build (site/llama_cpp/lib/*.so*, bin/llama-server; xz, 30 MB); .x/site2.tar,
# the pure-Python packages that machine lacks and llama_cpp's Python files and dist-info from the CPU wheel. Run 43:
# b00 .. b25, cut at 45M (a 50 MiB piece and the repository came to more than a call's 64 MiB). Run 55: b00 .. b27,
# cut at 42M (the repository had grown to 20 MiB); q00 .. q11 the 0.5B drafter alone, for backend_sampling.py.
# The build (run 55, 39 minutes on 2 cores at nice 19), in the llama-cpp-python 0.3.36 sdist's vendor/llama.cpp, with
# $CUBLAS the cuBLAS that scripts/setup.sh unpacks from PyPI (cublas_prefix):
#   cmake -B build -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON \
#     -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF \
#     -DGGML_CUDA_NO_VMM=ON -DCUDA_cublas_LIBRARY=$CUBLAS/lib/libcublas.so \
#     -DCUDA_cublasLt_LIBRARY=$CUBLAS/lib/libcublasLt.so -DCMAKE_CUDA_FLAGS=-I$CUBLAS/include \
#     -DCMAKE_CXX_FLAGS=-I$CUBLAS/include -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
#     -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF
#   cmake --build build -j2 --target llama-server mtmd
# then build/bin/*.so* (stripped) into site/llama_cpp/lib and build/bin/llama-server into bin, tar | xz: 28 MiB.
# Untracked files travel too: a megabyte of new records left beside the repository made a 42M piece's call too large.
set -u
S=/tmp/s; P=/tmp/p; H=/tmp/h; KEY=gpu-cuda90
mkdir -p $S $P $H/models
cuda_dirs() {
    local d out=""
    for f in libcudart.so.13 libcublas.so.13 libcublasLt.so.13; do
        d="$(find /opt /usr/local /usr/lib -name "$f" -not -path '*/stubs/*' 2>/dev/null | head -n1)"
        [ -n "$d" ] && out="$out:$(dirname "$d")"
    done
    echo "${out#:}"
}
envset() {
    export LD_LIBRARY_PATH="$S/site/llama_cpp/lib:$(cat $S/cuda_dirs)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export PYTHONPATH="$S/site:$PWD" DS4SPEC_HOME=$H PYTHONUNBUFFERED=1
}
ds4() {  # ds4spec with sys.prefix at $S, where the llama-server peer's build record is
    python3 -c "import sys, runpy; sys.prefix = '$S'; sys.argv = ['ds4spec', *sys.argv[1:]]; runpy.run_module('ds4spec', run_name='__main__')" "$@"
}
case "$1" in
take)
    mv .x/[a-z][0-9][0-9] $P/ 2>/dev/null
    echo "pieces: $(ls $P | wc -l) ($(du -sh $P | cut -f1))" ;;
setup)
    [ -e $S/ok ] || { tar xf .x/libs.tar -C $S && mkdir -p $S/site && tar xf .x/site2.tar -C $S/site && touch $S/ok; } || exit 1
    cuda_dirs > $S/cuda_dirs
    echo "cuda libraries: $(cat $S/cuda_dirs)"
    printf '%s\n%s\n' $KEY "-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF" > $S/llama-cpp-build.txt
    mkdir -p ~/.cache/ds4spec/wheels/llama-cpp-python-$KEY/llama-server
    cp $S/bin/llama-server ~/.cache/ds4spec/wheels/llama-cpp-python-$KEY/llama-server/
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -V; nproc
    envset
    ds4 doctor 2>&1 | tail -n 15
    ~/.cache/ds4spec/wheels/llama-cpp-python-$KEY/llama-server/llama-server --version 2>&1 | tail -n 3 ;;
models)
    # The target and SmolLM2 travel as one stream cut into pieces (a00, a01, ...): fewer calls than two files.
    if ls $P/[ab][0-9][0-9] >/dev/null 2>&1; then
        cat $P/[ab][0-9][0-9] > $P/all && rm $P/[ab][0-9][0-9]
        head -c 1117320768 $P/all > $H/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
        tail -c +1117320769 $P/all > $H/models/SmolLM2-135M-Instruct.Q4_1.gguf
        rm $P/all
    fi
    for spec in t:qwen2.5-coder-1.5b-instruct-q4_k_m.gguf d:SmolLM2-135M-Instruct.Q4_1.gguf \
                q:qwen2.5-coder-0.5b-instruct-q4_k_m.gguf; do
        ls $P/${spec%%:*}[0-9][0-9] >/dev/null 2>&1 || continue
        cat $P/${spec%%:*}[0-9][0-9] > $H/models/${spec#*:} && rm $P/${spec%%:*}[0-9][0-9]
    done
    ls -la $H/models ;;
bench)
    shift; envset
    ds4 models list 2>&1 | head -n 12
    ds4 bench "$@" ;;
py)
    shift; envset
    python3 "$@" ;;
*)  echo "usage: gpu.sh take|setup|models|bench ARGS"; exit 2 ;;
esac

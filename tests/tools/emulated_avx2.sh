#!/usr/bin/env bash
# The tests whose oracles pick their kernels by CPU (onnxruntime's MLAS, LiteRT's XNNPACK,
# OpenBLAS), run on an emulated AVX2-only CPU: AMD Zen 2 (qemu's EPYC-Rome: AVX2 and FMA, no
# AVX-512, no VNNI), the kind of machine issue 11 came from. Needs qemu-user
# (apt-get install qemu-user); user-mode emulation, so no root and no VM.
#
#   tests/tools/emulated_avx2.sh              # the pinned subset (about 2 minutes)
#   tests/tools/emulated_avx2.sh tests/quantize -k qdq    # or any pytest arguments
#   EDGELITE_EMULATED_CPU=Haswell tests/tools/emulated_avx2.sh
#
# Before the tests, two checks that the emulation is the CPU it claims to be:
#  - cpuid as the programs see it: AVX2 and FMA, no AVX-512F, no AVX-512 VNNI, no AVX-VNNI;
#  - a canary: onnxruntime's optimized int8 kernels (ORT_ENABLE_ALL) on the shared QDQ digits
#    model are off from ORT_ENABLE_BASIC by several LSB, as on the real CPUs without VNNI
#    (0.0 on this repository's AVX-512 VNNI development machine, 4.2 emulated).
#
# numpy runs on its SSE4.2 baseline here (NPY_DISABLE_CPU_FEATURES=X86_V3): qemu 7.2's vpgatherdd
# returns element 0 in every lane, and numpy's AVX2 loops gather strided float32 with it
# (np.maximum on a column view gives wrong values: NON_MAX_SUPPRESSION's cases failed under
# emulation only). numpy is no oracle; the oracles' libraries use no integer gathers.
# Subprocesses that tests start run natively (no binfmt registration is assumed).
set -euo pipefail
cd "$(dirname "$0")/../.."

cpu="${EDGELITE_EMULATED_CPU:-EPYC-Rome}"
qemu="${QEMU:-qemu-x86_64}"
python="${PYTHON:-$(python -c 'import sys; print(sys.executable)')}"  # not a shim
if ! command -v "$qemu" >/dev/null; then
    echo "needs $qemu (apt-get install qemu-user)" >&2
    exit 2
fi
export NPY_DISABLE_CPU_FEATURES=X86_V3
unset OPENBLAS_CORETYPE         # OpenBLAS chooses from the emulated cpuid, as on the real CPU
export EDGELITE_MODELS="${EDGELITE_MODELS:-$PWD/../shared/models}"

# The model's features that qemu's TCG cannot provide (rdseed, sha-ni, ...: none a program here
# chooses kernels by) are dropped, as TCG drops them anyway: else qemu warns on stderr for every
# thread, and tests that read stderr fail.
missing=$("$qemu" -cpu "$cpu" /bin/true 2>&1 |
          sed -n 's/.*requested feature: [^ ]*\.\([^ .]*\) \[bit.*/-\1/p' | sort -u | paste -sd, -)
model="$cpu${missing:+,$missing}"

emulated() {
    "$qemu" -cpu "$model" "$python" "$@"
}

emulated - <<'EOF'
import os, sys
import numpy as np
from numpy._core._multiarray_umath import __cpu_features__ as has
want = {"AVX2": True, "FMA3": True, "AVX512F": False, "AVX512VNNI": False, "AVXVNNI": False}
seen = {k: bool(has.get(k)) for k in want}
print("emulated CPU features (cpuid):", seen)
if seen != want:
    sys.exit("the emulated CPU is not AVX2-only: " + str(seen))

path = os.path.join(os.environ["EDGELITE_MODELS"], "digits_cnn_int8_qdq.onnx")
if os.path.exists(path):
    import onnxruntime as ort
    x = np.load(os.path.join(os.environ["EDGELITE_MODELS"], "digits.npz"))["x_test"][:32]
    outs = []
    for level in ("ORT_ENABLE_BASIC", "ORT_ENABLE_ALL"):
        so = ort.SessionOptions()
        so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
        so.intra_op_num_threads = 1
        s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        outs.append(np.concatenate([s.run(None, {"image": x[i:i + 1].astype(np.float32)})[0]
                                    for i in range(len(x))]))
    gap = float(np.abs(outs[1] - outs[0]).max())
    print(f"canary: onnxruntime ENABLE_ALL vs BASIC on the QDQ digits model: {gap:.3g}")
    if gap < 0.5:       # its output scale is 0.21: under ~2 LSB means VNNI-like kernels ran
        sys.exit("onnxruntime's int8 kernels look like a VNNI CPU's: the emulation is not faithful")
EOF

if [ $# -eq 0 ]; then
    refs=tests/converter/test_convert_models.py::test_matches_onnxruntime_refs
    set -- tests/test_oracles.py tests/quantize/test_qdq.py tests/quantize/test_qdq_onnxruntime.py \
        tests/interpreter/test_ops.py::test_op_matches_litert_default_kernels \
        "$refs[digits_cnn-litert]" "$refs[syn_mobilenetv2-litert]" "$refs[ppocr_cls-litert]" \
        "$refs[syn_transformer-litert]"
fi
start=$SECONDS
emulated -m pytest -p no:cacheprovider -rfE "$@"
echo "emulated ${cpu}: $((SECONDS - start)) s"

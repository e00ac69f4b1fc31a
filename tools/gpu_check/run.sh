#!/usr/bin/env bash
# Issue 18's GPU check, step 2 (on the device machine, one run): install the carried wheels
# beside the image's python3 (no network there), make NVIDIA's OpenCL visible to the ICD loader,
# record the device (name, version, extensions: cl_khr_fp16 or not), then the delegate on the GPU
# at fp32 and fp16 against edgelite's numpy path and LiteRT on the CPU (benchmarks/bench_opencl.py:
# latency, max error over max |ref|, start-up, kernel launches), every shared float model.
# Writes $OUT/gpu_check.json and $OUT/gpu_check.md. GPU_CHECK_DEVICE=cpu runs it on PoCL here.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/gpu_check_out}"
mkdir -p "$OUT"
device="${GPU_CHECK_DEVICE:-gpu}"
export PYTHONUNBUFFERED=1
venv="${GPU_CHECK_VENV:-}"    # an environment that has everything already (a dry run here)
if [ -z "$venv" ]; then
    venv=/tmp/gpu-check-venv
    python3 -m venv --system-site-packages "$venv"
    "$venv/bin/python" -m pip install -q --no-index --no-deps .device/wheels/*.whl 2>&1 | tail -3
fi
if [ "$device" = gpu ] && [ ! -e /etc/OpenCL/vendors/nvidia.icd ]; then
    lib=$(ldconfig -p | awk '/libnvidia-opencl.so.1/ {print $NF; exit}')
    [ -z "$lib" ] && lib=$(find /usr/local/nvidia /usr/lib* -name 'libnvidia-opencl.so.1' 2>/dev/null | head -1)
    if [ -n "$lib" ]; then
        mkdir -p /etc/OpenCL/vendors && echo "$lib" > /etc/OpenCL/vendors/nvidia.icd
        echo "ICD: $lib"
    else
        echo "no libnvidia-opencl.so.1 found: NVIDIA's OpenCL is not in this image" | tee "$OUT/gpu_check.md"
    fi
fi
"$venv/bin/python" - <<'PY' 2>&1 | tee "$OUT/devices.txt"
import pyopencl as cl
for p in cl.get_platforms():
    for d in p.get_devices():
        print(f"{p.name} | {d.name} | {d.version} | compute units {d.max_compute_units} | "
              f"fp16 {'cl_khr_fp16' in d.extensions} | {d.extensions}")
PY
timeout 480 "$venv/bin/python" benchmarks/bench_opencl.py --models .device/models --device "$device" \
    --precision fp32,fp16 --seconds 1 --json "$OUT/gpu_check.json" 2>&1 | tee "$OUT/gpu_check.md"

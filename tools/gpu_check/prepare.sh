#!/usr/bin/env bash
# Issue 18's GPU check, step 1 (here, on the development machine): put what the device machine
# needs into .device/ (git-ignored; the device tool's `carry`): edgelite's wheel, wheels of
# pyopencl and LiteRT for its Python (3.12: its image's python3; numpy and flatbuffers are there),
# and the shared float models. About 50 MiB of the tool's 64 MiB limit.
#   bash tools/gpu_check/prepare.sh [PYTHON_VERSION]      # then, on the device machine:
#   run(command="bash tools/gpu_check/run.sh", carry=[".device"], timeout_s=540)
set -euo pipefail
cd "$(dirname "$0")/../.."
py="${1:-3.12}"
models="${EDGELITE_MODELS:-../shared/models}"
rm -rf .device && mkdir -p .device/wheels .device/models
tmp=$(mktemp -d)
cp "$(python3 -m tests.wheel "$tmp")" .device/wheels/ && rm -rf "$tmp"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$py" \
    --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    -d .device/wheels "pyopencl>=2024.1" "ai-edge-litert==2.3.0" pytools platformdirs siphash24
for m in mobilenet_v2 mp_face_detection mp_hand_landmark digits_cnn; do
    cp "$models/$m.tflite" .device/models/
done
du -sh .device

"""The OpenCL device: which one, its context and queue, and compiled programs, shared per process.

One `Device` per OpenCL device: every delegate (and every test) on that device shares its
context, queue and programs. Programs are built once per (source, precision, defines) and cached
on disk by pyopencl (the binary) and PoCL (the per-kernel code), so a second start of a model
builds nothing.
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path

from ..base import DelegateError

HERE = Path(__file__).resolve().parent
_DEVICES: dict = {}  # (platform name, device name, index) -> Device


def _import_cl():
    try:
        import pyopencl as cl
    except ImportError as e:
        raise DelegateError(
            "the opencl delegate needs pyopencl: pip install 'edgelite[opencl]' (and an OpenCL "
            "driver; pip install pocl-binary-distribution gives a CPU one)") from e
    return cl


def _all_devices(cl) -> list:
    try:
        platforms = cl.get_platforms()
    except Exception as e:  # pyopencl raises LogicError / RuntimeError with no ICD at all
        raise DelegateError(f"no OpenCL platform found ({e}): install an OpenCL driver (pip "
                            "install pocl-binary-distribution gives a CPU one; NVIDIA needs "
                            "/etc/OpenCL/vendors/nvidia.icd)") from e
    devices = []
    for p in platforms:
        try:
            devices.extend(p.get_devices())
        except Exception:
            continue
    if not devices:
        raise DelegateError("OpenCL platforms found (" + ", ".join(p.name for p in platforms)
                            + ") but no device on any of them")
    return devices


def _describe(devices) -> str:
    return "; ".join(f"{i}: {d.name} ({d.platform.name})" for i, d in enumerate(devices))


def choose(cl, want=None):
    """The device for option `want`: None (PYOPENCL_CTX if set, else a GPU, else the first),
    "gpu" / "cpu", an index into the list of all devices, "platform:device" as PYOPENCL_CTX,
    or part of a device name."""
    devices = _all_devices(cl)
    if want is None:
        want = os.environ.get("PYOPENCL_CTX") or None
    if want is None:
        gpus = [d for d in devices if d.type & cl.device_type.GPU]
        return (gpus or devices)[0]
    text = str(want).strip()
    kinds = {"gpu": cl.device_type.GPU, "cpu": cl.device_type.CPU,
             "accelerator": cl.device_type.ACCELERATOR}
    if text.lower() in kinds:
        found = [d for d in devices if d.type & kinds[text.lower()]]
        if found:
            return found[0]
    elif ":" in text:
        p, _, d = text.partition(":")
        try:
            platform = cl.get_platforms()[int(p or 0)]
            return platform.get_devices()[int(d or 0)]
        except (ValueError, IndexError):
            pass
    elif text.isdigit() and int(text) < len(devices):
        return devices[int(text)]
    else:
        found = [d for d in devices if text.lower() in d.name.lower()]
        if found:
            return found[0]
    raise DelegateError(f"no OpenCL device matches {want!r}; devices: {_describe(devices)}")


class Device:
    """A context and in-order queue on one device, and its compiled programs."""

    def __init__(self, cl, device):
        from .pocl_cpu import fix_target_cpu
        self.cl = cl
        self.device = device
        self.pocl_cpu = fix_target_cpu(device)
        self.context = cl.Context([device])
        self.queue = cl.CommandQueue(self.context)
        self.name = device.name.strip()
        self.has_fp16 = "cl_khr_fp16" in device.extensions
        self.is_cpu = bool(device.type & cl.device_type.CPU)
        self.programs: dict = {}
        self.builds = 0  # programs built (from source or pyopencl's binary cache) here

    def program(self, name: str, defines: dict):
        """The program of `<name>.cl` (after `common.cl`) built with `defines`, once."""
        key = (name, tuple(sorted(defines.items())))
        prog = self.programs.get(key)
        if prog is None:
            source = "".join(f"#define {k} {v}\n" for k, v in sorted(defines.items()))
            source += (HERE / "common.cl").read_text() + (HERE / f"{name}.cl").read_text()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # compiler chatter, not errors
                try:
                    prog = self.cl.Program(self.context, source).build(
                        options=["-cl-mad-enable", "-cl-no-signed-zeros"])
                except self.cl.RuntimeError as e:
                    raise DelegateError(f"OpenCL program {name}.cl {defines} failed to build "
                                        f"on {self.name}: {e}") from e
            self.builds += 1
            self.programs[key] = prog
        return prog


def open_device(want=None) -> Device:
    cl = _import_cl()
    device = choose(cl, want)
    key = (device.platform.name, device.name, device.int_ptr)
    dev = _DEVICES.get(key)
    if dev is None:
        dev = _DEVICES[key] = Device(cl, device)
    return dev

"""The public training flavors the emulator offers (GET /v2/{project_id}/training-job-flavors), the region it serves
and the fake credentials of its Airflow connection.

``modelarts.vm.cpu.2u`` and ``modelarts.vm.cpu.8u`` are the API reference's own examples ("Obtaining the Training Job
Flavors", https://support.huaweicloud.com/intl/en-us/api-modelarts/ShowTrainingJobFlavors.html); the GPU and Ascend
ids are ones public examples use. The real list differs by region and changes: a client should read it from the
API rather than hard-code it, which is what this list lets a test check.
"""

from __future__ import annotations

from typing import Any

#: The region the emulator serves (``match.location`` of ``service: modelarts`` faults; events' +08:00 offset).
DEFAULT_REGION = "cn-north-4"
#: Fake credentials of :meth:`~..server.Emulator.modelarts_connection` (AK: 20 characters, SK: 40, project: 32 hex).
FAKE_ACCESS_KEY = "EMULATORAK0000000000"
FAKE_SECRET_KEY = "EmulatorSecretKey00000000000000000000000"
FAKE_PROJECT_ID = "0e9f1c2b3a4d5e6f708192a3b4c5d6e7"


def _flavor(flavor_id: str, name: str, kind: str, *, cores: int, memory_gb: int, max_num: int,
            gpu: tuple[int, str, str] | None = None, npu: tuple[int, str, str] | None = None,
            arch: str = "x86") -> dict[str, Any]:
    info: dict[str, Any] = {"max_num": max_num, "cpu": {"arch": arch, "core_num": cores},
                            "memory": {"size": memory_gb, "unit": "GB"}}
    if gpu:
        info["gpu"] = {"unit_num": gpu[0], "product_name": gpu[1], "memory": gpu[2]}
    if npu:
        info["npu"] = {"unit_num": str(npu[0]), "product_name": npu[1], "memory": npu[2]}
    return {"flavor_id": flavor_id, "flavor_name": name, "flavor_type": kind, "max_num": max_num,
            "billing": {"code": flavor_id, "unit_num": 1}, "flavor_info": info, "attributes": {}}


FLAVORS: tuple[dict[str, Any], ...] = (
    _flavor("modelarts.vm.cpu.2u", "Computing CPU(2U) instance", "CPU", cores=2, memory_gb=8, max_num=1),
    _flavor("modelarts.vm.cpu.8u", "Computing CPU(8U) instance", "CPU", cores=8, memory_gb=32, max_num=16),
    _flavor("modelarts.p3.large.public", "GPU: 1*NVIDIA-V100(32GB) | CPU: 8 vCPUs 64GB", "GPU", cores=8,
            memory_gb=64, max_num=16, gpu=(1, "NVIDIA-V100", "32GB")),
    _flavor("modelarts.vm.gpu.t4u8", "GPU: 1*NVIDIA-T4(16GB) | CPU: 8 vCPUs 32GB", "GPU", cores=8, memory_gb=32,
            max_num=16, gpu=(1, "NVIDIA-T4", "16GB")),
    _flavor("modelarts.bm.gpu.v100", "GPU: 8*NVIDIA-V100(32GB) | CPU: 72 vCPUs 512GB", "GPU", cores=72,
            memory_gb=512, max_num=64, gpu=(8, "NVIDIA-V100", "32GB")),
    _flavor("modelarts.kat1.xlarge.public", "Ascend: 1*Ascend 910(32GB) | ARM: 24 vCPUs 96GB", "Ascend",
            cores=24, memory_gb=96, max_num=16, npu=(1, "Ascend-910", "32GB"), arch="arm"),
    _flavor("modelarts.bm.npu.arm.8snt9b2.d", "Ascend: 8*ascend-snt9b2(64GB) | ARM: 192 vCPUs 1536GB", "Ascend",
            cores=192, memory_gb=1536, max_num=64, npu=(8, "ascend-snt9b2", "64GB"), arch="arm"),
)


def flavor(flavor_id: str) -> dict[str, Any] | None:
    """The catalogue entry of ``flavor_id``, or None."""
    return next((f for f in FLAVORS if f["flavor_id"] == flavor_id), None)


def accelerators(entry: dict[str, Any] | None) -> int:
    """GPUs or NPUs per node of a flavor (``MA_NUM_GPUS``): 0 for a CPU flavor or an unknown (pool) flavor."""
    if not entry:
        return 0
    info = entry["flavor_info"]
    return int((info.get("gpu") or {}).get("unit_num") or (info.get("npu") or {}).get("unit_num") or 0)

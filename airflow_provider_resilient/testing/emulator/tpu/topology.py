"""Which TPU slices the emulated Cloud TPU API offers, and how many worker VMs (hosts) each has.

Written from the Cloud TPU documentation (system architecture and the per-version pages), on its own: the
provider validates accelerator types with its own table (``specs.tpu``), and a test can only catch a
mistake in one of them if they do not share code. A name the platform does not offer is refused, as
``CreateNode`` refuses it, instead of building a slice no one can buy.

* v2 and v3 count TensorCores, 8 per host: v2-8 up to v2-512, v3-8 up to v3-2048 (a pod), in the sizes the
  documentation lists.
* v4 and v5p count TensorCores too (2 per chip, 4 chips per host): any multiple of 8 from 8 up to the largest
  slice (v4-8192: 4096 chips; v5p-17920: 8960 chips), one host per 8.
* v5e (``v5litepod-N``) and v6e (``v6e-N``) count chips: 1, 4 and 8 chips run on one host; the larger slices
  listed (16 up to 256) use 4-chip hosts.
"""

from __future__ import annotations

import re

_NAME_RE = re.compile(r"^(?P<family>v2|v3|v4|v5p|v5litepod|v5e|v6e)-(?P<size>[1-9][0-9]*)$")
#: Fixed slice sizes offered (TensorCores for v2/v3, chips for v5e/v6e) -> hosts.
_LISTED: dict[str, dict[int, int]] = {
    "v2": {8: 1, 32: 4, 128: 16, 256: 32, 512: 64},
    "v3": {8: 1, 32: 4, 64: 8, 128: 16, 256: 32, 512: 64, 1024: 128, 2048: 256},
    "v5litepod": {1: 1, 4: 1, 8: 1, 16: 4, 32: 8, 64: 16, 128: 32, 256: 64},
    "v6e": {1: 1, 4: 1, 8: 1, 16: 4, 32: 8, 64: 16, 128: 32, 256: 64},
}
_LISTED["v5e"] = _LISTED["v5litepod"]
#: The largest slice of the families sized in multiples of 8 TensorCores.
_LARGEST = {"v4": 8192, "v5p": 17920}


def worker_count(accelerator_type: str) -> int:
    """Worker VMs of ``accelerator_type`` (e.g. 4 for ``v4-32``).

    Raises:
        ValueError: a name the platform does not offer (unknown family, or a size it does not sell).
    """
    match = _NAME_RE.match(accelerator_type or "")
    if not match:
        raise ValueError(f"{accelerator_type!r} is not a TPU accelerator type (e.g. 'v4-8', 'v5litepod-16')")
    family, size = match["family"], int(match["size"])
    if family in _LISTED:
        if size in _LISTED[family]:
            return _LISTED[family][size]
        raise ValueError(f"{accelerator_type!r}: {family} slices come in sizes {sorted(_LISTED[family])}")
    if size % 8 or size > _LARGEST[family]:
        raise ValueError(f"{accelerator_type!r}: {family} slices are multiples of 8 TensorCores up to "
                         f"{family}-{_LARGEST[family]}")
    return size // 8


def chips_per_host(accelerator_type: str) -> int:
    """TPU chips on each worker VM (the device files an emulated VM shows): 4 per host on v2, v3 (8 TensorCores,
    2 per chip), v4 and v5p; on v5e / v6e a single-host slice has all its chips (1, 4 or 8), larger ones 4 per
    host.

    Raises:
        ValueError: as :func:`worker_count`.
    """
    hosts = worker_count(accelerator_type)
    family, size = accelerator_type.rsplit("-", 1)
    return int(size) // hosts if family in ("v5litepod", "v5e", "v6e") else 4


__all__ = ["chips_per_host", "worker_count"]

"""How many worker VMs (hosts) a TPU accelerator type has. The one table of it.

v2, v3, v4 and v5p types count TensorCores (v2/v3) or chips x 2 (v4, v5p): 8 per host, so
``v4-8`` has 1 worker VM, ``v4-16`` 2, ``v4-32`` 4. v5e (``v5litepod-N``) and v6e (``v6e-N``) count chips:
up to 8 chips fit one host (``v5litepod-8``: 1 VM), larger slices use 4-chip hosts (``v5litepod-16``: 4).
"""

from __future__ import annotations

import re

_TYPE_RE = re.compile(r"^(?P<family>v2|v3|v4|v5p|v5litepod|v5e|v6e)-(?P<size>\d+)$")


def worker_count(accelerator_type: str) -> int:
    """Worker VMs of ``accelerator_type``, e.g. 4 for ``v4-32``.

    Raises:
        ValueError: for a name that is not a TPU accelerator type (``v4-12`` is not one either).
    """
    match = _TYPE_RE.match(accelerator_type or "")
    if not match:
        raise ValueError(f"{accelerator_type!r} is not a TPU accelerator type like 'v4-8' or 'v5litepod-16'")
    family, size = match["family"], int(match["size"])
    if family in ("v5litepod", "v5e", "v6e"):
        if size in (1, 4, 8):
            return 1
        if size % 4 == 0 and size >= 16:
            return size // 4
    elif size % 8 == 0 and size >= 8:
        return size // 8
    raise ValueError(f"{accelerator_type!r} is not a TPU slice size Google offers")

"""vCPU and memory of the EC2 instance types we know, for template nodes of empty groups.

CA §1.1: scale-from-zero has no live node to copy, so the template's capacity comes from the
instance type (then `.../node-template/resources/<r>` tags override it). The simulator sizes its
Nodes from the same table, so both sides agree on what a `m5.large` holds.
"""

from __future__ import annotations

GiB = 2**30

# instance type -> (vCPU, memory GiB)
INSTANCE_TYPES: dict[str, tuple[int, int]] = {
    "t3.medium": (2, 4), "t3.large": (2, 8), "t3.xlarge": (4, 16),
    "m5.large": (2, 8), "m5.xlarge": (4, 16), "m5.2xlarge": (8, 32), "m5.4xlarge": (16, 64),
    "c5.large": (2, 4), "c5.xlarge": (4, 8), "c5.2xlarge": (8, 16), "c5.4xlarge": (16, 32),
    "r5.large": (2, 16), "r5.xlarge": (4, 32), "r5.2xlarge": (8, 64),
}


def instance_capacity(instance_type: str) -> tuple[int, int] | None:
    """(cpu_milli, memory_bytes) of one instance of the type, or None if we do not know it."""
    known = INSTANCE_TYPES.get(instance_type)
    if known is None:
        return None
    vcpu, gib = known
    return vcpu * 1000, gib * GiB


__all__ = ["INSTANCE_TYPES", "instance_capacity"]

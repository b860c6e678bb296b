"""vCPU, memory and GPUs of the EC2 instance types we know, for template nodes of empty groups.

CA §1.1: scale-from-zero has no live node to copy, so the template's capacity comes from the
instance type (then `.../node-template/resources/<r>` tags override it). The simulator sizes its
Nodes from the same table, so both sides agree on what a `m5.large` holds.
"""

from __future__ import annotations

from kube_elevator.tasks.core.quantity import GiB

# instance type -> (vCPU, memory GiB)
INSTANCE_TYPES: dict[str, tuple[int, int]] = {
    "t3.medium": (2, 4), "t3.large": (2, 8), "t3.xlarge": (4, 16),
    "m5.large": (2, 8), "m5.xlarge": (4, 16), "m5.2xlarge": (8, 32), "m5.4xlarge": (16, 64),
    "c5.large": (2, 4), "c5.xlarge": (4, 8), "c5.2xlarge": (8, 16), "c5.4xlarge": (16, 32),
    "r5.large": (2, 16), "r5.xlarge": (4, 32), "r5.2xlarge": (8, 64),
    # GPU families (NVIDIA): CA's cloudprovider/aws/ec2_instance_types.go
    "p3.2xlarge": (8, 61), "p3.8xlarge": (32, 244), "p3.16xlarge": (64, 488),
    "p4d.24xlarge": (96, 1152),
    "g4dn.xlarge": (4, 16), "g4dn.2xlarge": (8, 32), "g4dn.4xlarge": (16, 64),
    "g4dn.12xlarge": (48, 192),
    "g5.xlarge": (4, 16), "g5.2xlarge": (8, 32), "g5.12xlarge": (48, 192),
    "g5.48xlarge": (192, 768),
}

# instance type -> NVIDIA GPUs (`nvidia.com/gpu`), as CA's ec2_instance_types.go `GPU`; CA's
# buildNodeFromTemplate puts it in the template's capacity. Types not listed have none.
INSTANCE_GPUS: dict[str, int] = {
    "p3.2xlarge": 1, "p3.8xlarge": 4, "p3.16xlarge": 8, "p4d.24xlarge": 8,
    "g4dn.xlarge": 1, "g4dn.2xlarge": 1, "g4dn.4xlarge": 1, "g4dn.12xlarge": 4,
    "g5.xlarge": 1, "g5.2xlarge": 1, "g5.12xlarge": 4, "g5.48xlarge": 8,
}


def instance_capacity(instance_type: str) -> tuple[int, int] | None:
    """(cpu_milli, memory_bytes) of one instance of the type, or None if we do not know it."""
    known = INSTANCE_TYPES.get(instance_type)
    if known is None:
        return None
    vcpu, gib = known
    return vcpu * 1000, gib * GiB


def instance_gpus(instance_type: str) -> int:
    """NVIDIA GPUs of one instance of the type (0 for CPU-only and unknown types)."""
    return INSTANCE_GPUS.get(instance_type, 0)


__all__ = ["INSTANCE_GPUS", "INSTANCE_TYPES", "instance_capacity", "instance_gpus"]

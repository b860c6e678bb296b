"""This process's name among the replicas: its leader-election identity and its User-Agent.

As client-go's users make it (kube-controller-manager, the Cluster Autoscaler's newer releases),
the host name, which in a pod is the pod's name, then a suffix that no other process shares. Here
the suffix says which process it is: its mark (pid namespace, pid and start time,
`tasks.core.process_owner`) and the kernel's boot id. A process restarted on the same host (a
laptop, a VM's systemd unit) can then tell that the Lease's holder is a process that is gone, and
take the Lease at once instead of waiting out its lease (client-go waits: it cannot tell). The
Kubernetes clients send the identity in their User-Agent, so an API server's audit log says
which replica made a call.
"""

from __future__ import annotations

import functools
import uuid
from pathlib import Path

from kube_elevator.tasks.core.process_owner import PROC, host_name, lives, mark_of, parse_mark


@functools.cache
def boot_id(proc: Path = PROC) -> str:
    """The kernel's id of this boot: two machines given one host name (both in their initial
    pid namespace, whose number every kernel shares) differ by it. Without /proc, a random id,
    so no other process's identity is ever taken for one of this host's."""
    try:
        return (proc / "sys" / "kernel" / "random" / "boot_id").read_text().strip()
    except OSError:
        return str(uuid.uuid4())


@functools.cache
def process_identity() -> str:
    """`host/pidns:pid:start_bootid` (the host part as `process_owner.host_name` writes it)."""
    return f"{mark_of()}_{boot_id()}"


def holder_gone(identity: str, proc: Path = PROC) -> bool:
    """Whether `identity` names a process of this host (this host name, pid namespace and boot)
    that is no longer running: nothing can renew its Lease. False for anything else: another
    host's, another container's, a process that lives, an identity not written as ours."""
    mark_text, _, boot = identity.rpartition("_")
    mark = parse_mark(mark_text)
    return (mark is not None and mark.start is not None and boot == boot_id(proc)
            and mark.host == host_name(proc) and not lives(mark, proc))


def user_agent() -> str:
    return f"kube-elevator ({process_identity()})"

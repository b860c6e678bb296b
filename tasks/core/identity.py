"""This process's name among the replicas: its leader-election identity and its User-Agent.

As client-go's users make it (kube-controller-manager, the Cluster Autoscaler's newer releases):
the host name, which in a pod is the pod's name, and a random suffix, so two processes on one
host, or a restarted one, are never taken for each other. The Kubernetes clients send it in
their User-Agent, so an API server's audit log says which replica made a call.
"""

from __future__ import annotations

import functools
import socket
import uuid


@functools.cache
def process_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def user_agent() -> str:
    return f"kube-elevator ({process_identity()})"

"""kube-elevator: flows."""

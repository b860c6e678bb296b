"""kube-elevator: fakes."""

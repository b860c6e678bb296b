"""kube-elevator: tasks."""

"""The pod autoscalers: the Watermark Pod Autoscaler (wpa/) and the memory-utilization autoscaler."""

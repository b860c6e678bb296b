"""cluster_autoscaler"""

"""load_aware"""

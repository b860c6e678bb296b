"""escalator"""

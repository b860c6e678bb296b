"""Tuning: what `elevator tune` searches and how it compares configurations."""

"""Their own flows."""

"""Their own tasks."""

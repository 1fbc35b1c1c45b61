"""The scheduler stage (see README)."""

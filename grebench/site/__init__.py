"""The site stage (see README)."""

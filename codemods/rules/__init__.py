"""One rule per module."""

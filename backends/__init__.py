"""colc.backends."""

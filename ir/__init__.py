"""colc.ir."""

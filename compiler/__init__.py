"""colc.compiler."""

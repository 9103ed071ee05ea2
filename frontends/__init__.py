"""colc.frontends."""

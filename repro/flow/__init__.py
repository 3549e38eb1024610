"""flow stage."""

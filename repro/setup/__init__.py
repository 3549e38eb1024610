"""setup stage."""

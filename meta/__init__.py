"""meta package."""

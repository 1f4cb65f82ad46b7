"""The package version (one place; setup.cfg reads the same number)."""

__version__ = "0.1.0"

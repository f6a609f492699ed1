"""The package version, importable without loading the package."""

__version__ = "0.1.0"

"""slime-trace-widget: record, load, explore and share slime rollout traces in Jupyter."""

__version__ = "0.1.0"

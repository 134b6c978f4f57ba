"""skillaudit: which skills in an agent's skill library help, and which quietly hurt."""

__version__ = "0.1.0"

"""xtune: autotuning of the constants that decide a system's performance."""

__version__ = "0.1.0"

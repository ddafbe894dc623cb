"""SLO files: the schema (`schema.py`) and the loader with file:line:field errors (`loader.py`)."""

from xtune.config.loader import ConfigError, load, load_text
from xtune.config.schema import SloFile

__all__ = ["ConfigError", "SloFile", "load", "load_text"]

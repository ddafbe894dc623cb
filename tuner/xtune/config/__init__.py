"""SLO files: the schema (`schema.py`) and the loader with file:line:field errors (`loader.py`);
hosts files (`hosts.py`)."""

from xtune.config.hosts import HostsFile
from xtune.config.loader import ConfigError, load, load_hosts, load_text
from xtune.config.schema import SloFile

__all__ = ["ConfigError", "HostsFile", "SloFile", "load", "load_hosts", "load_text"]

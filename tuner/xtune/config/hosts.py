"""Hosts files: the hosts `xtune run --hosts FILE` runs trials on, each reached through its bridge.

hosts:
  - name: bench1
    bridge: tcp://10.0.0.5:7207      # xrtd-bridge's endpoint on the host
    keys: /var/lib/xtune/hosts/bench1  # client.key, client.pub and the bridge's server.pub
    netns: bench1                    # optional: the benchmark runs inside this namespace
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from xtune.config.schema import Strict


class Host(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$")
    bridge: str = Field(pattern=r"^tcp://[^\s]+:[0-9]{1,5}$")
    keys: Path
    netns: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{1,64}$")


class HostsFile(Strict):
    hosts: list[Host] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> HostsFile:
        names = [h.name for h in self.hosts]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"host names must be unique: {dup} repeated")
        return self

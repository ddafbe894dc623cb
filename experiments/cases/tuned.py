"""TuneD profiles as values: Debian's `tuned` package's tuned.conf files, with their include= chain.

tuned-adm is not used: it talks to the tuned daemon over D-Bus and the daemon expects systemd,
neither of which these hosts run. So the profile's own files are read and its `[sysctl]` values
applied through xrtd (like every other contender). `>N` values (tuned: "at least N") become
max(default, N). What is not applied is listed with the reason: conditional sections
(`uname_regex`/`cpuinfo_regex` that do not match this host), and the plugins that are not sysctls
(`[cpu]` governors, `[disk]` readahead, `[vm]` transparent hugepages, `[bootloader]`).
"""

from __future__ import annotations

import configparser
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path

from cases.profiles import Contender, add, scope

TUNED = Path("/usr/lib/tuned")


@dataclass
class TunedProfile:
    name: str
    files: list[str] = field(default_factory=list)  # the include chain, base first
    sysctl: dict[str, str] = field(default_factory=dict)
    skipped: list[dict[str, str]] = field(default_factory=list)


def _read(path: Path) -> configparser.ConfigParser:
    conf = configparser.ConfigParser(interpolation=None, strict=False)
    conf.optionxform = str  # type: ignore[assignment,method-assign]  # sysctl keys are case-sensitive
    try:
        text = path.read_text()
    except OSError as e:
        raise FileNotFoundError(f"{path}: {e.strerror} (is Debian's `tuned` package installed?)") from None
    conf.read_string(text, source=str(path))
    return conf


def _matches(section: configparser.SectionProxy, variables: dict[str, str]) -> bool:
    def expand(text: str) -> str:
        return re.sub(r"\$\{(\w+)\}", lambda m: variables.get(m.group(1), m.group(0)), text)

    if "uname_regex" in section and not re.search(expand(section["uname_regex"]), platform.machine()):
        return False
    if "cpuinfo_regex" in section:
        return re.search(expand(section["cpuinfo_regex"]), Path("/proc/cpuinfo").read_text()) is not None
    return True


def read_profile(name: str, root: Path = TUNED) -> TunedProfile:
    """The profile's sysctls after its include chain (a child's value wins)."""
    profile = TunedProfile(name)
    _merge(profile, name, root, seen=set())
    return profile


def _merge(profile: TunedProfile, name: str, root: Path, seen: set[str]) -> None:
    if name in seen:
        raise ValueError(f"tuned profile {name}: include loop through {sorted(seen)}")
    seen.add(name)
    path = root / name / "tuned.conf"
    conf = _read(path)
    for parent in conf.get("main", "include", fallback="").split(","):
        if parent.strip():
            _merge(profile, parent.strip(), root, seen)
    profile.files.append(str(path))
    variables = dict(conf["variables"]) if conf.has_section("variables") else {}
    for section in conf.sections():
        if section in ("main", "variables"):
            continue
        body = conf[section]
        plugin = body.get("type", section)
        if plugin == "sysctl" and _matches(body, variables):
            for key, value in body.items():
                if key not in ("type", "uname_regex", "cpuinfo_regex", "replace", "devices"):
                    profile.sysctl[key] = value.strip().strip('"')
            continue
        reason = (
            "its condition does not match this host"
            if plugin == "sysctl"
            else f"plugin [{plugin}] is not a sysctl"
        )
        for key, value in body.items():
            profile.skipped.append(
                {"file": str(path), "section": section, "key": key, "value": value, "reason": reason}
            )


def contender(name: str, server_netns: str, root: Path = TUNED) -> Contender:
    """The profile's sysctls as a contender (see the module's docstring for what is left out)."""
    profile = read_profile(name, root)
    out = Contender(f"tuned-{name}", " <- ".join(reversed(profile.files)))
    out.notes = (
        "tuned-adm not used (it needs the tuned daemon over D-Bus and systemd): "
        "the profile's tuned.conf [sysctl] values applied through xrtd"
    )
    for key, text in profile.sysctl.items():
        at_least = text.startswith(">")
        values = [int(x) for x in text.lstrip(">").split()]
        if at_least:
            where = scope(key, server_netns)
            if where is not None and len(where.fields) == len(values):
                values = [max(v, d) for v, d in zip(values, where.fields, strict=True)]
        add(out, key, values, server_netns)
    out.not_applicable += [
        {"key": f"[{s['section']}] {s['key']}", "value": s["value"], "reason": s["reason"]}
        for s in profile.skipped
    ]
    return out

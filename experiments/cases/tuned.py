"""TuneD profiles as values: Debian's `tuned` package's tuned.conf files, with their include= chain.

tuned-adm is not used: it talks to the tuned daemon over D-Bus and the daemon expects systemd,
neither of which these hosts run. So the profile's own files are read and its `[sysctl]` values
applied through xrtd (like every other contender). `>N` values (tuned: "at least N") become
max(default, N). A case with a block device of its own also gets the `[disk]` plugin's
`readahead` (KiB, or 512-byte sectors with an ` s` suffix, as tuned's plugin_disk reads it) and
`elevator` on that device's queue (read_ahead_kb, scheduler), as tuned would on a loop device
(it tunes every non-removable disk without a parent bus, unless `devices=` names others).
What is not applied is listed with the reason: conditional sections (`uname_regex`/`cpuinfo_regex`
that do not match this host), the plugins that are neither (`[cpu]` governors, `[vm]` transparent
hugepages, `[bootloader]`), other `[disk]` options (apm, spindown, ...) and every `[disk]` value
where the case has no device.
"""

from __future__ import annotations

import configparser
import fnmatch
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path

from cases.profiles import Contender, add, scope, sysfs_choices, sysfs_value

TUNED = Path("/usr/lib/tuned")
DISK_ATTRIBUTES = {"readahead": "read_ahead_kb", "elevator": "scheduler"}  # [disk] option -> queue file
CONDITIONS = ("type", "uname_regex", "cpuinfo_regex", "replace", "devices")


@dataclass
class TunedProfile:
    name: str
    files: list[str] = field(default_factory=list)  # the include chain, base first
    sysctl: dict[str, str] = field(default_factory=dict)
    disk: list[dict[str, str]] = field(default_factory=list)  # file, section, key, value, devices
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
                if key not in CONDITIONS:
                    profile.sysctl[key] = value.strip().strip('"')
            continue
        if plugin == "disk" and _matches(body, variables):
            devices = body.get("devices", "*")
            for key, value in body.items():
                if key not in CONDITIONS:
                    where = {"file": str(path), "section": section, "devices": devices}
                    profile.disk.append({**where, "key": key, "value": value})
            continue
        reason = (
            "its condition does not match this host"
            if plugin in ("sysctl", "disk")
            else f"plugin [{plugin}] is not a sysctl"
        )
        for key, value in body.items():
            profile.skipped.append(
                {"file": str(path), "section": section, "key": key, "value": value, "reason": reason}
            )


def _names(device: str, devices: str) -> bool:
    """Whether tuned's `devices=` list (globs, `!` excludes) takes `device`."""
    globs = [g.strip() for g in devices.split(",") if g.strip()]
    if any(g.startswith("!") and fnmatch.fnmatch(device, g[1:]) for g in globs):
        return False
    return any(not g.startswith("!") and fnmatch.fnmatch(device, g) for g in globs)


def _disk(out: Contender, option: dict[str, str], device: str | None) -> None:
    """One [disk] option on `device`'s queue, or the reason it is not applied."""
    key, text = option["key"], option["value"].strip()
    reason = None
    if device is None:
        reason = "plugin [disk]: the case has no block device of its own"
    elif key not in DISK_ATTRIBUTES:
        reason = f"[disk] {key}: no queue attribute this case sets for it"
    elif not _names(device, option["devices"]):
        reason = f"devices={option['devices']} does not take {device}"
    if reason is not None:
        out.not_applicable.append({"key": f"[{option['section']}] {key}", "value": text, "reason": reason})
        return
    assert device is not None
    target = f"/sys/block/{device}/queue/{DISK_ATTRIBUTES[key]}"
    if key == "elevator":
        choices = sysfs_choices(target) or []
        if text not in choices:
            out.not_applicable.append(
                {"key": target, "value": text, "reason": f"not a scheduler of this queue ({choices})"}
            )
            return
        out.settings[target] = text
        return
    number, _, unit = text.lstrip(">").partition(" ")
    if not number.isdigit():
        out.not_applicable.append({"key": target, "value": text, "reason": "not a number of KiB"})
        return
    kib = int(number) // 2 if unit.startswith("s") else int(number)
    current = sysfs_value(target)
    out.settings[target] = max(kib, current) if text.startswith(">") and isinstance(current, int) else kib


def contender(
    name: str, server_netns: str | None, root: Path = TUNED, device: str | None = None
) -> Contender:
    """The profile's sysctls (and [disk] values on `device`) as a contender (see the module's
    docstring for what is left out)."""
    profile = read_profile(name, root)
    out = Contender(f"tuned-{name}", " <- ".join(reversed(profile.files)))
    out.notes = (
        "tuned-adm not used (it needs the tuned daemon over D-Bus and systemd): "
        "the profile's tuned.conf [sysctl] values applied through xrtd"
        + (f", its [disk] readahead/elevator on {device}'s queue" if device else "")
    )
    for key, text in profile.sysctl.items():
        at_least = text.startswith(">")
        values = [int(x) for x in text.lstrip(">").split()]
        if at_least:
            where = scope(key, server_netns)
            if where is not None and len(where.fields) == len(values):
                values = [
                    max(v, d) if isinstance(d, int) else v  # words: add() lists the key as not applicable
                    for v, d in zip(values, where.fields, strict=True)
                ]
        add(out, key, values, server_netns)
    for option in profile.disk:
        _disk(out, option, device)
    out.not_applicable += [
        {"key": f"[{s['section']}] {s['key']}", "value": s["value"], "reason": s["reason"]}
        for s in profile.skipped
    ]
    return out

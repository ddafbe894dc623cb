"""Contenders as sysctl and sysfs values: where each applies, and which of them this kernel cannot take.

A setting is one sysctl field (`net.ipv4.tcp_rmem[2]`) and an integer, or a sysfs attribute
(`/sys/block/loop0/queue/read_ahead_kb`) and an integer or one of the attribute's choices
(`mq-deadline` of `scheduler`). net.* keys apply in the server's namespace when the kernel keeps
them per namespace, else host-wide; other keys host-wide. A key the kernel does not have, a value
count that does not match the key's, a key that holds words (`net.ipv4.tcp_congestion_control`), or a
host value the knob table's int64 cannot hold makes the setting not applicable, listed with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from xtune.config import load
from xtune.host import netns

INT64_MAX = 2**63 - 1
# Pairs the kernel keeps one of: writing either zeroes the other, and the bytes one refuses 0. So a
# bytes value whose original is 0 (the ratio in force) cannot be written back, and a ratio of 0
# with no bytes value leaves the kernel no dirty-page threshold at all.
DIRTY_PAIRS = {"vm.dirty_bytes": "vm.dirty_ratio", "vm.dirty_background_bytes": "vm.dirty_background_ratio"}


@dataclass
class Contender:
    name: str
    source: str
    settings: dict[str, int | str] = field(default_factory=dict)  # target -> value
    # Compiled-in constants set in the running server through SIE (perf_const.py): knob -> value.
    perf_consts: dict[str, int] = field(default_factory=dict)
    not_applicable: list[dict[str, object]] = field(default_factory=list)
    notes: str = ""
    observed: bool = False  # measured with xobserve running (observed.py): not a tuning contender


@dataclass(frozen=True)
class Scope:
    netns: str | None  # a namespace name, None for the host
    fields: list[int | str]  # the key's current values (its defaults): numbers, or words


def is_sysfs(target: str) -> bool:
    return target.startswith("/sys/")


def sysfs_value(path: str) -> int | str | None:
    """A sysfs attribute's integer, or its selected choice (`none [mq-deadline] kyber`), or None
    when it cannot be read as either."""
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    chosen = re.search(r"\[([^\]\s]+)\]", text)
    if chosen:
        return chosen.group(1)
    return int(text) if re.fullmatch(r"-?\d+", text) else None


def sysfs_choices(path: str) -> list[str] | None:
    """An enumerated attribute's choices (the words of `none [mq-deadline] kyber`), else None."""
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    return [w.strip("[]") for w in text.split()] if "[" in text else None


def key_of(target: str) -> tuple[str, int | None]:
    m = re.fullmatch(r"(.+)\[(\d+)\]", target)
    return (m.group(1), int(m.group(2))) if m else (target, None)


def scope(key: str, server_netns: str | None) -> Scope | None:
    """Where `key` lives for the server and its values there, or None when this kernel lacks it."""
    places = ([server_netns] if server_netns and key.startswith("net.") else []) + [None]
    for ns in places:
        text = netns.sysctl(ns, key)
        if text is not None:
            return Scope(ns, [int(x) if re.fullmatch(r"-?\d+", x) else x for x in text.split()])
    return None


def add(contender: Contender, key: str, values: list[int], server_netns: str | None) -> None:
    """The settings of `key` = `values`, or the reason they do not apply here."""
    where = scope(key, server_netns)
    reason = None
    if where is None:
        reason = "this kernel has no such sysctl"
    elif len(where.fields) != len(values):
        reason = f"the kernel's key has {len(where.fields)} fields, the profile gives {len(values)}"
    elif any(isinstance(v, str) for v in where.fields):
        reason = f"the kernel's key holds words ({' '.join(map(str, where.fields))}), the profile numbers"
    elif any(not 0 <= v <= INT64_MAX for v in where.fields if isinstance(v, int)):
        reason = "the host's value does not fit the knob table's int64"
    elif key in DIRTY_PAIRS and where.fields == [0]:
        reason = (
            f"the host's 0 means {DIRTY_PAIRS[key]} is in force, and the kernel refuses a write of 0:"
            " the original could not be put back"
        )
    elif key in DIRTY_PAIRS.values() and values == [0]:
        bytes_key = next(b for b, r in DIRTY_PAIRS.items() if r == key)
        reason = (
            f"0 leaves the kernel no dirty-page threshold unless {bytes_key} is written after it"
            " (writing the ratio zeroes it), and a contender's values go in one unordered transaction"
        )
    if reason is not None:
        contender.not_applicable.append({"key": key, "value": " ".join(map(str, values)), "reason": reason})
        return
    if len(values) == 1:
        contender.settings[key] = values[0]
    else:
        contender.settings.update({f"{key}[{i}]": v for i, v in enumerate(values)})


def in_namespace(target: str, server_netns: str | None) -> bool:
    """Whether the sysctl `target` is the server namespace's own (the kernel keeps it per
    namespace), not the host's."""
    where = scope(key_of(target)[0], server_netns)
    return where is not None and where.netns is not None


def limit(contender: Contender, within: Callable[[str], bool], why: str) -> None:
    """Move the sysctl settings whose target is not `within` the case's reach to not_applicable."""
    for target in [t for t in contender.settings if not is_sysfs(t) and not within(t)]:
        value = contender.settings.pop(target)
        contender.not_applicable.append({"key": target, "value": str(value), "reason": why})


def from_slo_file(path: Path, server_netns: str | None, variables: dict[str, str]) -> Contender:
    """A static SLO file's profile (the paper's tables) as a contender. Only its knobs' targets and
    its profile are read, so a variable of its benchmark that this case lacks (Table V's file runs
    the kv case's redis-benchmark, with REQUESTS; the db case reads it too) gets a placeholder."""
    unused = set(re.findall(r"\$\{(\w+)\}", path.read_text())) - set(variables)
    slo = load(path, {**variables, **dict.fromkeys(unused, "0")})
    assert slo.policy.profile is not None
    by_key: dict[str, dict[int | None, int]] = {}
    for knob in slo.knobs:
        key, index = key_of(knob.target)
        by_key.setdefault(key, {})[index] = int(slo.policy.profile[knob.name])
    contender = Contender(slo.name, str(path))
    for key, fields in by_key.items():
        add(
            contender,
            key,
            [fields[i] for i in sorted(fields, key=lambda i: -1 if i is None else i)],
            server_netns,
        )
    return contender

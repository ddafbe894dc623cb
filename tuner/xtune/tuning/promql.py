"""Benchmark metrics read from Prometheus: the application's exporter, scraped, queried per run.

After a run, the server is asked for `min(timestamp(up))` until every target it scrapes has a
sample taken after the run ended (`up` is written with each scrape's samples, in the same commit),
so the exporter has been read once the load was over; then each query is evaluated at that moment.
`$__range` in a query reaches back from there to the last scrape of every target before the run
started (a Prometheus duration in ms), so a counter has a sample on each side of the run however
short it was; `$__run_seconds` is the run's own length: `increase(x[$__range]) / $__run_seconds`
is a rate over the run. Queries are evaluated at the last of the scrapes after the run, so a range
ends on a sample (no extrapolation past it). A query whose answer is not one finite number fails
the run (never a zero).
"""

from __future__ import annotations

import math
import time
from typing import Any

import requests

from xtune.config.schema import BenchMetric, PrometheusSource


class QueryFailed(RuntimeError):
    """Prometheus gave no single finite number for a query (which metric, which query, why)."""


def _api(source: PrometheusSource, query: str, at: float) -> dict[str, Any]:
    url = source.url.rstrip("/") + "/api/v1/query"
    try:
        reply = requests.get(url, params={"query": query, "time": f"{at:.3f}"}, timeout=source.timeout_s)
    except requests.RequestException as e:
        raise QueryFailed(f"Prometheus at {source.url} did not answer: {e}") from None
    try:
        doc = reply.json()
    except ValueError:
        raise QueryFailed(f"Prometheus at {source.url} answered HTTP {reply.status_code}, not JSON") from None
    if not isinstance(doc, dict) or doc.get("status") != "success":
        why = doc.get("error", doc) if isinstance(doc, dict) else doc
        kind = doc.get("errorType", "error") if isinstance(doc, dict) else "error"
        raise QueryFailed(f"Prometheus refused {query!r}: {kind}: {why}")
    data = doc.get("data")
    if not isinstance(data, dict):
        raise QueryFailed(f"Prometheus's answer to {query!r} has no data")
    return data


def single_value(data: dict[str, Any], query: str) -> float:
    """The one number of an instant query's answer: a scalar, or a vector of exactly one series."""
    kind, result = data.get("resultType"), data.get("result")
    if kind == "scalar":
        sample = result
    elif kind == "vector" and isinstance(result, list):
        if not result:
            raise QueryFailed(f"{query!r} matched no series (was the exporter scraped during the run?)")
        if len(result) > 1:
            labels = [r.get("metric", {}) for r in result[:3]]
            raise QueryFailed(
                f"{query!r} gave {len(result)} series ({labels}...): aggregate them to one (sum, max, ...)"
            )
        sample = result[0].get("value")
    else:
        raise QueryFailed(f"{query!r} gave a {kind}: an instant vector of one series or a scalar is needed")
    try:
        text = sample[1]  # type: ignore[index]
        value = float(text)
    except (TypeError, ValueError, IndexError):
        raise QueryFailed(f"{query!r}: sample {sample!r} holds no number") from None
    if not math.isfinite(value):
        raise QueryFailed(f"{query!r} is {text} (not finite)")
    return value


def _latest_scrape(source: PrometheusSource, at: float, of: str = "min") -> float | None:
    """The earliest (`min`) or last (`max`) of the targets' latest scrapes at `at` (None: no
    target scraped by then)."""
    data = _api(source, f"{of}(timestamp(up))", at)
    result = data.get("result") if data.get("resultType") == "vector" else None
    return float(result[0]["value"][1]) if result else None


def scraped_after(source: PrometheusSource, end_s: float) -> float:
    """Wait until every target has been scraped after `end_s` (unix seconds); the last of those
    scrapes (a query evaluated there ends on a sample, not between two)."""
    deadline = time.monotonic() + source.timeout_s
    while True:
        now = time.time()
        oldest = _latest_scrape(source, now)
        if oldest is None:
            raise QueryFailed(f"Prometheus at {source.url} scrapes no target")
        if oldest >= end_s:
            last = _latest_scrape(source, now, "max")
            return now if last is None else last
        if time.monotonic() > deadline:
            raise QueryFailed(
                f"Prometheus at {source.url} had not scraped every target {source.timeout_s:g} s after"
                " the run ended (a target down, or a scrape interval above timeout_s?)"
            )
        time.sleep(0.1)


def query_metrics(
    source: PrometheusSource, metrics: list[BenchMetric], start_s: float, end_s: float
) -> dict[str, float]:
    """Each `promql` metric of one run as `bench.<name>` (QueryFailed names the metric)."""
    try:
        at = scraped_after(source, end_s)
        before = _latest_scrape(source, start_s)
    except QueryFailed as e:
        raise QueryFailed(f"metric {', '.join(m.name for m in metrics)}: {e}") from None
    since = start_s if before is None else min(before, start_s)
    # +1 ms: the sample at `since` itself lies inside the range
    span = {"$__range": f"{math.ceil((at - since) * 1000) + 1}ms", "$__run_seconds": f"{end_s - start_s:.6f}"}
    values = {}
    for m in metrics:
        assert m.promql is not None
        query = m.promql
        for name, text in span.items():
            query = query.replace(name, text)
        try:
            values[f"bench.{m.name}"] = single_value(_api(source, query, at), query) * m.scale
        except QueryFailed as e:
            raise QueryFailed(f"metric {m.name}: {e}") from None
    return values

"""`xtune dashboard`: a live web page over the trial store, xrtd and (optionally) Prometheus.

`state.py` gathers one JSON snapshot, `server.py` serves it with the page in `static/`, and
`grafana.py` generates the Grafana dashboard (`grafana/xtune.json`) for the exporter's metrics.
"""

"""Helpers shared by the tests and the benchmarks (no pytest here): an xrtd launcher (xrtd.py), a veth
pair between network namespaces (netpair.py), frame capture while a command runs (observe.py),
percentiles and confidence intervals (stats.py); a free TCP port is `xtune.host.services.free_port`."""

"""Several hosts: xrtd reached through its bridge, simulated hosts, and the coordinator."""

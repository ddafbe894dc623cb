"""`xtune drill`: on-demand probes on a running process, refined from a function to its callees."""

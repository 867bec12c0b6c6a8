"""The pure core: decisions from typed views of the cluster, no I/O and no clock."""

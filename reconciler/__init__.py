"""The reconciler process: watches the cluster and sets managed CPU limits per node."""

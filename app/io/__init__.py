"""Talking to the world: the API server transport, list/watch, kubeconfig, serving and logging."""

"""Kubernetes client setup and a thin JSON transport shared by the webhook and the reconciler."""

"""The Kubernetes API backend: list/watch into the ledger (reflector), bind (backend), client setup (connect)."""

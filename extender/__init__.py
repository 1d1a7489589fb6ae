"""The extender service: wire format, ledger, cluster backends, HTTP app, CLI."""

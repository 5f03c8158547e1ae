"""What every emitter of device code shares: how a user-controlled name reaches generated source (names.py)."""

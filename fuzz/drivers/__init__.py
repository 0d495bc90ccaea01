"""Drivers of the sans-IO connections, shared by a protocol's client and server targets."""

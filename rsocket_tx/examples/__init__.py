"""Example services, ready to serve with ``twistd rsocket --responder`` or ``rsocket-tx serve``."""

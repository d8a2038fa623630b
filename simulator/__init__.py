"""The simulator's Django project: settings (profiles), ASGI routing and URLs."""

"""The simulator's Django app: models, services, views, consumers and the run worker."""

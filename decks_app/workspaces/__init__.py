"""The deck folders the simulator serves: `served` (the workspace, its path jail and deck
listing) and `probe` (loads a deck that imports Python in a child process, for the listing).

This package imports nothing itself: `probe` runs as `python -m` in a child process before
Django is set up."""

"""Data the stack records and reads back: deploy logs (MCAP) and, later, datasets."""

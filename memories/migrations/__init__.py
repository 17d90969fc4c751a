"""The schema of memories, migration by migration (generated; data migrations written by
hand say what they do)."""

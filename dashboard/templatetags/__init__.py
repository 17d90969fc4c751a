"""Template filters for the dashboard's pages (safe links, category names and colours)."""

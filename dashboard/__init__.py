"""The browser dashboard where a person tends their own store: browse, search, curate,
preview what Claude loads, act on suggestions, manage connected clients, export and
import. Pages and forms only: every change goes through memories.services."""

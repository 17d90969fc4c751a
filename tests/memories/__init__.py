"""Tests of the memories app: the services, the rules under them (ranking, payload,
validation) and the commands."""

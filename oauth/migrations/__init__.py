"""The schema of the oauth app (label taproot_oauth), migration by migration."""

"""Running clusters locally: daemons as processes, the launcher, and the admin CLI."""

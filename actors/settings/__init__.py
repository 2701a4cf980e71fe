"""Settings: the config file read into frozen objects, and reloaded while troupe runs."""

"""Workflows: tools (`workflow_<name>`) made of steps that call other tools through a client's
own Session. definitions and templating read them, the keeper and the dir watcher keep them
current, tools serves them in the catalogue, runner runs one call."""

"""Events: the EventBus actor and the past-tense events it fans out."""

"""Provider actors: one per discovery source, each answering Discover with a ProviderResult."""

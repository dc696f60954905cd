"""meta.model: the vocabulary every part shares (specs, resources, durations, ids, states, kinds, nodes, errors); imports nothing else of the project."""

"""quickmoe.bench: benchmarks run by `quickmoe bench ...`."""

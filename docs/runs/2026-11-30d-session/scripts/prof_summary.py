"""Summarise a cProfile file: top functions by cumulative and by own time (device-side helper for call scripts)."""
import pstats, sys
p = pstats.Stats(sys.argv[1])
p.sort_stats("cumulative").print_stats(int(sys.argv[2]) if len(sys.argv) > 2 else 60)
p.sort_stats("tottime").print_stats(30)

"""Start-up plumbing: the early start, CUDA pre-initialisation, the StartupReport (torch-free at import)."""
